"""``lightning-prd runs``: damaged event files, outputs inside runs, symlinked runs, non-finite plots, table width.

References are independent of :mod:`lightning_prd.runs`: record boundaries come from the TFRecord
framing read here with ``struct`` (8-byte length, 4-byte length checksum, data, 4-byte data
checksum), checksums from TensorBoard's own ``masked_crc32c``, the values from what was logged.
"""

from __future__ import annotations

import json
import math
import os
import struct

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from lightning_prd.cli import main
from lightning_prd.runs.scores import DIRECTIONS

VALUES = [0.1, 0.3, 0.5, 0.7, 0.95]  # precision at epochs 0..4


def _write_run(run_dir, values=VALUES, names=("precision",), image=False):
    """A TensorBoard run with ``prd/<name>`` = ``values`` over epochs (and a large image record per epoch)."""
    with SummaryWriter(str(run_dir)) as writer:
        for epoch, value in enumerate(values):
            for name in names:
                writer.add_scalar(f"prd/{name}", value, global_step=epoch)
            if image:
                pixels = np.random.default_rng(epoch).random((3, 96, 96))
                writer.add_image("prd/figures/noise", pixels, global_step=epoch)
    (event,) = [os.path.join(run_dir, f) for f in os.listdir(run_dir) if "tfevents" in f]
    return event


def _records(path):
    """``[(start, data_length), ...]`` of the file's records, from the length fields alone."""
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos : pos + 8])
        out.append((pos, length))
        pos += 12 + length + 4
    assert pos == len(data)
    return out


def _scalar_record(path, step):
    """Index of the record that holds the scalar logged at ``step`` (the framing's first record is the version)."""
    return 1 + step


def _overwrite(path, offset, data):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _flip(path, offset, n=4):
    with open(path, "rb") as fh:
        fh.seek(offset)
        old = fh.read(n)
    _overwrite(path, offset, bytes(b ^ 0xFF for b in old))


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _fails(argv, capsys, *words):
    code, _, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("lightning-prd runs: error:"), err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------ damaged event files
