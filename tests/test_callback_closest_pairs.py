"""PRDCallback(log_closest_pairs=n): a grid of the n generated images nearest to a real one (smallest ratio of
the distance to that real image's own NND_1), each beside its nearest real image.

The pairs are checked against a brute-force NumPy nearest neighbour (``oracle_memorization.nearest_real``),
the grid's left column against the generated images and its right column against the real ones, read back
from the TensorBoard event file (8-bit PNG: within one grey level).
"""

from __future__ import annotations

import csv
import glob
import io
import os
import sys
import types
import warnings

import numpy as np
import pytest
import torch
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

from lightning_prd.callback import PRDCallback
from lightning_prd.callback.closest_pairs import pair_grid

import oracle_memorization
from tiny_modules import TinyTrainable, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*smaller than the logging interval.*",
    "ignore:.*LeafSpec.*",
    "ignore:.*do not say which network made them.*",
)

PAD, SIDE, N_PAIRS = 2, 6, 4
REAL = torch.rand(40, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(11))
FAST = dict(prd=False, alpha_beta=False, probabilistic=False, pr_cover=False)


class Copier:
    """Generates 30 images: near-copies of real images 0..9 (clamped to [0, 1]), then fresh noise; keeps them."""

    def __init__(self, real=REAL):
        self.real, self.calls = real, []

    def __call__(self, pl_module, n):
        fresh = torch.rand(n, *self.real.shape[1:])
        copies = (self.real[:10].float() / (255 if self.real.dtype == torch.uint8 else 1)).clamp(0, 1)
        x = torch.cat([(copies + 0.01 * torch.rand(copies.shape)).clamp(0, 1), fresh[10:]])[:n]
        self.calls.append(x)
        return x


