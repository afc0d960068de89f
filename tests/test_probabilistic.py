"""Probabilistic precision and recall (Park & Kim 2023) against a float64 NumPy oracle of the paper's formula."""

import json

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics, probabilistic_precision_recall
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import soft
from lightning_prd.functional.knn.shard import Shard

from ddp_utils import run_ddp


def _dists(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def _nnd(x, k):
    d = _dists(x, x)
    np.fill_diagonal(d, np.inf)  # the point itself excluded, duplicates count at 0
    return np.sort(d, 1)[:, k - 1]


def oracle(real, fake, k=4, a=1.2):
    """The paper's formula over every reference sample, in float64."""
    r_x, r_y = a * _nnd(real, k).mean(), a * _nnd(fake, k).mean()
    d = _dists(real, fake)  # [N, M]
    with np.errstate(divide="ignore", invalid="ignore"):
        p_x = np.where(d < r_x, 1 - d / r_x, 0.0) if r_x > 0 else (d == 0).astype(float)
        p_y = np.where(d < r_y, 1 - d / r_y, 0.0) if r_y > 0 else (d == 0).astype(float)
    return np.mean(1 - np.prod(1 - p_x, 0)), np.mean(1 - np.prod(1 - p_y, 1))


def official_topk(real, fake, k=4, a=1.2):
    """Transcription of the authors' working script (root ``compute_pp_pr.py``): radii from the
    (k+1)-th smallest row entry (the point itself at 0 first), products over the k largest terms."""

    def radius(x):
        return np.sort(_dists(x, x), 1)[:, k].mean()

    d = _dists(real, fake)

    def psr(dist, r):
        f = np.where(dist >= a * r, 0.0, 1 - dist / (a * r))
        return np.prod(1.0 - np.sort(f, 0)[-k:], 0)

    return np.mean(1 - psr(d, radius(real))), np.mean(1 - psr(d.T, radius(fake)))


def _close(got, want):
    """Scores are float64-exact, returned in the compute dtype (float32 rounding at most)."""
    atol = 1e-11 if got[0].dtype == torch.float64 else 1e-7
    np.testing.assert_allclose([float(got[0]), float(got[1])], want, rtol=0, atol=atol)


def _pair(seed, n, m, dim, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g), torch.randn(m, dim, generator=g) * 1.1 + shift


def test_worked_example_by_hand():
    real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
    fake = torch.tensor([[0.5], [1.0], [9.0]])
    pp, pr = probabilistic_precision_recall(real, fake, k=1, a=1.0)
    # R_X = 1: fakes 0.75, 1 (a copy), 0; R_Y = 3: reals 17/18, 1, 5/6, 4/9
    assert float(pp) == pytest.approx(1.75 / 3, abs=1e-7)
    assert float(pr) == pytest.approx((17 / 18 + 1 + 5 / 6 + 4 / 9) / 4, abs=1e-7)


@pytest.mark.parametrize("n,m,dim", [(60, 45, 3), (40, 73, 8), (120, 90, 32)])
@pytest.mark.parametrize("dtype", [None, torch.float64])
def test_equals_oracle_unequal_sizes(n, m, dim, dtype, both_tile_paths):
    real, fake = _pair(n + dim, n, m, dim, shift=0.3)
    if dtype is not None:
        real, fake = real.double(), fake.double()
    want = oracle(real.numpy(), fake.numpy())
    got = probabilistic_precision_recall(real, fake, dtype=dtype)
    _close(got, want)


def test_small_tiles_and_options(both_tile_paths):
    real, fake = _pair(3, 80, 64, 6)
    want = oracle(real.numpy(), fake.numpy(), k=2, a=1.5)
    got = probabilistic_precision_recall(real, fake, k=2, a=1.5, block_bytes=6000)
    _close(got, want)


def test_copies_ties_and_collapse(both_tile_paths):
    grid = torch.tensor([[float(i), float(j)] for i in range(6) for j in range(5)])  # integer ties
    # an exact copy of the real set: every fake and every real has p = 1 exactly
    assert [float(v) for v in probabilistic_precision_recall(grid, grid.clone())] == [1.0, 1.0]
    fake = torch.cat([grid[:7], grid[:7] + 0.5, torch.full((4, 2), 30.0)])  # copies, ties, outliers
    want = oracle(grid.numpy(), fake.numpy(), k=3)
    got = probabilistic_precision_recall(grid, fake, k=3)
    _close(got, want)
    # a collapsed generated set (every fake one point): R_Y = 0, only copies are recalled
    collapsed = grid[4].repeat(9, 1)
    want = oracle(grid.numpy(), collapsed.numpy())
    got = probabilistic_precision_recall(grid, collapsed)
    _close(got, want)
    assert float(got[0]) == 1.0 and float(got[1]) == pytest.approx(1 / 30)


def test_high_dimensions_bounds_agree(both_tile_paths):
    """Many pairs inside R: the tile bounds settle every sample (no float64 recomputation)."""
    real, fake = _pair(11, 300, 260, 256)
    want = oracle(real.numpy(), fake.numpy())
    got = probabilistic_precision_recall(real, fake)
    _close(got, want)


def test_recomputation_matches_exact_soft():
    real, fake = _pair(5, 30, 20, 4)
    idx = torch.arange(20)
    r_sq = float((1.2 * torch.tensor(_nnd(real.numpy(), 4)).mean()) ** 2)
    got = soft.exact_soft(fake, real, idx, r_sq).mean()
    assert float(got) == pytest.approx(oracle(real.numpy(), fake.numpy())[0], abs=1e-12)


def test_paper_formula_is_not_the_official_topk_variant():
    """The full product (paper) and the authors' k-largest-terms script differ on spread data."""
    real, fake = _pair(8, 70, 50, 2)
    full, topk = oracle(real.numpy(), fake.numpy()), official_topk(real.numpy(), fake.numpy())
    got = probabilistic_precision_recall(real, fake)
    _close(got, full)
    assert abs(full[0] - topk[0]) > 1e-3


@pytest.mark.parametrize("n,m,dim,k", [(70, 50, 2, 4), (45, 64, 6, 3), (120, 90, 32, 4)])
def test_nearest_terms_equal_the_authors_script(n, m, dim, k, both_tile_paths):
    real, fake = _pair(n + dim, n, m, dim, shift=0.2)
    want = official_topk(real.numpy(), fake.numpy(), k=k, a=1.5)
    _close(probabilistic_precision_recall(real, fake, k=k, a=1.5, terms="nearest", block_bytes=8000), want)
    got = probabilistic_precision_recall(real.double(), fake.double(), k=k, a=1.5, terms="nearest")
    _close(got, want)


def test_nearest_terms_with_copies_and_ties(both_tile_paths):
    grid = torch.tensor([[float(i), float(j)] for i in range(6) for j in range(5)])
    fake = torch.cat([grid[:7], grid[:7] + 0.5, torch.full((4, 2), 30.0)])
    _close(
        probabilistic_precision_recall(grid, fake, k=3, terms="nearest"), official_topk(grid.numpy(), fake.numpy(), k=3)
    )
    assert [float(v) for v in probabilistic_precision_recall(grid, grid.clone(), terms="nearest")] == [1.0, 1.0]


def test_roles_mode_collapse():
    g = torch.Generator().manual_seed(0)
    real, fake = 3 * torch.randn(200, 2, generator=g), 0.1 * torch.randn(150, 2, generator=g)
    pp, pr = probabilistic_precision_recall(real, fake)
    assert float(pp) > 0.9 and float(pr) < 0.5


def test_generative_metrics_equals_function(both_tile_paths):
    real, fake = _pair(21, 70, 55, 5, shift=0.2)
    out = generative_metrics(real, fake, probabilistic=dict(k=3, a=1.3))
    pp, pr = probabilistic_precision_recall(real, fake, k=3, a=1.3)
    assert float(out["p_precision"]) == float(pp) and float(out["p_recall"]) == float(pr)
    assert "p_precision" not in generative_metrics(real, fake, probabilistic=False)
    out = generative_metrics(real, fake, probabilistic=dict(k=3, a=1.5, terms="nearest"))
    pp, pr = probabilistic_precision_recall(real, fake, k=3, a=1.5, terms="nearest")
    assert float(out["p_precision"]) == float(pp) and float(out["p_recall"]) == float(pr)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(k=0), "`k`"),
        (dict(k=2.5), "`k`"),
        (dict(a=0.0), "`a`"),
        (dict(a=float("nan")), "`a`"),
        (dict(k=30), "`real`"),
        (dict(terms="top"), "`terms`"),
    ],
)
def test_bad_input(kwargs, match):
    real, fake = _pair(1, 20, 40, 2)
    with pytest.raises(ValueError, match=match):
        probabilistic_precision_recall(real, fake, **kwargs)


