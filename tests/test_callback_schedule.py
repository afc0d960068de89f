"""When PRDCallback scores: real Trainer runs over validation schedules and fit endings.

The rule: an epoch ``e`` with ``(e + 1) % every_n_epochs == 0`` is scored at the end of its last
validation run if it validates at its end, otherwise at the end of its training epoch; once;
never in the sanity check; the final weights are scored once more when no evaluation saw them.
Each case below states, from Lightning's documented schedule, which epochs validate at their end;
a probe records every validation run, so a wrong premise fails too.
"""

from __future__ import annotations

import time
import warnings

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback

from tiny_modules import TinyTrainable

pytestmark = pytest.mark.filterwarnings("ignore")

REAL = torch.randn(64, 2, generator=torch.Generator().manual_seed(0))
METRIC = dict(prd=False, alpha_beta=False)  # the schedule is under test, not the scores
VAL_END, TRAIN_END, FIT_END = "on_validation_epoch_end", "on_train_epoch_end", "on_train_end"


class Module(TinyTrainable):
    """2 training batches per epoch; ``sample`` records (hook, epoch, global step) and draws from a
    distribution that changes with the weights, so every evaluation differs."""

    def __init__(self, validation=True, log_constant=False):
        super().__init__()
        self.validation = validation
        self.log_constant = log_constant
        self.calls = []

    def training_step(self, batch, batch_idx):
        if self.log_constant:
            self.log("flat", 1.0, on_step=False, on_epoch=True)
        return super().training_step(batch, batch_idx)

    def sample(self, n):
        t = self.trainer
        self.calls.append((self._current_fx_name, t.current_epoch, t.global_step, t.sanity_checking))
        g = torch.Generator().manual_seed(t.global_step)
        return torch.randn(n, 2, generator=g) * (0.5 + 0.25 * t.global_step)


class WithVal(Module):
    def validation_step(self, batch, batch_idx):
        self.log("flat_val", 1.0)

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=4)


class ValProbe(pl.Callback):
    """Every validation run during fit: (epoch, global step, batches done in the epoch, sanity check)."""

    def __init__(self):
        self.runs = []

    def on_validation_epoch_end(self, trainer, pl_module):
        self.runs.append((trainer.current_epoch, trainer.global_step, trainer.sanity_checking))


def _fit(tmp_path, module, cb, callbacks=(), **kw):
    probe = ValProbe()
    opts = dict(
        max_epochs=6,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        num_sanity_val_steps=2,
    )
    opts.update(kw)
    trainer = pl.Trainer(callbacks=[cb, probe, *callbacks], **opts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module)
    return trainer, probe


def _cb(every_n_epochs=1, **kw):
    return PRDCallback(REAL, num_samples=32, every_n_epochs=every_n_epochs, metric=METRIC, **kw)


def _evaluations(module):
    """The ``sample`` calls of the evaluations: the first call of a fit is the dry run, in ``on_fit_start`` at
    step 0 (:mod:`lightning_prd.callback.dry_run`)."""
    assert module.calls[0] == ("on_fit_start", 0, 0, False), module.calls[:1]
    return module.calls[1:]


def _scored(module):
    return [(hook, epoch) for hook, epoch, _, _ in _evaluations(module)]


