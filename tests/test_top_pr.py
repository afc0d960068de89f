"""TopP&R (Kim et al., NeurIPS 2023): a float64 NumPy oracle from the paper's formulas with the
same random draws (exact), the official ``top-pr`` package (exact with the same draws, and
within its own run-to-run variability with independent ones), sanity cases and bad input."""

import inspect
import math

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import generative_metrics, top_precision_recall
from lightning_prd.functional.knn import kde
from lightning_prd.functional.top_pr import TOP_PR_DEFAULTS, top_pr_draws
from lightning_prd.scores import direction

from ddp_utils import run_ddp

KEYS = ("top_precision", "top_recall", "top_f1")


def _dist(a, b):
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def _bandwidth(z, k, rule):
    d = _dist(z, z)
    if rule == "knn":
        np.fill_diagonal(d, np.inf)
        radii = np.sort(d, axis=1)[:, k - 1]
    else:  # the official code: rows i < n - k, k-th smallest distance to rows j > i
        radii = np.array([np.sort(d[i, i + 1 :])[k - 1] for i in range(len(z) - k)])
    radii = np.sort(radii)
    return radii[max(len(radii) // 2 - 1, 0)]


def _kde(data, positions, h):
    """The paper's compact cosine-kernel KDE, with its normalising constant (pi / 4h)^d."""
    d = _dist(positions, data)
    kern = np.where(d <= h, np.cos(np.pi / 2 * d / h), 0.0)
    return (np.pi / (4 * h)) ** data.shape[1] * kern.sum(1) / len(data)


def oracle(real, fake, weight, idx_r, idx_f, *, k, rule="half_row", alpha=0.1):
    """TopP&R in float64 NumPy from the formulas, given the projection and the bootstrap indices."""
    x, y = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    if weight is not None:
        w = np.asarray(weight, np.float64)
        x, y = x @ w.T, y @ w.T
    out = {}
    for name, z, idx in (("r", x, idx_r), ("g", y, idx_f)):
        h = _bandwidth(z, k, rule)
        p_hat = _kde(z, z, h)
        n = len(z)
        theta = [np.sqrt(n) * np.abs(p_hat - _kde(z[i], z, h)).max() for i in np.asarray(idx)]
        out[name] = (h, p_hat, np.quantile(theta, 1 - alpha) / np.sqrt(n))
    (h_r, p_rr, c_r), (h_g, p_gg, c_g) = out["r"], out["g"]
    p_gr, p_rg = _kde(x, y, h_r), _kde(y, x, h_g)  # real density at fakes, fake density at reals
    precision = np.sum((p_gg > c_g) & (p_gr > c_r)) / np.sum(p_gg > c_g)
    recall = np.sum((p_rr > c_r) & (p_rg > c_g)) / np.sum(p_rr > c_r)
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return {"top_precision": precision, "top_recall": recall, "top_f1": f1}


def _sets(n, m, d, seed=0, scale=0.8, shift=0.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    real = torch.randn(n, d, generator=g, dtype=dtype)
    return real, scale * torch.randn(m, d, generator=g, dtype=dtype) + shift


@pytest.mark.parametrize(
    "n, m, d, rule, scale",
    [
        (300, 250, 64, "half_row", 0.8),
        (300, 250, 64, "knn", 1.25),
        (180, 230, 8, "half_row", 1.25),
        (200, 150, 8, "knn", 0.8),
    ],
)
def test_equals_float64_oracle_with_the_same_draws(n, m, d, rule, scale):
    real, fake = _sets(n, m, d, seed=n + d, scale=scale)
    got = top_precision_recall(real, fake, bandwidth=rule, seed=7)
    weight, idx_r, idx_f = top_pr_draws(n, m, d, projection_dim=32, num_bootstrap=10, seed=7)
    want = oracle(real.numpy(), fake.numpy(), weight, idx_r, idx_f, k=5 * min(d, 32), rule=rule)
    for key in KEYS:
        assert float(got[key]) == pytest.approx(want[key], abs=1e-12), key
    assert 0 < float(got["top_precision"]) < 1 or 0 < float(got["top_recall"]) < 1  # not a trivial case


def test_options_follow_the_oracle_and_tiles_do_not_matter():
    real, fake = _sets(260, 210, 40, seed=3, scale=1.2, shift=0.1)
    opts = dict(alpha=0.25, num_bootstrap=7, projection_dim=12, k=30, bandwidth="knn", seed=5)
    got = top_precision_recall(real, fake, **opts)
    tiny = top_precision_recall(real, fake, **opts, block_bytes=8 * 96 * 96 * 4)  # 96 x 96 tiles, uneven edges
    weight, idx_r, idx_f = top_pr_draws(260, 210, 40, projection_dim=12, num_bootstrap=7, seed=5)
    want = oracle(real.numpy(), fake.numpy(), weight, idx_r, idx_f, k=30, rule="knn", alpha=0.25)
    for key in KEYS:
        assert float(got[key]) == pytest.approx(want[key], abs=1e-12), key
        assert float(tiny[key]) == pytest.approx(float(got[key]), abs=1e-12), key
    half = dict(projection_dim=12, k=30, bandwidth="half_row", seed=5)
    tiled, whole = (top_precision_recall(real, fake, **half, block_bytes=b) for b in (8 * 96 * 96 * 4, 2**28))
    assert all(float(tiled[key]) == pytest.approx(float(whole[key]), abs=1e-12) for key in KEYS)
    # no projection: the features are used as they are
    raw = top_precision_recall(real, fake, projection_dim=None, k=30, seed=5)
    _, idx_r, idx_f = top_pr_draws(260, 210, 40, projection_dim=None, num_bootstrap=10, seed=5)
    want = oracle(real.numpy(), fake.numpy(), None, idx_r, idx_f, k=30)
    assert float(raw["top_recall"]) == pytest.approx(want["top_recall"], abs=1e-12)


def test_default_projection_is_the_official_one():
    torch_state = torch.get_rng_state()
    try:
        torch.manual_seed(99)
        official = torch.nn.Linear(100, 32, bias=False).weight.detach().clone()
        torch.manual_seed(99)
        torch.nn.init.xavier_normal_(official)
    finally:
        torch.set_rng_state(torch_state)
    weight, _, _ = top_pr_draws(10, 10, 100, projection_dim=32, num_bootstrap=1, seed=99)
    assert torch.equal(weight, official)


# ---------------------------------------------------------------------------------------------
# the official package (test-only dependency)

top_pr_ref = pytest.importorskip("top_pr.top_pr", reason="the `top-pr` reference package is not installed")


@pytest.fixture
def official(monkeypatch):
    """``compute_top_pr`` with its global seeding undone afterwards (it reseeds torch and NumPy)."""
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    monkeypatch.setenv("PYTHONHASHSEED", "0")  # Fix_seed writes it; monkeypatch restores it
    yield top_pr_ref
    torch.set_rng_state(torch_state)
    np.random.set_state(np_state)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn


@pytest.mark.parametrize("n, m, d", [(300, 240, 64), (200, 230, 8)])
def test_reproduces_the_official_code_given_its_draws(official, monkeypatch, n, m, d):
    """The official ``compute_top_pr`` fed our bootstrap indices (``np.random.choice``) gives our scores."""
    real, fake = _sets(n, m, d, seed=11, scale=0.85, shift=0.05)
    _, idx_r, idx_f = top_pr_draws(n, m, d, projection_dim=32, num_bootstrap=10, seed=99)
    queue = [i.numpy() for i in (*idx_r, *idx_f)]  # the real set's 10 resamples, then the fake set's
    monkeypatch.setattr(np.random, "choice", lambda *args, **kwargs: queue.pop(0))
    ref = official.compute_top_pr(real_features=real.numpy(), fake_features=fake.numpy())
    assert not queue
    ours = top_precision_recall(real, fake)
    for key, ref_key in zip(KEYS, ("fidelity", "diversity", "Top_F1")):
        assert float(ours[key]) == pytest.approx(ref[ref_key], abs=1e-9), key


@pytest.mark.parametrize("scale, key", [(0.8, "top_recall"), (1.25, "top_precision")])
def test_within_the_official_run_to_run_variability(official, monkeypatch, scale, key):
    """Independent draws: our mean over seeds equals the official mean within their spread.

    The official code's only randomness (with its fixed projection) is the bootstrap of the
    band, 10 resamples, whose 0.9-quantile moves each score by several points between runs.
    Both sides are run R = 6 times with different seeds, on features projected once by the
    official matrix (so only the bootstrap varies on our side too). When the algorithms agree
    both means estimate the same expectation, and their difference has standard deviation
    sqrt(s_ref^2 / R + s_ours^2 / R); 3.5 of those from the observed spreads (a Student t with
    ~10 degrees of freedom exceeds 3.5 with probability ~0.6%), plus one sample of resolution,
    bound it. Every draw is seeded, so the test is deterministic. The k-NN bandwidth rule,
    for contrast, moves the mean by more than the bound (checked below).
    """
    runs = 6
    real, fake = _sets(400, 340, 64, seed=21, scale=scale)
    weight, _, _ = top_pr_draws(1, 1, 64, projection_dim=32, num_bootstrap=1, seed=99)
    ref_scores = []
    for s in range(runs):
        monkeypatch.setattr(official, "SEED", 1000 + s)  # its NumPy seed: the bootstrap draws
        out = official.compute_top_pr(real_features=real.numpy(), fake_features=fake.numpy())
        ref_scores.append(out["fidelity" if key == "top_precision" else "diversity"])
    proj_r, proj_f = real @ weight.double().T, fake @ weight.double().T
    ours = [float(top_precision_recall(proj_r, proj_f, projection_dim=None, seed=s)[key]) for s in range(runs)]
    knn = [
        float(top_precision_recall(proj_r, proj_f, projection_dim=None, bandwidth="knn", seed=s)[key])
        for s in range(runs)
    ]
    ref_scores, ours, knn = np.array(ref_scores), np.array(ours), np.array(knn)
    assert 0.05 < ref_scores.mean() < 0.95  # an informative case, not a saturated score
    bound = 3.5 * math.sqrt((ref_scores.var(ddof=1) + ours.var(ddof=1)) / runs) + 1 / 340
    assert abs(ours.mean() - ref_scores.mean()) <= bound, (ours, ref_scores)
    assert abs(knn.mean() - ref_scores.mean()) > bound  # the check can tell bandwidth rules apart


# ---------------------------------------------------------------------------------------------
# sanity cases


def test_identical_distributions_score_near_one():
    real, fake = _sets(1500, 1200, 64, seed=2, scale=1.0)
    out = top_precision_recall(real, fake)
    assert float(out["top_precision"]) > 0.85 and float(out["top_recall"]) > 0.85
    # a copy: equal densities, but each set draws its own band, so a few borderline samples differ
    same = top_precision_recall(real, real.clone())
    assert float(same["top_precision"]) > 0.9 and float(same["top_recall"]) > 0.9


def test_disjoint_sets_score_zero():
    real, fake = _sets(400, 300, 16, seed=4, scale=1.0, shift=50.0)
    out = top_precision_recall(real, fake)
    assert [float(out[k]) for k in KEYS] == [0.0, 0.0, 0.0]


def test_mode_collapse_keeps_precision_and_loses_recall():
    """Roles: fake = 0.1 N(0, I) inside real = 3 N(0, I): high precision, low recall (not swapped)."""
    real, fake = _sets(800, 600, 64, seed=5, scale=1.0)
    out = top_precision_recall(3 * real, 0.1 * fake)
    assert float(out["top_precision"]) > 0.9 and float(out["top_recall"]) < 0.1


def test_a_far_outlier_does_not_change_the_scores():
    """A real outlier (the case that inflates a k-NN ball) is outside the real support: its
    density is one kernel term, below the band. Appended last it changes neither the bandwidth
    rows nor any other sample's density beyond the 1/N factor; the bootstrap draws change with
    N, so the scores are compared as means over seeds, within the band's run-to-run spread."""
    real, fake = _sets(400, 350, 64, seed=6, scale=1.3)
    outlier = torch.zeros(1, 64, dtype=real.dtype)
    outlier[0, 0] = 25.0
    far = torch.cat([real, outlier])
    base = [top_precision_recall(real, fake, seed=s, num_bootstrap=100) for s in range(4)]
    with_outlier = [top_precision_recall(far, fake, seed=s, num_bootstrap=100) for s in range(4)]
    for key in ("top_precision", "top_recall"):
        a, b = np.mean([float(o[key]) for o in base]), np.mean([float(o[key]) for o in with_outlier])
        assert abs(a - b) < 0.03, (key, a, b)
    assert 0.2 < np.mean([float(o["top_precision"]) for o in base]) < 0.8  # informative, not saturated


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(alpha=0.0), "`alpha`"),
        (dict(alpha=1.5), "`alpha`"),
        (dict(num_bootstrap=0), "`num_bootstrap`"),
        (dict(projection_dim=0), "`projection_dim`"),
        (dict(k=0), "`k`"),
        (dict(bandwidth="silverman"), "`bandwidth`.*'silverman'"),
        (dict(seed=-1), "`seed`"),
        (dict(block_bytes=0), "`block_bytes`"),
    ],
)
def test_bad_options_name_the_argument(kwargs, match):
    real, fake = _sets(50, 40, 4, seed=0)
    with pytest.raises(ValueError, match=match):
        top_precision_recall(real, fake, **{"k": 5, **kwargs})