def _damage(event, where):
    """Damage ``event`` at ``where``; return the start of the first record that is no longer whole."""
    records = _records(event)
    size = os.path.getsize(event)
    if where == "middle":  # the measured case: 4 bytes overwritten in the middle of the file
        offset = size // 2
        _overwrite(event, offset, b"\x00\x00\x00\x00")
        return max(start for start, _ in records if start <= offset)
    start, length = records[_scalar_record(event, 2)]
    if where == "length":
        _flip(event, start + 2, 1)
    elif where == "length_crc":
        _flip(event, start + 9, 1)
    elif where == "data":
        _flip(event, start + 12 + length // 2, 4)
    elif where == "data_crc":
        _flip(event, start + 12 + length, 4)
    elif where == "cut":
        os.truncate(event, start + 12 + length - 3)
    elif where == "cut_header":
        os.truncate(event, start + 5)
    return start


@pytest.mark.parametrize("where", ["middle", "length", "length_crc", "data", "data_crc", "cut", "cut_header"])
def test_a_damaged_event_file_is_reported_with_how_much_was_read(tmp_path, capsys, where):
    event = _write_run(tmp_path / "run")
    good = _damage(event, where)
    size = os.path.getsize(event)
    out = tmp_path / "o.json"
    code, text, err = _run(["runs", str(tmp_path / "run"), "--json", str(out)], capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1, err
    assert event in warnings[0] and "damaged" in warnings[0]
    assert f"read {good} of {size} bytes" in warnings[0], warnings[0]
    run = json.loads(out.read_text())["runs"][0]
    assert run["warnings"] and event in run["warnings"][0]
    assert run["scores"]["precision"]["last_epoch"] < 4  # what lies after the damage is not read


def test_damage_is_found_in_any_file_of_a_run_and_any_run_of_a_folder(tmp_path, capsys):
    first = _write_run(tmp_path / "runs" / "a", image=True)
    os.rename(first, first.replace("tfevents.", "tfevents.0"))  # sorts before the second file
    first = first.replace("tfevents.", "tfevents.0")
    second = _write_run_second(tmp_path / "runs" / "a")
    _write_run(tmp_path / "runs" / "b", image=True)
    records = _records(second)
    start, length = records[2]
    _flip(second, start + 12 + length - 1, 1)  # the last byte of a record's data
    code, text, err = _run(["runs", str(tmp_path / "runs")], capsys)
    assert code == 0
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and second in warnings[0] and first not in warnings[0], err
    assert f"read {start} of {os.path.getsize(second)} bytes" in warnings[0]


def test_a_damaged_first_file_leaves_the_next_file_of_the_run_read(tmp_path, capsys):
    first = _write_run(tmp_path / "run")
    second = _write_run_second(tmp_path / "run")
    assert sorted([first, second]) == [first, second]  # the damaged file is read first
    start, length = _records(first)[_scalar_record(first, 1)]
    _flip(first, start + 12, 2)
    out = tmp_path / "o.json"
    code, _, err = _run(["runs", str(tmp_path / "run"), "--json", str(out)], capsys)
    assert code == 0 and first in err and second not in err and f"read {start} of" in err, err
    history = json.loads(out.read_text())["runs"][0]["history"]["precision"]
    assert [e for e, _ in history] == [0, 5, 6, 7, 8, 9]


def _write_run_second(run_dir):
    """A second event file in ``run_dir`` (a resumed run), epochs 5..9."""
    before = set(os.listdir(run_dir))
    with SummaryWriter(str(run_dir)) as writer:
        for epoch in range(5, 10):
            writer.add_scalar("prd/precision", 0.5, global_step=epoch)
    (name,) = set(os.listdir(run_dir)) - before
    return os.path.join(run_dir, name)


def test_whole_files_with_large_records_raise_no_warning(tmp_path, capsys):
    for name in ("a", "b"):
        _write_run(tmp_path / name, image=True, names=("precision", "recall"))
    assert max(length for _, length in _records(_event(tmp_path / "a"))) > 20000  # large records are checked too
    code, _, err = _run(["runs", str(tmp_path)], capsys)
    assert code == 0 and "warning" not in err, err


def _event(run_dir):
    (event,) = [os.path.join(run_dir, f) for f in os.listdir(run_dir) if "tfevents" in f]
    return event


@pytest.mark.parametrize("n", [0, 1, 7, 8, 63, 64, 65, 1000, 4095, 4096, 4097, 70001, 300000])
def test_checksums_match_tensorboard(n):
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from lightning_prd.runs.records import masked_crc32c as ours

    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    assert ours(data) == masked_crc32c(data)


def test_a_garbage_event_file_is_named_as_not_an_event_file(tmp_path, capsys):
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    bad = garbage / "events.out.tfevents.1.host"
    bad.write_bytes(np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8).tobytes())
    line = _fails(["runs", str(garbage)], capsys, str(bad), "no 'prd/' scores")
    assert "damaged at byte 0" in line and "read 0 of 300 bytes" in line and "not a TensorBoard event file" in line
    _write_run(tmp_path / "good")  # next to a good run: skipped, with the cause
    code, text, err = _run(["runs", str(tmp_path)], capsys)
    assert code == 0 and "good" in text and "garbage" not in text
    assert str(bad) in err and "damaged at byte 0" in err


# ------------------------------------------------------------------------------------ outputs inside runs
@pytest.fixture
def run_tree(tmp_path):
    run = tmp_path / "runs" / "a"
    _write_run(run)
    (run / "hparams.yaml").write_text("lr: 0.1\n")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "epoch=4.ckpt").write_bytes(b"weights")
    (run / "metrics.csv").write_text("epoch,loss\n0,1.0\n")  # next to the event files: not read
    csv_run = tmp_path / "runs" / "c"
    csv_run.mkdir()
    (csv_run / "metrics.csv").write_text("epoch,prd/precision\n0,0.5\n")
    (csv_run / "notes.txt").write_text("keep\n")
    return tmp_path


