"""PRDCallback(log_images=True): least realistic samples, missed real modes, realism histogram."""

from __future__ import annotations

import glob
import warnings

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import HISTOGRAMS, IMAGES, EventAccumulator

from lightning_prd.callback import PRDCallback

from tiny_modules import TinyTrainable

pytestmark = pytest.mark.filterwarnings("ignore:.*does not have many workers.*", "ignore:.*LeafSpec.*")


def _images(n, shift, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, 6, 6, generator=g) * 0.2 + shift


class ImageGAN(TinyTrainable):
    """Generates 6x6 images of one of the two real 'modes' only (brightness 0.1 of 0.1 and 0.8)."""

    def sample(self, n):
        return torch.rand(n, 3, 6, 6) * 0.2 + 0.1


def test_image_grids_and_histogram_reach_tensorboard(tmp_path):
    real = torch.cat([_images(60, 0.1, 10), _images(60, 0.8, 11)])  # two modes; the model makes one
    cb = PRDCallback(real, num_samples=120, log_images=True, num_images=8, metric={"prd": False, "alpha_beta": False})
    logger = TensorBoardLogger(str(tmp_path), name="imgs")
    trainer = pl.Trainer(
        max_epochs=2,
        logger=logger,
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer.fit(ImageGAN())
    covered = cb.last_result["covered"]
    assert not covered[60:].any() and covered[:60].float().mean() > 0.8  # the missed mode is the bright one
    acc = EventAccumulator(
        glob.glob(f"{logger.log_dir}/events.out.tfevents.*")[0], size_guidance={IMAGES: 0, HISTOGRAMS: 0}
    )
    acc.Reload()
    images = acc.Tags()["images"]
    assert "prd/samples/least_realistic" in images and "prd/samples/uncovered_real" in images
    evaluations = [(e.step, e.value) for e in acc.Scalars("prd/epoch")]  # the evaluations' steps and epochs
    assert [v for _, v in evaluations] == [0, 1]
    assert [e.step for e in acc.Images("prd/samples/least_realistic")] == [s for s, _ in evaluations]
    grid = acc.Images("prd/samples/uncovered_real")[-1]
    assert grid.width == 2 + 8 * (6 + 2) and grid.height == 2 + 6 + 2  # 8 images of the missed mode, one row
    assert "prd/realism" in acc.Tags()["histograms"]


def test_non_image_samples_warn_once(tmp_path):
    class Flat(ImageGAN):
        def sample(self, n):
            return torch.randn(n, 4)

    cb = PRDCallback(torch.randn(50, 4), num_samples=50, log_images=True, metric={"prd": False, "alpha_beta": False})
    trainer = pl.Trainer(
        max_epochs=2,
        logger=TensorBoardLogger(str(tmp_path)),
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with pytest.warns(UserWarning, match="log_images") as record:
        trainer.fit(Flat())
    assert sum("log_images" in str(w.message) for w in record) == 1
