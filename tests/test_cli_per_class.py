"""``lightning-prd evaluate --real-labels PATH --fake-labels PATH``: the per-class table and ``--json`` equal
``per_class_metrics`` (and the plain functions on each class's rows), a dropped class shows coverage 0 and
is named, and bad labels are one line naming the flag and the value."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from lightning_prd.cli import main
from lightning_prd.cli.inputs import _subsample_rows
from lightning_prd.functional import density_coverage, frechet_distance, per_class_metrics, precision_recall

QUICK = ["--no-prd", "--no-alpha-beta", "-q"]
SCORES = ("precision", "recall", "density", "coverage", "frechet_distance")
CENTRES = np.array([[0.0] * 16, [8.0] + [0.0] * 15, [0.0, 8.0] + [0.0] * 14], dtype=np.float32)


@pytest.fixture
def toy(tmp_path):
    """Three classes of 16-D features; the model never generates class 2."""
    gen = np.random.default_rng(0)
    real_labels = np.arange(200) % 3
    fake_labels = np.arange(200) % 2
    real = (CENTRES[real_labels] + gen.normal(size=(200, 16))).astype(np.float32)
    fake = (CENTRES[fake_labels] + 1.2 * gen.normal(size=(200, 16))).astype(np.float32)
    np.save(tmp_path / "real.npy", real)
    np.save(tmp_path / "fake.npy", fake)
    np.save(tmp_path / "real_y.npy", real_labels)
    np.savetxt(tmp_path / "fake_y.txt", fake_labels, fmt="%d")
    return tmp_path, real, fake, real_labels, fake_labels


def _argv(path, real_labels="real_y.npy", fake_labels="fake_y.txt", *extra):
    argv = ["evaluate", "--real", str(path / "real.npy"), "--fake", str(path / "fake.npy"), *QUICK, *extra]
    return [*argv, "--real-labels", str(path / real_labels), "--fake-labels", str(path / fake_labels)]


def _json(path, argv):
    out = path / "scores.json"
    assert main([*argv, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def _same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-12)


def test_per_class_columns_equal_per_class_metrics(toy, capfd):
    path, real, fake, real_labels, fake_labels = toy
    got = _json(path, _argv(path))["per_class"]
    want = per_class_metrics(
        torch.from_numpy(real),
        torch.from_numpy(fake),
        real_labels=torch.from_numpy(real_labels),
        fake_labels=torch.from_numpy(fake_labels),
    )
    assert got["classes"] == want["classes"].tolist() == [0, 1, 2]
    assert got["num_real"] == want["num_real_per_class"].tolist() and got["num_fake"] == [100, 100, 0]
    for score in SCORES:
        assert all(_same(a, b) for a, b in zip(got["scores"][score], want[f"{score}_per_class"].tolist())), score
        assert _same(got["mean"][score], float(want[f"{score}_mean"])), score
    assert got["lowest_coverage_class"] == int(want["lowest_coverage_class"]) == 2
    assert got["coverage_min"] == 0.0 and got["scores"]["coverage"][2] == 0.0 and got["scores"]["recall"][2] == 0.0
    assert math.isnan(got["scores"]["precision"][2])  # no generated sample of class 2
    assert got["real_labels"]["path"] == str(path / "real_y.npy") and got["fake_labels"]["num_labels"] == 200
    out = capfd.readouterr().out
    assert "lowest coverage: class 2, coverage 0.0000 (N = 66, M = 0)" in out
    table = out[out.index("per class") :].splitlines()
    header = next(line for line in table if line.startswith("class")).split()
    assert header == ["class", "N", "M", *SCORES]
    row = next(line for line in table if line.startswith("2 ")).split()
    assert row[:3] == ["2", "66", "0"] and row[4] == "0.0000" and row[6] == "0.0000" and row[3] == "nan"


def test_each_class_equals_the_plain_functions_on_its_rows(toy):
    """An independent check: class c's scores are those of the plain functions on the rows labelled c."""
    path, real, fake, real_labels, fake_labels = toy
    got = _json(path, _argv(path))["per_class"]
    for c in (0, 1):
        r, f = torch.from_numpy(real[real_labels == c]), torch.from_numpy(fake[fake_labels == c])
        precision, recall = precision_recall(r, f, k=3)
        density, coverage = density_coverage(r, f, k=5)
        want = dict(precision=precision, recall=recall, density=density, coverage=coverage)
        want["frechet_distance"] = frechet_distance(r, f)
        for score, value in want.items():
            assert got["scores"][score][c] == pytest.approx(float(value), rel=1e-6), (c, score)


def test_the_overall_scores_do_not_change(toy):
    path, *_ = toy
    argv = ["evaluate", "--real", str(path / "real.npy"), "--fake", str(path / "fake.npy"), *QUICK]
    plain = _json(path, argv)
    labelled = _json(path, _argv(path))
    assert labelled["scores"] == plain["scores"] and "per_class" not in plain
    assert labelled["settings"]["per_class"] is True and plain["settings"]["per_class"] is False


def test_every_labels_form_gives_the_same_table(toy):
    path, real, _, real_labels, fake_labels = toy
    want = _json(path, _argv(path))["per_class"]["scores"]
    np.savetxt(path / "real_y.txt", real_labels, fmt="%d", header="one class per sample")  # '#' comment line
    torch.save(torch.from_numpy(real_labels).to(torch.int32), path / "real_y.pt")
    torch.save({"labels": torch.from_numpy(real_labels), "other": torch.zeros(3)}, path / "real_dict.pt")
    np.savez(path / "real_y.npz", y=real_labels.astype(np.uint8))  # a single array, of any name and width
    np.save(path / "fake_y.npy", fake_labels)
    for real_file in ("real_y.txt", "real_y.pt", "real_dict.pt", "real_y.npz"):
        assert _json(path, _argv(path, real_file, "fake_y.npy"))["per_class"]["scores"] == want, real_file
    # one .npz holding the features and their labels serves --real (with --real-key) and --real-labels
    np.savez(path / "labelled.npz", features=real, labels=real_labels)
    argv = _argv(path, "labelled.npz", "fake_y.npy")
    argv[argv.index(str(path / "real.npy"))] = str(path / "labelled.npz")
    got = _json(path, [*argv, "--real-key", "features"])["per_class"]
    assert got["scores"] == want and got["real_labels"]["key"] == "labels"


