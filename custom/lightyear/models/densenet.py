"""DenseNet-121 for the Camelyon17 patches of the LIGHTYEAR setup.

Reference: Huang et al., "Densely Connected Convolutional Networks", CVPR 2017; the network
is MONAI's :class:`monai.networks.nets.DenseNet121` (growth rate 32, blocks (6, 12, 24, 16),
64 initial features) with ``spatial_dims=2``. Camelyon17-WILDS trains DenseNet-121 from
scratch on 96x96 RGB patches; its global average pooling accepts any input size.
About 6.96 M parameters for 2 classes and 3 input channels.
"""

from __future__ import annotations

from monai.networks.nets import DenseNet121


def build(num_classes: int, in_channels: int = 3, **kwargs) -> DenseNet121:
    """Registry entry point (see :func:`lightyear.models.build_model`).

    ``kwargs`` go to MONAI's DenseNet121 (e.g. ``dropout_prob``); weights start at random,
    since nothing is downloaded at run time.
    """
    if kwargs.pop("pretrained", False):
        raise ValueError("densenet121 is trained from scratch here: pretrained weights would need a download at run time")
    return DenseNet121(spatial_dims=2, in_channels=in_channels, out_channels=num_classes, **kwargs)
