"""A small TransUNet for the 64x64 segmentation tasks of the LIGHTYEAR setup, after Chen et al., "TransUNet:
Transformers Make Strong Encoders for Medical Image Segmentation", arXiv:2102.04306 (2021), and "TransUNet: Rethinking
the U-Net architecture design for medical image segmentation through the lens of transformers", Medical Image Analysis
2024 (github.com/Beckschen/TransUNet): its R50-ViT-B_16 layout scaled down to a CPU, four GroupNorm residual stages
(skips at 1/2, 1/4, 1/8), a token per position of the 1/16 map through pre-norm ViT layers (PyTorch's
``TransformerEncoderLayer``: MONAI's ``TransformerBlock`` needs ``einops``) and a cascaded upsampler. The CNN is narrow
as at 64x64 it, not the 16-token transformer, sets the training time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from monai.networks.blocks import Convolution, PatchEmbeddingBlock, UnetResBlock
from torch import nn

from lightyear.algorithms.symmetries import Slot, UnitGroup

DOWNSAMPLING = 16


def group_norm(channels: int, max_groups: int = 8) -> tuple:
    """MONAI's norm spec for GroupNorm with the largest group count <= ``max_groups`` dividing ``channels``."""
    groups = next(g for g in range(min(max_groups, channels), 0, -1) if channels % g == 0)
    return ("group", {"num_groups": groups})


def _norm(name: str, channels: int):
    if name == "group":
        return group_norm(channels)
    if name in ("batch", "instance"):
        return name
    raise ValueError(f"decoder_norm must be 'batch', 'instance' or 'group', got {name!r}")


def conv_norm_relu(in_channels: int, out_channels: int, norm: str) -> Convolution:
    """3x3 convolution, normalisation and ReLU (the reference's ``Conv2dReLU``)."""
    return Convolution(
        spatial_dims=2,
        in_channels=in_channels,
        out_channels=out_channels,
        kernel_size=3,
        adn_ordering="NA",
        act="RELU",
        norm=_norm(norm, out_channels),
        bias=False,
    )


class DecoderBlock(nn.Module):
    """Upsample x2 (bilinear), concatenate the skip feature (if any), two conv-norm-ReLU."""

    def __init__(self, in_channels: int, skip_channels: int, out_channels: int, norm: str):
        super().__init__()
        self.upsample = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv1 = conv_norm_relu(in_channels + skip_channels, out_channels, norm)
        self.conv2 = conv_norm_relu(out_channels, out_channels, norm)

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None) -> torch.Tensor:
        x = self.upsample(x)
        if skip is not None:
            x = torch.cat([x, skip], dim=1)
        return self.conv2(self.conv1(x))


class TransUNet(nn.Module):
    """Hybrid CNN-transformer encoder with a cascaded upsampling decoder (see the module docstring)."""

    def __init__(
        self,
        num_classes: int = 2,
        in_channels: int = 1,
        img_size: int = 64,
        encoder_channels: Sequence[int] = (16, 32, 64, 128),
        hidden_size: int = 192,
        num_layers: int = 4,
        num_heads: int = 4,
        mlp_dim: int = 768,
        dropout: float = 0.1,
        head_channels: int = 128,
        decoder_channels: Sequence[int] = (64, 32, 16, 16),
        decoder_norm: str = "batch",
    ):
        super().__init__()
        encoder_channels, decoder_channels = tuple(encoder_channels), tuple(decoder_channels)
        if img_size % DOWNSAMPLING or img_size < DOWNSAMPLING:
            raise ValueError(f"TransUNet needs an image size divisible by {DOWNSAMPLING}, got {img_size}")
        if len(encoder_channels) != 4 or len(decoder_channels) != 4:
            raise ValueError(
                f"TransUNet has 4 encoder and 4 decoder stages; got encoder_channels={encoder_channels}, "
                f"decoder_channels={decoder_channels}"
            )
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
        _norm(decoder_norm, 1)
        self.img_size = img_size
        self.grid = img_size // DOWNSAMPLING

        stages, previous = [], in_channels
        for channels in encoder_channels:
            stages.append(UnetResBlock(2, previous, channels, kernel_size=3, stride=2, norm_name=group_norm(channels)))
            previous = channels
        self.encoder = nn.ModuleList(stages)

        self.embedding = PatchEmbeddingBlock(
            in_channels=encoder_channels[-1],
            img_size=self.grid,
            patch_size=1,
            hidden_size=hidden_size,
            num_heads=num_heads,
            proj_type="conv",
            pos_embed_type="learnable",
            dropout_rate=dropout,
            spatial_dims=2,
        )
        self.transformer = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden_size,
                num_heads,
                dim_feedforward=mlp_dim,
                dropout=dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            for _ in range(num_layers)
        )
        self.encoder_norm = nn.LayerNorm(hidden_size)

        self.conv_more = conv_norm_relu(hidden_size, head_channels, decoder_norm)
        skip_channels = (encoder_channels[2], encoder_channels[1], encoder_channels[0], 0)
        inputs = (head_channels, *decoder_channels[:-1])
        self.decoder = nn.ModuleList(
            DecoderBlock(i, s, o, decoder_norm) for i, s, o in zip(inputs, skip_channels, decoder_channels)
        )
        self.segmentation_head = nn.Conv2d(decoder_channels[-1], num_classes, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2:] != (self.img_size, self.img_size):
            raise ValueError(
                f"this TransUNet was built for {self.img_size}x{self.img_size} inputs (img_size), "
                f"got {tuple(x.shape[-2:])}"
            )
        skips = []
        for stage in self.encoder:
            x = stage(x)
            skips.append(x)
        tokens = self.embedding(skips[-1])
        for block in self.transformer:
            tokens = block(tokens)
        tokens = self.encoder_norm(tokens)
        n, _, hidden = tokens.shape
        x = tokens.transpose(1, 2).reshape(n, hidden, self.grid, self.grid)
        x = self.conv_more(x)
        decoder_skips = (skips[2], skips[1], skips[0], None)
        for block, skip in zip(self.decoder, decoder_skips):
            x = block(x, skip)
        return self.segmentation_head(x)


