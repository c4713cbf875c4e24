"""Conversion between a torch model's state dict and ``dict[str, np.ndarray]``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn


def get_weights(model: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def set_weights(model: nn.Module, weights: Mapping[str, np.ndarray]) -> None:
    """Load NumPy arrays into the model in place, keeping each tensor's dtype and device."""
    state = model.state_dict()
    missing = set(state) - set(weights)
    if missing:
        raise KeyError(f"weights lack {len(missing)} entries of the model, e.g. {sorted(missing)[:3]}")
    with torch.no_grad():
        for key, tensor in state.items():
            tensor.copy_(torch.as_tensor(np.asarray(weights[key])).to(dtype=tensor.dtype))


def seeded_weights(
    model: str, num_classes: int, in_channels: int, seed: int, model_args: Mapping | None = None
) -> dict:
    """The weights of network ``model`` initialised from ``seed``: the same on every site that builds it."""
    from lightyear.models import build_model  # torchvision and the networks: only when a model is built

    return get_weights(build_model(model, num_classes, in_channels, seed=seed, **dict(model_args or {})))


def num_bytes(weights: Mapping[str, np.ndarray]) -> int:
    return int(sum(np.asarray(v).nbytes for v in weights.values()))
