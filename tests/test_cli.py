"""The ``lightning-prd`` command: saved features and image folders end to end, JSON equal to the
functional results, one-line errors, ``--help``, ``compare``.

Most runs call ``main([...])`` in-process; a few run ``python -m lightning_prd.cli`` in a
subprocess to check exit codes and that no traceback reaches stderr.
"""

import importlib
import json
import os
import re
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


def expected_scores(
    real, fake, *, k_precision_recall=3, k_density_coverage=5, seed=0, clusters=5, runs=2, num_alphas=30
):
    """Every scalar the CLI reports, straight from lightning_prd.functional."""
    real, fake = torch.as_tensor(real), torch.as_tensor(fake)
    precision, recall = F.precision_recall(real, fake, k=k_precision_recall)
    density, coverage = F.density_coverage(real, fake, k=k_density_coverage)
    out = {
        "precision": precision,
        "recall": recall,
        "density": density,
        "coverage": coverage,
        "frechet_distance": F.frechet_distance(real, fake),
    }
    # on by default: probabilistic P&R (k = 4, a = 1.2) and PR-cover (default k, C = 3)
    out["p_precision"], out["p_recall"] = F.probabilistic_precision_recall(real, fake)
    out["precision_cover"], out["recall_cover"] = F.precision_recall_cover(real, fake)
    prd_curve, prd_f_beta = _functional("prd_curve", "prd"), _functional("prd_f_beta", "prd")
    if prd_curve is not None and prd_f_beta is not None:
        p, r = prd_curve(real, fake, num_clusters=clusters, num_runs=runs, seed=seed, enforce_balance="subsample")
        out["f_beta"], out["f_inv_beta"] = prd_f_beta(p, r)
    alpha_beta = _functional("alpha_precision_beta_recall", "alpha_beta")
    if alpha_beta is not None:
        ab = alpha_beta(real, fake, num_alphas=num_alphas, k=k_density_coverage)
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
                "--k-precision-recall",
                "2",
                "--k-density-coverage",
                "4",
                *FAST_PRD,
            ]
        )
        == 0
    )
    assert_scores_equal(
        json.loads(out.read_text())["scores"], expected_scores(real, fake, k_precision_recall=2, k_density_coverage=4)
    )
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
    kept = {"precision", "recall", "density", "coverage", "frechet_distance"}
    assert set(got["scores"]) == kept | {"p_precision", "p_recall", "precision_cover", "recall_cover"}
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
        (["--fake", "{d}/fake.npy", "--k-precision-recall", "70"], "at least"),
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
    assert main(["evaluate", "--real", "a.npy", "--fake", "b.npy", "--k-precision-recall", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "positive integer" in err and "Traceback" not in err
    assert main([]) == 2


def test_bad_input_in_subprocess_has_no_traceback(files):
    result = run_cli("evaluate", "--real", files / "real.npy", "--fake", files / "nope.npz")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "no such file" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


# ---------------------------------------------------------------------------- the bad-input matrix
# In-process runs captured with ``capfd`` (file descriptors 1 and 2), so anything numpy, torch or
# Pillow might write to stderr from C code would show up next to the one error line.
SMALL = np.random.default_rng(5).normal(size=(20, 4)).astype(np.float32)


def _assert_one_line(err, command, *fragments):
    """stderr is exactly one error line of ``command`` holding every fragment, and no traceback."""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"lightning-prd {command}: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


class _Allocates:
    def __reduce__(self):
        return (bytearray, (1 << 29,))


def _npy_header(shape):
    """A version 1.0 ``.npy`` header of float64 ``shape``."""
    text = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"
    text += " " * (63 - 10 - len(text)) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()


def _npy(array, **kw):
    return lambda path: np.save(path, array, **kw)


def _pt(obj):
    return lambda path: torch.save(obj, path)


def _npz(compressed=False, **arrays):
    return lambda path: (np.savez_compressed if compressed else np.savez)(path, **arrays)


def _raw(data):
    return lambda path: path.write_bytes(data)


def _cut(write, keep):
    """A file written by ``write``, cut to its first ``keep`` bytes (negative: all but the last)."""

    def cut(path):
        write(path)
        path.write_bytes(path.read_bytes()[:keep])

    return cut


def _flip_middle_byte(write):
    def flip(path):
        write(path)
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))

    return flip


def _folder(*files):
    def make(path):
        path.mkdir()
        (path / "sub.npy").mkdir()  # a folder named like a feature file is not an image either
        for name in files:
            if name.endswith(".png"):
                Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(path / name)
            else:
                (path / name).write_text("not an image")

    return make


def _with(value, row=3, col=1):
    out = SMALL.copy()
    out[row, col] = value
    return out


