"""Kernel Inception Distance: a float64 NumPy oracle of Bińkowski et al.'s unbiased MMD², torchmetrics'
``KernelInceptionDistance`` on the same subsets, the seed, bad input, and the surfaces (GenerativeMetrics,
generative_metrics, CLI column, callback keys)."""

import json
import warnings

import numpy as np
import pytest
import torch
from torchmetrics.image.kid import KernelInceptionDistance

from lightning_prd import GenerativeMetrics, PRDCallback
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics, kernel_inception_distance
from lightning_prd.functional import kid as kid_module
from lightning_prd.functional.kid import _subset_indices, poly_mmd2

from ddp_utils import run_ddp
from tiny_modules import GaussianSampler, quiet_trainer

G = torch.Generator().manual_seed(11)
REAL = torch.randn(130, 6, generator=G, dtype=torch.float64)
FAKE = 0.8 * torch.randn(97, 6, generator=G, dtype=torch.float64) + 0.3

pytestmark = pytest.mark.filterwarnings("ignore:Metric `Kernel Inception Distance` will save all extracted features")


def oracle_mmd2(x, y, degree=3, gamma=None, coef=1.0):
    """Unbiased MMD² from the paper's formula, pair by pair in float64."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    m = x.shape[0]
    gamma = 1.0 / x.shape[1] if gamma is None else gamma

    def k(a, b):
        return (gamma * float(a @ b) + coef) ** degree

    same = sum(k(x[i], x[j]) + k(y[i], y[j]) for i in range(m) for j in range(m) if i != j)
    cross = sum(k(x[i], y[j]) for i in range(m) for j in range(m))
    return same / (m * (m - 1)) - 2 * cross / m**2


def oracle_kid(real, fake, draws, **kernel):
    values = np.array([oracle_mmd2(real[ri.numpy()], fake[fi.numpy()], **kernel) for ri, fi in draws])
    return values.mean(), values.std()  # population std, as torchmetrics' unbiased=False


@pytest.mark.parametrize(
    "kernel",
    [dict(), dict(degree=2, gamma=0.5, coef=0.0), dict(degree=1, gamma=None, coef=2.0)],
    ids=["defaults", "deg2-gamma-coef0", "linear"],
)
def test_equals_float64_oracle_on_its_subsets(kernel):
    draws = _subset_indices(130, 97, 4, 20, 3)
    mean, std = kernel_inception_distance(REAL, FAKE, subsets=4, subset_size=20, seed=3, **kernel)
    want_mean, want_std = oracle_kid(REAL.numpy(), FAKE.numpy(), draws, **kernel)
    assert mean.dtype == torch.float64 and std.dtype == torch.float64
    assert float(mean) == pytest.approx(want_mean, rel=1e-12, abs=1e-14)
    assert float(std) == pytest.approx(want_std, rel=1e-10, abs=1e-14)


def test_subsets_are_draws_without_replacement_in_range():
    draws = _subset_indices(130, 97, 5, 40, 0)
    assert len(draws) == 5
    for ri, fi in draws:
        assert len(set(ri.tolist())) == 40 and 0 <= int(ri.min()) and int(ri.max()) < 130
        assert len(set(fi.tolist())) == 40 and 0 <= int(fi.min()) and int(fi.max()) < 97


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("seed", [0, 123])
def test_equals_torchmetrics_on_the_same_subsets(dtype, seed):
    """torchmetrics draws with the global generator: seeding it with ``seed`` gives our subsets."""
    real, fake = REAL.to(dtype), FAKE.to(dtype)
    tm = KernelInceptionDistance(feature=torch.nn.Identity(), subsets=15, subset_size=50)
    tm.update(real, real=True)
    tm.update(fake, real=False)
    torch.manual_seed(seed)
    want_mean, want_std = tm.compute()
    mean, std = kernel_inception_distance(real, fake, subsets=15, subset_size=50, seed=seed)
    # float64: equal to rounding; float32: torchmetrics computes in float32, we in float64
    rel = 1e-10 if dtype == torch.float64 else 1e-4
    assert float(mean) == pytest.approx(float(want_mean), rel=rel)
    assert float(std) == pytest.approx(float(want_std), rel=rel * 10)


def test_poly_mmd2_equals_torchmetrics_poly_mmd():
    from torchmetrics.image.kid import poly_mmd

    x, y = REAL[:40], FAKE[:40]
    assert float(poly_mmd2(x, y)) == pytest.approx(float(poly_mmd(x, y)), rel=1e-12)
    assert float(poly_mmd2(x, y, degree=2, gamma=0.3, coef=0.5)) == pytest.approx(
        float(poly_mmd(x, y, 2, 0.3, 0.5)), rel=1e-12
    )


def test_seeded_and_reproducible():
    a = kernel_inception_distance(REAL, FAKE, subsets=5, subset_size=30, seed=7)
    b = kernel_inception_distance(REAL, FAKE, subsets=5, subset_size=30, seed=7)
    c = kernel_inception_distance(REAL, FAKE, subsets=5, subset_size=30, seed=8)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_full_sets_single_subset_is_the_full_mmd_and_std_zero():
    """subset_size = N = M: every subset is the whole set (in some order), so std is 0."""
    x, y = REAL[:50], FAKE[:50]
    mean, std = kernel_inception_distance(x, y, subsets=3, subset_size=50)
    assert float(mean) == pytest.approx(oracle_mmd2(x.numpy(), y.numpy()), rel=1e-12)
    assert float(std) == pytest.approx(0.0, abs=1e-12)


def test_same_distribution_near_zero_shifted_distribution_large():
    g = torch.Generator().manual_seed(0)
    real = torch.randn(600, 4, generator=g)
    same, _ = kernel_inception_distance(real, torch.randn(600, 4, generator=g), subsets=20, subset_size=300)
    shifted, _ = kernel_inception_distance(real, torch.randn(600, 4, generator=g) + 1, subsets=20, subset_size=300)
    assert abs(float(same)) < 0.05 < 1.0 < float(shifted)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(subset_size=131), r"`subset_size` to be at most the size of each set \(N = 130 real, M = 97"),
        (dict(subset_size=98), r"`subset_size`.*M = 97 generated.*but got 98"),
        (dict(subset_size=1), r"`subset_size` to be an integer of at least 2, but got 1"),
        (dict(subsets=0), r"`subsets` to be a positive integer, but got 0"),
        (dict(degree=1.5), r"`degree` to be a positive integer, but got 1.5"),
        (dict(gamma=0.0), r"`gamma` to be a positive finite number, but got 0.0"),
        (dict(coef=-1.0), r"`coef` to be a non-negative finite number, but got -1.0"),
        (dict(seed=-1), r"`seed` to be an integer in \[0, "),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    opts = {"subsets": 2, "subset_size": 10, **kwargs}
    with pytest.raises(ValueError, match=match):
        kernel_inception_distance(REAL, FAKE, **opts)


def test_bad_features_raise():
    with pytest.raises(ValueError, match="same number of features"):
        kernel_inception_distance(REAL, FAKE[:, :5], subset_size=10)
    with pytest.raises(TypeError, match="`fake`"):
        kernel_inception_distance(REAL, torch.ones(50, 6, dtype=torch.int64), subset_size=10)


# ---------------------------------------------------------------------------- surfaces
KID = dict(subsets=6, subset_size=40, seed=5)


def test_generative_metrics_and_metric_equal_the_function():
    mean, std = kernel_inception_distance(REAL, FAKE, **KID)
    out = generative_metrics(REAL, FAKE, kid=KID)
    assert torch.equal(out["kid"], mean) and torch.equal(out["kid_std"], std)
    metric = GenerativeMetrics(kid=KID, prd=False, alpha_beta=False)
    for s in range(0, 130, 50):
        metric.update(REAL[s : s + 50], real=True)
    metric.update(FAKE, real=False)
    got = metric.compute()
    assert torch.equal(got["kid"], mean) and torch.equal(got["kid_std"], std)


def test_off_by_default_and_true_uses_torchmetrics_defaults():
    assert "kid" not in generative_metrics(REAL, FAKE)
    metric = GenerativeMetrics(kid=True)
    assert metric.kid == dict(subsets=100, subset_size=1000, degree=3, gamma=None, coef=1.0, seed=0)
    with pytest.raises(ValueError, match=r"`kid` to hold only .*unknown keys \['size'\]"):
        GenerativeMetrics(kid=dict(size=3))
    with pytest.raises(ValueError, match="`subsets` to be a positive integer"):
        GenerativeMetrics(kid=dict(subsets=0))


def test_small_sets_function_raises_metric_uses_min_size_and_warns_once():
    with pytest.raises(ValueError, match="`subset_size`"):
        generative_metrics(REAL, FAKE, kid=dict(subsets=3, subset_size=100))
    metric = GenerativeMetrics(kid=dict(subsets=3, subset_size=100, seed=2), prd=False, alpha_beta=False)
    metric.update(REAL, real=True)
    metric.update(FAKE, real=False)
    with pytest.warns(UserWarning, match=r"subset_size=100.*N = 130 real, M = 97 generated.*subsets of 97"):
        first = metric.compute()
    mean, std = kernel_inception_distance(REAL, FAKE, subsets=3, subset_size=97, seed=2)
    assert torch.equal(first["kid"], mean) and torch.equal(first["kid_std"], std)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metric.compute()  # warned once


def test_cli_kid_column_and_json(tmp_path, capsys):
    gen = np.random.default_rng(0)
    real, fake = gen.normal(size=(60, 5)), 0.7 * gen.normal(size=(50, 5)) + 0.2
    np.save(tmp_path / "real.npy", real)
    np.save(tmp_path / "fake.npy", fake)
    out = tmp_path / "scores.json"
    args = ["--real", str(tmp_path / "real.npy"), "--no-prd", "--no-alpha-beta", "--quiet", "--seed", "4"]
    assert main(["evaluate", *args, "--fake", str(tmp_path / "fake.npy"), "--kid", "--json", str(out)]) == 0
    printed = capsys.readouterr()
    assert "lightning-prd: warning: KID: `subset_size=1000`" in printed.err and "subsets of 50 samples" in printed.err
    lines = [line.split() for line in printed.out.splitlines()]
    mean, _ = kernel_inception_distance(real, fake, subset_size=50, seed=4)
    assert ["kid", f"{float(mean):.4f}", "lower"] in lines
    payload = json.loads(out.read_text())
    assert payload["scores"]["kid"] == pytest.approx(float(mean), rel=1e-12)
    assert payload["settings"]["kid"]["seed"] == 4
    assert main(["compare", *args, "--fake", str(tmp_path / "fake.npy"), str(tmp_path / "fake.npy"), "--kid"]) == 0
    header = next(line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("fake "))
    assert header[:2] == ["fake", "M"] and header[-1] == "kid"
    assert main(["evaluate", *args, "--fake", str(tmp_path / "fake.npy")]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("kid")]  # off by default


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore:.*LeafSpec.*")
def test_callback_logs_kid(tmp_path):

    real = torch.randn(64, 2, generator=torch.Generator().manual_seed(0))
    cb = PRDCallback(real, num_samples=48, metric=dict(kid=dict(subsets=4, subset_size=32), prd=False))
    trainer = quiet_trainer(tmp_path, [cb])
    trainer.fit(GaussianSampler())
    assert {"prd/kid", "prd/kid_std"} <= set(trainer.callback_metrics)
    assert float(trainer.callback_metrics["prd/kid"]) == pytest.approx(cb.history[-1]["kid"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_draws_the_same_subsets_as_the_cpu():
    cpu = kernel_inception_distance(REAL, FAKE, subsets=5, subset_size=60, seed=1)
    cuda = kernel_inception_distance(REAL.cuda(), FAKE.cuda(), subsets=5, subset_size=60, seed=1)
    assert cuda[0].device.type == "cuda"
    for a, b in zip(cpu, cuda):
        assert float(b) == pytest.approx(float(a), rel=1e-10, abs=1e-14)


# ---------------------------------------------------------------------------- DDP: the subsets are split
DDP_KID = dict(subsets=7, subset_size=40, seed=3)
#: (real rows, fake rows) of rank 0 and rank 1: uneven
DDP_SPLIT = [((0, 80), (0, 9)), ((80, 130), (9, 97))]


def _kid_and_subsets(real, fake):
    """``kid`` and ``kid_std`` of a Metric, and the subsets this process computed (``poly_mmd2`` calls)."""
    calls, original = [0], kid_module.poly_mmd2

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    kid_module.poly_mmd2 = counted
    try:
        metric = GenerativeMetrics(kid=DDP_KID, prd=False, alpha_beta=False)
        metric.update(real, real=True)
        metric.update(fake, real=False)
        out = metric.compute()
    finally:
        kid_module.poly_mmd2 = original
    return float(out["kid"]), float(out["kid_std"]), calls[0]


def _ddp_rank(rank, world):
    (r0, r1), (f0, f1) = DDP_SPLIT[rank]
    return _kid_and_subsets(REAL[r0:r1], FAKE[f0:f1])


def test_ddp_splits_the_subsets_between_the_ranks():
    kid, kid_std, subsets = _kid_and_subsets(REAL, FAKE)
    assert subsets == 7
    ranks = run_ddp(_ddp_rank)
    assert [r[:2] for r in ranks] == [(kid, kid_std)] * 2  # the gathered sets: the same subsets, the same Gram
    assert [r[2] for r in ranks] == [4, 3]  # rank 0: subsets 0, 2, 4, 6; rank 1: 1, 3, 5
