"""What PRDCallback writes to TensorBoard, CSV and W&B, read back from the files each backend writes.

W&B is tested twice: a real offline run (skipped when ``wandb`` is not installed) whose run
directory is read back (curve-table JSON and image files; history and metric records parsed
from the ``.wandb`` log, skipped if that private format changes), and a fake ``wandb`` module
that records every call, which runs everywhere.
"""

from __future__ import annotations

import csv
import glob
import json
import math
import os
import struct
import sys
import time
import types
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger, Logger, TensorBoardLogger

from lightning_prd.callback import PRDCallback
from lightning_prd.loggers import (
    CSVAdapter,
    LoggerAdapter,
    TensorBoardAdapter,
    WandbAdapter,
    adapter_for,
)
from lightning_prd.loggers.tensorboard import MAX_PR_POINTS
from lightning_prd.metrics.generative import GenerativeMetrics
from lightning_prd.plotting import downsample

from tiny_modules import TinyTrainable

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)

REAL = torch.randn(256, 2, generator=torch.Generator().manual_seed(0))
SCALARS = ["precision", "recall", "density", "coverage", "frechet_distance"]
EPOCHS = 3


def _angle_hist(x, bins=8):
    idx = ((torch.atan2(x[:, 1], x[:, 0]) + math.pi) / (2 * math.pi) * bins).long().clamp(max=bins - 1)
    return torch.bincount(idx, minlength=bins).double() / len(x)


class CurveMetric(GenerativeMetrics):
    """GenerativeMetrics plus PRD and α/β curves under the contract's key names.

    The PRD curve is exact for angle histograms (8 bins); the α/β curves are simple stand-ins.
    """

    def _compute(self, real, fake):
        out = super()._compute(real, fake)
        p, q = _angle_hist(real.double()), _angle_hist(fake.double())
        lam = torch.tan(torch.linspace(1e-10, math.pi / 2 - 1e-10, 1001, dtype=torch.float64))
        alpha = torch.minimum(lam[:, None] * p, q).sum(1)
        out["prd_precision"], out["prd_recall"] = alpha, alpha / lam
        out["alphas"] = torch.linspace(0, 1, 30)
        out["alpha_precision_curve"] = out["alphas"] ** 0.8
        out["beta_recall_curve"] = out["alphas"] ** 1.25
        return out


class Tiny(TinyTrainable):
    def sample(self, n):  # collapsed at epoch 0 (one quadrant), full afterwards
        x = torch.randn(n, 2)
        return x.abs() if self.trainer.current_epoch == 0 else x


def run(tmp_path, logger, **cb_kwargs):
    cb = PRDCallback(REAL, metric=CurveMetric(reset_real_features=False), num_samples=256, **cb_kwargs)
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        logger=logger,
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        log_every_n_steps=1,
    )
    trainer.fit(Tiny())
    return trainer, cb