def _snapshot(root):
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize(
    "target",
    [
        "runs/a/hparams.yaml",
        "runs/a/checkpoints/epoch=4.ckpt",
        "runs/a/metrics.csv",
        "runs/c/notes.txt",
        "runs/c/metrics.csv",
        "runs/a/summary.json",  # a new file inside a run
        "runs/a/new/deeper/out.json",
        "runs/metrics.csv",  # a new file that would make the folder of runs a run
        "runs/events.out.tfevents.json",
    ],
)
@pytest.mark.parametrize("flag", ["--json", "--plot"])
def test_outputs_are_never_written_inside_a_run(run_tree, capsys, target, flag):
    before = _snapshot(run_tree)
    out = str(run_tree / target)
    line = _fails(["runs", str(run_tree / "runs"), flag, out], capsys, "refusing", target.split("/")[-1])
    assert flag in line
    assert _snapshot(run_tree) == before
    assert not (run_tree / "runs" / "a" / "new").exists()


def test_outputs_through_links_into_a_run_are_refused(run_tree, capsys):
    link = run_tree / "link.json"
    link.symlink_to(run_tree / "runs" / "a" / "hparams.yaml")
    dangling = run_tree / "dangling.json"
    dangling.symlink_to(run_tree / "runs" / "a" / "missing.json")
    folder = run_tree / "into"
    folder.symlink_to(run_tree / "runs" / "c", target_is_directory=True)
    before = _snapshot(run_tree)
    for out in (link, dangling, folder / "x.json"):
        _fails(
            ["runs", str(run_tree / "runs" / "a"), str(run_tree / "runs" / "c"), "--json", str(out)], capsys, "refusing"
        )
    assert _snapshot(run_tree) == before and not (run_tree / "runs" / "a" / "missing.json").exists()


def test_outputs_next_to_runs_are_written(run_tree, capsys):
    out = run_tree / "runs" / "compare.json"
    plot = run_tree / "runs" / "figures" / "compare.png"
    assert main(["runs", str(run_tree / "runs"), "--json", str(out), "--plot", str(plot)]) == 0
    assert json.loads(out.read_text())["command"] == "runs" and plot.read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------------------------------------------ symlinked run folders