# case -> (file name, writer (None: the path does not exist), extra argv, fragments of the message);
# "{flag}" stands for the option the bad file is given to (--real or --fake)
BAD_FILES = {
    "missing file": ("nope.npy", None, [], ["no such file or directory"]),
    "missing folder": ("no_such_folder", None, [], ["no such file or directory"]),
    "empty folder": ("empty", _folder(), [], ["no PNG/JPEG images found"]),
    "folder without images": ("texts", _folder("a.txt", "b.csv"), [], ["no PNG/JPEG images found"]),
    "image folder without extractor": ("imgs", _folder("x.png"), [], ["is an image folder", "--extractor"]),
    "unknown extension": ("feats.csv", _raw(b"1,2\n"), [], ["unsupported file type '.csv'"]),
    "no extension": ("feats", _raw(b"1"), [], ["unsupported file type '(none)'"]),
    "empty .npy": ("empty.npy", _raw(b""), [], ["cannot read the file: the file is empty"]),
    "not a .npy": ("text.npy", _raw(b"not numpy at all"), [], ["cannot read the file: not a NumPy .npy file"]),
    "truncated .npy header": ("t.npy", _cut(_npy(SMALL), 60), [], ["cannot read the file: the file is truncated"]),
    "truncated .npy data": ("t.npy", _cut(_npy(SMALL), -40), [], ["cannot read the file: the file is truncated"]),
    ".npy of objects": ("obj.npy", _npy(np.array([{"a": 1}] * 20), allow_pickle=True), [], ["Python objects"]),
    ".npy of strings": ("str.npy", _npy(np.full((20, 4), "a")), [], ["unsupported dtype <U1"]),
    ".npy with a key": ("k.npy", _npy(SMALL), ["{flag}-key", "feats"], ["{flag}-key 'feats'", "one unnamed array"]),
    "not a .npz": ("text.npz", _raw(b"garbage" * 10), [], ["cannot read the file: not a NumPy .npz archive"]),
    "truncated .npz": ("t.npz", _cut(_npz(a=SMALL), 200), [], ["cannot read the file: the file is truncated"]),
    "corrupt .npz": ("c.npz", _flip_middle_byte(_npz(True, a=SMALL)), [], ["the file is truncated or corrupt"]),
    ".npz without arrays": ("zero.npz", _npz(), [], ["the .npz archive holds no arrays"]),
    ".npz without the key": (
        "two.npz",
        _npz(a=SMALL, b=SMALL),
        ["{flag}-key", "nope"],
        ["no array named 'nope' (arrays: a, b)"],
    ),
    ".npz first array not features": (
        "two.npz",
        _npz(a=SMALL[:, 0], b=SMALL),
        [],
        ["(array 'a', the first of several; choose one with {flag}-key)", "2-D", "(20,)"],
    ),
    "not a .pt": ("text.pt", _raw(b"garbage" * 10), [], ["cannot read the file: not a torch.save file"]),
    "truncated .pt": ("t.pt", _cut(_pt(torch.from_numpy(SMALL)), -30), [], ["the file is truncated or corrupt"]),
    "corrupt .pt archive": ("z.pt", _raw(b"PK\x03\x04 no zip"), [], ["cannot read the file: the file is truncated"]),
    "truncated legacy .pt": ("p.pt", _raw(b"\x80\x02junk"), [], ["cannot read the file: the file is truncated"]),
    "corrupt legacy .pt": ("p.pt", _raw(b"\x80\x02\x8a\x0a" + b"junk" * 8), [], ["not a torch.save file, or"]),
    ".pt dict without tensors": ("d.pt", _pt({"a": 1, "b": "x"}), [], ["the dict holds no tensor (keys: a, b)"]),
    ".pt list of strings": ("l.pt", _pt(["a", "b"]), [], ["expected a tensor", "the file holds a list"]),
    ".pt of a numpy array": ("n.pt", _pt(SMALL), [], ["not loaded for safety"]),
    ".pt calling bytearray(n)": (
        "a.pt",
        _pt({"x": _Allocates()}),
        [],
        ["not loaded for safety (__builtin__.bytearray)"],
    ),
    ".npy declaring more than it holds": (
        "big.npy",
        lambda path: path.write_bytes(_npy_header((1 << 24, 4)) + bytes(16)),
        [],
        ["declares an array of 536,870,912 bytes, but holds 16"],
    ),
    ".pt dict without the key": (
        "d.pt",
        _pt({"feats": torch.from_numpy(SMALL)}),
        ["{flag}-key", "nope"],
        ["no tensor named 'nope'"],
    ),
    ".pt dict first tensor a scalar": (
        "d.pt",
        _pt({"step": torch.tensor(3), "feats": torch.from_numpy(SMALL)}),
        [],
        ["(tensor 'step', the first of several; choose one with {flag}-key)", "at least one sample"],
    ),
    ".pt tensor with a key": ("t.pt", _pt(torch.from_numpy(SMALL)), ["{flag}-key", "f"], ["a single tensor"]),
    "1-D": ("one_d.npy", _npy(SMALL[:, 0]), [], ["expected a 2-D [N, D] feature array, but got shape (20,)"]),
    "3-D": ("three_d.npy", _npy(SMALL[:, :, None]), [], ["2-D", "but got shape (20, 4, 1)"]),
    "no samples": ("none.npy", _npy(SMALL[:0]), [], ["expected at least one sample, but got shape (0, 4)"]),
    "no features": ("flat.npy", _npy(SMALL[:, :0]), [], ["at least one feature, but got shape (20, 0)"]),
    "widths differ": ("wide.npy", _npy(np.ones((20, 6), np.float32)), [], ["features per sample, but --real has"]),
    "NaN": ("nan.npy", _npy(_with(np.nan)), [], ["1 of 20 samples hold NaN or Inf"]),
    "Inf": ("inf.npy", _npy(_with(np.inf)), [], ["1 of 20 samples hold NaN or Inf"]),
    "-Inf in float16": ("ninf.npy", _npy(_with(-np.inf).astype(np.float16)), [], ["NaN or Inf"]),
    "int64": ("i.npy", _npy((SMALL * 10).astype(np.int64)), [], ["floating-point features, but got dtype torch.int64"]),
    "uint8": ("u8.npy", _npy(np.zeros((20, 4), np.uint8)), [], ["floating-point features, but got dtype torch.uint8"]),
    "bool": ("b.pt", _pt(torch.from_numpy(SMALL > 0)), [], ["floating-point features, but got dtype torch.bool"]),
    "complex": ("c.npy", _npy(SMALL.astype(np.complex64)), [], ["real-valued features, but got dtype torch.complex64"]),
    "fewer than k + 1 samples": (
        "few.npy",
        _npy(SMALL[:3]),
        [],
        ["--k-precision-recall: expected at most 2, but got 3", "3 sampl"],
    ),
}


