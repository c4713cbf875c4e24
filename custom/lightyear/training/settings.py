"""Check a site's dataset, model and training settings when a job is generated and when a site starts (no FLARE
import), so a misspelt option stops the job at once, named, instead of failing later or being ignored."""

from __future__ import annotations

import importlib
import inspect
import typing

from lightyear.checks import mapping
from lightyear.data import datasets
from lightyear.models import models
from lightyear.training import losses
from lightyear.training.trainer import TrainConfig

_NOT_OPTIONS = {"self", "site", "seed", "data_root", "num_classes", "in_channels"}


def _keyword_names(func) -> tuple[set[str], bool]:
    """Names a callable takes by keyword, and whether it also takes ``**kwargs``."""
    params = inspect.signature(func).parameters.values()
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names - _NOT_OPTIONS, any(p.kind == p.VAR_KEYWORD for p in params)


def dataset_options(dataset: str) -> set[str] | None:
    """The ``dataset_args`` keys dataset ``dataset`` takes (None: it does not say)."""
    if not isinstance(dataset, str) or dataset not in datasets():
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(sorted(datasets()))}")
    module = importlib.import_module(datasets()[dataset])
    names, open_ended = _keyword_names(module.load_site)
    if open_ended:
        inner = getattr(module, f"load_{dataset}_site", None)
        if inner is None:
            return names  # its load_site refuses any option it does not name
        inner_names, open_ended = _keyword_names(inner)
        names |= inner_names
    return None if open_ended else names


def model_options(model: str) -> set[str] | None:
    """The ``model_args`` keys network ``model`` takes (None: it does not say)."""
    if not isinstance(model, str) or model not in models():
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(sorted(models()))}")
    build = importlib.import_module(models()[model]).build
    names, open_ended = _keyword_names(build)
    if open_ended:
        network = typing.get_type_hints(build).get("return")
        if not inspect.isclass(network):
            return None
        inner, open_ended = _keyword_names(network.__init__)
        names |= inner
    return None if open_ended else names


def loss_options(loss: str) -> set[str]:
    """The ``loss_args`` keys loss ``loss`` takes."""
    from torch import nn

    classes = {"cross_entropy": nn.CrossEntropyLoss, "weighted_focal": losses.WeightedFocalLoss}
    if not isinstance(loss, str) or loss not in classes:
        raise ValueError(f"unknown loss {loss!r}; choose one of {', '.join(losses.LOSSES)}")
    names, _ = _keyword_names(classes[loss].__init__)
    return names - {"size_average", "reduce", "reduction"}


def build_train_config(train_args: dict | None) -> TrainConfig:
    """A TrainConfig from the job's ``train_args``; unknown keys are an error that names them."""
    if train_args is not None:
        mapping("train_args", train_args, note='a dict of option to value such as {"lr": 0.001}')
    train_args = dict(train_args or {})
    known = set(TrainConfig.__dataclass_fields__)
    unknown = sorted(set(train_args) - known)
    if unknown:
        raise ValueError(f"unknown train_args {unknown}; allowed are {sorted(known)}")
    return TrainConfig(**train_args)


def _refuse_unknown(kind: str, owner: str, given: dict | None, allowed: set[str] | None) -> None:
    if given is None:
        return
    mapping(kind, given, note="a dict of option to value")
    if allowed is None:
        return
    unknown = sorted(set(given) - allowed)
    if unknown:
        listed = ", ".join(sorted(allowed)) or "none"
        raise ValueError(f"{kind} {unknown} are not options of {owner}; allowed: {listed}")


def check_device(device, require_available: bool = False) -> str:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``; with ``require_available`` CUDA must be present."""
    import torch

    if isinstance(device, str) and device == "auto":
        return device
    try:
        parsed = torch.device(device) if isinstance(device, str) else None
    except (RuntimeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if require_available and parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asks for CUDA but this machine has none: use 'auto' or 'cpu'")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA devices")
    return device


def check_site_settings(
    dataset: str,
    model: str,
    dataset_args: dict | None = None,
    model_args: dict | None = None,
    train_args: dict | None = None,
    on_site: bool = False,
):
    """The checked ``TrainConfig``; a ValueError names any bad setting. ``on_site``: the device must exist here too."""
    _refuse_unknown("dataset_args", f"dataset {dataset!r}", dataset_args, dataset_options(dataset))
    _refuse_unknown("model_args", f"model {model!r}", model_args, model_options(model))
    config = build_train_config(train_args)
    _refuse_unknown("loss_args", f"loss {config.loss!r}", config.loss_args, loss_options(config.loss))
    check_device(config.device, require_available=on_site)
    return config
