"""A score family registered from user code (``lightning_prd.register_family``) on every surface: the function,
the Metric (batched, and 2-process gloo DDP with uneven shards), the callback's scalars and dashboards,
``lightning-prd runs`` and ``lightning-prd evaluate`` through an entry point; one name per option on every
surface; protocol names found again after registration."""

import dataclasses
import inspect
import json
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger

from lightning_prd import GenerativeMetrics, PRDCallback, register_family, unregister_family
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics
from lightning_prd.functional.engine import families as engine_families
from lightning_prd.functional.engine.vocabulary import Default
from lightning_prd.loggers.tensorboard import custom_scalars_layout
from lightning_prd.protocols import get_protocol, register_protocol, unregister_protocol
from lightning_prd.scores import best_index, direction, direction_label

from ddp_utils import run_ddp
from tiny_modules import TinyTrainable

REAL = torch.randn(150, 3, generator=torch.Generator().manual_seed(0))
FAKE = 0.8 * torch.randn(110, 3, generator=torch.Generator().manual_seed(1)) + 0.4
OFF = dict(realism=False, authenticity=False, probabilistic=False, pr_cover=False)  # keep the runs short


def mean_gap(real, fake, *, power=1.0):
    """The distance between the two sets' means, to a power."""
    return {"mean_gap": (real.double().mean(0) - fake.double().mean(0)).norm() ** power}


def check_power(options):
    if not options["power"] > 0:
        raise ValueError(f"Expected option `power` to be positive, but got {options['power']!r}")
    return options


def register_mean_gap():
    register_family(
        "mean_gap",
        mean_gap,
        outputs={"mean_gap": "lower"},
        defaults={"power": 1.0},
        check=check_power,
        meaning="distance between the means",
        replace=True,
    )


def oracle(real, fake, power=1.0):
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    return float(np.linalg.norm(real.mean(0) - fake.mean(0)) ** power)


@pytest.fixture
def family():
    register_mean_gap()
    yield "mean_gap"
    unregister_family("mean_gap")


def test_the_function_switches_it_on_and_checks_its_options(family):
    assert "mean_gap" not in generative_metrics(REAL, FAKE)  # off unless asked for
    out = generative_metrics(REAL, FAKE, mean_gap=True)
    assert float(out["mean_gap"]) == pytest.approx(oracle(REAL, FAKE), rel=1e-12)
    out = generative_metrics(REAL, FAKE, mean_gap={"power": 2.0})
    assert float(out["mean_gap"]) == pytest.approx(oracle(REAL, FAKE, 2.0), rel=1e-12)
    alone = generative_metrics(REAL, FAKE)
    assert all(torch.equal(out[key], value) for key, value in alone.items())  # no other score moves
    with pytest.raises(ValueError, match=r"option `power`.*-1.*an option of `mean_gap`"):
        generative_metrics(REAL, FAKE, mean_gap={"power": -1})
    with pytest.raises(ValueError, match=r"`mean_gap` to hold only \['power'\]"):
        generative_metrics(REAL, FAKE, mean_gap={"powr": 2})
    with pytest.raises(ValueError, match=r"registered with `register_family`, but got \['mean_gaps'\]"):
        generative_metrics(REAL, FAKE, mean_gaps=True)


def test_registration_is_checked():
    with pytest.raises(ValueError, match="`name`"):
        register_family("Mean-Gap", mean_gap, outputs={"x": "lower"})
    with pytest.raises(ValueError, match="option of every surface"):
        register_family("ball", mean_gap, outputs={"x": "lower"})
    with pytest.raises(ValueError, match="built-in family"):
        register_family("prd", mean_gap, outputs={"x": "lower"}, replace=True)
    with pytest.raises(ValueError, match=r"\['precision'\] are outputs of family 'precision_recall'"):
        register_family("mine", mean_gap, outputs={"precision": "higher"})
    with pytest.raises(ValueError, match="direction of output `x`"):
        register_family("mine", mean_gap, outputs={"x": "up"})
    with pytest.raises(ValueError, match="`compute`"):
        register_family("mine", None, outputs={"x": "lower"})
    with pytest.raises(ValueError, match="built in"):
        unregister_family("rarity")


def test_the_metric_with_batched_updates_equals_the_function(family):
    metric = GenerativeMetrics(mean_gap={"power": 2.0}, **OFF)
    for part in (REAL[:40], REAL[40:]):
        metric.update(part, real=True)
    for part in (FAKE[:9], FAKE[9:70], FAKE[70:]):
        metric.update(part, real=False)
    out = metric.compute()
    assert torch.equal(out["mean_gap"], generative_metrics(REAL, FAKE, mean_gap={"power": 2.0}, **OFF)["mean_gap"])
    assert metric.plan.options_of("mean_gap") == {"power": 2.0}
    with pytest.raises(ValueError, match="an option of `mean_gap`"):
        GenerativeMetrics(mean_gap={"power": 0})


