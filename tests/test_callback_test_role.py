"""PRDCallback(test=...): a held-out real set, read in every form ``real`` takes, embedded like ``real`` and fed to
the metric as role ``test``, so the scores that need it (C_T ``data_copying``, ``fld``) are computed and logged.

A generator that copies its training set is told from a fresh one by the logged scores; each logged value
equals :class:`~lightning_prd.GenerativeMetrics` on the same features. The DDP test (2 gloo processes)
runs ``test=``, per-class labels and the closest-pairs grid together and compares them with one process.
"""

from __future__ import annotations

import glob
import io
import json
import os
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import TensorBoardLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback
from lightning_prd.callback.batches import rows_of
from lightning_prd.metrics.generative import GenerativeMetrics

from tiny_modules import PointsData, TinyTrainable, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*smaller than the logging interval.*",
    "ignore:.*LeafSpec.*",
    "ignore:.*do not say which network made them.*",
)

G = torch.Generator().manual_seed(100)  # not the seed of the callback's noise (0): fresh draws differ from REAL
REAL = torch.randn(150, 2, generator=G)
TEST = torch.randn(100, 2, generator=G)
HELD_OUT = dict(data_copying=dict(num_cells=2, cell_threshold=5), fld=dict(num_epochs=10))
METRIC = dict(HELD_OUT, prd=False, alpha_beta=False, probabilistic=False, pr_cover=False)
N_FAKE = 120


class Recorder:
    """``sample_fn``: copies of the training set (``copy=True``) or fresh draws of its distribution; keeps them."""

    def __init__(self, copy):
        self.copy, self.calls = copy, []

    def __call__(self, pl_module, n):
        x = REAL[:n] + 1e-3 * torch.randn(n, 2) if self.copy else torch.randn(n, 2)
        self.calls.append(x)
        return x


