"""``isic19``: Fed-ISIC2019 (FLamby, ``flamby/datasets/fed_isic2019``), dermoscopy images of 8 lesion classes from 6
centres (raw layout: datasets/isic19/README.md). :mod:`lightyear.data.isic19.prepare` maps images to FLamby's centres
(centre c is ``site-<c+1>``), preprocesses them and writes the split file; :func:`load_site` reads it with FLamby's
transforms (:mod:`lightyear.data.isic19.augment`)."""

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
    """Site ``site``'s sets from the split file (``seed`` is unused): labels 0..7 as :data:`CLASSES`, training images
    augmented as FLamby's (:func:`train_transform`, torch's generator; ``augment=False``: the test transform)."""
    if not isinstance(coarse_dropout_holes, int) or coarse_dropout_holes < 0:
        raise ValueError(f"coarse_dropout_holes must be an integer >= 0, got {coarse_dropout_holes!r}")
    test = eval_transform(crop_size)
    train = train_transform(crop_size, coarse_dropout_holes) if augment else test
    return load_image_file_site(
        NAME, site, data_root, {"train": train, "val": test, "test": test}, NUM_CLASSES, 3, "RGB"
    )
