"""One harness for every registered score family that is a switch: the function, the Metric with batched updates
(float32 and float64), 2-process gloo DDP with uneven shards, a callback fit and the command line's ``--json``
give the same scores.

The families come from the registry (a family registered later is tested too); :data:`SMALL` only shrinks
the options of the slow ones for these small sets.
"""

from __future__ import annotations

import inspect
import json
import warnings

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics, PRDCallback
from lightning_prd.cli import main
from lightning_prd.cli.parser import build_parser
from lightning_prd.functional import generative_metrics, knn
from lightning_prd.functional.engine.families import families
from lightning_prd.functional.held_out import needs_test

from ddp_utils import run_ddp
from tiny_modules import TinyTrainable, quiet_trainer

N, M, D = 220, 190, 4
REAL = torch.randn(N, D, generator=torch.Generator().manual_seed(0))
FAKE = 0.9 * torch.randn(M, D, generator=torch.Generator().manual_seed(1)) + 0.3
TEST = torch.randn(120, D, generator=torch.Generator().manual_seed(2))
BLOCK = 12000  # small distance tiles: the k-NN pass runs several, split across the ranks under DDP

#: faster options for the families that would be slow on every surface at their defaults
SMALL = {
    "prd": {"num_runs": 2, "num_clusters": 10},
    "kid": {"subsets": 10, "subset_size": 100},
    "fld": {"num_epochs": 5},
    "fd_infinity": {"num_points": 4},
}


def switch_families():
    """The registered families that are a switch of ``generative_metrics`` and have scalar outputs."""
    keywords = inspect.signature(generative_metrics).parameters
    return [f for f in families() if f.outputs and (f.name in keywords or not f.engine)]


def _needs_test(name):
    """Whether the family scores against a held-out real set (``test``), as the engine decides it."""
    family = next(f for f in families() if f.name == name)
    return needs_test(GenerativeMetrics(**{name: switch(family)}).plan)


def switch(family):
    return SMALL.get(family.name, True)


def _scalars(out, family):
    return {key: float(out[key]) for key in family.outputs if key in out}


def function_scores(family, dtype=torch.float32, block_bytes=BLOCK):
    test = TEST.to(dtype) if _needs_test(family.name) else None
    out = generative_metrics(
        REAL.to(dtype), FAKE.to(dtype), test=test, block_bytes=block_bytes, **{family.name: switch(family)}
    )
    return _scalars(out, family)


def metric_scores(family, parts_real, parts_fake, dtype=torch.float32):
    metric = GenerativeMetrics(block_bytes=BLOCK, **{family.name: switch(family)})
    for part in parts_real:
        metric.update(part.to(dtype), real=True)
    for part in parts_fake:
        metric.update(part.to(dtype), real=False)
    if _needs_test(family.name):
        metric.update(TEST.to(dtype), role="test")
    return _scalars(metric.compute(), family)


def _same(got, want, family):
    """Bit for bit: every surface runs the same engine on the same features."""
    assert set(got) == set(want) == set(family.outputs), family.name
    for key in want:
        assert got[key] == want[key] or (np.isnan(got[key]) and np.isnan(want[key])), (family.name, key)


@pytest.mark.parametrize("family", switch_families(), ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_the_metric_with_batched_updates_equals_the_function(family, dtype):
    want = function_scores(family, dtype)
    got = metric_scores(family, (REAL[:61], REAL[61:170], REAL[170:]), (FAKE[:100], FAKE[100:]), dtype)
    _same(got, want, family)


def _ddp_all(rank, world):
    cut_real, cut_fake = 150, 40  # uneven shards
    real = REAL[:cut_real] if rank == 0 else REAL[cut_real:]
    fake = FAKE[:cut_fake] if rank == 0 else FAKE[cut_fake:]
    test = TEST[:70] if rank == 0 else TEST[70:]
    out = {}
    for family in switch_families():
        metric = GenerativeMetrics(block_bytes=BLOCK, **{family.name: switch(family)})
        metric.update(real, real=True)
        metric.update(fake, real=False)
        if _needs_test(family.name):
            metric.update(test, role="test")
        out[family.name] = _scalars(metric.compute(), family)
    return out


@pytest.mark.parametrize("screen", ["1", "0"], ids=["bf16-screen", "float32-tiles"])
def test_ddp_with_uneven_shards_equals_one_process(screen, monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", screen)
    ranks = run_ddp(_ddp_all)
    for family in switch_families():
        want = metric_scores(family, (REAL,), (FAKE,))
        for got in ranks:
            _same(got[family.name], want, family)


def _flags():
    evaluate = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    return {s for a in evaluate.choices["evaluate"]._actions for s in a.option_strings}


@pytest.mark.parametrize("family", switch_families(), ids=lambda f: f.name)
def test_the_command_line_json_equals_the_function(family, tmp_path):
    if family.flag not in _flags() or family.name in SMALL:
        pytest.skip(f"{family.name}: no flag of its own, or its options are set by other flags")
    np.save(tmp_path / "real.npy", REAL.numpy())
    np.save(tmp_path / "fake.npy", FAKE.numpy())
    np.save(tmp_path / "test.npy", TEST.numpy())
    out = tmp_path / "out.json"
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), "-q"]
    if _needs_test(family.name):
        argv += ["--test", str(tmp_path / "test.npy")]
    assert main([*argv, family.flag, "--json", str(out)]) == 0
    scores = json.loads(out.read_text())["scores"]
    want = function_scores(family, block_bytes=knn.DEFAULT_BLOCK_BYTES)  # the command line's tiles
    _same({key: scores[key] for key in family.outputs if key in scores}, want, family)


class Recorder:
    """``sample_fn``: fixed generated features, recorded."""

    def __init__(self):
        self.calls = []

    def __call__(self, pl_module, n):
        self.calls.append(FAKE[:n].clone())
        return self.calls[-1]


def test_a_callback_fit_logs_what_the_metric_computes(tmp_path):
    chosen = [f for f in switch_families() if not _needs_test(f.name)]
    metric = {f.name: switch(f) for f in chosen}
    sample = Recorder()
    cb = PRDCallback(REAL, sample_fn=sample, num_samples=M, batch_size=M, metric=metric)
    trainer = quiet_trainer(tmp_path, [cb])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(TinyTrainable())
    reference = GenerativeMetrics(preset="training", **metric)  # the callback's metric
    reference.update(REAL, real=True)
    reference.update(sample.calls[-1], real=False)
    want = reference.compute()
    for family in chosen:
        for key in family.outputs:
            if key in want:
                logged = float(trainer.callback_metrics[f"prd/{key}"])
                assert logged == pytest.approx(float(want[key]), rel=1e-6, nan_ok=True), (family.name, key)
