"""The disk cache's three rules (:mod:`lightning_prd.features.cache`).

* it stores copies: an extractor (or a real set) that refills one buffer cannot change what is stored;
* its key covers every public setting of the extractor, or it refuses the extractor naming the attribute;
* it is keyed by the real set, not by how many processes read it: any world size reuses any other's file.

Each run builds a fresh extractor and a fresh cache object, as a new run would.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import warnings
from fractions import Fraction

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from lightning_prd.callback import PRDCallback
from lightning_prd.callback.batches import rows_of
from lightning_prd.callback.sharding import real_chunks
from lightning_prd.features.cache import RealFeatureCache, check_cacheable, extractor_identity

from ddp_utils import run_ddp
from tiny_modules import AfterDryRun, TinyTrainable

REAL = torch.randn(61, 3, generator=torch.Generator().manual_seed(0))
FAKE = 0.8 * torch.randn(45, 3, generator=torch.Generator().manual_seed(1)) + 0.2

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*smaller than the logging interval.*",
    "ignore:.*module\\(s\\) in eval mode.*",
    "ignore:.*LeafSpec.*",
)


class Linear(nn.Module):
    """A seeded map to 4 features; counts its calls on rows of ``REAL``."""

    def __init__(self, seed=0):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.lin = nn.Linear(3, 4)
        self.real_rows = 0

    def embed(self, x):
        self.real_rows += int(sum(bool((REAL.to(x.dtype) == row).all(dim=1).any()) for row in x))
        return torch.tanh(self.lin(x.to(self.lin.weight.dtype)))

    def forward(self, x):
        return self.embed(x)


class OneBuffer(Linear):
    """Writes every result into one persistent output buffer and returns (a view of) it."""

    def __init__(self, seed=0, rows=64):
        super().__init__(seed)
        self._out = torch.zeros(rows, 4)

    def forward(self, x):
        out = self._out[: x.shape[0]]
        out.copy_(self.embed(x))
        return out


class Tiny(TinyTrainable):
    def sample(self, n):
        """This rank's block of ``FAKE`` (all of it in one process): the gathered set is ``FAKE`` either way."""
        mine = rows_of(len(FAKE), 16, self.trainer.global_rank, self.trainer.world_size)  # batch_size=16
        start = getattr(self, "cursor", 0)
        self.cursor = (start + n) % len(mine)
        return FAKE[mine.start + start : mine.start + start + n]


def _callback(extractor, cache_dir, real=REAL):
    return PRDCallback(
        real, feature_extractor=extractor, num_samples=len(FAKE), batch_size=16, cache_dir=cache_dir, log_curves=False
    )


def fit(extractor, cache_dir=None, real=REAL):
    cb = _callback(extractor, cache_dir, real)
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb, AfterDryRun(extractor)],
    )
    trainer.fit(Tiny())
    return cb.history[0], extractor.real_rows, cb


def features(extractor, folder, real=REAL, rows=7, **kwargs):
    """The features a fresh cache gives for ``real`` (chunks of ``rows``), and its status."""
    cache = RealFeatureCache(folder, **kwargs)
    out = torch.cat(list(cache.real_features(extractor, lambda: iter(real.split(rows)), extractor, num_real=len(real))))
    return out, cache.last_status


# ---------------------------------------------------------------- rule 1: the cache stores copies


def test_an_extractor_that_refills_one_output_buffer_is_cached_as_computed(tmp_path):
    plain, _, _ = fit(OneBuffer())
    first, calls, cb = fit(OneBuffer(), tmp_path)
    assert calls == len(REAL) and cb.cache.last_status == "miss"
    second, calls, cb = fit(OneBuffer(), tmp_path)
    assert calls == 0 and cb.cache.last_status == "hit"
    assert first == plain and second == plain  # every score, with and without the cache


def test_the_stored_features_are_those_extracted_even_from_one_reused_buffer(tmp_path):
    expected = Linear()(REAL).detach()
    got, status = features(OneBuffer(), tmp_path)
    assert status == "miss" and torch.equal(got, expected)
    extractor = OneBuffer()
    got, status = features(extractor, tmp_path, rows=5)  # a private scratch buffer is not a setting: a hit
    assert status == "hit" and extractor.real_rows == 0 and torch.equal(got, expected)


