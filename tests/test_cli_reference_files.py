"""``lightning-prd evaluate/compare --real`` in every form read_reference reads, and ``lightning-prd features``.

The other tools' files are written as tests/test_reference_files.py writes them (the layout each tool's source
writes, with the same NumPy/torch calls and keys). Runs call ``main([...])`` in-process, stderr read with
``capfd`` so anything written from C code would show next to the one error line.
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
from PIL import Image

import lightning_prd
from lightning_prd.cli import main
from lightning_prd.features import read_reference, write_features
from lightning_prd.functional import frechet_distance
from lightning_prd.functional.frechet import frechet_distance_from_moments

RNG = np.random.default_rng(3)
REAL = RNG.normal(size=(40, 6)).astype(np.float32)
FAKE = (RNG.normal(size=(30, 6)) * 1.2 + 0.3).astype(np.float32)
QUICK = ["--no-prd", "--no-alpha-beta", "-q"]


def _scores(tmp_path: Path, *argv: str, name: str = "out") -> dict:
    out = tmp_path / f"{name}.json"
    code = main([*argv, "--json", str(out)])
    assert code == 0
    return json.loads(out.read_text())


def _error(capfd, argv, *fragments) -> str:
    """Exit status 1 and exactly one line on stderr holding every fragment, nothing on stdout."""
    capfd.readouterr()
    assert main(argv) == 1
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"lightning-prd {argv[0]}: error: "), err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


# ---- files of other tools, as their sources write them ----------------------------------------------------


class _FeatureStats:
    """NVlabs' FeatureStats fields (stylegan2-ada-pytorch metrics/metric_utils.py), filled as append() fills them."""

    def __init__(self, x: np.ndarray, capture_all: bool, capture_mean_cov: bool) -> None:
        self.capture_all, self.capture_mean_cov, self.max_items = capture_all, capture_mean_cov, None
        self.num_items, self.num_features = x.shape[0], x.shape[1]
        self.all_features = [x[:25], x[25:]] if capture_all else []
        x64 = x.astype(np.float64)
        self.raw_mean = x64.sum(axis=0) if capture_mean_cov else np.zeros(x.shape[1])
        self.raw_cov = x64.T @ x64 if capture_mean_cov else np.zeros((x.shape[1],) * 2)


@pytest.fixture
def nvlabs(monkeypatch):
    """FeatureStats importable as metrics.metric_utils.FeatureStats, so pickle writes NVlabs' path."""
    metrics, utils = types.ModuleType("metrics"), types.ModuleType("metrics.metric_utils")
    cls = type("FeatureStats", (_FeatureStats,), {"__module__": "metrics.metric_utils"})
    utils.FeatureStats, metrics.metric_utils = cls, utils
    monkeypatch.setitem(sys.modules, "metrics", metrics)
    monkeypatch.setitem(sys.modules, "metrics.metric_utils", utils)
    return cls


def _edm2_stats(x: np.ndarray) -> dict:
    # NVlabs/edm2 calculate_metrics.py: mu = sum(x) / N, sigma = (sum(x x^T) - N mu mu^T) / (N - 1), float64
    x64 = torch.from_numpy(x).double()
    mu = x64.sum(0) / x.shape[0]
    return dict(mu=mu.numpy(), sigma=((x64.T @ x64 - mu.ger(mu) * x.shape[0]) / (x.shape[0] - 1)).numpy())


