"""Features at the edges of float32's and float64's ranges: every score equals the float64 oracle or raises.

float32 features whose squared distances pass float32's maximum (``~1e19`` at D = 8), or whose
squares underflow (``~1e-25``), are computed with float64 tiles (``compute_dtype``,
``fits_range``); just inside the range float32 tiles are used and stay exact. Scores
are compared with the NumPy oracles of ``tests/oracle.py`` (precision, recall, density,
coverage, realism, Fréchet, authenticity) or, for alpha-precision / beta-recall and PRD, with
the same function on the float64 copies of the features (no float32 arithmetic at all).
float64 features whose squared distances would leave float64's range raise ``ValueError``
(``check_float64_range``); Fréchet, Vendi and KID keep float64 exact by exact power-of-two
scaling where the score allows it.
"""

import re

import numpy as np
import pytest
import torch

import lightning_prd.functional as F
from lightning_prd.functional import (
    alpha_precision_beta_recall,
    authenticity,
    density_coverage,
    frechet_distance,
    prd_curve,
    precision_recall,
    realism_score,
)
from lightning_prd.functional.engine.inputs import compute_dtype, fits_range
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.kid import kid_summary

import oracle

pytestmark = pytest.mark.usefixtures("both_tile_paths")

#: scales on both sides of each edge at D = 8: float32 tiles below 1.2e18 and above 4e-15
SCALES = [1e-30, 1e-25, 1e-16, 1e-14, 1e17, 1e19, 1e30]


def _pair(scale: float, n: int = 200, dim: int = 8):
    g = torch.Generator().manual_seed(0)
    real = torch.randn(n, dim, generator=g, dtype=torch.float64) * scale
    fake = (torch.randn(n, dim, generator=g, dtype=torch.float64) * 1.2 + 0.3) * scale
    return real.float(), fake.float()


def _oracle_authenticity(real: np.ndarray, fake: np.ndarray) -> float:
    d = oracle.dist(fake, real)
    nearest = d.argmin(1)
    return float((d[np.arange(len(fake)), nearest] > oracle.kth_radius(real, 1)[nearest]).mean())


