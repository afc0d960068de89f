"""PRDCallback configured in a LightningCLI YAML file: every argument as a plain YAML value."""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
import warnings

import pytest
import torch

pytest.importorskip("jsonargparse")
from pytorch_lightning.cli import LightningCLI  # noqa: E402

from lightning_prd import PRDCallback  # noqa: E402

from tiny_modules import PointsData, TinyGenerator  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG = """\
seed_everything: 0
trainer:
  max_epochs: 2
  accelerator: cpu
  devices: 1
  enable_progress_bar: false
  enable_model_summary: false
  enable_checkpointing: false
  default_root_dir: {root}
  logger:
    class_path: pytorch_lightning.loggers.CSVLogger
    init_args:
      save_dir: {root}
      name: cli
  callbacks:
    - class_path: lightning_prd.PRDCallback
      init_args:
        real: datamodule:train
        sample_fn: tiny_modules:sample_gaussian
        feature_extractor: {{name: identity}}
        num_samples: 48
        num_real: 40
        log_curves: false
        verbose: false
        cache_dir: {root}/cache
        metric:
          prd: false
          alpha_beta: false
          pr_cover: false
model:
  lr: 0.05
data:
  num_points: 48
  batch_size: 12
"""


def _run_cli(tmp_path, config):
    path = tmp_path / "config.yaml"
    path.write_text(config.format(root=tmp_path.as_posix()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LightningCLI(TinyGenerator, PointsData, args=["fit", "--config", str(path)], save_config_kwargs={})


def test_the_callback_from_yaml_logs_its_scores(tmp_path):
    cli = _run_cli(tmp_path, CONFIG)
    cb = next(c for c in cli.trainer.callbacks if isinstance(c, PRDCallback))
    assert cb.real == "datamodule:train" and cb.num_samples == 48 and cb.sample_fn.__name__ == "sample_gaussian"
    assert cb.metric.prd is None and cb.cache is not None and cb.verbose is False
    assert [h["epoch"] for h in cb.history] == [0, 1]
    for key in ("prd/precision", "prd/recall", "prd/density", "prd/coverage", "prd/frechet_distance"):
        assert torch.isfinite(cli.trainer.callback_metrics[key])
    with open(os.path.join(cli.trainer.logger.log_dir, "metrics.csv")) as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("prd/coverage")]
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    assert float(rows[-1]["prd/coverage"]) == pytest.approx(cb.history[-1]["coverage"])


def test_a_bad_value_in_the_yaml_names_the_argument_and_the_value(tmp_path):
    bad = CONFIG.replace("tiny_modules:sample_gaussian", "tiny_modules:no_such_function")
    with pytest.raises(ValueError) as info:  # jsonargparse reports the callback's own line among its errors
        _run_cli(tmp_path, bad)
    line = "Expected argument `sample_fn` to be a callable or the import path 'package.module:function' of one, but "
    assert f"{line}'tiny_modules:no_such_function' fails to import" in str(info.value)


def test_the_example_config_parses_and_trains(tmp_path, monkeypatch):
    """``examples/gan_ring_cli.py fit --config examples/config.yaml``, cut to one short epoch."""
    spec = importlib.util.spec_from_file_location("gan_ring_cli", os.path.join(ROOT, "examples", "gan_ring_cli.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    overrides = [
        "--trainer.max_epochs=1",
        "--data.num_train=512",
        "--data.batch_size=128",
        f"--trainer.logger.init_args.save_dir={tmp_path}",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cli = module.main(["fit", "--config", os.path.join(ROOT, "examples", "config.yaml"), *overrides])
    cb = next(c for c in cli.trainer.callbacks if isinstance(c, PRDCallback))
    assert cb.real == "datamodule:train" and [h["epoch"] for h in cb.history] == [0]
    assert torch.isfinite(cli.trainer.callback_metrics["prd/coverage"])


CLI_SCRIPT = """\
import sys
from pytorch_lightning.cli import LightningCLI
from tiny_modules import PointsData, TinyGenerator

LightningCLI(TinyGenerator, PointsData, args=["fit", "--config", sys.argv[1]])
"""
REFUSED = "Expected argument `every_n_epochs` to be a positive integer, but got 0"


def _python(tmp_path, code, *args):
    script = tmp_path / "script.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


def test_a_refused_value_in_the_yaml_is_the_first_and_last_line_of_the_error(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        CONFIG.format(root=tmp_path.as_posix()).replace("num_real: 40", "num_real: 40\n        every_n_epochs: 0")
    )
    code, lines = _python(tmp_path, CLI_SCRIPT, str(config))
    ours = f"PRDCallback: ValueError: {REFUSED}"
    assert code == 1
    start = lines.index("Traceback (most recent call last):")
    assert lines[start - 1] == ours and lines[-1] == ours, "\n".join(lines)
    assert "Does not validate against any of the Union subtypes" in "\n".join(lines)  # jsonargparse's, in between


def test_a_refusal_outside_a_cli_is_not_repeated(tmp_path):
    plain = "import torch\nfrom lightning_prd import PRDCallback\nPRDCallback(torch.zeros(4, 2), every_n_epochs=0)\n"
    code, lines = _python(tmp_path, plain)
    assert code == 1 and lines[0] == "Traceback (most recent call last):" and lines[-1] == f"ValueError: {REFUSED}"
    caught = (
        "import torch\nfrom lightning_prd import PRDCallback\n"
        "try:\n    PRDCallback(torch.zeros(4, 2), every_n_epochs=0)\nexcept ValueError:\n    pass\n"
        "raise KeyError('another error')\n"
    )
    code, lines = _python(tmp_path, caught)
    assert code == 1 and lines[0] == "Traceback (most recent call last):" and lines[-1] == "KeyError: 'another error'"
    assert not any(line.startswith("PRDCallback:") for line in lines)


def test_the_refusal_is_found_by_its_cause_or_its_quoted_message():
    from lightning_prd.callback import refusals

    with pytest.raises(ValueError) as refused:
        PRDCallback(torch.zeros(4, 2), every_n_epochs=0)
    line = f"PRDCallback: ValueError: {REFUSED}"
    assert refusals.refusal_line(refused.value) is None  # the refusal itself: its traceback ends with it
    try:
        raise RuntimeError("the tool's own words") from refused.value
    except RuntimeError as wrapped:
        assert refusals.refusal_line(wrapped) == line
    assert refusals.refusal_line(ValueError(f"Errors:\n  - {REFUSED}\nGiven value: ...")) == line
    assert refusals.refusal_line(ValueError("Expected argument `every_n_epochs` to be a bool")) is None