@pytest.mark.parametrize("flag", ["--real", "--fake"])
@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_file_matrix_is_one_line(tmp_path, capfd, case, flag):
    name, write, extra, fragments = BAD_FILES[case]
    good, bad = tmp_path / "good.npy", tmp_path / name
    np.save(good, SMALL)
    if write is not None:
        write(bad)
    paths = {"--real": str(good), "--fake": str(good), flag: str(bad)}
    argv = ["evaluate", "--real", paths["--real"], "--fake", paths["--fake"], *[a.format(flag=flag) for a in extra]]
    assert main([*argv, "--no-prd", "--no-alpha-beta", "-q"]) == 1
    out, err = capfd.readouterr()
    _assert_one_line(err, "evaluate", flag, str(bad), *[f.format(flag=flag) for f in fragments])
    assert out == ""


@pytest.mark.parametrize("case", ["not a .npy", "truncated .pt", "1-D", "NaN", "int64", "widths differ"])
def test_compare_names_the_bad_fake_set(tmp_path, capfd, case):
    name, write, _, fragments = BAD_FILES[case]
    good, bad = tmp_path / "good.npy", tmp_path / name
    np.save(good, SMALL)
    write(bad)
    argv = ["compare", "--real", str(good), "--fake", str(good), str(bad), "--labels", "ok", "bad", "--no-prd", "-q"]
    assert main(argv) == 1
    out, err = capfd.readouterr()
    _assert_one_line(err, "compare", "--fake", str(bad), *[f.format(flag="--fake") for f in fragments])
    assert out == ""


class _RunsCommand:
    def __reduce__(self):
        return (os.system, ("true",))


def test_a_hostile_weights_file_is_one_line_without_advice_to_unpickle(tmp_path, capfd):
    _write_images(tmp_path / "real", 4, seed=1)
    _write_images(tmp_path / "fake", 4, seed=2)
    weights = tmp_path / "weights.pth"
    torch.save({"Conv2d_1a_3x3.conv.weight": torch.zeros(1), "extra": _RunsCommand()}, weights)
    argv = ["evaluate", "--real", str(tmp_path / "real"), "--fake", str(tmp_path / "fake"), "--extractor"]
    assert main([*argv, "fid-inception", "--weights", str(weights), "--device", "cpu", "-q"]) == 1
    err = capfd.readouterr().err
    _assert_one_line(err, "evaluate", str(weights), f"`{os.system.__module__}.system`, which is refused")
    assert "weights_only" not in err and len(err) < 400, err


