"""Reduced-precision float32 settings reach neither the scores nor, by default, the extractors.

Lightning suggests ``torch.set_float32_matmul_precision("high" | "medium")`` on GPUs with tensor
cores (TF32 products); oneDNN can run float32 products as bfloat16 passes on CPUs, and
``torch.autocast("cpu", torch.bfloat16)`` stands in for a ``bf16-mixed`` validation step. The tiles'
rounding bounds assume IEEE float32, so a pass runs its products in IEEE float32 whatever the
caller set (``knn.ieee_float32``) and restores the setting after; every score (PRD's k-means
included) runs under that guard outside autocast; extractors run under ``extractor_precision``
(``"ieee"`` by default). On this kind of CPU (AVX512-BF16) both settings change float32 products,
so the checks here can fail. PRD's k-means++ takes no floating ``cumsum`` (CUDA refuses one in
deterministic mode on some torch versions).
"""

import contextlib

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lightning_prd import GenerativeMetrics, PRDCallback
from lightning_prd.callback.protocol import run_fingerprint
from lightning_prd.callback.sources import extract
from lightning_prd.cli.main import main
from lightning_prd.features import RandomConvNet, extract_features
from lightning_prd.features.cache import RealFeatureCache, cache_provenance
from lightning_prd.features.precision import describe_precision
from lightning_prd.features.reference_files import read_reference
from lightning_prd.functional import generative_metrics, prd_curve
from lightning_prd.functional.engine import kmeans as _kmeans
from lightning_prd.functional.engine import precision as precision_module
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import ieee_float32, tiling
from lightning_prd.functional.knn.points import prepare

from tiny_modules import QUIET, GaussianSampler, ScriptedScores


def _reset():
    torch.set_float32_matmul_precision("highest")  # sets both backends' to IEEE


@pytest.fixture(autouse=True)
def clean_precision():
    _reset()
    yield
    _reset()
    assert torch.get_float32_matmul_precision() == "highest"


def _legacy(value):
    def apply():
        torch.set_float32_matmul_precision(value)

    def read():
        return torch.get_float32_matmul_precision()

    return apply, read, value


def _backend(name, value):
    backend = torch.backends.cuda.matmul if name == "cuda" else torch.backends.mkldnn.matmul

    def apply():
        backend.fp32_precision = value

    def read():
        return backend.fp32_precision

    return apply, read, value


SETTINGS = {
    "legacy-medium": _legacy("medium"),
    "legacy-high": _legacy("high"),
    "onednn-bf16": _backend("mkldnn", "bf16"),
    "onednn-tf32": _backend("mkldnn", "tf32"),
    "cuda-tf32": _backend("cuda", "tf32"),
}


def _sets():
    g = torch.Generator().manual_seed(0)
    return torch.randn(400, 256, generator=g) * 3 + 5, torch.randn(350, 256, generator=g) * 3.3 + 5.2


def _key(*tensors):
    """A tile's identity: the bytes of the rows and norms it was computed from (the workers
    of a pass finish their tiles in scheduling order, so the order of the tiles is not fixed)."""
    return b"".join(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes() for t in tensors)


def _tiles_of_a_pass(monkeypatch):
    """The pass's tiles, sorted by the inputs each was computed from."""
    seen = []
    real_sq_tile = tiling.sq_tile

    def spy(buf, a_blk, a_sq, b_blk, b_sq, *rest, **kwargs):
        out = real_sq_tile(buf, a_blk, a_sq, b_blk, b_sq, *rest, **kwargs)
        seen.append((_key(a_blk, a_sq, b_blk, b_sq) + repr(rest).encode(), out.clone()))
        return out

    monkeypatch.setattr(tiling, "sq_tile", spy)
    real, fake = _sets()
    knn_pass(real, fake, member_ks=[3], recall_ks=[3], realism_k=3, nearest=True, block_bytes=1 << 16)
    monkeypatch.setattr(tiling, "sq_tile", real_sq_tile)
    seen.sort(key=lambda pair: pair[0])
    return [tile for _, tile in seen]


