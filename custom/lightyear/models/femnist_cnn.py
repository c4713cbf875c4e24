"""The two-layer CNN of the LIGHTYEAR FEMNIST setup (after LEAF's FEMNIST model)."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from lightyear.algorithms.symmetries import Slot, UnitGroup


class MaxPool2d(nn.MaxPool2d):
    """:class:`torch.nn.MaxPool2d` that, on a CPU without autograd, pools in channels-last order, for which PyTorch's
    CPU kernel is faster; a maximum does not round, so the output is the same to the bit."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.device.type != "cpu" or (torch.is_grad_enabled() and x.requires_grad):
            return super().forward(x)
        return super().forward(x.contiguous(memory_format=torch.channels_last)).contiguous()


class FemnistCNN(nn.Module):
    """conv(1->32, 5x5) - pool - conv(32->64, 5x5) - pool - fc(3136->512) - dropout(0.5) - fc(classes), for 28x28."""

    def __init__(self, num_classes: int = 62, in_channels: int = 1, image_size: int = 28, dropout: float = 0.5):
        super().__init__()
        if image_size % 4:
            raise ValueError(f"FemnistCNN needs an image size divisible by 4, got {image_size}")
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            MaxPool2d(2),
            nn.Conv2d(32, 64, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            MaxPool2d(2),
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


def symmetries(shapes: Mapping[str, tuple], **model_args) -> list[UnitGroup]:
    """The exact symmetries of :class:`FemnistCNN` (``lightyear.algorithms.attacks.reparametrise``): every hidden unit
    admits positive rescaling and permutation, ReLU and max pooling being positively homogeneous and per unit."""
    conv2_units, fc1_units = shapes["features.3.weight"][0], shapes["classifier.1.weight"][0]
    return [
        UnitGroup(
            "conv1",
            shapes["features.0.weight"][0],
            (Slot("features.0.weight", 0, 1), Slot("features.0.bias", 0, 1), Slot("features.3.weight", 1, -1)),
        ),
        UnitGroup(
            "conv2",
            conv2_units,
            (
                Slot("features.3.weight", 0, 1),
                Slot("features.3.bias", 0, 1),
                Slot("classifier.1.weight", 1, -1, view=(fc1_units, conv2_units, -1)),
            ),
        ),
        UnitGroup(
            "fc1",
            fc1_units,
            (Slot("classifier.1.weight", 0, 1), Slot("classifier.1.bias", 0, 1), Slot("classifier.4.weight", 1, -1)),
        ),
    ]
