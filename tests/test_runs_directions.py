"""``lightning-prd runs``: run labels, the direction of every key, ties, family options and directions recorded with
the run, output width, and families of installed packages in Python.

Runs are written by the real loggers (TensorBoard's ``SummaryWriter``, Lightning's ``CSVLogger``) or by a real fit
with ``PRDCallback``; the expected rankings follow from the values written and the rules stated in each test.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger
from torch.utils.tensorboard import SummaryWriter

from lightning_prd import GenerativeMetrics, PRDCallback, register_family, unregister_family
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics
from lightning_prd.functional.engine import families as engine_families

from tiny_modules import TinyTrainable

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)

REAL = torch.randn(80, 3, generator=torch.Generator().manual_seed(0))


def _tb(run_dir, scores):
    """A TensorBoard run: ``scores`` = ``{name: [value per epoch]}`` as ``prd/<name>``."""
    with SummaryWriter(str(run_dir)) as writer:
        for name, values in scores.items():
            for epoch, value in enumerate(values):
                writer.add_scalar(f"prd/{name}", value, global_step=epoch)


def _csv(root, name, scores):
    """A CSV run written by Lightning's ``CSVLogger``: ``root/<name>/version_0/metrics.csv``."""
    logger = CSVLogger(str(root), name=name, version=0)
    epochs = len(next(iter(scores.values())))
    for epoch in range(epochs):
        logger.log_metrics({"epoch": epoch, **{f"prd/{n}": v[epoch] for n, v in scores.items()}}, step=epoch)
    logger.save()


