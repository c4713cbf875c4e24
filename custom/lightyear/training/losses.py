"""Training losses, built by name from a job's configuration (see :func:`build_loss`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

# FLamby's Fed-ISIC2019 class weights (flamby/datasets/fed_isic2019/loss.py) of MEL, NV, BCC, AK, BKL, DF, VASC, SCC
ISIC19_FOCAL_ALPHA = (5.5813, 2.0472, 7.0204, 26.1194, 9.5369, 101.0707, 92.5224, 38.3443)


class WeightedFocalLoss(nn.Module):
    """Class-weighted focal loss ``mean(-(1 - p_t)^gamma * alpha[t] * log p_t)`` of logits ``(N, C, ...)`` and integer
    targets ``(N, ...)``, ``p_t`` the softmax probability of target ``t`` (Lin et al., "Focal Loss for Dense Object
    Detection", ICCV 2017, Eq. 5); by default FLamby's Fed-ISIC2019 ``BaselineLoss``, gamma 2 and its class weights."""

    def __init__(self, alpha: Sequence[float] | torch.Tensor = ISIC19_FOCAL_ALPHA, gamma: float = 2.0):
        super().__init__()
        weights = torch.as_tensor(alpha, dtype=torch.float32).flatten()
        if weights.numel() == 0 or not torch.isfinite(weights).all() or (weights < 0).any():
            raise ValueError(f"alpha must be a non-empty list of finite weights >= 0, got {alpha!r}")
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not gamma >= 0:
            raise ValueError(f"gamma must be a number >= 0, got {gamma!r}")
        self.register_buffer("alpha", weights)
        self.gamma = float(gamma)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if logits.shape[1] != self.alpha.numel():
            raise ValueError(
                f"the focal loss has {self.alpha.numel()} class weights but the logits have {logits.shape[1]} classes"
            )
        targets = targets.long()
        log_pt = F.log_softmax(logits.float(), dim=1).gather(1, targets.unsqueeze(1)).squeeze(1)
        pt = log_pt.exp()
        weight = self.alpha.to(logits.device)[targets]
        return (-((1.0 - pt) ** self.gamma) * weight * log_pt).mean()

    def extra_repr(self) -> str:
        return f"classes={self.alpha.numel()}, gamma={self.gamma}"


def build_loss(name: str, **kwargs) -> nn.Module:
    """``cross_entropy`` (classification or per-pixel) or ``weighted_focal`` (:class:`WeightedFocalLoss`)."""
    if name == "cross_entropy":
        return nn.CrossEntropyLoss(**kwargs)
    if name == "weighted_focal":
        return WeightedFocalLoss(**kwargs)
    raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}")


LOSSES = ("cross_entropy", "weighted_focal")