@pytest.mark.parametrize("scale", SCALES)
def test_knn_scores_equal_the_oracle_at_the_range_edges(scale):
    real, fake = _pair(scale)
    r, f = real.double().numpy(), fake.double().numpy()
    # (scores come in the compute dtype: float32 where the range allows; a sample is 1/200)
    got = [float(v) for v in precision_recall(real, fake, k=3) + density_coverage(real, fake, k=5)]
    expected = [float(v) for v in oracle.precision_recall(r, f, 3) + oracle.density_coverage(r, f, 5)]
    assert got == pytest.approx(expected, rel=1e-6)
    expected = oracle.realism(r, f, 3)
    np.testing.assert_allclose(knn_pass(real, fake, realism_k=3).cross.realism.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(realism_score(real, fake, k=3).numpy(), expected, rtol=1e-6)  # compute dtype
    assert float(authenticity(real, fake)) == pytest.approx(_oracle_authenticity(r, f), rel=1e-6)
    np.testing.assert_allclose(float(frechet_distance(real, fake)), oracle.frechet(r, f), rtol=1e-9)


@pytest.mark.parametrize("scale", [1e-25, 1e19])
def test_alpha_beta_and_prd_equal_the_float64_run_at_the_range_edges(scale):
    real, fake = _pair(scale)
    got, ref = alpha_precision_beta_recall(real, fake), alpha_precision_beta_recall(real.double(), fake.double())
    for key in ("alpha_precision_curve", "beta_recall_curve", "authenticity"):
        np.testing.assert_array_equal(got[key].double().numpy(), ref[key].double().numpy())
    got, ref = prd_curve(real, fake, num_clusters=10), prd_curve(real.double(), fake.double(), num_clusters=10)
    np.testing.assert_array_equal(got[0].numpy(), ref[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), ref[1].numpy())


def test_float32_range_rule_at_its_edges():
    dim, f32 = 8, torch.finfo(torch.float32)
    top = (f32.max / (8 * dim)) ** 0.5  # largest range R with 8 D R^2 <= max
    bottom = (16 * (dim + 2) * f32.tiny / f32.eps) ** 0.5  # smallest with eps R^2 >= 16 (D + 2) tiny
    column = torch.zeros(2, dim, dtype=torch.float64)
    for r, ok in ((top * 0.999, True), (top * 1.001, False), (bottom * 1.001, True), (bottom * 0.999, False)):
        x = column.clone()
        x[1, 3] = r
        assert fits_range(x.float()) is ok, r
        assert compute_dtype(x.float(), x.float(), None) == (torch.float32 if ok else torch.float64)
        assert compute_dtype(x.float(), x.float(), torch.float32) == (torch.float32 if ok else torch.float64)
    assert fits_range(torch.ones(3, dim))  # identical rows: every distance is 0 in float32
    # the range counts across both sets: each alone is in range, together they are not
    a, b = torch.zeros(2, dim), torch.zeros(2, dim)
    a[1, 0], b[1, 0] = top * 0.6, -top * 0.6
    assert fits_range(a) and fits_range(b) and not fits_range(a, b)


# -- float64 features: a range past float64's raises; every score stays exact inside it ---------


def test_float64_range_rule_at_its_edges():
    dim, f64 = 8, torch.finfo(torch.float64)
    top = (f64.max / (8 * dim)) ** 0.5
    bottom = (16 * (dim + 2) * f64.tiny / f64.eps) ** 0.5
    column = torch.zeros(2, dim, dtype=torch.float64)
    for r, ok in ((top * 0.999, True), (top * 1.001, False), (bottom * 1.001, True), (bottom * 0.999, False)):
        x = column.clone()
        x[1, 3] = r
        assert fits_range(x, dtype=torch.float64) is ok, r
        if ok:
            assert compute_dtype(x, x, None) == compute_dtype(x, x, torch.float32) == torch.float64
        else:
            with pytest.raises(ValueError, match=re.escape(f"`real` and `fake` span R = {r:.3g}; multiply both sets")):
                compute_dtype(x, x, None)
        assert compute_dtype(x.float(), x.float(), torch.float64) == torch.float64  # float32 values always fit
    inside = column.clone()
    inside[1, 0] = 1.0
    outside = column.clone()
    outside[1, 0] = top * 2
    with pytest.raises(ValueError, match=r"but `fake` span R = "):
        compute_dtype(inside, outside, None)
    # each set alone is in range, together they are not
    a, b = column.clone(), column.clone()
    a[1, 0], b[1, 0] = top * 0.6, -top * 0.6
    with pytest.raises(ValueError, match="`real` and `fake` together span"):
        compute_dtype(a, b, None)


def _pair64(scale: float, n: int = 200, dim: int = 8):
    g = torch.Generator().manual_seed(0)
    real = torch.randn(n, dim, generator=g, dtype=torch.float64)
    fake = torch.randn(n, dim, generator=g, dtype=torch.float64) * 1.2 + 0.3
    return real * scale, fake * scale


#: every score computed from distances between the two sets (each scale-free)
DISTANCE_SCORES = {
    "precision_recall": lambda r, f: precision_recall(r, f),
    "density_coverage": lambda r, f: density_coverage(r, f),
    "realism_score": lambda r, f: realism_score(r, f),
    "authenticity": lambda r, f: authenticity(r, f),
    "alpha_precision_beta_recall": lambda r, f: alpha_precision_beta_recall(r, f, num_alphas=5),
    "prd_curve": lambda r, f: prd_curve(r, f, num_clusters=5, num_runs=2, num_angles=11),
    "precision_recall_cover": lambda r, f: F.precision_recall_cover(r, f),
    "probabilistic_precision_recall": lambda r, f: F.probabilistic_precision_recall(r, f),
    "top_precision_recall": lambda r, f: F.top_precision_recall(r, f, num_bootstrap=2),
    "generative_metrics": lambda r, f: F.generative_metrics(r, f, frechet=False),
    "audit_samples": lambda r, f: F.audit_samples(r, f),
    "cmmd": lambda r, f: F.cmmd(r, f),
}


@pytest.mark.parametrize("scale", [1e160, 1e-150])
@pytest.mark.parametrize("name", list(DISTANCE_SCORES))
def test_float64_features_past_float64s_range_raise(name, scale):
    """Past float64's range squared distances overflow to inf or underflow to 0: an error, never a number."""
    with pytest.raises(ValueError, match=r"span R = .*float64's range|float64's range.*span R ="):
        DISTANCE_SCORES[name](*_pair64(scale))


@pytest.mark.parametrize("scale", [1e150, 1e-140])
def test_float64_knn_scores_equal_the_oracle_just_inside_float64s_range(scale):
    real, fake = _pair64(scale)
    r, f = real.numpy(), fake.numpy()
    got = [float(v) for v in precision_recall(real, fake, k=3) + density_coverage(real, fake, k=5)]
    expected = [float(v) for v in oracle.precision_recall(r, f, 3) + oracle.density_coverage(r, f, 5)]
    assert got == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(realism_score(real, fake, k=3).numpy(), oracle.realism(r, f, 3), rtol=1e-12)
    assert float(authenticity(real, fake)) == pytest.approx(_oracle_authenticity(r, f), rel=1e-12)
    unit = _pair64(1.0)
    for key, value in alpha_precision_beta_recall(real, fake, num_alphas=5).items():  # scale-free curves
        if key in ("alpha_precision_curve", "beta_recall_curve", "authenticity"):
            np.testing.assert_array_equal(value.numpy(), alpha_precision_beta_recall(*unit, num_alphas=5)[key].numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1e-140, 1e-30, 1e30, 1e100, 1e150])
