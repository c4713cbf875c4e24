"""Evaluation metrics on predicted class probabilities (softmax outputs, never logits; pure NumPy, no FLARE).

For segmentation, pixels are samples: pass ``(N, C, H, W)`` probabilities through :func:`flatten_pixels`, or use
:func:`dice`.
"""

from __future__ import annotations

import numpy as np


def _check_probs(probs: np.ndarray) -> np.ndarray:
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2:
        raise ValueError(f"expected probabilities of shape (samples, classes), got {probs.shape}")
    return probs


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples whose arg-max class equals the label."""
    probs = _check_probs(probs)
    if len(probs) == 0:
        return 0.0
    return float(np.mean(probs.argmax(axis=1) == np.asarray(labels)))


def confidence(probs: np.ndarray) -> np.ndarray:
    """Per-sample confidence P(x) = max_k p_k(x) (the symbol P in Eq. 15 of the LIGHTYEAR paper)."""
    return _check_probs(probs).max(axis=1)


def mean_confidence(probs: np.ndarray) -> float:
    """Mean of :func:`confidence` over the samples."""
    conf = confidence(probs)
    return float(conf.mean()) if len(conf) else 0.0


def entropy(probs: np.ndarray, normalize: bool = False) -> np.ndarray:
    """Per-sample entropy H(p(x)) = -sum_k p_k log p_k, the "sharpness" of the short LIGHTYEAR paper (its Eq. 12);
    ``normalize`` divides by log K, into [0, 1]."""
    probs = _check_probs(probs)
    safe = np.clip(probs, 1e-12, 1.0)
    h = -(probs * np.log(safe)).sum(axis=1)
    if normalize:
        k = probs.shape[1]
        h = h / np.log(k) if k > 1 else np.zeros_like(h)
    return h


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Top-label ECE = sum_b |B_b|/n * |acc(B_b) - conf(B_b)| over ``n_bins`` equal-width bins
    ((b-1)/n_bins, b/n_bins]; a confidence of 0 falls in the first bin."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    probs = _check_probs(probs)
    n = len(probs)
    if n == 0:
        return 0.0
    conf = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == np.asarray(labels)).astype(np.float64)
    # bin index: ceil(conf * n_bins) - 1, clipped so that conf == 0 goes to bin 0
    idx = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    conf_sum = np.bincount(idx, weights=conf, minlength=n_bins)
    acc_sum = np.bincount(idx, weights=correct, minlength=n_bins)
    return float(np.abs(acc_sum - conf_sum).sum() / n)


def flatten_pixels(probs: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Turn segmentation outputs ``(N, C, H, W)`` and masks ``(N, H, W)`` into per-pixel samples."""
    probs = np.asarray(probs)
    if probs.ndim != 4:
        raise ValueError(f"expected segmentation probabilities (N, C, H, W), got {probs.shape}")
    n, c = probs.shape[:2]
    flat = np.moveaxis(probs, 1, -1).reshape(-1, c)
    return flat, np.asarray(masks).reshape(-1)


def dice(probs: np.ndarray, masks: np.ndarray, eps: float = 1e-6) -> float:
    """Mean foreground Dice 2|P & G| / (|P| + |G|) of the arg-max prediction over images ``(N, C, H, W)`` and
    classes 1..C-1; a class empty in both scores 1."""
    probs = np.asarray(probs)
    if probs.ndim != 4:
        raise ValueError(f"expected segmentation probabilities (N, C, H, W), got {probs.shape}")
    if len(probs) == 0:
        return 0.0
    return float(np.mean(dice_per_image(probs, masks, eps)))


def dice_per_image(probs: np.ndarray, masks: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Each image's foreground Dice (:func:`dice`'s terms, averaged over the foreground classes), ``(N,)``."""
    pred = np.asarray(probs).argmax(axis=1)
    masks = np.asarray(masks)
    scores = []
    for cls in range(1, np.shape(probs)[1]):
        p = (pred == cls).reshape(len(pred), -1)
        g = (masks == cls).reshape(len(masks), -1)
        denom = p.sum(axis=1) + g.sum(axis=1)
        scores.append(np.where(denom == 0, 1.0, 2.0 * (p & g).sum(axis=1) / np.maximum(denom, eps)))
    return np.mean(scores, axis=0)


SMALLEST_PROBABILITY = 1e-12
"""Where :func:`sample_losses` clips a probability, so that a sample's loss stays finite (at most 27.6)."""


def sample_losses(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-sample cross-entropy -log p_y(x): ``(N,)`` for ``(N, K)``, each image's pixel mean for ``(N, C, H, W)``;
    their mean is the trainer's validation loss up to the clipping at :data:`SMALLEST_PROBABILITY`."""
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    if probs.ndim not in (2, 4):
        raise ValueError(f"expected probabilities (N, K) or (N, C, H, W), got shape {probs.shape}")
    picked = np.take_along_axis(probs, np.expand_dims(labels, 1), axis=1)[:, 0]
    losses = -np.log(np.clip(picked, SMALLEST_PROBABILITY, 1.0))
    return losses.reshape(len(losses), -1).mean(axis=1) if probs.ndim == 4 else losses


def sample_errors(probs: np.ndarray, labels: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Per-sample error: 1 for a wrong arg-max class, else 0; for segmentation 1 - the image's foreground Dice."""
    probs = np.asarray(probs)
    labels = np.asarray(labels)
    if probs.ndim == 2:
        return (probs.argmax(axis=1) != labels).astype(np.float64)
    if probs.ndim != 4:
        raise ValueError(f"expected probabilities (N, K) or (N, C, H, W), got shape {probs.shape}")
    return 1.0 - dice_per_image(probs, labels, eps)


def metrics_from_predictions(probs: np.ndarray, labels: np.ndarray, loss: float, ece_bins: int = 15) -> dict:
    """The evaluation record of one model on one set, from its softmax outputs."""
    found = {"dice": dice(probs, labels)} if probs.ndim == 4 else {}
    flat, flat_labels = flatten_pixels(probs, labels) if probs.ndim == 4 else (probs, labels)
    return {
        **found,
        "acc": accuracy(flat, flat_labels),
        "ece": expected_calibration_error(flat, flat_labels, ece_bins),
        "conf": mean_confidence(flat),
        "loss": loss,
    }


def headline(found: dict) -> float:
    """The headline of an evaluation record (:func:`metrics_from_predictions`): Dice if present, else accuracy."""
    return float(found["dice"] if "dice" in found else found["acc"])
