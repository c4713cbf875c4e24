"""``isic19``: Fed-ISIC2019, dermoscopy images of 8 lesion classes from 6 centres.

Source: FLamby (owkin/FLamby, ``flamby/datasets/fed_isic2019``). The ISIC 2019 challenge
training data consists of

* ``ISIC_2019_Training_Input/<image>.jpg``,
* ``ISIC_2019_Training_GroundTruth.csv``: ``image,MEL,NV,BCC,AK,BKL,DF,VASC,SCC,UNK``, one-hot,
* ``ISIC_2019_Training_Metadata.csv``: ``image, age_approx, anatom_site_general, lesion_id, sex``,

and FLamby recovers each image's centre with the HAM10000 metadata (``image_id``, ``dataset``):
images without a ``lesion_id`` are dropped; the rest get ``lesion_id[:4]`` followed by the
HAM10000 ``dataset`` of the image (the text ``nan`` when the image is not in HAM10000), mapped
to centre ids by :data:`CENTRE_IDS` (23,247 images in all). The label is the argmax over the
nine ground-truth columns; UNK never occurs, so there are 8 classes.

FLamby's preprocessing (``resize_images.py``) resizes each image so its shorter side is 224 px
(bilinear, aspect ratio kept) and applies Shades-of-Gray colour constancy (power 6); its
loader (``dataset.py``) augments training images and centre-crops 200x200 for testing.
:func:`prepare_isic19` does the centre mapping and the preprocessing, writes the images to
``<out>/images/`` and the split file, with site ``site-<c+1>`` for centre ``c`` and a seeded
train/val/test split per site. :func:`load_site` reads the split file only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
import torch
from PIL import Image
from torchvision.transforms import InterpolationMode, v2
from torchvision.transforms.v2 import functional as TF

from lightyear.data.image_folder import (
    DEFAULT_FRACTIONS,
    load_image_file_site,
    site_names,
    write_classification_split,
)
from lightyear.data.site_data import SiteData

NAME = "isic19"
INPUT_FOLDER = "ISIC_2019_Training_Input"
GROUND_TRUTH = "ISIC_2019_Training_GroundTruth.csv"
METADATA = "ISIC_2019_Training_Metadata.csv"
HAM_METADATA_NAMES = ("HAM10000_metadata", "HAM10000_metadata.csv", "HAM10000_metadata.tab")
GROUND_TRUTH_COLUMNS = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC", "UNK")
CLASSES = GROUND_TRUTH_COLUMNS[:8]
NUM_CLASSES = len(CLASSES)
# FLamby's centre ids, keyed by lesion_id[:4] + str(HAM10000 dataset).
CENTRE_IDS = {
    "BCN_nan": 0,
    "HAM_vidir_molemax": 1,
    "HAM_vidir_modern": 2,
    "HAM_rosendahl": 3,
    "MSK4nan": 4,
    "HAM_vienna_dias": 5,
}
NUM_SITES = len(CENTRE_IDS)
PREPROCESSED_SIZE = 224
CROP_SIZE = 200
JPEG_QUALITY = 75  # Pillow's default, with which FLamby saves its preprocessed images
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
OBTAIN = (
    "download ISIC_2019_Training_Input.zip, ISIC_2019_Training_GroundTruth.csv and "
    "ISIC_2019_Training_Metadata.csv from the ISIC 2019 challenge (challenge.isic-archive.com/data/#2019) "
    "and unzip the images next to the CSVs; see datasets/isic19/README.md"
)
OBTAIN_HAM = (
    "FLamby ships it as flamby/datasets/fed_isic2019/HAM10000_metadata (github.com/owkin/FLamby); "
    "the HAM10000 dataset on Harvard Dataverse (doi:10.7910/DVN/DBW86T) has it as HAM10000_metadata"
)


# ---------------------------------------------------------------- raw files and centres


def read_table(path: str, columns: Sequence[str], what: str, obtain: str) -> pd.DataFrame:
    """A CSV (or tab-separated) table, checked to exist and to have ``columns``."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} not found at {path}: {obtain}")
    frame = pd.read_csv(path, sep=None, engine="python")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks columns {missing}; {what} has columns {', '.join(columns)} ({obtain})")
    return frame


