"""``examples/gan_ring.py``: named runs, compared with ``lightning-prd runs``; what it prints follows its numbers."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from lightning_prd.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "gan_ring.py")


def _example():
    spec = importlib.util.spec_from_file_location("gan_ring_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args, cwd):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, EXAMPLE, "--fast", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
        check=False,
    )
    return proc


def _epoch_table(stdout):
    """The per-epoch table the example prints: ``{column: [values by epoch]}``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["epoch", "precision"])
    header = lines[start].split()
    rows = []
    for line in lines[start + 1 :]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        rows.append(dict(zip(header, map(float, cells))))
    return {c: [r[c] for r in rows] for c in header}


@pytest.fixture(scope="module")
def two_example_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("example")
    out = {}
    for name, seed in (("gan_ring/first", "0"), ("gan_ring/second", "1")):
        proc = _run("--logdir", str(tmp / "runs"), "--name", name, "--seed", seed, cwd=tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[name] = proc.stdout
    return tmp, out


def test_runs_table_matches_the_example_printout(two_example_runs, capsys):
    tmp, stdouts = two_example_runs
    assert sorted(os.listdir(tmp / "runs" / "gan_ring")) == ["first", "second"]  # --name is the run directory
    argv = [
        "runs",
        str(tmp / "runs"),
        "--scores",
        "all",
        "--json",
        str(tmp / "runs.json"),
        "--plot",
        str(tmp / "runs.png"),
    ]
    assert main(argv) == 0  # every score in the table: the default shows the main four
    table = capsys.readouterr().out
    runs = {r["label"]: r for r in json.loads((tmp / "runs.json").read_text())["runs"]}
    assert sorted(runs) == ["gan_ring/first", "gan_ring/second"]
    for name, stdout in stdouts.items():
        printed = _epoch_table(stdout)  # independent of the event files: the callback's history, printed
        assert printed["epoch"] == [0.0, 1.0]
        assert f"TensorBoard logs: {tmp / 'runs' / name}" in stdout
        for score in ("precision", "recall", "density", "coverage", "f_beta", "f_inv_beta", "frechet_distance"):
            history = runs[name]["history"][score]
            assert [e for e, _ in history] == [0, 1]
            assert [v for _, v in history] == pytest.approx(printed[score], abs=5e-5)
        fd = printed["frechet_distance"]
        assert runs[name]["scores"]["frechet_distance"]["best_epoch"] == fd.index(min(fd))
        shown = runs[name]["name"]  # the table names a run by the path parts that tell the runs apart
        assert shown == name.split("/")[-1]
        row = next(line for line in table.splitlines() if line.startswith(shown))
        assert f"{runs[name]['scores']['frechet_distance']['best']:.4f}" in row
    assert stdouts["gan_ring/first"] != stdouts["gan_ring/second"]


def test_example_prints_a_legend_and_refuses_a_taken_name(two_example_runs):
    tmp, stdouts = two_example_runs
    out = stdouts["gan_ring/first"]
    assert "f_inv_beta = F_1/8" in out and "f_beta = F_8" in out and "loss/d" in out.split("f_beta = F_8")[1]
    assert "Compare runs:     lightning-prd runs" in out
    proc = _run("--logdir", str(tmp / "runs"), "--name", "gan_ring/first", cwd=tmp)
    assert proc.returncode != 0 and "--name" in proc.stderr and "already holds" in proc.stderr


def test_default_names_follow_the_settings_and_never_reuse_a_run(tmp_path):
    example = _example()
    assert example.run_name(str(tmp_path), None, "gan_ring/seed1_epochs15") == "gan_ring/seed1_epochs15"
    (tmp_path / "gan_ring" / "seed1_epochs15").mkdir(parents=True)
    assert example.run_name(str(tmp_path), None, "gan_ring/seed1_epochs15") == "gan_ring/seed1_epochs15"  # empty
    (tmp_path / "gan_ring" / "seed1_epochs15" / "events.out.tfevents.1").write_bytes(b"")
    assert example.run_name(str(tmp_path), None, "gan_ring/seed1_epochs15") == "gan_ring/seed1_epochs15-2"
    for bad in ("", "/abs", "../up"):
        with pytest.raises(ValueError, match="--name"):
            example.run_name(str(tmp_path), bad, "x")


def test_knob_conclusions_follow_the_printed_values():
    example = _example()
    scales = (0.25, 0.5, 1.0, 2.0)

    def trade(precision, recall):
        return {f"latent scale {s:g}": {"precision": p, "recall": r} for s, p, r in zip(scales, precision, recall)}

    # the table the old text contradicted: narrowing the codes lowers precision too
    lines = example.knob_conclusions(trade([0.29, 0.5, 0.71, 0.4], [0.1, 0.4, 0.8, 0.9]), scales=scales)
    assert "highest precision at scale 1 (0.710)" in lines[0] and "highest recall at scale 2 (0.900)" in lines[0]
    assert "1 -> 0.25: precision 0.710 -> 0.290, recall 0.800 -> 0.100: both fall" in lines[1]
    assert "1 -> 2: precision 0.710 -> 0.400, recall 0.800 -> 0.900: recall bought with precision" in lines[2]
    assert not any("precision bought" in line for line in lines)
    # a real trade-off is named as one
    lines = example.knob_conclusions(trade([0.95, 0.9, 0.7, 0.4], [0.2, 0.5, 0.8, 0.9]), scales=scales)
    assert lines[1].endswith("precision bought with recall") and "highest precision at scale 0.25" in lines[0]
    # ties are reported as ties, not as the first scale
    lines = example.knob_conclusions(trade([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.1]), scales=scales)
    assert "highest precision at scales 0.25, 0.5, 1, 2 (0.000)" in lines[0] and lines[1].endswith("both stay")


def test_frechet_blind_spot_points_at_the_epochs_it_saw():
    example = _example()
    history = [
        {"epoch": 5, "precision": 0.013, "frechet_distance": 1.04},
        {"epoch": 6, "precision": 0.025, "frechet_distance": 0.0185},
        {"epoch": 12, "precision": 0.71, "frechet_distance": 0.0300},
        {"epoch": 13, "precision": 0.70, "frechet_distance": 0.0100},
    ]
    line = example.frechet_blind_spot(history)
    assert "epoch 6 has a lower Fréchet distance than epoch 12 (0.0185 vs 0.0300)" in line
    assert "precision 0.025 vs 0.710" in line
    # no such pair (precision stays low), but the run's lowest Fréchet distance comes with precision 0.044
    low = [
        {"epoch": 0, "precision": 0.0, "frechet_distance": 2.7132},
        {"epoch": 6, "precision": 0.0249, "frechet_distance": 0.0185},
        {"epoch": 11, "precision": 0.0441, "frechet_distance": 0.0115},
        {"epoch": 14, "precision": 0.1421, "frechet_distance": 0.0173},
    ]
    line = example.frechet_blind_spot(low)
    assert "lowest Fréchet distance, 0.0115 at epoch 11 (epoch 0: 2.7132), comes with precision 0.044" in line
    agreeing = [{"epoch": e, "precision": 0.5 + 0.1 * e, "frechet_distance": 1.0 / (e + 1)} for e in range(5)]
    assert example.frechet_blind_spot(agreeing).strip().startswith("no epoch had")
    assert example.frechet_blind_spot([]) == ""
