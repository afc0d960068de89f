"""Vendi score: a float64 NumPy oracle from the paper (eigenvalues of the n x n kernel matrix K/n), the
``vendi-score`` package, properties, bad input, and the surfaces (GenerativeMetrics with its cached real
value, generative_metrics, CLI column, callback keys)."""

import json
import math

import numpy as np
import pytest
import torch

import lightning_prd.functional.families.vendi as vendi_family
from lightning_prd import GenerativeMetrics, PRDCallback
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics, vendi_score

from tiny_modules import GaussianSampler, quiet_trainer

ORDERS = [0.5, 1, 2, math.inf]


def oracle_vendi(x, q=1, normalize=True):
    """exp of the order-q entropy of the eigenvalues of K/n, K the n x n linear kernel (Friedman & Dieng, eq. 1)."""
    x = np.asarray(x, dtype=np.float64)
    if normalize:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    lam = np.linalg.eigvalsh(x @ x.T / x.shape[0])
    lam = lam[lam > 1e-12 * lam.max()]  # the n x n matrix has n - rank zero eigenvalues, noise in float64
    if q == 1:
        return math.exp(-(lam * np.log(lam)).sum())
    if math.isinf(q):
        return 1 / lam.max()
    return math.exp(math.log((lam**q).sum()) / (1 - q))


def data(n, d, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(dtype)


@pytest.mark.parametrize("q", ORDERS)
@pytest.mark.parametrize("shape", [(40, 7), (9, 25), (200, 16)], ids=["n>D", "n<D", "n>>D"])
def test_equals_float64_oracle(shape, q):
    x = data(*shape)
    got = vendi_score(torch.from_numpy(x), q=q)
    assert got.dtype == torch.float64 and got.ndim == 0
    assert float(got) == pytest.approx(oracle_vendi(x, q), rel=1e-10)


@pytest.mark.parametrize("q", ORDERS)
@pytest.mark.parametrize("shape", [(40, 7), (9, 25)], ids=["n>D", "n<D"])
def test_equals_vendi_score_package(shape, q):
    vendi = pytest.importorskip("vendi_score.vendi")
    x = data(*shape, seed=3)
    ref_q = "inf" if math.isinf(q) else q  # the package's spelling of order infinity
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    by_kernel = vendi.score_K(xn @ xn.T, q=ref_q)  # score_X ignores q: the n x n kernel path honours it
    by_dual = vendi.score_dual(x, q=ref_q)
    got = float(vendi_score(x, q=q))
    # q < 1 weighs the float64 noise of zero eigenvalues that the package keeps (we count it as 0)
    rel = 1e-6 if q < 1 else 1e-10
    assert got == pytest.approx(by_kernel, rel=rel)
    assert got == pytest.approx(by_dual, rel=rel)
    if q == 1:
        assert got == pytest.approx(vendi.score_X(x), rel=1e-10)


def test_unnormalized_equals_vendi_score_dual():
    vendi = pytest.importorskip("vendi_score.vendi")
    x = 0.4 * data(30, 6, seed=2)
    assert float(vendi_score(x, normalize=False)) == pytest.approx(vendi.score_dual(x, normalize=False), rel=1e-10)
    assert float(vendi_score(x, normalize=False)) == pytest.approx(oracle_vendi(x, normalize=False), rel=1e-10)


def test_effective_number_of_distinct_samples():
    """k distinct orthogonal directions, each repeated (and rescaled): exactly k at every order."""
    basis = torch.eye(5, dtype=torch.float64)
    x = torch.cat([basis * 2.0, basis, basis * 7.0])
    for q in ORDERS:
        assert float(vendi_score(x, q=q)) == pytest.approx(5.0, rel=1e-12)
    assert float(vendi_score(torch.ones(8, 3))) == pytest.approx(1.0, rel=1e-12)


def test_duplicating_the_set_and_permuting_rows_change_nothing():
    x = torch.from_numpy(data(25, 6, seed=4))
    value = vendi_score(x)
    assert float(vendi_score(torch.cat([x, x, x]))) == pytest.approx(float(value), rel=1e-12)
    assert float(vendi_score(x[torch.randperm(25)])) == pytest.approx(float(value), rel=1e-12)


def test_bounds_and_monotone_in_q():
    x = data(60, 8, seed=5)
    values = [float(vendi_score(x, q=q)) for q in ORDERS]
    assert all(1.0 <= v <= 8.0 for v in values)
    assert values == sorted(values, reverse=True)  # Hill numbers decrease with the order


def test_float32_input_and_chunked_gram_agree():
    x = data(5000, 12, seed=6, dtype=np.float32)
    got = float(vendi_score(torch.from_numpy(x)))  # n > 4096: the D x D Gram is summed over row chunks
    x64 = x.astype(np.float64)
    x64 /= np.linalg.norm(x64, axis=1, keepdims=True)
    lam = np.linalg.svd(x64, compute_uv=False) ** 2 / len(x64)  # the nonzero eigenvalues of K/n
    assert got == pytest.approx(math.exp(-(lam * np.log(lam)).sum()), rel=1e-9)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(q=0), ValueError, r"`q` to be a number in \(0, inf\] \(or \"inf\"\), but got 0"),
        (dict(q=-1.0), ValueError, r"`q` to be a number in \(0, inf\]"),
        (dict(q=float("nan")), ValueError, r"`q`"),
        (dict(q="two"), ValueError, r"`q`"),
        (dict(normalize=1), ValueError, r"`normalize` to be a bool, but got 1"),
    ],
)
def test_bad_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        vendi_score(torch.randn(5, 3), **kwargs)


