"""The two-layer CNN of the LIGHTYEAR FEMNIST setup (after LEAF's FEMNIST model)."""

from __future__ import annotations

import torch
from torch import nn


class FemnistCNN(nn.Module):
    """conv(1->32, 5x5) - pool - conv(32->64, 5x5) - pool - fc(3136->512) - dropout(0.5) - fc(classes).

    Convolutions are "same"-padded and pools are 2x2, so a 28x28 input gives 64 x 7 x 7 = 3136
    features. 1.66 M parameters for 62 classes (6.65 MB as float32).
    """

    def __init__(self, num_classes: int = 62, in_channels: int = 1, image_size: int = 28, dropout: float = 0.5):
        super().__init__()
        if image_size % 4:
            raise ValueError(f"FemnistCNN needs an image size divisible by 4, got {image_size}")
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        flat = 64 * (image_size // 4) ** 2
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(flat, 512),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(512, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def build(num_classes: int, in_channels: int = 1, **kwargs) -> FemnistCNN:
    """Registry entry point (see :func:`lightyear.models.build_model`)."""
    return FemnistCNN(num_classes=num_classes, in_channels=in_channels, **kwargs)
