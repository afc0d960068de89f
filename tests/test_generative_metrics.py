"""``generative_metrics``: equal to the separate functions, to the float64 oracles, the seed note's
1-D example and ``prdc``; one shared k-NN pass; clear errors on bad input."""

import inspect

import numpy as np
import pytest
import torch

import lightning_prd.functional as F
from lightning_prd import GenerativeMetrics
from lightning_prd.functional import generative_metrics
from lightning_prd.functional.engine import one_pass as _engine
from lightning_prd.functional.uncertainty import score_spread

import oracle

REAL_1D = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
FAKE_1D = torch.tensor([[0.2], [0.8], [1.1], [7.0]])
PRD = dict(num_clusters=4, num_runs=2, num_angles=51, seed=3)


def _authenticity_oracle(real, fake):
    """Share of fakes farther from their nearest real x* than NND_1(x*), from full float64 matrices."""
    d = oracle.dist(fake, real)
    nearest = d.argmin(1)
    return float((d[np.arange(len(fake)), nearest] > oracle.kth_radius(real, 1)[nearest]).mean())


def _data(n, m, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    real = torch.randn(n, d, generator=g, dtype=torch.float64)
    fake = 0.8 * torch.randn(m, d, generator=g, dtype=torch.float64) + 0.2
    return real.to(dtype), fake.to(dtype)


def _engine_module(name):
    """The module whose ``name`` the engine calls (wherever the k-NN stages live)."""
    if hasattr(_engine, name):
        return _engine
    return next(v for v in vars(_engine).values() if inspect.ismodule(v) and hasattr(v, name))


def _count_calls(monkeypatch, name):
    module = _engine_module(name)
    calls = []
    orig = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **kw: calls.append(1) or orig(*a, **kw))
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,m,d,k_precision_recall,k_density_coverage", [(90, 130, 6, 3, 5), (150, 70, 12, 2, 4)])
def test_equals_the_separate_functions(n, m, d, k_precision_recall, k_density_coverage, dtype):
    real, fake = _data(n, m, d, dtype)
    out = generative_metrics(
        real,
        fake,
        k_precision_recall=k_precision_recall,
        k_density_coverage=k_density_coverage,
        prd=PRD,
        alpha_beta=dict(num_alphas=9, k=k_density_coverage),
        per_sample=True,
        error_bars=3,
    )
    p, r = F.precision_recall(real, fake, k=k_precision_recall)
    dens, cov = F.density_coverage(real, fake, k=k_density_coverage)
    want = {"precision": p, "recall": r, "density": dens, "coverage": cov}
    want["authenticity"] = F.authenticity(real, fake)
    want["frechet_distance"] = F.frechet_distance(real, fake)
    want["realism"] = F.realism_score(real, fake, k=k_precision_recall)
    ab = F.alpha_precision_beta_recall(real, fake, num_alphas=9, k=k_density_coverage)
    want.update(ab)
    prd_opts = {key: v for key, v in PRD.items()}
    curve_p, curve_r = F.prd_curve(real, fake, enforce_balance="subsample", **prd_opts)
    want["prd_precision"], want["prd_recall"] = curve_p, curve_r
    want["f_beta"], want["f_inv_beta"] = F.prd_f_beta(curve_p, curve_r)
    spread = score_spread(
        real, fake, num_splits=3, k_precision_recall=k_precision_recall, k_density_coverage=k_density_coverage
    )
    want.update({f"{name}_std": v["std"].to(dtype) for name, v in spread.items()})
    # on by default: probabilistic P&R and PR-cover (default k = ceil((ln N + 6) / 3))
    want["p_precision"], want["p_recall"] = F.probabilistic_precision_recall(real, fake)
    want["precision_cover"], want["recall_cover"] = F.precision_recall_cover(real, fake)
    extra = {"inside_precision", "covered"}
    assert set(out) == set(want) | extra
    for name, value in want.items():
        assert out[name].dtype == value.dtype, name
        assert torch.equal(out[name], value), name
    assert int(out["inside_precision"].sum()) == round(float(p) * m)
    assert int(out["covered"].sum()) == round(float(cov) * n)
    assert out["inside_precision"].shape == (m,) and out["covered"].shape == (n,)


@pytest.mark.parametrize("n,m,d", [(80, 110, 5), (120, 60, 9)])
def test_equals_float64_oracles(n, m, d):
    real, fake = _data(n, m, d, torch.float64, seed=5)
    out = generative_metrics(real, fake)  # k_precision_recall=3, k_density_coverage=5
    r, f = real.numpy(), fake.numpy()
    op, orr = oracle.precision_recall(r, f, k=3)
    od, oc = oracle.density_coverage(r, f, k=5)
    assert float(out["precision"]) == op and float(out["recall"]) == orr
    assert float(out["density"]) == pytest.approx(od, rel=1e-15) and float(out["coverage"]) == oc
    assert float(out["authenticity"]) == _authenticity_oracle(r, f)
    np.testing.assert_allclose(out["realism"].numpy(), oracle.realism(r, f, k=3), rtol=1e-10)
    assert float(out["frechet_distance"]) == pytest.approx(oracle.frechet(r, f), rel=1e-8)


