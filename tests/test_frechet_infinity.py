"""FD∞ against a float64 NumPy/SciPy oracle that follows dgm-eval's ``compute_FD_infinity``
(``layer6ai-labs/dgm-eval``, ``dgm_eval/metrics/fd.py``: np.cov statistics, scipy ``sqrtm``, least squares in
1/N), case by case on the subsets our documented draw picks; dgm-eval itself is not on PyPI."""

import numpy as np
import pytest
import torch

from lightning_prd.functional import frechet_distance
from lightning_prd.functional.frechet_infinity import fd_infinity_sizes, frechet_distance_infinity

import oracle_memorization as om


def _draws(num_fake, sizes, seed):
    """The documented draws: subset i = torch.randperm(M, generator=g)[:sizes[i]], g seeded with ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randperm(num_fake, generator=g)[:n].numpy() for n in sizes]


def _sets(rng, n, m, dim):
    mix = torch.randn(dim, dim, generator=rng, dtype=torch.float64)
    real = torch.randn(n, dim, generator=rng, dtype=torch.float64) @ mix * 0.5
    fake = torch.randn(m, dim, generator=rng, dtype=torch.float64) @ (mix * 0.4 + 0.1) + 0.3
    return real, fake


@pytest.mark.parametrize("seed", [0, 5])
def test_equals_dgm_eval_oracle_on_unequal_sets(rng, seed):
    real, fake = _sets(rng, 700, 530, 6)
    out = frechet_distance_infinity(real, fake, seed=seed)
    sizes = out["frechet_distance_infinity_sizes"].tolist()
    assert sizes == om.dgm_eval_sizes(530).tolist()  # 15 sizes from min(5000, max(M // 10, 2)) to M
    intercept, slope, values = om.fd_infinity(real.numpy(), fake.numpy(), _draws(530, sizes, seed))
    np.testing.assert_allclose(out["frechet_distance_infinity_values"].numpy(), values, rtol=1e-9)
    assert float(out["frechet_distance_infinity"]) == pytest.approx(intercept, rel=1e-8)
    assert float(out["frechet_distance_infinity_slope"]) == pytest.approx(slope, rel=1e-8)
    # at the largest size every generated sample is used: the plain Fréchet distance
    assert float(out["frechet_distance_infinity_values"][-1]) == pytest.approx(float(frechet_distance(real, fake)))


def test_custom_sizes_and_float32_input(rng):
    real, fake = _sets(rng, 300, 260, 4)
    out = frechet_distance_infinity(real.float(), fake.float(), num_points=4, min_size=40, max_size=200, seed=3)
    sizes = out["frechet_distance_infinity_sizes"].tolist()
    assert sizes == [40, 93, 146, 200]
    assert out["frechet_distance_infinity"].dtype == torch.float64
    intercept, _, _ = om.fd_infinity(
        real.float().double().numpy(), fake.float().double().numpy(), _draws(260, sizes, 3)
    )
    assert float(out["frechet_distance_infinity"]) == pytest.approx(intercept, rel=1e-6)


def test_subsets_smaller_than_the_dimension(rng):
    # sizes below D: the eigenvalues come from the n x n Gram of the subset (same non-zero spectrum)
    real, fake = _sets(rng, 400, 150, 40)
    out = frechet_distance_infinity(real, fake, num_points=5, min_size=10, seed=2)
    sizes = out["frechet_distance_infinity_sizes"].tolist()
    assert sizes[0] < 40 < sizes[-1]
    intercept, slope, values = om.fd_infinity(real.numpy(), fake.numpy(), _draws(150, sizes, 2))
    # sqrtm of the singular product (rank < D) is the less accurate side: 1e-6, not 1e-9
    np.testing.assert_allclose(out["frechet_distance_infinity_values"].numpy(), values, rtol=1e-6)
    assert float(out["frechet_distance_infinity"]) == pytest.approx(intercept, rel=1e-6)


@pytest.mark.parametrize("m", [3, 7, 123, 10_000, 50_000, 70_001])
def test_default_sizes_are_dgm_eval_s(m):
    assert fd_infinity_sizes(m).tolist() == om.dgm_eval_sizes(m).tolist()


def test_seeded_and_seed_dependent(rng):
    real, fake = _sets(rng, 400, 300, 5)
    a, b = frechet_distance_infinity(real, fake, seed=1), frechet_distance_infinity(real, fake, seed=1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    c = frechet_distance_infinity(real, fake, seed=2)
    assert not torch.equal(a["frechet_distance_infinity_values"][:-1], c["frechet_distance_infinity_values"][:-1])


def test_removes_the_finite_sample_bias_of_gaussians():
    # real: exactly whitened (sample mean 0, sample covariance I), so the real side has no error of its own;
    # fake ~ N(0, 1.2^2 I): the population distance is D (1.2 - 1)^2
    g = torch.Generator().manual_seed(0)
    dim, m = 64, 4000
    z = torch.randn(6000, dim, generator=g, dtype=torch.float64)
    z = z - z.mean(0)
    real = z @ torch.linalg.inv(torch.linalg.cholesky(torch.cov(z.T))).T
    fake = 1.2 * torch.randn(m, dim, generator=g, dtype=torch.float64)
    truth = dim * 0.2**2
    out = frechet_distance_infinity(real, fake, seed=0)
    fd_inf, fd_m = float(out["frechet_distance_infinity"]), float(frechet_distance(real, fake))
    assert fd_inf < fd_m  # the bias of FD_N is positive: the line falls towards 1/N = 0
    assert abs(fd_inf - truth) < 0.3 * abs(fd_m - truth)
    assert float(out["frechet_distance_infinity_slope"]) > 0
    values = out["frechet_distance_infinity_values"]
    assert float(values[0]) > float(values[-1])  # FD_N falls with N


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(num_points=1), "`num_points`.*at least 2.*1"),
        (dict(min_size=1), "`min_size`.*at least 2.*1"),
        (dict(max_size=61), "`max_size`.*at most.*M = 60.*61"),
        (dict(min_size=30, max_size=30), "`min_size`.*below `max_size` = 30.*30"),
        (dict(seed=-1), "`seed`.*-1"),
        (dict(num_points=2.0), "`num_points`.*2.0"),
    ],
)
def test_bad_options_name_the_argument(options, match):
    with pytest.raises(ValueError, match=match):
        frechet_distance_infinity(torch.randn(50, 3), torch.randn(60, 3), **options)


def test_bad_sets_name_the_argument():
    with pytest.raises(ValueError, match="`real`.*at least 2"):
        frechet_distance_infinity(torch.randn(1, 3), torch.randn(60, 3))
    with pytest.raises(ValueError, match="same number of features"):
        frechet_distance_infinity(torch.randn(10, 3), torch.randn(60, 4))
    with pytest.raises(ValueError, match="`min_size`.*below `max_size` = 2"):
        frechet_distance_infinity(torch.randn(10, 3), torch.randn(2, 3))