@pytest.mark.parametrize("flag", ["--real", "--fake"])
@pytest.mark.parametrize(
    ("case", "fragment"), [("not an image", "cannot identify image file"), ("truncated", "image file is truncated")]
)
def test_unreadable_image_names_flag_and_file(tmp_path, capfd, flag, case, fragment):
    _write_images(tmp_path / "good", 8, seed=1)
    bad_dir = tmp_path / "bad"
    _write_images(bad_dir, 8, seed=2)
    bad = bad_dir / "zz_bad.png"
    if case == "not an image":
        bad.write_bytes(b"not a png")
    else:
        data = (bad_dir / "img_000.png").read_bytes()
        bad.write_bytes(data[: len(data) // 2])
    paths = {"--real": str(tmp_path / "good"), "--fake": str(tmp_path / "good"), flag: str(bad_dir)}
    argv = ["evaluate", "--real", paths["--real"], "--fake", paths["--fake"], "--extractor", "random-cnn"]
    assert main([*argv, "--no-prd", "--no-alpha-beta", "-q"]) == 1
    _assert_one_line(capfd.readouterr().err, "evaluate", f"{flag}: cannot read image", str(bad), fragment)


@pytest.mark.parametrize(
    ("fake", "extra", "fragments"),
    [
        (
            "real.npy",
            ["--k-precision-recall", "20"],
            ["--k-precision-recall: expected at most 19, but got 20", "--real", "holds 20 samples"],
        ),
        (
            "real.npy",
            ["--k-density-coverage", "20"],
            ["--k-density-coverage: expected at most 19, but got 20", "--real", "holds 20 samples"],
        ),
        (
            "real.npy",
            ["--num-samples", "3"],
            ["--k-precision-recall: expected at most 2, but got 3", "3 samples (--num-samples 3)"],
        ),
        (
            "small.npy",
            ["--k-precision-recall", "5"],
            ["--k-precision-recall: expected at most 4, but got 5", "--fake", "small.npy"],
        ),
        ("real.npy", ["--prd-clusters", "41"], ["--prd-clusters: expected at most 40, but got 41", "N = 20, M = 20"]),
        (
            "small.npy",
            ["--k-precision-recall", "2"],
            ["--prd-clusters: expected at most 10, but got 20", "M = 5", "small.npy"],
        ),
    ],
)
def test_option_too_large_for_the_data(tmp_path, capfd, fake, extra, fragments):
    np.save(tmp_path / "real.npy", SMALL)
    np.save(tmp_path / "small.npy", SMALL[:5])
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / fake), *extra]
    assert main([*argv, *FAST_PRD[2:], "--no-alpha-beta", "-q"]) == 1  # PRD on, default clusters unless given
    out, err = capfd.readouterr()
    _assert_one_line(err, "evaluate", *fragments)
    assert out == ""


def test_options_at_their_limits_are_accepted(tmp_path):
    """The checks above are exact: k = N - 1, M - 1 and 2 min(N, M) clusters still run; k of
    density/coverage may exceed M (only real radii use it); the largest seed works."""
    np.save(tmp_path / "real.npy", SMALL)
    np.save(tmp_path / "small.npy", SMALL[:5])
    out = tmp_path / "o.json"
    base = ["evaluate", "--real", str(tmp_path / "real.npy"), "--json", str(out), "-q", "--prd-runs", "1"]
    fake = str(tmp_path / "real.npy")
    assert (
        main(
            [*base, "--fake", fake, "--k-precision-recall", "19", "--k-density-coverage", "19", "--prd-clusters", "40"]
        )
        == 0
    )
    small = str(tmp_path / "small.npy")
    assert (
        main(
            [*base, "--fake", small, "--k-precision-recall", "4", "--k-density-coverage", "10", "--prd-clusters", "10"]
        )
        == 0
    )
    assert main([*base, "--fake", fake, "--seed", str(2**63 - 1), "--num-samples", "15", "--prd-clusters", "5"]) == 0
    assert json.loads(out.read_text())["settings"]["seed"] == 2**63 - 1