def find_ham_metadata(raw: str, ham_metadata: str | None) -> str:
    """``ham_metadata`` if given, else a HAM10000 metadata file in ``raw``."""
    if ham_metadata:
        return ham_metadata
    for name in HAM_METADATA_NAMES:
        if os.path.isfile(os.path.join(raw, name)):
            return os.path.join(raw, name)
    raise FileNotFoundError(
        f"no HAM10000 metadata given and none of {', '.join(HAM_METADATA_NAMES)} in {raw}: "
        f"pass its path ({OBTAIN_HAM})"
    )


def flamby_centres(metadata: pd.DataFrame, ham: pd.DataFrame) -> pd.DataFrame:
    """Columns ``image, dataset, center`` of every image FLamby keeps (those with a lesion_id).

    ``metadata`` has ``image`` and ``lesion_id`` (ISIC 2019 metadata); ``ham`` has ``image_id``
    and ``dataset`` (HAM10000 metadata). A ``dataset`` value outside :data:`CENTRE_IDS` is an
    error: it means the files are not the ones FLamby's mapping was made for.
    """
    duplicated = ham["image_id"][ham["image_id"].duplicated()]
    if not duplicated.empty:
        raise ValueError(f"the HAM10000 metadata lists image {duplicated.iloc[0]} more than once")
    kept = metadata.loc[metadata["lesion_id"].notna(), ["image", "lesion_id"]]
    kept = kept.assign(prefix=kept["lesion_id"].astype(str).str[:4])
    merged = kept.merge(
        ham.loc[:, ["image_id", "dataset"]].rename(columns={"image_id": "image", "dataset": "ham_dataset"}),
        how="left",
        on="image",
    )
    # FLamby concatenates str(HAM dataset), which is "nan" for images outside HAM10000
    merged["dataset"] = merged["prefix"] + merged["ham_dataset"].astype(object).where(merged["ham_dataset"].notna(), "nan").astype(str)
    unknown = merged.loc[~merged["dataset"].isin(list(CENTRE_IDS)), "dataset"].value_counts()
    if not unknown.empty:
        raise ValueError(
            f"images of unknown origin {dict(unknown)}; FLamby's centres are {', '.join(CENTRE_IDS)} "
            f"(use the ISIC 2019 training metadata and the HAM10000 metadata: {OBTAIN_HAM})"
        )
    merged["center"] = merged["dataset"].map(CENTRE_IDS).astype(int)
    return merged.loc[:, ["image", "dataset", "center"]].reset_index(drop=True)


def ground_truth_labels(ground_truth: pd.DataFrame) -> pd.Series:
    """The class index (0..7) of each image, the argmax over the nine one-hot columns.

    A row that is not one-hot, or whose class is UNK, is an error.
    """
    repeated = ground_truth["image"][ground_truth["image"].duplicated()]
    if not repeated.empty:
        raise ValueError(f"the ground truth lists image {repeated.iloc[0]} more than once")
    onehot = ground_truth.loc[:, list(GROUND_TRUTH_COLUMNS)].to_numpy(dtype=np.float64)
    valid = np.isclose(onehot.sum(axis=1), 1.0) & np.isclose(onehot.max(axis=1), 1.0)
    if not valid.all():
        bad = ground_truth["image"].iloc[int(np.flatnonzero(~valid)[0])]
        raise ValueError(f"ground truth of {bad} is not one-hot over {', '.join(GROUND_TRUTH_COLUMNS)}")
    labels = onehot.argmax(axis=1)
    unk = labels == GROUND_TRUTH_COLUMNS.index("UNK")
    if unk.any():
        raise ValueError(
            f"{int(unk.sum())} images (e.g. {ground_truth['image'].iloc[int(np.flatnonzero(unk)[0])]}) are labelled UNK; "
            "Fed-ISIC2019 has the 8 classes " + ", ".join(CLASSES)
        )
    return pd.Series(labels, index=ground_truth["image"].to_numpy(), name="label")


# ---------------------------------------------------------------- FLamby's preprocessing


