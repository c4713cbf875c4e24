"""FLamby's training augmentations and test transform for Fed-ISIC2019 (torchvision v2)."""

from __future__ import annotations

import math

import torch
from torchvision.transforms import InterpolationMode, v2
from torchvision.transforms.v2 import functional as TF

from lightyear.data.isic19.constants import CROP_SIZE, IMAGENET_MEAN, IMAGENET_STD


class _RandomStep:
    """An albumentations-style step: :meth:`apply` with probability ``p``; the repr lists the settings."""

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return image if torch.rand(()) >= self.p else self.apply(image)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{key}={value}' for key, value in vars(self).items())})"


class RandomScale(_RandomStep):
    """Resize by a factor drawn from [1 - limit, 1 + limit] with probability ``p`` (albumentations RandomScale)."""

    def __init__(self, limit: float = 0.07, p: float = 0.5):
        self.limit, self.p = limit, p

    def apply(self, image: torch.Tensor) -> torch.Tensor:
        scale = 1.0 + (2.0 * float(torch.rand(())) - 1.0) * self.limit
        height, width = image.shape[-2:]
        return TF.resize(image, [max(1, int(height * scale)), max(1, int(width * scale))], antialias=True)


class RandomRotateReflect(_RandomStep):
    """Rotate by an angle from [-limit, limit] with probability ``p``, reflecting at the border (albumentations)."""

    def __init__(self, limit: float = 50.0, p: float = 0.5):
        self.limit, self.p = limit, p

    def apply(self, image: torch.Tensor) -> torch.Tensor:
        angle = (2.0 * float(torch.rand(())) - 1.0) * self.limit
        height, width = image.shape[-2:]
        cos, sin = abs(math.cos(math.radians(angle))), abs(math.sin(math.radians(angle)))
        pad_x = min(width - 1, math.ceil((width * cos + height * sin - width) / 2) + 1)
        pad_y = min(height - 1, math.ceil((width * sin + height * cos - height) / 2) + 1)
        padded = TF.pad(image, [pad_x, pad_y, pad_x, pad_y], padding_mode="reflect")
        rotated = TF.rotate(padded, angle, interpolation=InterpolationMode.BILINEAR)
        return TF.center_crop(rotated, [height, width])


class RandomBrightnessContrast(_RandomStep):
    """``x * alpha + beta``, alpha in 1 +- contrast, beta in +- brightness, with probability ``p`` (albumentations)."""

    def __init__(self, brightness: float = 0.15, contrast: float = 0.1, p: float = 0.5):
        self.brightness, self.contrast, self.p = brightness, contrast, p

    def apply(self, image: torch.Tensor) -> torch.Tensor:
        alpha = 1.0 + (2.0 * float(torch.rand(())) - 1.0) * self.contrast
        beta = (2.0 * float(torch.rand(())) - 1.0) * self.brightness
        return (image * alpha + beta).clamp(0.0, 1.0)


class RandomFlip(_RandomStep):
    """With probability ``p``, flip horizontally, vertically or both, each equally likely (albumentations Flip)."""

    def __init__(self, p: float = 0.5):
        self.p = p

    def apply(self, image: torch.Tensor) -> torch.Tensor:
        choice = int(torch.randint(3, ()))
        if choice in (0, 2):
            image = TF.horizontal_flip(image)
        if choice in (1, 2):
            image = TF.vertical_flip(image)
        return image


class CoarseDropout(_RandomStep):
    """With probability ``p``, zero ``holes`` random squares of ``size`` pixels (albumentations CoarseDropout)."""

    def __init__(self, holes: int, size: int = 16, p: float = 0.5):
        self.holes, self.size, self.p = holes, size, p

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return image if self.holes <= 0 else super().__call__(image)

    def apply(self, image: torch.Tensor) -> torch.Tensor:
        image = image.clone()
        height, width = image.shape[-2:]
        for _ in range(self.holes):
            top = int(torch.randint(max(1, height - self.size + 1), ()))
            left = int(torch.randint(max(1, width - self.size + 1), ()))
            image[..., top : top + self.size, left : left + self.size] = 0.0
        return image


_TO_IMAGE = v2.ToImage()
_TO_FLOAT = v2.ToDtype(torch.float32, scale=True)


def _as_plain_float(image) -> torch.Tensor:
    return _TO_FLOAT(_TO_IMAGE(image)).as_subclass(torch.Tensor)


def train_transform(crop_size: int = CROP_SIZE, coarse_dropout_holes: int = 0) -> v2.Compose:
    """FLamby's training augmentation, in its order, each random step but the crop with probability 0.5; CoarseDropout
    is off unless ``coarse_dropout_holes`` > 0 (FLamby draws 1..8 holes of 16x16 once per dataset)."""
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
