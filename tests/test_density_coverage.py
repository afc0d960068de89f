"""Density and coverage against the float64 oracle, the seed note, its table and prdc."""

import pytest
import torch

from lightning_prd.functional import density_coverage, frechet_distance, precision_recall

import oracle

REAL_1D = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
FAKE_1D = torch.tensor([[0.2], [0.8], [1.1], [7.0]])


def test_seed_note_worked_example():
    d, c = density_coverage(REAL_1D, FAKE_1D, k=1)
    assert float(d) == 1.5 and float(c) == 0.75
    _, c = density_coverage(REAL_1D, FAKE_1D[:3], k=1)  # the outlier does not change coverage
    assert float(c) == 0.75


@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("n,m,d", [(120, 90, 3), (64, 150, 16), (210, 200, 40)])
def test_equals_float64_oracle(k, n, m, d, rng):
    real = torch.randn(n, d, generator=rng, dtype=torch.float64)
    fake = 0.9 * torch.randn(m, d, generator=rng, dtype=torch.float64) - 0.2
    dens, cov = density_coverage(real, fake, k=k)
    od, oc = oracle.density_coverage(real.numpy(), fake.numpy(), k=k)
    assert float(dens) == od and float(cov) == oc


def test_agrees_with_prdc(rng):
    prdc = pytest.importorskip("prdc")
    real = torch.randn(400, 10, generator=rng, dtype=torch.float64)
    fake = 1.3 * torch.randn(350, 10, generator=rng, dtype=torch.float64)
    ref = prdc.compute_prdc(real_features=real.numpy(), fake_features=fake.numpy(), nearest_k=5)
    dens, cov = density_coverage(real, fake, k=5)
    assert float(dens) == pytest.approx(ref["density"], abs=1e-12)
    assert float(cov) == pytest.approx(ref["coverage"], abs=1e-12)


def test_mode_collapse_low_coverage_high_density():
    """Collapsed fake piles into the centre: density far above 1, coverage far below a matched model.

    (In 16-D with 200 samples the real 5-NN balls are wide, so half of them still reach the
    collapsed cloud: coverage ~0.5 here, prdc gives the same 0.535.)
    """
    g = torch.Generator().manual_seed(42)
    fake = 0.1 * torch.randn(200, 16, generator=g)
    real = 3.0 * torch.randn(200, 16, generator=g)
    matched = 3.0 * torch.randn(200, 16, generator=g)
    dens, cov = density_coverage(real, fake, k=5)
    _, cov_matched = density_coverage(real, matched, k=5)
    assert float(dens) > 5.0
    assert float(cov) < 0.6 and float(cov_matched) > 0.9


# The seed note's table: 2000 real N(0, I_2), 2000 from N(0, s^2 I_2), k=3 (P/R) and k=5 (D/C).
TABLE = {
    0.3: dict(fd=0.98, precision=0.98, recall=0.48, density=0.97, coverage=0.37),
    1.0: dict(fd=0.0, precision=0.97, recall=0.98, density=1.00, coverage=0.98),
    1.7: dict(fd=0.98, precision=0.88, recall=0.99, density=0.81, coverage=0.90),
}


@pytest.mark.parametrize("s", sorted(TABLE))
def test_two_gaussians_table(s):
    g = torch.Generator().manual_seed(7)
    real = torch.randn(2000, 2, generator=g, dtype=torch.float64)
    fake = s * torch.randn(2000, 2, generator=g, dtype=torch.float64)
    p, r = precision_recall(real, fake, k=3)
    dens, cov = density_coverage(real, fake, k=5)
    row = TABLE[s]
    # sampling noise of the estimators at 2000 samples is about 0.02 (seed note)
    assert float(p) == pytest.approx(row["precision"], abs=0.03)
    assert float(r) == pytest.approx(row["recall"], abs=0.04)
    assert float(dens) == pytest.approx(row["density"], abs=0.05)
    assert float(cov) == pytest.approx(row["coverage"], abs=0.04)
    assert float(frechet_distance(real, fake)) == pytest.approx(row["fd"], abs=0.06)


def test_identical_distributions_expected_coverage():
    """E[coverage] = 1 - prod_{i<k} (N-1-i)/(M+N-1-i) for P = Q (exchangeability), 0.96898 at N=M=1000, k=5."""
    vals = []
    for seed in range(5):
        g = torch.Generator().manual_seed(seed)
        real, fake = torch.randn(1000, 8, generator=g), torch.randn(1000, 8, generator=g)
        vals.append(float(density_coverage(real, fake, k=5)[1]))
    assert sum(vals) / len(vals) == pytest.approx(0.96898, abs=0.01)


def test_exact_copy_density_is_k_plus_one_over_k(rng):
    """Closed balls: the copy of the k-th neighbour sits exactly on the radius -> (k+1)/k."""
    real = torch.randn(300, 12, generator=rng) + 50.0
    dens, cov = density_coverage(real, real.clone(), k=5)
    assert float(cov) == 1.0
    assert float(dens) == pytest.approx(6 / 5, abs=1e-7)
