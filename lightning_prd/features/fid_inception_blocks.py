"""The TensorFlow FID InceptionV3 graph (``inception-2015-12-05``) as plain torch modules, no torchvision.

The layers, their names and the state-dict keys are those of pytorch-fid's ``fid_inception_v3()``
(torchvision's ``Inception3(num_classes=1008, aux_logits=False)`` with the blocks replaced by
``FIDInceptionA/C/E_1/E_2``) and of torch-fidelity's ``FeatureExtractorInceptionV3``; both tools
ship the same state dict converted from the TensorFlow graph. Where the FID graph differs from
torchvision's Inception3:

* the average pool of the pool branch of ``Mixed_5b..5d`` (A), ``Mixed_6b..6e`` (C) and
  ``Mixed_7b`` (E_1) does not count the zero padding (``count_include_pad=False``), as
  TensorFlow's ``avg_pool`` with ``SAME`` padding;
* ``Mixed_7c`` (E_2) max-pools in its pool branch (3 x 3, stride 1, padding 1);
* the classifier has 1,008 classes (``fc``), no auxiliary head.

Every convolution has no bias and is followed by batch normalisation with ``eps = 0.001`` and a
ReLU (``BasicConv2d``: the graph's ``conv2d_params``, ``batchnorm`` and ``conv`` ops). The input is
``[B, 3, 299, 299]`` already normalised; :class:`FIDInceptionNet` returns the 2,048-D ``pool_3``
features and, on request, the output of ``Mixed_6d`` whose first 192 channels are its 1 x 1
branch ``Mixed_6d.branch1x1``, the graph's ``mixed_6/conv`` (used by sFID).

Example:
    >>> import torch
    >>> net = FIDInceptionNet().eval()
    >>> sorted(net.state_dict())[:2]
    ['Conv2d_1a_3x3.bn.bias', 'Conv2d_1a_3x3.bn.num_batches_tracked']
    >>> tuple(net.fc.weight.shape)
    (1008, 2048)
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

NUM_CLASSES = 1008
BN_EPS = 0.001


class BasicConv2d(nn.Module):
    """Convolution (no bias), batch norm (``eps = 0.001``) and ReLU: one layer of the graph."""

    def __init__(self, in_channels: int, out_channels: int, **kwargs: Any) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=BN_EPS)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


def _avg_pool(x: Tensor) -> Tensor:
    """The pool branch's 3 x 3 average, padding excluded from the count (TensorFlow ``SAME``)."""
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)


