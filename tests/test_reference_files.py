"""Reference files of other tools and of this package, read by content (lightning_prd/features/reference_files.py).

None of the tools installs here (they need torchvision or TensorFlow), so each test writes a file to the layout
the tool's own source writes, naming the repository file it follows, with the same NumPy/torch calls and keys.
"""

from __future__ import annotations

import builtins
import json
import os
import pickle
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from lightning_prd.features.reference_files import ReferenceSet, read_reference
from lightning_prd.features.safe_pickle import DataUnpickler
from lightning_prd.functional import frechet_distance, generative_metrics
from lightning_prd.functional.frechet import frechet_distance_from_moments

RNG = np.random.default_rng(7)
REAL = RNG.normal(size=(120, 6)).astype(np.float32)
FAKE = (RNG.normal(size=(100, 6)) * 1.2 + 0.3).astype(np.float32)
PR_KNN = "precision and recall (k-NN scores)"


def _fid_moments(x: np.ndarray, bias: bool = False):
    x64 = x.astype(np.float64)
    return torch.from_numpy(x64.mean(0)), torch.from_numpy(np.cov(x64, rowvar=False, bias=bias))


def _assert_scores_match(ref: ReferenceSet, real: np.ndarray = REAL) -> None:
    """The features read give every score exactly as the same features given as a tensor."""
    assert ref.features is not None and torch.equal(ref.features, torch.from_numpy(real))
    assert ref.serves == "every score" and ref.num_samples == real.shape[0]
    assert ref.require_features(PR_KNN) is ref.features
    got, want = generative_metrics(ref.features, FAKE), generative_metrics(torch.from_numpy(real), FAKE)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert torch.equal(frechet_distance(ref.features, FAKE), frechet_distance(torch.from_numpy(real), FAKE))


def _assert_moments_give_frechet(ref: ReferenceSet) -> None:
    """Unbiased mean/cov of REAL in the file: their Fréchet distance to FAKE is the features' one."""
    assert ref.mean is not None and ref.cov is not None and ref.mean.dtype == ref.cov.dtype == torch.float64
    mu_f, cov_f = _fid_moments(FAKE)
    got = frechet_distance_from_moments(ref.mean, ref.cov, mu_f, cov_f)
    assert torch.allclose(got, frechet_distance(REAL, FAKE), rtol=1e-6)  # float32 moments as the tools form them


def _assert_stats_only(ref: ReferenceSet, *needles: str) -> None:
    assert ref.features is None and ref.serves == "the Fréchet distance"
    with pytest.raises(ValueError) as info:
        ref.require_features(PR_KNN)
    text = str(info.value)
    assert "\n" not in text and PR_KNN in text and ref.path in text and "mean and covariance of 6 features" in text
    assert "lightning-prd features" in text and all(n in text for n in needles), text


# ---- this package's own features files -------------------------------------------------------------------