def resize_shorter_side(image: Image.Image, size: int = PREPROCESSED_SIZE) -> Image.Image:
    """Resize (bilinear) so the shorter side is ``size``, keeping the aspect ratio (FLamby)."""
    ratio = float(size) / min(image.size)
    return image.resize(tuple(int(side * ratio) for side in image.size), resample=Image.BILINEAR)


def shades_of_gray(pixels: np.ndarray, power: int = 6) -> np.ndarray:
    """Shades-of-Gray colour constancy of an RGB uint8 image, as FLamby's ``color_constancy``.

    Each channel is divided by its power-``power`` mean, scaled so a gray world stays gray.
    The result is clipped to 0..255 (FLamby's cast to uint8 would wrap around instead).
    """
    image = pixels.astype(np.float64)
    illuminant = np.power(np.mean(np.power(image, power), axis=(0, 1)), 1.0 / power)
    norm = np.sqrt(np.sum(illuminant**2))
    if norm == 0:
        return pixels.copy()
    illuminant = illuminant / norm
    with np.errstate(divide="ignore"):
        gain = np.where(illuminant > 0, 1.0 / (illuminant * math.sqrt(3.0)), 0.0)
    return np.clip(np.round(image * gain), 0, 255).astype(np.uint8)


def preprocess_image(source: str, target: str, size: int = PREPROCESSED_SIZE, color_constancy: bool = True) -> None:
    """Read ``source``, resize its shorter side to ``size``, apply colour constancy, save JPEG."""
    with Image.open(source) as image:
        image = resize_shorter_side(image.convert("RGB"), size)
    if color_constancy:
        image = Image.fromarray(shades_of_gray(np.asarray(image)))
    image.save(target, quality=JPEG_QUALITY)


def _preprocess_job(job: tuple[str, str, int, bool]) -> None:
    preprocess_image(*job)


def prepare_isic19(
    raw: str,
    out: str,
    ham_metadata: str | None = None,
    seed: int = 0,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    image_size: int = PREPROCESSED_SIZE,
    color_constancy: bool = True,
    workers: int = 1,
) -> str:
    """Map images to FLamby's centres, preprocess them into ``<out>/images/`` and write the split file.

    ``raw`` holds ``ISIC_2019_Training_Input/`` and the two ISIC CSVs; ``ham_metadata`` is the
    HAM10000 metadata file (looked up in ``raw`` when not given). ``image_size`` is the shorter
    side after resizing; ``workers`` processes resize in parallel. Returns the split file path.
    """
    if not os.path.isdir(raw):
        raise FileNotFoundError(f"ISIC 2019 raw folder {raw} does not exist: {OBTAIN}")
    input_folder = os.path.join(raw, INPUT_FOLDER)
    if not os.path.isdir(input_folder):
        raise FileNotFoundError(f"no image folder {input_folder}: {OBTAIN}")
    if image_size < CROP_SIZE:
        raise ValueError(f"image_size {image_size} is smaller than the {CROP_SIZE}x{CROP_SIZE} crop of the loader")
    ground_truth = read_table(
        os.path.join(raw, GROUND_TRUTH), ("image",) + GROUND_TRUTH_COLUMNS, "the ISIC 2019 ground truth", OBTAIN
    )
    metadata = read_table(os.path.join(raw, METADATA), ("image", "lesion_id"), "the ISIC 2019 metadata", OBTAIN)
    ham = read_table(
        find_ham_metadata(raw, ham_metadata), ("image_id", "dataset"), "the HAM10000 metadata", OBTAIN_HAM
    )

    centres = flamby_centres(metadata, ham)
    unlabelled = centres.loc[~centres["image"].isin(ground_truth["image"]), "image"]
    if not unlabelled.empty:
        raise ValueError(f"{len(unlabelled)} images (e.g. {unlabelled.iloc[0]}) are in {METADATA} but not in {GROUND_TRUTH}")
    labels = ground_truth_labels(ground_truth[ground_truth["image"].isin(centres["image"])])
    centres = centres.assign(label=labels.loc[centres["image"]].to_numpy()).sort_values("image", kind="stable")
    missing = [name for name in centres["image"] if not os.path.isfile(os.path.join(input_folder, f"{name}.jpg"))]
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} of {len(centres)} images are missing from {input_folder}, e.g. {missing[0]}.jpg: {OBTAIN}"
        )

    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    jobs = [
        (os.path.join(input_folder, f"{name}.jpg"), os.path.join(out, "images", f"{name}.jpg"), image_size, color_constancy)
        for name in centres["image"]
    ]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            list(pool.map(_preprocess_job, jobs, chunksize=64))
    else:
        for job in jobs:
            _preprocess_job(job)

    sites = site_names(NUM_SITES)
    per_site = {
        sites[c]: [
            (os.path.join("images", f"{r.image}.jpg"), int(r.label))
            for r in centres[centres["center"] == c].itertuples(index=False)
        ]
        for c in range(NUM_SITES)
    }
    empty = [site for site, items in per_site.items() if not items]
    if empty:
        raise ValueError(f"no images of {', '.join(empty)}; FLamby's ISIC 2019 has images of all six centres")
    return write_classification_split(per_site, out, fractions, seed)


