"""FLamby's training augmentations and test transform for Fed-ISIC2019 (torchvision v2)."""

from __future__ import annotations

import math

import torch
from torchvision.transforms import InterpolationMode, v2
from torchvision.transforms.v2 import functional as TF

from lightyear.data.isic19.constants import CROP_SIZE, IMAGENET_MEAN, IMAGENET_STD

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
    """With probability ``p``, zero ``holes`` squares of ``size`` pixels at random places
    (albumentations CoarseDropout)."""

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
