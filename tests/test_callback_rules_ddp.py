"""PRDEarlyStopping under 2-process CPU DDP (``ddp_spawn``, gloo): every rank checks the same evaluations
(its stop decision is a collective), so the ranks stop together, at the epoch one process stops at, and
the user's RNG of every rank ends as a run without the callback leaves it."""

from __future__ import annotations

import json
import os
import random
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from lightning_prd.callback import PRDCallback, PRDEarlyStopping

from tiny_modules import GaussianSampler, ScriptedScores, quiet_settings

REAL = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
SCORES = [0.5, 0.6, 0.55, 0.54, 0.9]  # best at the 2nd evaluation, then two that do not improve


def noisy_extractor(x):
    return x + 0.01 * torch.rand_like(x) + 0 * (float(np.random.rand()) + random.random())


class Dump(pl.Callback):
    """Each rank's evaluated epochs, stop epoch and next RNG draws after the fit, as JSON."""

    def __init__(self, prd, stop, folder):
        self.prd, self.stop, self.folder = prd, stop, str(folder)

    def on_train_end(self, trainer, pl_module):
        info = {
            "epochs": [h["epoch"] for h in self.prd.history] if self.prd else [],
            "stopped": self.stop.stopped_epoch if self.stop else None,
            "next_draws": [torch.rand(()).item(), float(np.random.rand()), random.random()],
        }
        with open(os.path.join(self.folder, f"rank{trainer.global_rank}.json"), "w") as fh:
            json.dump(info, fh)

    def teardown(self, trainer, pl_module, stage):  # see tests/test_callback_ddp.py: Dump.teardown
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _fit(tmp_path, name, with_callbacks, max_epochs):
    out = tmp_path / name
    out.mkdir()
    prd = stop = None
    callbacks = []
    if with_callbacks:
        prd = PRDCallback(
            REAL, feature_extractor=noisy_extractor, num_samples=40, metric=ScriptedScores(SCORES), every_n_epochs=2
        )
        stop = PRDEarlyStopping(monitor="prd/coverage", patience=2)
        callbacks = [prd, stop]
    settings = quiet_settings(tmp_path, [*callbacks, Dump(prd, stop, out)], max_epochs=max_epochs)
    trainer = pl.Trainer(**settings, accelerator="cpu", devices=2, strategy="ddp_spawn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pl.seed_everything(0, verbose=False)
        trainer.fit(GaussianSampler())
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]


@pytest.mark.filterwarnings("ignore")
def test_prd_early_stopping_stops_every_rank_at_the_same_evaluation(tmp_path):
    ranks = _fit(tmp_path, "ddp", True, max_epochs=20)
    assert len(ranks) == 2
    for info in ranks:
        assert info["epochs"] == [1, 3, 5, 7] and info["stopped"] == 7
    plain = _fit(tmp_path, "plain", False, max_epochs=8)  # the same epochs without the callbacks
    assert [r["next_draws"] for r in ranks] == [r["next_draws"] for r in plain]