def _fit(tmp_path, cb, datamodule=None, epochs=1):
    trainer = quiet_trainer(tmp_path, [cb], max_epochs=epochs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer.fit(TinyTrainable(), datamodule=datamodule)
    return trainer


def _reference(real, fake, test, metric=METRIC):
    m = GenerativeMetrics(preset="training", **metric)  # the callback's metric
    m.update(real, real=True)
    m.update(fake, real=False)
    m.update(test, role="test")
    return {k: float(v) for k, v in m.compute().items() if v.ndim == 0}


def test_held_out_scores_are_logged_and_tell_copies_from_fresh_samples(tmp_path):
    results = {}
    for copy in (True, False):
        gen = Recorder(copy)
        cb = PRDCallback(REAL, test=TEST, sample_fn=gen, num_samples=N_FAKE, batch_size=N_FAKE, metric=METRIC)
        trainer = _fit(tmp_path / str(copy), cb)
        want = _reference(REAL, gen.calls[-1], TEST)
        assert {"ct", "ct_cells", "fld", "fld_gap", "fld_train", "fld_nll_test"} <= set(want)
        for key, value in want.items():
            assert float(trainer.callback_metrics[f"prd/{key}"]) == pytest.approx(value, rel=1e-6, abs=1e-9), key
        results[copy] = want
    assert results[True]["ct"] < -3 < results[False]["ct"]  # copies sit closer to the training set than held-out data
    assert results[True]["fld_gap"] < results[False]["fld_gap"] and results[True]["fld_gap"] < 0


class WithTest(PointsData):
    def test_dataloader(self):
        return DataLoader(TensorDataset(TEST), batch_size=8, shuffle=True)  # read in index order all the same


def test_every_form_of_test_gives_the_values_of_the_tensor(tmp_path):
    np.save(tmp_path / "test_features.npy", TEST.numpy())
    forms = {
        "tensor": (TEST, None),
        "loader": (DataLoader(TensorDataset(TEST, torch.zeros(100)), batch_size=7), None),
        "features_file": (str(tmp_path / "test_features.npy"), None),
        "datamodule": ("datamodule:test", WithTest()),
    }
    logged = {}
    for name, (test, dm) in forms.items():
        cb = PRDCallback(REAL, test=test, sample_fn=Recorder(True), num_samples=N_FAKE, metric=METRIC)
        _fit(tmp_path / name, cb, datamodule=dm)
        logged[name] = cb.history[-1]
    assert "ct" in logged["tensor"] and "fld" in logged["tensor"]
    for name, values in logged.items():
        assert values == pytest.approx(logged["tensor"], rel=1e-6), name


def test_a_test_folder_of_images_is_embedded_with_the_extractor(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    g = torch.Generator().manual_seed(1)
    real = torch.randint(0, 256, (60, 3, 4, 4), generator=g).to(torch.uint8)
    test = torch.randint(0, 256, (40, 3, 4, 4), generator=g).to(torch.uint8)
    folder = tmp_path / "test_imgs"
    folder.mkdir()
    for i, img in enumerate(test):
        Image.fromarray(img.permute(1, 2, 0).numpy()).save(folder / f"{i:03d}.png")

    def sample(pl_module, n):
        return torch.randint(0, 256, (n, 3, 4, 4)).to(torch.uint8)

    def embed(x):
        return x.float().flatten(1) / 255

    kwargs = dict(feature_extractor=embed, sample_fn=sample, num_samples=50, metric=METRIC)
    by_folder, by_tensor = PRDCallback(real, test=str(folder), **kwargs), PRDCallback(real, test=test, **kwargs)
    _fit(tmp_path / "a", by_folder)
    _fit(tmp_path / "b", by_tensor)
    assert "ct" in by_folder.history[-1]
    assert by_folder.history[-1] == pytest.approx(by_tensor.history[-1], rel=1e-6)


ROWS_SEEN = []


class Embed(nn.Module):
    """Doubles the features and notes how many rows it embedded (in a module-level list, outside the cache key)."""

    def forward(self, x):
        ROWS_SEEN.append(x.shape[0])
        return 2 * x


def test_the_test_set_is_embedded_apart_from_the_real_cache(tmp_path):
    other_test = torch.randn(80, 2, generator=torch.Generator().manual_seed(5))
    values = {}
    for run, test in (("first", TEST), ("second", other_test)):
        ROWS_SEEN.clear()
        gen = Recorder(True)
        cb = PRDCallback(
            REAL,
            test=test,
            sample_fn=gen,
            feature_extractor=Embed(),
            num_samples=N_FAKE,
            batch_size=N_FAKE,
            metric=METRIC,
            cache_dir=tmp_path / "cache",
        )
        _fit(tmp_path / run, cb)
        values[run] = (
            cb.cache.last_status,
            sum(ROWS_SEEN),
            cb.history[-1],
            _reference(2 * REAL, 2 * gen.calls[-1], 2 * test),
        )
    status, rows, logged, want = values["second"]
    dry = 2 + 2  # the dry run before training embeds 2 generated samples and the first 2 real rows
    assert values["first"][0] == "miss" and values["first"][1] == dry + 150 + 100 + N_FAKE
    assert status == "hit"  # another test set does not change the real set's cache entry
    assert rows == dry + 80 + N_FAKE  # the test set is embedded (never cached), the real set is not
    assert {k: v for k, v in logged.items() if k != "epoch"} == pytest.approx(want, rel=1e-6)
    assert logged["ct"] != pytest.approx(values["first"][2]["ct"])


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "metric, match",
    [
        (
            dict(data_copying=True),
            r"^Expected argument `test` \(a held-out real set\) for `data_copying`, but got None: pass",
        ),
        (dict(fld=True), r"^Expected argument `test` \(a held-out real set\) for `fld`, but got None: pass"),
    ],
)
def test_a_score_that_needs_test_raises_in_setup_without_it(tmp_path, metric, match):
    cb = PRDCallback(REAL, sample_fn=Recorder(False), num_samples=40, metric=metric)
    with pytest.raises(ValueError, match=match):
        _fit(tmp_path, cb)
    assert cb.history == []


def test_a_test_set_without_a_score_that_uses_it_raises_in_setup(tmp_path):
    cb = PRDCallback(REAL, test=TEST, sample_fn=Recorder(False), num_samples=40)
    with pytest.raises(
        ValueError, match=r"^Expected no argument `test` without a score that uses it .*data_copying=True"
    ):
        _fit(tmp_path, cb)


def test_num_test_keeps_the_first_held_out_samples(tmp_path):
    gen = Recorder(False)
    cb = PRDCallback(REAL, test=TEST, num_test=60, sample_fn=gen, num_samples=N_FAKE, batch_size=25, metric=METRIC)
    trainer = _fit(tmp_path, cb)
    fake = torch.cat(gen.calls[-5:])  # the last evaluation's 120 samples, drawn in batches of 25
    assert fake.shape[0] == N_FAKE
    want, whole = _reference(REAL, fake, TEST[:60]), _reference(REAL, fake, TEST)
    assert want["fld"] != whole["fld"]  # the cap changes the held-out scores: the check below can fail
    for key in ("ct", "fld", "fld_gap", "fld_nll_test"):
        assert float(trainer.callback_metrics[f"prd/{key}"]) == pytest.approx(want[key], rel=1e-6, abs=1e-9), key
    for bad, kind in ((0, ValueError), (-3, ValueError), (2.5, ValueError)):
        with pytest.raises(kind, match=r"`num_test`"):
            PRDCallback(REAL, test=TEST, num_test=bad, metric=METRIC)


def test_bad_test_values_name_the_argument(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Expected argument `test` to be an existing path, but .*nope.npy"):
        PRDCallback(REAL, test=str(tmp_path / "nope.npy"), metric=METRIC)
    with pytest.raises(TypeError, match=r"Expected argument `test` to be a tensor or a DataLoader .* but got dict"):
        PRDCallback(REAL, test={"x": TEST}, metric=METRIC)
    np.savez(tmp_path / "stats.npz", mu=np.zeros(2), sigma=np.eye(2))
    with pytest.raises(
        ValueError, match=r"Expected argument `test` to hold held-out samples .* only a mean and covariance"
    ):
        PRDCallback(REAL, test=str(tmp_path / "stats.npz"), metric=METRIC)
    with pytest.raises(ValueError, match=r"Expected argument `test` to be one of 'datamodule:train'"):
        PRDCallback(REAL, test="datamodule:nope", metric=METRIC)


def test_test_features_of_another_width_are_refused_and_nothing_half_read_survives(tmp_path):
    cb = PRDCallback(REAL, test=torch.randn(50, 3), sample_fn=Recorder(False), num_samples=40, metric=METRIC)
    with pytest.raises(ValueError, match=r"\(in the features of argument `test`\)"):
        _fit(tmp_path, cb)
    assert not cb.metric.real_features and not cb.metric.test_features and not cb._real_ready


# ---------------------------------------------------------------------------------- DDP
N_REAL_DDP, N_TEST_DDP, N_FAKE_DDP, EPOCHS = 97, 61, 81, 2
CENTRES16 = torch.arange(3).float()[:, None].repeat(1, 16) * 4.0
_g = torch.Generator().manual_seed(7)
REAL_LABELS_DDP = torch.arange(N_REAL_DDP) % 3
REAL_DDP = (CENTRES16[REAL_LABELS_DDP] + torch.randn(N_REAL_DDP, 16, generator=_g)).reshape(-1, 1, 4, 4)
TEST_DDP = (CENTRES16[torch.arange(N_TEST_DDP) % 3] + torch.randn(N_TEST_DDP, 16, generator=_g)).reshape(-1, 1, 4, 4)
_copied = torch.nonzero(REAL_LABELS_DDP != 2).flatten().repeat(2)[:N_FAKE_DDP]  # class 2 is never drawn
FAKE_LABELS_DDP = REAL_LABELS_DDP[_copied]
FAKE_DDP = REAL_DDP[_copied] + 0.3 * torch.randn(len(_copied), 1, 4, 4, generator=_g)
DDP_METRIC = dict(HELD_OUT, per_class=True, prd=False)


def ddp_sample_fn(pl_module, n):
    """This rank's block of the fixed generated table with its labels, scaled by an epoch-dependent factor."""
    trainer = pl_module.trainer
    idx = list(rows_of(N_FAKE_DDP, N_FAKE_DDP, trainer.global_rank, trainer.world_size))  # one global batch
    if pl_module._current_fx_name == "on_fit_start" and n == 2:  # the callback's dry run before training
        idx = [0, 1]
    if n != len(idx):
        raise RuntimeError(f"rank {trainer.global_rank} asked for {n} samples, its shard has {len(idx)}")
    return FAKE_DDP[idx] * (1.0 + 0.25 * trainer.current_epoch), FAKE_LABELS_DDP[idx]


class Dump(pl.Callback):
    """Writes each rank's ``prd/*`` callback metrics per epoch to JSON; destroys the gloo group at teardown."""

    def __init__(self, out_dir):
        self.out_dir = str(out_dir)

    def teardown(self, trainer, pl_module, stage):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    def on_train_epoch_end(self, trainer, pl_module):
        values = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("prd/")}
        path = os.path.join(self.out_dir, f"rank{trainer.global_rank}_epoch{trainer.current_epoch}.json")
        with open(path, "w") as fh:
            json.dump(values, fh)


class Tiny(TinyTrainable):
    train_batch = 2


def _ddp_fit(tmp_path, name, real, test, real_labels=None, **trainer_kwargs):
    out = tmp_path / name
    out.mkdir()
    cb = PRDCallback(
        real,
        real_labels=real_labels,
        test=test,
        sample_fn=ddp_sample_fn,
        num_samples=N_FAKE_DDP,
        batch_size=N_FAKE_DDP,
        metric=DDP_METRIC,
        log_closest_pairs=5,
    )
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        logger=TensorBoardLogger(tmp_path, name=name, version=0),
        callbacks=[cb, Dump(out)],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **trainer_kwargs,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Tiny())
    return out


