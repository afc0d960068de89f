"""The final-weights evaluation under 2-process CPU DDP (``ddp_spawn``, gloo): every rank takes part
(the metric all-gathers), every rank records the single-process scores, at the same epoch.

``sample_fn`` returns the calling rank's block of a fixed table scaled by the global step, so the
gathered set is the single-process set and the final weights give new scores.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping

from lightning_prd.callback import PRDCallback
from lightning_prd.callback.batches import rows_of

from tiny_modules import TinyTrainable

N_REAL, N_FAKE = 61, 45
REAL = torch.randn(N_REAL, 2, generator=torch.Generator().manual_seed(0))
FAKE = torch.randn(N_FAKE, 2, generator=torch.Generator().manual_seed(1))
METRIC = dict(prd=False, alpha_beta=False)


def sample_fn(pl_module, n):
    t = pl_module.trainer
    idx = list(rows_of(N_FAKE, 1024, t.global_rank, t.world_size))  # one global batch
    if pl_module._current_fx_name == "on_fit_start" and n == 2:  # the callback's dry run before training
        idx = [0, 1]
    assert n == len(idx)
    return FAKE[idx] * (0.5 + 0.2 * t.global_step)


class Module(TinyTrainable):
    train_rows, train_batch = 8, 2  # 4 batches per epoch on one process, 2 per rank under 2-process DDP

    def training_step(self, batch, batch_idx):
        self.log("flat", 1.0, on_step=False, on_epoch=True, sync_dist=True)
        return super().training_step(batch, batch_idx)


class Dump(pl.Callback):
    """Writes each rank's history and hook names at the end of fit (runs after PRDCallback)."""

    def __init__(self, prd, out_dir):
        self.prd, self.out_dir = prd, str(out_dir)

    def on_train_end(self, trainer, pl_module):
        with open(os.path.join(self.out_dir, f"rank{trainer.global_rank}.json"), "w") as fh:
            json.dump({"history": self.prd.history, "global_step": trainer.global_step}, fh)

    def teardown(self, trainer, pl_module, stage):  # see test_callback_ddp.Dump
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _fit(tmp_path, name, extra=(), **kw):
    out = tmp_path / name
    out.mkdir()
    cb = PRDCallback(REAL, sample_fn=sample_fn, num_samples=N_FAKE, metric=METRIC, every_n_epochs=3)
    t = pl.Trainer(
        accelerator="cpu",
        logger=False,
        callbacks=[cb, *[make() for make in extra], Dump(cb, out)],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **kw,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t.fit(Module())
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]


CASES = [
    # max_steps inside epoch 1 (2 steps per epoch per rank), not due (every_n_epochs=3): final at on_train_epoch_end
    ("max_steps", dict(max_steps=3, max_epochs=10), (), [(1, 3)]),
    # EarlyStopping at train-epoch end runs after PRDCallback: final at on_train_end
    (
        "early stopping",
        dict(max_epochs=10),
        (lambda: EarlyStopping(monitor="flat", patience=0, check_on_train_epoch_end=True),),
        [(1, 4)],
    ),
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case, opts, extra, expected", CASES, ids=[c[0] for c in CASES])
def test_final_evaluation_on_every_rank(tmp_path, case, opts, extra, expected):
    ddp = _fit(tmp_path, "ddp", extra, devices=2, strategy="ddp_spawn", **opts)
    assert len(ddp) == 2
    for rank in ddp:
        assert [(h["epoch"], rank["global_step"]) for h in rank["history"]] == expected
        assert all(h["final"] for h in rank["history"])
    assert ddp[0]["history"] == ddp[1]["history"]  # every rank computed the same values
    # one process with batches of 4 has 2 batches per epoch too: the same steps, epochs and samples
    Module.train_batch = 4
    try:
        (single,) = _fit(tmp_path, "single", extra, devices=1, **opts)
    finally:
        Module.train_batch = 2
    assert [(h["epoch"], single["global_step"]) for h in single["history"]] == expected
    for key, value in single["history"][0].items():
        assert ddp[0]["history"][0][key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
