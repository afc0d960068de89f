"""PRD (Sajjadi et al. 2018): curve from histograms, F-beta, the torch k-means and the Metric.

Expected values come from the reference's unit tests (``prd_score_test.py``, whose calls are
``(eval=fake, ref=real)``), from the seed note's two-cluster example, from the closed forms of
mode dropping, and from float64 NumPy oracles written here from the formulas.
"""

import math

import numpy as np
import pytest
import torch

from lightning_prd.functional.engine.kmeans import kmeans
from lightning_prd.functional.prd import prd_curve, prd_f_beta, prd_from_histograms
from lightning_prd.metrics.prd import PRDCurve


def _np_prd(real_hist, fake_hist, num_angles, eps=1e-10):
    """Oracle: alpha(lambda) = sum min(lambda P, Q), beta = alpha / lambda, in float64."""
    lam = np.tan(np.linspace(eps, np.pi / 2 - eps, num_angles))
    alpha = np.minimum(lam[:, None] * np.asarray(real_hist)[None], np.asarray(fake_hist)[None]).sum(1)
    return np.clip(alpha, 0, 1), np.clip(alpha / lam, 0, 1)


def _np_lloyd(x, centers):
    """Oracle: plain float64 Lloyd iterations until the labels stop changing."""
    x, centers = np.asarray(x, np.float64), np.asarray(centers, np.float64).copy()
    labels = None
    for _ in range(1000):
        d = ((x[:, None, :] - centers[None]) ** 2).sum(-1)
        new = d.argmin(1)
        if labels is not None and (new == labels).all():
            break
        labels = new
        for j in range(len(centers)):
            if (labels == j).any():
                centers[j] = x[labels == j].mean(0)
    return d.min(1).sum(), labels


def _blobs(n_per, num_modes, dim, seed, spread=10.0, modes=None):
    """``n_per`` points around each of the first ``num_modes`` of 20 fixed well-separated centres."""
    centres = torch.randn(20, dim, generator=torch.Generator().manual_seed(99)) * spread
    modes = range(num_modes) if modes is None else modes
    gen = torch.Generator().manual_seed(seed)
    return torch.cat([centres[m] + torch.randn(n_per, dim, generator=gen) for m in modes])


# --- prd_from_histograms: the reference unit vectors, in (real, fake) order -----------------


def test_disjoint_histograms_give_zero_curves():
    precision, recall = prd_from_histograms(real_hist=[1.0, 0.0], fake_hist=[0.0, 1.0])
    assert precision.shape == recall.shape == (1001,)
    assert float(precision.max()) < 1e-8 and float(recall.max()) < 1e-8


def test_identical_histograms_reach_one_at_lambda_one():
    precision, recall = prd_from_histograms([1.0, 0.0], [1.0, 0.0], num_angles=11)
    assert precision[5] == pytest.approx(1.0) and recall[5] == pytest.approx(1.0)
    precision, recall = prd_from_histograms([0.2, 0.3, 0.5], [0.2, 0.3, 0.5], num_angles=1001)
    assert precision[500] == pytest.approx(1.0) and recall[500] == pytest.approx(1.0)


def test_model_spread_over_two_clusters_of_one_cluster_data():
    # reference: eval=[.5, .5], ref=[1, 0]
    precision, recall = prd_from_histograms(real_hist=[1.0, 0.0], fake_hist=[0.5, 0.5], num_angles=11)
    assert precision[5] == pytest.approx(0.5) and recall[5] == pytest.approx(0.5)
    assert precision[10] == pytest.approx(0.5) and recall[1] == pytest.approx(1.0)