def build(num_classes: int, in_channels: int = 1, **kwargs) -> TransUNet:
    """Registry entry point (:func:`lightyear.models.build_model`); ``kwargs`` configure :class:`TransUNet`."""
    return TransUNet(num_classes=num_classes, in_channels=in_channels, **kwargs)


def _norm_slots(prefix: str, power: int, stats: bool) -> tuple[Slot, ...]:
    slots = (Slot(f"{prefix}.weight", 0, power), Slot(f"{prefix}.bias", 0, power))
    return slots + ((Slot(f"{prefix}.running_mean", 0, 0), Slot(f"{prefix}.running_var", 0, 0)) if stats else ())


def symmetries(shapes: Mapping[str, tuple], num_heads: int = 4, **model_args) -> list[UnitGroup]:
    """The exact symmetries of :class:`TransUNet` (``lightyear.algorithms.attacks.reparametrise``): encoder conv1
    channels (rescaled; permuted within GroupNorm groups), attention heads (permuted), query/key dimensions (scaled by
    c, 1/c; permuted alike), value dimensions and decoder channels (rescaled, permuted), MLP units (permuted only)."""
    groups = []
    stage = 0
    while f"encoder.{stage}.conv1.conv.weight" in shapes:
        prefix = f"encoder.{stage}"
        units = shapes[f"{prefix}.conv1.conv.weight"][0]
        groups.append(
            UnitGroup(
                f"{prefix} conv1",
                units,
                (
                    Slot(f"{prefix}.conv1.conv.weight", 0, 0),
                    *_norm_slots(f"{prefix}.norm1", 1, False),
                    Slot(f"{prefix}.conv2.conv.weight", 1, -1),
                ),
                block=units // int(group_norm(units)[1]["num_groups"]),
            )
        )
        stage += 1
    layer = 0
    while f"transformer.{layer}.self_attn.in_proj_weight" in shapes:
        groups.extend(_attention_symmetries(shapes, f"transformer.{layer}", num_heads))
        layer += 1
    convs = ["conv_more"] + [
        f"decoder.{b}.{c}"
        for b in range(len(shapes))
        for c in ("conv1", "conv2")
        if f"decoder.{b}.{c}.conv.weight" in shapes
    ]
    for producer, reader in zip(convs, convs[1:] + ["segmentation_head"]):
        units = shapes[f"{producer}.conv.weight"][0]
        reads = f"{reader}.weight" if reader == "segmentation_head" else f"{reader}.conv.weight"
        stats = f"{producer}.adn.N.running_mean" in shapes
        groups.append(
            UnitGroup(
                producer,
                units,
                (
                    Slot(f"{producer}.conv.weight", 0, 0),
                    *_norm_slots(f"{producer}.adn.N", 1, stats),
                    Slot(reads, 1, -1),
                ),
                block=None if stats else 1,
            )
        )
    return groups


def _attention_symmetries(shapes: Mapping[str, tuple], layer: str, num_heads: int) -> list[UnitGroup]:
    attn = f"{layer}.self_attn"
    width = shapes[f"{attn}.in_proj_weight"][1]
    head = width // num_heads
    packed, bias, out = f"{attn}.in_proj_weight", f"{attn}.in_proj_bias", f"{attn}.out_proj.weight"
    rows, biases = (3, width, width), (3, width)

    def qkv(part: int, power: int) -> tuple[Slot, ...]:
        return Slot(packed, 0, power, view=rows, part=part), Slot(bias, 0, power, view=biases, part=part)

    hidden = shapes[f"{layer}.linear1.weight"][0]
    return [
        UnitGroup(
            f"{attn} heads",
            num_heads,
            (  # a head's rows are reordered by the groups below: no matching on them
                Slot(packed, 1, 1, view=(3, num_heads, head, width)),
                Slot(bias, 1, 1, view=(3, num_heads, head)),
                Slot(out, 1, -1, view=(width, num_heads, head)),
            ),
            scalable=False,
        ),
        UnitGroup(f"{attn} query-key", width, qkv(0, 1) + qkv(1, -1), block=head),
        UnitGroup(f"{attn} value", width, qkv(2, 1) + (Slot(out, 1, -1),), block=head),
        UnitGroup(
            f"{layer} mlp",
            hidden,
            (
                Slot(f"{layer}.linear1.weight", 0, 1),
                Slot(f"{layer}.linear1.bias", 0, 1),
                Slot(f"{layer}.linear2.weight", 1, -1),
            ),
            scalable=False,
        ),
    ]