def _write_features_form(form: str, path: Path, x: np.ndarray, nvlabs_cls=None) -> None:
    if form == "lightning-prd":
        write_features(path, x, extractor=None)
    elif form == "lightning-prd .pt":  # the same layout in a torch.save dict, provenance a JSON string
        provenance = json.dumps({"format": "lightning-prd/features", "num_samples": x.shape[0]})
        torch.save({"features": torch.from_numpy(x), "provenance": provenance}, path)
    elif form == "one unnamed .npz array":  # np.savez(path, x): arr_0, features rather than images
        with open(path, "wb") as handle:
            np.savez(handle, x)
    elif form == "dgm-eval":  # dgm_eval/representations.py save_outputs: np.savez(out, model=, reps=, hparams=)
        with open(path, "wb") as handle:
            np.savez(handle, model="dinov2", reps=x, hparams={"nimages": x.shape[0]})
    elif form == "clean-fid":  # cleanfid/fid.py make_custom_stats: np.savez_compressed(..._kid.npz, feats=np_feats)
        with open(path, "wb") as handle:
            np.savez_compressed(handle, feats=x)
    elif form == "nvlabs":  # FeatureStats.save pickles self.__dict__
        path.write_bytes(pickle.dumps(nvlabs_cls(x, capture_all=True, capture_mean_cov=True).__dict__))
    elif form == "torch-fidelity":  # the features cache <input>-<extractor>-features-<layer>.pt: the tensor
        torch.save(torch.from_numpy(x), path)


FEATURE_FORMS = {  # form -> (file name, dtype the tool stores)
    "lightning-prd": ("ref.npz", np.float32),
    "lightning-prd .pt": ("ref.pt", np.float32),
    "one unnamed .npz array": ("feats.npz", np.float32),
    "dgm-eval": ("reps_cifar_dinov2_nimage-40_train.npz", np.float64),
    "clean-fid": ("mine_clean_custom_na_kid.data", np.float32),  # named against its suffix: the content decides
    "nvlabs": ("cifar10-inception-pr50k3.pkl", np.float32),
    "torch-fidelity": ("cifar10-train-inception-v3-compat-features-2048.pt", np.float32),
}


@pytest.mark.parametrize("form", list(FEATURE_FORMS))
def test_foreign_features_give_the_scores_of_the_same_features_as_npy(tmp_path, form, nvlabs):
    name, dtype = FEATURE_FORMS[form]
    real = REAL.astype(dtype)
    _write_features_form(form, tmp_path / name, real, nvlabs)
    np.save(tmp_path / "real.npy", real)
    np.save(tmp_path / "fake.npy", FAKE)
    common = ["--fake", str(tmp_path / "fake.npy"), "--prd-clusters", "5", "--prd-runs", "2", "--num-alphas", "8"]
    want = _scores(tmp_path, "evaluate", "--real", str(tmp_path / "real.npy"), *common, "-q", name="want")
    got = _scores(tmp_path, "evaluate", "--real", str(tmp_path / name), *common, "-q", name="got")
    assert got["scores"] == want["scores"] and len(got["scores"]) >= 10  # exactly, not approximately
    if form in ("torch-fidelity", "one unnamed .npz array"):  # a plain array is read as before
        assert "format" not in got["real"] and got["real"]["key"] == ("arr_0" if form.endswith("array") else None)
    else:
        assert got["real"]["format"] == form.split()[0] and got["real"]["source"] == "features"


def test_foreign_features_subsample_and_pick_their_entry_by_key(tmp_path, capfd):
    write_features(tmp_path / "ref.npz", REAL)
    np.save(tmp_path / "real.npy", REAL)
    np.save(tmp_path / "fake.npy", FAKE)
    common = ["--fake", str(tmp_path / "fake.npy"), "--num-samples", "25", "--seed", "4", *QUICK]
    want = _scores(tmp_path, "evaluate", "--real", str(tmp_path / "real.npy"), *common, name="want")
    got = _scores(tmp_path, "evaluate", "--real", str(tmp_path / "ref.npz"), "--real-key", "features", *common)
    assert got["scores"] == want["scores"] and got["real"]["num_samples"] == 25 and got["real"]["key"] == "features"
    _error(
        capfd,
        ["evaluate", "--real", str(tmp_path / "ref.npz"), "--real-key", "provenance", *common],
        "--real",
        "ref.npz",
        "unsupported dtype",
    )


# ---- statistics serve the Fréchet distance only ------------------------------------------------------------