def test_symlinked_run_folders_are_followed_without_looping(tmp_path, capsys):
    _write_run(tmp_path / "elsewhere" / "real")
    root = tmp_path / "root"
    _write_run(root / "a")
    (root / "linked").symlink_to(tmp_path / "elsewhere" / "real", target_is_directory=True)
    (root / "a" / "loop").symlink_to(root, target_is_directory=True)  # a cycle
    (root / "self").symlink_to(".", target_is_directory=True)
    (root / "up").symlink_to(tmp_path, target_is_directory=True)  # an ancestor: would revisit everything
    (root / "twice").symlink_to(root / "a", target_is_directory=True)  # the same run again
    out = tmp_path / "o.json"
    assert main(["runs", str(root), "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert sorted(os.path.realpath(r["path"]) for r in runs) == sorted(
        [os.path.realpath(root / "a"), os.path.realpath(tmp_path / "elsewhere" / "real")]
    )
    assert "linked" in {r["label"] for r in runs}


# ------------------------------------------------------------------------------------ non-finite values in plots
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_plots_draw_non_finite_values_as_gaps(tmp_path, capsys, bad):
    names = ("precision", "recall", "density", "coverage", "frechet_distance")
    with SummaryWriter(str(tmp_path / "run")) as writer:
        for epoch in range(4):
            for name in names:
                writer.add_scalar(f"prd/{name}", bad if epoch == 2 else 0.2 * (epoch + 1), global_step=epoch)
    plot = tmp_path / "p.png"
    assert main(["runs", str(tmp_path / "run"), "--plot", str(plot), "--json", str(tmp_path / "o.json")]) == 0
    assert plot.read_bytes()[:4] == b"\x89PNG"

    from lightning_prd.runs.plotting import plot_runs, plot_trajectory

    scores = {n: [(e, bad if e == 2 else 0.2 * (e + 1)) for e in range(4)] for n in names}
    fig = plot_runs({"run": scores}, panels=("precision", "recall", "density", "coverage"))
    for ax in fig.axes:
        assert all(math.isfinite(v) for v in (*ax.get_xlim(), *ax.get_ylim()))
        for line in ax.lines:
            ys = np.asarray(line.get_ydata(), dtype=float)
            if len(ys) == 4:  # a run's line: the gap at epoch 2, the rest drawn
                assert math.isnan(ys[2]) and np.isfinite(np.delete(ys, 2)).all()
    history = [{"epoch": e, "precision": scores["precision"][e][1], "recall": 0.5} for e in range(4)]
    ax = plot_trajectory(history).axes[0]
    assert all(math.isfinite(v) for v in ax.get_ylim())


# ------------------------------------------------------------------------------------ table width
def _all_scores_runs(root, labels):
    names = list(DIRECTIONS) + ["custom_score"]
    for label in labels:
        with SummaryWriter(str(root / label)) as writer:
            for epoch in range(50):
                for i, name in enumerate(names):
                    writer.add_scalar(f"prd/{name}", 0.5 + 0.01 * ((epoch * (i + 3)) % 40), global_step=epoch)
    return names


def test_the_default_table_fits_in_100_columns(tmp_path, capsys):
    names = _all_scores_runs(tmp_path, ["seed0_epochs50", "seed1_epochs50", "baseline"])
    out = tmp_path.parent / f"{tmp_path.name}.json"
    code, text, _ = _run(["runs", str(tmp_path), "--json", str(out)], capsys)
    assert code == 0
    lines = text.splitlines()
    assert 95 <= max(len(line) for line in lines) <= 100, max(len(line) for line in lines)
    assert lines[0].split() == ["precision", "recall", "density", "coverage"]
    assert "--scores all" in text
    payload = json.loads(out.read_text())
    assert all(sorted(r["scores"]) == sorted(names) for r in payload["runs"])  # the JSON keeps every score
    code, text, _ = _run(["runs", str(tmp_path), "--scores", "all"], capsys)
    assert code == 0 and text.splitlines()[0].split()[:4] == ["precision", "recall", "density", "coverage"]
    assert set(text.splitlines()[0].split()) == set(names)
    code, text, _ = _run(["runs", str(tmp_path), "--scores", "kid", "--json", str(out)], capsys)
    assert code == 0 and text.splitlines()[0].split() == ["kid"]
    assert all(sorted(r["scores"]) == sorted(names) for r in json.loads(out.read_text())["runs"])


def test_long_run_labels_are_shortened_to_fit_and_stay_distinct(tmp_path, capsys):
    labels = [
        "experiments/ring_gan/generator_with_spectral_norm_lr_0.0002/seed0/version_0",
        "experiments/ring_gan/generator_with_spectral_norm_lr_0.0005/seed0/version_0",
    ]
    _all_scores_runs(tmp_path, labels)
    out = tmp_path.parent / f"{tmp_path.name}.json"
    code, text, _ = _run(["runs", str(tmp_path), "--json", str(out)], capsys)
    assert code == 0 and max(len(line) for line in text.splitlines()) <= 100
    shown = [line.split()[0] for line in text.splitlines()[3:5]]
    # the shared parts are dropped (experiments/ring_gan, seed0/version_0); in 100 columns the rest keeps
    # 16 characters: its end, where the two runs differ
    assert shown == ["...rm_lr_0.0002", "...rm_lr_0.0005"], shown
    assert sorted(r["label"] for r in json.loads(out.read_text())["runs"]) == labels


def test_runs_without_the_main_scores_show_their_first_scores(tmp_path, capsys):
    with SummaryWriter(str(tmp_path / "run")) as writer:
        for name in ("frechet_distance", "kid"):
            writer.add_scalar(f"prd/{name}", 1.0, global_step=0)
    code, text, _ = _run(["runs", str(tmp_path / "run")], capsys)
    assert code == 0 and text.splitlines()[0].split() == ["frechet_distance", "kid"]
