"""The proximal term (FedProx / Ditto / FedCAP Eq. 7) on a tiny linear layer by hand."""

import pytest
import torch
from torch import nn

from lightyear.training.regularizers import check_mu, parameter_snapshot, proximal_term


def linear():
    layer = nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 2.0]]))
        layer.bias.copy_(torch.tensor([0.5]))
    return layer


def test_value_and_gradient_by_hand():
    layer = linear()
    ref = {"weight": torch.tensor([[0.0, 0.0]]), "bias": torch.tensor([0.5])}
    term = proximal_term(layer, ref, mu=0.2)
    # ||w - w_ref||^2 = 1^2 + 2^2 + 0^2 = 5 -> 0.2 / 2 * 5 = 0.5
    assert term.item() == pytest.approx(0.5)
    term.backward()
    # d/dw mu/2 ||w - r||^2 = mu (w - r) = 0.2 * [1, 2]; bias equals its reference -> 0
    assert layer.weight.grad.flatten().tolist() == pytest.approx([0.2, 0.4])
    assert layer.bias.grad.tolist() == [0.0]


def test_snapshot_reference_and_buffers_are_ignored():
    model = nn.Sequential(linear(), nn.BatchNorm1d(1))
    ref = parameter_snapshot(model)
    assert sorted(ref) == ["0.bias", "0.weight", "1.bias", "1.weight"]  # no running stats
    assert proximal_term(model, ref, mu=1.0).item() == 0.0
    with torch.no_grad():
        model[0].weight[0, 1] += 3.0  # the snapshot must not follow the model
        model[1].running_mean += 100.0  # buffers are not parameters
    # 1/2 * 3^2 = 4.5
    assert proximal_term(model, ref, mu=1.0).item() == pytest.approx(4.5)
    assert not ref["0.weight"].requires_grad


def test_mu_zero_and_bad_inputs():
    layer = linear()
    assert proximal_term(layer, {"weight": torch.zeros(1, 2), "bias": torch.zeros(1)}, mu=0).item() == 0.0
    with pytest.raises(ValueError, match="mu"):
        check_mu(-0.1)
    with pytest.raises(ValueError, match="no entry for parameter 'bias'"):
        proximal_term(layer, {"weight": torch.zeros(1, 2)}, mu=0.1)
    with pytest.raises(ValueError, match="shape"):
        proximal_term(layer, {"weight": torch.zeros(2, 1), "bias": torch.zeros(1)}, mu=0.1)