# ---------------------------------------------------------------------------------- TensorBoard
def test_tensorboard_scalars_pr_curves_figures_and_layout(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import (
        IMAGES,
        TENSORS,
        EventAccumulator,
    )
    from tensorboard.backend.event_processing.event_accumulator import SCALARS as S
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.util import tensor_util

    logger = TensorBoardLogger(tmp_path, name="tb")
    _, cb = run(tmp_path, logger)
    (path,) = glob.glob(os.path.join(logger.log_dir, "events.out.tfevents.*"))
    acc = EventAccumulator(path, size_guidance={S: 0, TENSORS: 0, IMAGES: 0})
    acc.Reload()

    # Lightning's step at each epoch's end (its last batch), with the epoch beside it
    steps = [e.step for e in acc.Scalars("prd/epoch")]
    assert [e.value for e in acc.Scalars("prd/epoch")] == list(range(EPOCHS)) and steps == sorted(set(steps))
    for name in SCALARS:
        events = acc.Scalars(f"prd/{name}")
        assert [e.step for e in events] == steps
        assert [e.value for e in events] == pytest.approx([h[name] for h in cb.history], rel=1e-6)

    curves = acc.Tensors("prd/prd_curve")
    assert [c.step for c in curves] == steps
    data = tensor_util.make_ndarray(curves[-1].tensor_proto)  # rows: TP, FP, TN, FN, precision, recall
    assert data.shape == (6, MAX_PR_POINTS)
    assert (data[0] + data[1] > 0).all()  # the PR plugin trims trailing points with TP + FP == 0
    keep = downsample(1001, MAX_PR_POINTS)
    expected = cb.last_result["prd_precision"].numpy()[keep], cb.last_result["prd_recall"].numpy()[keep]
    np.testing.assert_allclose(data[4], expected[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(data[5], expected[1], rtol=1e-6, atol=1e-6)
    first = tensor_util.make_ndarray(curves[0].tensor_proto)
    assert first[5].max() == pytest.approx(0.25, abs=0.05)  # the collapsed epoch reaches a quarter of the real mass

    for fig in ("prd_curve", "alpha_beta", "trajectory"):
        images = acc.Images(f"prd/figures/{fig}")
        assert [i.step for i in images] == steps
        assert images[0].width > 100 and images[0].encoded_image_string[:4] == b"\x89PNG"

    (config,) = acc.Tensors("custom_scalars__config__")  # written once
    layout = layout_pb2.Layout()
    layout.ParseFromString(tensor_util.make_ndarray(config.tensor_proto).item())
    tags = [t for cat in layout.category for chart in cat.chart for t in chart.multiline.tag]
    assert {"^prd/precision$", "^prd/recall$", "^prd/density$", "^prd/coverage$"} <= set(tags)


# ---------------------------------------------------------------------------------- CSV
def test_csv_rows_and_curve_files(tmp_path):
    logger = CSVLogger(tmp_path, name="csv")
    _, cb = run(tmp_path, logger)
    with open(os.path.join(logger.log_dir, "metrics.csv")) as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("prd/coverage")]
    assert [int(r["epoch"]) for r in rows] == list(range(EPOCHS))
    assert [float(r["prd/precision"]) for r in rows] == pytest.approx([h["precision"] for h in cb.history], rel=1e-6)

    files = sorted(os.listdir(os.path.join(logger.log_dir, "prd_curves")))
    assert files == [f"epoch_{e:04d}.csv" for e in range(EPOCHS)]
    with open(os.path.join(logger.log_dir, "prd_curves", files[-1])) as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 1001 and list(table[0]) == ["recall", "precision"]
    np.testing.assert_allclose(
        [float(r["precision"]) for r in table], cb.last_result["prd_precision"].numpy(), rtol=1e-6
    )
    with open(os.path.join(logger.log_dir, "alpha_beta_curves", files[-1])) as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 30 and list(table[0]) == ["alpha", "alpha_precision", "beta_recall"]


# ---------------------------------------------------------------------------------- other loggers
class MemoryLogger(Logger):
    """A logger with no curve support and no log_dir: records log_metrics calls."""

    def __init__(self):
        super().__init__()
        self.rows = []

    @property
    def name(self):
        return "memory"

    @property
    def version(self):
        return 0

    def log_hyperparams(self, params, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        self.rows.append((dict(metrics), step))


class DirLogger(MemoryLogger):
    def __init__(self, log_dir):
        super().__init__()
        self._dir = str(log_dir)

    @property
    def log_dir(self):
        return self._dir


def _prd_warnings(record):
    return [w for w in record if "PRDCallback" in str(w.message)]


def test_unknown_logger_gets_scalars_and_one_warning(tmp_path):
    logger = MemoryLogger()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer, _ = run(tmp_path, logger)
    assert len(_prd_warnings(record)) == 1
    ours = [(m, step) for m, step in logger.rows if "prd/coverage" in m]
    assert [m["epoch"] for m, _ in ours] == list(range(EPOCHS))
    assert "prd/coverage" in trainer.callback_metrics


def test_no_logger_one_warning_and_callback_metrics(tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer, _ = run(tmp_path, False)
    assert len(_prd_warnings(record)) == 1
    assert {f"prd/{k}" for k in SCALARS} <= set(trainer.callback_metrics)


def test_log_curves_false_is_silent_and_writes_no_curves(tmp_path):
    logger = CSVLogger(tmp_path, name="csv")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run(tmp_path, [logger, MemoryLogger()], log_curves=False)
    assert not _prd_warnings(record)
    assert not os.path.exists(os.path.join(logger.log_dir, "prd_curves"))


def test_logger_with_log_dir_gets_csv_curves(tmp_path):
    logger = DirLogger(tmp_path / "mine")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run(tmp_path, logger)
    assert not _prd_warnings(record)
    assert len(os.listdir(tmp_path / "mine" / "prd_curves")) == EPOCHS


def test_adapter_choice_by_type(tmp_path):
    assert type(adapter_for(TensorBoardLogger(tmp_path), "p/")) is TensorBoardAdapter
    assert type(adapter_for(CSVLogger(tmp_path), "p/")) is CSVAdapter
    assert type(adapter_for(DirLogger(tmp_path), "p/")) is CSVAdapter
    assert type(adapter_for(MemoryLogger(), "p/")) is LoggerAdapter
    fake = type("WandbLogger", (MemoryLogger,), {})()
    assert type(adapter_for(fake, "p/")) is WandbAdapter


def test_only_global_rank_zero_writes():
    class Exploding:
        def log_metrics(self, *a, **k):
            raise AssertionError("a non-zero rank wrote to a logger")

    trainer = types.SimpleNamespace(
        current_epoch=0,
        is_global_zero=False,
        loggers=[Exploding()],
        callback_metrics={},
        strategy=types.SimpleNamespace(root_device=torch.device("cpu")),
    )
    cb = PRDCallback(REAL)
    cb._publish(trainer, {"precision": torch.tensor(0.5), "prd_precision": torch.ones(3)})
    assert float(trainer.callback_metrics["prd/precision"]) == 0.5  # every rank still gets the values
    assert cb.history == [{"epoch": 0, "precision": 0.5}]


# ---------------------------------------------------------------------------------- W&B, fake sink
class FakeRun:
    def __init__(self):
        self.defined, self.logged, self.summary = {}, [], {}

    def define_metric(self, name, **kwargs):
        self.defined[name] = kwargs

    def log(self, data):
        self.logged.append(data)


@pytest.fixture
def fake_wandb(monkeypatch):
    module = types.ModuleType("wandb")

    class Table:
        def __init__(self, columns, data):
            self.columns, self.data = list(columns), [list(r) for r in data]

    module.Table = Table
    module.Image = lambda array, caption=None: ("image", array.shape, caption)
    module.plot = types.SimpleNamespace(
        line=lambda table, x, y, stroke=None, title="": {"table": table, "x": x, "y": y, "stroke": stroke}
    )
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


def test_wandb_adapter_with_fake_run(tmp_path, fake_wandb):
    run_ = FakeRun()
    logger = type("WandbLogger", (MemoryLogger,), {"experiment": property(lambda self: run_)})()
    _, cb = run(tmp_path, logger)
    assert len(run_.logged) == EPOCHS  # one W&B step per evaluation
    assert run_.defined["prd/coverage"] == {"step_metric": "prd/epoch", "summary": "max"}
    assert run_.defined["prd/frechet_distance"]["summary"] == "min"
    # density: 1 is ideal, so the summary holds the value closest to 1, written by the adapter
    assert run_.defined["prd/density"]["summary"] == "none"
    densities = [h["density"] for h in cb.history]
    assert run_.summary["prd/density"] == pytest.approx(min(densities, key=lambda d: abs(d - 1.0)))
    assert "prd/epoch" in run_.defined
    last = run_.logged[-1]
    assert last["prd/epoch"] == EPOCHS - 1 and last["prd/coverage"] == pytest.approx(cb.history[-1]["coverage"])
    chart = last["prd/prd_curve"]
    assert (chart["x"], chart["y"], chart["stroke"]) == ("recall", "precision", "epoch")
    assert chart["table"].columns == ["epoch", "recall", "precision"]
    epochs = [row[0] for row in chart["table"].data]
    assert sorted(set(epochs)) == list(range(EPOCHS))  # the table accumulates every epoch
    assert epochs.count(0) == MAX_PR_POINTS
    assert {k for k in last if k.startswith("prd/figures/")} == {
        f"prd/figures/{f}" for f in ("prd_curve", "alpha_beta", "trajectory")
    }
    assert last["prd/figures/trajectory"][0] == "image"


# ---------------------------------------------------------------------------------- W&B, offline run
def test_wandb_density_summary_counts_the_epochs_before_a_resume(fake_wandb):
    run_ = FakeRun()
    logger = type("WandbLogger", (MemoryLogger,), {"experiment": property(lambda self: run_)})()
    adapter = WandbAdapter(logger, "prd/")
    adapter.restore([], [{"epoch": 0, "density": 0.6}, {"epoch": 1, "density": 0.97, "precision": 0.9}])
    adapter.log_scalars({"prd/density": 1.2, "prd/precision": 0.95}, epoch=2, step=10)
    adapter.flush()
    assert run_.summary["prd/density"] == pytest.approx(0.97)  # restored, closer to 1 than 1.2
    assert "prd/precision" not in run_.summary  # W&B's own max summary handles the others
    adapter.log_scalars({"prd/density": 1.01}, epoch=3, step=20)
    adapter.flush()
    assert run_.summary["prd/density"] == pytest.approx(1.01)


def _wandb_records(path):
    """Records of a ``.wandb`` file: a 7-byte header, then LevelDB-style log blocks of protobuf ``Record``s."""
    from wandb.proto import wandb_internal_pb2 as pb

    with open(path, "rb") as fh:
        data = fh.read()
    if data[:4] != b":W&B":
        raise ValueError("not a .wandb file")
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pos += 7
        if pos + length > len(data):  # a record still being written
            return
        buf += data[pos : pos + length]
        pos += length
        if kind in (1, 4):  # FULL or LAST chunk
            record = pb.Record()
            record.ParseFromString(buf)
            buf = b""
            yield record
        elif kind == 0 and length == 0:
            continue


def _wait_for_exit_record(path, timeout=20.0):
    """wandb-core may still be writing the file when ``wandb.finish()`` returns: wait for its ``exit`` record."""
    deadline = time.monotonic() + timeout
    while True:
        records = list(_wandb_records(path))
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def offline_wandb_env(monkeypatch, folder):
    """W&B offline, quiet, writing under ``folder``, without git or code capture."""
    for key, value in dict(
        WANDB_MODE="offline",
        WANDB_DIR=str(folder),
        WANDB_SILENT="true",
        WANDB_CONSOLE="off",
        WANDB_DISABLE_GIT="true",
        WANDB_DISABLE_CODE="true",
    ).items():
        monkeypatch.setenv(key, value)


def test_wandb_offline_run_directory(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from pytorch_lightning.loggers import WandbLogger

    offline_wandb_env(monkeypatch, tmp_path)
    logger = WandbLogger(save_dir=str(tmp_path), offline=True, project="prd-test")
    try:
        _, cb = run(tmp_path, logger)
    finally:
        wandb.finish()
    (run_dir,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*"))

    tables = glob.glob(os.path.join(run_dir, "files", "media", "table", "prd", "prd_curve_table_*.json"))
    loaded = []
    for p in tables:
        with open(p) as fh:
            loaded.append(json.load(fh))
    biggest = max(loaded, key=lambda t: len(t["data"]))
    assert biggest["columns"] == ["epoch", "recall", "precision"]
    assert sorted({row[0] for row in biggest["data"]}) == list(range(EPOCHS))
    for fig in ("prd_curve", "alpha_beta", "trajectory"):
        pngs = glob.glob(os.path.join(run_dir, "files", "media", "images", "prd", "figures", f"{fig}_*.png"))
        assert len(pngs) == EPOCHS

    try:
        (log_file,) = glob.glob(os.path.join(run_dir, "*.wandb"))
        records = _wait_for_exit_record(log_file)
    except Exception as err:  # noqa: BLE001 - the .wandb format is private to wandb
        pytest.skip(f"cannot parse this wandb version's .wandb file: {err}")
    history = [
        {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    ours = [h for h in history if "prd/coverage" in h]
    assert [h["prd/epoch"] for h in ours] == list(range(EPOCHS))
    assert [h["prd/coverage"] for h in ours] == pytest.approx([h["coverage"] for h in cb.history], rel=1e-6)
    metrics = {r.metric.name: r.metric for r in records if r.WhichOneof("record_type") == "metric" and r.metric.name}
    assert metrics["prd/coverage"].step_metric == "prd/epoch" and metrics["prd/coverage"].summary.max
    assert metrics["prd/frechet_distance"].summary.min
