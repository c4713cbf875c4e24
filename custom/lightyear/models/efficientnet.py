"""EfficientNet-B0 (Tan and Le, "EfficientNet: Rethinking Model Scaling for Convolutional Neural Networks", ICML 2019)
for the ISIC 2019 images: torchvision's :func:`torchvision.models.efficientnet_b0`, from ImageNet weights as FLamby's
baseline, read from a local ``weights_path`` (nothing is downloaded at run time; :data:`WEIGHTS_HINT`)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import torch
from torch import nn
from torchvision.models import efficientnet_b0
from torchvision.models.efficientnet import EfficientNet

from lightyear.algorithms.symmetries import Slot, UnitGroup

CLASSIFIER_PREFIX = "classifier."
STEM_WEIGHT = "features.0.0.weight"
_SQUEEZE = re.compile(r"^(features\.\d+\.\d+\.block)\.(\d)\.fc1\.weight$")
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
    """The tensors of a saved state dict, unwrapped from a ``state_dict`` or ``model`` entry, without ``module.``."""
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
    """Load every feature weight of ``path`` into ``model``, and the classifier when its shapes fit; for other
    ``in_channels`` than the file's, the stem takes the mean of its filters, scaled by file / own channels."""
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
    classifier = [k for k in own if k.startswith(CLASSIFIER_PREFIX)]
    if all(k in state and state[k].shape == own[k].shape for k in classifier):
        load.update({k: state[k] for k in classifier})
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


def _conv_bn(prefix: str) -> tuple[Slot, ...]:
    """A convolution's output channels and its BatchNorm (torchvision's Conv2dNormActivation ``prefix``)."""
    return (
        Slot(f"{prefix}.0.weight", 0, 1),
        *(Slot(f"{prefix}.1.{name}", 0, 1) for name in ("weight", "bias", "running_mean", "running_var")),
    )


def symmetries(shapes: Mapping[str, tuple], **model_args) -> list[UnitGroup]:
    """The exact symmetries of EfficientNet-B0 (``lightyear.algorithms.attacks.reparametrise``), all permutations (SiLU
    is not homogeneous): MBConv blocks' expanded channels (the stem's in the first), squeeze units, head channels."""
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