def _ddp_scores(rank, world):
    register_mean_gap()  # a spawned process registers the user's family as the user's script would
    metric = GenerativeMetrics(mean_gap={"power": 2.0}, **OFF)
    cut_real, cut_fake = (100, 20)  # uneven shards
    metric.update(REAL[:cut_real] if rank == 0 else REAL[cut_real:], real=True)
    metric.update(FAKE[:cut_fake] if rank == 0 else FAKE[cut_fake:], real=False)
    return {key: float(value) for key, value in metric.compute().items() if value.ndim == 0}


def test_ddp_with_uneven_shards_equals_one_process(family):
    one = GenerativeMetrics(mean_gap={"power": 2.0}, **OFF)
    one.update(REAL, real=True)
    one.update(FAKE, real=False)
    want = {key: float(value) for key, value in one.compute().items() if value.ndim == 0}
    for got in run_ddp(_ddp_scores):
        assert got.keys() == want.keys() and "mean_gap" in got
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-6, abs=1e-7), key
        assert got["mean_gap"] == pytest.approx(want["mean_gap"], rel=1e-12)


class Drifting(TinyTrainable):
    """``sample(n)``: N(0, I) shifted by ``offsets[epoch]``, so the mean gap moves over epochs."""

    offsets = (1.5, 0.2, 0.8)

    def sample(self, n):
        g = torch.Generator().manual_seed(7 + self.trainer.current_epoch)
        return torch.randn(n, 3, generator=g) + self.offsets[self.trainer.current_epoch]


def test_callback_logs_it_charts_it_with_its_direction_and_runs_ranks_it(family, tmp_path):
    cb = PRDCallback(REAL, num_samples=120, metric={"mean_gap": {"power": 2.0}, **OFF})
    trainer = pl.Trainer(
        max_epochs=len(Drifting.offsets),
        logger=CSVLogger(tmp_path, name="csv", version="run"),
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Drifting())
    assert "prd/mean_gap" in trainer.callback_metrics
    gaps = [h["mean_gap"] for h in cb.history]
    assert len(gaps) == 3 and float(trainer.callback_metrics["prd/mean_gap"]) == pytest.approx(gaps[-1])
    assert gaps[1] < gaps[2] < gaps[0]  # it follows the offsets
    assert "mean_gap (lower is better)" in custom_scalars_layout("prd/", ["coverage", "mean_gap"])["prd/"]
    assert (direction("prd/mean_gap"), direction_label("mean_gap")) == ("lower", "lower")
    out = tmp_path / "runs.json"
    assert main(["runs", str(tmp_path / "csv"), "--scores", "all", "--json", str(out)]) == 0
    (run,) = json.loads(out.read_text())["runs"]
    summary = run["scores"]["mean_gap"]
    assert summary["direction"] == "lower" and summary["best_epoch"] == int(np.argmin(gaps)) == 1


def test_a_target_direction_ranks_by_closeness():
    register_family("gap_half", mean_gap, outputs={"gap_half": 0.5}, replace=True)
    try:
        assert (direction("gap_half"), direction_label("gap_half")) == (0.5, "0.5 is ideal")
        assert best_index("gap_half", [0.1, 0.7, 0.45, float("nan")]) == 2
    finally:
        unregister_family("gap_half")


PLUGIN = """
from lightning_prd import register_family


def plugin_gap(real, fake, *, power=1.0):
    return {"plugin_gap": (real.double().mean(0) - fake.double().mean(0)).norm() ** power}


def register():
    register_family("plugin_gap", plugin_gap, outputs={"plugin_gap": "lower"}, defaults={"power": 1.0}, replace=True)
"""


def test_the_command_line_loads_a_family_from_an_entry_point(tmp_path, monkeypatch, capsys):
    site = tmp_path / "site"
    info = site / "lpfam_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "lpfam_plugin.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lpfam-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[lightning_prd.families]\nplugin_gap = lpfam_plugin:register\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(engine_families, "_loaded", {})
    np.save(tmp_path / "real.npy", REAL.numpy())
    np.save(tmp_path / "fake.npy", FAKE.numpy())
    out = tmp_path / "out.json"
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), "-q"]
    try:
        assert main([*argv, "--plugin-gap", "power=2", "--json", str(out)]) == 0
        table = capsys.readouterr().out
        payload = json.loads(out.read_text())
        assert payload["scores"]["plugin_gap"] == pytest.approx(oracle(REAL, FAKE, 2.0), rel=1e-12)
        assert payload["settings"]["plugin_gap"] == {"power": 2}
        row = next(line.split() for line in table.splitlines() if line.startswith("plugin_gap"))
        assert row[-1] == "lower"
        assert main([*argv, "--plugin-gap", "--json", str(out)]) == 0
        assert json.loads(out.read_text())["scores"]["plugin_gap"] == pytest.approx(oracle(REAL, FAKE), rel=1e-12)
        assert main([*argv, "--plugin-gap", "powr=2"]) == 2
        assert "`plugin_gap` to hold only ['power']" in capsys.readouterr().err
    finally:
        unregister_family("plugin_gap")


