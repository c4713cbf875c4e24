"""Classification data kept as image files listed in a split file (FEMNIST, Camelyon17-WILDS, Fed-ISIC2019): from
per-site ``(image path, label)`` lists to the split file, and from the split file to a site's datasets."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from PIL import Image
from torch.utils.data import Dataset

from lightyear.data import DATA_ROOT_ENV, resolve_data_root
from lightyear.data.site_data import CLASSIFICATION, SiteData
from lightyear.data.split_file import read_split_file, site_rows, write_split_file
from lightyear.data.splits import SPLITS, split_indices

DEFAULT_FRACTIONS = (0.6, 0.2, 0.2)


def site_names(count: int) -> tuple[str, ...]:
    return tuple(f"site-{k + 1}" for k in range(count))


def site_split_seed(seed: int, site_index: int) -> int:
    """The split seed of one site: distinct per site, a pure function of (seed, site index)."""
    state = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(site_index)]).generate_state(1)
    return int(state[0])


def site_split_table(
    samples: Mapping[str, Sequence[tuple[str, int]]], fractions: Sequence[float] = DEFAULT_FRACTIONS, seed: int = 0
) -> pd.DataFrame:
    """The split table of ``samples``, site name -> ``(image path, label)`` list, each site split with its own seed,
    picking positions in the given order; sites, and samples within a split, keep their order."""
    rows = []
    for index, (site, items) in enumerate(samples.items()):
        if len(items) < 3:
            raise ValueError(f"{site} has {len(items)} samples; a site needs at least 3 for train/val/test")
        parts = split_indices(len(items), fractions, seed=site_split_seed(seed, index))
        for split in SPLITS:
            for i in parts[split]:
                image, label = items[int(i)]
                rows.append((site, split, image, int(label)))
    return pd.DataFrame(rows, columns=["site", "split", "image", "label"])


def write_classification_split(
    samples: Mapping[str, Sequence[tuple[str, int]]],
    out: str,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    seed: int = 0,
) -> str:
    return write_split_file(site_split_table(samples, fractions, seed), out, CLASSIFICATION)


def split_summary(path: str) -> str:
    """A table of sample counts per site and split of the split file at ``path``."""
    frame = pd.read_csv(path, dtype={"site": str, "split": str})
    counts = frame.groupby(["site", "split"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[s for s in SPLITS if s in counts.columns])
    order = sorted(counts.index, key=lambda s: (len(s), s))
    counts = counts.loc[order]
    counts["total"] = counts.sum(axis=1)
    lines = [f"wrote {path}: {len(frame)} samples, {len(counts)} sites, {frame['label'].nunique()} labels present"]
    lines += ["  " + line for line in counts.to_string().splitlines()]
    return "\n".join(lines)


def output_folder(out: str | None, dataset: str) -> str:
    """The prepare steps' output folder: ``out``, else ``$LIGHTYEAR_DATA_ROOT/<dataset>``."""
    if out:
        return os.path.abspath(os.path.expanduser(out))
    if not os.environ.get(DATA_ROOT_ENV):
        raise ValueError(
            f"no output folder: pass --out <data_root>/{dataset} or set {DATA_ROOT_ENV} to the data root "
            f"(the prepared data then goes to ${DATA_ROOT_ENV}/{dataset})"
        )
    return os.path.abspath(resolve_data_root(None, dataset))


class ImageFileDataset(Dataset):
    """Image files and integer labels; item ``i`` is ``(transform(image), label)``, the image opened in PIL ``mode``
    and ``transform`` returning a float tensor ``C x H x W``."""

    def __init__(self, paths: Sequence[str], labels: Sequence[int], transform: Callable, mode: str = "RGB"):
        if len(paths) != len(labels):
            raise ValueError(f"{len(paths)} image paths but {len(labels)} labels")
        self.paths = [str(p) for p in paths]
        self.labels = [int(y) for y in labels]
        self.transform = transform
        self.mode = mode

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        path = self.paths[index]
        try:
            with Image.open(path) as image:
                image = image.convert(self.mode)
        except FileNotFoundError as err:
            raise FileNotFoundError(
                f"image {path} listed in the split file is missing; re-run the dataset's prepare step"
            ) from err
        return self.transform(image), self.labels[index]


def load_image_file_site(
    dataset: str,
    site: str,
    data_root: str | None,
    transforms: Mapping[str, Callable],
    num_classes: int,
    in_channels: int,
    mode: str,
) -> SiteData:
    """One site's :class:`ImageFileDataset` sets from the split file; ``transforms`` maps a split to its transform."""
    frame = read_split_file(resolve_data_root(data_root, dataset), CLASSIFICATION, dataset)
    labels = pd.to_numeric(frame["label"], errors="coerce")
    bad = frame[labels.isna() | (labels < 0) | (labels >= num_classes) | (labels % 1 != 0)]
    if not bad.empty:
        raise ValueError(
            f"{dataset} split file has labels outside 0..{num_classes - 1}, e.g. {bad['label'].iloc[0]!r} "
            "(re-run the dataset's prepare step)"
        )
    parts = site_rows(frame, site, dataset)
    sets = {
        split: ImageFileDataset(rows["image"].tolist(), rows["label"].astype(int).tolist(), transforms[split], mode)
        for split, rows in parts.items()
    }
    return SiteData(sets["train"], sets["val"], sets["test"], num_classes, in_channels, CLASSIFICATION)