def test_real_rows_read_into_one_refilled_buffer_are_cached_as_read(tmp_path):
    buffer = torch.empty(8, 3)

    def chunks():
        for part in REAL.split(8):
            buffer[: len(part)].copy_(part)
            yield buffer[: len(part)]

    cache = RealFeatureCache(tmp_path, name="as read")
    got = torch.cat([f.clone() for f in cache.real_features(None, chunks, lambda x: x, num_real=len(REAL))])
    assert cache.last_status == "miss" and torch.equal(got, REAL)
    again = RealFeatureCache(tmp_path, name="as read")
    got = torch.cat(list(again.real_features(None, chunks, lambda x: 1 / 0, num_real=len(REAL))))
    assert again.last_status == "hit" and torch.equal(got, REAL)


# ---------------------------------------------------------------- rule 2: the key covers every setting


def _scalar(value):
    """A number derived from any of the settings below (so that changing the setting changes the features)."""
    if isinstance(value, dict):
        return sum(_scalar(v) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(_scalar(v) for v in value)
    if isinstance(value, np.ndarray):
        return float(value.astype(np.float64).sum())
    if isinstance(value, torch.Tensor):
        return float(value.sum())
    if isinstance(value, nn.Module):
        return float(sum(p.sum() for p in value.parameters()))
    if isinstance(value, Knobs):
        return value.gain + _scalar(value.extra)
    if isinstance(value, Slotted):
        return value.total()
    if callable(value):
        return float(value(1.0))
    return float(value)


class Slotted:
    """Settings in slots, one of them private (name-mangled)."""

    __slots__ = ("gain", "__hidden")

    def __init__(self, gain, hidden):
        self.gain, self.__hidden = gain, hidden

    def total(self):
        return self.gain + self.__hidden


class Knobs:
    """A plain settings object."""

    def __init__(self, gain, extra=()):
        self.gain, self.extra = gain, list(extra)


class Configured(Linear):
    """Its features are scaled by a number derived from ``self.setting``."""

    def __init__(self, setting):
        super().__init__()
        self.setting = setting

    def forward(self, x):
        return self.embed(x) * (1 + 0.1 * _scalar(self.setting))


def _mul(a, x, b=1.0):
    return a * x * b


def _seeded_linear(seed):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Linear(1, 1)


SETTINGS = {
    "dict": ({"gain": 1.0, "shift": 2.0}, {"gain": 1.0, "shift": 3.0}),
    "nested dict": ({"a": {"b": [1.0, 2.0]}}, {"a": {"b": [1.0, 2.5]}}),
    "numpy array": (np.array([1.0, 2.0]), np.array([1.0, 2.5])),
    "numpy scalar": (np.float32(1.0), np.float32(1.5)),
    "numpy int scalar": (np.int64(2), np.int64(3)),
    "partial args": (functools.partial(_mul, 2.0), functools.partial(_mul, 3.0)),
    "partial keywords": (functools.partial(_mul, 2.0, b=1.0), functools.partial(_mul, 2.0, b=2.0)),
    "lambda": (lambda x: 2 * x, lambda x: 3 * x),
    "function": (_mul.__get__(2.0), _mul.__get__(3.0)),  # a bound method of a float
    "plain object": (Knobs(1.0), Knobs(2.0)),
    "object in a list": ([Knobs(1.0, [np.float64(1)])], [Knobs(1.0, [np.float64(2)])]),
    "tensor": (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])),
    "unregistered module": ([_seeded_linear(0)], [_seeded_linear(1)]),
    "set": ({1.0, 2.0}, {1.0, 3.0}),
    "fraction": (Fraction(1, 2), Fraction(1, 3)),  # its state is in private slots
    "slots": (Slotted(1.0, 1.0), Slotted(1.0, 2.0)),
    "partial in a tuple in a dict": (
        {"f": (functools.partial(_mul, 2.0, b=2.0),)},
        {"f": (functools.partial(_mul, 2.0, b=3.0),)},
    ),
}


