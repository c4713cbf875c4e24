"""A site's local optimizers: PyTorch's own Adam and SGD arithmetic, without ``torch.optim``'s classes, whose first
``step`` imports PyTorch's compiler stack in every site process (docs/results.md, "The optimizer without PyTorch's
compiler"). :class:`Adam` and :class:`SGD` keep their per-parameter state and call what their ``step`` calls,
``torch.optim.adam.adam`` and ``torch.optim.sgd.sgd`` (public), multi-tensor, so a step is the same to the bit. Not
kept: parameter groups, ``state_dict``, AMSGrad, Nesterov, dampening, ``maximize`` and sparse gradients."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim.adam import adam as adam_update
from torch.optim.sgd import sgd as sgd_update


def _step_dtype() -> torch.dtype:
    """The dtype torch.optim.Adam counts steps in (float64 only under a float64 default dtype)."""
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


class _Optimizer:
    foreach = True  # PyTorch's multi-tensor form of the update

    def __init__(self, params: Iterable[torch.Tensor], lr: float, weight_decay: float):
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters: the model has none to train")
        if any(p.is_complex() for p in self.params):
            raise ValueError("complex parameters are not supported by the site optimizers")
        self.lr = float(lr)
        self.weight_decay = float(weight_decay)
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self) -> None:
        """Drop every gradient (``set_to_none``, as torch.optim does by default)."""
        for p in self.params:
            p.grad = None

    def _with_grad(self) -> list[torch.Tensor]:
        with_grad = [p for p in self.params if p.grad is not None]
        if any(p.grad.is_sparse for p in with_grad):
            raise RuntimeError("sparse gradients are not supported by the site optimizers")
        return with_grad


class Adam(_Optimizer):
    """Adam (Kingma and Ba, 2015) with L2 weight decay added to the gradient, as ``torch.optim.Adam``."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        super().__init__(params, lr, weight_decay)
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(eps)

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        state = self.state.get(p)
        if state is None:  # first gradient of this parameter: its step count lives on the CPU
            state = self.state[p] = {
                "step": torch.tensor(0.0, dtype=_step_dtype(), device="cpu"),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
        return state

    @torch.no_grad()
    def step(self) -> None:
        params = self._with_grad()
        if not params:
            return
        states = [self._state(p) for p in params]
        adam_update(
            params,
            [p.grad for p in params],
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            foreach=self.foreach,
            amsgrad=False,
            beta1=self.beta1,
            beta2=self.beta2,
            lr=self.lr,
            weight_decay=self.weight_decay,
            eps=self.eps,
            maximize=False,
        )


class SGD(_Optimizer):
    """SGD with heavy-ball momentum (no dampening) and L2 weight decay, as ``torch.optim.SGD``."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, lr, weight_decay)
        self.momentum = float(momentum)

    @torch.no_grad()
    def step(self) -> None:
        params = self._with_grad()
        if not params:
            return
        # as torch.optim.SGD: no buffers at all without momentum; a parameter's first step creates its buffer
        buffers = [self.state.get(p, {}).get("momentum_buffer") for p in params] if self.momentum != 0 else []
        sgd_update(
            params,
            [p.grad for p in params],
            buffers,
            foreach=self.foreach,
            weight_decay=self.weight_decay,
            momentum=self.momentum,
            lr=self.lr,
            dampening=0.0,
            nesterov=False,
            maximize=False,
        )
        if self.momentum != 0:  # a first step created its parameter's buffer; later steps update it in place
            for p, buffer in zip(params, buffers):
                if p not in self.state:
                    self.state[p] = {"momentum_buffer": buffer}
