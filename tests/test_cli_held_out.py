"""``lightning-prd evaluate/compare --fd-infinity --data-copying --fld --test PATH``: the columns equal the
functional results on the same arrays, the held-out set is read as ``--real`` is, and every misuse is
one line naming the flag and the value, before any work."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from lightning_prd.cli import main
from lightning_prd.features import write_features
from lightning_prd.functional import (
    authenticity_percentage,
    data_copying,
    feature_likelihood_divergence,
    frechet_distance_infinity,
)

QUICK = ["--no-prd", "-q"]
FLD_KEYS = ("fld", "fld_train", "fld_gap", "fld_nll_test", "fld_nll_train", "fld_nll_baseline")
HELD_OUT_KEYS = ("frechet_distance_infinity", "ct", "ct_cells", "authenticity_percentage", *FLD_KEYS)


@pytest.fixture
def sets(tmp_path):
    """A training set, a held-out set from the same law, a fresh model and one that copies its training set."""
    gen = np.random.default_rng(0)
    real = gen.normal(size=(200, 16)).astype(np.float32)
    test = gen.normal(size=(200, 16)).astype(np.float32)
    fresh = (1.1 * gen.normal(size=(200, 16)) + 0.1).astype(np.float32)
    copies = (real + 1e-3 * gen.normal(size=real.shape)).astype(np.float32)
    arrays = dict(real=real, test=test, fresh=fresh, copies=copies)
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
    return tmp_path, {name: torch.from_numpy(a) for name, a in arrays.items()}


def _argv(path, fake="fresh", *extra):
    return ["evaluate", "--real", str(path / "real.npy"), "--fake", str(path / f"{fake}.npy"), *QUICK, *extra]


def _json(path, *argv):
    out = path / "scores.json"
    assert main([*argv, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def _rows(text):
    """``score -> (value, better)`` of the printed table."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+)\s+(\S+)\s+(higher|lower|1 is ideal|0 is ideal|-)$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def _one_line(capfd, *fragments):
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


