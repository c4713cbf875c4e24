"""Networks, built by name from a job's configuration (see :func:`build_model`): each a module, imported when used,
with ``build(num_classes, in_channels, **kwargs) -> nn.Module`` and ``symmetries`` (see :func:`model_symmetries`)."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from lightyear.algorithms.symmetries import UnitGroup
from lightyear.plugins import module_table

MODELS: dict[str, str] = {
    "cnn": "lightyear.models.femnist_cnn",
    "densenet121": "lightyear.models.densenet",
    "efficientnet_b0": "lightyear.models.efficientnet",
    "transunet": "lightyear.models.transunet",
}
GROUP = "lightyear.models"  # the entry point group of plugins' networks


@functools.cache
def models() -> dict[str, str]:
    """name -> module of every known network: the toolkit's, then installed plugins'."""
    return module_table(MODELS, GROUP, "network")


def _module(name: str):
    if name not in models():
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(models()))}")
    return importlib.import_module(models()[name])


def build_model(name: str, num_classes: int, in_channels: int = 1, seed: int | None = None, **kwargs) -> nn.Module:
    """Build network ``name``; with ``seed`` its initial weights are a pure function of the seed."""
    module = _module(name)
    with torch.random.fork_rng(devices=[], enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(int(seed))
        return module.build(num_classes=num_classes, in_channels=in_channels, **kwargs)


def model_symmetries(name: str, weights: Mapping[str, np.ndarray], model_args: dict | None = None) -> list:
    """The exact parameter symmetries (:class:`UnitGroup` list) of network ``name``, by its module's ``symmetries``."""
    module = _module(name)
    shapes = {key: tuple(np.shape(value)) for key, value in weights.items()}
    groups = module.symmetries(shapes, **(model_args or {}))
    if not all(isinstance(g, UnitGroup) for g in groups):
        raise TypeError(f"{models()[name]}.symmetries must return a list of UnitGroup objects")
    return groups