def _grid(log_dir):
    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import IMAGES, EventAccumulator

    (path,) = glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    acc = EventAccumulator(path, size_guidance={IMAGES: 0})
    acc.Reload()
    return [np.asarray(Image.open(io.BytesIO(e.encoded_image_string))) for e in acc.Images("prd/samples/closest_pairs")]


@pytest.mark.filterwarnings("ignore")
def test_two_process_ddp_logs_the_single_process_values(tmp_path):
    pytest.importorskip("PIL")
    single = _ddp_fit(tmp_path, "single", REAL_DDP, TEST_DDP, real_labels=REAL_LABELS_DDP, devices=1)
    real_loader = DataLoader(TensorDataset(REAL_DDP, REAL_LABELS_DDP), batch_size=10, shuffle=False)
    test_loader = DataLoader(TensorDataset(TEST_DDP), batch_size=9, shuffle=False)
    ddp = _ddp_fit(tmp_path, "ddp", real_loader, test_loader, devices=2, strategy="ddp_spawn")

    expected = [json.loads((single / f"rank0_epoch{e}.json").read_text()) for e in range(EPOCHS)]
    wanted = {"prd/ct", "prd/fld", "prd/fld_gap", "prd/per_class/coverage/2", "prd/lowest_coverage_class"}
    assert wanted <= set(expected[0]) and expected[0]["prd/per_class/coverage/2"] == 0.0
    assert expected[0]["prd/lowest_coverage_class"] == 2
    assert expected[0] != expected[1]  # the epochs differ, so equal values below are not a coincidence
    for rank in (0, 1):
        for e in range(EPOCHS):
            got = json.loads((ddp / f"rank{rank}_epoch{e}.json").read_text())
            assert got.keys() == expected[e].keys()
            for key, value in expected[e].items():
                assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), (rank, e, key)
    single_grids, ddp_grids = _grid(tmp_path / "single" / "version_0"), _grid(tmp_path / "ddp" / "version_0")
    assert len(single_grids) == EPOCHS and single_grids[-1].shape[:2] == (2 + 5 * 6, 2 + 2 * 6)
    assert all(np.array_equal(a, b) for a, b in zip(single_grids, ddp_grids)) and len(ddp_grids) == EPOCHS
