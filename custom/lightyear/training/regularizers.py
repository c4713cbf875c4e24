"""Proximal regularisers added to a site's training loss (torch), one term for three baselines:
* FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in Heterogeneous Networks", MLSys
  2020, Eq. 2): local objective + mu/2 ||w - w^t||^2, w^t the global model the round started from;
* Ditto (Li, Hu, Beirami, Smith, "Ditto: Fair and Robust Federated Learning Through Personalization", ICML 2021,
  Eq. 2 / Algorithm 1): the personal model v_k trained on its loss + lambda/2 ||v_k - w^t||^2 (lambda as ``mu``);
* FedCAP's personalised objective (paper 002, Eq. 7): + lambda/2 ||v - w^_k^t||^2, w^_k^t the customised model."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from lightyear.checks import non_negative


def check_mu(mu: float) -> float:
    """mu (proximal strength) must be a finite number >= 0 (0 turns the term off)."""
    return non_negative("mu (proximal strength, FedProx mu / Ditto lambda)", mu)


def parameter_snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """Detached copies of the model's floating parameters, by name: a reference for :func:`proximal_term`."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.is_floating_point()}


def proximal_term(model: nn.Module, reference: Mapping[str, torch.Tensor], mu: float) -> torch.Tensor:
    """mu/2 * sum over floating parameters of ||w - w_ref||^2 (FedProx Eq. 2), gradient to ``model`` only, in float32
    or wider; ``reference``: each such parameter's name -> a tensor of its shape (e.g. :func:`parameter_snapshot`)."""
    mu = check_mu(mu)
    total = None
    for name, p in model.named_parameters():
        if not p.is_floating_point():
            continue
        if name not in reference:
            raise ValueError(f"the reference has no entry for parameter {name!r}")
        ref = torch.as_tensor(reference[name]).detach().to(device=p.device, dtype=p.dtype)
        if ref.shape != p.shape:
            raise ValueError(f"reference {name!r} has shape {tuple(ref.shape)} but the parameter has {tuple(p.shape)}")
        acc_dtype = torch.promote_types(p.dtype, torch.float32)
        sq = (p.to(acc_dtype) - ref.to(acc_dtype)).pow(2).sum()
        total = sq if total is None else total + sq
    if total is None:
        raise ValueError("the model has no floating parameters")
    return 0.5 * mu * total
