"""The prepared "mask folder" format of the segmentation datasets (ultrasound, xray): ``images/<name>.png`` (8-bit
grayscale) and ``masks/<name>.png`` (class indices), resized to the LIGHTYEAR paper's 64x64 and listed in the split
file (:mod:`lightyear.data.split_file`); writing and loading."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import torch
from PIL import Image
from torch.utils.data import Dataset

from lightyear.data import resolve_data_root
from lightyear.data.site_data import SEGMENTATION, SiteData
from lightyear.data.split_file import read_split_file, site_rows

IMAGE_DIR = "images"
MASK_DIR = "masks"


def to_gray_uint8(image: np.ndarray) -> np.ndarray:
    """An image ``(H, W)``, ``(H, W, 1|3|4)`` as 8-bit grayscale ``(H, W)`` (Pillow's ITU-R 601-2 luma for colour);
    float images with values in [0, 1] are scaled by 255, other values clipped to [0, 255]."""
    array = np.asarray(image)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise ValueError(f"expected an image of shape (H, W) or (H, W, 3|4), got {array.shape}")
    if array.dtype != np.uint8:
        values = array.astype(np.float64)
        if values.size and np.nanmax(values) <= 1.0:
            values = values * 255.0
        array = np.clip(np.nan_to_num(values), 0, 255).round().astype(np.uint8)
    if array.ndim == 2:
        return array
    mode = "RGB" if array.shape[2] == 3 else "RGBA"
    return np.asarray(Image.fromarray(np.ascontiguousarray(array), mode=mode).convert("L"))


def resize_image(gray: np.ndarray, size: int) -> np.ndarray:
    """Resize an 8-bit grayscale image to ``size`` x ``size`` (bilinear, antialiased when shrinking)."""
    return np.asarray(Image.fromarray(np.ascontiguousarray(gray), mode="L").resize((size, size), Image.BILINEAR))


def resize_mask(mask: np.ndarray, size: int) -> np.ndarray:
    """A binary mask resized to ``size`` x ``size`` as {0, 1}, area-averaged, thresholded at 0.5 (keeps thin lines)."""
    binary = (np.asarray(mask) > 0).astype(np.float32)
    if binary.ndim != 2:
        raise ValueError(f"expected a 2-D mask, got shape {binary.shape}")
    area = np.asarray(Image.fromarray(binary, mode="F").resize((size, size), Image.BOX))
    return (area >= 0.5).astype(np.uint8)


def write_pair(image: np.ndarray, mask: np.ndarray, out: str, name: str, size: int) -> tuple[str, str]:
    """Write ``images/<name>.png`` and its binary ``masks/<name>.png``, resized, under ``out``; return their paths."""
    gray = to_gray_uint8(image)
    if gray.shape != np.asarray(mask).shape[:2]:
        raise ValueError(f"{name}: image {gray.shape} and mask {np.asarray(mask).shape} differ in size")
    rel_image = os.path.join(IMAGE_DIR, f"{name}.png")
    rel_mask = os.path.join(MASK_DIR, f"{name}.png")
    os.makedirs(os.path.join(out, IMAGE_DIR), exist_ok=True)
    os.makedirs(os.path.join(out, MASK_DIR), exist_ok=True)
    Image.fromarray(resize_image(gray, size), mode="L").save(os.path.join(out, rel_image))
    Image.fromarray(resize_mask(mask, size), mode="L").save(os.path.join(out, rel_mask))
    return rel_image, rel_mask


def _read_png(path: str, kind: str, dataset: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{dataset}: the split file lists the {kind} {path}, which does not exist; "
            f"re-run the prepare step (see datasets/{dataset}/README.md)"
        )
    with Image.open(path) as img:
        return np.asarray(img.convert("L"))


class MaskFolderDataset(Dataset):
    """PNG image/mask pairs in memory: float32 ``(1, H, W)`` in [0, 1], int64 ``(H, W)``; bad size or class raises."""

    def __init__(self, images: list[str], masks: list[str], num_classes: int = 2, dataset: str = "segmentation"):
        if len(images) != len(masks):
            raise ValueError(f"{dataset}: {len(images)} images but {len(masks)} masks")
        image_arrays, mask_arrays = [], []
        for image_path, mask_path in zip(images, masks):
            image = _read_png(image_path, "image", dataset)
            mask = _read_png(mask_path, "mask", dataset)
            if image.shape != mask.shape:
                raise ValueError(
                    f"{dataset}: image {image_path} is {image.shape} but its mask {mask_path} is {mask.shape}"
                )
            if image_arrays and image.shape != image_arrays[0].shape:
                raise ValueError(
                    f"{dataset}: {image_path} is {image.shape}, other images are {image_arrays[0].shape}; "
                    "re-run the prepare step so that all samples share one size"
                )
            if mask.size and int(mask.max()) >= num_classes:
                raise ValueError(
                    f"{dataset}: mask {mask_path} has value {int(mask.max())}, "
                    f"expected class indices 0..{num_classes - 1}"
                )
            image_arrays.append(image)
            mask_arrays.append(mask)
        self.paths = list(zip(images, masks))
        if image_arrays:
            self.images = torch.from_numpy(np.stack(image_arrays)).float().div_(255.0).unsqueeze(1)
            self.masks = torch.from_numpy(np.stack(mask_arrays).astype(np.int64))
        else:
            self.images = torch.zeros((0, 1, 0, 0))
            self.masks = torch.zeros((0, 0, 0), dtype=torch.int64)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[index], self.masks[index]


def site_datasets(frame: pd.DataFrame, site: str, dataset: str, num_classes: int = 2) -> dict[str, MaskFolderDataset]:
    """The train/val/test :class:`MaskFolderDataset` of one site of a split table (absolute paths)."""
    parts = site_rows(frame, site, dataset)
    return {
        split: MaskFolderDataset(list(rows["image"]), list(rows["mask"]), num_classes=num_classes, dataset=dataset)
        for split, rows in parts.items()
    }


def load_prepared_site(
    dataset: str, site: str, data_root: str | None, num_classes: int = 2, options: dict | None = None
) -> SiteData:
    """One site of ``<data_root>/<dataset>/split.csv``; ``options``, the job's dataset options, must be empty."""
    if options:
        raise ValueError(
            f"{dataset} takes no dataset options, got {sorted(options)}; its splits are fixed by the prepare step"
        )
    folder = resolve_data_root(data_root, dataset)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"no prepared {dataset} data at {folder}: run python datasets/{dataset}/prepare.py "
            f"(see datasets/{dataset}/README.md for where to obtain the raw data)"
        )
    frame = read_split_file(folder, SEGMENTATION, dataset)
    sets = site_datasets(frame, site, dataset, num_classes)
    return SiteData(sets["train"], sets["val"], sets["test"], num_classes=num_classes, in_channels=1, task=SEGMENTATION)