# (case id, module class, trainer options, every_n_epochs, validation runs (epoch, global step),
#  expected (hook, epoch) per evaluation)
SCHEDULES = [
    (
        "val every 3 epochs, every_n=2",
        WithVal,
        dict(check_val_every_n_epoch=3),
        2,
        [(2, 6), (5, 12)],
        [(TRAIN_END, 1), (TRAIN_END, 3), (VAL_END, 5)],
    ),
    (
        "val every 3 epochs, every_n=1",
        WithVal,
        dict(check_val_every_n_epoch=3),
        1,
        [(2, 6), (5, 12)],
        [(TRAIN_END, 0), (TRAIN_END, 1), (VAL_END, 2), (TRAIN_END, 3), (TRAIN_END, 4), (VAL_END, 5)],
    ),
    (
        "val every 2 epochs, every_n=3 (not dividing)",
        WithVal,
        dict(check_val_every_n_epoch=2),
        3,
        [(1, 4), (3, 8), (5, 12)],
        [(TRAIN_END, 2), (VAL_END, 5)],
    ),
    # steps 3, 6, 9, 12 of 2-batch epochs: mid epoch 1, end of epoch 2, mid epoch 4, end of epoch 5
    (
        "val every 3 steps across epochs",
        WithVal,
        dict(val_check_interval=3, check_val_every_n_epoch=None),
        1,
        [(1, 3), (2, 6), (4, 9), (5, 12)],
        [(TRAIN_END, 0), (TRAIN_END, 1), (VAL_END, 2), (TRAIN_END, 3), (TRAIN_END, 4), (VAL_END, 5)],
    ),
    (
        "val twice per epoch (fraction)",
        WithVal,
        dict(val_check_interval=0.5, max_epochs=3),
        1,
        [(0, 1), (0, 2), (1, 3), (1, 4), (2, 5), (2, 6)],
        [(VAL_END, 0), (VAL_END, 1), (VAL_END, 2)],
    ),
    (
        "val every epoch, every_n=2",
        WithVal,
        dict(max_epochs=4),
        2,
        [(0, 2), (1, 4), (2, 6), (3, 8)],
        [(VAL_END, 1), (VAL_END, 3)],
    ),
    ("limit_val_batches=0", WithVal, dict(limit_val_batches=0, max_epochs=4), 2, [], [(TRAIN_END, 1), (TRAIN_END, 3)]),
    (
        "no sanity check",
        WithVal,
        dict(num_sanity_val_steps=0, max_epochs=2),
        1,
        [(0, 2), (1, 4)],
        [(VAL_END, 0), (VAL_END, 1)],
    ),
    ("no validation loop", Module, dict(max_epochs=4), 2, [], [(TRAIN_END, 1), (TRAIN_END, 3)]),
]


