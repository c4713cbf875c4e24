"""The networks of the Camelyon17, ISIC 2019 and segmentation setups: forward passes and weights."""

import pytest
import torch
from torch import nn

from lightyear.models import build_model
from lightyear.models.efficientnet import build as build_efficientnet
from lightyear.models.transunet import TransUNet


def n_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_densenet121_on_camelyon_patches():
    model = build_model("densenet121", num_classes=2, in_channels=3, seed=0).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 96, 96))
    assert out.shape == (2, 2)
    assert 6.9e6 < n_parameters(model) < 7.0e6
    with pytest.raises(ValueError, match="download"):
        build_model("densenet121", num_classes=2, in_channels=3, pretrained=True)


def test_efficientnet_b0_on_isic_crops():
    model = build_model("efficientnet_b0", num_classes=8, in_channels=3, seed=0).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 200, 200))
    assert out.shape == (2, 8)
    assert 4.0e6 < n_parameters(model) < 4.1e6


def test_efficientnet_loads_local_weights_and_replaces_the_classifier(tmp_path):
    torch.manual_seed(0)
    source = build_efficientnet(num_classes=1000)  # an ImageNet-shaped file, as torchvision ships it
    path = tmp_path / "efficientnet_b0.pth"
    torch.save(source.state_dict(), path)

    model = build_efficientnet(num_classes=8, weights_path=str(path))
    own = model.state_dict()
    for key, value in source.state_dict().items():
        if not key.startswith("classifier."):
            assert torch.equal(own[key], value), key
    assert model.classifier[1].out_features == 8

    # a same-shaped checkpoint (wrapped, as a trainer saves it) loads completely
    trained = build_efficientnet(num_classes=8)
    wrapped = tmp_path / "trained.pt"
    torch.save({"state_dict": {f"module.{k}": v for k, v in trained.state_dict().items()}}, wrapped)
    again = build_efficientnet(num_classes=8, weights_path=str(wrapped))
    assert torch.equal(again.classifier[1].weight, trained.classifier[1].weight)

    # one input channel: the stem averages the RGB filters
    gray = build_efficientnet(num_classes=8, in_channels=1, weights_path=str(path))
    stem = source.state_dict()["features.0.0.weight"]
    assert torch.allclose(gray.features[0][0].weight, stem.sum(dim=1, keepdim=True))
    assert gray(torch.randn(2, 1, 64, 64)).shape == (2, 8)


def test_efficientnet_weights_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist.*download.pytorch.org"):
        build_efficientnet(num_classes=8, weights_path=str(tmp_path / "missing.pth"))
    other = tmp_path / "other.pth"
    torch.save(nn.Linear(3, 2).state_dict(), other)
    with pytest.raises(ValueError, match="lacks .* EfficientNet-B0 weights"):
        build_efficientnet(num_classes=8, weights_path=str(other))


def test_transunet_segments_64x64():
    model = build_model("transunet", num_classes=2, in_channels=1, seed=0)
    assert 2.4e6 < n_parameters(model) < 2.7e6
    x = torch.randn(2, 1, 64, 64)
    out = model(x)
    assert out.shape == (2, 2, 64, 64)
    loss = nn.functional.cross_entropy(out, torch.randint(0, 2, (2, 64, 64)))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(x), model(x))
    with pytest.raises(ValueError, match="64x64"):
        model(torch.randn(1, 1, 32, 32))


def test_transunet_is_configurable_and_seeded():
    small = TransUNet(
        num_classes=3,
        in_channels=3,
        img_size=32,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        mlp_dim=128,
        decoder_norm="group",
    )
    assert small(torch.randn(1, 3, 32, 32)).shape == (1, 3, 32, 32)
    a = build_model("transunet", num_classes=2, seed=5).state_dict()
    b = build_model("transunet", num_classes=2, seed=5).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="divisible by 16"):
        TransUNet(img_size=40)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        TransUNet(hidden_size=100, num_heads=3)


def test_the_cnn_pools_channels_last_without_autograd_and_gives_the_same_outputs_to_the_bit(monkeypatch):
    from lightyear.models import femnist_cnn

    model = build_model("cnn", num_classes=10, in_channels=1, seed=0).eval()
    x = torch.randn(9, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    x[:3] = 0.0  # flat images: ties in every pooling window
    x[4, 0, 5, 5] = float("nan")
    reference = nn.Sequential(*[nn.MaxPool2d(2) if isinstance(m, nn.MaxPool2d) else m for m in model.features])
    reference.load_state_dict(model.features.state_dict())
    seen = []
    pool = femnist_cnn.nn.functional.max_pool2d

    def spy(t, *args, **kwargs):
        seen.append(t.is_contiguous() and not t.is_contiguous(memory_format=torch.channels_last))
        return pool(t, *args, **kwargs)

    monkeypatch.setattr(torch.nn.modules.pooling.F, "max_pool2d", spy)
    with torch.no_grad():
        got, expected = model.features(x), reference(x)
    assert seen == [False, False, True, True]  # this network's pools got channels-last input, nn.MaxPool2d the usual
    assert got.is_contiguous() and torch.equal(torch.nan_to_num(got, nan=7.0), torch.nan_to_num(expected, nan=7.0))
    assert torch.isnan(got[4]).any() and torch.isnan(expected[4]).any()
    seen.clear()
    trained = model.train().features(x[5:])  # with autograd: the usual kernel, and a gradient
    assert seen == [True, True] and trained.requires_grad
    assert [k for k in model.state_dict()] == [k for k in build_model("cnn", 10, 1, seed=0).state_dict()]
