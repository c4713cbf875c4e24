"""Networks, built by name from a job's configuration (see :func:`build_model`).

Each network is a module with a ``build(num_classes, in_channels, **kwargs) -> nn.Module``
function, imported only when that network is used.
"""

from __future__ import annotations

import importlib

import torch
from torch import nn

MODELS: dict[str, str] = {
    "cnn": "lightyear.models.femnist_cnn",
    "densenet121": "lightyear.models.densenet",
    "efficientnet_b0": "lightyear.models.efficientnet",
    "transunet": "lightyear.models.transunet",
}


def build_model(name: str, num_classes: int, in_channels: int = 1, seed: int | None = None, **kwargs) -> nn.Module:
    """Build network ``name``; with ``seed`` its initial weights are a pure function of the seed."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(MODELS))}")
    module = importlib.import_module(MODELS[name])
    if seed is None:
        return module.build(num_classes=num_classes, in_channels=in_channels, **kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return module.build(num_classes=num_classes, in_channels=in_channels, **kwargs)