def test_bad_features():
    x = torch.randn(6, 3)
    x[2] = 0
    with pytest.raises(ValueError, match=r"`features` to have no all-zero row when `normalize=True`.*got 1 of 6"):
        vendi_score(x)
    assert float(vendi_score(x, normalize=False)) > 0
    with pytest.raises(ValueError, match="`features` to be a 2-D tensor"):
        vendi_score(torch.randn(5))
    y = torch.randn(5, 3)
    assert torch.equal(vendi_score(y, q="inf"), vendi_score(y, q=math.inf))  # the package's spelling


# ---------------------------------------------------------------------------- surfaces
G = torch.Generator().manual_seed(2)
REAL = torch.randn(70, 6, generator=G)
FAKE = 0.5 * torch.randn(45, 6, generator=G) + 0.5


def test_generative_metrics_and_metric_equal_the_function():
    opts = dict(q=2.0)
    out = generative_metrics(REAL, FAKE, vendi=opts)
    assert torch.equal(out["vendi"], vendi_score(FAKE, q=2.0))
    assert torch.equal(out["vendi_real"], vendi_score(REAL, q=2.0))
    assert "vendi" not in generative_metrics(REAL, FAKE)
    metric = GenerativeMetrics(vendi=True, prd=False, alpha_beta=False)
    assert metric.vendi == dict(q=1.0, normalize=True)
    metric.update(REAL[:30], real=True)
    metric.update(REAL[30:], real=True)
    metric.update(FAKE, real=False)
    got = metric.compute()
    assert float(got["vendi"]) == pytest.approx(float(vendi_score(FAKE)), rel=1e-12)
    assert float(got["vendi_real"]) == pytest.approx(float(vendi_score(REAL)), rel=1e-12)
    with pytest.raises(ValueError, match=r"`vendi` to hold only .*unknown keys \['order'\]"):
        GenerativeMetrics(vendi=dict(order=2))
    with pytest.raises(ValueError, match=r"`q` to be a number in \(0, inf\]"):
        GenerativeMetrics(vendi=dict(q=0))


@pytest.mark.parametrize("keep_real", [True, False])
def test_real_value_cached_only_when_real_features_are_kept(monkeypatch, keep_real):
    calls = []

    real_value = vendi_family.vendi_of  # the family's call for each set (on checked features)

    def counting(features, **opts):
        if opts["name"] == "real":
            calls.append(features.shape[0])
        return real_value(features, **opts)

    monkeypatch.setattr(vendi_family, "vendi_of", counting)
    metric = GenerativeMetrics(vendi=True, prd=False, alpha_beta=False, reset_real_features=not keep_real)
    for epoch in range(3):
        if epoch == 0 or not keep_real:
            metric.update(REAL, real=True)
        metric.update(FAKE * (epoch + 1), real=False)
        out = metric.compute()
        assert float(out["vendi_real"]) == pytest.approx(float(vendi_score(REAL)), rel=1e-12)
        assert float(out["vendi"]) == pytest.approx(float(vendi_score(FAKE)), rel=1e-6)  # scale-free (float32 rows)
        metric.reset()
    assert calls == ([70] if keep_real else [70, 70, 70])  # the real set's value
    metric.reset_real_features = True
    metric.reset()  # a full reset drops the cache
    metric.update(REAL[:50], real=True)
    metric.update(FAKE, real=False)
    assert float(metric.compute()["vendi_real"]) == pytest.approx(float(vendi_score(REAL[:50])), rel=1e-12)


def test_cli_vendi_columns(tmp_path, capsys):
    gen = np.random.default_rng(1)
    real, fake = gen.normal(size=(60, 5)), 0.7 * gen.normal(size=(50, 5)) + 0.2
    np.save(tmp_path / "real.npy", real)
    np.save(tmp_path / "fake.npy", fake)
    out = tmp_path / "scores.json"
    args = ["--real", str(tmp_path / "real.npy"), "--no-prd", "--no-alpha-beta", "--quiet"]
    assert main(["evaluate", *args, "--fake", str(tmp_path / "fake.npy"), "--vendi", "--json", str(out)]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["vendi", f"{float(vendi_score(fake)):.4f}", "higher"] in lines
    assert ["vendi_real", f"{float(vendi_score(real)):.4f}", "higher"] in lines
    payload = json.loads(out.read_text())
    assert payload["scores"]["vendi"] == pytest.approx(float(vendi_score(fake)), rel=1e-12)
    assert payload["settings"]["vendi"] == {"q": 1.0, "normalize": True}
    assert main(["compare", *args, "--fake", str(tmp_path / "fake.npy"), str(tmp_path / "fake.npy"), "--vendi"]) == 0
    header = next(line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("fake "))
    assert header[-2:] == ["vendi", "vendi_real"]


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore:.*LeafSpec.*")
def test_callback_logs_vendi(tmp_path):

    real = torch.randn(64, 2, generator=torch.Generator().manual_seed(0))
    cb = PRDCallback(real, num_samples=48, metric=dict(vendi=True, prd=False))
    trainer = quiet_trainer(tmp_path, [cb], max_epochs=2)
    trainer.fit(GaussianSampler())
    assert {"prd/vendi", "prd/vendi_real"} <= set(trainer.callback_metrics)
    assert float(trainer.callback_metrics["prd/vendi_real"]) == pytest.approx(float(vendi_score(real)), rel=1e-6)
    assert [h["vendi_real"] for h in cb.history] == [cb.history[0]["vendi_real"]] * 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("shape", [(300, 20), (12, 40)], ids=["n>D", "n<D"])
def test_cuda_equals_cpu(shape):
    x = torch.from_numpy(data(*shape, seed=8))
    for q in ORDERS:
        got = vendi_score(x.cuda(), q=q)
        assert got.device.type == "cuda"
        assert float(got) == pytest.approx(float(vendi_score(x, q=q)), rel=1e-10)
