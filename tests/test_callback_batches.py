"""The callback's batches (:mod:`lightning_prd.callback.batches`): global generated batches seeded per batch,
so the scores do not depend on the number of processes, and batch sizes that halve on out of memory.

Out of memory is raised on the CPU by stand-ins: an extractor and a generator that raise
``torch.OutOfMemoryError`` above a row count. A run that meets it must end with the scores of a run at the
size that worked from the start, with one warning over the fit.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest
import pytorch_lightning as pl
import torch
from torch import nn

from lightning_prd.callback import PRDCallback
from lightning_prd.callback.batches import (
    CUSTOM_BATCH,
    OutOfMemory,
    batch_seed,
    extraction_batch,
    rank_batches,
    rows_of,
)
from lightning_prd.features import FIDInceptionFeatures, Identity, VGG16Features

from tiny_modules import QUIET, GaussianSampler

REAL = torch.randn(150, 2, generator=torch.Generator().manual_seed(0))
KNN = ("precision", "recall", "density", "coverage")


class Linear(nn.Module):
    """A seeded linear map (row by row); raises out of memory on more than ``limit`` rows; counts its calls."""

    default_batch_size = 256

    def __init__(self, limit=None):
        super().__init__()
        self.lin = nn.Linear(2, 3)
        with torch.no_grad():
            self.lin.weight.copy_(torch.tensor([[1.0, 0.5], [-0.25, 2.0], [0.75, -1.0]]))
            self.lin.bias.zero_()
        self.limit, self.calls = limit, []

    def forward(self, x):
        self.calls.append(x.shape[0])
        if self.limit is not None and x.shape[0] > self.limit:
            raise torch.OutOfMemoryError(f"stand-in: {x.shape[0]} rows")
        return self.lin(x)


class Sampler(GaussianSampler):
    """``sample(n)`` from the seeded global generator; out of memory above ``limit`` rows; counts its calls."""

    def __init__(self, limit=None):
        super().__init__()
        self.limit, self.calls = limit, []

    def sample(self, n):
        self.calls.append(n)
        if self.limit is not None and n > self.limit:
            raise torch.OutOfMemoryError(f"stand-in: {n} samples")
        return super().sample(n)


def _fit(cb, module, epochs=2):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pl.Trainer(max_epochs=epochs, accelerator="cpu", callbacks=[cb], **QUIET).fit(module)
    return [str(w.message) for w in caught if "out of memory" in str(w.message)]


def _scores(cb):
    return [{k: v for k, v in h.items() if k != "epoch"} for h in cb.history]


# --------------------------------------------------------------------------- the split
@pytest.mark.parametrize(("total", "size"), [(150, 100), (81, 20), (5, 2), (3, 7), (64, 16)])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_ranks_draw_whole_global_batches_in_order(total, size, world):
    rows = [rows_of(total, size, r, world) for r in range(world)]
    assert [i for r in rows for i in r] == list(range(total))  # gathered in rank order: the global order
    calls = [len(rank_batches(total, size, r, world)) for r in range(world)]
    assert max(calls) - min(calls) <= 1 and sum(calls) == -(-total // size)
    for r in range(world):  # whole batches: a rank starts where a batch starts
        assert rows[r].start % size == 0 or rows[r].start == total


def test_batch_seeds_are_batch_zero_seed_then_distinct_streams():
    assert batch_seed(5, 0) == 5
    seeds = [batch_seed(5, b) for b in range(1, 200)]
    assert len(set(seeds)) == len(seeds) and 5 not in seeds and 6 not in seeds


def test_extraction_batch_defaults():
    assert extraction_batch(FIDInceptionFeatures) == FIDInceptionFeatures.default_batch_size == 128
    assert extraction_batch(VGG16Features) == VGG16Features.default_batch_size == 64
    assert extraction_batch(None) is extraction_batch(Identity()) is extraction_batch(lambda x: x) is None  # as read
    assert extraction_batch(nn.Linear(2, 2)) == CUSTOM_BATCH
    assert extraction_batch(Linear(), given=8) == 8


def test_extract_batch_size_refused_when_not_positive():
    with pytest.raises(ValueError, match="Expected argument `extract_batch_size` to be a positive integer, but got 0"):
        PRDCallback(REAL, extract_batch_size=0)


# --------------------------------------------------------------------------- out of memory
def test_extractor_out_of_memory_halves_to_the_size_that_fits(tmp_path):
    """Default 256 rows; more than 64 run out of memory: one warning, then the scores of a batch-64 run."""
    extractor = Linear(limit=64)
    cb = PRDCallback(REAL, feature_extractor=extractor, num_samples=150, batch_size=100, log_curves=False)
    warned = _fit(cb, Sampler())
    assert len(warned) == 1 and "feature extraction at batch size 256; batch size 64 worked" in warned[0], warned
    assert cb._extraction.size == 64  # kept: the second evaluation ran at 64 without a warning
    assert extractor.calls[-3:] == [64, 36, 50]  # the second evaluation: batches of 100 and 50 generated samples

    plain = PRDCallback(
        REAL, feature_extractor=Linear(), extract_batch_size=64, num_samples=150, batch_size=100, log_curves=False
    )
    assert _fit(plain, Sampler()) == []
    assert _scores(cb) == _scores(plain) and len(cb.history) == 2


def test_generator_out_of_memory_draws_again_at_the_size_that_fits(tmp_path):
    """Sampling batch 100; more than 32 samples run out of memory: 100 → 50 → 25, one warning, and the
    generated set (hence the scores) of a run at batch size 25 from the start."""
    module = Sampler(limit=32)
    cb = PRDCallback(REAL, num_samples=150, batch_size=100, log_curves=False)
    warned = _fit(cb, module)
    assert len(warned) == 1 and "sampling at batch size 100; batch size 25 worked" in warned[0], warned
    assert module.calls[-6:] == [25] * 6  # the second evaluation: 6 batches of 25, no failed call

    plain = PRDCallback(REAL, num_samples=150, batch_size=25, log_curves=False)
    assert _fit(plain, Sampler()) == []
    assert _scores(cb) == _scores(plain)


def test_out_of_memory_at_batch_size_one_passes_through(tmp_path):
    cb = PRDCallback(REAL, feature_extractor=Linear(limit=0), num_samples=20, batch_size=4, log_curves=False)
    with pytest.raises(OutOfMemory, match="stand-in: 1 rows"):
        _fit(cb, Sampler(), epochs=1)


# --------------------------------------------------------------------------- 1 process == 2 processes
class Dump(pl.Callback):
    """Writes, per rank, the PRDCallback's last scores and this rank's generated samples (after it, in order)."""

    def __init__(self, out_dir):
        self.out_dir = str(out_dir)

    def on_train_epoch_end(self, trainer, pl_module):
        prd = next(c for c in trainer.callbacks if isinstance(c, PRDCallback))
        rank = trainer.global_rank
        with open(os.path.join(self.out_dir, f"rank{rank}.json"), "w") as fh:
            json.dump(prd.history[-1], fh)
        torch.save(pl_module.drawn, os.path.join(self.out_dir, f"rank{rank}.pt"))

    def teardown(self, trainer, pl_module, stage):  # see tests/test_callback_ddp.py: Dump.teardown
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


class Recording(GaussianSampler):
    """Keeps what it draws for the evaluation (one per fit here); on rank ``oom_rank``, more than 8 samples run out
    of memory."""

    def __init__(self, oom_rank=None):
        super().__init__()
        self.oom_rank = oom_rank

    def sample(self, n):
        if self.trainer.global_rank == self.oom_rank and n > 8:
            raise torch.OutOfMemoryError(f"stand-in: {n} samples")
        x = super().sample(n)
        if self._current_fx_name != "on_fit_start":  # not the callback's dry run before training
            self.drawn = getattr(self, "drawn", []) + [x]
        return x


def _run(tmp_path, name, batch_size=16, oom_rank=None, **trainer_kwargs):
    out = tmp_path / name
    out.mkdir()
    cb = PRDCallback(REAL, num_samples=70, batch_size=batch_size, log_curves=False)  # 16: 3 batches on rank 0, 2
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", callbacks=[cb, Dump(out)], **QUIET, **trainer_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Recording(oom_rank))
    world = trainer_kwargs.get("devices", 1)
    scores = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    drawn = torch.cat([x for r in range(world) for x in torch.load(out / f"rank{r}.pt")])
    return scores, drawn


def test_one_and_two_processes_draw_the_same_set_and_scores(tmp_path):
    (single,), drawn1 = _run(tmp_path, "single", devices=1)
    two, drawn2 = _run(tmp_path, "ddp", devices=2, strategy="ddp_spawn")
    assert drawn1.shape == (70, 2) and torch.equal(drawn1, drawn2)  # the same noise, gathered in the same order
    for scores in two:
        for key in KNN:
            assert scores[key] == single[key], key  # bit for bit
        assert scores["frechet_distance"] == pytest.approx(single["frechet_distance"], rel=1e-12, abs=1e-15)


def test_ranks_agree_on_the_sampling_batch_after_one_runs_out_of_memory(tmp_path):
    """Rank 1's generator runs out of memory above 8 samples: it halves 16 → 8, rank 0 draws again at 8,
    and the scores are those of one process at batch size 8 (rank 0 drew at 16 first, so what the ranks drew
    is not compared)."""
    (single,), _ = _run(tmp_path, "single", batch_size=8, devices=1)
    (plain,), _ = _run(tmp_path, "single16", batch_size=16, devices=1)
    assert any(plain[key] != single[key] for key in KNN)  # the batch size changes the noise, so the test can fail
    two, _ = _run(tmp_path, "ddp", batch_size=16, oom_rank=1, devices=2, strategy="ddp_spawn")
    for scores in two:
        assert all(scores[key] == single[key] for key in KNN)
