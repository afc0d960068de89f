"""Precision-recall cover (Cheema & Urner 2023) against a float64 oracle of the formula and a
transcription of the authors' indicator loop."""

import math

import numpy as np
import pytest
import torch

from lightning_prd.functional import generative_metrics, precision_recall_cover


def _dists(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def _nnd(x, k):
    d = _dists(x, x)
    np.fill_diagonal(d, np.inf)
    return np.sort(d, 1)[:, k - 1]


def oracle(real, fake, k, C=3):
    """Closed own-set NND_{Ck} balls holding at least k samples of the other set."""
    d = _dists(real, fake)  # [N, M]
    fake_counts = (d <= _nnd(fake, C * k)[None, :]).sum(0)
    real_counts = (d <= _nnd(real, C * k)[:, None]).sum(1)
    return np.mean(fake_counts >= k), np.mean(real_counts >= k)


def authors_loop(P, Q, k, C):
    """The authors' ``PRCover`` / ``PR_Cover_Indicator`` (a k-d tree query of Ck + 1 neighbours,
    the first dropped; a point of the other set counts when ``norm <= `` the last distance;
    covered when the count reaches ``Ck / C``), written as loops. Their first score is about P."""

    def score(A, B):
        hits = 0
        for i in range(len(A)):
            own = np.sort(np.linalg.norm(A - A[i], axis=1))[1 : C * k + 1]
            count = sum(np.linalg.norm(B[j] - A[i]) <= own[-1] for j in range(len(B)))
            hits += count >= len(own) / C
        return hits / len(A)

    return score(P, Q), score(Q, P)


def _pair(seed, n, m, dim, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g), torch.randn(m, dim, generator=g) * 1.2 + shift


@pytest.mark.parametrize("n,m,dim,k,C", [(60, 45, 3, 2, 3), (40, 73, 8, 3, 2), (120, 90, 32, 4, 3)])
@pytest.mark.parametrize("dtype", [None, torch.float64])
def test_equals_oracle_unequal_sizes(n, m, dim, k, C, dtype, both_tile_paths):
    real, fake = _pair(n + dim, n, m, dim, shift=0.4)
    if dtype is not None:
        real, fake = real.double(), fake.double()
    want = oracle(real.numpy(), fake.numpy(), k, C)
    got = precision_recall_cover(real, fake, k=k, C=C, dtype=dtype, block_bytes=8000)
    assert (float(got[0]), float(got[1])) == pytest.approx(want, abs=1e-7)


def test_authors_procedure_with_fake_first():
    real, fake = _pair(4, 50, 35, 3, shift=0.8)
    want = authors_loop(fake.double().numpy(), real.double().numpy(), k=2, C=3)
    got = precision_recall_cover(real, fake, k=2, C=3)
    assert (float(got[0]), float(got[1])) == pytest.approx(want, abs=1e-7)


def test_ties_copies_and_collapse(both_tile_paths):
    grid = torch.tensor([[float(i), float(j)] for i in range(6) for j in range(5)])  # ties at every radius
    fake = torch.cat([grid[:12], grid[:12] + 1.0, torch.full((5, 2), 40.0)])
    for k, C in ((1, 3), (2, 2), (3, 3)):
        want = oracle(grid.numpy(), fake.numpy(), k, C)
        got = precision_recall_cover(grid, fake, k=k, C=C)
        assert (float(got[0]), float(got[1])) == pytest.approx(want, abs=1e-7)
    # a copy of the real set covers and is covered everywhere
    assert [float(v) for v in precision_recall_cover(grid, grid.clone(), k=2)] == [1.0, 1.0]
    # collapsed fakes (one point, ball radius 0): only a real sample on it could be counted
    collapsed = grid[3].repeat(10, 1)
    want = oracle(grid.numpy(), collapsed.numpy(), 2, 3)
    got = precision_recall_cover(grid, collapsed, k=2)
    assert (float(got[0]), float(got[1])) == pytest.approx(want, abs=1e-7)
    assert float(got[0]) == 0.0  # one real at distance 0: fewer than k = 2


def test_default_k_rule():
    real, fake = _pair(2, 150, 120, 4)
    k = math.ceil((math.log(150) + 6) / 3)  # k' = 3k >= ln N + 6: k = 4 here
    assert k == 4
    want = precision_recall_cover(real, fake, k=k)
    got = precision_recall_cover(real, fake)
    assert [float(v) for v in got] == [float(v) for v in want]


def test_roles_dropped_mode():
    """Generated samples of the real density on half of its support: precision high, recall
    about 1/2. (A collapsed generator scores low on both: its own balls are tiny.)"""
    g = torch.Generator().manual_seed(0)
    real = torch.rand(800, 2, generator=g) * torch.tensor([2.0, 1.0])
    fake = torch.rand(400, 2, generator=g)
    pc, rc = precision_recall_cover(real, fake, k=3)
    assert float(pc) > 0.9 and 0.4 < float(rc) < 0.6
    collapsed = 0.01 * torch.rand(400, 2, generator=g) + 0.5
    pc, rc = precision_recall_cover(real, collapsed, k=3)
    assert float(pc) < 0.1 and float(rc) < 0.1


def test_generative_metrics_equals_function(both_tile_paths):
    real, fake = _pair(21, 70, 55, 5, shift=0.2)
    out = generative_metrics(real, fake, pr_cover=dict(k=2, C=4))
    pc, rc = precision_recall_cover(real, fake, k=2, C=4)
    assert float(out["precision_cover"]) == float(pc) and float(out["recall_cover"]) == float(rc)
    assert "precision_cover" not in generative_metrics(real, fake, pr_cover=False)
    default = generative_metrics(real, fake)  # on by default, with the default k and C = 3
    pc, rc = precision_recall_cover(real, fake)
    assert float(default["precision_cover"]) == float(pc) and float(default["recall_cover"]) == float(rc)
    # True: left out on sets too small for the default radii; explicit options raise
    small_real, small_fake = real[:10], fake[:8]
    assert "precision_cover" not in generative_metrics(
        small_real, small_fake, k_precision_recall=2, k_density_coverage=2, pr_cover=True
    )
    with pytest.raises(ValueError, match="pr_cover"):
        generative_metrics(small_real, small_fake, k_precision_recall=2, k_density_coverage=2, pr_cover=dict(k=3))


@pytest.mark.parametrize(
    "kwargs,match",
    [(dict(k=0), "`k`"), (dict(k=1.5), "`k`"), (dict(C=0), "`C`"), (dict(C="3"), "`C`"), (dict(k=5, C=3), "`real`")],
)
def test_bad_input(kwargs, match):
    real, fake = _pair(1, 15, 40, 2)
    with pytest.raises(ValueError, match=match):
        precision_recall_cover(real, fake, **kwargs)


def _covered_oracle(real, fake, k, wide):
    """Per sample: its own closed NND_wide ball holds at least k samples of the other set."""
    d = _dists(real, fake)
    return (d <= _nnd(fake, wide)[None, :]).sum(0) >= k, (d <= _nnd(real, wide)[:, None]).sum(1) >= k


@pytest.mark.parametrize("dim", [2, 64, 256])
def test_undecided_intervals_fall_back_to_exact_values(dim, both_tile_paths, monkeypatch):
    """Matched distributions: the k-th cross distance and the own NND_{Ck} are close for many
    samples, so their intervals overlap and both are made exact; every decision equals the
    float64 oracle, sample by sample."""
    from lightning_prd.functional.engine.one_pass import knn_pass
    from lightning_prd.functional.knn import cover, self_pass

    calls = {"cross": 0, "own": 0}
    refine, own = cover.refine_topk, self_pass.LooseRadius.exact

    def spy_refine(*args, **kwargs):
        calls["cross"] += 1
        return refine(*args, **kwargs)

    def spy_own(*args, **kwargs):
        calls["own"] += 1
        return own(*args, **kwargs)

    monkeypatch.setattr(cover, "refine_topk", spy_refine)
    monkeypatch.setattr(self_pass.LooseRadius, "exact", spy_own)
    g = torch.Generator().manual_seed(dim)
    real = torch.randn(300, dim, generator=g)
    fake = torch.cat([torch.randn(250, dim, generator=g), real[:20] + 1e-4 * torch.randn(20, dim, generator=g)])
    for k, C in ((1, 2), (2, 3), (4, 2)):
        res = knn_pass(real, fake, cover=(k, C * k), block_bytes=1 << 16).cross
        want_fake, want_real = _covered_oracle(real.numpy(), fake.numpy(), k, C * k)
        np.testing.assert_array_equal(res.fake_covered.numpy(), want_fake)
        np.testing.assert_array_equal(res.real_covered.numpy(), want_real)
    assert calls["cross"] > 0
    if dim == 2:  # low dimension: exact distances meet at the radius often enough
        assert calls["own"] > 0


@pytest.mark.parametrize("name", ["gaussian-64", "clusters-256", "integers-8"])
def test_radius_intervals_hold_the_exact_radius(name, both_tile_paths):
    """``self_radii``'s intervals of NND_k (PR-cover's own radii, no float64 work) hold the
    float64 oracle's value for every sample, screened or not, ties included."""
    from lightning_prd.functional.knn import prepare, self_radii

    g = torch.Generator().manual_seed(11)
    kind, dim = name.split("-")
    dim = int(dim)
    if kind == "gaussian":
        x = torch.randn(5000, dim, generator=g)
    elif kind == "clusters":
        x = torch.randn(10, dim, generator=g)[torch.randint(0, 10, (5000,), generator=g)]
        x = x + 0.05 * torch.randn(5000, dim, generator=g)
    else:
        x = torch.randint(0, 4, (5000, dim), generator=g).float()
    points = prepare(x, x.double().mean(0), torch.float32)
    _, bounds = self_radii(points, [], [6, 18], block_bytes=1 << 22)
    d = torch.cdist(x.double(), x.double()).square_()
    d.fill_diagonal_(float("inf"))
    exact = d.sort(1).values
    for k in (6, 18):
        low, high = bounds[k].interval.unbind(1)
        assert bool(((low <= exact[:, k - 1]) & (exact[:, k - 1] <= high)).all()), k
