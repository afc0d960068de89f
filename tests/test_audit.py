"""Audit views: per-sample flags equal the scalar scores; filtering drops copies and outliers."""

import torch

from lightning_prd.functional import density_coverage, precision_recall
from lightning_prd.functional.alpha_beta import authenticity
from lightning_prd.functional.audit import audit_samples, filter_fake

import oracle


def _planted(rng):
    real = torch.randn(600, 8, generator=rng, dtype=torch.float64)
    fresh = torch.randn(300, 8, generator=rng, dtype=torch.float64)
    copies = real[:40].clone()
    outliers = torch.randn(30, 8, generator=rng, dtype=torch.float64) + 12.0
    return real, torch.cat([fresh, copies, outliers])


def test_flags_agree_with_scalar_scores(rng):
    real, fake = _planted(rng)
    a = audit_samples(real, fake)
    p, r = precision_recall(real, fake, k=3)
    d, c = density_coverage(real, fake, k=5)
    assert float(a["inside_precision"].double().mean()) == float(p)
    assert float(a["recalled"].double().mean()) == float(r)
    assert float(a["covered"].double().mean()) == float(c)
    assert float(a["real_ball_count"].sum()) / (5 * len(fake)) == float(d)
    assert float(a["authentic"].double().mean()) == float(authenticity(real, fake))
    dm = oracle.dist(fake.numpy(), real.numpy())
    assert torch.equal(a["nearest_real"], torch.as_tensor(dm.argmin(1)))


def test_filter_removes_copies_and_outliers_keeps_the_rest(rng):
    real, fake = _planted(rng)
    a = audit_samples(real, fake)
    kept, mask = filter_fake(fake, a, copy_ratio=0.25, fidelity="precision")
    assert not mask[300:340].any()  # every planted copy dropped
    assert not mask[340:].any()  # every outlier dropped (outside every real ball)
    # the fresh samples stay: the copy test spares them, and the fidelity test keeps what
    # precision itself counts (about 0.88 for fresh samples at N = 600 in 8-D)
    assert filter_fake(fake, a, copy_ratio=0.25, fidelity=None)[1][:300].double().mean() > 0.98
    assert torch.equal(mask[:300], a["inside_precision"][:300] & (a["copy_ratio"][:300] > 0.25))
    assert mask[:300].double().mean() > 0.85
    assert kept.shape == (int(mask.sum()), 8)
    assert torch.equal(a["copy_ratio"] > 1, a["authentic"])  # the paper's test is ratio > 1
    paper = filter_fake(fake, a, fidelity=None)[1]  # copy_ratio=1.0: the paper's authenticity
    assert torch.equal(paper, a["authentic"]) and paper[340:].all()


def test_uncovered_real_samples_mark_missed_modes(rng):
    real = torch.cat([torch.randn(200, 2, generator=rng) - 6.0, torch.randn(200, 2, generator=rng) + 6.0])
    fake = torch.randn(300, 2, generator=rng) - 6.0  # the model only makes the first mode
    a = audit_samples(real, fake)
    assert a["covered"][:200].double().mean() > 0.9 and not a["covered"][200:].any()