def _write_stats_form(form: str, path: Path, x: np.ndarray, nvlabs_cls=None) -> None:
    x64 = x.astype(np.float64)
    if form == "pytorch-fid":  # fid_score.py save_fid_stats: np.savez_compressed(path, mu=m1, sigma=s1)
        with open(path, "wb") as handle:
            np.savez_compressed(handle, mu=np.mean(x64, axis=0), sigma=np.cov(x64, rowvar=False))
    elif form == "torch-fidelity":  # metric_fid.py: torch.save({"mu": np.mean(f), "sigma": np.cov(f)}) of numpy
        torch.save({"mu": np.mean(x, axis=0), "sigma": np.cov(x, rowvar=False)}, path)
    elif form == "edm2":  # calculate_metrics.py save_stats: pickle of dict(num_images=, fid=dict(mu=, sigma=))
        path.write_bytes(pickle.dumps(dict(num_images=x.shape[0], fid=_edm2_stats(x), fd_dinov2=_edm2_stats(x * 2))))
    elif form == "nvlabs":
        path.write_bytes(pickle.dumps(nvlabs_cls(x, capture_all=False, capture_mean_cov=True).__dict__))


STATS_FORMS = {  # form -> (file name, extra flags, fragments of the error without --only frechet)
    "pytorch-fid": ("ref_stats.npz", [], ["(fid-stats)", "pytorch-fid saves statistics only"]),
    "torch-fidelity": ("cifar10-train-inception-v3-compat-stat-fid-2048.pt", [], ["(torch-fidelity)"]),
    "edm2": ("img512.pkl", ["--detector", "fid"], ["(edm2)", "over 40 samples"]),
    "nvlabs": ("stats.pkl", [], ["(nvlabs)", "capture_all=True"]),
}


@pytest.mark.parametrize("form", list(STATS_FORMS))
def test_statistics_need_only_frechet_and_give_the_frechet_distance(tmp_path, capfd, form, nvlabs):
    name, extra, fragments = STATS_FORMS[form]
    path = tmp_path / name
    _write_stats_form(form, path, REAL, nvlabs)
    np.save(tmp_path / "fake.npy", FAKE)
    argv = ["evaluate", "--real", str(path), "--fake", str(tmp_path / "fake.npy"), *extra, "-q"]
    _error(
        capfd,
        argv,
        "`--real`",
        str(path),
        "holds only the mean and covariance of 6 features",
        "per-sample features for the k-NN scores",
        "PRD",
        "alpha-precision/beta-recall",
        "lightning-prd features",
        "pass --only frechet",
        *fragments,
    )
    capfd.readouterr()
    payload = _scores(tmp_path, *argv, "--only", "frechet")
    assert list(payload["scores"]) == ["frechet_distance"]
    assert (
        payload["real"]["source"] == "statistics"
        and payload["real"]["format"] == read_reference(path, detector=extra[1] if extra else None).source
    )
    if form == "nvlabs":  # FeatureStats' covariance divides by N (get_mean_cov): the distance of those moments
        x64, f64 = torch.from_numpy(REAL).double(), torch.from_numpy(FAKE).double()
        biased = torch.cov(x64.T, correction=0)
        want = float(frechet_distance_from_moments(x64.mean(0), biased, f64.mean(0), torch.cov(f64.T)))
        assert payload["scores"]["frechet_distance"] == pytest.approx(want, rel=1e-6)
    else:  # the N - 1 covariance the file holds: frechet_distance of the features they came from
        assert payload["scores"]["frechet_distance"] == pytest.approx(float(frechet_distance(REAL, FAKE)), rel=1e-6)
    out = capfd.readouterr().out
    assert "the Fréchet distance only (--only frechet)" in out and "mean and covariance only" in out