@pytest.mark.parametrize("command", ["evaluate", "compare"])
@pytest.mark.parametrize(
    ("option", "value", "what"),
    [
        ("--k-precision-recall", "0", "a positive integer"),
        ("--k-precision-recall", "-1", "a positive integer"),
        ("--k-precision-recall", "abc", "a positive integer"),
        ("--k-precision-recall", "2.5", "a positive integer"),
        ("--k-precision-recall", "", "a positive integer"),
        ("--k-density-coverage", "0", "a positive integer"),
        ("--prd-clusters", "0", "a positive integer"),
        ("--prd-runs", "0", "an integer in [1, 10000]"),
        ("--prd-runs", "10001", "an integer in [1, 10000]"),
        ("--num-alphas", "1", "an integer in [2, 1000000]"),
        ("--num-alphas", "-3", "an integer in [2, 1000000]"),
        ("--seed", "-1", "an integer in [0, 9223372036854775807]"),
        ("--seed", str(2**63), "an integer in [0, 9223372036854775807]"),
        ("--num-samples", "0", "a positive integer"),
        ("--batch-size", "1e3", "a positive integer"),
    ],
)
def test_invalid_numeric_option_is_a_usage_error(capfd, command, option, value, what):
    assert main([command, "--real", "a.npy", "--fake", "b.npy", option, value]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{command}: error: argument {option}: expected {what}, but got {value!r}" in err


# ---------------------------------------------------------------------------- outputs
def _no_work(*args, **kwargs):
    pytest.fail("the inputs were loaded although an output cannot be written")


@pytest.mark.parametrize("flag", ["--json", "--plot"])
@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        ("a directory", "expected a file path, but this is a directory"),
        ("trailing slash", "expected a file path, but this is a directory"),
        ("inside a file", "is not a directory"),
        ("an input file", "refusing to overwrite an input file"),
        ("empty", "expected a file path, but got ''"),
    ],
)
def test_unwritable_output_fails_before_any_work(tmp_path, capfd, monkeypatch, flag, case, fragment):
    np.save(tmp_path / "real.npy", SMALL)
    (tmp_path / "folder").mkdir()
    target = {
        "a directory": str(tmp_path / "folder"),
        "trailing slash": str(tmp_path / "new_folder") + os.sep,
        "inside a file": str(tmp_path / "real.npy" / "out.x"),
        "an input file": str(tmp_path / "real.npy"),
        "empty": "",
    }[case]
    monkeypatch.setattr("lightning_prd.cli.evaluate.load_set", _no_work)
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "real.npy"), flag, target]
    assert main(argv) == 1
    out, err = capfd.readouterr()
    _assert_one_line(err, "evaluate", flag, target, fragment)
    assert out == "" and (tmp_path / "real.npy").read_bytes()[:6] == b"\x93NUMPY"


def test_plot_format_and_clashes_are_checked_first(tmp_path, capfd, monkeypatch):
    np.save(tmp_path / "real.npy", SMALL)
    monkeypatch.setattr("lightning_prd.cli.evaluate.load_set", _no_work)
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "real.npy")]
    assert main([*argv, "--plot", str(tmp_path / "curves.xyz")]) == 1
    _assert_one_line(capfd.readouterr().err, "evaluate", "--plot", "curves.xyz", "unsupported image format '.xyz'")
    same = str(tmp_path / "same")
    assert main([*argv, "--json", same, "--plot", same]) == 1
    _assert_one_line(capfd.readouterr().err, "evaluate", f"--plot {same}", "refusing to overwrite the --json file")


@pytest.mark.parametrize("flag", ["--json", "--plot"])
def test_write_failure_is_one_line(tmp_path, capfd, monkeypatch, flag):
    """When writing fails anyway (the early check cannot foresee everything), it is still one line."""
    np.save(tmp_path / "real.npy", SMALL)
    (tmp_path / "folder").mkdir()
    monkeypatch.setattr("lightning_prd.cli.evaluate._check_outputs", lambda *a: None)
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "real.npy")]
    assert main([*argv, flag, str(tmp_path / "folder"), "--no-prd", "--no-alpha-beta", "-q"]) == 1
    _assert_one_line(capfd.readouterr().err, "evaluate", f"{flag} {tmp_path / 'folder'}: cannot write the file")


def test_plot_without_suffix_is_a_png_at_that_path(tmp_path):
    np.save(tmp_path / "real.npy", SMALL)
    out = tmp_path / "new" / "curves"
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "real.npy"), "--plot", str(out)]
    assert main([*argv, "--no-prd", "--no-alpha-beta", "-q"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (tmp_path / "new" / "curves.png").exists()


def _same_file_as(kind, target, where):
    """A new name for the file ``target``: a hard link, a symbolic link, or another spelling of its path."""
    if kind == "hard link":
        os.link(target, where)
        return str(where)
    if kind == "symlink":
        os.symlink(target, where)
        return str(where)
    return str(target.parent / "." / ".." / target.parent.name / target.name)  # "other spelling"


@pytest.mark.parametrize("flag", ["--json", "--plot"])
@pytest.mark.parametrize("kind", ["hard link", "symlink", "other spelling"])
def test_output_that_is_an_input_under_another_name_is_refused(tmp_path, capfd, monkeypatch, flag, kind):
    np.save(tmp_path / "real.npy", SMALL)
    np.save(tmp_path / "fake.npy", SMALL[::-1] + 0.1)
    for role in ("real", "fake"):
        target = _same_file_as(kind, tmp_path / f"{role}.npy", tmp_path / f"other_{role}.npy")
        before = (tmp_path / f"{role}.npy").read_bytes()
        monkeypatch.setattr("lightning_prd.cli.evaluate.load_set", _no_work)
        argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), flag, target]
        assert main(argv) == 1
        out, err = capfd.readouterr()
        _assert_one_line(err, "evaluate", f"{flag} {target}", f"refusing to overwrite an input file (--{role}")
        assert out == "" and (tmp_path / f"{role}.npy").read_bytes() == before