class InceptionA(nn.Module):
    """``Mixed_5b``, ``5c``, ``5d`` (the graph's ``mixed``, ``mixed_1``, ``mixed_2``)."""

    def __init__(self, in_channels: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(in_channels, 64, kernel_size=1)
        self.branch5x5_1 = BasicConv2d(in_channels, 48, kernel_size=1)
        self.branch5x5_2 = BasicConv2d(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(in_channels, pool_features, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(_avg_pool(x))
        return torch.cat([b1, b5, b3, bp], 1)


class InceptionB(nn.Module):
    """``Mixed_6a`` (``mixed_3``): the grid reduction 35 -> 17."""

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(in_channels, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3(x)
        b3d = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([b3, b3d, bp], 1)


class InceptionC(nn.Module):
    """``Mixed_6b`` .. ``6e`` (``mixed_4`` .. ``mixed_7``): factorised 7 x 7 convolutions."""

    def __init__(self, in_channels: int, channels_7x7: int) -> None:
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = BasicConv2d(in_channels, 192, kernel_size=1)
        self.branch7x7_1 = BasicConv2d(in_channels, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(in_channels, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(in_channels, 192, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        b7d = self.branch7x7dbl_1(x)
        for layer in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            b7d = layer(b7d)
        bp = self.branch_pool(_avg_pool(x))
        return torch.cat([b1, b7, b7d, bp], 1)


class InceptionD(nn.Module):
    """``Mixed_7a`` (``mixed_8``): the grid reduction 17 -> 8."""

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(in_channels, 192, kernel_size=1)
        self.branch3x3_2 = BasicConv2d(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(in_channels, 192, kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, kernel_size=3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        bp = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([b3, b7, bp], 1)


class InceptionE(nn.Module):
    """``Mixed_7b`` (``mixed_9``, ``pool="avg"``) and ``Mixed_7c`` (``mixed_10``, ``pool="max"``)."""

    def __init__(self, in_channels: int, pool: str) -> None:
        super().__init__()
        if pool not in ("avg", "max"):
            raise ValueError(f"Expected argument `pool` to be 'avg' or 'max', but got {pool!r}")
        self.pool = pool
        self.branch1x1 = BasicConv2d(in_channels, 320, kernel_size=1)
        self.branch3x3_1 = BasicConv2d(in_channels, 384, kernel_size=1)
        self.branch3x3_2a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(in_channels, 448, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(in_channels, 192, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        b3d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        b3d = torch.cat([self.branch3x3dbl_3a(b3d), self.branch3x3dbl_3b(b3d)], 1)
        pooled = _avg_pool(x) if self.pool == "avg" else F.max_pool2d(x, kernel_size=3, stride=1, padding=1)
        return torch.cat([b1, b3, b3d, self.branch_pool(pooled)], 1)


class FIDInceptionNet(nn.Module):
    """The FID InceptionV3 on a normalised ``[B, 3, 299, 299]`` input (module docstring).

    ``forward(x)`` returns the ``pool_3`` features ``[B, 2048]``; ``forward(x, with_mixed_6d=True)``
    returns ``(pool, mixed_6d)`` with ``mixed_6d`` the ``[B, 768, 17, 17]`` output of ``Mixed_6d``.
    ``fc`` (1,008 classes) is applied by the caller.
    """

    def __init__(self) -> None:
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, kernel_size=3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, kernel_size=3)
        self.Mixed_5b = InceptionA(192, pool_features=32)
        self.Mixed_5c = InceptionA(256, pool_features=64)
        self.Mixed_5d = InceptionA(288, pool_features=64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, channels_7x7=128)
        self.Mixed_6c = InceptionC(768, channels_7x7=160)
        self.Mixed_6d = InceptionC(768, channels_7x7=160)
        self.Mixed_6e = InceptionC(768, channels_7x7=192)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280, pool="avg")
        self.Mixed_7c = InceptionE(2048, pool="max")
        self.fc = nn.Linear(2048, NUM_CLASSES)

    def stages(self) -> Tuple[List[nn.Module], List[nn.Module]]:
        """The layers up to and including ``Mixed_6d``, and the ones after it (pooling not included)."""
        first: List[nn.Module] = [self.Conv2d_1a_3x3, self.Conv2d_2a_3x3, self.Conv2d_2b_3x3]
        first += [self.Conv2d_3b_1x1, self.Conv2d_4a_3x3]
        first += [self.Mixed_5b, self.Mixed_5c, self.Mixed_5d, self.Mixed_6a, self.Mixed_6b, self.Mixed_6c]
        first += [self.Mixed_6d]
        return first, [self.Mixed_6e, self.Mixed_7a, self.Mixed_7b, self.Mixed_7c]

    def forward(self, x: Tensor, with_mixed_6d: bool = False) -> Any:
        first, rest = self.stages()
        for i, layer in enumerate(first):
            x = layer(x)
            if i == 2 or i == 4:  # after Conv2d_2b_3x3 and Conv2d_4a_3x3: the graph's pool and pool_1
                x = F.max_pool2d(x, kernel_size=3, stride=2)
        mixed_6d = x
        for layer in rest:
            x = layer(x)
        pool = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
        return (pool, mixed_6d) if with_mixed_6d else pool


def random_init_(net: FIDInceptionNet, generator: Optional[torch.Generator] = None) -> FIDInceptionNet:
    """Random weights that keep activations O(1) through the 94 layers (offline stand-in only).

    He-normal convolutions (fan-in, ReLU gain), batch norm as the identity (``gamma = 1``,
    ``beta = 0``, running mean 0 and variance 1), ``fc`` normal with std 0.01 and no bias.
    """
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu", generator=generator)
            elif isinstance(module, nn.BatchNorm2d):
                module.reset_parameters()
        nn.init.normal_(net.fc.weight, std=0.01, generator=generator)
        nn.init.zeros_(net.fc.bias)
    return net