# ---------------------------------------------------------------- FLamby's augmentations


class RandomScale:
    """Resize by a factor drawn from [1 - limit, 1 + limit] with probability ``p`` (albumentations RandomScale)."""

    def __init__(self, limit: float = 0.07, p: float = 0.5):
        self.limit, self.p = limit, p

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        if torch.rand(()) >= self.p:
            return image
        scale = 1.0 + (2.0 * float(torch.rand(())) - 1.0) * self.limit
        height, width = image.shape[-2:]
        return TF.resize(image, [max(1, int(height * scale)), max(1, int(width * scale))], antialias=True)

    def __repr__(self) -> str:
        return f"RandomScale(limit={self.limit}, p={self.p})"


class RandomRotateReflect:
    """Rotate by an angle drawn from [-limit, limit] with probability ``p``, reflecting at the border.

    As albumentations Rotate (border mode reflect-101): the image is reflect-padded, rotated
    bilinearly about its centre and cropped back to its size.
    """

    def __init__(self, limit: float = 50.0, p: float = 0.5):
        self.limit, self.p = limit, p

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        if torch.rand(()) >= self.p:
            return image
        angle = (2.0 * float(torch.rand(())) - 1.0) * self.limit
        height, width = image.shape[-2:]
        cos, sin = abs(math.cos(math.radians(angle))), abs(math.sin(math.radians(angle)))
        pad_x = min(width - 1, math.ceil((width * cos + height * sin - width) / 2) + 1)
        pad_y = min(height - 1, math.ceil((width * sin + height * cos - height) / 2) + 1)
        padded = TF.pad(image, [pad_x, pad_y, pad_x, pad_y], padding_mode="reflect")
        rotated = TF.rotate(padded, angle, interpolation=InterpolationMode.BILINEAR)
        return TF.center_crop(rotated, [height, width])

    def __repr__(self) -> str:
        return f"RandomRotateReflect(limit={self.limit}, p={self.p})"


class RandomBrightnessContrast:
    """``x * alpha + beta`` with alpha in 1 +- contrast, beta in +- brightness, probability ``p``.

    As albumentations RandomBrightnessContrast with brightness by maximum, on images in [0, 1].
    """

    def __init__(self, brightness: float = 0.15, contrast: float = 0.1, p: float = 0.5):
        self.brightness, self.contrast, self.p = brightness, contrast, p

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        if torch.rand(()) >= self.p:
            return image
        alpha = 1.0 + (2.0 * float(torch.rand(())) - 1.0) * self.contrast
        beta = (2.0 * float(torch.rand(())) - 1.0) * self.brightness
        return (image * alpha + beta).clamp(0.0, 1.0)

    def __repr__(self) -> str:
        return f"RandomBrightnessContrast(brightness={self.brightness}, contrast={self.contrast}, p={self.p})"


class RandomFlip:
    """With probability ``p``, flip horizontally, vertically or both, each equally likely (albumentations Flip)."""

    def __init__(self, p: float = 0.5):
        self.p = p

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        if torch.rand(()) >= self.p:
            return image
        choice = int(torch.randint(3, ()))
        if choice in (0, 2):
            image = TF.horizontal_flip(image)
        if choice in (1, 2):
            image = TF.vertical_flip(image)
        return image

    def __repr__(self) -> str:
        return f"RandomFlip(p={self.p})"