def _runs(argv, capsys):
    code = main(["runs", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out, captured.err


def _verdict(out, name):
    """The verdict line of score ``name`` (its wrapped lines joined)."""
    lines = out.split("the better run", 1)[1].splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"  {name} ("):
            rest = [x.strip() for x in lines[i + 1 :] if x.startswith("     ")]
            return " ".join([line.strip(), *rest])
    return None


# ------------------------------------------------------------------------------------------ labels
def test_labels_are_the_path_parts_that_tell_runs_apart(tmp_path, capsys):
    for name, value in (("baseline-lr1", 0.4), ("wider-net-lr", 0.6)):
        _tb(tmp_path / "logs" / name / "version_0", {"precision": [value]})
    report = tmp_path / "out.json"
    out, _ = _runs([str(tmp_path / "logs"), "--json", str(report)], capsys)
    rows = [line.split()[0] for line in out.splitlines()[3:5]]
    assert rows == ["baseline-lr1", "wider-net-lr"], out
    assert "wider-net-lr 0.6000 > baseline-lr1 0.4000" in _verdict(out, "precision")
    payload = json.loads(report.read_text())
    assert [r["label"] for r in payload["runs"]] == ["baseline-lr1/version_0", "wider-net-lr/version_0"]
    assert [r["name"] for r in payload["runs"]] == ["baseline-lr1", "wider-net-lr"]


def test_runs_given_one_by_one_are_named_by_what_differs(tmp_path, capsys):
    for sweep in ("lr_0.1", "lr_0.01"):
        _tb(tmp_path / "sweep" / sweep / "tb" / "version_3", {"recall": [0.5]})
    out, _ = _runs([str(tmp_path / "sweep" / s / "tb" / "version_3") for s in ("lr_0.1", "lr_0.01")], capsys)
    assert [line.split()[0] for line in out.splitlines()[3:5]] == ["lr_0.1", "lr_0.01"], out
    assert max(len(line) for line in out.splitlines()) <= 100


# ------------------------------------------------------------------------------------------ directions
def test_derived_keys_take_their_scores_direction_and_labels_rank_nothing(tmp_path, capsys):
    good = {"per_class/frechet_distance/0": [1.0], "frechet_distance_mean": [1.0], "per_class/density/0": [0.95],
            "density_mean": [1.05], "coverage_min": [0.9], "lowest_coverage_class": [3.0], "num_real": [100.0],
            "my_new_score": [0.2]}  # fmt: skip
    bad = {"per_class/frechet_distance/0": [5.0], "frechet_distance_mean": [5.0], "per_class/density/0": [1.5],
           "density_mean": [0.5], "coverage_min": [0.1], "lowest_coverage_class": [7.0], "num_real": [200.0],
           "my_new_score": [0.9]}  # fmt: skip
    _tb(tmp_path / "good", good)
    _tb(tmp_path / "bad", bad)
    report = tmp_path / "out.json"
    out, _ = _runs([str(tmp_path / "bad"), str(tmp_path / "good"), "--scores", "all", "--json", str(report)], capsys)
    payload = json.loads(report.read_text())
    for key in ("per_class/frechet_distance/0", "frechet_distance_mean", "per_class/density/0", "density_mean",
                "coverage_min"):  # fmt: skip
        assert payload["ranking"][key] == ["good", "bad"], key
        assert _verdict(out, key).split(")", 1)[1].split()[0] == "good", _verdict(out, key)
    assert payload["directions"]["per_class/frechet_distance/0"] == "lower"
    assert payload["directions"]["density_mean"] == "one"
    for key in ("lowest_coverage_class", "num_real", "my_new_score"):
        assert key not in payload["ranking"], key
        assert all(r["scores"][key]["best"] is None for r in payload["runs"]), key  # no best without a direction
    assert _verdict(out, "lowest_coverage_class") is None and _verdict(out, "num_real") is None
    assert "not ranked" in _verdict(out, "my_new_score") and ">" not in _verdict(out, "my_new_score")
    assert "my_new_score" in out.splitlines()[0]  # shown in the table


def test_equal_distance_from_the_target_reads_equal(tmp_path, capsys):
    _tb(tmp_path / "low", {"density": [0.75], "ct": [-1.5], "coverage": [0.5]})
    _tb(tmp_path / "high", {"density": [1.25], "ct": [1.5], "coverage": [0.5]})
    _tb(tmp_path / "off", {"density": [1.3], "ct": [1.6], "coverage": [0.25]})
    out, _ = _runs([str(tmp_path / "low"), str(tmp_path / "high"), str(tmp_path / "off"), "--scores", "all"], capsys)
    assert "low 0.7500 = high 1.2500 > off 1.3000" in _verdict(out, "density"), out
    assert "low -1.5000 = high 1.5000 > off 1.6000" in _verdict(out, "ct"), out
    assert "low 0.5000 = high 0.5000 > off 0.2500" in _verdict(out, "coverage"), out


def test_one_run_logged_to_tensorboard_and_csv_reads_identical(tmp_path, capsys):
    values = [0.1234567891, 0.2975999999, 0.29760000123]  # none of them a float32
    assert all(float(np.float32(v)) != v for v in values)
    _tb(tmp_path / "tb" / "run", {"precision": values})
    _csv(tmp_path / "csv", "run", {"precision": values})
    report = tmp_path / "out.json"
    out, _ = _runs([str(tmp_path / "tb"), str(tmp_path / "csv"), "--json", str(report)], capsys)
    payload = json.loads(report.read_text())
    tb_last, csv_last = (r["scores"]["precision"]["last"] for r in payload["runs"])
    assert tb_last != csv_last  # float32 and float64 of the same number
    line = _verdict(out, "precision")
    assert " = " in line and " > " not in line and "identical curves" in line, line
    assert len(payload["identical_curves"]["precision"][0]) == 2


# ------------------------------------------------------------------------------------------ recorded with the run
class Drifting(TinyTrainable):
    """``sample(n)``: N(0, I) shifted by ``offsets[epoch]``."""

    offsets = (1.5, 0.2)

    def sample(self, n):
        g = torch.Generator().manual_seed(7 + self.trainer.current_epoch)
        return torch.randn(n, 3, generator=g) + self.offsets[self.trainer.current_epoch]


def _gap(real, fake):
    return {"spread_gap": (real.double().std(0) - fake.double().std(0)).norm() + (real.mean(0) - fake.mean(0)).norm()}


OFF = dict(probabilistic=False, pr_cover=False, frechet=False, authenticity=False, realism=False)


def _fit(root, version, metric, offsets):
    cb = PRDCallback(REAL, num_samples=60, metric=metric)
    Drifting.offsets = offsets
    trainer = pl.Trainer(
        max_epochs=len(offsets),
        logger=[
            TensorBoardLogger(str(root), name="tb", version=version),
            CSVLogger(str(root), name="csv", version=version),
        ],
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Drifting())
    return cb


def test_a_family_registered_in_the_training_script_ranks_its_way_from_the_record(tmp_path, capsys):
    register_family("spread_gap", _gap, outputs={"spread_gap": "lower"}, replace=True)
    try:
        near = _fit(tmp_path, "near", {"spread_gap": True, **OFF}, (1.5, 0.1))
        far = _fit(tmp_path, "far", {"spread_gap": True, **OFF}, (0.1, 1.5))
    finally:
        unregister_family("spread_gap")  # `runs` in another process: the registry does not know it
    assert near.fingerprint["direction/spread_gap"] == "lower"
    last = {"near": near.history[-1]["spread_gap"], "far": far.history[-1]["spread_gap"]}
    assert last["near"] < last["far"]
    for source in ("tb", "csv"):
        report = tmp_path / f"{source}.json"
        out, _ = _runs([str(tmp_path / source), "--scores", "spread_gap", "--json", str(report)], capsys)
        payload = json.loads(report.read_text())
        assert payload["ranking"]["spread_gap"] == ["near", "far"], source
        assert _verdict(out, "spread_gap").startswith("spread_gap (lower)  near"), out
        best = {r["name"]: r["scores"]["spread_gap"]["best_epoch"] for r in payload["runs"]}
        assert best == {"near": 1, "far": 0}


def test_family_options_are_in_the_fingerprint_and_runs_warn_when_they_differ(tmp_path, capsys):
    four = _fit(tmp_path, "k4", {**OFF, "probabilistic": {"k": 4}}, (0.3, 0.3))
    ten = _fit(tmp_path, "k10", {**OFF, "probabilistic": {"k": 10}}, (0.3, 0.3))
    assert (four.fingerprint["probabilistic.k"], ten.fingerprint["probabilistic.k"]) == (4, 10)
    assert four.fingerprint["probabilistic.a"] == ten.fingerprint["probabilistic.a"] == 1.2
    for source in ("tb", "csv"):
        out, err = _runs([str(tmp_path / source), "--scores", "p_precision"], capsys)
        assert all(len(line) <= 100 for line in (out + err).splitlines()), out + err
        warning = " ".join(line.strip() for line in err.splitlines())
        assert "probabilistic.k (10: k10; 4: k4)" in warning and "not comparable" in warning, err  # runs sorted
        assert "probabilistic.a" not in warning
        assert "probabilistic.k=4" in out and "probabilistic.k=10" in out


def test_fingerprint_lines_and_warnings_fit_in_100_columns(tmp_path, capsys):
    prints = {}
    for i, name in enumerate(("a-rather-long-experiment-name-for-seed-0", "another-long-experiment-name-seed-1")):
        fp = {"protocol": "pr50k3-with-a-long-name", "extractor": "vgg16-nvlabs-with-a-long-name",
              "weights_sha256": f"{i}" * 64, "resize": f"tf1-bilinear-antialias-{i}", "quantisation": "round",
              "num_real": 50000 + i, "num_fake": 50000 - i, "k_precision_recall": 3 + i, "ball": "closed"}  # fmt: skip
        prints[name] = fp
        _csv(tmp_path, name, {"precision": [0.5 + 0.1 * i]})
        (tmp_path / name / "version_0" / "fingerprint.json").write_text(json.dumps(fp))
    out, err = _runs([str(tmp_path)], capsys)
    assert max(len(line) for line in (out + err).splitlines()) <= 100, out + err
    joined = " ".join(line.strip() for line in err.splitlines())
    for key in ("resize", "num_real", "num_fake", "k_precision_recall", "weights_sha256"):
        assert key in joined, key


# ------------------------------------------------------------------------------------------ entry points in Python
PLUGIN = """
from lightning_prd import register_family


def nn_dist(real, fake):
    return {"nn_dist": (real.double().mean(0) - fake.double().mean(0)).norm()}


def register():
    register_family("nn_dist", nn_dist, outputs={"nn_dist": "lower"}, replace=True)
"""


def test_a_family_of_an_installed_package_works_in_python(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "lpfam_nn-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "lpfam_nn.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lpfam-nn\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[lightning_prd.families]\nnn_dist = lpfam_nn:register\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(engine_families, "_loaded", {})
    fake = REAL[:40] + 0.5
    want = float((REAL.double().mean(0) - fake.double().mean(0)).norm())
    try:
        metric = GenerativeMetrics(nn_dist=True, **OFF)
        metric.update(REAL, real=True)
        metric.update(fake, real=False)
        assert float(metric.compute()["nn_dist"]) == pytest.approx(want, rel=1e-12)
        assert float(generative_metrics(REAL, fake, nn_dist=True)["nn_dist"]) == pytest.approx(want, rel=1e-12)
    finally:
        unregister_family("nn_dist")


@pytest.mark.parametrize("call", ["metric", "function"])
def test_an_unknown_family_lists_the_registered_ones_and_how_to_register(call):
    with pytest.raises(ValueError) as err:
        if call == "metric":
            GenerativeMetrics(no_such_family=True)
        else:
            generative_metrics(REAL, REAL, no_such_family=True)
    message = str(err.value)
    assert "\n" not in message and "'no_such_family'" in message
    assert "precision_recall" in message and "rarity" in message  # the registered families
    assert "register_family" in message and "lightning_prd.families" in message