def test_frechet_distance_scales_with_the_square_of_the_scale(dtype, scale):
    """Covariances are formed on features scaled by an exact power of two, so ``eigh`` sees
    entries near 1 whatever the scale, and tiny features keep their digits."""
    if dtype == torch.float32 and not 1e-30 <= scale <= 1e30:
        return  # beyond float32's range
    real, fake = _pair64(1.0)
    base = oracle.frechet(real.to(dtype).double().numpy(), fake.to(dtype).double().numpy())
    got = float(frechet_distance((real * scale).to(dtype), (fake * scale).to(dtype)))
    if dtype == torch.float64:
        assert got == pytest.approx(base * scale * scale, rel=1e-9)
    else:  # float32 rounding of the scaled values
        assert got == pytest.approx(base * scale * scale, rel=1e-5)


def test_frechet_distance_beyond_float64_raises_and_is_never_negative():
    real, fake = _pair64(1e160)
    with pytest.raises(ValueError, match="Fréchet distance lies within float64's range.*scales by c\\^2"):
        frechet_distance(real, fake)
    for x in _pair64(1.0) + _pair64(1e-3):
        assert float(frechet_distance(x, x)) >= 0.0  # rounding alone can make equal Gaussians' value -1e-15


@pytest.mark.parametrize("scale", [1e-200, 1e-30, 1e30, 1e200, 2.0**1020, 2.0**-1000])
def test_vendi_of_normalised_rows_does_not_depend_on_the_scale(scale):
    x = _pair64(1.0)[1]
    assert float(F.vendi_score(x * scale)) == pytest.approx(float(F.vendi_score(x)), rel=1e-12)
    assert float(F.vendi_score(x * scale, q=2)) == pytest.approx(float(F.vendi_score(x, q=2)), rel=1e-12)


def test_frechet_distance_of_constant_sets_at_any_scale_is_their_mean_distance():
    for value in (1.2345e300, 3.0, 1e-300):
        same = torch.full((10, 3), value, dtype=torch.float64)
        assert float(frechet_distance(same, same.clone())) == 0.0
    a, b = torch.full((7, 2), 1e150, dtype=torch.float64), torch.full((9, 2), 3e150, dtype=torch.float64)
    assert float(frechet_distance(a, b)) == pytest.approx(2 * (2e150) ** 2, rel=1e-12)


def test_frechet_distance_of_features_whose_mean_overflows_raises():
    real, fake = _pair64(1.0)
    with pytest.raises(ValueError, match="`real` to have a mean within float64's range, but its values reach"):
        frechet_distance(real * 1e140 + 1e306, fake)


@pytest.mark.parametrize("q", [0.5, 1, 2, "inf"])
def test_vendi_of_all_zero_raw_rows_raises(q):
    with pytest.raises(ValueError, match="`features` to have a nonzero row when `normalize=False`"):
        F.vendi_score(torch.zeros(6, 3), q=q, normalize=False)


def test_vendi_of_raw_rows_past_float64_raises():
    with pytest.raises(ValueError, match="`features` to have rows whose squared norms fit float64's range"):
        F.vendi_score(_pair64(1e160)[1], normalize=False)


def test_kid_kernel_past_float64_raises_and_its_summary_does_not_overflow():
    real, fake = _pair64(1e60)
    with pytest.raises(ValueError, match=r"polynomial kernel .* fits float64's range, but the largest row norm of `"):
        F.kernel_inception_distance(real, fake, subsets=3, subset_size=50)
    # kernel values ~1e180: every MMD^2 is finite, and so are their mean and spread (squares ~1e360)
    mean, std = F.kernel_inception_distance(*_pair64(1e30), subsets=4, subset_size=50)
    assert torch.isfinite(mean) and torch.isfinite(std) and float(std) > 0
    values = torch.tensor([1e200, -1e200, 3e200], dtype=torch.float64)
    mean, std = kid_summary(values)
    assert float(mean) == pytest.approx(1e200, rel=1e-15)
    assert float(std) == pytest.approx(2e200 * (2 / 3) ** 0.5, rel=1e-15)  # deviations 0, -2e200, 2e200


@pytest.mark.parametrize("offset, scale", [(1e8, 1.0), (0.0, 1e-8), (1e3, 1e-8)])
def test_kid_that_float64_cannot_resolve_raises(offset, scale):
    """A large common offset (or a scale far below 1 with coef = 1) makes every kernel value
    nearly equal: the MMD^2 is lost in rounding (with an offset of 1e8, float64 sums turn an exact
    6.7e31 into 0 or -5e31), so KID refuses rather than return it."""
    real, fake = _pair64(1.0)
    with pytest.raises(ValueError, match="MMD² values .* are within 1x of their rounding bound"):
        F.kernel_inception_distance(real * scale + offset, fake * scale + offset, subsets=3, subset_size=100)
    # an offset float64 still resolves gives a value, and constant features give an exact 0
    mean, _ = F.kernel_inception_distance(real + 10.0, fake + 10.0, subsets=3, subset_size=100)
    assert float(mean) > 1.0
    zeros = torch.zeros(30, 4)
    assert float(F.kernel_inception_distance(zeros, zeros, subsets=2, subset_size=20)[0]) == 0.0