class CoarseDropout:
    """With probability ``p``, zero ``holes`` squares of ``size`` pixels at random places (albumentations CoarseDropout)."""

    def __init__(self, holes: int, size: int = 16, p: float = 0.5):
        self.holes, self.size, self.p = holes, size, p

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        if self.holes <= 0 or torch.rand(()) >= self.p:
            return image
        image = image.clone()
        height, width = image.shape[-2:]
        for _ in range(self.holes):
            top = int(torch.randint(max(1, height - self.size + 1), ()))
            left = int(torch.randint(max(1, width - self.size + 1), ()))
            image[..., top : top + self.size, left : left + self.size] = 0.0
        return image

    def __repr__(self) -> str:
        return f"CoarseDropout(holes={self.holes}, size={self.size}, p={self.p})"


_TO_IMAGE = v2.ToImage()
_TO_FLOAT = v2.ToDtype(torch.float32, scale=True)


def _as_plain_float(image) -> torch.Tensor:
    """PIL image -> plain float tensor ``C x H x W`` in [0, 1]."""
    return _TO_FLOAT(_TO_IMAGE(image)).as_subclass(torch.Tensor)


def train_transform(crop_size: int = CROP_SIZE, coarse_dropout_holes: int = 0) -> v2.Compose:
    """FLamby's training augmentation, in FLamby's order, ending in ImageNet normalisation.

    RandomScale(0.07), Rotate(50), RandomBrightnessContrast(0.15, 0.1), Flip, Affine(shear 0.1
    degrees), RandomCrop(crop_size), CoarseDropout (off unless ``coarse_dropout_holes`` > 0;
    FLamby draws 1..8 holes of 16x16 once per dataset), Normalize. Each random step but the
    crop applies with probability 0.5, the albumentations default.
    """
    steps = [
        _as_plain_float,
        RandomScale(0.07),
        RandomRotateReflect(50.0),
        RandomBrightnessContrast(0.15, 0.1),
        RandomFlip(),
        v2.RandomApply([v2.RandomAffine(degrees=0.0, shear=(-0.1, 0.1, -0.1, 0.1))], p=0.5),
        v2.RandomCrop(crop_size, pad_if_needed=True),
    ]
    if coarse_dropout_holes > 0:
        steps.append(CoarseDropout(coarse_dropout_holes, 16))
    steps.append(v2.Normalize(IMAGENET_MEAN, IMAGENET_STD))
    return v2.Compose(steps)


def eval_transform(crop_size: int = CROP_SIZE) -> v2.Compose:
    """FLamby's test transform: centre crop ``crop_size`` and ImageNet normalisation."""
    return v2.Compose([_as_plain_float, v2.CenterCrop(crop_size), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def load_site(
    site: str,
    seed: int = 0,
    data_root: str | None = None,
    crop_size: int = CROP_SIZE,
    augment: bool = True,
    coarse_dropout_holes: int = 0,
) -> SiteData:
    """Site ``site``'s train/val/test sets from the prepared split file.

    Images are ``3 x crop_size x crop_size`` floats (ImageNet-normalised); training images are
    augmented as in FLamby (see :func:`train_transform`; ``augment=False`` gives them the test
    transform), validation and test images are centre-cropped. Labels 0..7 in the order
    MEL, NV, BCC, AK, BKL, DF, VASC, SCC. The split is fixed by the prepare step, so ``seed`` is
    not used here; augmentation draws from torch's random generator.
    """
    if not isinstance(coarse_dropout_holes, int) or coarse_dropout_holes < 0:
        raise ValueError(f"coarse_dropout_holes must be an integer >= 0, got {coarse_dropout_holes!r}")
    test = eval_transform(crop_size)
    train = train_transform(crop_size, coarse_dropout_holes) if augment else test
    return load_image_file_site(NAME, site, data_root, {"train": train, "val": test, "test": test}, NUM_CLASSES, 3, "RGB")
