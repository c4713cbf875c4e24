"""Training losses: cross entropy and FLamby's weighted focal loss."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lightyear.training import losses
from lightyear.training.trainer import LocalTrainer, TrainConfig


def logits_of(*probabilities: list[float]) -> torch.Tensor:
    return torch.log(torch.tensor(probabilities, dtype=torch.float32))


def test_weighted_focal_hand_worked_case():
    # sample 1: p = (0.5, 0.25, 0.25), target 0 -> pt 0.5, alpha 2
    # sample 2: p = (0.1, 0.2, 0.7), target 2 -> pt 0.7, alpha 3
    loss = losses.build_loss("weighted_focal", alpha=[2.0, 1.0, 3.0], gamma=2.0)
    value = loss(logits_of([0.5, 0.25, 0.25], [0.1, 0.2, 0.7]), torch.tensor([0, 2]))
    first = -((1 - 0.5) ** 2) * 2.0 * math.log(0.5)  # 0.34657
    second = -((1 - 0.7) ** 2) * 3.0 * math.log(0.7)  # 0.09630
    assert float(value) == pytest.approx((first + second) / 2, rel=1e-5)
    assert float(value) == pytest.approx(0.221438, abs=1e-5)


def test_weighted_focal_defaults_are_flambys():
    loss = losses.build_loss("weighted_focal")
    assert loss.gamma == 2.0
    assert loss.alpha.tolist() == pytest.approx([5.5813, 2.0472, 7.0204, 26.1194, 9.5369, 101.0707, 92.5224, 38.3443])
    logits = logits_of([0.6] + [0.4 / 7] * 7)
    expected = -(0.4**2) * 5.5813 * math.log(0.6)
    assert float(loss(logits, torch.tensor([0]))) == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="8 class weights but the logits have 3 classes"):
        loss(torch.zeros(2, 3), torch.tensor([0, 1]))


def test_weighted_focal_with_gamma_zero_and_unit_weights_is_cross_entropy():
    torch.manual_seed(0)
    logits, targets = torch.randn(6, 4), torch.tensor([0, 1, 2, 3, 1, 0])
    focal = losses.WeightedFocalLoss(alpha=[1.0] * 4, gamma=0.0)
    assert float(focal(logits, targets)) == pytest.approx(float(nn.CrossEntropyLoss()(logits, targets)), rel=1e-6)


def test_weighted_focal_per_pixel_and_gradients():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 4, 5, requires_grad=True)
    targets = torch.randint(0, 3, (2, 4, 5))
    alpha = torch.tensor([1.0, 2.0, 0.5])
    value = losses.WeightedFocalLoss(alpha=alpha, gamma=1.5)(logits, targets)
    log_p = torch.log_softmax(logits.detach(), dim=1)
    log_pt = log_p.gather(1, targets.unsqueeze(1)).squeeze(1)
    expected = (-((1 - log_pt.exp()) ** 1.5) * alpha[targets] * log_pt).mean()
    assert float(value.detach()) == pytest.approx(float(expected), rel=1e-5)
    value.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0


def test_bad_arguments_and_unknown_loss():
    with pytest.raises(ValueError, match="gamma"):
        losses.WeightedFocalLoss(alpha=[1.0, 1.0], gamma=-1.0)
    with pytest.raises(ValueError, match="alpha"):
        losses.WeightedFocalLoss(alpha=[1.0, -2.0])
    with pytest.raises(ValueError, match="unknown loss 'dice'.*cross_entropy, weighted_focal"):
        losses.build_loss("dice")
    assert isinstance(losses.build_loss("cross_entropy"), nn.CrossEntropyLoss)
    assert losses.LOSSES == ("cross_entropy", "weighted_focal")


def test_trainer_builds_the_focal_loss_from_its_config():
    config = TrainConfig(loss="weighted_focal", loss_args={"alpha": [1.0, 3.0], "gamma": 2.0}, lr=5e-4, device="cpu")
    trainer = LocalTrainer(config)
    assert isinstance(trainer.loss_fn, losses.WeightedFocalLoss)
    model = nn.Linear(4, 2)
    data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.tensor([0, 1] * 4))
    record = trainer.train(model, data, seed=0)
    assert record["train_samples"] == 8 and math.isfinite(record["train_loss"])
