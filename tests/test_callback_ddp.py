"""PRDCallback under 2-process CPU DDP (``ddp_spawn``, gloo) logs what one process logs on the same data.

The generated set is a fixed table and ``sample_fn`` returns the rows of the calling rank's
global batches (:func:`lightning_prd.callback.batches.rows_of`), so the gathered set is exactly the
single-process set, in the same order: even PRD (seeded k-means) must agree. The real set is a
DataLoader under DDP and a tensor in the single process, which also checks that the two sharding
paths agree. Set sizes are odd, so the shards are uneven.
"""

from __future__ import annotations

import csv
import json
import os
import warnings

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback
from lightning_prd.callback.batches import rows_of

from tiny_modules import TinyTrainable

N_REAL, N_FAKE, EPOCHS = 97, 81, 2
REAL = torch.randn(N_REAL, 2, generator=torch.Generator().manual_seed(0))
FAKE = torch.randn(N_FAKE, 2, generator=torch.Generator().manual_seed(1))


def sample_fn(pl_module, n):
    """This rank's block of rows of the fixed table, scaled by an epoch-dependent factor."""
    trainer = pl_module.trainer
    idx = list(rows_of(N_FAKE, N_FAKE, trainer.global_rank, trainer.world_size))  # one global batch
    if pl_module._current_fx_name == "on_fit_start" and n == 2:  # the callback's dry run before training
        idx = [0, 1]
    if n != len(idx):
        raise RuntimeError(f"rank {trainer.global_rank} asked for {n} samples, its shard has {len(idx)}")
    return FAKE[idx] * (0.5 + 0.5 * trainer.current_epoch)


class Tiny(TinyTrainable):
    train_batch = 2


class Dump(pl.Callback):
    """Writes each rank's ``prd/*`` callback metrics per epoch to JSON (runs after PRDCallback).

    It also destroys the gloo process group at teardown. Lightning leaves a gloo group to
    process exit, and after gloo ``all_gather`` calls (the metric's sync) a spawned worker then
    sometimes aborts at exit with "terminate called without an active exception" (about 1 run
    in 10 here, never with the group destroyed first), which fails the launcher.
    """

    def __init__(self, out_dir):
        self.out_dir = str(out_dir)

    def teardown(self, trainer, pl_module, stage):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    def on_train_epoch_end(self, trainer, pl_module):
        values = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("prd/")}
        with open(
            os.path.join(self.out_dir, f"rank{trainer.global_rank}_epoch{trainer.current_epoch}.json"), "w"
        ) as fh:
            json.dump(values, fh)


def _fit(tmp_path, name, real, **trainer_kwargs):
    out = tmp_path / name
    out.mkdir()
    cb = PRDCallback(real, sample_fn=sample_fn, num_samples=N_FAKE, batch_size=N_FAKE)
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        logger=CSVLogger(tmp_path, name=name),
        callbacks=[cb, Dump(out)],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **trainer_kwargs,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Tiny())
    return out, trainer


def _dumped(out, rank):
    return [json.loads((out / f"rank{rank}_epoch{e}.json").read_text()) for e in range(EPOCHS)]


def _csv(trainer_dir):
    with open(os.path.join(trainer_dir, "metrics.csv")) as fh:
        return [r for r in csv.DictReader(fh) if r.get("prd/coverage")]


@pytest.mark.filterwarnings("ignore")
def test_two_process_ddp_logs_the_single_process_values(tmp_path):
    single_out, single = _fit(tmp_path, "single", REAL, devices=1)
    loader = DataLoader(TensorDataset(REAL), batch_size=10, shuffle=False)
    ddp_out, _ = _fit(tmp_path, "ddp", loader, devices=2, strategy="ddp_spawn")

    expected = _dumped(single_out, 0)
    assert {f"prd/{k}" for k in ("precision", "recall", "density", "coverage", "frechet_distance")} <= set(expected[0])
    assert expected[0] != expected[1]  # the epochs differ, so equal values below are not a coincidence
    for rank in (0, 1):
        got = _dumped(ddp_out, rank)
        for e in range(EPOCHS):
            assert got[e].keys() == expected[e].keys()
            for key, value in expected[e].items():
                assert got[e][key] == pytest.approx(value, rel=1e-5, abs=1e-6), (rank, e, key)

    single_rows = _csv(single.log_dir)
    ddp_rows = _csv(str(tmp_path / "ddp" / "version_0"))  # written by rank 0 only
    assert [int(r["epoch"]) for r in ddp_rows] == list(range(EPOCHS))
    for a, b in zip(ddp_rows, single_rows):
        assert float(a["prd/coverage"]) == pytest.approx(float(b["prd/coverage"]), rel=1e-6)


class ShardedReal(pl.Callback):
    """Gives the PRDCallback, in each process, a real DataLoader with this rank's DistributedSampler
    (what a user gets from a loader Lightning prepared), before the first evaluation."""

    def __init__(self, prd):
        self.prd = prd

    def setup(self, trainer, pl_module, stage):
        dataset = TensorDataset(REAL)
        sampler = torch.utils.data.DistributedSampler(dataset, shuffle=True, seed=3)  # 97 rows on 2 ranks: 1 padded
        self.prd.real = DataLoader(dataset, batch_size=10, sampler=sampler)


@pytest.mark.filterwarnings("ignore")
def test_distributed_sampler_padding_is_left_out_under_ddp(tmp_path):
    """Rank 1's shard ends with a padding copy of a real sample; the callback leaves it out, so
    every k-NN score equals the single process's exactly (the gathered order differs: PRD's
    seeded clustering is order-dependent, so F-scores are not compared; Fréchet to rounding)."""
    single_out, _ = _fit(tmp_path, "single", REAL, devices=1)
    out = tmp_path / "sharded"
    out.mkdir()
    cb = PRDCallback(REAL, sample_fn=sample_fn, num_samples=N_FAKE, batch_size=N_FAKE)
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        logger=False,
        callbacks=[ShardedReal(cb), cb, Dump(out)],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        devices=2,
        strategy="ddp_spawn",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Tiny())
    expected = _dumped(single_out, 0)
    exact = ("precision", "recall", "density", "coverage", "alpha_precision", "beta_recall", "authenticity")
    for rank in (0, 1):
        got = _dumped(out, rank)
        for e in range(EPOCHS):
            for key in exact:
                assert got[e][f"prd/{key}"] == expected[e][f"prd/{key}"], (rank, e, key)
            assert got[e]["prd/frechet_distance"] == pytest.approx(expected[e]["prd/frechet_distance"], rel=1e-6)
