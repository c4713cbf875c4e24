"""Networks, built by name from a job's configuration (see :func:`build_model`).

Each network is a module with a ``build(num_classes, in_channels, **kwargs) -> nn.Module``
function, imported only when that network is used, and a ``symmetries(shapes, **kwargs)`` function
that declares which of its hidden units admit an exact rescaling or permutation (see
:func:`model_symmetries`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from lightyear.algorithms.attacks.reparametrise import UnitGroup
from lightyear.plugins import module_table

MODELS: dict[str, str] = {
    "cnn": "lightyear.models.femnist_cnn",
    "densenet121": "lightyear.models.densenet",
    "efficientnet_b0": "lightyear.models.efficientnet",
    "transunet": "lightyear.models.transunet",
}


GROUP = "lightyear.models"
"""The entry point group a plugin announces its networks under (each entry names a module with
``build`` and ``symmetries``)."""


@functools.cache
def models() -> dict[str, str]:
    """name -> module of every known network: the toolkit's, then installed plugins'."""
    return module_table(MODELS, GROUP, "network")


def build_model(name: str, num_classes: int, in_channels: int = 1, seed: int | None = None, **kwargs) -> nn.Module:
    """Build network ``name``; with ``seed`` its initial weights are a pure function of the seed."""
    if name not in models():
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(models()))}")
    module = importlib.import_module(models()[name])
    if seed is None:
        return module.build(num_classes=num_classes, in_channels=in_channels, **kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return module.build(num_classes=num_classes, in_channels=in_channels, **kwargs)


def model_symmetries(name: str, weights: Mapping[str, np.ndarray], model_args: dict | None = None) -> list:
    """The exact parameter symmetries of network ``name`` with these ``weights``
    (:class:`~lightyear.algorithms.attacks.reparametrise.UnitGroup` list): each network's module
    declares them from the entries' shapes and the network's settings ``model_args``."""
    if name not in models():
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(models()))}")
    module = importlib.import_module(models()[name])
    shapes = {key: tuple(np.shape(value)) for key, value in weights.items()}
    groups = module.symmetries(shapes, **(model_args or {}))
    if not all(isinstance(g, UnitGroup) for g in groups):
        raise TypeError(f"{models()[name]}.symmetries must return a list of UnitGroup objects")
    return groups