def test_statistics_in_compare_and_the_flags_only_refuses(tmp_path, capfd):
    _write_stats_form("pytorch-fid", tmp_path / "stats.npz", REAL)
    np.save(tmp_path / "a.npy", FAKE)
    np.save(tmp_path / "b.npy", REAL[::-1] + 0.5)
    real = ["--real", str(tmp_path / "stats.npz")]
    argv = ["compare", *real, "--fake", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--only", "frechet"]
    payload = _scores(tmp_path, *argv, "-q")
    got = [r["scores"]["frechet_distance"] for r in payload["results"]]
    want = [float(frechet_distance(REAL, FAKE)), float(frechet_distance(REAL, REAL[::-1] + 0.5))]
    assert got == pytest.approx(want, rel=1e-6)
    fake = ["--fake", str(tmp_path / "a.npy")]
    _error(capfd, ["evaluate", *real, *fake, "--only", "frechet", "--kid"], "--only frechet", "--kid")
    _error(capfd, ["evaluate", *real, *fake, "--only", "frechet", "--plot", str(tmp_path / "p.png")], "--plot")
    np.save(tmp_path / "narrow.npy", FAKE[:, :4])
    narrow = ["--fake", str(tmp_path / "narrow.npy")]
    _error(capfd, ["evaluate", *real, *narrow, "--only", "frechet"], "--fake", "4 features per sample", "has 6")
    _error(capfd, ["evaluate", *real, *fake, "--only", "frechet", "--detector", "fid"], "--detector fid", "EDM2")
    capfd.readouterr()
    assert main(["evaluate", *real, *fake, "--only", "frechet", "--num-samples", "10", "-q"]) == 0
    assert "warning: --num-samples 10 subsamples --fake only" in capfd.readouterr().err


def test_only_frechet_on_features_is_the_frechet_distance_of_a_full_run(tmp_path):
    np.save(tmp_path / "real.npy", REAL)
    np.save(tmp_path / "fake.npy", FAKE)
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), *QUICK]
    full = _scores(tmp_path, *argv, name="full")["scores"]
    only = _scores(tmp_path, *argv, "--only", "frechet", name="only")
    assert only["scores"] == {"frechet_distance": full["frechet_distance"]}
    assert only["settings"]["only"] == "frechet"


def test_edm2_detector_is_named_in_its_errors(tmp_path, capfd):
    _write_stats_form("edm2", tmp_path / "img512.pkl", REAL)
    np.save(tmp_path / "fake.npy", FAKE)
    argv = ["evaluate", "--real", str(tmp_path / "img512.pkl"), "--fake", str(tmp_path / "fake.npy"), "--only"]
    _error(capfd, [*argv, "frechet"], "--detector", "'fid', 'fd_dinov2'", "img512.pkl")
    _error(capfd, [*argv, "frechet", "--detector", "kid"], "--detector", "but got 'kid'")
    payload = _scores(tmp_path, *argv, "frechet", "--detector", "fd_dinov2", "-q")
    assert payload["real"]["extractor"] == "dinov2-vit-l14" and payload["settings"]["detector"] == "fd_dinov2"
    assert payload["scores"]["frechet_distance"] == pytest.approx(float(frechet_distance(REAL * 2, FAKE)), rel=1e-6)


# ---- the extractor a file names, against --extractor --------------------------------------------------------


def _write_images(folder: Path, n: int, seed: int, size: int = 12) -> np.ndarray:
    """``n`` RGB PNGs in ``folder``; returns them as uint8 ``[n, size, size, 3]`` in the order of their names."""
    folder.mkdir(parents=True, exist_ok=True)
    images = np.random.default_rng(seed).integers(0, 256, size=(n, size, size, 3), dtype=np.uint8)
    for i, image in enumerate(images):
        Image.fromarray(image).save(folder / f"{i:03d}.png")
    return images