def test_bad_sets_name_the_argument():
    real, fake = _sets(200, 100, 64, seed=0)
    with pytest.raises(ValueError, match=r"`fake` to hold more than k = 160 samples.*got 100"):
        top_precision_recall(real, fake)
    with pytest.raises(ValueError, match="same number of features"):
        top_precision_recall(real, fake[:, :10])
    with pytest.raises(ValueError, match="`real` to be finite"):
        top_precision_recall(torch.full((200, 64), float("nan")), fake, k=50)
    with pytest.raises(ValueError, match="`real` to have distinct samples.*bandwidth of it is 0"):
        top_precision_recall(torch.zeros(60, 3), torch.randn(60, 3), k=5)


# ---------------------------------------------------------------------------- the switch
SW_REAL = torch.randn(260, 6, generator=torch.Generator().manual_seed(3))
SW_FAKE = 1.3 * torch.randn(230, 6, generator=torch.Generator().manual_seed(4))


def test_switch_defaults_are_the_function_defaults():
    params = inspect.signature(top_precision_recall).parameters
    assert TOP_PR_DEFAULTS == {name: params[name].default for name in TOP_PR_DEFAULTS}
    assert set(params) - set(TOP_PR_DEFAULTS) == {"real", "fake", "block_bytes"}


def test_the_switch_equals_the_function():
    opts = dict(num_bootstrap=12, seed=4)
    out = generative_metrics(SW_REAL, SW_FAKE, top_pr=opts, realism=False)
    want = top_precision_recall(SW_REAL, SW_FAKE, **opts)
    for key in KEYS:
        assert torch.equal(out[key], want[key]), key
        assert direction(key) == "higher"
    assert 0 < float(out["top_precision"]) < 1  # an informative case