@pytest.mark.parametrize("name", list(SETTINGS))
def test_tiles_are_ieee_float32_and_the_setting_is_restored(monkeypatch, name):
    want = _tiles_of_a_pass(monkeypatch)
    apply, read, value = SETTINGS[name]
    apply()
    got = _tiles_of_a_pass(monkeypatch)
    assert read() == value  # the caller's setting, back after the pass
    assert len(got) == len(want) > 1
    for a, b in zip(got, want):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_scores_under_reduced_precision_settings_equal_the_default(name):
    real, fake = _sets()
    want = generative_metrics(real, fake, block_bytes=1 << 16)
    SETTINGS[name][0]()
    got = generative_metrics(real, fake, block_bytes=1 << 16)
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(got[key], value), key


def test_the_setting_changes_bare_products_on_this_cpu():
    """The check can fail where the setting matters: on CPUs whose oneDNN runs float32
    products as bfloat16 passes, the bare tile GEMM differs under ``medium``; the engine's does
    not (above). Skipped where the setting changes nothing."""
    x = prepare(_sets()[0], torch.zeros(256, dtype=torch.float64), torch.float32)
    buf = (torch.empty(400 * 400), None)

    def tile():
        return tiling.sq_tile(buf, x.left(slice(0, 400)), x.sq_norms[:, None], x.right(slice(0, 400)), x.sq_norms)

    ieee = tile().clone()
    torch.set_float32_matmul_precision("medium")
    reduced = tile().clone()
    with ieee_float32():
        assert torch.get_float32_matmul_precision() == "highest"
        guarded = tile().clone()
    assert torch.get_float32_matmul_precision() == "medium"
    assert torch.equal(guarded, ieee)
    if torch.equal(reduced, ieee):
        pytest.skip("float32_matmul_precision('medium') does not change float32 products on this CPU")


# ---------------------------------------------------------------- every score, PRD included, and autocast
def _medium():
    torch.set_float32_matmul_precision("medium")
    return contextlib.nullcontext()


def _autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def _both():
    torch.set_float32_matmul_precision("medium")
    return torch.autocast("cpu", dtype=torch.bfloat16)


REDUCED = {"medium": _medium, "autocast-bf16": _autocast, "medium+autocast-bf16": _both}


def _assert_same(got, want):
    assert got.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(got[key], value), key


def _small():
    real, fake = _sets()
    return real[:200, :48].contiguous(), fake[:200, :48].contiguous()


def _training_preset(real, fake):
    metric = GenerativeMetrics(preset="training", block_bytes=1 << 16)  # the callback's default: PRD on
    metric.update(real, real=True)
    metric.update(fake, real=False)
    return metric.compute()


@pytest.mark.parametrize("name", list(REDUCED))
def test_the_callbacks_default_preset_with_prd_is_bit_identical_under_reduced_precision(name):
    real, fake = _small()
    want = _training_preset(real, fake)
    want_fn = generative_metrics(real, fake, preset="training", block_bytes=1 << 16)
    assert {"f_beta", "prd_precision", "alpha_precision"} <= set(want)
    with REDUCED[name]():
        got = _training_preset(real, fake)
        got_fn = generative_metrics(real, fake, preset="training", block_bytes=1 << 16)
        inside = torch.get_float32_matmul_precision(), torch.is_autocast_enabled("cpu")
    assert inside == ("medium" if "medium" in name else "highest", "autocast" in name)  # the caller's, back
    _assert_same(got, want)
    _assert_same(got_fn, want_fn)


def test_unguarded_kmeans_moves_under_these_settings_on_this_cpu():
    """The PRD check above can fail: the k-means GEMMs without the guard give other clusterings here.
    Skipped where neither setting changes float32 products on this CPU."""
    data = _kmeans.prepare(_small()[0].clone())
    want = _kmeans.fit(data, 20, seed=0, num_runs=2)
    moved = []
    for name, setting in (("medium", _medium), ("autocast-bf16", _autocast)):
        with setting():
            bare = _kmeans.fit.__wrapped__(data, 20, seed=0, num_runs=2)
            guarded = _kmeans.fit(data, 20, seed=0, num_runs=2)
        _reset()
        assert torch.equal(guarded.centers, want.centers) and torch.equal(guarded.labels, want.labels)
        if not torch.equal(bare.centers, want.centers):
            moved.append(name)
    if not moved:
        pytest.skip("neither setting changes float32 products on this CPU")
    assert "autocast-bf16" in moved


