"""DenseNet-121 (Huang et al., "Densely Connected Convolutional Networks", CVPR 2017) for the Camelyon17 patches:
MONAI's :class:`monai.networks.nets.DenseNet121`, 2-D, trained from scratch as in Camelyon17-WILDS."""

from __future__ import annotations

import re
from collections.abc import Mapping

from monai.networks.nets import DenseNet121

from lightyear.algorithms.symmetries import Slot, UnitGroup

_BOTTLENECK = re.compile(r"^(features\.denseblock\d+\.denselayer\d+\.layers)\.conv1\.weight$")
_BN_STATS = ("running_mean", "running_var")


def build(num_classes: int, in_channels: int = 3, **kwargs) -> DenseNet121:
    """Registry entry point (:func:`lightyear.models.build_model`); ``kwargs`` go to MONAI's DenseNet121."""
    if kwargs.pop("pretrained", False):
        raise ValueError(
            "densenet121 is trained from scratch here: pretrained weights would need a download at run time"
        )
    return DenseNet121(spatial_dims=2, in_channels=in_channels, out_channels=num_classes, **kwargs)


def symmetries(shapes: Mapping[str, tuple], **model_args) -> list[UnitGroup]:
    """The exact symmetries of DenseNet-121 (``lightyear.algorithms.attacks.reparametrise``): each bottleneck, permuted
    and rescaled; norm5's outputs, rescaled. Not the concatenated features: BatchNorm's eps makes that inexact."""
    groups = []
    for key in shapes:
        found = _BOTTLENECK.match(key)
        if not found:
            continue
        layer = found.group(1)
        units = shapes[key][0]
        norm = f"{layer}.norm2"
        groups.append(
            UnitGroup(
                layer,
                units,
                (
                    Slot(key, 0, 0),
                    Slot(f"{norm}.weight", 0, 1),
                    Slot(f"{norm}.bias", 0, 1),
                    *(Slot(f"{norm}.{stat}", 0, 0) for stat in _BN_STATS),
                    Slot(f"{layer}.conv2.weight", 1, -1),
                ),
            )
        )
    if "features.norm5.weight" in shapes:
        groups.append(
            UnitGroup(
                "norm5",
                shapes["features.norm5.weight"][0],
                (
                    Slot("features.norm5.weight", 0, 1),
                    Slot("features.norm5.bias", 0, 1),
                    Slot("class_layers.out.weight", 1, -1),
                ),
                block=1,
            )
        )
    return groups