def test_seed_note_two_cluster_example():
    # P = (0.5, 0.5) real, Q = (1, 0) collapsed model; reference: eval=[1, 0], ref=[.5, .5]
    precision, recall = prd_from_histograms(real_hist=[0.5, 0.5], fake_hist=[1.0, 0.0], num_angles=11)
    assert precision[5] == pytest.approx(0.5) and recall[5] == pytest.approx(0.5)
    assert recall[1] == pytest.approx(0.5) and precision[10] == pytest.approx(1.0)
    precision, recall = prd_from_histograms(real_hist=[0.5, 0.5], fake_hist=[1.0, 0.0])
    assert float(recall.max()) <= 0.5 + 1e-12
    assert float(precision.max()) == pytest.approx(1.0)
    lam = np.tan(np.linspace(1e-10, np.pi / 2 - 1e-10, 1001))
    np.testing.assert_allclose(precision.numpy(), np.minimum(0.5 * lam, 1.0), atol=1e-12)
    np.testing.assert_allclose(recall.numpy(), np.minimum(0.5, 1.0 / lam), atol=1e-12)


def test_random_histograms_match_numpy_oracle():
    gen = np.random.default_rng(0)
    for bins in (3, 20, 100):
        p, q = gen.dirichlet(np.ones(bins)), gen.dirichlet(np.ones(bins) * 0.3)
        precision, recall = prd_from_histograms(torch.tensor(p), q, num_angles=257)
        ref_p, ref_r = _np_prd(p, q, 257)
        np.testing.assert_allclose(precision.numpy(), ref_p, atol=1e-12)
        np.testing.assert_allclose(recall.numpy(), ref_r, atol=1e-12)
        assert precision.dtype == torch.float64