@pytest.mark.parametrize(
    "value, match",
    [
        (dict(k=0), r"`top_pr\['k'\]` to be a positive integer"),
        (dict(alpha=1.0), r"`top_pr\['alpha'\]`"),
        (dict(bandwidth="scott"), r"`top_pr\['bandwidth'\]`.*'scott'"),
        (dict(kernel="cosine"), r"`top_pr` to hold only .*unknown keys \['kernel'\]"),
        ("yes", r"`top_pr` to be a bool or a dict"),
    ],
)
def test_bad_switch_values_name_the_option(value, match):
    with pytest.raises(ValueError, match=match):
        GenerativeMetrics(top_pr=value)
    with pytest.raises(ValueError, match=match):
        generative_metrics(SW_REAL, SW_FAKE, top_pr=value)


# ---------------------------------------------------------------------------- DDP: the tiles are split
DDP_REAL = torch.randn(300, 40, generator=torch.Generator().manual_seed(8))
DDP_FAKE = 1.2 * torch.randn(250, 40, generator=torch.Generator().manual_seed(9)) + 0.1
#: (real rows, fake rows) of rank 0 and rank 1: uneven, and rank 1 holds most of the fakes
DDP_SPLIT = [((0, 170), (0, 50)), ((170, 300), (50, 250))]