def test_npy_npz_and_pt_features(tmp_path):
    np.save(tmp_path / "f.npy", REAL)
    np.savez(tmp_path / "one.npz", REAL)
    torch.save(torch.from_numpy(REAL), tmp_path / "t.pt")
    torch.save({"feat": torch.from_numpy(REAL)}, tmp_path / "d.pt")
    torch.save(torch.from_numpy(REAL), tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    for file in ("f.npy", "one.npz", "t.pt", "d.pt", "legacy.pt"):
        ref = read_reference(tmp_path / file)
        assert ref.source == "array" and ref.extractor is None and ref.path == str(tmp_path / file)
        _assert_scores_match(ref)
    assert read_reference(tmp_path / "one.npz").entry == "arr_0" and read_reference(tmp_path / "f.npy").entry is None


def test_key_picks_an_entry_of_several(tmp_path):
    np.savez(tmp_path / "two.npz", labels=np.arange(3.0), feats64=REAL.astype(np.float64))
    torch.save({"a": torch.zeros(2, 2), "b": torch.from_numpy(REAL)}, tmp_path / "two.pt")
    ref = read_reference(tmp_path / "two.npz", key="feats64")
    assert ref.features.dtype == torch.float64 and torch.equal(ref.features, torch.from_numpy(REAL).double())
    _assert_scores_match(read_reference(tmp_path / "two.pt", key="b"))
    with pytest.raises(ValueError, match=r"`real`.*has no entry 'c' \(entries: 'a', 'b'\)"):
        read_reference(tmp_path / "two.pt", key="c")
    np.save(tmp_path / "f.npy", REAL)
    with pytest.raises(ValueError, match="holds one unnamed array"):
        read_reference(tmp_path / "f.npy", key="x")


def test_lightning_prd_layout_with_provenance(tmp_path):
    provenance = {"format": "lightning-prd/features", "extractor": "inception-v3-tf", "num_samples": 120}
    np.savez(tmp_path / "ours.npz", features=REAL, provenance=np.array(json.dumps(provenance)))
    torch.save({"features": torch.from_numpy(REAL), "provenance": json.dumps(provenance)}, tmp_path / "ours.pt")
    for file in ("ours.npz", "ours.pt"):
        ref = read_reference(tmp_path / file)
        assert (ref.source, ref.extractor, ref.entry, ref.provenance) == (
            "lightning-prd",
            "inception-v3-tf",
            "features",
            provenance,
        )
        _assert_scores_match(ref)
    np.savez(tmp_path / "bad.npz", features=REAL, provenance=np.array("{not json"))
    with pytest.raises(ValueError, match="`provenance` entry that is not a JSON object"):
        read_reference(tmp_path / "bad.npz")
    np.savez(tmp_path / "short.npz", features=REAL, provenance=np.array(json.dumps({"num_samples": 5})))
    with pytest.raises(ValueError, match="num_samples=5 but holds 120 features"):
        read_reference(tmp_path / "short.npz")


# ---- other tools' files ------------------------------------------------------------------------------------


def test_clean_fid_custom_stats_and_kid_features(tmp_path):
    # GaParmar/clean-fid cleanfid/fid.py make_custom_stats: mu = np.mean(np_feats, axis=0),
    # sigma = np.cov(np_feats, rowvar=False); np.savez_compressed(outf, mu=mu, sigma=sigma), then
    # np.savez_compressed(<name>_<mode>_custom_na_kid.npz, feats=np_feats). Named against their suffix here.
    np.savez_compressed(tmp_path / "stats.npz", mu=np.mean(REAL, axis=0), sigma=np.cov(REAL, rowvar=False))
    os.rename(tmp_path / "stats.npz", tmp_path / "mine_clean_custom_na.bin")
    np.savez_compressed(tmp_path / "foo.npz", feats=REAL)
    stats = read_reference(tmp_path / "mine_clean_custom_na.bin")
    assert stats.source == "fid-stats" and stats.num_samples is None and stats.extractor is None
    _assert_moments_give_frechet(stats)
    _assert_stats_only(stats, "_custom_na_kid.npz")
    kid = read_reference(tmp_path / "foo.npz")
    assert kid.source == "clean-fid" and kid.entry == "feats"
    _assert_scores_match(kid)


def test_pytorch_fid_save_stats(tmp_path):
    # mseitzer/pytorch-fid src/pytorch_fid/fid_score.py save_fid_stats: np.savez_compressed(paths[1], mu=m1, sigma=s1)
    # with m1 = np.mean(act, axis=0), s1 = np.cov(act, rowvar=False) of float64 activations.
    act = REAL.astype(np.float64)
    np.savez_compressed(tmp_path / "ref_stats.npz", mu=np.mean(act, axis=0), sigma=np.cov(act, rowvar=False))
    ref = read_reference(tmp_path / "ref_stats.npz", name="--real")
    _assert_moments_give_frechet(ref)
    _assert_stats_only(ref, "`--real`", "pytorch-fid saves statistics only")


def test_torch_fidelity_caches(tmp_path):
    # toshas/torch-fidelity torch_fidelity/utils.py: the features cache "<input>-<extractor>-features-<layer>.pt"
    # is torch_atomic_save(featuresdict[layer]) (a torch.save of the [N, D] tensor); metric_fid.py's statistics
    # cache "<input>-<extractor>-stat-fid-<layer>.pt" is torch.save({"mu": np.mean(f), "sigma": np.cov(f)}) of
    # features.numpy() (float32 mu, float64 sigma).
    feats = torch.from_numpy(REAL)
    torch.save(feats, tmp_path / "cifar10-train-inception-v3-compat-features-2048.pt")
    numpy_feats = feats.numpy()
    stats = {"mu": np.mean(numpy_feats, axis=0), "sigma": np.cov(numpy_feats, rowvar=False)}
    torch.save(stats, tmp_path / "cifar10-train-inception-v3-compat-stat-fid-2048.pt")
    _assert_scores_match(read_reference(tmp_path / "cifar10-train-inception-v3-compat-features-2048.pt"))
    ref = read_reference(tmp_path / "cifar10-train-inception-v3-compat-stat-fid-2048.pt")
    assert ref.source == "torch-fidelity"
    assert torch.allclose(ref.mean, _fid_moments(REAL)[0], rtol=1e-6) and torch.equal(
        ref.cov, torch.tensor(stats["sigma"])
    )
    mu_f, cov_f = _fid_moments(FAKE)
    want = frechet_distance_from_moments(ref.mean, torch.from_numpy(np.cov(REAL, rowvar=False)), mu_f, cov_f)
    assert torch.allclose(frechet_distance_from_moments(ref.mean, ref.cov, mu_f, cov_f), want)
    _assert_stats_only(ref, "features-<layer>.pt")


def test_dgm_eval_representations_without_unpickling_hparams(tmp_path):
    # layer6ai-labs/dgm-eval dgm_eval/representations.py save_outputs: np.savez(out_path, model=model, reps=reps,
    # hparams=hyperparams), reps a float64 np.empty array, hparams vars(DataLoader) (a dict, pickled by np.save).
    # Here hparams holds an object whose unpickling would create a file: it must never be unpickled.
    marker = tmp_path / "hparams-were-unpickled"
    hparams = {"path": "/data/real", "nimages": 120, "trap": _Hostile(marker)}
    np.savez(
        tmp_path / "reps_cifar_dinov2_nimage-120_train.npz",
        model="dinov2",
        reps=REAL.astype(np.float64),
        hparams=hparams,
    )
    ref = read_reference(tmp_path / "reps_cifar_dinov2_nimage-120_train.npz")
    assert (ref.source, ref.extractor, ref.entry, ref.features.dtype) == ("dgm-eval", "dinov2", "reps", torch.float64)
    assert torch.equal(ref.features, torch.from_numpy(REAL).double()) and not marker.exists()


class _FeatureStats:
    """The fields of NVlabs' FeatureStats (stylegan2-ada-pytorch metrics/metric_utils.py), filled as its
    append() fills them: all_features a list of float32 [n, D] chunks, raw_mean/raw_cov float64 sums."""

    def __init__(self, x: np.ndarray, capture_all: bool, capture_mean_cov: bool) -> None:
        self.capture_all, self.capture_mean_cov, self.max_items = capture_all, capture_mean_cov, None
        self.num_items, self.num_features = x.shape[0], x.shape[1]
        self.all_features = [x[:50], x[50:]] if capture_all else []
        x64 = x.astype(np.float64)
        self.raw_mean = x64.sum(axis=0) if capture_mean_cov else np.zeros(x.shape[1])
        self.raw_cov = x64.T @ x64 if capture_mean_cov else np.zeros((x.shape[1],) * 2)


@pytest.fixture
def nvlabs_module(monkeypatch):
    """The class importable as metrics.metric_utils.FeatureStats, so pickle writes that path (as NVlabs' does)."""
    metrics, utils = types.ModuleType("metrics"), types.ModuleType("metrics.metric_utils")
    cls = type("FeatureStats", (_FeatureStats,), {"__module__": "metrics.metric_utils"})
    utils.FeatureStats, metrics.metric_utils = cls, utils
    monkeypatch.setitem(sys.modules, "metrics", metrics)
    monkeypatch.setitem(sys.modules, "metrics.metric_utils", utils)
    return cls


@pytest.mark.parametrize("as_object", [False, True], ids=["save-dict", "pickled-object"])
def test_nvlabs_feature_stats(tmp_path, nvlabs_module, as_object):
    # NVlabs/stylegan2-ada-pytorch metrics/metric_utils.py: FeatureStats.save pickles self.__dict__; the cache
    # (dnnlib.make_cache_dir_path('gan-metrics', tag + '.pkl')) is that pickle. A pickled object must read the same.
    both = nvlabs_module(REAL, capture_all=True, capture_mean_cov=True)
    with open(tmp_path / "stats.pkl", "wb") as f:
        pickle.dump(both if as_object else both.__dict__, f)
    ref = read_reference(tmp_path / "stats.pkl")
    assert ref.source == "nvlabs"
    _assert_scores_match(ref)
    mean, cov = _fid_moments(REAL, bias=True)  # get_mean_cov: raw_cov / N - mean mean^T
    assert torch.allclose(ref.mean, mean, rtol=1e-12) and torch.allclose(ref.cov, cov, rtol=1e-9, atol=1e-12)
    mean_only = nvlabs_module(REAL, capture_all=False, capture_mean_cov=True)
    with open(tmp_path / "fid.pkl", "wb") as f:
        pickle.dump(mean_only if as_object else mean_only.__dict__, f)
    ref = read_reference(tmp_path / "fid.pkl")
    assert ref.num_samples == 120 and torch.allclose(ref.cov, cov, rtol=1e-9, atol=1e-12)
    _assert_stats_only(ref, "over 120 samples", "capture_all=True")


def test_edm2_reference_pickle(tmp_path):
    # NVlabs/edm2 calculate_metrics.py calculate_stats_for_iterable: per metric mu = sum(x) / N,
    # sigma = (sum(x x^T) - N mu mu^T) / (N - 1), both float64 .numpy(); save_stats pickles
    # dict(num_images=N, fid=dict(mu=, sigma=), fd_dinov2=dict(mu=, sigma=)).
    def stats(x):
        x64 = torch.from_numpy(x).double()
        mu = x64.sum(0) / x.shape[0]
        sigma = (x64.T @ x64 - mu.ger(mu) * x.shape[0]) / (x.shape[0] - 1)
        return dict(mu=mu.numpy(), sigma=sigma.numpy())

    with open(tmp_path / "img512.pkl", "wb") as f:
        pickle.dump(dict(num_images=120, fid=stats(REAL), fd_dinov2=stats(REAL * 2)), f)
    with pytest.raises(
        ValueError, match=r"`detector` to name one of the statistics in .*: 'fid', 'fd_dinov2', but got None"
    ):
        read_reference(tmp_path / "img512.pkl")
    ref = read_reference(tmp_path / "img512.pkl", detector="fid")
    assert (ref.source, ref.extractor, ref.entry, ref.num_samples) == ("edm2", "inception-v3-tf", "fid", 120)
    _assert_moments_give_frechet(ref)
    _assert_stats_only(ref, "EDM2 saves statistics only", "over 120 samples")
    assert read_reference(tmp_path / "img512.pkl", detector="fd_dinov2").extractor == "dinov2-vit-l14"
    with pytest.raises(ValueError, match="but got 'kid'"):
        read_reference(tmp_path / "img512.pkl", detector="kid")
    np.save(tmp_path / "f.npy", REAL)
    with pytest.raises(ValueError, match="`detector` to be None for .*f.npy"):
        read_reference(tmp_path / "f.npy", detector="fid")


def test_guided_diffusion_reference_batch(tmp_path):
    # openai/guided-diffusion evaluations/evaluator.py: read_activations opens the "arr_0" image batch
    # (uint8 [N, H, W, 3]), read_statistics takes obj["mu"], obj["sigma"] (and "mu_s"/"sigma_s", spatial) from
    # the same VIRTUAL_*.npz; compute_statistics is np.mean(axis=0) / np.cov(rowvar=False).
    images = RNG.integers(0, 256, size=(10, 8, 8, 3), dtype=np.uint8)
    np.savez(
        tmp_path / "VIRTUAL_imagenet64_labeled.npz",
        arr_0=images,
        mu=np.mean(REAL, axis=0),
        sigma=np.cov(REAL, rowvar=False),
        mu_s=np.zeros(7),
        sigma_s=np.eye(7),
    )
    ref = read_reference(tmp_path / "VIRTUAL_imagenet64_labeled.npz")
    assert (ref.source, ref.extractor, ref.num_samples, ref.entry) == (
        "guided-diffusion",
        "inception-v3-tf",
        10,
        "arr_0",
    )
    assert ref.images.dtype == torch.uint8 and torch.equal(ref.images, torch.from_numpy(images))
    assert ref.serves == "every score, once the images are embedded"
    _assert_moments_give_frechet(ref)
    with pytest.raises(ValueError, match=r"holds 10 8x8x3 uint8 images, not features; embed them"):
        ref.require_features(PR_KNN)
    np.savez(tmp_path / "samples.npz", arr_0=images)  # a sample batch: images only
    assert read_reference(tmp_path / "samples.npz").mean is None


# ---- pickles and torch files are data, never code ----------------------------------------------------------


class _Hostile:
    """Unpickling this runs builtins.exec, which would create ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.exec, (f"open({str(self.marker)!r}, 'w').close()",))


class _System:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("attack", [_Hostile, _System], ids=["builtins.exec", "os.system"])
@pytest.mark.parametrize("container", ["pickle", "torch", "nested"])
def test_hostile_files_are_refused_and_never_run(tmp_path, attack, container):
    marker = tmp_path / "marker"
    pickle.loads(pickle.dumps(attack(marker)))  # the attack works when unpickled unguarded
    assert marker.exists()
    marker.unlink()
    path = tmp_path / "evil.bin"
    if container == "torch":
        torch.save({"features": attack(marker)}, path)
    else:
        payload = {"fid": {"mu": attack(marker)}} if container == "nested" else attack(marker)
        path.write_bytes(pickle.dumps(payload, protocol=4))
    with pytest.raises(ValueError) as info:
        read_reference(path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text and "`real`" in text and "is refused" in text
    assert ("exec" in text) if attack is _Hostile else ("system" in text)
    assert not marker.exists()


def test_refused_module_is_never_imported(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "evil_module_for_test.py").write_text(f"open({str(marker)!r}, 'w').close()\nf = print\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = b"\x80\x04c" + b"evil_module_for_test\nf\n" + b"."  # GLOBAL evil_module_for_test.f
    with open(tmp_path / "x.pkl", "wb") as f:
        f.write(data)
    with pytest.raises(ValueError, match="`evil_module_for_test.f`, which is refused"):
        read_reference(tmp_path / "x.pkl")
    assert not marker.exists() and "evil_module_for_test" not in sys.modules
    assert DataUnpickler.find_class is not pickle.Unpickler.find_class


# ---- detection by content, and files that cannot be read ---------------------------------------------------


def test_unknown_layout_lists_what_it_found_and_what_is_accepted(tmp_path):
    np.savez(tmp_path / "odd.npz", alpha=np.zeros(3), beta=np.ones((2, 2)))
    with pytest.raises(ValueError) as info:
        read_reference(tmp_path / "odd.npz", name="--real")
    text = str(info.value)
    assert text.startswith("Expected argument `--real` to be a reference file in a known layout, but ")
    assert "'alpha', 'beta'" in text and "accepted:" in text and "(dgm-eval)" in text and "(EDM2)" in text


def test_missing_directory_empty_and_foreign_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"`real` to be an existing file, but .*nope.npz does not exist"):
        read_reference(tmp_path / "nope.npz")
    with pytest.raises(ValueError, match="is a directory"):
        read_reference(tmp_path)
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "text.npz").write_text("mu,sigma\n1,2\n")
    for file, why in (("empty.npz", "is empty"), ("text.npz", "is none of .npy, .npz, torch.save or pickle")):
        with pytest.raises(ValueError, match=f"`real`.*{file} {why}"):
            read_reference(tmp_path / file)


@pytest.mark.parametrize("kind", ["npy", "npz", "pt", "legacy-pt", "pkl"])
def test_truncated_files_give_one_line(tmp_path, kind):
    path = tmp_path / f"cut.{kind}"
    if kind == "npy":
        np.save(path, REAL)
    elif kind == "npz":
        np.savez_compressed(path, mu=REAL.mean(0), sigma=np.cov(REAL, rowvar=False))
    elif kind == "pkl":
        path.write_bytes(pickle.dumps({"fid": {"mu": REAL.mean(0)}}))
    else:
        torch.save({"x": torch.from_numpy(REAL)}, path, _use_new_zipfile_serialization=kind == "pt")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError) as info:
        read_reference(path, name="--real")
    text = str(info.value)
    assert "\n" not in text and len(text) < 400 and "`--real`" in text and str(path) in text, text
    assert "could not be read as" in text


def test_bad_values_name_the_entry_and_the_file(tmp_path):
    np.savez(tmp_path / "int.npz", feats=np.ones((4, 3), dtype=np.int64))
    np.savez(tmp_path / "nan.npz", mu=np.array([0.0, np.nan]), sigma=np.eye(2))
    np.savez(tmp_path / "shape.npz", mu=np.zeros(3), sigma=np.eye(2))
    np.save(tmp_path / "half.npy", REAL.astype(np.float16))
    for file, needle in (
        ("int.npz", "entry 'feats'"),
        ("nan.npz", "NaN or Inf"),
        ("shape.npz", "`sigma` torch.float64 [2, 2]"),
    ):
        with pytest.raises(ValueError) as info:
            read_reference(tmp_path / file)
        assert needle in str(info.value) and str(tmp_path / file) in str(info.value) and "`real`" in str(info.value)
    assert read_reference(tmp_path / "half.npy").features.dtype == torch.float32
