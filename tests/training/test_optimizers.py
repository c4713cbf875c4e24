"""The site optimizers step exactly as torch.optim's Adam and SGD, without importing PyTorch's compiler."""

import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from lightyear.training import optimizers

CUSTOM = os.path.join(os.path.dirname(__file__), "..", "..", "custom")


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
    net.add_module("late", nn.Linear(3, 2))  # used only from the third step on: its state starts late
    return net


def _steps(net: nn.Module, optimizer, steps: int = 6) -> None:
    gen = torch.Generator().manual_seed(11)
    for step in range(steps):
        x, y = torch.randn(8, 5, generator=gen), torch.randint(0, 3, (8,), generator=gen)
        optimizer.zero_grad()
        out = net[2](net[1](net[0](x)))
        loss = nn.functional.cross_entropy(out, y)
        if step >= 2:
            loss = loss + net.late(out).square().mean()
        loss.backward()
        optimizer.step()


def _same_to_the_bit(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
def test_adam_moves_the_weights_exactly_as_torch_optim_adam(foreach, weight_decay):
    ours, theirs = _net(3), _net(3)
    _steps(ours, optimizers.Adam(ours.parameters(), lr=2e-3, weight_decay=weight_decay))
    _steps(theirs, torch.optim.Adam(theirs.parameters(), lr=2e-3, weight_decay=weight_decay, foreach=foreach))
    assert _same_to_the_bit(ours, theirs)
    assert not _same_to_the_bit(ours, _net(3))  # it did train


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize(("momentum", "weight_decay"), [(0.9, 1e-2), (0.0, 1e-2), (0.9, 0.0)])
def test_sgd_moves_the_weights_exactly_as_torch_optim_sgd(foreach, momentum, weight_decay):
    ours, theirs = _net(4), _net(4)
    _steps(ours, optimizers.SGD(ours.parameters(), lr=0.05, momentum=momentum, weight_decay=weight_decay))
    _steps(
        theirs,
        torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=momentum, weight_decay=weight_decay, foreach=foreach),
    )
    assert _same_to_the_bit(ours, theirs)
    assert not _same_to_the_bit(ours, _net(4))


def test_a_parameter_without_a_gradient_is_left_alone_and_has_no_state_yet():
    net = _net(5)
    before = net.late.weight.detach().clone()
    adam = optimizers.Adam(net.parameters(), lr=1e-2, weight_decay=1e-2)
    _steps(net, adam, steps=2)  # "late" gets no gradient in the first two steps
    assert torch.equal(net.late.weight, before)
    assert net.late.weight not in adam.state
    assert float(adam.state[net[0].weight]["step"]) == 2.0


def test_settings_the_optimizers_cannot_honour_are_refused():
    with pytest.raises(ValueError, match="no parameters"):
        optimizers.Adam([], lr=1e-3)
    with pytest.raises(ValueError, match="complex"):
        optimizers.SGD([nn.Parameter(torch.zeros(2, dtype=torch.complex64))], lr=1e-3)


def test_training_a_round_does_not_import_the_compiler_stack():
    # torch.optim's classes import torch._dynamo on their first step: 1.2 s of CPU in every site process
    code = (
        "import sys, torch\n"
        "from torch.utils.data import TensorDataset\n"
        "from lightyear.training.trainer import LocalTrainer, TrainConfig\n"
        "data = TensorDataset(torch.randn(20, 4), torch.randint(0, 3, (20,)))\n"
        "for name in ('adam', 'sgd'):\n"
        "    trainer = LocalTrainer(TrainConfig(optimizer=name, batch_size=8, device='cpu'))\n"
        "    trainer.train(torch.nn.Linear(4, 3), data, seed=1)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.path.abspath(CUSTOM)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
