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
:func:`~lightyear.data.isic19.prepare.prepare_isic19` does the centre mapping and the preprocessing,
writes the images to ``<out>/images/`` and the split file, with site ``site-<c+1>`` for centre ``c``
and a seeded train/val/test split per site. :func:`load_site` reads the split file only, with
FLamby's augmentations (:mod:`lightyear.data.isic19.augment`).
"""

from __future__ import annotations

from lightyear.data.image_folder import load_image_file_site
from lightyear.data.isic19.augment import eval_transform, train_transform
from lightyear.data.isic19.constants import CROP_SIZE, NAME, NUM_CLASSES
from lightyear.data.site_data import SiteData


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
    return load_image_file_site(
        NAME, site, data_root, {"train": train, "val": test, "test": test}, NUM_CLASSES, 3, "RGB"
    )
