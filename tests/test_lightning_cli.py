"""PRDCallback configured in a LightningCLI YAML file: every argument as a plain YAML value."""

from __future__ import annotations

import csv
import importlib.util
import os
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