@pytest.fixture
def image_folders(tmp_path):
    real = _write_images(tmp_path / "imgs_r", 12, seed=1)
    _write_images(tmp_path / "imgs_f", 12, seed=2)
    argv = ["evaluate", "--real", str(tmp_path / "imgs_r"), "--fake", str(tmp_path / "imgs_f")]
    return tmp_path, real, [*argv, "--extractor", "random-cnn", "--no-prd", "--no-alpha-beta", "-q"]


@pytest.mark.parametrize("flag", ["--json", "--plot"])
@pytest.mark.parametrize("case", ["image itself", "image in a subfolder", "hard link", "symlink"])
def test_output_that_is_an_image_of_an_input_folder_is_refused(image_folders, capfd, monkeypatch, flag, case):
    tmp_path, real, argv = image_folders
    image = next(p for p in real if p.parent.name == "a") if case == "image in a subfolder" else real[0]
    if case in ("hard link", "symlink"):
        target = _same_file_as(case, image, tmp_path / "curves.png")
    else:
        target = str(image)
    before = image.read_bytes()
    monkeypatch.setattr("lightning_prd.cli.evaluate.load_set", _no_work)
    assert main([*argv, flag, target]) == 1
    out, err = capfd.readouterr()
    _assert_one_line(err, "evaluate", f"{flag} {target}", "refusing to overwrite an input file (an image of --real")
    assert out == "" and image.read_bytes() == before


@pytest.mark.parametrize("flag", ["--json", "--plot"])
@pytest.mark.parametrize("name", ["new.png", "deeper/new.JPG", "a/new.jpeg"])
def test_new_image_inside_an_input_folder_is_refused(image_folders, capfd, monkeypatch, flag, name):
    """It would be read as one more real (or fake) sample next time."""
    tmp_path, _, argv = image_folders
    monkeypatch.setattr("lightning_prd.cli.evaluate.load_set", _no_work)
    for role in ("r", "f"):
        target = str(tmp_path / f"imgs_{role}" / name)
        assert main([*argv, flag, target]) == 1
        _assert_one_line(
            capfd.readouterr().err,
            "evaluate",
            f"{flag} {target}",
            f"refusing to write an image into the input folder --{'real' if role == 'r' else 'fake'}",
        )
        assert not os.path.exists(target)
    os.symlink(tmp_path / "imgs_r", tmp_path / "link_to_real")  # the folder reached through a link
    target = str(tmp_path / "link_to_real" / name)
    assert main([*argv, flag, target]) == 1
    _assert_one_line(capfd.readouterr().err, "evaluate", "refusing to write an image into the input folder --real")


def test_outputs_next_to_input_images_that_are_not_images_are_written(image_folders):
    tmp_path, _, argv = image_folders
    out, plot = tmp_path / "imgs_r" / "scores.json", tmp_path / "curves.png"
    assert main([*argv, "--json", str(out), "--plot", str(plot)]) == 0
    assert json.loads(out.read_text())["real"]["num_samples"] == 12  # the JSON is not an image: not an input
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--fakes", "f.npy"], "unrecognized argument --fakes; did you mean --fake?"),
        (["--fake", "f.npy", "--jsn", "o.json"], "unrecognized argument --jsn; did you mean --json?"),
        (
            ["--fake", "f.npy", "--k_precision_recall=3"],
            "unrecognized argument --k_precision_recall; did you mean --k-precision-recall?",
        ),
        (["--fake", "f.npy", "--zzz"], "unrecognized argument --zzz (see --help)"),
        (
            ["--fakes", "f.npy", "--plott", "p.png"],
            "unrecognized arguments --fakes (did you mean --fake?), --plott (did you mean --plot?)",
        ),
    ],
)
def test_unknown_flag_is_named_with_the_closest_one(capfd, extra, message):
    assert main(["evaluate", "--real", "r.npy", *extra]) == 2
    out, err = capfd.readouterr()
    _assert_one_line(err, "evaluate", message)
    assert out == "" and "required" not in err


