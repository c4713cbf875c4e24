"""The data one site holds: its train, validation and test sets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type only: job generation and the commands run without importing torch
    from torch.utils.data import Dataset

CLASSIFICATION = "classification"
SEGMENTATION = "segmentation"


@dataclass
class SiteData:
    """One site's splits; items are ``(image, label)``, or ``(image, mask)`` with an integer ``(H, W)`` mask."""

    train: Dataset
    val: Dataset
    test: Dataset
    num_classes: int
    in_channels: int
    task: str = CLASSIFICATION

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}
