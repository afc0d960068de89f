"""One harness for every registered score family with scalar outputs: its switch (``family.keyword`` set to
``family.switch_on`` / ``family.switch(options)``, off with ``family.switch_off``), the function, the Metric with
batched updates (float32 and float64), 2-process gloo DDP (uneven shards; the real side kept across a reset with a
rank holding no generated samples), a callback fit and the command line's ``--json`` (``family.cli_args``) give the
same scores.

The families come from the registry (a family registered later is tested too); :data:`SMALL` only shrinks
the options of the slow ones for these small sets; the families that are no switch (``switchable=False``) are
checked to have none.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import warnings

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics, PRDCallback
from lightning_prd.cli import main
from lightning_prd.cli.parser import build_parser
from lightning_prd.functional import generative_metrics, knn
from lightning_prd.functional.engine.families import families
from lightning_prd.scores import direction_label

from ddp_utils import run_ddp
from tiny_modules import TinyTrainable, quiet_trainer

N, M, D = 220, 190, 4
REAL = torch.randn(N, D, generator=torch.Generator().manual_seed(0))
FAKE = 0.9 * torch.randn(M, D, generator=torch.Generator().manual_seed(1)) + 0.3
FAKE2 = 1.1 * torch.randn(170, D, generator=torch.Generator().manual_seed(3)) - 0.2  # a second epoch's samples
TEST = torch.randn(120, D, generator=torch.Generator().manual_seed(2))
BLOCK = 12000  # small distance tiles: the k-NN pass runs several, split across the ranks under DDP

#: faster options for the families that would be slow on every surface at their defaults
SMALL = {
    "prd": {"num_runs": 2, "num_clusters": 10},
    "kid": {"subsets": 10, "subset_size": 100},
    "fld": {"num_epochs": 5},
    "fd_infinity": {"num_points": 4},
}


def scalar_families():
    """The registered families with scalar outputs that a surface switches."""
    return [f for f in families() if f.outputs and f.switchable]


def each_family():
    return [pytest.param(f, id=f.name) for f in scalar_families()]


def options(family):
    """The family's options in these tests: its defaults, shrunk by :data:`SMALL`."""
    return {**family.defaults, **SMALL.get(family.name, {})}


def switch(family):
    """The surfaces' keyword argument that switches the family on with :func:`options`."""
    return {family.keyword: family.switch(SMALL[family.name]) if family.name in SMALL else family.switch_on}


def _scalars(out, family):
    return {key: float(out[key]) for key in family.outputs if key in out}


def function_scores(family, dtype=torch.float32, block_bytes=BLOCK):
    test = TEST.to(dtype) if family.needs_test else None
    out = generative_metrics(REAL.to(dtype), FAKE.to(dtype), test=test, block_bytes=block_bytes, **switch(family))
    return _scalars(out, family)


def _metric(family, **kwargs):
    return GenerativeMetrics(block_bytes=BLOCK, **switch(family), **kwargs)


def metric_scores(family, parts_real, parts_fake, dtype=torch.float32):
    metric = _metric(family)
    for part in parts_real:
        metric.update(part.to(dtype), real=True)
    for part in parts_fake:
        metric.update(part.to(dtype), real=False)
    if family.needs_test:
        metric.update(TEST.to(dtype), role="test")
    return _scalars(metric.compute(), family)


def kept_scores(family, real, fakes, test):
    """Two evaluations with the real side kept (``reset_real_features=False``): ``fakes`` then ``FAKE2``
    (``fakes[1]`` on this rank), with a reset between them."""
    metric = _metric(family, reset_real_features=False)
    metric.update(real, real=True)
    metric.update(fakes[0], real=False)
    if family.needs_test:
        metric.update(test, role="test")
    first = _scalars(metric.compute(), family)
    metric.reset()
    if len(fakes[1]):
        metric.update(fakes[1], real=False)
    return first, _scalars(metric.compute(), family)


def _same(got, want, family):
    """Bit for bit: every surface runs the same engine on the same features."""
    assert set(got) == set(want) == set(family.outputs), family.name
    for key in want:
        assert got[key] == want[key] or (np.isnan(got[key]) and np.isnan(want[key])), (family.name, key)


def test_the_families_left_out_have_no_switch():
    keywords = set(inspect.signature(generative_metrics).parameters)
    keywords |= set(inspect.signature(GenerativeMetrics.__init__).parameters)
    for family in families():
        if not family.switchable:
            assert family.outputs, family.name
            assert family.keyword not in keywords and family.flag not in _flags(), family.name


@functools.cache
def _default_call():
    return generative_metrics(REAL, FAKE)


@pytest.mark.parametrize("family", each_family(), ids=lambda f: f.name)
def test_a_call_without_switches_holds_the_families_on_by_default_only(family):
    param = inspect.signature(generative_metrics).parameters.get(family.keyword)
    value = getattr(param.default, "value", param.default) if param is not None else False  # a marked default
    on = value is not False and value is not None
    assert (set(family.outputs) & set(_default_call())) == (set(family.outputs) if on else set())


@pytest.fixture(scope="module")
def cli_defaults(tmp_path_factory):
    """The ``--json`` of ``lightning-prd evaluate`` without a family flag."""
    folder = tmp_path_factory.mktemp("defaults")
    np.save(folder / "real.npy", REAL.numpy())
    np.save(folder / "fake.npy", FAKE.numpy())
    argv = ["evaluate", "--real", str(folder / "real.npy"), "--fake", str(folder / "fake.npy"), "-q"]
    assert main([*argv, "--json", str(folder / "out.json")]) == 0
    return json.loads((folder / "out.json").read_text())


