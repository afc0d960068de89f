"""Features at the edges of float32's range: every score equals the float64 oracle.

float32 features whose squared distances pass float32's maximum (``~1e19`` at D = 8), or whose
squares underflow (``~1e-25``), are computed with float64 tiles (``compute_dtype``,
``float32_range_ok``); just inside the range float32 tiles are used and stay exact. Scores
are compared with the NumPy oracles of ``tests/oracle.py`` (precision, recall, density,
coverage, realism, Fréchet, authenticity) or, for alpha-precision / beta-recall and PRD, with
the same function on the float64 copies of the features (no float32 arithmetic at all).
"""

import numpy as np
import pytest
import torch

from lightning_prd.functional import (
    alpha_precision_beta_recall,
    authenticity,
    density_coverage,
    frechet_distance,
    prd_curve,
    precision_recall,
    realism_score,
)
from lightning_prd.functional._engine import knn_pass
from lightning_prd.functional._validation import compute_dtype, float32_range_ok

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
        assert float32_range_ok(x.float()) is ok, r
        assert compute_dtype(x.float(), x.float(), None) == (torch.float32 if ok else torch.float64)
        assert compute_dtype(x.float(), x.float(), torch.float32) == (torch.float32 if ok else torch.float64)
    assert float32_range_ok(torch.ones(3, dim))  # identical rows: every distance is 0 in float32
    # the range counts across both sets: each alone is in range, together they are not
    a, b = torch.zeros(2, dim), torch.zeros(2, dim)
    a[1, 0], b[1, 0] = top * 0.6, -top * 0.6
    assert float32_range_ok(a) and float32_range_ok(b) and not float32_range_ok(a, b)
