"""EfficientNet-B0 for the ISIC 2019 images of the LIGHTYEAR setup (Fed-ISIC2019).

Reference: Tan and Le, "EfficientNet: Rethinking Model Scaling for Convolutional Neural
Networks", ICML 2019; the network is torchvision's :func:`torchvision.models.efficientnet_b0`.
FLamby's Fed-ISIC2019 baseline starts from ImageNet weights and replaces the last linear layer
by one with 8 outputs. Nothing is downloaded at run time: name a local weights file with
``weights_path`` (for instance torchvision's ImageNet file
``efficientnet_b0_rwightman-7f5810bc.pth`` from
https://download.pytorch.org/models/, fetched beforehand). About 4.02 M parameters for 8 classes.

The file may hold a state dict (optionally inside a ``state_dict`` or ``model`` entry, keys
optionally prefixed ``module.``) of torchvision's EfficientNet-B0 with any number of
classes. Every feature weight must load; the classifier is loaded when its shape fits
``num_classes`` and freshly initialised otherwise. With ``in_channels`` other than 3 the stem
convolution takes the mean of the pretrained RGB filters for every input channel, scaled by
3 / in_channels.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import torch
from torch import nn
from torchvision.models import efficientnet_b0
from torchvision.models.efficientnet import EfficientNet

from lightyear.algorithms.attacks.reparametrise import Slot, UnitGroup

CLASSIFIER_PREFIX = "classifier."
STEM_WEIGHT = "features.0.0.weight"
WEIGHTS_HINT = (
    "name a torchvision EfficientNet-B0 state dict, e.g. the ImageNet file efficientnet_b0_rwightman-7f5810bc.pth "
    "from https://download.pytorch.org/models/ (downloaded beforehand)"
)


def _replace_stem(model: EfficientNet, in_channels: int) -> None:
    old = model.features[0][0]
    model.features[0][0] = nn.Conv2d(
        in_channels, old.out_channels, kernel_size=old.kernel_size, stride=old.stride, padding=old.padding, bias=False
    )


def read_state_dict(path: str) -> dict[str, torch.Tensor]:
    """The tensors of a saved EfficientNet-B0 state dict (unwrapped and without ``module.``)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"EfficientNet-B0 weights file {path} does not exist; {WEIGHTS_HINT}")
    state = torch.load(path, map_location="cpu", weights_only=True)
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} does not hold a state dict of tensors; {WEIGHTS_HINT}")
    return {(k[len("module.") :] if k.startswith("module.") else k): v for k, v in state.items()}


def load_weights(model: EfficientNet, path: str, in_channels: int) -> None:
    """Load the feature weights of ``path`` into ``model`` (and the classifier where shapes fit)."""
    state = read_state_dict(path)
    own = model.state_dict()
    feature_keys = [k for k in own if not k.startswith(CLASSIFIER_PREFIX)]
    missing = [k for k in feature_keys if k not in state]
    if missing:
        raise ValueError(
            f"{path} lacks {len(missing)} EfficientNet-B0 weights, e.g. {missing[:3]} "
            f"(it has keys like {list(state)[:3]}); {WEIGHTS_HINT}"
        )
    stem = state[STEM_WEIGHT]
    if stem.shape[1] != in_channels:
        state[STEM_WEIGHT] = stem.mean(dim=1, keepdim=True).repeat(1, in_channels, 1, 1) * (stem.shape[1] / in_channels)
    wrong = [k for k in feature_keys if state[k].shape != own[k].shape]
    if wrong:
        raise ValueError(f"{path}: weights {wrong[:3]} have shapes that do not fit EfficientNet-B0; {WEIGHTS_HINT}")
    load = {k: state[k] for k in feature_keys}
    classifier = {k: state[k] for k in own if k.startswith(CLASSIFIER_PREFIX) and k in state}
    if len(classifier) == len([k for k in own if k.startswith(CLASSIFIER_PREFIX)]) and all(
        classifier[k].shape == own[k].shape for k in classifier
    ):
        load.update(classifier)
    model.load_state_dict(load, strict=False)


def build(
    num_classes: int, in_channels: int = 3, weights_path: str | None = None, dropout: float = 0.2, **kwargs
) -> EfficientNet:
    """Registry entry point (see :func:`lightyear.models.build_model`); ``kwargs`` go to torchvision."""
    model = efficientnet_b0(weights=None, num_classes=num_classes, dropout=dropout, **kwargs)
    if in_channels != 3:
        _replace_stem(model, in_channels)
    if weights_path:
        load_weights(model, os.path.expanduser(weights_path), in_channels)
    return model


_SQUEEZE = re.compile(r"^(features\.\d+\.\d+\.block)\.(\d)\.fc1\.weight$")


def _conv_bn(prefix: str) -> tuple[Slot, ...]:
    """A convolution's output channels and its BatchNorm (torchvision's Conv2dNormActivation ``prefix``),
    as producers."""
    return (
        Slot(f"{prefix}.0.weight", 0, 1),
        *(Slot(f"{prefix}.1.{name}", 0, 1) for name in ("weight", "bias", "running_mean", "running_var")),
    )


def symmetries(shapes: Mapping[str, tuple], **model_args) -> list[UnitGroup]:
    """The exact symmetries of EfficientNet-B0 (``lightyear.algorithms.attacks.reparametrise``).

    SiLU is not positively homogeneous, so no unit admits rescaling; these admit permutation:

    * every MBConv block's expanded channels (expansion conv and BatchNorm, depthwise conv and
      BatchNorm, squeeze-and-excitation inputs and gates, projection inputs); in the first block,
      which has no expansion, the stem's channels that it reads;
    * every squeeze-and-excitation block's squeezed units (fc1's outputs, fc2's inputs);
    * the head's 1280 channels (conv, BatchNorm, classifier inputs).
    """
    groups = []
    for key in shapes:
        found = _SQUEEZE.match(key)
        if not found:
            continue
        block, se = found.group(1), int(found.group(2))
        squeeze = f"{block}.{se}"
        units = shapes[f"{squeeze}.fc1.weight"][1]
        gates = (
            Slot(f"{squeeze}.fc1.weight", 1, -1),
            Slot(f"{squeeze}.fc2.weight", 0, 1),
            Slot(f"{squeeze}.fc2.bias", 0, 1),
        )
        project = Slot(f"{block}.{se + 1}.0.weight", 1, -1)
        if se == 2:  # expansion, depthwise, squeeze-and-excitation, projection
            producers = _conv_bn(f"{block}.0") + _conv_bn(f"{block}.1")
        elif block == "features.1.0.block" and "features.0.0.weight" in shapes:  # the stem feeds the first block
            producers = _conv_bn("features.0") + _conv_bn(f"{block}.0")
        else:
            continue
        groups.append(UnitGroup(f"{block} channels", units, producers + gates + (project,), scalable=False))
        groups.append(
            UnitGroup(
                f"{squeeze} squeeze",
                shapes[f"{squeeze}.fc1.weight"][0],
                (
                    Slot(f"{squeeze}.fc1.weight", 0, 1),
                    Slot(f"{squeeze}.fc1.bias", 0, 1),
                    Slot(f"{squeeze}.fc2.weight", 1, -1),
                ),
                scalable=False,
            )
        )
    if "features.8.0.weight" in shapes:
        groups.append(
            UnitGroup(
                "head",
                shapes["features.8.0.weight"][0],
                _conv_bn("features.8") + (Slot("classifier.1.weight", 1, -1),),
                scalable=False,
            )
        )
    return groups
