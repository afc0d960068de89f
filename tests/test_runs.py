"""``lightning-prd runs``: runs logged by a real Trainer, read back and checked against what was logged.

References are independent of :mod:`lightning_prd.runs`: the callback's in-memory ``history``,
the raw event records (TensorBoard's low-level ``EventFileLoader``), ``metrics.csv`` read with
``csv``, and "best" written out here from its definition (max; min for the Fréchet distance;
closest to 1 for density).
"""

from __future__ import annotations

import glob
import json
import os
import re

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

from lightning_prd.callback import PRDCallback
from lightning_prd.cli import main

from tiny_modules import TinyTrainable

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)

REAL = torch.randn(200, 2, generator=torch.Generator().manual_seed(0))
SCORES = ["precision", "recall", "density", "coverage", "frechet_distance"]
BEST = {
    "precision": max,
    "recall": max,
    "coverage": max,
    "frechet_distance": min,
    "density": lambda vs: min(vs, key=lambda v: abs(v - 1)),
}


class Shifted(TinyTrainable):
    """``sample(n)``: N(0, s_e^2 I) shifted by ``o_e`` at epoch e, so every score moves over epochs."""

    def __init__(self, scales, offsets):
        super().__init__()
        self.scales, self.offsets = scales, offsets

    def sample(self, n):
        e = self.trainer.current_epoch
        g = torch.Generator().manual_seed(100 + e)
        return self.scales[e] * torch.randn(n, 2, generator=g) + self.offsets[e]