def _ddp_metric():
    return GenerativeMetrics(top_pr=dict(num_bootstrap=20), prd=False, alpha_beta=False, block_bytes=40000)


def _tile_entries(fn):
    """``fn()`` and the tile entries ``kde._tiles`` yielded meanwhile."""
    entries, original = [0], kde._tiles

    def counted(*args, **kwargs):
        for i0, j0, sq in original(*args, **kwargs):
            entries[0] += sq.shape[0] * sq.shape[1]
            yield i0, j0, sq

    kde._tiles = counted
    try:
        out = fn()
    finally:
        kde._tiles = original
    return out, entries[0]


def _ddp_rank(rank, world):
    (r0, r1), (f0, f1) = DDP_SPLIT[rank]
    m = _ddp_metric()
    for s in range(r0, r1, 60):  # several batches per rank
        m.update(DDP_REAL[s : min(s + 60, r1)], real=True)
    m.update(DDP_FAKE[f0:f1], real=False)
    out, entries = _tile_entries(m.compute)
    return {**{k: v.clone() for k, v in out.items() if k in KEYS}, "tile_entries": entries}


def test_ddp_splits_the_kernel_density_tiles_between_the_ranks():
    single = _ddp_metric()
    single.update(DDP_REAL, real=True)
    single.update(DDP_FAKE, real=False)
    want, entries = _tile_entries(single.compute)
    outs = run_ddp(_ddp_rank)
    for out in outs:
        for key in KEYS:
            assert torch.equal(out[key], want[key]), key
    assert sum(out["tile_entries"] for out in outs) == entries  # none computed twice
    assert all(0 < out["tile_entries"] < entries for out in outs)