def test_unknown_flag_in_subprocess_exits_2(files):
    result = run_cli("compare", "--real", files / "real.npy", "--fakes", files / "fake.npy")
    assert result.returncode == 2 and result.stdout == ""
    want = "lightning-prd compare: error: unrecognized argument --fakes; did you mean --fake? (see --help)\n"
    assert result.stderr == want


def test_direction_column_is_right_for_every_score(files, capfd):
    argv = ["evaluate", "--real", str(files / "real.npy"), "--fake", str(files / "fake.npy"), *FAST_PRD, "-q"]
    assert main(argv) == 0
    rows = {line.split()[0]: line.split(None, 2)[2] for line in capfd.readouterr().out.splitlines()[-len(SCORES_ALL) :]}
    assert set(rows) == set(SCORES_ALL)
    want = {name: "higher" for name in SCORES_ALL}
    want.update(density="1 is ideal", frechet_distance="lower")
    assert rows == want


def test_compare_rows_say_which_way_is_better_and_which_set_is_best(files, arrays, capfd):
    real, fake = arrays
    np.save(files / "narrow.npy", 0.4 * fake)
    np.save(files / "wide.npy", 1.6 * fake + 0.3)
    out = files / "cmp.json"
    argv = ["compare", "--real", str(files / "real.npy"), "--fake", str(files / "fake.npy"), str(files / "narrow.npy")]
    assert main([*argv, str(files / "wide.npy"), "--json", str(out), *FAST_PRD, "-q"]) == 0
    lines = capfd.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("fake ")).split()
    ways = re.findall(r"higher|lower|1 is ideal", next(line for line in lines if line.startswith("(better)")))
    better = dict(zip(header[2:], ways))
    best = dict(zip(header[2:], next(line for line in lines if line.startswith("(best)")).split()[1:]))
    results = json.loads(out.read_text())["results"]
    for name in SCORES_ALL:
        values = [r["scores"][name] for r in results]
        if name == "density":
            want_best, want_way = int(np.argmin(np.abs(np.array(values) - 1.0))), "1 is ideal"
        elif name == "frechet_distance":
            want_best, want_way = int(np.argmin(values)), "lower"
        else:
            want_best, want_way = int(np.argmax(values)), "higher"
        assert best[name] == results[want_best]["label"], name
        assert better[name] == want_way, name


# ---------------------------------------------------------------------------- encodings of the same features
def _quantised(x, dtype):
    return torch.from_numpy(x).to(dtype).float().numpy()


ENCODINGS = {  # name -> (the float32 values it stands for, writer, suffix)
    "float16 .npy": (lambda x: _quantised(x, torch.float16), lambda x, p: np.save(p, x.astype(np.float16)), ".npy"),
    "float16 .npz": (
        lambda x: _quantised(x, torch.float16),
        lambda x, p: np.savez(p, feats=x.astype(np.float16)),
        ".npz",
    ),
    "float16 .pt": (
        lambda x: _quantised(x, torch.float16),
        lambda x, p: torch.save(torch.from_numpy(x).half(), p),
        ".pt",
    ),
    "bfloat16 .pt": (
        lambda x: _quantised(x, torch.bfloat16),
        lambda x, p: torch.save({"feats": torch.from_numpy(x).bfloat16()}, p),
        ".pt",
    ),
    "big-endian .npy": (lambda x: x, lambda x, p: np.save(p, x.astype(">f4")), ".npy"),
    "sparse .pt": (lambda x: x, lambda x, p: torch.save(torch.from_numpy(x).to_sparse(), p), ".pt"),
}


@pytest.mark.parametrize("flag", ["--real", "--fake"])
@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_other_encodings_give_exactly_the_float32_scores(tmp_path, encoding, flag):
    """float16/bfloat16 are upcast to float32 (as the functional core does), so every score equals
    the one of the same values saved as float32; big-endian and sparse files read as the same array."""
    values, write, suffix = ENCODINGS[encoding]
    gen = np.random.default_rng(11)
    sets = {"--real": gen.normal(size=(24, 4)), "--fake": gen.normal(size=(20, 4))}
    sets = {f: x.astype(np.float32) for f, x in sets.items()}
    sets[flag] = values(sets[flag])
    assert sets[flag].dtype == np.float32
    plain = {f: tmp_path / f"{f[2:]}.npy" for f in sets}
    for f, x in sets.items():
        np.save(plain[f], x)
    encoded = tmp_path / f"encoded{suffix}"
    write(sets[flag], encoded)
    common = [*FAST_PRD, "--num-alphas", "8", "-q"]

    def scores(paths, name):
        out = tmp_path / f"{name}.json"
        argv = ["evaluate", "--real", str(paths["--real"]), "--fake", str(paths["--fake"]), "--json", str(out)]
        assert main([*argv, *common]) == 0
        return json.loads(out.read_text())

    want = scores(plain, "float32")
    got = scores({**plain, flag: encoded}, "encoded")
    assert got["scores"] == want["scores"]  # exactly, not approximately
    assert set(got["scores"]) == set(SCORES_ALL) and got["num_features"] == 4
    assert got[flag[2:]]["key"] == ("feats" if encoding in ("float16 .npz", "bfloat16 .pt") else None)