def test_a_failing_entry_point_is_named_and_skipped(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[lightning_prd.families]\nbroken = no_such_module_here:register\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(engine_families, "_loaded", {})
    with pytest.warns(UserWarning, match="'broken=no_such_module_here:register'.*skipped"):
        assert "broken" not in engine_families.load_entry_points()


# ---------------------------------------------------------------------------- one name per option
def test_every_keyword_of_the_function_is_a_keyword_of_the_metric_with_the_same_default():
    function = inspect.signature(generative_metrics).parameters
    metric = inspect.signature(GenerativeMetrics.__init__).parameters
    keywords = [name for name, p in function.items() if p.kind is p.KEYWORD_ONLY]
    assert len(keywords) > 20 and "k_precision_recall" in keywords
    for name in keywords:
        assert name in metric, name
        assert isinstance(function[name].default, Default), name  # "given" is told apart from the default
        assert metric[name].default == function[name].default, name


def test_the_k_of_precision_recall_has_one_spelling_on_every_surface(tmp_path, capsys):
    assert GenerativeMetrics(k_precision_recall=4).k_precision_recall == 4
    cb = PRDCallback(REAL, num_samples=50, metric={"k_precision_recall": 4})
    assert cb.metric.k_precision_recall == 4
    assert metric_argument_names() >= {"k_precision_recall", "k_density_coverage"}
    old = [
        lambda: generative_metrics(REAL, FAKE, k_pr=3),
        lambda: GenerativeMetrics(k_dc=5),
        lambda: PRDCallback(REAL, num_samples=50, metric={"k_pr": 3}),
    ]
    for call in old:
        with pytest.raises(ValueError, match="spelled `k_(precision_recall|density_coverage)`"):
            call()
    np.save(tmp_path / "real.npy", REAL.numpy())
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "real.npy")]
    for flag, new in (("--k-pr", "--k-precision-recall"), ("--k-dc", "--k-density-coverage")):
        assert main([*argv, flag, "3"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{flag} is spelled {new}" in err[0]
    fid = get_protocol("pr50k3")
    assert fid.describe()["k_precision_recall"] == 3 and fid.k_precision_recall == 3
    from lightning_prd.protocols import fingerprint

    fp = fingerprint(protocol="pr50k3")
    assert fp["k_precision_recall"] == 3 and "k" not in fp
    with pytest.raises(ValueError, match="spelled `k_precision_recall`"):
        fingerprint(protocol="pr50k3", k=3)
    with pytest.raises(ValueError, match="spelled `k_precision_recall`"):
        dataclasses.replace(fid, k=5)
    with pytest.raises(AttributeError, match="Protocol.k_precision_recall"):
        _ = fid.k


def metric_argument_names():
    from lightning_prd.protocols.options import metric_arguments

    return set(metric_arguments("prdc"))


def test_a_protocol_contradiction_given_at_the_default_is_refused_by_the_callback_and_the_cli(tmp_path, capsys):
    np.save(tmp_path / "real.npy", REAL.numpy())
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "real.npy"), "-q"]
    assert main([*argv, "--protocol", "prdc", "--k-precision-recall", "3"]) == 2  # 3 is the flag's default
    assert "--k-precision-recall 3: contradicts protocol 'prdc'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="`k_precision_recall` to agree with protocol 'prdc'"):
        PRDCallback(REAL, protocol="prdc", metric={"k_precision_recall": 3})
    with pytest.raises(ValueError, match="`ball` to agree with protocol 'prdc'"):
        PRDCallback(REAL, protocol="prdc", metric={"ball": "closed"})
    cb = PRDCallback(REAL, protocol="prdc", metric={"k_precision_recall": 5})
    assert (cb.metric.k_precision_recall, cb.metric.ball) == (5, "open")


@pytest.mark.parametrize("name", ["my_proto", "My-Proto", " my-proto "])
def test_a_registered_protocol_is_found_again(name):
    register_protocol(dataclasses.replace(get_protocol("prdc"), name=name))
    try:
        for spelling in ("my_proto", "my-proto", "MY_PROTO", name):
            assert get_protocol(spelling).name == name
        with pytest.raises(ValueError, match="already registered"):
            register_protocol(dataclasses.replace(get_protocol("prdc"), name="MY_proto"))
    finally:
        unregister_protocol("my-proto")
    with pytest.raises(ValueError, match="one of"):
        get_protocol(name)


def test_every_family_has_a_docs_page_in_the_navigation():
    from pathlib import Path

    from lightning_prd.functional.engine.families import families

    root = Path(__file__).resolve().parents[1]
    nav = (root / "mkdocs.yml").read_text()
    for fam in families():
        assert fam.docs is not None and (root / "docs" / fam.docs).is_file(), fam.name
        assert fam.docs in nav, fam.name


def test_the_score_tables_name_every_ranked_output():
    from pathlib import Path

    from lightning_prd.functional.engine.families import families

    page = (Path(__file__).resolve().parents[1] / "docs" / "metrics" / "index.md").read_text()
    rows = "\n".join(line for line in page.splitlines() if line.startswith("| `"))
    missing = [
        key
        for fam in families()
        if fam.builtin
        for key, way in fam.outputs.items()
        if way != "none" and f"`{key}`" not in rows
    ]
    assert not missing, f"add a row of the score tables of docs/metrics/index.md for {missing}"
