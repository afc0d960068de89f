"""What TensorBoard and W&B show after a resume: every epoch once, the values of an uninterrupted run.

TensorBoard events are read with tensorboard's own ``EventAccumulator``. A run killed after its
epoch-2 checkpoint has already written epoch 3's events; the resumed run writes epoch 3 again.
TensorBoard's data server (the default reader of ``tensorboard --logdir``) keeps, per tag, the
newest record when a step repeats or goes back ("preemption": a record at step ``s`` drops the
earlier records at steps ``>= s``; checked against ``tensorboard --logdir`` 2.21's HTTP API on such
a run); :func:`shown` applies that rule to the raw events.

The W&B table is read from the offline run directory (``files/media/table/.../*.table.json``,
wandb's own JSON export of ``wandb.Table``): the largest one is the table of the last epoch.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import TensorBoardLogger
from test_callback import REAL, Tiny, trainer
from test_loggers import offline_wandb_env

from lightning_prd.callback import PRDCallback
from lightning_prd.runs.reader import load_runs

pytestmark = pytest.mark.filterwarnings("ignore")

SCALES = (2.0, 1.5, 1.0, 0.8, 0.6)  # a different generated distribution every epoch
EPOCHS = len(SCALES)
TAGS = ("prd/epoch", "prd/precision", "prd/recall", "prd/density", "prd/coverage")
HERE = os.path.dirname(__file__)


def _cb():
    return PRDCallback(REAL, num_samples=128)


def _fit(root, cb, max_epochs, loggers, ckpt_path=None, callbacks=()):
    t = trainer(
        root,
        callbacks=[cb, *callbacks],
        max_epochs=max_epochs,
        logger=list(loggers),
        enable_checkpointing=bool(callbacks),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t.fit(Tiny(SCALES), ckpt_path=ckpt_path)
    return t


def _tb(root, name):
    return TensorBoardLogger(str(root), name=name, version=0)


def _events(log_dir):
    """Raw events per tag: scalars as (step, value), PR curves and figures as (step, payload)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(log_dir, size_guidance={"scalars": 0, "tensors": 0, "images": 0})
    acc.Reload()
    tags = acc.Tags()
    out = {t: [(e.step, round(e.value, 6)) for e in acc.Scalars(t)] for t in TAGS}
    out["prd/prd_curve"] = (
        [
            (e.step, bytes(e.tensor_proto.tensor_content) or tuple(e.tensor_proto.float_val))
            for e in acc.Tensors("prd/prd_curve")
        ]
        if "prd/prd_curve" in tags["tensors"]
        else []
    )
    out["prd/figures/trajectory"] = [(e.step, None) for e in acc.Images("prd/figures/trajectory")]
    return out


def shown(events):
    """TensorBoard data server's per-tag rule: a record at step s replaces every earlier one at steps >= s."""
    kept = []
    for step, value in events:
        kept = [(s, v) for s, v in kept if s < step] + [(step, value)]
    return kept


def _wandb(root, name, monkeypatch):
    pytest.importorskip("wandb")
    from pytorch_lightning.loggers import WandbLogger

    save_dir = root / f"wandb_{name}"
    save_dir.mkdir(parents=True)
    offline_wandb_env(monkeypatch, save_dir)
    return WandbLogger(save_dir=str(save_dir), offline=True, project="prd-resume", name=name)


def _wandb_table(logger):
    import wandb

    wandb.finish()
    (run_dir,) = glob.glob(os.path.join(logger.save_dir, "wandb", "offline-run-*"))
    tables = []
    for path in glob.glob(os.path.join(run_dir, "files", "media", "table", "prd", "prd_curve_table_*.json")):
        with open(path) as fh:
            tables.append(json.load(fh))
    return max(tables, key=lambda t: len(t["data"]))