@pytest.mark.parametrize("kind", sorted(SETTINGS))
def test_a_changed_setting_of_any_kind_misses(tmp_path, kind):
    a, b = SETTINGS[kind]
    first, status = features(Configured(a), tmp_path)
    assert status == "miss"
    second, status = features(Configured(b), tmp_path)
    assert status == "miss" and not torch.equal(first, second)
    assert torch.equal(second, Configured(b)(REAL).detach())
    again, status = features(Configured(a), tmp_path)  # the same setting, in a fresh object: a hit
    assert status == "hit" and torch.equal(again, first)


def test_a_changed_dict_setting_misses_through_the_callback(tmp_path):
    first, _, _ = fit(Configured({"gain": 1.0}), tmp_path)
    second, calls, cb = fit(Configured({"gain": 4.0}), tmp_path)
    assert calls == len(REAL) and cb.cache.last_status == "miss"
    assert second == fit(Configured({"gain": 4.0}))[0] and second != first


def test_the_key_does_not_depend_on_the_process(tmp_path):
    """Sets, frozenset constants in code and object ids must not make the key vary between runs."""
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_cache_rules as t;"
        "from lightning_prd.features.cache import extractor_identity;"
        "s = {'alpha', 'beta', 'gamma', 'delta'};"
        "f = lambda x: x in {'p', 'q', 'r', 's'};"
        "print(json.dumps(extractor_identity(t.Configured([s, f, t.Knobs(1.0, [s])])), sort_keys=True))"
    )
    here = os.path.dirname(__file__)
    outs = {
        subprocess.run(
            [sys.executable, "-c", script, here],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outs) == 1 and outs.pop().strip()


def _double(module, args, out):
    return out * 2


def _triple(module, args, out):
    return out * 3


def test_a_forward_hook_is_part_of_the_key(tmp_path):
    hooked = {}
    for hook in (_double, _triple, _double):
        hooked[hook] = Linear()
        hooked[hook].register_forward_hook(hook)
    first, status = features(hooked[_double], tmp_path)
    assert status == "miss" and torch.equal(first, 2 * Linear()(REAL).detach())
    second, status = features(hooked[_triple], tmp_path)
    assert status == "miss" and torch.equal(second, 3 * Linear()(REAL).detach())
    again = Linear()
    again.register_forward_hook(_double)
    got, status = features(again, tmp_path)
    assert status == "hit" and torch.equal(got, first)


def test_a_compiled_module_is_keyed_by_the_module_it_compiles():
    compiled = [torch.compile(Linear(seed)) for seed in (0, 1, 0)]
    idents = [json.dumps(extractor_identity(m), sort_keys=True) for m in compiled]  # nothing is compiled here
    assert idents[0] == idents[2] != idents[1]


class Holder(Linear):
    def __init__(self, value):
        super().__init__()
        self.options = {"inner": [value]}


UNKEYABLE = {
    "lock": threading.Lock(),
    "generator": (i for i in range(3)),
    "file": sys.stderr,
}


@pytest.mark.parametrize("kind", sorted(UNKEYABLE))
def test_a_setting_that_cannot_be_keyed_is_refused_by_name(tmp_path, kind):
    extractor = nn.Sequential(nn.Identity(), Holder(UNKEYABLE[kind]))
    with pytest.raises(TypeError, match=r"`feature_extractor\.1\.options\['inner'\]\[0\]`"):
        _callback(extractor, tmp_path)
    with pytest.raises(TypeError, match=r"`feature_extractor\.1\.options\['inner'\]\[0\]`"):
        features(extractor, tmp_path)
    assert not list(tmp_path.glob("*"))
    _callback(Holder(1.0), tmp_path)  # a keyable value in the same place is accepted
    extractor[1]._options = extractor[1].__dict__.pop("options")  # private: not a setting, not keyed
    check_cacheable(extractor)


def test_a_bound_method_of_the_extractor_itself_is_keyed_without_recursing(tmp_path):
    net = Linear()
    net.post = net.embed  # a cycle: the module holds a method bound to itself
    ident = extractor_identity(net)
    assert json.dumps(ident, sort_keys=True) == json.dumps(extractor_identity(net), sort_keys=True)
    other = Linear(seed=1)
    other.post = other.embed
    assert extractor_identity(other) != ident


# ---------------------------------------------------------------- rule 3: any world size reuses any other's file


def _ddp_reads(rank, world, folder, sampler):
    """Rank ``rank``'s features from the cache in ``folder``: its block of ``REAL`` (or its DistributedSampler rows)."""
    if sampler:  # rows rank, rank + world, ...: the gathered order differs from one process's
        sampler = DistributedSampler(REAL, world, rank, shuffle=False)
        real = DataLoader(TensorDataset(REAL), batch_size=6, sampler=sampler)
    else:  # contiguous blocks
        real = REAL

    def chunks():
        return real_chunks(real, None, 5, rank, world)

    mine = torch.cat(list(chunks()))
    extractor, cache = Linear(), RealFeatureCache(folder)
    got = list(cache.real_features(extractor, chunks, extractor, num_real=len(REAL), rank=rank, world=world))
    return torch.cat(got), mine, extractor.real_rows, cache.last_status


@pytest.mark.parametrize("writer", [1, 2])
@pytest.mark.parametrize("sampler", [False, True], ids=["blocks", "distributed sampler"])
def test_features_written_under_one_world_size_are_read_under_another(tmp_path, writer, sampler):
    folder = str(tmp_path)
    expected = Linear()(REAL).detach()
    if writer == 1:
        got, status = features(Linear(), folder, rows=9)
        assert status == "miss" and torch.equal(got, expected)
    results = run_ddp(_ddp_reads, folder, sampler)
    for rank, (got, mine, calls, status) in enumerate(results):
        rows = [int((REAL == row).all(dim=1).nonzero()) for row in mine]
        assert status == ("hit" if writer == 1 else "miss"), rank
        assert calls == (0 if writer == 1 else len(mine))
        assert torch.allclose(got, expected[rows], atol=1e-6, rtol=0), rank  # this rank's rows, in its order
    if writer == 2:
        extractor = Linear()
        got, status = features(extractor, folder, rows=9)
        assert status == "hit" and extractor.real_rows == 0 and torch.allclose(got, expected, atol=1e-6, rtol=0)
    assert len(list(tmp_path.glob("real-*.pt"))) == 1


class DumpRank(pl.Callback):
    """Each rank's scores, real-row calls and cache status as JSON; destroys the gloo group at teardown."""

    def __init__(self, prd, folder):
        self.prd, self.folder = prd, str(folder)

    def on_train_end(self, trainer, pl_module):
        info = {
            "scores": self.prd.history[0],
            "calls": self.prd.feature_extractor.real_rows,
            "status": self.prd.cache.last_status,
        }
        with open(f"{self.folder}/rank{trainer.global_rank}.json", "w") as fh:
            json.dump(info, fh)

    def teardown(self, trainer, pl_module, stage):  # see tests/test_callback_ddp.py: Dump.teardown
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _ddp_fit(cache_dir, out):
    out.mkdir()
    cb = _callback(Linear(), cache_dir)
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb, AfterDryRun(cb.feature_extractor), DumpRank(cb, out)],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Tiny())
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]


def test_one_process_and_two_process_fits_share_one_cache_with_equal_scores(tmp_path):
    plain, _, _ = fit(Linear())
    one_first, calls, cb = fit(Linear(), tmp_path / "a")  # written by one process, read by two
    assert cb.cache.last_status == "miss" and calls == len(REAL)
    ranks = _ddp_fit(tmp_path / "a", tmp_path / "read2")
    assert [(r["status"], r["calls"]) for r in ranks] == [("hit", 0), ("hit", 0)]
    ranks += _ddp_fit(tmp_path / "b", tmp_path / "write2")  # written by two processes, read by one
    assert [(r["status"], r["calls"]) for r in ranks[2:]] == [("miss", 31), ("miss", 30)]
    one_second, calls, cb = fit(Linear(), tmp_path / "b")
    assert cb.cache.last_status == "hit" and calls == 0
    assert one_first == plain and one_second == pytest.approx(plain, rel=1e-6, abs=1e-9)
    for info in ranks:
        assert info["scores"] == pytest.approx(plain, rel=1e-6, abs=1e-9)
    assert len(list((tmp_path / "a").glob("real-*.pt"))) == len(list((tmp_path / "b").glob("real-*.pt"))) == 1