def _fit(root, version, scales, offsets, metric=None):
    loggers = [TensorBoardLogger(root, name="tb", version=version), CSVLogger(root, name="csv", version=version)]
    cb = PRDCallback(REAL, num_samples=200, metric=metric)
    trainer = pl.Trainer(
        max_epochs=len(scales),
        logger=loggers,
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    trainer.fit(Shifted(scales, offsets))
    return cb.history


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    histories = {
        "a": _fit(root, "a", [0.3, 1.0, 1.6, 0.9], [1.5, 0.0, 0.2, 0.6]),
        "b": _fit(root, "b", [2.0, 0.5, 1.1, 1.0], [0.0, 0.3, 0.0, 1.2]),
    }
    return root, histories


def _raw_scalars(run_dir):
    """``tag -> {step: value}`` from the raw event records (last record of a step wins)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        for event in EventFileLoader(path).Load():
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    out.setdefault(value.tag, {})[event.step] = value.simple_value
                elif value.metadata.plugin_data.plugin_name == "scalars":  # simple values come back as 0-d tensors
                    out.setdefault(value.tag, {})[event.step] = float(tensor_util.make_ndarray(value.tensor))
    return out


def _table_rows(text):
    lines = text.splitlines()
    groups = lines[0].split()
    rows = {}
    for line in lines[3:]:
        if not line.strip():
            break
        cells = line.split()
        label, rest = cells[0], cells[3:]
        rows[label] = {g: rest[3 * i : 3 * i + 3] for i, g in enumerate(groups)}
    return groups, rows


def test_table_and_json_match_the_event_files_and_history(two_runs, tmp_path, capsys):
    root, histories = two_runs
    out = tmp_path / "out" / "runs.json"
    argv = ["runs", str(root / "tb"), "--scores", "all", "--json", str(out), "--plot", str(tmp_path / "runs.png")]
    assert main(argv) == 0  # every score: the default table shows the main four
    groups, rows = _table_rows(capsys.readouterr().out)
    assert groups[:4] == SCORES[:4] and set(SCORES) <= set(groups)
    assert sorted(rows) == ["a", "b"]
    payload = json.loads(out.read_text())
    for run in payload["runs"]:
        label = run["label"]
        raw = _raw_scalars(root / "tb" / label)
        history = histories[label]
        assert [h["epoch"] for h in history] == [0, 1, 2, 3]
        epoch_at = {step: int(epoch) for step, epoch in raw["prd/epoch"].items()}  # the callback's step -> epoch
        assert sorted(epoch_at.values()) == [0, 1, 2, 3]
        for name in SCORES:
            logged = {epoch_at[step]: value for step, value in raw[f"prd/{name}"].items()}
            assert sorted(logged) == [0, 1, 2, 3]
            values = [logged[e] for e in range(4)]
            assert values == pytest.approx([h[name] for h in history], rel=1e-6)
            best = BEST[name](values)
            best_epoch = values.index(best)
            summary = run["scores"][name]
            assert summary["last"] == pytest.approx(values[-1], rel=1e-6) and summary["last_epoch"] == 3
            assert summary["best"] == pytest.approx(best, rel=1e-6) and summary["best_epoch"] == best_epoch
            assert [e for e, _ in run["history"][name]] == [0, 1, 2, 3]
            last, best_text, epoch_text = rows[label][name]
            assert float(last) == pytest.approx(values[-1], abs=5e-5)
            assert float(best_text) == pytest.approx(best, abs=5e-5) and int(epoch_text) == best_epoch
    # the best lies at different epochs for different scores and runs, so a misread column or run would fail
    best_epochs = {(r["label"], n): r["scores"][n]["best_epoch"] for r in payload["runs"] for n in SCORES}
    assert len(set(best_epochs.values())) >= 3
    assert (tmp_path / "runs.png").read_bytes()[:4] == b"\x89PNG"


def test_csv_runs_read_like_tensorboard_runs(two_runs, tmp_path):
    root, histories = two_runs
    tb, csv_ = tmp_path / "tb.json", tmp_path / "csv.json"
    assert main(["runs", str(root / "tb"), "--json", str(tb)]) == 0
    assert main(["runs", str(root / "csv" / "a"), str(root / "csv" / "b"), "--json", str(csv_)]) == 0
    tb_runs = {r["label"]: r for r in json.loads(tb.read_text())["runs"]}
    csv_runs = {r["label"]: r for r in json.loads(csv_.read_text())["runs"]}
    assert sorted(csv_runs) == ["a", "b"] and all(r["source"] == "csv" for r in csv_runs.values())
    for label, run in csv_runs.items():
        for name in SCORES:
            assert [v for _, v in run["history"][name]] == pytest.approx([h[name] for h in histories[label]], rel=1e-6)
            assert run["scores"][name]["best_epoch"] == tb_runs[label]["scores"][name]["best_epoch"]


def test_a_folder_of_runs_is_searched_recursively_and_labelled_by_path(two_runs, tmp_path, capsys):
    root, _ = two_runs
    out = tmp_path / "all.json"
    assert main(["runs", str(root), "--json", str(out), "--scores", "coverage"]) == 0
    labels = sorted(r["label"] for r in json.loads(out.read_text())["runs"])
    assert labels == ["csv/a", "csv/b", "tb/a", "tb/b"]
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header == ["coverage"]


# ---------------------------------------------------------------------------------- bad input
def _fails(argv, capsys, *words):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith("lightning-prd runs: error:"), err
    for word in words:
        assert word in err[0], err[0]
    return err[0]


def test_missing_and_empty_directories(tmp_path, capsys):
    _fails(["runs", str(tmp_path / "nope")], capsys, "nope", "no such directory")
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    _fails(["runs", str(tmp_path / "empty")], capsys, "no run found")
    (tmp_path / "file.txt").write_text("x")
    _fails(["runs", str(tmp_path / "file.txt")], capsys, "file.txt", "directory")


def test_runs_without_scores(tmp_path, capsys):
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(tmp_path / "plain") as writer:
        writer.add_scalar("loss", 1.0, 0)
    _fails(["runs", str(tmp_path / "plain")], capsys, "plain", "no 'prd/' scores", "loss")
    _fails(["runs", str(tmp_path)], capsys, "no 'prd/' scores")
    with SummaryWriter(tmp_path / "scored") as writer:  # next to a scored run: skipped with a warning
        writer.add_scalar("prd/precision", 0.5, 0)
    assert main(["runs", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "warning: skipped" in captured.err and "plain" in captured.err and "scored" in captured.out
    assert main(["runs", str(tmp_path), "--prefix", "other/"]) == 1
    assert "no 'other/' scores" in capsys.readouterr().err


def _csv_run(root, name, text, bom=False):
    run = root / name
    run.mkdir(parents=True)
    (run / "metrics.csv").write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return str(run)


def test_csv_epochs_must_be_finite_integers_and_columns_unique(tmp_path, capsys):
    for name, epoch in (("inf", "inf"), ("nan", "nan"), ("huge", "1e300"), ("half", "1.5"), ("negative", "-1")):
        run = _csv_run(tmp_path, name, f"epoch,prd/precision\n{epoch},0.5\n")
        _fails(["runs", run], capsys, "metrics.csv line 2", "non-negative integer in column 'epoch'", repr(epoch))
    run = _csv_run(tmp_path, "twice", "epoch,prd/precision,prd/precision\n0,0.5,0.6\n")
    _fails(["runs", run], capsys, "metrics.csv", "'prd/precision' appear more than once")


def test_csv_with_a_byte_order_mark_and_non_finite_scores_write_standard_json(tmp_path, capsys):
    run = _csv_run(tmp_path, "bom", "epoch,prd/precision,prd/recall\n0,nan,0.25\n1,0.5,inf\n", bom=True)
    out = tmp_path / "o.json"
    assert main(["runs", run, "--json", str(out)]) == 0
    payload = json.loads(out.read_text(), parse_constant=lambda name: pytest.fail(f"non-standard JSON {name}"))
    history = payload["runs"][0]["history"]
    assert history["precision"] == [[0, None], [1, 0.5]] and history["recall"] == [[0, 0.25], [1, None]]


def test_unreadable_files(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metrics.csv").write_text("epoch,prd/precision\n0,0.5\n1,oops\n")
    _fails(["runs", str(bad)], capsys, "metrics.csv line 3", "prd/precision", "oops")
    (bad / "metrics.csv").write_bytes(b"epoch,prd/precision\n0,\xff\xfe\x00\n")
    _fails(["runs", str(bad)], capsys, "metrics.csv", "cannot read")
    (bad / "metrics.csv").write_text("step,prd/precision\n0,0.5\n")
    _fails(["runs", str(bad)], capsys, "column 'epoch'")
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "events.out.tfevents.1.host").write_bytes(os.urandom(64))
    _fails(["runs", str(garbage)], capsys, "garbage", "no 'prd/' scores")


def test_wandb_offline_runs_are_named_as_unreadable(tmp_path, capsys):
    run = tmp_path / "wandb" / "offline-run-20260101_000000-abc"
    run.mkdir(parents=True)
    (run / "run-abc.wandb").write_bytes(b"\x00")
    _fails(["runs", str(tmp_path)], capsys, "W&B offline", "CSVLogger")


def test_outputs_never_overwrite_a_run_file(two_runs, tmp_path, capsys):
    root, _ = two_runs
    (event,) = glob.glob(str(root / "tb" / "a" / "events.out.tfevents.*"))[:1]
    with open(event, "rb") as fh:
        before = fh.read()
    _fails(["runs", str(root / "tb"), "--json", event], capsys, "refusing to overwrite", "events.out.tfevents")
    link = tmp_path / "link.png"
    os.link(root / "csv" / "a" / "metrics.csv", link)  # another name of an input file
    _fails(["runs", str(root / "csv"), "--plot", str(link)], capsys, "refusing to overwrite", "metrics.csv")
    with open(event, "rb") as fh:
        assert fh.read() == before
    assert (root / "csv" / "a" / "metrics.csv").read_text().startswith("epoch")
    _fails(["runs", str(root / "tb"), "--json", str(tmp_path)], capsys, "directory")
    _fails(["runs", str(root / "tb"), "--plot", str(tmp_path / "x.unknown")], capsys, "unsupported image format")
    same = str(tmp_path / "same")
    _fails(["runs", str(root / "tb"), "--json", same, "--plot", same], capsys, "the same file")


def test_help_has_an_example(capsys):
    assert main(["runs", "--help"]) == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "lightning-prd runs runs/gan_ring --plot runs.png" in text
    assert "W&B offline runs" in text


# ------------------------------------------------------------------------------------ which run is better
#: "better" written out from each score's definition, as a sort key (smaller first)
WORSE = {
    "precision": lambda v: -v,
    "recall": lambda v: -v,
    "coverage": lambda v: -v,
    "frechet_distance": lambda v: v,
    "density": lambda v: abs(v - 1),
}


@pytest.fixture(scope="module")
def opposite_runs(tmp_path_factory):
    """``a``: samples shrunk inside the real set (precise, poor recall); ``b``: spread beyond it (the opposite);
    ``a_again``: ``a`` fitted again, so its curves are identical to ``a``'s."""
    root = tmp_path_factory.mktemp("opposite")
    cheap = dict(prd=False, alpha_beta=False, pr_cover=False, probabilistic=False)
    _fit(root, "a", [0.3, 0.35, 0.4], [0.0, 0.0, 0.0], cheap)
    _fit(root, "b", [2.6, 2.3, 2.0], [0.0, 0.0, 0.0], cheap)
    _fit(root, "a_again", [0.3, 0.35, 0.4], [0.0, 0.0, 0.0], cheap)
    return root


def _last_values(run_dir):
    """``score -> value`` at the last step, read with TensorBoard's EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag[4:]: max(acc.Scalars(tag), key=lambda e: e.step).value for tag in acc.Tags()["scalars"]}


def test_the_runs_are_ranked_per_score_by_their_last_evaluation(opposite_runs, tmp_path, capsys):
    root = opposite_runs / "tb"
    last = {label: _last_values(root / label) for label in ("a", "a_again", "b")}
    expected = {name: sorted(["a", "a_again", "b"], key=lambda label: WORSE[name](last[label][name])) for name in WORSE}
    assert expected["precision"][0] != "b" and expected["recall"][0] == "b"  # opposite winners
    assert last["a"] == last["a_again"]

    out = tmp_path / "runs.json"
    assert main(["runs", str(root), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.split("fingerprints:")[0].splitlines()) <= 100  # table and verdicts
    payload = json.loads(out.read_text())
    for name in WORSE:
        assert payload["ranking"][name] == expected[name], name
        assert payload["identical_curves"][name] == [["a", "a_again"]]
    verdicts = text.split("the better run, by the last evaluation")[1].splitlines()[1:]
    for name in ("precision", "recall", "density", "coverage"):  # the table's scores: one verdict line each
        line = next(v for v in verdicts if v.split()[0] == name)
        ranked_part, _, note = line.partition("; ")
        order = [cell for cell in re.split(r" [>=] ", ranked_part.split(")", 1)[1].strip())]
        assert [cell.split()[0] for cell in order] == expected[name], line
        for cell in order:
            assert float(cell.split()[1]) == pytest.approx(last[cell.split()[0]][name], abs=5e-5)
        assert re.search(r"\ba \S+ = a_again\b|\ba_again \S+ = a\b", ranked_part), line  # equal values
        assert note == "identical curves: a, a_again", line
    assert [v.split()[0] for v in verdicts if v.strip()][:4] == ["precision", "recall", "density", "coverage"]