def test_an_extractor_mismatch_names_both_and_an_unnamed_one_warns(tmp_path, capfd):
    _write_images(tmp_path / "fake", 12, seed=2)
    feats16 = RNG.normal(size=(20, 16)).astype(np.float32)
    write_features(tmp_path / "inception.npz", feats16, extractor="inception")
    with open(tmp_path / "reps.npz", "wb") as handle:
        np.savez(handle, model="dinov2", reps=feats16.astype(np.float64), hparams={"nimages": 20})
    fake = ["--fake", str(tmp_path / "fake"), "--extractor", "random-cnn", *QUICK]
    for file, named in (("inception.npz", "'inception'"), ("reps.npz", "'dinov2'")):
        _error(
            capfd,
            ["evaluate", "--real", str(tmp_path / file), *fake],
            "--extractor random-cnn",
            str(tmp_path / file),
            named,
            "not 'random-cnn'",
        )
    write_features(tmp_path / "random.npz", feats16, extractor="random-cnn")
    capfd.readouterr()
    assert main(["evaluate", "--real", str(tmp_path / "random.npz"), *fake[:2], "--extractor", "RANDOM", *QUICK]) == 0
    assert "warning" not in capfd.readouterr().err  # an alias of the same network
    with open(tmp_path / "kid.npz", "wb") as handle:
        np.savez_compressed(handle, feats=feats16)
    assert main(["evaluate", "--real", str(tmp_path / "kid.npz"), *fake]) == 0
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lightning-prd evaluate: warning: --real "), err
    assert "does not say which extractor made its features" in err and "--extractor random-cnn" in err


# ---- lightning-prd features --------------------------------------------------------------------------------


def test_features_writes_what_evaluate_scores_like_the_folder(tmp_path, capfd):
    _write_images(tmp_path / "real", 24, seed=1)
    _write_images(tmp_path / "fake", 20, seed=2)
    out = tmp_path / "made" / "real.npz"
    sample = ["--num-samples", "18", "--seed", "3"]
    argv = ["features", "--real", str(tmp_path / "real"), "--extractor", "random-cnn", "--out", str(out), "-q"]
    assert main([*argv, *sample, "--batch-size", "5"]) == 0
    assert f"wrote {out}: 18 of 24 samples" in capfd.readouterr().out
    ref = read_reference(out)
    assert ref.source == "lightning-prd" and ref.extractor == "random-cnn" and tuple(ref.features.shape) == (18, 16)
    prov = ref.provenance
    assert prov["format"] == "lightning-prd/features" and prov["num_samples"] == 18 and prov["num_features"] == 16
    assert prov["version"] == lightning_prd.__version__ and "weights_sha256" not in prov
    assert prov["preprocessing"]["input_size"] == [32, 32] and prov["preprocessing"]["resize"] == "bilinear"
    assert sorted(p.name for p in out.parent.iterdir()) == ["real.npz"]  # no temporary file left behind
    # the same batch size on both sides: a convolution's last bits may depend on the batch (oneDNN
    # picks its kernel by shape on some CPUs), which is not what this test is about
    fake = ["--fake", str(tmp_path / "fake"), "--extractor", "random-cnn", "--prd-clusters", "4", "--prd-runs", "2"]
    fake += ["--batch-size", "5"]
    want = _scores(tmp_path, "evaluate", "--real", str(tmp_path / "real"), *sample, *fake, "-q", name="want")
    got = _scores(tmp_path, "evaluate", "--real", str(out), *sample, *fake, "-q", name="got")
    assert got["scores"] == want["scores"] and got["real"]["format"] == "lightning-prd"


def test_features_takes_vectors_with_identity_and_evaluate_reads_the_npy_as_it_is(tmp_path, capfd):
    np.save(tmp_path / "real.npy", REAL)
    np.save(tmp_path / "fake.npy", FAKE)
    out = tmp_path / "real.npz"
    assert (
        main(["features", "--real", str(tmp_path / "real.npy"), "--extractor", "identity", "--out", str(out), "-q"])
        == 0
    )
    ref = read_reference(out)
    assert ref.extractor == "identity" and np.array_equal(ref.features.numpy(), REAL)
    fake = ["--fake", str(tmp_path / "fake.npy"), *QUICK]
    plain = _scores(tmp_path, "evaluate", "--real", str(tmp_path / "real.npy"), *fake, name="plain")
    embedded = _scores(tmp_path, "evaluate", "--real", str(out), *fake, name="embedded")
    assert plain["scores"] == embedded["scores"] and plain["real"]["num_samples"] == len(REAL)
    capfd.readouterr()
    assert main(["features", "--help"]) == 0
    text = " ".join(capfd.readouterr().out.split())
    assert "an image folder or a file of images, or a file of vectors [N, D] (--extractor identity)" in text
    assert "A plain .npy of features needs no features run" in text


