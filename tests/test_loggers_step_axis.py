"""The callback's TensorBoard and W&B records sit on Lightning's own step axis; the epoch stays recoverable.

A real ``Trainer`` logs a loss per step and per epoch (``train_loss_step``, ``train_loss_epoch``); TensorBoard's own
``EventAccumulator`` reads the event files back. The expected steps are counted from the training set (batches per
epoch), not taken from the code under test. ``lightning-prd runs`` (:func:`load_runs`) must still give one value per
epoch, from TensorBoard and CSV runs alike, also when an epoch is logged twice (a resumed run) or two epochs share a
step.
"""

from __future__ import annotations

import os

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger
from test_loggers import CurveMetric, FakeRun, MemoryLogger, fake_wandb  # noqa: F401 - a fixture

from lightning_prd.callback import PRDCallback
from lightning_prd.runs.reader import load_runs

from tiny_modules import GaussianSampling, TinyTraining, Validating, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)

REAL = torch.randn(128, 2, generator=torch.Generator().manual_seed(0))
EPOCHS = 3


class Module(TinyTraining, GaussianSampling, pl.LightningModule):
    train_rows, train_batch = 12, 4  # 3 optimizer steps per epoch

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def sample(self, n):  # a different generated set every epoch
        return (1.0 + self.current_epoch) * torch.randn(n, 2)


class ValidatedModule(Validating, Module):
    def validation_step(self, batch, batch_idx):
        self.log("val_loss", (self.w - 1).pow(2).sum())


STEPS_PER_EPOCH = Module.train_rows // Module.train_batch


def fit(root, module, loggers, **cb_kwargs):
    cb = PRDCallback(REAL, num_samples=128, metric=CurveMetric(reset_real_features=False), **cb_kwargs)
    quiet_trainer(root, [cb], EPOCHS, logger=loggers, log_every_n_steps=1).fit(module)
    return cb


def accumulator(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(log_dir, size_guidance={"scalars": 0, "tensors": 0, "images": 0})
    acc.Reload()
    return acc


@pytest.mark.parametrize("module", [Module, ValidatedModule], ids=["train-end", "validation-end"])
def test_scores_share_the_step_of_lightnings_epoch_metrics(tmp_path, module):
    tb = TensorBoardLogger(str(tmp_path), name="tb", default_hp_metric=False)
    csv = CSVLogger(str(tmp_path), name="csv")
    cb = fit(tmp_path, module(), [tb, csv], log_images=False)
    acc = accumulator(tb.log_dir)

    ends = [STEPS_PER_EPOCH * (e + 1) - 1 for e in range(EPOCHS)]  # the step of each epoch's last batch (from 0)
    assert [e.step for e in acc.Scalars("train_loss_epoch")] == ends  # Lightning's own epoch metric
    assert {e.step for e in acc.Scalars("train_loss_step")} == set(range(EPOCHS * STEPS_PER_EPOCH))
    if module is ValidatedModule:
        assert [e.step for e in acc.Scalars("val_loss")] == ends
    for name in ("precision", "recall", "coverage", "frechet_distance"):
        events = acc.Scalars(f"prd/{name}")
        assert [e.step for e in events] == ends, name
        assert [e.value for e in events] == pytest.approx([h[name] for h in cb.history], rel=1e-6)
    epochs = acc.Scalars("prd/epoch")
    assert [(e.step, e.value) for e in epochs] == [(s, float(i)) for i, s in enumerate(ends)]
    # one slider: the PR curves, figures and the fingerprint text at the same steps
    assert [e.step for e in acc.Tensors("prd/prd_curve")] == ends
    assert [e.step for e in acc.Images("prd/figures/trajectory")] == ends
    assert [e.step for e in acc.Tensors("prd/fingerprint/text_summary")] == ends[:1]

    # lightning-prd runs: one value per epoch, from either logger
    runs = {run.source: run for run in load_runs([str(tmp_path)])}
    for run in runs.values():
        assert [e for e, _ in run.scores["coverage"]] == list(range(EPOCHS))
        assert [v for _, v in run.scores["coverage"]] == pytest.approx([h["coverage"] for h in cb.history])
        assert "epoch" not in run.scores
    # the CSV rows carry the same step
    with open(os.path.join(csv.log_dir, "metrics.csv")) as fh:
        import csv as csv_module

        rows = [r for r in csv_module.DictReader(fh) if r.get("prd/coverage")]
    assert [(int(r["step"]), int(r["epoch"])) for r in rows] == [(s, i) for i, s in enumerate(ends)]


def test_custom_scalars_layout_charts_the_scores_only(tmp_path):
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.util import tensor_util

    tb = TensorBoardLogger(str(tmp_path), name="tb", default_hp_metric=False)
    fit(tmp_path, Module(), [tb])
    (config,) = accumulator(tb.log_dir).Tensors("custom_scalars__config__")
    layout = layout_pb2.Layout()
    layout.ParseFromString(tensor_util.make_ndarray(config.tensor_proto).item())
    tags = [t for cat in layout.category for chart in cat.chart for t in chart.multiline.tag]
    assert "^prd/coverage$" in tags and not any("epoch" in t for t in tags)


def _write(path, records):
    """Events as the callback writes them: ``(step, epoch, {score: value})``, ``prd/epoch`` first at each step."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(path) as writer:
        for step, epoch, scores in records:
            writer.add_scalar("prd/epoch", epoch, global_step=step)
            for name, value in scores.items():
                writer.add_scalar(f"prd/{name}", value, global_step=step)


def test_runs_reads_each_scores_epoch_from_the_epoch_scalar_at_its_step(tmp_path):
    # killed after epoch 1 was logged at step 20, resumed from the epoch-0 checkpoint: epoch 1 logged again
    _write(str(tmp_path / "resumed"), [(10, 0, {"coverage": 0.1}), (20, 1, {"coverage": 0.2})])
    _write(str(tmp_path / "resumed"), [(20, 1, {"coverage": 0.25}), (30, 2, {"coverage": 0.3})])
    # a module whose optimizer never steps: two evaluations at step 0
    _write(str(tmp_path / "still"), [(0, 0, {"coverage": 0.4}), (0, 1, {"coverage": 0.5})])
    runs = {run.label: dict(run.scores["coverage"]) for run in load_runs([str(tmp_path)])}
    assert list(runs["resumed"]) == [0, 1, 2] and list(runs["resumed"].values()) == pytest.approx([0.1, 0.25, 0.3])
    assert list(runs["still"]) == [0, 1] and list(runs["still"].values()) == pytest.approx([0.4, 0.5])


def test_wandb_rows_carry_lightnings_step_beside_the_epoch(tmp_path, fake_wandb):  # noqa: F811 - the fixture
    run_ = FakeRun()
    logger = type("WandbLogger", (MemoryLogger,), {"experiment": property(lambda self: run_)})()
    cb = fit(tmp_path, Module(), logger)
    ends = [STEPS_PER_EPOCH * (e + 1) - 1 for e in range(EPOCHS)]
    assert [(row["trainer/global_step"], row["prd/epoch"]) for row in run_.logged] == list(zip(ends, range(EPOCHS)))
    assert run_.defined["prd/coverage"]["step_metric"] == "prd/epoch"  # charts by epoch; the step is in every row
    assert len(cb.history) == EPOCHS
