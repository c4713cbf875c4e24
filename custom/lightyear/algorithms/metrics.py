"""Evaluation metrics on predicted probabilities (pure NumPy, no FLARE).

Every function takes class probabilities (softmax outputs), never logits. For
segmentation, pixels are treated as samples: pass probabilities of shape
``(N, C, H, W)`` through :func:`flatten_pixels` first, or use :func:`dice`.
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
    """Per-sample predictive entropy H(p(x)) = -sum_k p_k log p_k.

    This is the "sharpness" of the short LIGHTYEAR paper (its Eq. 12). With
    ``normalize=True`` it is divided by log K, so it lies in [0, 1] for any class count K.
    """
    probs = _check_probs(probs)
    safe = np.clip(probs, 1e-12, 1.0)
    h = -(probs * np.log(safe)).sum(axis=1)
    if normalize:
        k = probs.shape[1]
        h = h / np.log(k) if k > 1 else np.zeros_like(h)
    return h


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Top-label expected calibration error with ``n_bins`` equal-width confidence bins.

    ECE = sum_b |B_b|/n * |acc(B_b) - conf(B_b)|, where bin b holds the samples whose
    confidence lies in ((b-1)/n_bins, b/n_bins]; a confidence of exactly 0 falls in the first bin.
    """
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
    """Mean foreground Dice over images: 2|P & G| / (|P| + |G|) of the arg-max prediction.

    ``probs`` is ``(N, C, H, W)``; classes 1..C-1 are foreground and averaged. An image where
    both prediction and ground truth are empty for a class scores 1 for that class.
    """
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
    """Per-sample cross-entropy -log p_y(x) from softmax outputs: ``(N,)`` for classification ``(N, K)``,
    and for segmentation ``(N, C, H, W)`` each image's mean over its pixels. Their mean is the validation
    loss the trainer reports, up to the clipping of a probability at :data:`SMALLEST_PROBABILITY`."""
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    if probs.ndim not in (2, 4):
        raise ValueError(f"expected probabilities (N, K) or (N, C, H, W), got shape {probs.shape}")
    picked = np.take_along_axis(probs, np.expand_dims(labels, 1), axis=1)[:, 0]
    losses = -np.log(np.clip(picked, SMALLEST_PROBABILITY, 1.0))
    return losses.reshape(len(losses), -1).mean(axis=1) if probs.ndim == 4 else losses


def sample_errors(probs: np.ndarray, labels: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Per-sample error: 1 where the arg-max class is not the label, else 0 (classification); 1 minus the
    image's foreground Dice (:func:`dice`, per image) for segmentation. Their mean is 1 - accuracy (Dice)."""
    probs = np.asarray(probs)
    labels = np.asarray(labels)
    if probs.ndim == 2:
        return (probs.argmax(axis=1) != labels).astype(np.float64)
    if probs.ndim != 4:
        raise ValueError(f"expected probabilities (N, K) or (N, C, H, W), got shape {probs.shape}")
    return 1.0 - dice_per_image(probs, labels, eps)


def metrics_from_predictions(probs: np.ndarray, labels: np.ndarray, loss: float, ece_bins: int = 15) -> dict:
    """The evaluation record of one model on one set, from its softmax outputs."""
    if probs.ndim == 4:
        flat, flat_labels = flatten_pixels(probs, labels)
        return {
            "dice": dice(probs, labels),
            "acc": accuracy(flat, flat_labels),
            "ece": expected_calibration_error(flat, flat_labels, ece_bins),
            "conf": mean_confidence(flat),
            "loss": loss,
        }
    return {
        "acc": accuracy(probs, labels),
        "ece": expected_calibration_error(probs, labels, ece_bins),
        "conf": mean_confidence(probs),
        "loss": loss,
    }


def headline(found: dict) -> float:
    """The performance of an evaluation record (:func:`metrics_from_predictions`): Dice where it has one
    (segmentation), else accuracy."""
    return float(found["dice"] if "dice" in found else found["acc"])
