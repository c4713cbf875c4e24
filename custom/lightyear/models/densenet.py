"""DenseNet-121 for the Camelyon17 patches of the LIGHTYEAR setup.

Reference: Huang et al., "Densely Connected Convolutional Networks", CVPR 2017; the network
is MONAI's :class:`monai.networks.nets.DenseNet121` (growth rate 32, blocks (6, 12, 24, 16),
64 initial features) with ``spatial_dims=2``. Camelyon17-WILDS trains DenseNet-121 from
scratch on 96x96 RGB patches; its global average pooling accepts any input size.
About 6.96 M parameters for 2 classes and 3 input channels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from monai.networks.nets import DenseNet121

from lightyear.algorithms.attacks.reparametrise import Slot, UnitGroup

_BOTTLENECK = re.compile(r"^(features\.denseblock\d+\.denselayer\d+\.layers)\.conv1\.weight$")
_BN_STATS = ("running_mean", "running_var")


def build(num_classes: int, in_channels: int = 3, **kwargs) -> DenseNet121:
    """Registry entry point (see :func:`lightyear.models.build_model`).

    ``kwargs`` go to MONAI's DenseNet121 (e.g. ``dropout_prob``); weights start at random,
    since nothing is downloaded at run time.
    """
    if kwargs.pop("pretrained", False):
        raise ValueError(
            "densenet121 is trained from scratch here: pretrained weights would need a download at run time"
        )
    return DenseNet121(spatial_dims=2, in_channels=in_channels, out_channels=num_classes, **kwargs)


def symmetries(shapes: Mapping[str, tuple], **model_args) -> list[UnitGroup]:
    """The exact symmetries of DenseNet-121 (``lightyear.algorithms.attacks.reparametrise``).

    * The bottleneck of every dense layer (conv1 1x1 -> norm2 -> ReLU -> conv2, 128 units in each
      of the 58 layers): permutation (conv1's outputs, norm2's parameters and statistics, conv2's
      inputs) and positive rescaling (norm2's weight and bias by c, conv2's inputs by 1/c).
    * The 1024 features that norm5 produces for the classifier (ReLU, average pooling, linear):
      rescaling only (norm5's inputs are the concatenated outputs of every layer, which cannot
      move without moving all their producers and readers).
    The concatenated features themselves are read through BatchNorm by every later layer; scaling
    them would have to rescale BatchNorm's running variance, which its eps makes inexact, so they
    are left out.
    """
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