# ---------------------------------------------------------------------------- values
@pytest.mark.parametrize("seed", [0, 5])
def test_columns_equal_the_functions_on_the_same_arrays(sets, capfd, seed):
    path, x = sets
    argv = _argv(path, "fresh", "--test", str(path / "test.npy"), "--fd-infinity", "--data-copying", "--fld")
    got = _json(path, *argv, "--seed", str(seed))
    scores = got["scores"]
    real, fake, test = x["real"], x["fresh"], x["test"]
    want = {
        "frechet_distance_infinity": float(
            frechet_distance_infinity(real, fake, seed=seed)["frechet_distance_infinity"]
        )
    }
    ct = data_copying(real, fake, test, seed=seed)
    want.update(ct=float(ct["ct"]), ct_cells=int(ct["ct_cells"]))
    want["authenticity_percentage"] = float(authenticity_percentage(real, fake))
    want.update({k: float(v) for k, v in feature_likelihood_divergence(real, fake, test, seed=seed).items()})
    assert set(want) == set(HELD_OUT_KEYS)
    for key, value in want.items():
        assert scores[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    assert isinstance(scores["ct_cells"], int) and scores["ct_cells"] >= 1
    assert got["settings"]["fd_infinity"] == dict(num_points=15, min_size=None, max_size=None, seed=seed)
    assert got["settings"]["data_copying"] == dict(num_cells=3, cell_threshold=20, pca_dim=64, seed=seed)
    assert got["settings"]["fld"]["seed"] == seed and got["settings"]["fld"]["gen_size"] == 10_000
    assert got["test"]["path"] == str(path / "test.npy") and got["test"]["num_samples"] == 200
    rows = _rows(capfd.readouterr().out)
    ways = dict(frechet_distance_infinity="lower", ct="0 is ideal", ct_cells="-", authenticity_percentage="higher")
    ways.update(fld="lower", fld_gap="0 is ideal", fld_nll_test="lower", fld_train="-", fld_nll_train="-")
    ways["fld_nll_baseline"] = "-"
    for key, way in ways.items():
        assert rows[key][1] == way, key
        printed = rows[key][0]
        assert printed == str(want[key]) if key == "ct_cells" else float(printed) == pytest.approx(want[key], abs=6e-5)


def test_switches_are_off_by_default_and_independent(sets):
    path, x = sets
    plain = _json(path, *_argv(path))
    assert not set(HELD_OUT_KEYS) & set(plain["scores"]) and plain["test"] is None
    assert plain["settings"]["fd_infinity"] is None and plain["settings"]["fld"] is None
    fd_only = _json(path, *_argv(path, "fresh", "--fd-infinity"))  # FD-infinity needs no held-out set
    assert set(HELD_OUT_KEYS) & set(fd_only["scores"]) == {"frechet_distance_infinity"}
    ct_only = _json(path, *_argv(path, "fresh", "--test", str(path / "test.npy"), "--data-copying"))
    assert set(HELD_OUT_KEYS) & set(ct_only["scores"]) == {"ct", "ct_cells", "authenticity_percentage"}
    # the other scores do not move when the held-out scores join
    assert all(ct_only["scores"][k] == plain["scores"][k] for k in plain["scores"])
    no_ab = _json(path, *_argv(path, "fresh", "--test", str(path / "test.npy"), "--data-copying", "--no-alpha-beta"))
    # the data-copying family reads the authenticity percentage off its own ask of the pass
    assert set(HELD_OUT_KEYS) & set(no_ab["scores"]) == {"ct", "ct_cells", "authenticity_percentage"}
    assert no_ab["scores"]["authenticity_percentage"] == ct_only["scores"]["authenticity_percentage"]


def test_copies_of_the_training_set_are_flagged(sets):
    """The two memorization scores on a model that outputs near-copies of its training set, against a fresh one."""
    path, _ = sets
    flags = ["--test", str(path / "test.npy"), "--data-copying", "--fld"]
    fresh = _json(path, *_argv(path, "fresh", *flags))["scores"]
    copies = _json(path, *_argv(path, "copies", *flags))["scores"]
    assert copies["ct"] < -3 < fresh["ct"]
    assert copies["authenticity_percentage"] == 0.0 < fresh["authenticity_percentage"]
    assert copies["fld_gap"] < fresh["fld_gap"] - 10


def test_compare_ranks_ct_by_its_distance_to_zero(sets, capfd):
    path, x = sets
    argv = ["compare", "--real", str(path / "real.npy"), "--fake", str(path / "copies.npy"), str(path / "fresh.npy")]
    out = path / "cmp.json"
    flags = ["--test", str(path / "test.npy"), "--data-copying", "--fd-infinity", "--json", str(out)]
    assert main([*argv, *flags, *QUICK]) == 0
    lines = capfd.readouterr().out.splitlines()

    def cells(start):  # columns are two or more spaces apart; "0 is ideal" holds single spaces
        return re.split(r"\s{2,}", next(line for line in lines if line.startswith(start)).strip())

    header = cells("fake ")
    better = dict(zip(header[2:], cells("(better)")[1:]))  # (the empty M cell is no column of its own)
    best = dict(zip(header[2:], cells("(best)")[1:]))
    results = json.loads(out.read_text())["results"]
    values = [r["scores"]["ct"] for r in results]
    assert better["ct"] == "0 is ideal" and better["ct_cells"] == "-" and better["frechet_distance_infinity"] == "lower"
    assert best["ct"] == results[int(np.argmin(np.abs(values)))]["label"] == "fresh"
    assert best["ct_cells"] == "-"
    fd = [
        float(frechet_distance_infinity(x["real"], x[name])["frechet_distance_infinity"])
        for name in ("copies", "fresh")
    ]
    assert best["frechet_distance_infinity"] == ("copies", "fresh")[int(np.argmin(fd))]
    assert [r["scores"]["frechet_distance_infinity"] for r in results] == pytest.approx(fd, rel=1e-9)


# ---------------------------------------------------------------------------- the held-out file
def test_test_is_read_in_the_forms_real_takes(sets):
    path, x = sets
    flags = ["--data-copying"]
    want = _json(path, *_argv(path, "fresh", "--test", str(path / "test.npy"), *flags))["scores"]
    np.savez(path / "both.npz", train=x["real"].numpy(), held=x["test"].numpy())
    argv = ["evaluate", "--real", str(path / "both.npz"), "--real-key", "train", "--fake", str(path / "fresh.npy")]
    got = _json(path, *argv, "--test", str(path / "both.npz"), "--test-key", "held", *flags, *QUICK)
    assert got["scores"] == want and got["test"]["key"] == "held" and got["settings"]["test_key"] == "held"
    write_features(path / "held_features.npz", x["test"], extractor="random-cnn")  # a lightning-prd features file
    written = _json(path, *_argv(path, "fresh", "--test", str(path / "held_features.npz"), *flags))
    assert written["scores"] == want and written["test"]["format"] == "lightning-prd"
    torch.save({"feats": x["test"]}, path / "held.pt")
    assert _json(path, *_argv(path, "fresh", "--test", str(path / "held.pt"), *flags))["scores"] == want


def test_num_samples_subsamples_the_test_set_too(sets):
    path, x = sets
    got = _json(path, *_argv(path, "fresh", "--test", str(path / "test.npy"), "--data-copying", "--num-samples", "150"))
    assert got["test"]["num_samples"] == 150 and got["test"]["num_available"] == 200
    rows = torch.randperm(200, generator=torch.Generator().manual_seed(0))[:150].sort().values  # the documented draw
    want = data_copying(x["real"][rows], x["fresh"][rows], x["test"][rows])
    assert got["scores"]["ct"] == pytest.approx(float(want["ct"]), rel=1e-9)


# ---------------------------------------------------------------------------- misuse
def _no_work(*args, **kwargs):
    raise AssertionError("a set was read before the flags were checked")


@pytest.mark.parametrize(
    "extra, fragments",
    [
        (["--data-copying"], ["--data-copying needs --test PATH", "held-out"]),
        (["--fld"], ["--fld needs --test PATH"]),
        (["--data-copying", "--fld"], ["--data-copying and --fld need --test PATH"]),
        (["--test", "TEST", "--fd-infinity"], ["--test", "test.npy", "no score asked for uses a held-out set"]),
        (["--test-key", "held", "--fd-infinity"], ["--test-key held: needs --test PATH"]),
        (["--only", "frechet", "--fd-infinity"], ["--only frechet", "--fd-infinity asks for more"]),
        (["--only", "frechet", "--fld", "--test", "TEST"], ["--only frechet", "--fld asks for more"]),
        (["--test", "MISSING", "--fld"], ["--test", "missing.npy: no such file or directory"]),
    ],
)
def test_misuse_is_one_line_before_any_file_is_read(sets, capfd, monkeypatch, extra, fragments):
    path, _ = sets
    extra = [{"TEST": str(path / "test.npy"), "MISSING": str(path / "missing.npy")}.get(a, a) for a in extra]
    monkeypatch.setattr("lightning_prd.cli.evaluate.load_set", _no_work)
    assert main(_argv(path, "fresh", *extra)) == 1
    _one_line(capfd, "lightning-prd evaluate: error:", *fragments)


def test_bad_test_files_are_one_line_naming_test(sets, capfd):
    path, x = sets
    flags = ["--data-copying"]
    np.savez(path / "stats.npz", mu=np.zeros(16), sigma=np.eye(16))  # FID statistics: no per-sample features
    assert main(_argv(path, "fresh", "--test", str(path / "stats.npz"), *flags)) == 1
    _one_line(capfd, "--test", "stats.npz", "mean and covariance", "per-sample features")
    (path / "cut.npy").write_bytes((path / "test.npy").read_bytes()[:300])
    assert main(_argv(path, "fresh", "--test", str(path / "cut.npy"), *flags)) == 1
    _one_line(capfd, "--test", "cut.npy", "truncated or corrupt")
    np.save(path / "narrow.npy", x["test"].numpy()[:, :8])
    assert main(_argv(path, "fresh", "--test", str(path / "narrow.npy"), *flags)) == 1
    _one_line(capfd, "--test", "narrow.npy", "8 features per sample, but --real has 16")
    assert main(_argv(path, "fresh", "--test", str(path / "real.npy"), *flags)) == 1
    _one_line(capfd, "--test", "real.npy: the same samples as --real")
    flat = x["test"].numpy().copy()
    flat[:, 3] = 1.0
    np.save(path / "flat.npy", flat)
    assert main(_argv(path, "fresh", "--test", str(path / "flat.npy"), "--fld")) == 1
    _one_line(capfd, "--fld", "flat.npy", "1 constant features (the first is feature 3)")
    (path / "notes.txt").write_text("not features")
    assert main(_argv(path, "fresh", "--test", str(path / "notes.txt"), *flags)) == 1
    _one_line(capfd, "--test", "notes.txt")


def test_outputs_never_overwrite_the_test_file(sets, capfd):
    path, _ = sets
    before = (path / "test.npy").read_bytes()
    argv = _argv(path, "fresh", "--test", str(path / "test.npy"), "--data-copying", "--json", str(path / "test.npy"))
    assert main(argv) == 1
    _one_line(capfd, "--json", "refusing to overwrite an input file (--test")
    assert (path / "test.npy").read_bytes() == before


def test_too_few_generated_samples_for_fd_infinity(sets, capfd):
    path, x = sets
    np.save(path / "two.npy", x["fresh"].numpy()[:2])
    argv = ["evaluate", "--real", str(path / "real.npy"), "--fake", str(path / "two.npy"), "--k-precision-recall", "1"]
    assert main([*argv, "--no-alpha-beta", "--fd-infinity", *QUICK]) == 1
    _one_line(capfd, "--fd-infinity", "at least 3 generated samples", "two.npy holds 2")


def test_help_names_every_flag_and_column(capfd):
    for command in ("evaluate", "compare"):
        assert main([command, "--help"]) == 0
        text = capfd.readouterr().out
        for word in ("--test PATH", "--test-key", "--fd-infinity", "--data-copying", "--fld", "needs --test"):
            assert word in text, (command, word)
        for column in HELD_OUT_KEYS:
            assert column in text, (command, column)
        assert "0 is ideal" in text and "--test heldout.npy --data-copying --fld --fd-infinity" in text