# ---------------------------------------------------------------- the extractor's precision
def _images(n, seed):
    return torch.randint(0, 256, (n, 3, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def _net():
    """A tiny seeded conv net whose convolution and linear layer both see the settings."""
    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 16 * 16, 32)
    )
    for p in net.parameters():
        p.data = torch.randn(p.shape, generator=g) * 0.1
    return net.eval()


def _pixels(n, seed):
    return torch.rand(n, 3, 16, 16, generator=torch.Generator().manual_seed(seed))


def _metric_scores(precision, setting, net):
    metric = GenerativeMetrics(preset="training", feature_extractor=net, extractor_precision=precision)
    with setting():
        grad = torch.is_grad_enabled()
        metric.update(_pixels(48, 1), real=True)
        metric.update(_pixels(48, 2), real=False)
        matmul = "medium" if setting in (_medium, _both) else "highest"
        assert torch.is_grad_enabled() == grad and torch.get_float32_matmul_precision() == matmul
        assert torch.is_autocast_enabled("cpu") == (setting in (_autocast, _both))
        result = metric.compute()
    _reset()
    return metric.real_features[0], result


@pytest.mark.parametrize("name", list(REDUCED))
def test_a_metric_updated_under_reduced_precision_gives_the_plain_features_and_scores(name):
    """``update`` inside ``torch.autocast`` (a ``bf16-mixed`` validation step) and under ``medium``:
    the default ``extractor_precision="ieee"`` gives the features and scores of a plain run; ``"fast"``
    gives others (the check can fail)."""
    net = _net()
    plain_feats, plain = _metric_scores("ieee", contextlib.nullcontext, net)
    feats, got = _metric_scores("ieee", REDUCED[name], net)
    assert torch.equal(feats, plain_feats)
    _assert_same(got, plain)
    fast_feats, _ = _metric_scores("fast", REDUCED[name], net)
    assert not torch.equal(fast_feats, plain_feats)


def test_the_callbacks_extraction_follows_the_option():
    net, x = _net(), _pixels(8, 3)
    plain = extract(net, x, "the samples")
    with _both():
        ieee = extract(net, x, "the samples")
        fast = extract(net, x, "the samples", "fast")
        assert torch.get_float32_matmul_precision() == "medium" and torch.is_autocast_enabled("cpu")
    assert torch.equal(ieee, plain) and not torch.equal(fast, plain)
    assert ieee.dtype == torch.float32 and not ieee.requires_grad


def _conv_flags():
    return [conv.fp32_precision for conv in precision_module._conv_settings()]


def test_the_callers_settings_are_restored_also_on_an_exception():
    torch.backends.mkldnn.conv.fp32_precision = "bf16"
    torch.set_float32_matmul_precision("medium")
    before = _conv_flags()

    def fails(x):
        assert torch.get_float32_matmul_precision() == "highest" and not torch.is_grad_enabled()
        assert set(_conv_flags()) == {"ieee"} and not torch.is_autocast_enabled("cpu")
        raise RuntimeError("out of memory")

    try:
        with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(RuntimeError, match="out of memory"):
            extract(fails, torch.zeros(2, 3), "the samples")
        assert torch.get_float32_matmul_precision() == "medium" and _conv_flags() == before
        assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
    finally:
        torch.backends.mkldnn.conv.fp32_precision = "none"


def test_an_unknown_precision_is_refused_with_a_one_line_error():
    message = "Expected argument `extractor_precision` to be one of ('ieee', 'fast'), but got 'tf32'"
    for build in (
        lambda: GenerativeMetrics(extractor_precision="tf32"),
        lambda: PRDCallback(torch.randn(8, 2), extractor_precision="tf32"),
        lambda: extract_features(lambda x: x, torch.zeros(2, 2), extractor_precision="tf32"),
    ):
        with pytest.raises(ValueError) as err:
            build()
        assert str(err.value) == message