def _fit(tmp_path, cb, logger=None, epochs=1):
    trainer = quiet_trainer(tmp_path, [cb], max_epochs=epochs, logger=logger if logger is not None else False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer.fit(TinyTrainable())
    return trainer


def _images(log_dir, tag):
    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import IMAGES, EventAccumulator

    (path,) = glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    acc = EventAccumulator(path, size_guidance={IMAGES: 0})
    acc.Reload()
    return [np.asarray(Image.open(io.BytesIO(e.encoded_image_string))) for e in acc.Images(tag)]


def _brute_force_pairs(real, fake, n):
    """The n (generated, nearest real) pairs of smallest ratio, ties by the lower generated index (NumPy)."""
    idx, _, _, ratio, _ = oracle_memorization.nearest_real(real.reshape(len(real), -1), fake.reshape(len(fake), -1))
    order = np.argsort(ratio, kind="stable")[:n]
    return order, idx[order], ratio[order]


def _cells(grid, rows):
    """The left and right cells of each row of a pair grid ``[H, W, 3]``."""
    out = []
    for i in range(rows):
        top = PAD + i * (SIDE + PAD)
        left = grid[top : top + SIDE, PAD : PAD + SIDE]
        right = grid[top : top + SIDE, 2 * PAD + SIDE : 2 * PAD + 2 * SIDE]
        out.append((left, right))
    return out


def _hwc(x):
    return x.permute(1, 2, 0).double().numpy()


def test_grid_shows_each_generated_image_beside_its_brute_force_nearest_real_image(tmp_path):
    pytest.importorskip("PIL")
    gen = Copier()
    logger = TensorBoardLogger(tmp_path, name="tb")
    cb = PRDCallback(REAL, sample_fn=gen, num_samples=30, batch_size=30, log_closest_pairs=N_PAIRS, metric=FAST)
    _fit(tmp_path, cb, logger=logger, epochs=2)
    fake = gen.calls[-1]
    fake_index, real_index, ratio = _brute_force_pairs(REAL.numpy(), fake.numpy(), N_PAIRS)
    assert (fake_index < 10).all() and (ratio < 1).all()  # the near-copies are the closest pairs
    assert cb.last_result["closest_fake_index"].tolist() == fake_index.tolist()
    assert cb.last_result["closest_real_index"].tolist() == real_index.tolist()
    assert cb.last_result["closest_ratio"].numpy() == pytest.approx(ratio, rel=1e-5)
    grids = _images(logger.log_dir, "prd/samples/closest_pairs")
    assert len(grids) == 2 and grids[-1].shape[:2] == (PAD + N_PAIRS * (SIDE + PAD), 2 * SIDE + 3 * PAD)
    for (left, right), j, i in zip(_cells(grids[-1], N_PAIRS), fake_index, real_index):
        assert np.abs(left[..., :3] / 255.0 - _hwc(fake[j])).max() <= 1.01 / 255  # TensorBoard stores 8 bits
        assert np.abs(right[..., :3] / 255.0 - _hwc(REAL[i])).max() <= 1.01 / 255


def test_a_csv_logger_gets_the_grids_as_png_files_and_the_realism_values(tmp_path):
    pil = pytest.importorskip("PIL.Image")
    gen = Copier()
    logger = CSVLogger(tmp_path, name="csv")
    cb = PRDCallback(
        REAL, sample_fn=gen, num_samples=30, batch_size=30, log_closest_pairs=N_PAIRS, log_images=True, metric=FAST
    )
    _fit(tmp_path, cb, logger=logger, epochs=2)
    fake = gen.calls[-1]
    fake_index, real_index, _ = _brute_force_pairs(REAL.numpy(), fake.numpy(), N_PAIRS)
    folder = os.path.join(logger.log_dir, "samples")
    assert sorted(os.listdir(os.path.join(folder, "closest_pairs"))) == ["epoch_0000.png", "epoch_0001.png"]
    assert os.path.exists(os.path.join(folder, "least_realistic", "epoch_0001.png"))
    grid = np.asarray(pil.open(os.path.join(folder, "closest_pairs", "epoch_0001.png")))
    assert grid.shape[:2] == (PAD + N_PAIRS * (SIDE + PAD), 2 * SIDE + 3 * PAD)
    for (left, right), j, i in zip(_cells(grid, N_PAIRS), fake_index, real_index):
        assert np.abs(left[..., :3] / 255.0 - _hwc(fake[j])).max() <= 0.51 / 255  # rounded to 8 bits
        assert np.abs(right[..., :3] / 255.0 - _hwc(REAL[i])).max() <= 0.51 / 255
    with open(os.path.join(folder, "realism", "epoch_0001.csv"), newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["value"]
    realism = cb.last_result["realism"]
    want = realism[torch.isfinite(realism)].double().numpy()  # a copy's realism is inf: not in the values
    assert np.array([float(r[0]) for r in rows[1:]]) == pytest.approx(want, rel=1e-7)


def test_real_images_are_read_again_from_a_folder_and_scaled_like_the_generated_ones(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    real = (REAL * 255).round().to(torch.uint8)
    folder = tmp_path / "real"
    folder.mkdir()
    for i, img in enumerate(real):
        Image.fromarray(img.permute(1, 2, 0).numpy()).save(folder / f"{i:03d}.png")

    def embed(x):
        return (x.float() / 255 if x.dtype == torch.uint8 else x).flatten(1)

    gen = Copier(real)
    logger = TensorBoardLogger(tmp_path, name="tb")
    cb = PRDCallback(
        str(folder), feature_extractor=embed, sample_fn=gen, num_samples=30, log_closest_pairs=3, metric=FAST
    )
    _fit(tmp_path, cb, logger=logger)
    fake = gen.calls[-1]
    fake_index, real_index, _ = _brute_force_pairs(real.double().numpy() / 255, fake.double().numpy(), 3)
    (grid,) = _images(logger.log_dir, "prd/samples/closest_pairs")
    for (left, right), j, i in zip(_cells(grid, 3), fake_index, real_index):
        assert np.abs(left[..., :3] / 255.0 - _hwc(fake[j])).max() <= 1.01 / 255
        assert np.abs(right[..., :3] / 255.0 - _hwc(real[i]) / 255).max() <= 1.01 / 255  # uint8 divided by 255


def test_pair_grid_scales_both_columns_together_and_repeats_one_channel():
    fakes = [torch.tensor([[[-1.0, 0.0], [0.5, 1.0]]])]  # one channel, outside [0, 1]
    reals = [torch.tensor([[[3.0, 1.0], [1.0, 1.0]]])]
    grid = pair_grid(fakes, reals, pad=1)
    lo, hi = -1.0, 3.0
    assert grid.shape == (4, 7, 3)
    np.testing.assert_allclose(grid[1:3, 1:3, 0], (fakes[0][0].numpy() - lo) / (hi - lo))
    np.testing.assert_allclose(grid[1:3, 4:6, 0], (reals[0][0].numpy() - lo) / (hi - lo))
    np.testing.assert_array_equal(grid[..., 0], grid[..., 2])  # grey: the channel is repeated
    assert grid[0].min() == 1.0 and grid[:, 3].min() == 1.0  # white padding between the columns
    big = [torch.ones(1, 4, 4)]  # a real image of another size is resized to the generated size
    assert pair_grid(fakes, big, pad=1).shape == (4, 7, 3)
    assert pair_grid([torch.zeros(5)], [torch.zeros(5)]) is None  # not images


def test_off_by_default(tmp_path):
    cb = PRDCallback(REAL, sample_fn=Copier(), num_samples=30, metric=FAST)
    _fit(tmp_path, cb)
    assert cb.metric.closest_pairs == 0 and not any(k.startswith("closest") for k in cb.last_result)
    assert "authenticity" not in cb.last_result  # nothing the pairs add is computed


def test_grid_needs_images_and_warns_once(tmp_path):
    flat = PRDCallback(
        torch.randn(40, 4),
        sample_fn=lambda m, n: torch.randn(n, 4),
        num_samples=30,
        log_closest_pairs=2,
        metric=FAST,
        log_curves=False,
    )
    trainer = quiet_trainer(tmp_path, [flat], max_epochs=2)
    with pytest.warns(UserWarning, match=r"log_closest_pairs=\.\.\.\): the grid of closest pairs") as record:
        trainer.fit(TinyTrainable())
    assert sum("log_closest_pairs" in str(w.message) for w in record) == 1
    assert flat.last_result["closest_fake_index"].shape == (2,)  # the pairs are there, only not drawn
    np.save(tmp_path / "features.npy", REAL.flatten(1).numpy())
    from_file = PRDCallback(
        str(tmp_path / "features.npy"), sample_fn=Copier(), num_samples=30, log_closest_pairs=2, log_curves=False
    )
    trainer = quiet_trainer(tmp_path, [from_file], max_epochs=1)
    with pytest.warns(UserWarning, match=r"a real set of images \(not a features file\)"):
        trainer.fit(TinyTrainable())


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_bad_log_closest_pairs_is_refused(value):
    with pytest.raises(ValueError, match=r"Expected argument `log_closest_pairs` to be"):
        PRDCallback(REAL, log_closest_pairs=value)


def test_with_log_images_every_grid_goes_in_one_wandb_step(tmp_path, monkeypatch):
    module = types.ModuleType("wandb")
    module.Image = lambda array, caption=None: ("image", array.shape, caption)
    module.Histogram = lambda np_histogram=None: ("histogram", len(np_histogram[0]))
    module.Table = lambda columns, data: ("table", columns)
    module.plot = types.SimpleNamespace(line=lambda *a, **k: ("line",))
    monkeypatch.setitem(sys.modules, "wandb", module)

    class Run:
        def __init__(self):
            self.logged, self.summary = [], {}

        def define_metric(self, name, **kwargs):
            pass

        def log(self, data):
            self.logged.append(data)

    from pytorch_lightning.loggers.logger import DummyLogger

    run = Run()
    logger = type("WandbLogger", (DummyLogger,), {"experiment": property(lambda self: run)})()
    cb = PRDCallback(REAL, sample_fn=Copier(), num_samples=30, log_images=True, num_images=4, log_closest_pairs=3)
    _fit(tmp_path, cb, logger=logger)
    (grids,) = [d for d in run.logged if any(k.startswith("prd/samples/") for k in d)]
    assert {"prd/samples/least_realistic", "prd/samples/closest_pairs", "prd/realism"} <= set(grids)
    assert grids["prd/samples/closest_pairs"][1] == (PAD + 3 * (SIDE + PAD), 2 * SIDE + 3 * PAD, 3)


def test_a_statistics_file_says_to_switch_the_pairs_off(tmp_path):
    np.savez(tmp_path / "stats.npz", mu=np.zeros(4), sigma=np.eye(4))
    only_frechet = dict(
        k_precision_recall=None,
        k_density_coverage=None,
        prd=False,
        alpha_beta=False,
        probabilistic=False,
        pr_cover=False,
    )
    with pytest.raises(
        ValueError, match=r"holds only .* and log_closest_pairs=0 for the Fréchet distance alone"
    ) as info:
        PRDCallback(str(tmp_path / "stats.npz"), metric=only_frechet, log_closest_pairs=2)
    assert "closest_pairs=False" not in str(info.value)
