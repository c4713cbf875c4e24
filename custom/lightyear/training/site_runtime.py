"""One site's data, model and trainer, built from a job's configuration (PyTorch, no FLARE; both topologies)."""

from __future__ import annotations

import zlib

import numpy as np
import torch

from lightyear.algorithms.metrics import metrics_from_predictions
from lightyear.algorithms.p2p.validation_bounds import Assessment, assess_predictions
from lightyear.checks import boolean, positive_int
from lightyear.data import load_site_data
from lightyear.models import build_model
from lightyear.training.settings import build_train_config, check_device, check_site_settings
from lightyear.training.trainer import LocalTrainer
from lightyear.training.weights import get_weights, set_weights


def site_seed(seed: int, site: str, stream: int = 0) -> int:
    """A per-site seed derived from the job seed (used for batch order)."""
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, zlib.crc32(site.encode()), stream]).generate_state(1)[0])


def runtime_arguments(
    dataset: str,
    model: str,
    dataset_args: dict | None = None,
    model_args: dict | None = None,
    train_args: dict | None = None,
    data_root: str | None = None,
    num_threads: int | None = None,
) -> dict:
    """A site executor's :class:`SiteRuntime` arguments, every setting checked, so a bad one stops job generation."""
    check_site_settings(dataset, model, dataset_args, model_args, train_args)
    if num_threads is not None:
        positive_int("num_threads", num_threads)
    return dict(
        dataset=dataset,
        model=model,
        dataset_args=dataset_args,
        model_args=model_args,
        train_args=train_args,
        data_root=data_root,
        num_threads=num_threads,
    )


class SiteRuntime:
    """Loads a site's data, builds the seeded initial model and trains/evaluates it."""

    def __init__(
        self,
        site: str,
        dataset: str,
        model: str,
        seed: int = 0,
        dataset_args: dict | None = None,
        model_args: dict | None = None,
        train_args: dict | None = None,
        data_root: str | None = None,
        num_threads: int | None = None,
    ):
        if num_threads:
            torch.set_num_threads(int(num_threads))
        self.site = site
        self.seed = int(seed)
        self.config = build_train_config(train_args)
        check_device(self.config.device, require_available=True)
        self.data = load_site_data(dataset, site, seed=self.seed, data_root=data_root, **(dataset_args or {}))
        self.model_name = model
        self.model_args = dict(model_args or {})
        self.model = self.fresh_model(self.seed)
        self.trainer = LocalTrainer(self.config, task=self.data.task)
        self.model.to(self.trainer.device)

    def fresh_model(self, seed: int) -> torch.nn.Module:
        """A newly initialised network; the same seed gives the same weights on every site."""
        return build_model(self.model_name, self.data.num_classes, self.data.in_channels, seed=seed, **self.model_args)

    def get_weights(self) -> dict[str, np.ndarray]:
        return get_weights(self.model)

    def set_weights(self, weights) -> None:
        set_weights(self.model, weights)

    def train(
        self, round_num: int, regularizer=None, model: torch.nn.Module | None = None, flip_labels: bool = False
    ) -> dict:
        """Train ``model`` (or the site's) for the local epochs, batches and dropout from (seed, site, round), adding
        ``regularizer(model)`` to each loss; ``flip_labels``: :func:`~lightyear.training.trainer.flip_targets`."""
        boolean("flip_labels", flip_labels)
        seed = site_seed(self.seed, self.site, round_num + 1)
        torch.manual_seed(seed)
        flip = self.data.num_classes if flip_labels else None
        return self.trainer.train(
            self.model if model is None else model,
            self.data.train,
            seed=seed,
            regularizer=regularizer,
            flip_classes=flip,
        )

    def evaluate(self, split: str, weights=None) -> dict:
        """Metrics of the current model (or of ``weights``) on ``split`` (train/val/test)."""
        probs, labels, loss = self._predict(split, weights)
        return metrics_from_predictions(probs, labels, loss, self.config.ece_bins)

    def assess(self, weights=None, normalize_entropy: bool = True) -> Assessment:
        """The :class:`Assessment` of the model (or of ``weights``) on the validation set, from one forward pass."""
        probs, labels, loss = self._predict("val", weights)
        return assess_predictions(probs, labels, loss, self.config.ece_bins, normalize_entropy)

    def _predict(self, split: str, weights=None):
        dataset = getattr(self.data, split)
        if weights is None:
            return self.trainer.predict(self.model, dataset)
        if not hasattr(self, "_scratch"):
            self._scratch = self.fresh_model(self.seed).to(self.trainer.device)
        set_weights(self._scratch, weights)
        return self.trainer.predict(self._scratch, dataset)