def test_the_fingerprint_and_the_cache_key_hold_the_precision(tmp_path):
    net = RandomConvNet(num_features=4, size=8)
    metric = GenerativeMetrics()
    with _both():
        fast = describe_precision("fast", "cpu")
        assert fast == "fast (matmul medium, conv none, autocast bfloat16)"
        fp = run_fingerprint(net, None, metric, 6, 6, torch.float32, extractor_precision=fast)
        assert cache_provenance(net, extractor_precision="fast")["extractor_precision"] == fast
    assert run_fingerprint(net, None, metric, 6, 6, torch.float32, extractor_precision="ieee")[
        "extractor_precision"
    ] == ("ieee")
    assert fp["extractor_precision"] == fast
    assert "extractor_precision" not in run_fingerprint(
        None, None, metric, 6, 6, torch.float32, extractor_precision="ieee"
    )
    assert cache_provenance(net)["extractor_precision"] == "ieee"
    assert cache_provenance(net)["key"] != cache_provenance(net, extractor_precision="fast")["key"]

    cache, real = RealFeatureCache(tmp_path), _images(6, 4)[:, :, :8, :8]

    def run(precision):
        got = torch.cat(list(cache.real_features(net, lambda: iter(real.split(4)), net, extractor_precision=precision)))
        return cache.last_status, got

    assert run("ieee")[0] == "miss"
    assert run("fast")[0] == "miss"  # the file written under "ieee" does not serve "fast"
    assert run("ieee")[0] == "hit"
    with _autocast():  # "fast" inside autocast: another key again; "ieee": the same file
        assert run("fast")[0] == "miss"
        status, feats = run("ieee")
    assert status == "hit" and feats.dtype == torch.float32
    assert len(list(tmp_path.glob("real-*.pt"))) == 3


def test_the_command_line_records_the_precision(tmp_path):
    np.save(tmp_path / "real.npy", _images(8, 5).numpy())
    written = {}
    for precision in ("ieee", "fast"):
        out = tmp_path / f"{precision}.npz"
        argv = ["features", "--real", str(tmp_path / "real.npy"), "--extractor", "random-cnn", "--out", str(out)]
        assert main([*argv, "-q", "--device", "cpu", "--extractor-precision", precision]) == 0
        written[precision] = read_reference(out).provenance["cache"]
    assert written["ieee"]["extractor_precision"] == "ieee"
    assert written["fast"]["extractor_precision"].startswith("fast (matmul highest")
    assert written["ieee"]["key"] != written["fast"]["key"]
    assert main(["features", "--real", str(tmp_path / "real.npy"), "--extractor-precision", "tf32"]) == 2


# ---------------------------------------------------------------- deterministic mode
class _NoFloatCumsum(TorchDispatchMode):
    """Raises on a floating ``cumsum``, as CUDA builds without a deterministic cumsum do under
    ``torch.use_deterministic_algorithms(True)``."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in (torch.ops.aten.cumsum, torch.ops.aten.cumsum_) and args[0].is_floating_point():
            raise RuntimeError("cumsum_cuda_kernel does not have a deterministic implementation")
        return func(*args, **(kwargs or {}))


def test_prd_runs_where_a_floating_cumsum_raises():
    real, fake = _small()
    want = _training_preset(real, fake)
    curve = prd_curve(real, fake, num_runs=2)
    with _NoFloatCumsum():
        with pytest.raises(RuntimeError, match="deterministic"):  # the stand-in does raise
            torch.ones(3).cumsum(0)
        got = _training_preset(real, fake)
        got_curve = prd_curve(real, fake, num_runs=2)
    _assert_same(got, want)
    assert all(torch.equal(a, b) for a, b in zip(got_curve, curve))


def test_running_sums_equal_torchs_cpu_cumsum():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(7, 5000, generator=g, dtype=torch.float64) * torch.rand(7, 5000, generator=g, dtype=torch.float64)
    assert torch.equal(_kmeans.running_sums(x), x.cumsum(1))
    assert torch.equal(_kmeans.running_sums(x.float()), x.float().double().cumsum(1))


@pytest.mark.parametrize("precision", ["ieee", "fast"])
def test_the_callbacks_fingerprint_records_the_precision_its_extractor_ran_in(precision):
    torch.set_float32_matmul_precision("medium")  # the training run's setting
    extractor = torch.nn.Linear(2, 4)
    cb = PRDCallback(
        torch.randn(32, 2, generator=torch.Generator().manual_seed(0)),
        feature_extractor=extractor,
        num_samples=32,
        metric=ScriptedScores([0.5]),
        extractor_precision=precision,
        verbose=False,
        log_curves=False,
    )
    pl.Trainer(**{**QUIET, "max_epochs": 1, "callbacks": [cb]}).fit(GaussianSampler())
    want = "ieee" if precision == "ieee" else "fast (matmul medium, conv none, autocast off)"
    assert cb.fingerprint["extractor_precision"] == want
    assert torch.get_float32_matmul_precision() == "medium"