def _table_epochs(table):
    epochs = [row[0] for row in table["data"]]
    return sorted(set(epochs)), {e: epochs.count(e) for e in set(epochs)}


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted 5-epoch run: its TensorBoard events and W&B table."""
    root = tmp_path_factory.mktemp("straight")
    mp = pytest.MonkeyPatch()
    try:
        tb, wb = _tb(root, "tb"), _wandb(root, "straight", mp)
        cb = _cb()
        _fit(root, cb, EPOCHS, [tb, wb])
        return cb, _events(tb.log_dir), _wandb_table(wb)
    finally:
        mp.undo()


def _check_same_as_straight(straight, cb, events, table, raw_once=True):
    straight_cb, straight_events, straight_table = straight
    assert cb.history == straight_cb.history
    assert [v for _, v in straight_events["prd/epoch"]] == list(range(EPOCHS))  # the reference: each epoch once,
    steps = [s for s, _ in straight_events["prd/epoch"]]  # at the step of its end
    assert steps == sorted(set(steps))
    for tag, seq in straight_events.items():
        assert [s for s, _ in seq] == steps, tag
        if raw_once:
            assert events[tag] == seq, tag
        assert shown(events[tag]) == seq, tag
    epochs, counts = _table_epochs(table)
    assert epochs == list(range(EPOCHS)) and len(set(counts.values())) == 1  # each epoch once, as many points
    assert table["columns"] == straight_table["columns"] and table["data"] == straight_table["data"]


def test_resume_from_last_checkpoint_tensorboard_and_wandb(tmp_path, monkeypatch, straight):
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    wb1 = _wandb(tmp_path, "part1", monkeypatch)
    _fit(tmp_path, _cb(), 3, [_tb(tmp_path, "tb"), wb1], callbacks=[ckpt])
    first_table = _wandb_table(wb1)
    assert _table_epochs(first_table)[0] == [0, 1, 2]

    wb2 = _wandb(tmp_path, "part2", monkeypatch)
    tb = _tb(tmp_path, "tb")  # the same version directory: TensorBoard shows one run
    cb = _cb()
    _fit(tmp_path, cb, EPOCHS, [tb, wb2], ckpt_path=ckpt.last_model_path)
    assert [h["epoch"] for h in cb.history] == list(range(EPOCHS))
    _check_same_as_straight(straight, cb, _events(tb.log_dir), _wandb_table(wb2))


CHILD = """
import os, signal, sys, warnings
sys.path[:0] = [{root!r}, {tests!r}]
import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import TensorBoardLogger
from test_callback import REAL, Tiny, trainer
from lightning_prd.callback import PRDCallback

class KillAfterLogging(pl.Callback):
    # runs after PRDCallback has logged epoch 3 and before ModelCheckpoint saves it
    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.current_epoch == 3:
            os.kill(os.getpid(), signal.SIGKILL)

ckpt = ModelCheckpoint(dirpath={ckpt!r}, save_last=True)
cb = PRDCallback(REAL, num_samples=128)
t = trainer({out!r}, callbacks=[cb, KillAfterLogging(), ckpt], max_epochs={epochs}, enable_checkpointing=True,
            logger=TensorBoardLogger({out!r}, name="tb", version=0))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t.fit(Tiny({scales!r}))
"""


def test_sigkilled_run_resumed_from_its_last_checkpoint(tmp_path, monkeypatch, straight):
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(
            CHILD.format(
                root=os.path.dirname(HERE),
                tests=HERE,
                ckpt=str(tmp_path / "ckpt"),
                out=str(tmp_path),
                epochs=EPOCHS,
                scales=SCALES,
            )
        )
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    last = str(tmp_path / "ckpt" / "last.ckpt")
    saved = torch.load(last, weights_only=False)["callbacks"]["PRDCallback{'prefix': 'prd/'}"]
    assert [h["epoch"] for h in saved["history"]] == [0, 1, 2]
    before = _events(str(tmp_path / "tb" / "version_0"))
    assert [v for _, v in before["prd/epoch"]] == [0, 1, 2, 3]  # epoch 3 was logged after the checkpoint
    assert [s for s, _ in before["prd/coverage"]] == [s for s, _ in before["prd/epoch"]]

    wb = _wandb(tmp_path, "resumed", monkeypatch)
    tb = _tb(tmp_path, "tb")
    cb = _cb()
    _fit(tmp_path, cb, EPOCHS, [tb, wb], ckpt_path=last)
    events = _events(tb.log_dir)
    assert [v for _, v in events["prd/epoch"]] == [0, 1, 2, 3, 3, 4]  # raw: epoch 3 twice on disk, at one step
    assert [s for s, _ in events["prd/coverage"]] == [s for s, _ in events["prd/epoch"]]
    _check_same_as_straight(straight, cb, events, _wandb_table(wb), raw_once=False)
    (run,) = load_runs([tb.log_dir])  # lightning-prd runs: each epoch once, the resumed run's value
    assert [e for e, _ in run.scores["coverage"]] == list(range(EPOCHS))
    assert [v for _, v in run.scores["coverage"]] == pytest.approx([h["coverage"] for h in cb.history], rel=1e-6)


def test_checkpoint_state_is_compact(tmp_path):
    """About 0.8 kB per evaluation in the checkpoint: scores and the 127-point float16 PRD curve."""
    import io

    cb = _cb()
    _fit(tmp_path, cb, 4, [])

    def size(state):
        buf = io.BytesIO()
        torch.save(state, buf)
        return len(buf.getvalue())

    state = cb.state_dict()
    per_epoch = (
        size(state) - size({**state, "history": state["history"][:1], "prd_curves": state["prd_curves"][:1]})
    ) / 3
    assert per_epoch < 1000, per_epoch
