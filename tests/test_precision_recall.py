"""Precision, recall and realism against the float64 oracle, the seed note and prdc."""

import numpy as np
import pytest
import torch

from lightning_prd.functional import precision_recall, realism_score

import oracle

REAL_1D = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
FAKE_1D = torch.tensor([[0.2], [0.8], [1.1], [7.0]])


def test_seed_note_worked_example():
    p, r = precision_recall(REAL_1D, FAKE_1D, k=1)
    assert float(p) == 0.75 and float(r) == 1.0
    p, r = precision_recall(REAL_1D, FAKE_1D[:3], k=1)  # without the outlier 7
    assert float(p) == 1.0 and float(r) == 0.5


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("n,m,d", [(120, 90, 3), (64, 150, 16), (200, 200, 40)])
def test_equals_float64_oracle(k, n, m, d, rng):
    real = torch.randn(n, d, generator=rng, dtype=torch.float64)
    fake = 1.2 * torch.randn(m, d, generator=rng, dtype=torch.float64) + 0.3
    p, r = precision_recall(real, fake, k=k)
    op, orr = oracle.precision_recall(real.numpy(), fake.numpy(), k=k)
    assert p.dtype == torch.float64
    assert float(p) == op and float(r) == orr


def test_float32_decisions_equal_float64_oracle(rng):
    real = torch.randn(300, 32, generator=rng) * 3 + 100.0  # large offset: GEMM cancellation
    fake = torch.randn(250, 32, generator=rng) * 3 + 100.5
    p, r = precision_recall(real, fake, k=3)
    op, orr = oracle.precision_recall(real.double().numpy(), fake.double().numpy(), k=3)
    assert p.dtype == torch.float32
    assert round(float(p) * 250) == round(op * 250) and round(float(r) * 300) == round(orr * 300)


def test_mode_collapse_roles():
    """fake = 0.1 N(0, I), real = 3 N(0, I): precision high, recall low (torch-fidelity's fixture)."""
    g = torch.Generator().manual_seed(42)
    fake = 0.1 * torch.randn(200, 16, generator=g)
    real = 3.0 * torch.randn(200, 16, generator=g)
    p, r = precision_recall(real, fake, k=3)
    assert float(p) > 0.8 and float(r) < 0.3


def test_agrees_with_prdc(rng):
    prdc = pytest.importorskip("prdc")
    real = torch.randn(400, 10, generator=rng, dtype=torch.float64)
    fake = 0.8 * torch.randn(300, 10, generator=rng, dtype=torch.float64)
    ref = prdc.compute_prdc(real_features=real.numpy(), fake_features=fake.numpy(), nearest_k=5)
    p, r = precision_recall(real, fake, k=5)
    assert float(p) == pytest.approx(ref["precision"], abs=1e-12)
    assert float(r) == pytest.approx(ref["recall"], abs=1e-12)


def test_identical_sets_and_disjoint_sets(rng):
    real = torch.randn(100, 5, generator=rng)
    p, r = precision_recall(real, real.clone())
    assert float(p) == 1.0 and float(r) == 1.0
    p, r = precision_recall(real, real + 1000.0)
    assert float(p) == 0.0 and float(r) == 0.0


@pytest.mark.parametrize("k", [1, 3])
def test_realism_equals_oracle(k, rng):
    real = torch.randn(150, 6, generator=rng, dtype=torch.float64)
    fake = 1.5 * torch.randn(80, 6, generator=rng, dtype=torch.float64)
    ours = realism_score(real, fake, k=k)
    ref = oracle.realism(real.numpy(), fake.numpy(), k=k)
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-10)
    # >= 1 exactly when inside a kept ball
    r = oracle.kth_radius(real.numpy(), k)
    keep = r <= np.median(r)
    inside = (oracle.dist(fake.numpy(), real.numpy())[:, keep] <= r[keep]).any(1)
    np.testing.assert_array_equal(ours.numpy() >= 1, inside)


def test_realism_float32_close_to_oracle(rng):
    real = torch.randn(200, 20, generator=rng)
    fake = torch.randn(100, 20, generator=rng)
    ours = realism_score(real, fake)
    ref = oracle.realism(real.double().numpy(), fake.double().numpy(), k=3)
    np.testing.assert_allclose(ours.double().numpy(), ref, rtol=1e-4)


def test_realism_copy_of_kept_real_is_inf():
    real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
    out = realism_score(real, torch.tensor([[1.0]]), k=1)
    assert torch.isinf(out).all()