# ---------------------------------------------------------------------------- the switches of both soft families
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(probabilistic=dict(kk=3)), "probabilistic"),
        (dict(probabilistic=dict(a=-1.0)), "`a`"),
        (dict(pr_cover=dict(C=0)), "`C`"),
        (dict(pr_cover="yes"), "pr_cover"),
    ],
)
def test_bad_switch_values_name_the_option(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GenerativeMetrics(**kwargs)


def test_the_command_line_turns_each_off_alone_and_compare_shows_both(tmp_path, capsys):
    real, fake = _pair(3, 120, 90, 3, shift=0.2)
    np.save(tmp_path / "real.npy", real.numpy())
    np.save(tmp_path / "fake.npy", fake.numpy())
    np.save(tmp_path / "fake2.npy", (0.5 * fake).numpy())
    base = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), "-q"]
    base += ["--no-prd", "--no-alpha-beta", "--json", str(tmp_path / "s.json")]
    keys = {"--no-probabilistic": ("p_precision", "p_recall"), "--no-pr-cover": ("precision_cover", "recall_cover")}
    for flag, gone in keys.items():
        assert main([*base, flag]) == 0
        scores = json.loads((tmp_path / "s.json").read_text())["scores"]
        kept = {key for keys_ in keys.values() for key in keys_} - set(gone)
        assert not set(gone) & set(scores) and kept <= set(scores), flag
    argv = ["compare", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy")]
    argv += [str(tmp_path / "fake2.npy"), "--no-prd", "--no-alpha-beta", "--probabilistic", "--pr-cover", "-q"]
    capsys.readouterr()
    assert main(argv) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "p_precision" in line.split())
    assert {"p_precision", "p_recall", "precision_cover", "recall_cover"} <= set(header.split())


# ---------------------------------------------------------------------------- DDP: the sharded pass per sample
DDP_G = torch.Generator().manual_seed(7)
DDP_REAL = torch.randn(90, 5, generator=DDP_G)
DDP_FAKE = torch.cat([1.1 * torch.randn(60, 5, generator=DDP_G), DDP_REAL[:10]])  # with exact copies


def _per_sample(shard=None):
    """Per-sample soft probabilities (both variants) and PR-cover decisions of the engine's pass (small tiles)."""
    c = knn_pass(DDP_REAL, DDP_FAKE, cover=(2, 6), soft=(3, 1.3, False), block_bytes=12000, shard=shard).cross
    near = knn_pass(DDP_REAL, DDP_FAKE, soft=(3, 1.5, True), block_bytes=12000, shard=shard).cross
    return c.fake_soft, c.real_soft, c.fake_covered, c.real_covered, near.fake_soft, near.real_soft


def _sharded(rank, world):
    return _per_sample(Shard(rank, world))


def test_the_sharded_pass_per_sample_equals_one_process(both_tile_paths):
    want = _per_sample()
    for got in run_ddp(_sharded):
        for g, w in zip(got, want):
            assert torch.equal(g, w)