@pytest.mark.parametrize("family", each_family(), ids=lambda f: f.name)
def test_the_command_line_without_flags_scores_the_families_its_settings_switch_on(family, cli_defaults):
    on = cli_defaults["settings"][family.keyword] not in (None, False)
    assert (set(family.outputs) & set(cli_defaults["scores"])) == (set(family.outputs) if on else set())


@pytest.mark.parametrize("family", each_family(), ids=lambda f: f.name)
def test_the_off_switch_leaves_the_outputs_out(family):
    out = generative_metrics(REAL, FAKE, **{family.keyword: family.switch_off})
    assert not set(family.outputs) & set(out)
    test = TEST if family.needs_test else None
    assert set(family.outputs) <= set(generative_metrics(REAL, FAKE, test=test, **switch(family)))


@pytest.mark.parametrize("family", each_family(), ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_the_metric_with_batched_updates_equals_the_function(family, dtype):
    want = function_scores(family, dtype)
    got = metric_scores(family, (REAL[:61], REAL[61:170], REAL[170:]), (FAKE[:100], FAKE[100:]), dtype)
    _same(got, want, family)


def _ddp_all(rank, world, kept):
    """Every family's scores on this rank, or the error it raised: uneven shards; with ``kept``, the real side kept
    across a reset and the second evaluation's samples all on rank 0."""
    real = REAL[:150] if rank == 0 else REAL[150:]
    fake = FAKE[:40] if rank == 0 else FAKE[40:]
    test = TEST[:70] if rank == 0 else TEST[70:]
    out = {}
    for family in scalar_families():
        try:
            if kept:
                out[family.name] = kept_scores(family, real, (fake, FAKE2 if rank == 0 else FAKE2[:0]), test)
            else:
                metric = _metric(family)
                metric.update(real, real=True)
                metric.update(fake, real=False)
                if family.needs_test:
                    metric.update(test, role="test")
                out[family.name] = _scalars(metric.compute(), family)
        except Exception as err:  # noqa: BLE001 - one family's failure fails its own test
            out[family.name] = f"{type(err).__name__}: {err}"
    return out


SCENARIOS = {"bf16-screen": ("1", False), "float32-tiles": ("0", False), "kept-real-idle-rank": ("0", True)}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def ddp_scores(request):
    """The scores of every family on both ranks, per scenario (one pooled call each)."""
    screen, kept = SCENARIOS[request.param]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LIGHTNING_PRD_SCREEN", screen)
        return screen, kept, run_ddp(_ddp_all, kept)


@pytest.mark.parametrize("family", each_family(), ids=lambda f: f.name)
def test_ddp_equals_one_process(family, ddp_scores, monkeypatch):
    screen, kept, ranks = ddp_scores
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", screen)
    for got in ranks:
        assert not isinstance(got[family.name], str), got[family.name]
    if kept:
        want = kept_scores(family, REAL, (FAKE, FAKE2), TEST)
        for got in ranks:
            for evaluation in (0, 1):
                _same(got[family.name][evaluation], want[evaluation], family)
    else:
        want = metric_scores(family, (REAL,), (FAKE,))
        for got in ranks:
            _same(got[family.name], want, family)


def _flags():
    evaluate = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    return {s for a in evaluate.choices["evaluate"]._actions for s in a.option_strings}


@pytest.mark.parametrize("family", each_family(), ids=lambda f: f.name)
def test_the_command_line_json_equals_the_function(family, tmp_path, capsys):
    np.save(tmp_path / "real.npy", REAL.numpy())
    np.save(tmp_path / "fake.npy", FAKE.numpy())
    np.save(tmp_path / "test.npy", TEST.numpy())
    out = tmp_path / "out.json"
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy")]
    if family.needs_test:
        argv += ["--test", str(tmp_path / "test.npy")]
    asked = SMALL.get(family.name)
    assert main([*argv, *family.cli_args(asked), "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    want = function_scores(family, block_bytes=knn.DEFAULT_BLOCK_BYTES)  # the command line's tiles
    _same({key: saved["scores"][key] for key in family.outputs if key in saved["scores"]}, want, family)
    assert saved["settings"][family.keyword] == family.switch(options(family))
    printed = capsys.readouterr().out
    for key in family.outputs:  # a row of the table: the key, its value, its direction
        row = rf"^{re.escape(key)}\s+\S+\s+{re.escape(direction_label(key))}\s*$"
        assert re.search(row, printed, re.MULTILINE), key


class Recorder:
    """``sample_fn``: fixed generated features, recorded."""

    def __init__(self):
        self.calls = []

    def __call__(self, pl_module, n):
        self.calls.append(FAKE[:n].clone())
        return self.calls[-1]


def test_a_callback_fit_logs_what_the_metric_computes(tmp_path):
    chosen = [f for f in scalar_families() if not f.needs_test]
    metric = {k: v for f in chosen for k, v in switch(f).items()}
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
        assert set(family.outputs) <= set(want), family.name
    for family in scalar_families():  # the pending ones too where on by default
        for key in family.outputs:
            if key in want:
                logged = float(trainer.callback_metrics[f"prd/{key}"])
                assert logged == pytest.approx(float(want[key]), rel=1e-6, nan_ok=True), (family.name, key)
