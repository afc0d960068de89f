"""CMMD (Jayasumana et al., CVPR 2024): float64 NumPy oracle from the formula, a transcription of
the official code's estimator, the tile paths (bfloat16 screen asked for, float32 tiles, float64),
the ``cmmd`` switch of ``generative_metrics`` / ``GenerativeMetrics``, the real side's cache, bad
input, and the CLI column."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.cli import main
from lightning_prd.functional import cmmd, generative_metrics
from lightning_prd.functional.engine.families import get_family
from lightning_prd.scores import direction

from ddp_utils import run_ddp


# ---------------------------------------------------------------------------- references
def oracle(real, fake, sigma=10.0, scale=1000.0, unbiased=False):
    """float64 NumPy, from the formula: pairwise squared distances as sums of squared
    differences (blocked over rows), the Gaussian kernel, the three means."""
    x, y = np.asarray(real, dtype=np.float64), np.asarray(fake, dtype=np.float64)

    def kernel_sum(a, b, skip_diagonal):
        total = 0.0
        for s in range(0, len(a), 64):
            d2 = ((a[s : s + 64, None, :] - b[None, :, :]) ** 2).sum(-1)
            k = np.exp(-d2 / (2 * sigma**2))
            if skip_diagonal:
                rows = np.arange(s, min(s + 64, len(a)))
                k[rows - s, rows] = 0.0
            total += k.sum()
        return total

    n, m = len(x), len(y)
    if unbiased:
        mmd2 = kernel_sum(x, x, True) / (n * (n - 1)) + kernel_sum(y, y, True) / (m * (m - 1))
    else:
        mmd2 = kernel_sum(x, x, False) / n**2 + kernel_sum(y, y, False) / m**2
    return scale * (mmd2 - 2 * kernel_sum(x, y, False) / (n * m))


def official_formula(x, y, sigma=10.0, scale=1000.0):
    """The estimator of google-research ``cmmd/distance.py`` (mean of each full kernel matrix,
    diagonal included, squared distances from the Gram matrices), written out in float64."""
    x, y = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    nx, ny = (x * x).sum(1), (y * y).sum(1)
    g = 1.0 / (2 * sigma**2)

    def mean_kernel(a, b, na, nb):
        return torch.exp(-g * (na[:, None] + nb[None, :] - 2 * a @ b.T)).mean()

    return float(scale * (mean_kernel(x, x, nx, nx) + mean_kernel(y, y, ny, ny) - 2 * mean_kernel(x, y, nx, ny)))


def unit_rows(n, d, gen, shift=0.0):
    """Unit-norm rows (CLIP-like), the second set moved along a fixed direction by ``shift``."""
    z = torch.randn(n, d, generator=gen, dtype=torch.float64)
    z = z / z.norm(dim=1, keepdim=True) + shift / math.sqrt(d)
    return (z / z.norm(dim=1, keepdim=True)).float()


# ---------------------------------------------------------------------------- the value
def test_worked_example():
    real = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    fake = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    # biased: (1 + e^-1/2)/2 twice minus 2 (e^-1/2 + e^-1)/2 = 1 - e^-1
    # unbiased: the pairs of a point with itself left out: e^-1/2 twice minus (e^-1/2 + e^-1)
    for unbiased, want in ((False, 1 - math.exp(-1)), (True, math.exp(-0.5) - math.exp(-1))):
        got = cmmd(real, fake, sigma=1.0, scale=1.0, unbiased=unbiased)
        assert float(got) == pytest.approx(want, rel=1e-7)  # float32 tiles
        got = cmmd(real.double(), fake.double(), sigma=1.0, scale=1.0, unbiased=unbiased)
        assert float(got) == pytest.approx(want, rel=1e-14)


@pytest.mark.parametrize("unbiased", [False, True])
@pytest.mark.parametrize("block_bytes", [2**26, 20_000, 3_000])  # one tile, strips of wide tiles, many squares
def test_equals_oracle_unequal_sizes(unbiased, block_bytes):
    gen = torch.Generator().manual_seed(1)
    real, fake = torch.randn(230, 7, generator=gen), 1.3 * torch.randn(171, 7, generator=gen) + 0.2
    want = oracle(real, fake, sigma=2.0, scale=1.0, unbiased=unbiased)
    got = cmmd(real, fake, sigma=2.0, scale=1.0, unbiased=unbiased, block_bytes=block_bytes)
    assert got.dtype == torch.float64
    assert float(got) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("dim", [64, 768])
@pytest.mark.parametrize("unbiased", [False, True])
def test_accuracy_on_unit_norm_features(dim, unbiased):
    """CLIP-like data, sigma = 10: kernel values ~0.99, CMMD ~1 (the MMD ~1e-3 of the kernel
    means): relative error <= 1e-6 from float32 tiles."""
    gen = torch.Generator().manual_seed(dim)
    real, fake = unit_rows(600, dim, gen), unit_rows(450, dim, gen, shift=0.6)
    want = oracle(real, fake, unbiased=unbiased)
    assert 0.3 < want < 3  # the regime of the paper's numbers
    assert float(cmmd(real, fake, unbiased=unbiased)) == pytest.approx(want, rel=1e-6)


def test_equals_official_formula():
    gen = torch.Generator().manual_seed(2)
    real, fake = unit_rows(300, 128, gen), unit_rows(220, 128, gen, shift=0.3)
    want = official_formula(real, fake)
    assert want == pytest.approx(oracle(real, fake), rel=1e-9)  # the transcription is the biased estimator
    assert float(cmmd(real, fake)) == pytest.approx(want, rel=1e-6)
    assert float(cmmd(real, fake, sigma=3.0, scale=7.0)) == pytest.approx(
        official_formula(real, fake, sigma=3.0, scale=7.0), rel=1e-6
    )


def test_identical_sets_and_copies():
    gen = torch.Generator().manual_seed(3)
    real = unit_rows(200, 32, gen)
    # biased: 0 for the same set (and for any reordering of it); float32 tiles leave ~1e-9
    assert abs(float(cmmd(real, real))) < 1e-6
    assert abs(float(cmmd(real, real[torch.randperm(200, generator=gen)]))) < 1e-6
    # unbiased: not 0 for the same set (the pairs i = i' are left out of two terms of three)
    assert float(cmmd(real, real, unbiased=True)) == pytest.approx(oracle(real, real, unbiased=True), rel=1e-6)
    # a generated set of exact copies (a memorising model), with duplicates, unequal sizes: the
    # unbiased value is ~4e-3 (4e-6 of the kernel means), below the regime of the relative
    # bound; copies sit at float32 tile values >= 0 instead of 0 (~1e-7, a kernel error of
    # ~5e-10 of the same sign), so the absolute error, 1e-10 of the kernel scale, bounds it
    fake = torch.cat([real[:40], real[:40], real[100:110]])
    for unbiased in (False, True):
        want = oracle(real, fake, unbiased=unbiased)
        assert float(cmmd(real, fake, unbiased=unbiased)) == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_float64_path():
    gen = torch.Generator().manual_seed(4)
    real, fake = unit_rows(150, 48, gen).double(), unit_rows(120, 48, gen, shift=0.4).double()
    want = oracle(real, fake)
    assert float(cmmd(real, fake)) == pytest.approx(want, rel=1e-10)
    assert float(cmmd(real.float(), fake.float(), dtype=torch.float64)) == pytest.approx(
        oracle(real.float(), fake.float()), rel=1e-10
    )


@pytest.mark.parametrize("mode", ["1", "0"])
def test_screen_setting_changes_nothing(mode, monkeypatch):
    """The bfloat16 screen (forced on) is not used for kernel values: the same float32 tiles."""
    gen = torch.Generator().manual_seed(5)
    real, fake = unit_rows(300, 40, gen), unit_rows(260, 40, gen, shift=0.5)
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", mode)
    got = generative_metrics(real, fake, cmmd=True, frechet=False)
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "0")
    plain = cmmd(real, fake, block_bytes=2**26)
    assert float(got["cmmd"]) == pytest.approx(oracle(real, fake), rel=1e-6)
    assert float(got["cmmd"]) == float(plain)
    # the k-NN scores with CMMD joined are those without it
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", mode)
    alone = generative_metrics(real, fake, frechet=False)
    for name in ("precision", "recall", "density", "coverage", "authenticity"):
        assert float(got[name]) == float(alone[name]), name
    torch.testing.assert_close(got["realism"], alone["realism"], rtol=0, atol=0)


def test_default_screen_size_on_this_cpu(monkeypatch):
    """Sets large enough for the bfloat16 screen by default on this CPU: the kernel sums use
    float32 tiles all the same (screened values would be off by ~2^-8 of the distances)."""
    from lightning_prd.functional.knn.screen import screen_available

    monkeypatch.delenv("LIGHTNING_PRD_SCREEN", raising=False)
    if not screen_available(torch.device("cpu"), torch.float32, 5000, 1000):
        pytest.skip("this CPU does not screen in bfloat16 (the float32 path is tested above)")
    gen = torch.Generator().manual_seed(6)
    real, fake = unit_rows(5000, 1000, gen), unit_rows(5000, 1000, gen, shift=0.3)
    got = cmmd(real, fake)
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "0")
    assert float(got) == float(cmmd(real, fake))


# ---------------------------------------------------------------------------- the switch
def test_generative_metrics_switch():
    gen = torch.Generator().manual_seed(7)
    real, fake = unit_rows(120, 16, gen), unit_rows(90, 16, gen, shift=0.5)
    assert "cmmd" not in generative_metrics(real, fake)  # off by default
    assert get_family("cmmd").defaults == dict(sigma=10.0, scale=1000.0, unbiased=False)
    out = generative_metrics(real, fake, cmmd=True)
    assert float(out["cmmd"]) == float(cmmd(real, fake))
    out = generative_metrics(
        real, fake, cmmd=dict(sigma=0.5, unbiased=True), k_precision_recall=None, k_density_coverage=None
    )
    assert float(out["cmmd"]) == float(cmmd(real, fake, sigma=0.5, unbiased=True))
    # CMMD alone still runs the pass (no k-NN score asked)
    out = generative_metrics(
        real,
        fake,
        k_precision_recall=None,
        k_density_coverage=None,
        realism=False,
        authenticity=False,
        frechet=False,
        probabilistic=False,
        pr_cover=False,
        cmmd=True,
    )
    assert set(out) == {"cmmd"} and float(out["cmmd"]) == float(cmmd(real, fake))


def test_metric_caches_real_kernel_sum():
    gen = torch.Generator().manual_seed(8)
    real = unit_rows(150, 24, gen)
    fakes = [unit_rows(100 + 10 * i, 24, gen, shift=0.2 * i) for i in range(3)]
    metric = GenerativeMetrics(cmmd=dict(sigma=2.0), prd=False, alpha_beta=False, reset_real_features=False)
    metric.update(real, real=True)
    for i, fake in enumerate(fakes):
        metric.update(fake, real=False)
        out = metric.compute()
        assert float(out["cmmd"]) == pytest.approx(float(cmmd(real, fake, sigma=2.0)), rel=1e-12)
        assert float(out["cmmd"]) == pytest.approx(oracle(real, fake, sigma=2.0), rel=1e-6)
        cache = metric._real_cache
        assert list(cache.kernel_sums) == [1 / 8]  # gamma = 1 / (2 sigma^2), computed once
        if i == 0:
            first = cache.kernel_sums[1 / 8]
        assert cache.kernel_sums[1 / 8] is first  # reused, not recomputed
        metric.reset()


def test_metric_off_by_default():
    metric = GenerativeMetrics(prd=False, alpha_beta=False)
    gen = torch.Generator().manual_seed(9)
    metric.update(torch.randn(40, 3, generator=gen), real=True)
    metric.update(torch.randn(30, 3, generator=gen), real=False)
    assert "cmmd" not in metric.compute() and metric.cmmd is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sigma", [1e-5, 1e-30, 1e-150])
def test_bandwidth_far_below_every_distance_gives_the_identity_kernel(dtype, sigma):
    """With sigma far below the distances the kernel is 1 on a point with itself and 0 elsewhere:
    the biased MMD^2 is 1/N + 1/M (the self-pairs) and the unbiased one 0. A coefficient
    1 / (2 sigma^2) past float32's maximum runs float64 tiles (in float32 it would be inf, and
    0 * inf NaN), so even a pair 3e-20 apart gets its kernel value 0."""
    g = torch.Generator().manual_seed(3)
    real, fake = torch.randn(40, 6, generator=g, dtype=dtype), torch.randn(30, 6, generator=g, dtype=dtype)
    assert float(cmmd(real, fake, sigma=sigma, scale=1.0)) == pytest.approx(1 / 40 + 1 / 30, rel=1e-12)
    assert float(cmmd(real, fake, sigma=sigma, scale=1.0, unbiased=True)) == 0.0
    real = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [0.0, 0.0]], dtype=dtype)
    fake = torch.tensor([[3e-20, 0.0], [5.0, 5.0], [7.0, -3.0]], dtype=dtype)
    if sigma < 1e-20:
        assert float(cmmd(real, fake, sigma=sigma, scale=1.0)) == pytest.approx(2 / 3, rel=1e-12)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(sigma=0.0), "`sigma`.*positive.*0.0"),
        (dict(sigma=-1.0), "`sigma`.*positive.*-1.0"),
        (dict(sigma=float("nan")), "`sigma`.*nan"),
        (dict(sigma=float("inf")), "`sigma`.*inf"),
        (dict(sigma=True), "`sigma`"),
        (dict(scale=0), "`scale`.*positive"),
        (dict(unbiased="yes"), "`unbiased`.*bool.*'yes'"),
    ],
)
def test_bad_options(kwargs, match):
    x = torch.randn(10, 3)
    with pytest.raises(ValueError, match=match):
        cmmd(x, x, **kwargs)
    with pytest.raises(ValueError, match=match):
        generative_metrics(x, x, cmmd=kwargs)
    with pytest.raises(ValueError, match=match):
        GenerativeMetrics(cmmd=kwargs)


def test_bad_features_and_sizes():
    x = torch.randn(10, 3)
    bad = x.clone()
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match="`fake` to be finite"):
        cmmd(x, bad)
    with pytest.raises(ValueError, match="`real` to be finite"):
        cmmd(bad, x)
    with pytest.raises(ValueError, match="same number of features"):
        cmmd(x, torch.randn(10, 4))
    with pytest.raises(ValueError, match="`fake` to hold at least 2 samples"):
        cmmd(x, x[:1], unbiased=True)
    assert float(cmmd(x[:1], x[:1])) == 0.0  # the biased estimator takes one sample per set
    with pytest.raises(ValueError, match="`cmmd` to hold only.*unknown keys \\['bandwidth'\\]"):
        generative_metrics(x, x, cmmd=dict(bandwidth=1.0))
    with pytest.raises(ValueError, match="`cmmd` to be a bool or a dict"):
        generative_metrics(x, x, cmmd="yes")


# ---------------------------------------------------------------------------- DDP: the real side's kernel sum
DDP_OPTIONS = dict(sigma=0.7, scale=10.0, unbiased=True)
_G = torch.Generator().manual_seed(11)
DDP_REAL = unit_rows(97, 6, _G)
DDP_FAKE = unit_rows(71, 6, _G, shift=0.8)


def _kept_two_evaluations(real, fake):
    """Two evaluations with the real side kept: ``fake``, then ``0.9 * fake`` after a reset; and the gammas whose
    real kernel sum is cached."""
    m = GenerativeMetrics(cmmd=DDP_OPTIONS, prd=False, alpha_beta=False, reset_real_features=False, block_bytes=12000)
    m.update(real, real=True)
    m.update(fake, real=False)
    first = float(m.compute()["cmmd"])
    m.reset()
    m.update(fake * 0.9, real=False)
    return first, float(m.compute()["cmmd"]), list(m._real_cache.kernel_sums)


def _ddp_rank(rank, world):
    rows_real = slice(0, 60) if rank == 0 else slice(60, 97)
    rows_fake = slice(0, 11) if rank == 0 else slice(11, 71)
    return _kept_two_evaluations(DDP_REAL[rows_real], DDP_FAKE[rows_fake])


def test_ddp_unbiased_with_the_real_kernel_sum_kept_equals_one_process(monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")  # the kernel passes run float32 tiles all the same
    want = _kept_two_evaluations(DDP_REAL, DDP_FAKE)
    assert want[0] == pytest.approx(oracle(DDP_REAL, DDP_FAKE, **DDP_OPTIONS), rel=1e-6)
    assert want[1] == pytest.approx(float(cmmd(DDP_REAL, DDP_FAKE * 0.9, **DDP_OPTIONS)), rel=1e-7)
    assert want[2] == [1 / (2 * 0.7**2)]  # one real kernel sum, computed once
    assert run_ddp(_ddp_rank) == [want, want]


# ---------------------------------------------------------------------------- the command line's compare
def test_compare_cmmd_column_lower_is_better(tmp_path, capsys):
    gen = np.random.default_rng(0)
    real = gen.normal(size=(60, 5)).astype(np.float32)
    fakes = [(0.7 * gen.normal(size=(50, 5)) + 0.2).astype(np.float32), gen.normal(size=(45, 5)).astype(np.float32)]
    np.save(tmp_path / "real.npy", real)
    for i, fake in enumerate(fakes):
        np.save(tmp_path / f"fake{i}.npy", fake)
    fake_args = [str(tmp_path / "fake0.npy"), str(tmp_path / "fake1.npy")]
    argv = ["compare", "--real", str(tmp_path / "real.npy"), "--fake", *fake_args, "--cmmd"]
    assert main([*argv, "--no-prd", "--no-alpha-beta", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "cmmd" in line.split())
    end = header.index(" cmmd") + len(" cmmd")  # columns are right-aligned
    cells = {line.split()[0]: line[:end].split()[-1] for line in lines if line.split()}
    values = [float(cmmd(torch.from_numpy(real), torch.from_numpy(f))) for f in fakes]
    assert float(cells["fake0"]) == pytest.approx(values[0], abs=6e-5)  # printed with 4 decimals
    assert float(cells["fake1"]) == pytest.approx(values[1], abs=6e-5)
    assert direction("cmmd") == "lower" and cells["(better)"] == "lower"
    assert cells["(best)"] == ("fake0" if values[0] < values[1] else "fake1")
