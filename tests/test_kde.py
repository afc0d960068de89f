"""The kernel density tiles of TopP&R (``knn.kde``): cosine kernel sums against a float64 NumPy
oracle for every share of pairs inside the bandwidth (the sparse and the dense tile), and the
sparse tile equal to the dense one."""

import math

import numpy as np
import pytest
import torch

from lightning_prd.functional.knn import kde


def _oracle(positions, data, h, weights):
    d = np.sqrt(((positions[:, None, :] - data[None, :, :]) ** 2).sum(-1))
    kern = np.where(d <= h, np.cos(math.pi / 2 * d / h), 0.0)
    return kern @ weights.T


@pytest.mark.parametrize("quantile", [0.0, 0.03, 0.4, 0.7, 1.0])  # share of pairs inside h
def test_cosine_kernel_sums_equal_the_oracle(quantile):
    g = torch.Generator().manual_seed(1)
    pos = torch.randn(230, 6, generator=g, dtype=torch.float64)
    data = 1.2 * torch.randn(170, 6, generator=g, dtype=torch.float64)
    weights = torch.cat([torch.ones(1, 170, dtype=torch.float64), torch.randint(0, 3, (4, 170), generator=g).double()])
    d = torch.cdist(pos, data).flatten().sort().values
    h = float(d[min(int(quantile * d.numel()), d.numel() - 1)]) * (1.0 if quantile else 0.5)
    got = kde.cosine_kernel_sums(pos, data, h, weights, block_bytes=32 * 64 * 64)  # 64 x 64 tiles
    want = _oracle(pos.numpy(), data.numpy(), h, weights.numpy())
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-11, atol=1e-12)


def test_sparse_tiles_equal_dense_tiles(monkeypatch):
    g = torch.Generator().manual_seed(2)
    pos = torch.randn(300, 8, generator=g, dtype=torch.float64)
    weights = torch.ones(2, 300, dtype=torch.float64)
    h = float(torch.cdist(pos, pos).flatten().sort().values[9000])  # about 10% of the pairs inside
    sparse = kde.cosine_kernel_sums(pos, pos, h, weights, block_bytes=32 * 100 * 100)
    monkeypatch.setattr(kde, "SPARSE_SHARE", -1.0)  # every tile dense
    dense = kde.cosine_kernel_sums(pos, pos, h, weights, block_bytes=32 * 100 * 100)
    torch.testing.assert_close(sparse, dense, rtol=1e-14, atol=0.0)