def test_features_of_a_guided_diffusion_batch_equal_those_of_its_images(tmp_path):
    images = _write_images(tmp_path / "real", 16, seed=5)
    np.savez(
        tmp_path / "VIRTUAL_tiny.npz", arr_0=images, mu=REAL.mean(0), sigma=np.cov(REAL, rowvar=False), mu_s=np.zeros(2)
    )
    for name, real in (("folder.npz", tmp_path / "real"), ("batch.npz", tmp_path / "VIRTUAL_tiny.npz")):
        argv = ["features", "--real", str(real), "--extractor", "random-cnn", "--out", str(tmp_path / name), "-q"]
        assert main(argv) == 0
    a, b = read_reference(tmp_path / "folder.npz"), read_reference(tmp_path / "batch.npz")
    assert torch.equal(a.features, b.features)
    _write_images(tmp_path / "fake", 14, seed=6)
    fake = ["--fake", str(tmp_path / "fake"), "--extractor", "random-cnn", *QUICK]
    want = _scores(tmp_path, "evaluate", "--real", str(tmp_path / "real"), *fake, name="want")
    got = _scores(tmp_path, "evaluate", "--real", str(tmp_path / "VIRTUAL_tiny.npz"), *fake, name="got")
    assert got["scores"] == want["scores"] and got["real"]["format"] == "guided-diffusion"


def test_features_refuses_what_it_cannot_embed_or_write(tmp_path, capfd):
    _write_images(tmp_path / "real", 6, seed=1)
    np.savez(tmp_path / "VIRTUAL_x.npz", arr_0=np.zeros((4, 8, 8, 3), np.uint8))
    write_features(tmp_path / "feats.npz", REAL)
    _write_stats_form("pytorch-fid", tmp_path / "stats.npz", REAL)
    base = ["features", "--extractor", "random-cnn", "-q"]
    folder = ["--real", str(tmp_path / "real")]
    batch = str(tmp_path / "VIRTUAL_x.npz")
    _error(capfd, [*base, "--real", batch, "--out", batch], "--out", "refusing to overwrite an input")
    _error(capfd, [*base, *folder, "--out", str(tmp_path / "x.npy")], "--out", "expected a .npz file path")
    _error(capfd, [*base, *folder, "--out", str(tmp_path)], "--out", "directory")
    for file, held in (("feats.npz", "holds features"), ("stats.npz", "only the mean and covariance")):
        out = str(tmp_path / "o.npz")
        _error(capfd, [*base, "--real", str(tmp_path / file), "--out", out], "--real", file, held, "not samples")
    _error(capfd, [*base, "--real", str(tmp_path / "nope"), "--out", str(tmp_path / "o.npz")], "no such file")
    weights = tmp_path / "w.pth"
    weights.write_bytes(b"weights")
    _error(capfd, [*base, *folder, "--out", str(tmp_path / "o.npz"), "--weights", str(weights)], "takes no weights")
    assert not (tmp_path / "o.npz").exists()