@pytest.mark.parametrize("epsilon", [0, 1, -1, 0.1])
def test_invalid_epsilon(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        prd_from_histograms([0.5, 0.5], [0.5, 0.5], epsilon=epsilon)


@pytest.mark.parametrize("num_angles", [0, 1, -1, 10**6 + 1, 2.5, True])
def test_invalid_num_angles(num_angles):
    with pytest.raises(ValueError, match="num_angles"):
        prd_from_histograms([0.5, 0.5], [0.5, 0.5], num_angles=num_angles)


@pytest.mark.parametrize(
    ("real_hist", "fake_hist", "name"),
    [
        ([[0.5, 0.5]], [0.5, 0.5], "real_hist"),
        ([0.5, 0.5], [0.2, 0.3, 0.5], "fake_hist"),
        ([1.5, -0.5], [0.5, 0.5], "real_hist"),
        ([0.5, 0.5], [3.0, 1.0], "fake_hist"),
        ([0.5, float("nan")], [0.5, 0.5], "real_hist"),
        ([], [], "real_hist"),
    ],
)
def test_invalid_histograms(real_hist, fake_hist, name):
    with pytest.raises(ValueError, match=name):
        prd_from_histograms(real_hist, fake_hist)


# --- prd_f_beta ------------------------------------------------------------------------------

_P = [1, 1, 0, 0, 0.5, 1, 0.5]
_R = [1, 0, 1, 0, 0.5, 0.5, 1]


@pytest.mark.parametrize(
    ("beta", "expected", "expected_inv"),
    [
        (1, [1, 0, 0, 0, 0.5, 2 / 3, 2 / 3], [1, 0, 0, 0, 0.5, 2 / 3, 2 / 3]),
        (2, [1, 0, 0, 0, 0.5, 5 / 9, 5 / 6], [1, 0, 0, 0, 0.5, 5 / 6, 5 / 9]),
        (0.5, [1, 0, 0, 0, 0.5, 5 / 6, 5 / 9], [1, 0, 0, 0, 0.5, 5 / 9, 5 / 6]),
    ],
)
def test_f_beta_reference_vectors(beta, expected, expected_inv):
    for p, r, e, e_inv in zip(_P, _R, expected, expected_inv):
        f, f_inv = prd_f_beta([p], [r], beta=beta)
        assert float(f) == pytest.approx(e, abs=1e-8) and float(f_inv) == pytest.approx(e_inv, abs=1e-8)
    f, _ = prd_f_beta(_P, _R, beta=beta)
    assert float(f) == pytest.approx(1.0)  # the max over the curve


def test_f_beta_of_half_coverage():
    precision, recall = prd_from_histograms(real_hist=[0.5, 0.5], fake_hist=[1.0, 0.0])
    f_8, f_inv_8 = prd_f_beta(precision, recall)
    # the maximum sits at lambda = 2, between two of the 1001 angles
    assert float(f_8) == pytest.approx(65 * 0.5 / 64.5, abs=1e-4)
    assert float(f_inv_8) == pytest.approx((1 + 1 / 64) * 0.5 / (1 / 64 + 0.5), abs=1e-4)


@pytest.mark.parametrize("beta", [0, -3, float("inf"), float("nan"), "8", True])
def test_f_beta_invalid_beta(beta):
    with pytest.raises(ValueError, match="beta"):
        prd_f_beta([0.5], [0.5], beta=beta)


def test_f_beta_invalid_curves():
    with pytest.raises(ValueError, match="precision"):
        prd_f_beta([1.5, 0.5], [0.5, 0.5])
    with pytest.raises(ValueError, match="recall"):
        prd_f_beta([0.5, 0.5], [-0.1, 0.5])
    with pytest.raises(ValueError, match="same shape"):
        prd_f_beta([0.5, 0.5], [0.5])


# --- k-means -----------------------------------------------------------------------------------


def test_kmeans_recovers_separated_clusters():
    x = _blobs(30, 8, 16, seed=0)
    truth = torch.arange(8).repeat_interleave(30)
    res = kmeans(x, 8, seed=0)
    pairs = set(zip(truth.tolist(), res.labels.tolist()))
    assert len(pairs) == 8 and len({b for _, b in pairs}) == 8  # a bijection between clusters
    assert res.centers.shape == (8, 16) and res.centers.dtype == torch.float32


def test_kmeans_inertia_not_worse_than_numpy_lloyd_from_same_init():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(400, 5, generator=gen) + torch.randn(400, 1, generator=gen) * 2  # overlapping blobs
    init = x[torch.randperm(400, generator=gen)[:6]]
    oracle_inertia, oracle_labels = _np_lloyd(x.double().numpy(), init.double().numpy())
    for dtype in (torch.float32, torch.float64):
        res = kmeans(x.to(dtype), 6, init=init.to(dtype), tol=0.0, max_iter=1000)
        assert float(res.inertia) <= oracle_inertia * (1 + 1e-5)
        direct = ((x.double() - res.centers.double()[res.labels]) ** 2).sum()
        assert float(res.inertia) == pytest.approx(float(direct), rel=1e-5)
    assert res.centers.dtype == torch.float64
    assert (res.labels.numpy() == oracle_labels).all()


def test_kmeans_default_seeding_is_good():
    x = torch.randn(600, 8, generator=torch.Generator().manual_seed(5))
    res = kmeans(x, 10, seed=1, init_size=200)
    best_oracle = min(_np_lloyd(x.numpy(), x[i * 10 : i * 10 + 10].numpy())[0] for i in range(5))
    assert float(res.inertia) <= best_oracle * 1.05


def test_kmeans_as_many_clusters_as_points():
    x = torch.randn(12, 3, generator=torch.Generator().manual_seed(0))
    res = kmeans(x, 12, seed=0)
    assert sorted(res.labels.tolist()) == list(range(12))
    assert float(res.inertia) == pytest.approx(0.0, abs=1e-4)  # float32 GEMM rounding only


def test_kmeans_repairs_empty_clusters_and_duplicates():
    x = _blobs(10, 3, 4, seed=1)
    init = torch.stack([x[0], x[0], x[0]])  # two clusters start empty
    res = kmeans(x, 3, init=init)
    assert torch.bincount(res.labels, minlength=3).min() > 0
    res = kmeans(torch.cat([torch.zeros(5, 4), torch.ones(5, 4)]), 3, seed=0)  # 2 distinct points
    assert float(res.inertia) == pytest.approx(0.0, abs=1e-5)


def test_kmeans_is_deterministic_for_a_seed():
    x = torch.randn(500, 6, generator=torch.Generator().manual_seed(2))
    a, b = kmeans(x, 7, seed=11), kmeans(x, 7, seed=11)
    assert torch.equal(a.labels, b.labels) and torch.equal(a.centers, b.centers)


def test_kmeans_rejects_too_many_clusters():
    with pytest.raises(ValueError, match="num_clusters"):
        kmeans(torch.zeros(5, 2), 6)


# --- prd_curve -------------------------------------------------------------------------------


def test_mode_dropping_analytic_f_scores():
    real = _blobs(100, 20, 64, seed=1)  # all 20 modes
    fake = _blobs(200, 10, 64, seed=2)  # the first 10 modes only, same total size
    precision, recall = prd_curve(real, fake)
    f_8, f_inv_8 = prd_f_beta(precision, recall)
    assert float(f_8) == pytest.approx(65 * 0.5 / 64.5, abs=0.02)  # 0.5039
    assert float(f_inv_8) == pytest.approx(1.015625 * 0.5 / 0.515625, abs=0.02)  # 0.9848
    assert float(recall.max()) == pytest.approx(0.5, abs=0.02)
    # swapped roles: the data has 10 modes, the model 20 -> precision capped at 0.5
    precision, recall = prd_curve(real=fake, fake=real, num_runs=3)
    assert float(precision.max()) == pytest.approx(0.5, abs=0.02) and float(recall.max()) > 0.98


def test_mode_collapse_has_high_precision_low_recall():
    # DESIGN.md's role guard: fake = 0.1 N(0, I) sits inside real = 3 N(0, I)
    gen = torch.Generator().manual_seed(42)
    fake = 0.1 * torch.randn(500, 16, generator=gen)
    real = 3 * torch.randn(500, 16, generator=gen)
    precision, recall = prd_curve(real=real, fake=fake, num_runs=3)
    assert float(precision.max()) > 0.9 and float(recall.max()) < 0.2
    f_8, f_inv_8 = prd_f_beta(precision, recall)
    assert float(f_8) < 0.2 and float(f_inv_8) > 0.5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_prd_curve_on_cuda_matches_cpu():
    real, fake = _blobs(100, 20, 64, seed=1), _blobs(200, 10, 64, seed=2)
    cpu = prd_f_beta(*prd_curve(real, fake, num_runs=3))
    precision, recall = prd_curve(real.cuda(), fake.cuda(), num_runs=3)
    assert precision.device.type == "cuda"
    gpu = prd_f_beta(precision, recall)
    assert [float(v) for v in gpu] == pytest.approx([float(v) for v in cpu], abs=0.02)
    res = kmeans(real.cuda(), 20, seed=0)
    assert res.labels.device.type == "cuda" and torch.bincount(res.labels).numel() == 20


def test_identical_distributions_give_f_scores_near_one():
    # independent samples: the histograms differ only by sampling noise (reference: ~0.996)
    modes = [torch.randint(0, 20, (2000,), generator=torch.Generator().manual_seed(s)).tolist() for s in (0, 1)]
    real, fake = _blobs(1, 20, 32, seed=3, modes=modes[0]), _blobs(1, 20, 32, seed=4, modes=modes[1])
    gen = torch.Generator().manual_seed(0)
    blob_real, blob_fake = torch.randn(2000, 32, generator=gen), torch.randn(2000, 32, generator=gen)
    for r, f in ((real, fake), (blob_real, blob_fake)):
        f_8, f_inv_8 = prd_f_beta(*prd_curve(r, f, num_runs=3))
        assert 0.98 < float(f_8) <= 1 and 0.98 < float(f_inv_8) <= 1


def test_prd_curve_is_deterministic_for_a_seed():
    gen = torch.Generator().manual_seed(0)
    real, fake = torch.randn(300, 8, generator=gen), torch.randn(300, 8, generator=gen) * 1.5
    a = prd_curve(real, fake, num_runs=3, seed=7)
    b = prd_curve(real, fake, num_runs=3, seed=7)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = prd_curve(real, fake, num_runs=3, seed=8)
    assert c[0].shape == (1001,) and 0 <= float(c[0].min()) and float(c[1].max()) <= 1


def test_prd_curve_float64_and_small_sets():
    real = torch.cat([torch.zeros(5, 4), torch.ones(5, 4)]).double()
    fake = torch.cat([torch.zeros(5, 4), torch.ones(5, 4)]).double() + 1e-3
    precision, recall = prd_curve(real, fake, num_clusters=2, num_runs=2, num_angles=11)
    assert precision[5] == pytest.approx(1.0) and recall[5] == pytest.approx(1.0)
    precision, recall = prd_curve(real[:1], fake[:1], num_clusters=2, num_runs=1)  # n == num_clusters
    assert float(precision.max()) < 1e-8


def test_unequal_sizes():
    real, fake = _blobs(10, 2, 4, seed=0), _blobs(5, 2, 4, seed=1)  # 20 real, 10 fake
    with pytest.raises(ValueError, match=r"20 real and 10 fake"):
        prd_curve(real, fake, num_clusters=2)
    precision, recall = prd_curve(real, fake, num_clusters=2, num_runs=2, enforce_balance=False, num_angles=11)
    assert precision[5] == pytest.approx(1.0) and recall[5] == pytest.approx(1.0)
    a = prd_curve(real, fake, num_clusters=2, num_runs=2, enforce_balance="subsample", num_angles=11)
    b = prd_curve(fake, real, num_clusters=2, num_runs=2, enforce_balance="subsample", num_angles=11)
    assert torch.equal(
        a[0], prd_curve(real, fake, num_clusters=2, num_runs=2, enforce_balance="subsample", num_angles=11)[0]
    )
    assert float(a[0].max()) <= 1 and float(b[1].max()) <= 1


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_clusters": 0}, "num_clusters"),
        ({"num_clusters": 41}, "num_clusters"),
        ({"num_runs": 0}, "num_runs"),
        ({"num_angles": 2}, "num_angles"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"enforce_balance": "yes"}, "enforce_balance"),
    ],
)
def test_prd_curve_invalid_options(kwargs, name):
    with pytest.raises(ValueError, match=name):
        prd_curve(torch.zeros(20, 3), torch.ones(20, 3), **kwargs)


