"""The ``lightning-prd`` command: saved features and image folders end to end, JSON equal to the
functional results, one-line errors, ``--help``, ``compare``.

Most runs call ``main([...])`` in-process; a few run ``python -m lightning_prd.cli`` in a
subprocess to check exit codes and that no traceback reaches stderr.
"""

import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import lightning_prd.functional as F
from lightning_prd.cli import main
from lightning_prd.features import RandomConvNet

FAST_PRD = ["--prd-clusters", "5", "--prd-runs", "2"]


def _functional(name, module):
    fn = getattr(F, name, None)
    if fn is None:
        try:
            fn = getattr(importlib.import_module(f"lightning_prd.functional.{module}"), name, None)
        except ImportError:
            fn = None
    return fn


def expected_scores(real, fake, *, k_pr=3, k_dc=5, seed=0, clusters=5, runs=2, num_alphas=30):
    """Every scalar the CLI reports, straight from lightning_prd.functional."""
    real, fake = torch.as_tensor(real), torch.as_tensor(fake)
    precision, recall = F.precision_recall(real, fake, k=k_pr)
    density, coverage = F.density_coverage(real, fake, k=k_dc)
    out = {
        "precision": precision,
        "recall": recall,
        "density": density,
        "coverage": coverage,
        "frechet_distance": F.frechet_distance(real, fake),
    }
    prd_curve, prd_f_beta = _functional("prd_curve", "prd"), _functional("prd_f_beta", "prd")
    if prd_curve is not None and prd_f_beta is not None:
        p, r = prd_curve(real, fake, num_clusters=clusters, num_runs=runs, seed=seed, enforce_balance="subsample")
        out["f_beta"], out["f_inv_beta"] = prd_f_beta(p, r)
    alpha_beta = _functional("alpha_precision_beta_recall", "alpha_beta")
    if alpha_beta is not None:
        ab = alpha_beta(real, fake, num_alphas=num_alphas, k=k_dc)
        out.update({k: ab[k] for k in ("alpha_precision", "beta_recall", "authenticity")})
    return {k: float(v) for k, v in out.items()}


def assert_scores_equal(got, want):
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-5, abs=1e-6), name


@pytest.fixture
def arrays():
    gen = np.random.default_rng(0)
    return gen.normal(size=(60, 5)).astype(np.float32), (0.7 * gen.normal(size=(50, 5)) + 0.2).astype(np.float32)


@pytest.fixture
def files(tmp_path, arrays):
    real, fake = arrays
    np.save(tmp_path / "real.npy", real)
    np.save(tmp_path / "fake.npy", fake)
    np.savez(tmp_path / "both.npz", real=real, fake=fake)
    torch.save(torch.from_numpy(fake), tmp_path / "fake.pt")
    torch.save({"step": torch.tensor(3), "features": torch.from_numpy(real)}, tmp_path / "real_dict.pt")
    return tmp_path


def run_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "lightning_prd.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