def test_seed_note_worked_example():
    out = generative_metrics(REAL_1D, FAKE_1D, k_precision_recall=1, k_density_coverage=1)
    assert [float(out[n]) for n in ("precision", "recall", "density", "coverage")] == [0.75, 1.0, 1.5, 0.75]
    # NND_1 = 1 for every real sample, all kept; nearest reals of the fakes: 0, 1, 1, 3
    assert out["realism"].tolist() == pytest.approx([1 / 0.2, 1 / 0.2, 1 / 0.1, 1 / 4.0], rel=1e-6)
    assert float(out["authenticity"]) == 0.25  # only 7.0 is farther than NND_1 from its nearest real sample
    r, f = REAL_1D.double().numpy()[:, 0], FAKE_1D.double().numpy()[:, 0]  # 1-D: (mu_r - mu_f)^2 + (s_r - s_f)^2
    fd = (r.mean() - f.mean()) ** 2 + (r.std(ddof=1) - f.std(ddof=1)) ** 2
    assert float(out["frechet_distance"]) == pytest.approx(fd, rel=1e-12)
    out = generative_metrics(REAL_1D, FAKE_1D[:3], k_precision_recall=1, k_density_coverage=1)  # without the outlier 7
    assert [float(out[n]) for n in ("precision", "recall", "coverage")] == [1.0, 0.5, 0.75]


def test_prdc_setting_matches_prdc(rng):
    prdc = pytest.importorskip("prdc")
    real = torch.randn(300, 8, generator=rng, dtype=torch.float64)
    fake = 0.8 * torch.randn(250, 8, generator=rng, dtype=torch.float64)
    ref = prdc.compute_prdc(real_features=real.numpy(), fake_features=fake.numpy(), nearest_k=5)
    out = generative_metrics(real, fake, k_precision_recall=5, k_density_coverage=5)
    for name in ("precision", "recall", "density", "coverage"):
        assert float(out[name]) == pytest.approx(ref[name], abs=1e-12), name


def test_one_shared_pass(monkeypatch):
    real, fake = _data(100, 80, 6, torch.float32)
    cross, radii = _count_calls(monkeypatch, "cross_pass"), _count_calls(monkeypatch, "self_radii")
    generative_metrics(real, fake, alpha_beta=True)  # probabilistic P&R and PR-cover too (default)
    assert len(cross) == 1 and len(radii) == 2  # one cross pass; real radii and fake radii once each
    cross.clear(), radii.clear()
    F.precision_recall(real, fake), F.density_coverage(real, fake), F.authenticity(real, fake)
    assert len(cross) == 3  # what the separate calls cost


def test_only_frechet_runs_no_knn_pass(monkeypatch):
    real, fake = _data(30, 20, 4, torch.float32)
    cross = _count_calls(monkeypatch, "cross_pass")
    off = dict(realism=False, authenticity=False, probabilistic=False, pr_cover=False)
    out = generative_metrics(real, fake, k_precision_recall=None, k_density_coverage=None, **off)
    assert list(out) == ["frechet_distance"] and cross == []


def test_class_computes_the_same(rng):
    real, fake = _data(70, 90, 5, torch.float32, seed=2)
    metric = GenerativeMetrics(prd=PRD, alpha_beta=dict(num_alphas=7), realism=True)
    metric.update(real, real=True)
    metric.update(fake, real=False)
    got = metric.compute()
    want = generative_metrics(real, fake, prd=PRD, alpha_beta=dict(num_alphas=7))
    assert set(got) == set(want)
    for name in want:
        assert torch.equal(got[name], want[name]), name


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(k_precision_recall=0), r"`k_precision_recall`.*0"),
        (dict(k_density_coverage=2.5), r"`k_density_coverage`.*2.5"),
        (dict(prd="yes"), r"`prd`.*'yes'"),
        (dict(prd=dict(num_cluster=3)), r"`prd`.*unknown keys \['num_cluster'\]"),
        (dict(alpha_beta=dict(k=0)), r"`alpha_beta\['k'\]`.*0"),
        (dict(realism="no"), r"`realism`.*'no'"),
        (dict(authenticity=1), r"`authenticity`.*1"),
        (dict(error_bars=1), r"`error_bars`.*1"),
        (
            dict(per_sample=True, k_density_coverage=None),
            r"`k_precision_recall` and `k_density_coverage` to be set when `per_sample=True`",
        ),
        (dict(k_density_coverage=39), r"`real` to hold at least k_density_coverage \+ 1 = 40 samples.*got 30"),
        (dict(k_precision_recall=20), r"`fake` to hold at least k_precision_recall \+ 1 = 21 samples.*got 20"),
        (dict(dtype=torch.float16), r"`dtype`.*float16"),
    ],
)
def test_bad_options_name_the_argument(kwargs, match):
    real, fake = _data(30, 20, 4, torch.float32)
    with pytest.raises(ValueError, match=match):
        generative_metrics(real, fake, **kwargs)


@pytest.mark.parametrize(
    ("real", "fake", "match"),
    [
        (torch.randn(30, 4), torch.randn(20, 5), r"4.*5|5.*4"),
        (torch.randn(30), torch.randn(20, 4), r"`real`"),
        (torch.full((30, 4), float("nan")), torch.randn(20, 4), r"`real`"),
        (torch.randn(30, 4), torch.tensor([[float("inf")] * 4] * 20), r"`fake`"),
    ],
)
def test_bad_features_name_the_set(real, fake, match):
    with pytest.raises(ValueError, match=match):
        generative_metrics(real, fake)