def test_prd_curve_invalid_features():
    with pytest.raises(ValueError, match="fake"):
        prd_curve(torch.zeros(5, 3), torch.ones(5, 4), num_clusters=2)
    with pytest.raises(ValueError, match="real"):
        prd_curve(torch.zeros(5), torch.ones(5, 1), num_clusters=2)


# --- PRDCurve metric -------------------------------------------------------------------------


def test_metric_batches_equal_functional():
    real, fake = _blobs(20, 6, 8, seed=0), _blobs(40, 3, 8, seed=1)
    metric = PRDCurve(num_clusters=6, num_runs=3, seed=4)
    for batch in real.split(32):
        metric.update(batch, real=True)
    for batch in fake.split(50):
        metric.update(batch, real=False)
    out = metric.compute()
    precision, recall = prd_curve(real, fake, num_clusters=6, num_runs=3, seed=4)
    assert torch.equal(out["prd_precision"], precision) and torch.equal(out["prd_recall"], recall)
    f_8, f_inv_8 = prd_f_beta(precision, recall, beta=8)
    assert torch.equal(out["f_beta"], f_8) and torch.equal(out["f_inv_beta"], f_inv_8)
    assert float(out["f_beta"]) == pytest.approx(65 * 0.5 / 64.5, abs=0.02)  # half the modes


def test_metric_plot():
    metric = PRDCurve(num_clusters=2, num_runs=1)
    metric.update(_blobs(10, 2, 4, seed=0), real=True)
    metric.update(_blobs(20, 1, 4, seed=1), real=False)
    fig, ax = metric.plot()
    assert ax.get_xlim() == (0, 1) and ax.get_ylim() == (0, 1)
    out = metric.compute()
    fig, ax = metric.plot([out, out], labels=["a", "b"])
    assert len(ax.lines) == 2 and [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    assert ax.get_xlabel() == "Recall" and fig is ax.figure
    with pytest.raises(ValueError, match="label"):
        metric.plot([out, out], labels=["a"])


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"num_clusters": 0}, "num_clusters"), ({"beta": 0}, "beta"), ({"enforce_balance": None}, "enforce_balance")],
)
def test_metric_invalid_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        PRDCurve(**kwargs)


def test_metric_flags():
    assert PRDCurve.higher_is_better is True
    assert (PRDCurve.plot_lower_bound, PRDCurve.plot_upper_bound) == (0.0, 1.0)
    assert math.isclose(float(prd_f_beta([1.0], [1.0])[0]), 1.0)