def test_write_features_records_the_weights_and_writes_atomically(tmp_path, monkeypatch):
    weights = tmp_path / "net.pth"
    weights.write_bytes(b"\x00weights" * 1000)
    out = tmp_path / "f.npz"
    prov = write_features(out, torch.from_numpy(REAL).half(), extractor="x", weights=weights, preprocessing="none")
    import hashlib

    assert prov["weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    ref = read_reference(out)
    assert ref.provenance == prov and ref.features.dtype == torch.float32 and ref.provenance["preprocessing"] == "none"
    before = out.read_bytes()

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", fail)
    with pytest.raises(OSError):
        write_features(out, REAL)
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["f.npz", "net.pth"]
    monkeypatch.undo()
    os.link(out, tmp_path / "hard.npz")
    with pytest.raises(ValueError, match="is the input"):
        write_features(tmp_path / "hard.npz", REAL, inputs=[out])
    with pytest.raises(ValueError, match=r"\.npz"):
        write_features(tmp_path / "f.npy", REAL)


# ---- files that cannot serve: one line naming --real and the file -------------------------------------------


class _Hostile:
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
@pytest.mark.parametrize("name", ["evil.pkl", "evil.pt", "evil"])
def test_a_hostile_pickle_is_refused_and_never_run(tmp_path, capfd, attack, name):
    marker = tmp_path / "marker"
    path = tmp_path / name
    payload = {"fid": {"mu": attack(marker), "sigma": np.eye(2)}}
    if name.endswith(".pt"):
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=4))
    np.save(tmp_path / "fake.npy", FAKE)
    argv = ["evaluate", "--real", str(path), "--fake", str(tmp_path / "fake.npy"), "--only", "frechet", "-q"]
    _error(capfd, argv, "--real", str(path), "exec" if attack is _Hostile else "system")
    assert not marker.exists()


def _cut(write):
    def cut(path: Path) -> None:
        write(path)
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])

    return cut


BAD = {  # case -> (file name, writer or None, fragments)
    "missing": ("nope.pkl", None, ["no such file or directory"]),
    "empty": ("empty.bin", lambda p: p.write_bytes(b""), ["unsupported file type '.bin'"]),
    "not a known container": ("x.pkl", lambda p: p.write_text("mu,sigma\n"), ["unsupported file type '.pkl'"]),
    "truncated statistics": (
        "stats.bin",
        _cut(lambda p: p.write_bytes(_npz_bytes(mu=REAL.mean(0), sigma=np.eye(6)))),
        ["could not be read as"],
    ),
    "truncated pickle": ("img512.pkl", _cut(lambda p: _write_stats_form("edm2", p, REAL)), ["could not be read as"]),
    "corrupt pickle": ("x.pkl", lambda p: p.write_bytes(b"\x80\x04garbage"), ["could not be read as a pickle"]),
    "unknown layout": ("odd.npz", lambda p: np.savez(p, alpha=np.zeros(3), beta=np.ones((2, 2))), ["(array 'alpha'"]),
    "NaN statistics": (
        "nan.pkl",
        lambda p: p.write_bytes(pickle.dumps({"mu": np.array([np.nan, 0.0]), "sigma": np.eye(2)})),
        ["NaN or Inf"],
    ),
}


def _npz_bytes(**arrays) -> bytes:
    import io

    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_real_file_is_one_line_naming_the_flag_and_the_file(tmp_path, capfd, case):
    name, write, fragments = BAD[case]
    path = tmp_path / name
    if write is not None:
        write(path)
    np.save(tmp_path / "fake.npy", FAKE)
    argv = ["evaluate", "--real", str(path), "--fake", str(tmp_path / "fake.npy"), "--only", "frechet", "-q"]
    _error(capfd, argv, "--real", str(path), *fragments)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_real_file_is_one_line(tmp_path, capfd):
    path = tmp_path / "stats.pkl"
    _write_stats_form("edm2", path, REAL)
    path.chmod(0)
    np.save(tmp_path / "fake.npy", FAKE)
    argv = ["evaluate", "--real", str(path), "--fake", str(tmp_path / "fake.npy"), "--only", "frechet"]
    _error(capfd, argv, "--real", str(path), "Permission denied")


def test_a_guided_diffusion_batch_without_extractor_asks_for_one(tmp_path, capfd):
    np.savez(tmp_path / "VIRTUAL_x.npz", arr_0=np.zeros((5, 8, 8, 3), np.uint8), mu=np.zeros(6), sigma=np.eye(6))
    np.save(tmp_path / "fake.npy", FAKE)
    argv = ["evaluate", "--real", str(tmp_path / "VIRTUAL_x.npz"), "--fake", str(tmp_path / "fake.npy"), *QUICK]
    _error(capfd, argv, "--real", "VIRTUAL_x.npz", "(guided-diffusion", "5 8x8x3 uint8 images", "--extractor")