# ---------------------------------------------------------------------------- feature files
def test_evaluate_npy_json_equals_functional(files, arrays, capsys):
    out = files / "out" / "scores.json"
    code = main(
        [
            "evaluate",
            "--real",
            str(files / "real.npy"),
            "--fake",
            str(files / "fake.npy"),
            "--json",
            str(out),
            *FAST_PRD,
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    for word in (
        "precision",
        "recall",
        "density",
        "coverage",
        "frechet_distance",
        "N = 60",
        "M = 50",
        "D = 5",
        "precision/recall = 3",
        "density/coverage = 5",
    ):
        assert word in text
    payload = json.loads(out.read_text())
    assert_scores_equal(payload["scores"], expected_scores(*arrays))
    assert (
        payload["real"]["num_samples"] == 60 and payload["fake"]["num_samples"] == 50 and payload["num_features"] == 5
    )
    assert payload["settings"]["k_precision_recall"] == 3 and payload["settings"]["k_density_coverage"] == 5


def test_npz_keys_first_array_and_pt(files, arrays, capsys):
    real, fake = arrays
    out = files / "s.json"
    assert (
        main(
            [
                "evaluate",
                "--real",
                str(files / "both.npz"),
                "--real-key",
                "real",
                "--fake",
                str(files / "both.npz"),
                "--fake-key",
                "fake",
                "--json",
                str(out),
                "--k-pr",
                "2",
                "--k-dc",
                "4",
                *FAST_PRD,
            ]
        )
        == 0
    )
    assert_scores_equal(json.loads(out.read_text())["scores"], expected_scores(real, fake, k_pr=2, k_dc=4))
    # .npz without a key: the first array ("real"); .pt: a tensor, and the first tensor of a dict
    assert (
        main(
            [
                "evaluate",
                "--real",
                str(files / "both.npz"),
                "--fake",
                str(files / "fake.pt"),
                "--json",
                str(out),
                "--no-prd",
                "--no-alpha-beta",
            ]
        )
        == 0
    )
    got = json.loads(out.read_text())
    want = expected_scores(real, fake)
    assert set(got["scores"]) == {"precision", "recall", "density", "coverage", "frechet_distance"}
    assert got["settings"]["prd"] is None and got["settings"]["alpha_beta"] is None
    for name, value in got["scores"].items():
        assert value == pytest.approx(want[name], rel=1e-5, abs=1e-6)
    assert (
        main(
            [
                "evaluate",
                "--real",
                str(files / "real_dict.pt"),
                "--real-key",
                "features",
                "--fake",
                str(files / "fake.npy"),
                "--json",
                str(out),
                "--no-prd",
                "--no-alpha-beta",
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["scores"]["precision"] == pytest.approx(want["precision"], rel=1e-6)
    assert "skipped" in capsys.readouterr().out


def test_subsampling_is_seeded_without_replacement(files, arrays):
    real, fake = arrays
    out = files / "s.json"
    args = [
        "evaluate",
        "--real",
        str(files / "real.npy"),
        "--fake",
        str(files / "fake.npy"),
        "--json",
        str(out),
        "--num-samples",
        "40",
        "--no-prd",
        "--no-alpha-beta",
        "-q",
    ]
    assert main([*args, "--seed", "3"]) == 0
    first = json.loads(out.read_text())
    assert (
        first["real"]["num_samples"] == 40
        and first["real"]["num_available"] == 60
        and first["fake"]["num_samples"] == 40
    )
    rows = lambda n: torch.randperm(n, generator=torch.Generator().manual_seed(3))[:40].sort().values.numpy()  # noqa: E731
    want = expected_scores(real[rows(60)], fake[rows(50)])
    for name, value in first["scores"].items():
        assert value == pytest.approx(want[name], rel=1e-5, abs=1e-6)
    assert main([*args, "--seed", "3"]) == 0
    assert json.loads(out.read_text())["scores"] == first["scores"]
    assert main([*args, "--seed", "4"]) == 0
    assert json.loads(out.read_text())["scores"] != first["scores"]


def test_subprocess_end_to_end(files):
    result = run_cli(
        "evaluate",
        "--real",
        files / "real.npy",
        "--fake",
        files / "fake.npy",
        "--no-prd",
        "--no-alpha-beta",
        "--plot",
        files / "pr.png",
    )
    assert result.returncode == 0, result.stderr
    assert "precision" in result.stdout and "coverage" in result.stdout
    assert "Traceback" not in result.stderr
    assert (files / "pr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------- image folders
def _write_images(folder, count, seed, sizes=((12, 12),), gray_every=0):
    gen = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    paths = []
    for i in range(count):
        h, w = sizes[i % len(sizes)]
        pixels = gen.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        image = Image.fromarray(pixels)
        if gray_every and i % gray_every == 0:
            image = image.convert("L")
        sub = folder / "a" if i % 2 else folder  # searched recursively
        sub.mkdir(exist_ok=True)
        path = sub / f"img_{i:03d}.png"
        image.save(path)
        paths.append(path)
    (folder / "notes.txt").write_text("not an image")
    return sorted(paths)


def _expected_image_features(extractor, paths):
    """Features of each image on its own (grouped by size to keep the number of forward passes small)."""
    images = []
    for path in paths:
        with Image.open(path) as image:
            images.append(torch.from_numpy(np.asarray(image.convert("RGB")).copy()).permute(2, 0, 1))
    feats = [None] * len(images)
    for shape in {im.shape for im in images}:
        idx = [i for i, im in enumerate(images) if im.shape == shape]
        for i, row in zip(idx, extractor(torch.stack([images[i] for i in idx]))):
            feats[i] = row
    return torch.stack(feats).detach()


def test_image_folders_with_registered_tiny_extractor(tmp_path):
    real_paths = _write_images(tmp_path / "real", 30, seed=1)
    fake_paths = _write_images(tmp_path / "fake", 30, seed=2, sizes=((12, 12), (10, 14)), gray_every=4)
    out = tmp_path / "img.json"
    assert (
        main(
            [
                "evaluate",
                "--real",
                str(tmp_path / "real"),
                "--fake",
                str(tmp_path / "fake"),
                "--extractor",
                "random-cnn",
                "--batch-size",
                "7",
                "--json",
                str(out),
                "--quiet",
                *FAST_PRD,
            ]
        )
        == 0
    )
    payload = json.loads(out.read_text())
    assert payload["real"]["source"] == "images" and payload["num_features"] == 16
    net = RandomConvNet()
    want = expected_scores(_expected_image_features(net, real_paths), _expected_image_features(net, fake_paths))
    assert_scores_equal(payload["scores"], want)


def test_image_folder_with_module_callable(tmp_path, monkeypatch, capsys):
    _write_images(tmp_path / "real", 30, seed=1)
    _write_images(tmp_path / "fake", 30, seed=3)
    (tmp_path / "tiny_extractor_for_tests.py").write_text(
        "from lightning_prd.features import RandomConvNet\n"
        "def build():\n"
        "    return RandomConvNet(num_features=6, size=16, seed=7)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o.json"
    assert (
        main(
            [
                "evaluate",
                "--real",
                str(tmp_path / "real"),
                "--fake",
                str(tmp_path / "fake"),
                "--extractor",
                "tiny_extractor_for_tests:build",
                "--json",
                str(out),
                "--no-prd",
                "--no-alpha-beta",
                "--num-samples",
                "20",
            ]
        )
        == 0
    )
    payload = json.loads(out.read_text())
    assert (
        payload["num_features"] == 6 and payload["real"]["num_samples"] == 20 and payload["real"]["num_available"] == 30
    )
    assert "extractor = tiny_extractor_for_tests:build" in capsys.readouterr().out


# ---------------------------------------------------------------------------- compare
def test_compare_one_row_per_fake_set(files, arrays, capsys):
    real, fake = arrays
    np.save(files / "fake2.npy", fake[:40] * 2)
    out, png = files / "cmp.json", files / "cmp.png"
    code = main(
        [
            "compare",
            "--real",
            str(files / "real.npy"),
            "--fake",
            str(files / "fake.npy"),
            str(files / "fake.pt"),
            str(files / "fake2.npy"),
            "--labels",
            "run-a",
            "run-b",
            "run-c",
            "--json",
            str(out),
            "--plot",
            str(png),
            *FAST_PRD,
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.split() and line.split()[0] in ("run-a", "run-b", "run-c")]
    assert [r.split()[0] for r in rows] == ["run-a", "run-b", "run-c"]
    payload = json.loads(out.read_text())
    assert [r["label"] for r in payload["results"]] == ["run-a", "run-b", "run-c"]
    assert_scores_equal(payload["results"][2]["scores"], expected_scores(real, fake[:40] * 2))
    assert payload["results"][0]["scores"] == payload["results"][1]["scores"]  # same features, .npy and .pt
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert (
        main(["compare", "--real", str(files / "real.npy"), "--fake", str(files / "fake.npy"), "--labels", "a", "b"])
        == 1
    )
    assert "labels" in capsys.readouterr().err


# ---------------------------------------------------------------------------- errors and help
@pytest.fixture
def bad_inputs(files, arrays):
    real, _ = arrays
    np.save(files / "narrow.npy", real[:, :3])
    nan = real.copy()
    nan[4, 1] = np.nan
    np.save(files / "nan.npy", nan)
    np.save(files / "cube.npy", np.zeros((10, 3, 4, 4), dtype=np.float32))
    (files / "empty_dir").mkdir()
    (files / "feats.csv").write_text("1,2\n")
    (files / "broken.npy").write_bytes(b"not numpy")
    images = files / "imgs"
    images.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(images / "x.png")
    return files


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--fake", "{d}/missing.npy"], "no such file"),
        (["--fake", "{d}/narrow.npy"], "3 features per sample, but --real has 5"),
        (["--fake", "{d}/nan.npy"], "NaN"),
        (["--fake", "{d}/empty_dir", "--extractor", "random-cnn"], "no PNG/JPEG images"),
        (["--fake", "{d}/fake.npy", "--extractor", "random-cnn"], "--real"),  # features are not images
        (["--fake", "{d}/feats.csv"], "unsupported file type '.csv'"),
        (["--fake", "{d}/imgs"], "--extractor"),
        (["--fake", "{d}/cube.npy"], "2-D"),
        (["--fake", "{d}/broken.npy"], "cannot read"),
        (["--fake", "{d}/both.npz", "--fake-key", "nope"], "no array named 'nope'"),
        (["--fake", "{d}/fake.npy", "--weights", "w.pth"], "--weights needs --extractor"),
        (["--fake", "{d}/fake.npy", "--extractor", "no-such-net"], "no-such-net"),
        (["--fake", "{d}/fake.npy", "--k-pr", "70"], "at least"),
        (["--fake", "{d}/fake.npy", "--device", "potato"], "--device"),
    ],
)
def test_bad_input_is_one_line_without_traceback(bad_inputs, capsys, extra, match):
    real = bad_inputs / ("imgs" if "random-cnn" in extra and "empty_dir" in extra[1] else "real.npy")
    argv = ["evaluate", "--real", str(real), *[a.format(d=bad_inputs) for a in extra], "--no-prd", "--no-alpha-beta"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lightning-prd evaluate: error:"), err
    assert match in err and "Traceback" not in err


def test_usage_errors_exit_2_with_one_line(files, capsys):
    assert main(["evaluate", "--real", str(files / "real.npy")]) == 2  # --fake missing
    assert main(["evaluate", "--real", "a.npy", "--fake", "b.npy", "--k-pr", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "positive integer" in err and "Traceback" not in err
    assert main([]) == 2


def test_bad_input_in_subprocess_has_no_traceback(files):
    result = run_cli("evaluate", "--real", files / "real.npy", "--fake", files / "nope.npz")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "no such file" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_help_documents_everything(capsys):
    assert main(["evaluate", "--help"]) == 0
    text = capsys.readouterr().out
    for word in (
        "--real",
        "--fake",
        "--json",
        "--plot",
        "--k-pr",
        "--k-dc",
        "--extractor",
        "--weights",
        "--device",
        "--num-samples",
        "--seed",
        "--no-prd",
        "--no-alpha-beta",
        "--quiet",
        "examples:",
        "inception_v3_google-0cc3c7bd.pth",
        "hub/checkpoints",
        "random-cnn",
    ):
        assert word in text, word
    assert main(["compare", "--help"]) == 0
    assert "--labels" in capsys.readouterr().out
    assert main(["--help"]) == 0
    assert "evaluate" in capsys.readouterr().out