def test_num_samples_keeps_the_labels_of_the_rows_it_keeps(toy):
    path, real, fake, real_labels, fake_labels = toy
    got = _json(path, _argv(path, "real_y.npy", "fake_y.txt", "--num-samples", "150", "--seed", "3"))["per_class"]
    rows = _subsample_rows(200, 150, 3)
    want = per_class_metrics(
        torch.from_numpy(real)[rows],
        torch.from_numpy(fake)[rows],
        real_labels=torch.from_numpy(real_labels)[rows],
        fake_labels=torch.from_numpy(fake_labels)[rows],
    )
    assert sum(got["num_real"]) == 150 == sum(got["num_fake"])
    for score in SCORES:
        assert all(_same(a, b) for a, b in zip(got["scores"][score], want[f"{score}_per_class"].tolist())), score
    # features and labels stayed paired: each class's generated samples sit at its centre (a small distance)
    assert max(got["scores"]["frechet_distance"][:2]) < 10


def _one_line(capfd, *fragments):
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def _write(path, name, value):
    target = path / name
    if callable(value):
        value(target)
    elif isinstance(value, str):
        target.write_text(value)
    else:
        np.save(target, value)
    return name


BAD_LABELS = {  # file -> (how it is written, fragments of the error)
    "short.npy": (np.arange(150) % 3, ["150 labels, but --real", "real.npy holds 200 samples"]),
    "float.npy": (np.zeros(200), ["expected integer class labels, but got dtype float64", ".astype(int)"]),
    "names.npy": (np.array(["cat", "dog"] * 100), ["expected integer class labels", "map class names to integers"]),
    "flags.npy": (np.zeros(200, dtype=bool), ["expected integer class labels, but got dtype bool"]),
    "column.npy": (np.zeros((200, 1), dtype=np.int64), ["expected a 1-D array", "shape (200, 1)"]),
    "words.txt": ("0\n1\ncat\n", ["line 3: expected integer class labels, but got 'cat'"]),
    "halves.txt": ("0.5\n", ["line 1", "'0.5'"]),
    "empty.txt": ("# nothing\n", ["holds none"]),
    "cut.npy": (lambda p: p.write_bytes(b"\x93NUMPY\x01\x00v\x00{'descr'"), ["cannot read the file", "truncated"]),
    "two.npz": (lambda p: np.savez(p, a=np.arange(200), b=np.arange(200)), ["an entry named 'labels'", "a, b"]),
    "labels.csv": ("0\n", ["unsupported file type '.csv'", ".txt"]),
    "floats.pt": (lambda p: torch.save(torch.zeros(200), p), ["expected integer class labels, but got dtype float32"]),
}


@pytest.mark.parametrize("name", list(BAD_LABELS))
def test_bad_labels_are_one_line_naming_the_flag_and_the_file(toy, capfd, name):
    path, *_ = toy
    value, fragments = BAD_LABELS[name]
    _write(path, name, value)
    assert main(_argv(path, name)) == 1
    _one_line(capfd, "lightning-prd evaluate: error: --real-labels", name, *fragments)


def test_missing_partner_missing_file_and_fake_length(toy, capfd, monkeypatch):
    path, *_ = toy
    base = ["evaluate", "--real", str(path / "real.npy"), "--fake", str(path / "fake.npy"), *QUICK]
    assert main([*base, "--real-labels", str(path / "real_y.npy")]) == 1
    _one_line(capfd, "--real-labels", "real_y.npy: needs --fake-labels PATH")
    assert main([*base, "--fake-labels", str(path / "fake_y.txt")]) == 1
    _one_line(capfd, "--fake-labels", "fake_y.txt: needs --real-labels PATH")
    assert main(_argv(path, "real_y.npy", "nowhere.txt")) == 1
    _one_line(capfd, "--fake-labels", "nowhere.txt: no such file or directory")
    assert main([*base, "--only", "frechet", *_argv(path)[len(base) :]]) == 1
    _one_line(capfd, "--only frechet", "--real-labels, --fake-labels asks for more")
    np.save(path / "fake_short.npy", np.zeros(10, dtype=np.int64))
    assert main(_argv(path, "real_y.npy", "fake_short.npy")) == 1
    _one_line(capfd, "--fake-labels", "fake_short.npy: 10 labels, but --fake", "fake.npy holds 200 samples")
    before = (path / "real_y.npy").read_bytes()
    assert main([*_argv(path), "--json", str(path / "real_y.npy")]) == 1  # an input is never overwritten
    _one_line(capfd, "--json", "refusing to overwrite an input file (--real-labels")
    assert (path / "real_y.npy").read_bytes() == before


def test_labels_are_evaluate_flags(capfd):
    assert main(["evaluate", "--help"]) == 0
    text = capfd.readouterr().out
    for word in ("--real-labels PATH", "--fake-labels PATH", "lowest coverage", "--real-labels real_y.npy"):
        assert word in text, word
    assert main(["compare", "--real", "r.npy", "--fake", "f.npy", "--real-labels", "y.npy"]) == 2
    assert "unrecognized argument --real-labels" in capfd.readouterr().err