def test_help_has_the_table_of_real_forms(capfd):
    assert main(["evaluate", "--help"]) == 0
    text = capfd.readouterr().out
    for word in ("dgm-eval", "clean-fid", "FeatureStats", "VIRTUAL_*.npz", "EDM2", "torch-fidelity", "--only"):
        assert word in text, word
    assert main(["features", "--help"]) == 0
    text = capfd.readouterr().out
    assert "--out" in text and "provenance" in text and "weights_sha256" in text


#: each layout read_reference tells apart (ReferenceSet.source), and image folders: words its row holds in every
#: table of real forms (the --help epilog, docs/cli.md, docs/callback.md)
FORM_WORDS = {
    "array": [".npy", "torch-fidelity"],  # plain features, torch-fidelity's features cache among them
    "folder": ["image folder"],
    "lightning-prd": ["lightning-prd features"],
    "dgm-eval": ["dgm-eval", "reps"],
    "clean-fid": ["clean-fid KID", "feats"],
    "nvlabs": ["FeatureStats", "capture_all"],
    "guided-diffusion": ["VIRTUAL_*.npz", "arr_0"],
    "fid-stats": ["pytorch-fid", "mu"],
    "torch-fidelity": ["torch-fidelity statistics"],
    "edm2": ["EDM2"],
}
DOCS = Path(__file__).resolve().parent.parent / "docs"


def _table(text: str, header: str) -> list:
    """The rows of the table that starts at the line ``header``, up to the first line that is no row."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip() or line.lstrip()[:1] not in "|(" and not line.startswith("    "):
            break
        rows.append(line)
    return rows


def test_every_real_form_is_a_row_of_each_table(capfd):
    from lightning_prd.features.reference_files import NAMED_LAYOUTS

    layouts = {name for name, _, _ in NAMED_LAYOUTS} - {"mu-sigma"} | {"fid-stats", "torch-fidelity", "edm2", "array"}
    assert layouts | {"folder"} == set(FORM_WORDS)  # a new layout needs its row in every table
    assert main(["evaluate", "--help"]) == 0
    help_rows = _table(capfd.readouterr().out, "form ")
    cli_rows = _table((DOCS / "cli.md").read_text(), "| form | what it serves | how it is detected |")
    callback_rows = _table((DOCS / "callback.md").read_text(), "| form | what it serves | how it is detected |")
    for name, rows in (("--help", help_rows), ("cli.md", cli_rows), ("callback.md", callback_rows)):
        text = "\n".join(rows)
        missing = [form for form, words in FORM_WORDS.items() if not all(w in text for w in words)]
        assert not missing, (name, missing)
        assert "Frechet only" in text or "the Fréchet distance" in text
    for row in cli_rows[1:] + callback_rows[1:]:  # form | what it serves | how it is detected: three cells
        assert row.count(" | ") == 2 and row.startswith("| ") and row.endswith(" |"), row
    words = "\n".join(callback_rows)
    assert all(w in words for w in ("a tensor", "DataLoader", "datamodule:train", "datamodule:predict"))


def test_a_real_file_that_cannot_be_opened_is_one_line_as_any_user(tmp_path, capfd, monkeypatch):
    """test_an_unreadable_real_file_is_one_line for a user (root) whom no file mode stops: opening the file fails."""
    path = tmp_path / "stats.pkl"
    _write_stats_form("edm2", path, REAL)
    np.save(tmp_path / "fake.npy", FAKE)
    opener = type(path).open

    def refuse(self, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return opener(self, *args, **kwargs)

    monkeypatch.setattr(type(path), "open", refuse)
    argv = ["evaluate", "--real", str(path), "--fake", str(tmp_path / "fake.npy"), "--only", "frechet"]
    _error(capfd, argv, "--real", str(path), "Permission denied")
