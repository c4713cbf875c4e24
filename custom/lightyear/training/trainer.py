"""Local training and evaluation of one site's model (PyTorch, no FLARE)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightyear.algorithms import metrics
from lightyear.checks import boolean, int_in, mapping, non_negative, number_in, one_of, positive_int, positive_number
from lightyear.data.site_data import CLASSIFICATION, SEGMENTATION
from lightyear.training import losses, optimizers

OPTIMIZERS = ("adam", "sgd")


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass
class TrainConfig:
    """A site's training settings (LIGHTYEAR paper, Table 1); ``deterministic``: :func:`use_deterministic_kernels`."""

    loss: str = "cross_entropy"
    loss_args: dict | None = None
    optimizer: str = "adam"
    lr: float = 1e-3
    weight_decay: float = 1e-4
    momentum: float = 0.9
    local_epochs: int = 1
    batch_size: int = 32
    ece_bins: int = 15
    device: str = "auto"
    deterministic: bool = True

    def __post_init__(self):
        one_of("optimizer", self.optimizer, OPTIMIZERS)
        one_of("loss", self.loss, losses.LOSSES)
        positive_number("lr", self.lr)
        non_negative("weight_decay", self.weight_decay)
        number_in("momentum", self.momentum, 0.0, 1.0, high_open=True)
        for name in ("local_epochs", "batch_size", "ece_bins"):
            positive_int(name, getattr(self, name))
        boolean("deterministic", self.deterministic)
        if self.loss_args is not None:
            mapping("loss_args", self.loss_args)


def use_deterministic_kernels(enabled: bool, device: torch.device | str = "cuda") -> None:
    """Deterministic GPU kernels (``enabled``) or the fast ones: ``torch.use_deterministic_algorithms`` (warning for an
    op without one; untouched on a CPU, deterministic anyway, as it imports PyTorch's compiler: docs/results.md,
    "Deterministic kernels on GPUs only"), cuDNN's settings, ``CUBLAS_WORKSPACE_CONFIG`` (before cuBLAS starts)."""
    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if torch.device(device).type != "cpu":
        torch.use_deterministic_algorithms(enabled, warn_only=True)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = not enabled


class LocalTrainer:
    """Trains a model on a site's training set and evaluates it on probabilities."""

    def __init__(self, config: TrainConfig, task: str = CLASSIFICATION):
        if task not in (CLASSIFICATION, SEGMENTATION):
            raise ValueError(f"task must be {CLASSIFICATION!r} or {SEGMENTATION!r}, got {task!r}")
        self.config = config
        self.task = task
        self.device = resolve_device(config.device)
        use_deterministic_kernels(config.deterministic, self.device)
        self.loss_fn = losses.build_loss(config.loss, **(config.loss_args or {}))
        self.eval_loss_fn = nn.CrossEntropyLoss()

    def make_optimizer(self, model: nn.Module) -> optimizers.Adam | optimizers.SGD:
        """The configured optimizer, torch.optim's Adam or SGD arithmetic (:mod:`lightyear.training.optimizers`)."""
        c = self.config
        if c.optimizer == "sgd":
            return optimizers.SGD(model.parameters(), lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay)
        return optimizers.Adam(model.parameters(), lr=c.lr, weight_decay=c.weight_decay)

    def train(
        self, model: nn.Module, dataset: Dataset, seed: int, regularizer=None, flip_classes: int | None = None
    ) -> dict:
        """Train ``local_epochs`` epochs (batch order from ``seed``), adding ``regularizer(model)`` to each loss;
        ``flip_classes`` = C trains on :func:`flip_targets`."""
        model.to(self.device).train()
        optimizer = self.make_optimizer(model)
        gen = torch.Generator().manual_seed(int(seed) & 0x7FFFFFFF)
        loader = DataLoader(dataset, batch_size=self.config.batch_size, shuffle=True, generator=gen, drop_last=False)
        total, count = 0.0, 0
        for _ in range(self.config.local_epochs):
            for x, y in loader:
                x, y = x.to(self.device), y.to(self.device).long()
                if flip_classes is not None:
                    y = flip_targets(y, flip_classes)
                optimizer.zero_grad()
                loss = self.loss_fn(model(x), y)
                objective = loss if regularizer is None else loss + regularizer(model)
                objective.backward()
                optimizer.step()
                total += float(loss.detach()) * len(x)
                count += len(x)
        return {"train_loss": total / max(count, 1), "train_samples": len(dataset)}

    @torch.no_grad()
    def predict(self, model: nn.Module, dataset: Dataset) -> tuple[np.ndarray, np.ndarray, float]:
        """Softmax probabilities, labels (or masks) and mean loss of ``model`` on ``dataset``."""
        model.to(self.device).eval()
        probs, labels, total = [], [], 0.0
        for x, y in evaluation_batches(dataset, max(self.config.batch_size, 256)):
            x, y = x.to(self.device), y.to(self.device)
            logits = model(x)
            total += float(self.eval_loss_fn(logits.float(), y.long())) * len(x)
            probs.append(torch.softmax(logits.float(), dim=1).cpu().numpy())
            labels.append(y.cpu().numpy())
        if not probs:
            raise ValueError("cannot evaluate on an empty dataset")
        return np.concatenate(probs), np.concatenate(labels), total / len(dataset)

    def evaluate(self, model: nn.Module, dataset: Dataset) -> dict:
        """Accuracy (or Dice), top-label ECE, mean confidence and loss of ``model`` on ``dataset``."""
        probs, labels, loss = self.predict(model, dataset)
        return metrics.metrics_from_predictions(probs, labels, loss, self.config.ece_bins)


def evaluation_batches(dataset: Dataset, batch_size: int):
    """``dataset`` in order, ``batch_size`` samples at a time: an in-memory ``TensorDataset`` by slicing its tensors
    (the same batches a ``DataLoader`` collates, without indexing and stacking each sample); any other through one."""
    if isinstance(dataset, TensorDataset) and len(dataset.tensors) == 2:
        x, y = dataset.tensors
        for start in range(0, len(x), batch_size):
            yield x[start : start + batch_size], y[start : start + batch_size]
    else:
        yield from DataLoader(dataset, batch_size=batch_size, shuffle=False)


def flip_targets(targets: torch.Tensor, num_classes: int) -> torch.Tensor:
    """y' = (y + 1) mod C of integer targets (FedCAP Sec. VI-A3, LF), per sample or per pixel (binary masks are
    inverted); floating targets, C < 2 or a target outside [0, C) raise ValueError."""
    int_in("num_classes", num_classes, 2, note="flipping needs another class to flip to")
    if targets.is_floating_point():
        raise ValueError(
            f"label flipping needs integer class targets, got {targets.dtype}; cast them to class indices first"
        )
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= num_classes):
        raise ValueError(
            f"targets must lie in [0, {num_classes}), got values from {int(targets.min())} to {int(targets.max())}; "
            "check num_classes"
        )
    return (targets + 1) % num_classes
