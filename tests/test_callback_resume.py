"""PRDCallback across checkpoint and resume: every epoch evaluated and logged once, the history
kept, the same scores as an uninterrupted run, the real side extracted once per fit."""

from __future__ import annotations

import csv
import warnings

import pytest
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from test_callback import REAL, Tiny, trainer

from lightning_prd.callback import PRDCallback

pytestmark = pytest.mark.filterwarnings("ignore")

SCALES = (2.0, 1.5, 1.0, 0.8)  # a different generated distribution every epoch


class Counting(PRDCallback):
    """Counts how often the real set is embedded."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.real_extractions = 0

    def _update_real(self, *args, **kwargs):
        self.real_extractions += 1
        return super()._update_real(*args, **kwargs)


def _fit(tmp_path, cb, max_epochs, ckpt_path=None, callbacks=(), logger=False, **kw):
    t = trainer(tmp_path, callbacks=[cb, *callbacks], max_epochs=max_epochs, logger=logger, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t.fit(Tiny(SCALES), ckpt_path=ckpt_path)
    return t


def _logged_epochs(logger):
    with open(f"{logger.log_dir}/metrics.csv") as fh:
        return [int(r["epoch"]) for r in csv.DictReader(fh) if r.get("prd/coverage")]


def test_resumed_run_equals_uninterrupted_run(tmp_path):
    straight = Counting(REAL, num_samples=128)
    _fit(tmp_path / "straight", straight, max_epochs=4)
    assert straight.real_extractions == 1  # once per fit: kept with its radii afterwards
    assert [h["epoch"] for h in straight.history] == [0, 1, 2, 3]

    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    first = Counting(REAL, num_samples=128)
    _fit(tmp_path / "first", first, max_epochs=2, callbacks=[ckpt], enable_checkpointing=True)
    resumed = Counting(REAL, num_samples=128)
    logger = CSVLogger(tmp_path, name="resumed")
    _fit(tmp_path / "second", resumed, max_epochs=4, ckpt_path=ckpt.last_model_path, logger=logger)

    assert resumed.history == straight.history  # same scores, epoch by epoch, history carried over
    assert resumed.real_extractions == 1  # rebuilt once in the new process, not per epoch
    assert _logged_epochs(logger) == [2, 3]  # epochs 0 and 1 are not logged again


def test_mid_epoch_checkpoint_evaluates_that_epoch_once(tmp_path):
    """A checkpoint taken mid-epoch (before that epoch's evaluation) resumes into the epoch and
    evaluates it once, at its end."""
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=3, save_top_k=-1)
    first = PRDCallback(REAL, num_samples=128)
    _fit(tmp_path / "first", first, max_epochs=2, callbacks=[ckpt], enable_checkpointing=True)
    mid = sorted((tmp_path / "ckpt").glob("*step=3*.ckpt"))  # 2 steps per epoch: step 3 is inside epoch 1
    assert len(mid) == 1
    saved = torch.load(mid[0], weights_only=False)
    assert saved["epoch"] == 1
    assert [h["epoch"] for h in saved["callbacks"][first.state_key]["history"]] == [0]

    straight = PRDCallback(REAL, num_samples=128)
    _fit(tmp_path / "straight", straight, max_epochs=3)
    resumed = PRDCallback(REAL, num_samples=128)
    logger = CSVLogger(tmp_path, name="resumed")
    _fit(tmp_path / "second", resumed, max_epochs=3, ckpt_path=str(mid[0]), logger=logger)
    assert [h["epoch"] for h in resumed.history] == [0, 1, 2]
    assert resumed.history == straight.history
    assert _logged_epochs(logger) == [1, 2]


def test_checkpoint_holds_the_history_not_the_features(tmp_path):
    """The callback checkpoints its score history only: no feature tensors inflate checkpoints,
    and the real side is rebuilt from ``real`` on resume."""
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    cb = PRDCallback(REAL, num_samples=64)
    _fit(tmp_path, cb, max_epochs=1, callbacks=[ckpt], enable_checkpointing=True)
    state = torch.load(ckpt.last_model_path, weights_only=False)["callbacks"][cb.state_key]
    assert set(state) == {"history", "prd_curves", "scored_step", "fingerprint"}
    assert all(isinstance(v, (int, float)) for h in state["history"] for v in h.values())
    (curve,) = state["prd_curves"]  # the compact PRD curve, not features: [2, <= 127] float16
    assert curve["epoch"] == 0 and curve["prd_precision_recall"].dtype == torch.float16
    assert curve["prd_precision_recall"].shape == (2, 127)
