"""Every shipped network's declared symmetries preserve what it computes (torch, eval mode)."""

import numpy as np
import pytest
import torch

from lightyear.algorithms.attacks.reparametrise import TRANSFORMS, reparametrised
from lightyear.models import build_model, model_symmetries
from lightyear.training.weights import get_weights, set_weights

NETWORKS = [("cnn", 10, 1, 28), ("densenet121", 2, 3, 32), ("efficientnet_b0", 8, 3, 32), ("transunet", 2, 1, 64)]
# the large networks take seconds each: in the second tier
TIERED = [pytest.param(*n, id=n[0], marks=() if n[0] == "cnn" else pytest.mark.extended) for n in NETWORKS]


def network(name, classes, channels):
    """The network with non-trivial normalisation statistics and affine parameters, in eval mode."""
    net = build_model(name, classes, channels, seed=0)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.copy_(torch.rand(module.running_mean.shape, generator=generator) - 0.5)
                module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) + 0.5)
            if isinstance(module, (torch.nn.BatchNorm2d, torch.nn.GroupNorm, torch.nn.LayerNorm)):
                module.weight.copy_(torch.rand(module.weight.shape, generator=generator) + 0.5)
                module.bias.copy_(torch.rand(module.bias.shape, generator=generator) - 0.5)
    return net.eval()


@pytest.mark.parametrize("name, classes, channels, size", TIERED)
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_the_transformed_network_computes_the_same_outputs(name, classes, channels, size, transform):
    net = network(name, classes, channels)
    x = torch.randn(3, channels, size, size, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        before = net(x)
    weights = get_weights(net)
    groups = model_symmetries(name, weights)
    assert groups, f"{name} declares no symmetry"
    moved, fields = reparametrised(weights, groups, transform, 100.0, np.random.default_rng(3))
    copy = network(name, classes, channels)
    set_weights(copy, moved)
    with torch.no_grad():
        after = copy.eval()(x)
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-5 * float(before.abs().max()))
    changed = max(
        float(np.abs(moved[k].astype(np.float64) - weights[k]).max()) for k in weights if weights[k].dtype.kind == "f"
    )
    if name == "efficientnet_b0" and transform == "rescale":
        assert fields["attack_units"] == 0 and changed == 0.0  # SiLU: no unit admits rescaling
    else:
        assert fields["attack_units"] > 0 and changed > 0.1  # the parameters did move


@pytest.mark.extended
def test_only_the_networks_with_homogeneous_activations_admit_rescaling():
    scalable = {
        name: any(g.scalable for g in model_symmetries(name, get_weights(build_model(name, k, c, seed=0))))
        for name, k, c, _ in NETWORKS
    }
    assert scalable == {"cnn": True, "densenet121": True, "efficientnet_b0": False, "transunet": True}


def test_an_unknown_network_is_refused():
    with pytest.raises(ValueError, match="unknown model 'resnet'"):
        model_symmetries("resnet", {})