SCORES_ALL = (
    "precision",
    "recall",
    "density",
    "coverage",
    "p_precision",
    "p_recall",
    "precision_cover",
    "recall_cover",
    "f_beta",
    "f_inv_beta",
    "alpha_precision",
    "beta_recall",
    "authenticity",
    "frechet_distance",
)


def test_npz_with_several_arrays_uses_the_first_and_says_which(tmp_path, capfd):
    np.savez(tmp_path / "both.npz", real=SMALL, fake=SMALL[::-1] + 0.1)
    out = tmp_path / "o.json"
    both = str(tmp_path / "both.npz")
    argv = ["evaluate", "--real", both, "--fake", both, "--fake-key", "fake"]
    assert main([*argv, "--json", str(out), "--no-prd", "--no-alpha-beta", "-q"]) == 0
    payload = json.loads(out.read_text())
    assert payload["real"]["key"] == "real" and payload["fake"]["key"] == "fake"
    text = capfd.readouterr().out
    assert "both.npz [real]" in text and "both.npz [fake]" in text


def test_same_file_without_keys_is_refused_rather_than_scored_against_itself(tmp_path, capfd):
    np.savez(tmp_path / "both.npz", real=SMALL, fake=SMALL[::-1] + 0.1)
    both = str(tmp_path / "both.npz")
    assert main(["evaluate", "--real", both, "--fake", both, "--no-prd", "--no-alpha-beta", "-q"]) == 1
    err = capfd.readouterr().err
    assert "the same entry 'real' as --real" in err and "--real-key and --fake-key" in err
    # naming the same entry on purpose (a set against itself) is allowed
    out = tmp_path / "o.json"
    argv = ["evaluate", "--real", both, "--fake", both, "--key", "real", "--json", str(out), "--no-prd", "-q"]
    assert main([*argv, "--no-alpha-beta"]) == 0
    assert json.loads(out.read_text())["scores"]["precision"] == 1.0


def test_an_empty_key_names_the_entry_called_empty(tmp_path):
    np.savez(tmp_path / "both.npz", **{"real": SMALL, "": SMALL[:12]})
    np.save(tmp_path / "fake.npy", SMALL[::-1] + 0.1)
    out = tmp_path / "o.json"
    argv = ["evaluate", "--real", str(tmp_path / "both.npz"), "--real-key", "", "--fake", str(tmp_path / "fake.npy")]
    assert main([*argv, "--json", str(out), "--no-prd", "--no-alpha-beta", "-q"]) == 0
    payload = json.loads(out.read_text())
    assert payload["real"]["key"] == "" and payload["real"]["num_samples"] == 12


def test_float8_pt_is_upcast_and_a_meta_tensor_is_refused_naming_the_flag(tmp_path, capfd):
    kind = getattr(torch, "float8_e4m3fn", None)
    np.save(tmp_path / "real.npy", SMALL)
    real = str(tmp_path / "real.npy")
    if kind is not None:
        eight = torch.as_tensor(SMALL[::-1] + 0.1).to(kind)
        torch.save(eight, tmp_path / "f8.pt")
        torch.save(eight.float(), tmp_path / "f32.pt")
        outs = []
        for name in ("f8", "f32"):
            out = tmp_path / f"{name}.json"
            argv = ["evaluate", "--real", real, "--fake", str(tmp_path / f"{name}.pt"), "--json", str(out)]
            assert main([*argv, "--no-prd", "--no-alpha-beta", "-q"]) == 0
            outs.append(json.loads(out.read_text())["scores"])
        assert outs[0] == outs[1]
    torch.save(torch.empty(30, SMALL.shape[1], device="meta"), tmp_path / "meta.pt")
    capfd.readouterr()
    assert main(["evaluate", "--real", real, "--fake", str(tmp_path / "meta.pt"), "-q"]) == 1
    err = capfd.readouterr().err
    assert "--fake" in err and "meta.pt: the tensor is on the meta device" in err and "Traceback" not in err


def test_help_documents_everything(capfd):
    assert main(["evaluate", "--help"]) == 0
    text = capfd.readouterr().out
    for word in (
        "--real",
        "--fake",
        "--json",
        "--plot",
        "--k-precision-recall",
        "--k-density-coverage",
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
    assert "--labels" in capfd.readouterr().out
    assert main(["--help"]) == 0
    assert "evaluate" in capfd.readouterr().out
