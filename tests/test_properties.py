"""Property tests (hypothesis) of the functional core: ranges, invariances, exactness."""

import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lightning_prd.functional import density_coverage, precision_recall
from lightning_prd.functional.engine.one_pass import knn_pass

import oracle

SETTINGS = settings(
    max_examples=int(os.environ.get("LPRD_HYPOTHESIS_EXAMPLES", 25)),
    deadline=None,
    derandomize="LPRD_HYPOTHESIS_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def point_sets(draw, planted=True):
    k = draw(st.integers(1, 4))
    n = draw(st.integers(k + 1, 40))
    m = draw(st.integers(k + 1, 40))
    d = draw(st.integers(1, 12))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    offset = draw(st.sampled_from([0.0, 10.0, -1e4]))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    real = torch.randn(n, d, generator=g, dtype=torch.float64) * scale + offset
    fake = torch.randn(m, d, generator=g, dtype=torch.float64) * scale * 1.3 + offset
    dup = draw(st.integers(0, min(3, n // 2, m))) if planted else 0  # planted duplicates and copies
    if dup:
        real[:dup] = real[-dup:].clone()
        fake[:dup] = real[:dup]
    return real, fake, k


def _permutations(real, fake, seed):
    """Seeded random orders of the two sets."""
    g = torch.Generator().manual_seed(seed)
    return torch.randperm(len(real), generator=g), torch.randperm(len(fake), generator=g)


def _scores(real, fake, k, **kw):
    return [float(v) for v in precision_recall(real, fake, k=k, **kw) + density_coverage(real, fake, k=k, **kw)]


@SETTINGS
@given(point_sets())
def test_equal_oracle_with_duplicates_and_ranges(data):
    real, fake, k = data
    p, r, d, c = _scores(real, fake, k)
    op, orr = oracle.precision_recall(real.numpy(), fake.numpy(), k=k)
    od, oc = oracle.density_coverage(real.numpy(), fake.numpy(), k=k)
    assert (p, r, d, c) == (op, orr, od, oc)
    assert 0 <= p <= 1 and 0 <= r <= 1 and 0 <= c <= 1 and d >= 0


@SETTINGS
@given(point_sets(), st.integers(0, 2**31 - 1))
def test_permutation_invariance(data, seed):
    real, fake, k = data
    pr, pf = _permutations(real, fake, seed)
    assert _scores(real, fake, k) == _scores(real[pr], fake[pf], k)


@SETTINGS
@given(point_sets(planted=False), st.integers(0, 2**31 - 1))
def test_rigid_motion_invariance_float32_decisions(data, seed):
    """On tie-free data, rotating and translating both sets together changes no decision, and
    float32 inputs give the float64 oracle's decisions. (With planted copies a motion's rounding
    breaks exact ties arbitrarily, so those sets are excluded here.)"""
    real, fake, k = data
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(real.shape[1], real.shape[1], generator=g, dtype=torch.float64))
    shift = torch.randn(real.shape[1], generator=g, dtype=torch.float64)
    base = _scores(real, fake, k)
    moved = _scores(real @ q + shift, fake @ q + shift, k)
    np.testing.assert_allclose(moved, base, atol=1e-12)  # exact up to the rounding of the motion
    as32 = _scores(real.float(), fake.float(), k)
    ref32 = [
        float(v)
        for v in oracle.precision_recall(real.float().double().numpy(), fake.float().double().numpy(), k=k)
        + oracle.density_coverage(real.float().double().numpy(), fake.float().double().numpy(), k=k)
    ]
    np.testing.assert_allclose(as32, ref32, atol=1e-6)


@SETTINGS
@given(point_sets(), st.sampled_from([64, 700, 4096]))
def test_blocked_equals_dense(data, block_bytes):
    real, fake, k = data
    kw = dict(member_ks=[k], recall_ks=[k], nearest=True, real_ks=[1])
    a = knn_pass(real, fake, block_bytes=block_bytes, **kw).cross
    b = knn_pass(real, fake, block_bytes=2**30, **kw).cross
    assert torch.equal(a.fake_ball_count[k], b.fake_ball_count[k])
    assert torch.equal(a.real_ball_hit[k], b.real_ball_hit[k])
    assert torch.equal(a.real_in_fake[k], b.real_in_fake[k])
    assert torch.equal(a.fake_nn_sq_dist, b.fake_nn_sq_dist)
    assert torch.equal(a.real_nn_sq_dist, b.real_nn_sq_dist)


@pytest.mark.parametrize("k", [1, 3])
def test_minimum_sample_count_k_plus_one(k, rng):
    real = torch.randn(k + 1, 3, generator=rng, dtype=torch.float64)
    fake = torch.randn(k + 1, 3, generator=rng, dtype=torch.float64)
    assert _scores(real, fake, k) == [
        float(v)
        for v in oracle.precision_recall(real.numpy(), fake.numpy(), k=k)
        + oracle.density_coverage(real.numpy(), fake.numpy(), k=k)
    ]


# -- alpha/beta, authenticity, realism, PRD ---------------------------------------------------------


@SETTINGS
@given(point_sets(), st.integers(0, 2**31 - 1))
def test_authenticity_and_alpha_beta_ranges_oracle_and_permutations(data, seed):
    """Authenticity equals the float64 oracle (planted copies included: a copy is never
    authentic); α/β curves lie in [0, 1] and the integrated scores in [-0.5, 1] (the largest
    ``|curve(a) - a|`` is ``max(a, 1 - a)``); every scalar is invariant to permuting samples."""
    from test_alpha_beta import oracle as ab_oracle

    from lightning_prd.functional import alpha_precision_beta_recall, authenticity

    real, fake, k = data
    auth = float(authenticity(real, fake))
    ref = ab_oracle(real.numpy(), fake.numpy(), k=k, num_alphas=7)
    assert auth == ref["authenticity"]
    out = alpha_precision_beta_recall(real, fake, k=k, num_alphas=7)
    assert float(out["authenticity"]) == auth
    for key in ("alpha_precision_curve", "beta_recall_curve"):
        assert bool(((out[key] >= 0) & (out[key] <= 1)).all())
    for key in ("alpha_precision", "beta_recall"):
        assert -0.5 <= float(out[key]) <= 1
    pr, pf = _permutations(real, fake, seed)
    assert float(authenticity(real[pr], fake[pf])) == auth


@SETTINGS
@given(point_sets(), st.integers(0, 2**31 - 1))
def test_realism_follows_its_samples_under_permutation(data, seed):
    from lightning_prd.functional import realism_score

    real, fake, k = data
    pr, pf = _permutations(real, fake, seed)
    base = realism_score(real, fake, k=k)
    assert bool((base >= 0).all())
    # realism is a continuous value from the GEMM distances (not refined like the decisions):
    # float64 inputs agree to rounding, not bit for bit
    torch.testing.assert_close(realism_score(real[pr], fake[pf], k=k), base[pf], rtol=1e-9, atol=0)
    ref = oracle.realism(real.numpy(), fake.numpy(), k=k)
    ref[np.isnan(ref)] = np.inf  # 0/0: a copy of a kept radius-0 ball scores inf (documented convention)
    np.testing.assert_allclose(base.numpy(), ref, rtol=1e-9, atol=0)


@settings(
    max_examples=int(os.environ.get("LPRD_HYPOTHESIS_EXAMPLES", 10)),
    deadline=None,
    derandomize="LPRD_HYPOTHESIS_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(point_sets(), st.integers(1, 6), st.integers(0, 1000))
def test_prd_curves_and_f_scores_in_range(data, num_clusters, seed):
    from lightning_prd.functional import prd_curve, prd_f_beta

    real, fake, _ = data
    num_clusters = min(num_clusters, len(real) + len(fake))
    p, r = prd_curve(real, fake, num_clusters=num_clusters, num_runs=2, num_angles=31, seed=seed, enforce_balance=False)
    assert bool(((p >= 0) & (p <= 1) & (r >= 0) & (r <= 1)).all())
    assert bool((torch.diff(p) >= -1e-12).all()) and bool((torch.diff(r) <= 1e-12).all())  # λ grows along the curve
    f, f_inv = prd_f_beta(p, r)
    assert 0 <= float(f) <= 1 and 0 <= float(f_inv) <= 1