@pytest.mark.parametrize("case, cls, opts, every_n, val_runs, expected", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_every_due_epoch_scored_once_at_the_right_hook(tmp_path, case, cls, opts, every_n, val_runs, expected):
    module = cls()
    cb = _cb(every_n)
    _, probe = _fit(tmp_path, module, cb, **opts)
    assert [(e, s) for e, s, sanity in probe.runs if not sanity] == val_runs  # the premise: Lightning's schedule
    assert _scored(module) == expected
    assert not any(sanity for *_, sanity in _evaluations(module))
    due = [e for e in range(opts.get("max_epochs", 6)) if (e + 1) % every_n == 0]
    assert [h["epoch"] for h in cb.history] == due  # max_epochs is a multiple: no final evaluation
    assert not any(h.get("final") for h in cb.history)


CHECKPOINTED = [
    ("val every epoch", WithVal, dict(max_epochs=4), 1),
    ("val every 2 epochs, every_n=2", WithVal, dict(max_epochs=4, check_val_every_n_epoch=2), 2),
    ("no validation loop", Module, dict(max_epochs=4), 1),
    ("limit_val_batches=0", WithVal, dict(max_epochs=4, limit_val_batches=0), 2),
]


@pytest.mark.parametrize("case, cls, opts, every_n", CHECKPOINTED, ids=[c[0] for c in CHECKPOINTED])
def test_model_checkpoint_sees_the_value_of_the_epoch_it_saves(tmp_path, case, cls, opts, every_n):
    ckpt = ModelCheckpoint(
        dirpath=tmp_path / "ckpt",
        monitor="prd/coverage",
        mode="max",
        save_top_k=-1,
        filename="e{epoch}",
        auto_insert_metric_name=False,
        every_n_epochs=every_n,
    )
    module, cb = cls(), _cb(every_n)
    _fit(tmp_path, module, cb, callbacks=[ckpt], enable_checkpointing=True, **opts)
    coverage = {h["epoch"]: h["coverage"] for h in cb.history}
    assert len(set(coverage.values())) > 1  # the epochs differ, so a stale value would show
    saved = sorted((tmp_path / "ckpt").glob("e*.ckpt"))
    assert [int(p.stem[1:]) for p in saved] == sorted(coverage)
    for path in saved:
        state = torch.load(path, weights_only=False)
        (ckpt_state,) = [v for k, v in state["callbacks"].items() if k.startswith("ModelCheckpoint")]
        assert float(ckpt_state["current_score"]) == pytest.approx(coverage[int(path.stem[1:])], abs=0), path.name
    assert float(ckpt.best_model_score) == max(coverage.values())


# ------------------------------------------------------------------------------ final weights
class StopAtStep(pl.Callback):
    def __init__(self, step):
        self.step = step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.step:
            trainer.should_stop = True


FINAL = [
    # case, module, trainer options, every_n, extra callbacks, expected (hook, epoch, final) per evaluation
    (
        "max_steps mid-epoch, with validation",
        WithVal,
        dict(max_steps=5),
        2,
        [],
        [(VAL_END, 1, False), (TRAIN_END, 2, True)],
    ),
    (
        "max_steps mid-epoch on a due epoch",
        WithVal,
        dict(max_steps=5),
        1,
        [],
        [(VAL_END, 0, False), (VAL_END, 1, False), (TRAIN_END, 2, False)],
    ),
    (
        "max_epochs not a multiple, with validation",
        WithVal,
        dict(max_epochs=5),
        2,
        [],
        [(VAL_END, 1, False), (VAL_END, 3, False), (TRAIN_END, 4, True)],
    ),
    (
        "max_epochs not a multiple, no validation",
        Module,
        dict(max_epochs=3),
        2,
        [],
        [(TRAIN_END, 1, False), (TRAIN_END, 2, True)],
    ),
    # EarlyStopping after validation: should_stop is known at on_train_epoch_end
    (
        "early stopping at validation end",
        WithVal,
        dict(max_epochs=6),
        3,
        [lambda: EarlyStopping(monitor="flat_val", patience=0, check_on_train_epoch_end=False)],
        [(TRAIN_END, 1, True)],
    ),
    # EarlyStopping's default with validation every epoch checks at train-epoch end
    (
        "early stopping, default check",
        WithVal,
        dict(max_epochs=6),
        3,
        [lambda: EarlyStopping(monitor="flat_val", patience=0)],
        [(FIT_END, 1, True)],
    ),
    # EarlyStopping at train-epoch end runs after this callback: the final evaluation waits for on_train_end
    (
        "early stopping at train epoch end",
        lambda: Module(log_constant=True),
        dict(max_epochs=6),
        3,
        [lambda: EarlyStopping(monitor="flat", patience=0, check_on_train_epoch_end=True)],
        [(FIT_END, 1, True)],
    ),
    # should_stop mid-epoch: Lightning validates right away and ends the epoch
    (
        "should_stop mid-epoch, due epoch",
        WithVal,
        dict(max_epochs=6),
        1,
        [lambda: StopAtStep(3)],
        [(VAL_END, 0, False), (VAL_END, 1, False)],
    ),
    (
        "should_stop mid-epoch, epoch not due",
        WithVal,
        dict(max_epochs=6),
        3,
        [lambda: StopAtStep(3)],
        [(TRAIN_END, 1, True)],
    ),
]


@pytest.mark.parametrize("case, cls, opts, every_n, extra, expected", FINAL, ids=[f[0] for f in FINAL])
def test_final_weights_scored_once(tmp_path, case, cls, opts, every_n, extra, expected):
    module, cb = cls(), _cb(every_n)
    trainer, _ = _fit(tmp_path, module, cb, callbacks=[make() for make in extra], **opts)
    # the epoch logged is the last epoch reached (at on_train_end, trainer.current_epoch is one past it)
    assert [(hook, h["epoch"], bool(h.get("final"))) for (hook, _), h in zip(_scored(module), cb.history)] == expected
    assert len(_evaluations(module)) == len(cb.history)
    assert module.calls[-1][2] == trainer.global_step  # the last evaluation saw the final weights
    assert float(trainer.callback_metrics["prd/coverage"]) == cb.history[-1]["coverage"]


class Slow(Module):
    def training_step(self, batch, batch_idx):
        time.sleep(0.2)
        return super().training_step(batch, batch_idx)


def test_max_time_scores_the_final_weights(tmp_path):
    module, cb = Slow(), _cb(50)
    trainer, _ = _fit(tmp_path, module, cb, max_epochs=50, max_time={"seconds": 1})
    assert trainer.current_epoch < 49  # stopped by the timer
    (call,) = _evaluations(module)
    assert call[0] in (TRAIN_END, FIT_END)
    assert cb.history[0]["final"] is True and call[2] == trainer.global_step


def test_final_evaluation_can_be_turned_off(tmp_path):
    module, cb = WithVal(), _cb(2, evaluate_on_train_end=False)
    _fit(tmp_path, module, cb, max_steps=5)
    assert [h["epoch"] for h in cb.history] == [1]


def test_evaluate_on_train_end_must_be_a_bool():
    with pytest.raises(TypeError, match="`evaluate_on_train_end`.*'yes'"):
        PRDCallback(REAL, evaluate_on_train_end="yes")
