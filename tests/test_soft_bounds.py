"""The tile bounds of the soft products (probabilistic precision and recall): the float32 block
sums and their error term against float64 sums, and the skipped tiles of settled queries."""

import numpy as np
import pytest
import torch

from lightning_prd.functional.knn import bounds, soft
from lightning_prd.functional.knn.bounds import Bound


@pytest.mark.parametrize("n", [1, 7, 255, 256, 257, 1000, 4999])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_block_sum_within_its_error_bound(n, dim, dtype):
    g = torch.Generator().manual_seed(n)
    y = torch.rand(n, 3, generator=g).to(dtype)
    y[0] = 1.0  # the clamp's upper end
    y = y if dim == 0 else y.T.contiguous()
    total, err = soft._block_sum(y, dim)
    want = y.double().numpy().sum(dim)  # exact enough: float64 sum of float32 values
    assert total.dtype == torch.float64 and total.shape == (3,)
    assert np.all(np.abs(total.numpy() - want) <= err)
    assert err <= (n + 256) * 256 * 2.0**-24 * 1.01  # the bound is gamma_255 per term, not more


@pytest.mark.parametrize("n", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("dim", [0, 1])
def test_block_sums_of_float64_tiles_keep_float64_accuracy(n, dim):
    # the kernel sums' use: runs summed in the tile's own dtype (float64 here), the rest in float64
    g = torch.Generator().manual_seed(n)
    y = torch.rand(n, 5, generator=g, dtype=torch.float64) * 1e3 + 1.0
    y = y if dim == 0 else y.T.contiguous()
    total = bounds.block_sums(y, dim, 64, torch.float64)
    want = np.sum(y.numpy(), axis=dim)
    assert total.dtype == torch.float64 and total.shape == (5,)
    np.testing.assert_allclose(total.numpy(), want, rtol=1e-14, atol=0)


def _tile(real, fake):
    return torch.cdist(real.double(), fake.double()).square().float()


def test_saturated_queries_skip_later_tiles_and_stay_exact():
    g = torch.Generator().manual_seed(3)
    real, fake = torch.randn(40, 64, generator=g), torch.randn(50, 64, generator=g)
    r_sq = float(torch.cdist(real.double(), fake.double()).max()) ** 2  # every pair inside R
    acc = soft.SoftProducts(40, 50, r_sq, r_sq, real.device)
    tau = torch.full((20,), 1e-3, dtype=torch.float64)
    for i0 in (0, 20):  # two row blocks: the columns (fakes) see two tiles
        rs = slice(i0, i0 + 20)
        acc.update(rs, slice(0, 50), _tile(real[rs], fake), Bound(0.0, None, tau), None)
        if i0 == 0:
            after_first = acc.cols[0].clone()
    # 20 terms of log(d / R) do not settle a fake: its second tile is added
    assert bool((after_first > soft.SATURATED).all())
    assert bool((acc.cols[0] < after_first).all())
    p_fake, p_real = acc.finish(real, fake)
    np.testing.assert_array_equal(p_fake.numpy(), soft.exact_soft(fake, real, torch.arange(50), r_sq).numpy())
    np.testing.assert_array_equal(p_real.numpy(), soft.exact_soft(real, fake, torch.arange(40), r_sq).numpy())

    # once every fake's bound is below SATURATED, a tile leaves the fakes' bounds as they are
    acc.cols[0].fill_(soft.SATURATED - 1.0)
    acc.rows[0].fill_(soft.SATURATED - 1.0)
    before = (acc.cols[0].clone(), acc.rows[0].clone())
    acc.update(slice(0, 20), slice(0, 50), _tile(real[:20], fake), Bound(0.0, None, tau), None)
    assert torch.equal(acc.cols[0], before[0]) and torch.equal(acc.rows[0], before[1])
    p_fake, p_real = acc.finish(real, fake)
    assert bool((p_fake == 1.0).all()) and bool((p_real == 1.0).all())
