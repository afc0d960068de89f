"""Rules of PRDCallback seen from a real Trainer run: several callbacks on one logger, early stopping
on scores computed every N epochs, the user's RNG left alone, errors that name their source, and a
Custom Scalars layout that shows what was logged."""

from __future__ import annotations

import csv
import glob
import os
import random
import sys
import types
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger, Logger, TensorBoardLogger
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback
from lightning_prd.runs.scores import DIRECTIONS

from tiny_modules import (
    GaussianSampler,
    GaussianSampling,
    ScriptedScores,
    TinyTraining,
    Validating,
    on_base,
    quiet_trainer,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*smaller than the logging interval.*",
    "ignore:.*LeafSpec.*",
    "ignore:.*curves are skipped.*",
    "ignore:.*callbacks used to create the checkpoint.*",
)

REAL = torch.randn(160, 2, generator=torch.Generator().manual_seed(0))


class Shifted(GaussianSampler):
    shift = 0.5


class ValidatedSampler(Validating, GaussianSampler):
    pass


def _cb(**kwargs):
    return PRDCallback(REAL, **{"num_samples": 160, **kwargs})


# ---------------------------------------------------------------------------------- several callbacks, one logger
def _read_csv(path):
    with open(path) as fh:
        return list(csv.reader(fh))


def test_two_prefixes_on_one_csv_logger_keep_their_curve_files(tmp_path):
    logger = CSVLogger(tmp_path, name="csv")
    first, second = _cb(), _cb(prefix="ema/", seed=3)
    quiet_trainer(tmp_path, [first, second], max_epochs=2, logger=logger).fit(Shifted())
    root = logger.log_dir
    files = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "**", "epoch_*.csv"), recursive=True))
    # two callbacks x two kinds of curve x two epochs, none overwritten; the default prefix keeps its folders
    assert len(files) == 8, files
    assert {f for f in files if os.path.dirname(f) in ("prd_curves", "alpha_beta_curves")} == {
        os.path.join(kind, f"epoch_{e:04d}.csv") for kind in ("prd_curves", "alpha_beta_curves") for e in (0, 1)
    }
    for cb, folder in ((first, root), (second, os.path.join(root, "ema"))):
        rows = _read_csv(os.path.join(folder, "prd_curves", "epoch_0001.csv"))
        assert rows[0] == ["recall", "precision"]
        got = np.array([[float(v) for v in row] for row in rows[1:]])
        want = np.stack([cb.last_result["prd_recall"].numpy(), cb.last_result["prd_precision"].numpy()], 1)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)  # each file holds its own callback's curve
    assert not np.array_equal(first.last_result["prd_recall"].numpy(), second.last_result["prd_recall"].numpy())


def test_csv_curve_folders_of_odd_prefixes_stay_inside_the_log_dir(tmp_path):
    logger = CSVLogger(tmp_path, name="csv")
    cbs = [_cb(prefix=p, log_curves=True) for p in ("../up/", "a b:c/", "flat_")]
    quiet_trainer(tmp_path, cbs, logger=logger).fit(GaussianSampler())
    root = os.path.realpath(logger.log_dir)
    found = glob.glob(os.path.join(tmp_path, "**", "epoch_0000.csv"), recursive=True)
    assert len(found) == 6 and all(os.path.realpath(p).startswith(root + os.sep) for p in found)
    assert os.path.isfile(os.path.join(root, "flat_prd_curves", "epoch_0000.csv"))


def test_two_prefixes_whose_csv_folders_collide_fail_with_a_clear_error(tmp_path):
    logger = CSVLogger(tmp_path, name="csv")
    with pytest.raises(ValueError, match="`prefix`.*'prd/'.*''"):
        quiet_trainer(tmp_path, [_cb(), _cb(prefix="")], logger=logger).fit(GaussianSampler())


def _layouts(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.util import tensor_util

    (path,) = glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    acc = EventAccumulator(path, size_guidance={TENSORS: 0})
    acc.Reload()
    out = []
    for event in acc.Tensors("custom_scalars__config__"):
        layout = layout_pb2.Layout()
        layout.ParseFromString(tensor_util.make_ndarray(event.tensor_proto).item())
        out.append({cat.title: {c.title: list(c.multiline.tag) for c in cat.chart} for cat in layout.category})
    return out, acc


def test_two_prefixes_on_one_tensorboard_logger_both_keep_their_layout(tmp_path):
    logger = TensorBoardLogger(tmp_path, name="tb")
    first, second = _cb(log_curves=False), _cb(prefix="ema/", log_curves=False)
    quiet_trainer(tmp_path, [first, second], max_epochs=2, logger=logger).fit(GaussianSampler())
    layouts, acc = _layouts(logger.log_dir)
    shown = layouts[-1]  # TensorBoard shows the newest layout of a run
    assert set(shown) == {"prd/", "ema/"}
    for cb in (first, second):
        tags = {t for chart in shown[cb.prefix].values() for t in chart}
        assert {f"^{cb.prefix}{n}$" for n in ("precision", "coverage")} <= tags
        assert {f"{cb.prefix}{n}" for n in ("precision", "coverage")} <= set(acc.Tags()["scalars"])
    assert len(layouts) == 2  # written again only when it grew


class FakeRun:
    def __init__(self):
        self.defined, self.logged, self.summary = {}, [], {}

    def define_metric(self, name, **kwargs):
        self.defined[name] = kwargs

    def log(self, data):
        self.logged.append(data)


class MemoryLogger(Logger):
    name, version = "memory", 0

    def log_metrics(self, metrics, step=None):
        pass

    def log_hyperparams(self, params, *args, **kwargs):
        pass


@pytest.fixture
def fake_wandb(monkeypatch):
    module = types.ModuleType("wandb")

    class Table:
        def __init__(self, columns, data):
            self.columns, self.data = list(columns), [list(r) for r in data]

    module.Table = Table
    module.Image = lambda array, caption=None: ("image", array.shape, caption)
    module.plot = types.SimpleNamespace(
        line=lambda table, x, y, stroke=None, title="": {"table": table, "x": x, "y": y, "title": title}
    )
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


def test_two_prefixes_on_one_wandb_logger_keep_their_tables(tmp_path, fake_wandb):
    run_ = FakeRun()
    logger = type("WandbLogger", (MemoryLogger,), {"experiment": property(lambda self: run_)})()
    first, second = _cb(every_n_epochs=1), _cb(prefix="ema/", every_n_epochs=2)
    quiet_trainer(tmp_path, [first, second], max_epochs=2, logger=logger).fit(Shifted())
    last = {}
    for entry in run_.logged:
        last.update(entry)
    for cb, epochs in ((first, [0, 1]), (second, [1])):
        chart = last[f"{cb.prefix}prd_curve"]
        assert sorted({row[0] for row in chart["table"].data}) == epochs  # only its own evaluations
        assert run_.defined[f"{cb.prefix}coverage"]["step_metric"] == f"{cb.prefix}epoch"
        assert cb.prefix in chart["title"]
        assert last[f"{cb.prefix}coverage"] == pytest.approx(cb.history[-1]["coverage"])
    assert last["prd/prd_curve"]["title"] != last["ema/prd_curve"]["title"]


# ---------------------------------------------------------------------------------- early stopping
SCORES = [0.5, 0.6, 0.55, 0.54, 0.9, 0.95]  # best at the 2nd evaluation, then two that do not improve


SCHEDULES = {
    "no validation": (GaussianSampler, {}),
    "validation every epoch": (ValidatedSampler, {}),
    "validation every 3rd epoch": (ValidatedSampler, {"check_val_every_n_epoch": 3}),
    "validation twice per epoch": (ValidatedSampler, {"val_check_interval": 0.5}),
}


@pytest.mark.parametrize("where", [None, True, False])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_prd_early_stopping_patience_counts_evaluations(tmp_path, schedule, where):
    from lightning_prd.callback import PRDEarlyStopping

    module_cls, options = SCHEDULES[schedule]
    prd = _cb(metric=ScriptedScores(SCORES), every_n_epochs=2)
    # strict, as EarlyStopping by default; EarlyStopping's `check_on_train_epoch_end` changes nothing
    stop = PRDEarlyStopping(monitor="prd/coverage", patience=2, check_on_train_epoch_end=where)
    assert stop.mode == "max"  # from the score's direction
    trainer = quiet_trainer(tmp_path, [prd, stop], max_epochs=20, num_sanity_val_steps=2, **options)
    trainer.fit(module_cls())
    assert [h["epoch"] for h in prd.history] == [1, 3, 5, 7]  # the 3rd and 4th evaluations do not improve
    assert stop.stopped_epoch == 7 and trainer.current_epoch == 8 and stop.wait_count == 2
    assert float(stop.best_score) == pytest.approx(0.6)


def test_prd_early_stopping_resumes_counting_evaluations(tmp_path):
    from lightning_prd.callback import PRDEarlyStopping

    prd = _cb(metric=ScriptedScores(SCORES), every_n_epochs=2)
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    first = PRDEarlyStopping(monitor="prd/coverage", patience=2)
    quiet_trainer(tmp_path, [prd, first, ckpt], max_epochs=6, enable_checkpointing=True).fit(GaussianSampler())
    assert first.wait_count == 1 and not first.stopped_epoch  # evaluations at epochs 1, 3, 5
    prd = _cb(metric=ScriptedScores(SCORES[3:]), every_n_epochs=2)
    again = PRDEarlyStopping(monitor="prd/coverage", patience=2)
    trainer = quiet_trainer(tmp_path, [prd, again], max_epochs=20)
    trainer.fit(GaussianSampler(), ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))
    assert [h["epoch"] for h in prd.history] == [1, 3, 5, 7]
    assert again.stopped_epoch == 7 and again.wait_count == 2


def test_prd_early_stopping_with_the_lightning_package(tmp_path):
    L = pytest.importorskip("lightning.pytorch")
    from lightning_prd.lightning import PRDCallback as LPRDCallback
    from lightning_prd.lightning import PRDEarlyStopping as LPRDEarlyStopping

    from tiny_modules import quiet_settings

    prd = LPRDCallback(REAL, num_samples=160, metric=ScriptedScores(SCORES), every_n_epochs=2)
    stop = LPRDEarlyStopping(monitor="prd/coverage", patience=2)
    assert isinstance(stop, L.callbacks.EarlyStopping)
    module = on_base(L.LightningModule, Validating, GaussianSampling, TinyTraining)()
    L.Trainer(**quiet_settings(tmp_path, [prd, stop], max_epochs=20)).fit(module)
    assert [h["epoch"] for h in prd.history] == [1, 3, 5, 7] and stop.stopped_epoch == 7


def test_prd_early_stopping_errors_name_the_argument(tmp_path):
    from lightning_prd.callback import PRDEarlyStopping

    with pytest.raises(ValueError, match="`mode`.*'prd/density'"):
        PRDEarlyStopping(monitor="prd/density")  # 1 is ideal: neither max nor min
    assert PRDEarlyStopping(monitor="prd/frechet_distance").mode == "min"
    assert PRDEarlyStopping(monitor="prd/density", mode="min").mode == "min"
    stop = PRDEarlyStopping(monitor="gen/coverage")
    with pytest.raises(ValueError, match="`monitor`.*'gen/coverage'.*'prd/'"):
        quiet_trainer(tmp_path, [_cb(), stop]).fit(GaussianSampler())
    missing = PRDEarlyStopping(monitor="prd/recall")  # a score the metric does not return: strict
    with pytest.raises(RuntimeError, match="prd/recall"):
        quiet_trainer(tmp_path, [_cb(metric=ScriptedScores(SCORES)), missing]).fit(GaussianSampler())


def test_plain_early_stopping_on_sparse_scores_warns_with_the_fix(tmp_path):
    prd = _cb(metric=ScriptedScores(SCORES), every_n_epochs=2)
    stop = EarlyStopping(monitor="prd/coverage", mode="max", strict=False)
    with pytest.warns(UserWarning, match="PRDEarlyStopping"):
        quiet_trainer(tmp_path, [prd, stop], max_epochs=2).fit(GaussianSampler())
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        every_epoch = [_cb(metric=ScriptedScores(SCORES)), EarlyStopping(monitor="prd/coverage", mode="max")]
        quiet_trainer(tmp_path, every_epoch, max_epochs=2).fit(GaussianSampler())  # fresh scores: no warning
    assert not [w for w in record if "PRDEarlyStopping" in str(w.message)]


# ---------------------------------------------------------------------------------- the user's RNG
def _draw_everywhere(n=1):
    return torch.rand(n).sum() + float(np.random.rand()) + random.random()


class Noisy(GaussianSampler):
    """Training that draws from every global generator, so a consumed draw changes the weights."""

    def training_step(self, batch, batch_idx):
        return (self.w - _draw_everywhere()).pow(2).sum() + 0 * batch[0].sum()

    def sample(self, n):
        _draw_everywhere()
        return super().sample(n)


def noisy_extractor(x):
    return x.float() + 0.01 * torch.rand_like(x.float()) + 0 * _draw_everywhere()


class DrawingMetric(ScriptedScores):
    def compute(self):
        out = super().compute()
        return {"coverage": out["coverage"] + 0 * _draw_everywhere(), "precision": torch.rand(())}


def _states():
    return torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()


def _fit_noisy(tmp_path, callbacks, seed=0, **options):
    pl.seed_everything(seed, verbose=False)
    module = Noisy()
    quiet_trainer(tmp_path, callbacks, max_epochs=3, **options).fit(module)
    return module.w.detach().clone(), _states()


@pytest.mark.parametrize("metric", ["default", "drawing"])
def test_global_rng_untouched_whatever_extractor_generator_and_metric_draw(tmp_path, metric):
    baseline_w, baseline = _fit_noisy(tmp_path, [])
    real = DataLoader(TensorDataset(REAL), batch_size=50)
    options = {"metric": DrawingMetric(SCORES)} if metric == "drawing" else {}
    cb = PRDCallback(real, feature_extractor=noisy_extractor, num_samples=100, batch_size=40, **options)
    w, states = _fit_noisy(tmp_path, [cb])
    assert len(cb.history) == 3
    assert torch.equal(w, baseline_w)  # the training run is the one without the callback
    assert torch.equal(states[0], baseline[0]) and np.array_equal(states[1], baseline[1]) and states[2] == baseline[2]


def test_an_evaluation_depends_on_the_weights_and_seed_not_on_the_global_rng(tmp_path):
    runs = []
    for user_seed in (0, 1):
        cb = PRDCallback(REAL, feature_extractor=noisy_extractor, num_samples=100, metric=DrawingMetric(SCORES))
        _fit_noisy(tmp_path, [cb], seed=user_seed)
        runs.append([(h["epoch"], h["precision"]) for h in cb.history])
    assert runs[0] == runs[1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_rng_untouched(tmp_path):
    def extractor(x):
        return x + 0.01 * torch.rand_like(x)

    class Gpu(GaussianSampler):
        def sample(self, n):
            return torch.randn(n, 2, device=self.device)

    cb = PRDCallback(REAL, feature_extractor=extractor, num_samples=100)
    torch.cuda.manual_seed(5)
    before = torch.cuda.get_rng_state()
    quiet_trainer(tmp_path, [cb], accelerator="gpu", devices=1).fit(Gpu())
    assert torch.equal(torch.cuda.get_rng_state(), before)


# ---------------------------------------------------------------------------------- errors name their source
def _nan_rows(n):
    x = torch.randn(n, 2)
    x[::3] = float("nan")
    return x


def _nan_for_3d(x):
    return x.reshape(len(x), -1)[:, :2] * (torch.nan if x.ndim == 3 else 1.0)


class NanSampler(GaussianSampler):
    def sample(self, n):
        return _nan_rows(n)


@pytest.mark.parametrize(
    "kwargs, module, error, match",
    [
        ({"sample_fn": lambda m, n: _nan_rows(n)}, GaussianSampler, ValueError, r"generated samples.*`sample_fn"),
        ({}, NanSampler, ValueError, r"generated samples.*`NanSampler\.sample"),
        (
            {"sample_fn": lambda m, n: torch.randint(0, 9, (n, 2))},
            GaussianSampler,
            TypeError,
            r"floating.*generated samples.*`sample_fn`",
        ),
        (
            {"sample_fn": lambda m, n: torch.randn(n, 2, 2), "feature_extractor": _nan_for_3d},
            GaussianSampler,
            ValueError,
            r"`feature_extractor`.*generated samples.*`sample_fn`",
        ),
    ],
)
def test_errors_of_the_generated_side_name_the_generator(tmp_path, kwargs, module, error, match):
    cb = PRDCallback(REAL, num_samples=40, **kwargs)
    with pytest.raises(error, match=match):
        quiet_trainer(tmp_path, [cb]).fit(module())


def test_errors_of_the_extractor_name_it_and_the_samples(tmp_path):
    def broken(x):
        if x.shape[1] != 2:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        return x

    cb = PRDCallback(REAL, num_samples=40, feature_extractor=broken, sample_fn=lambda m, n: torch.randn(n, 3))
    with pytest.raises(RuntimeError, match=r"`feature_extractor`.*generated samples.*`sample_fn`.*mat1"):
        quiet_trainer(tmp_path, [cb]).fit(GaussianSampler())
    cb = PRDCallback(torch.randn(50, 3), num_samples=40, feature_extractor=broken)
    with pytest.raises(RuntimeError, match=r"`feature_extractor`.*`real`.*mat1"):
        quiet_trainer(tmp_path, [cb]).fit(GaussianSampler())


# ---------------------------------------------------------------------------------- Custom Scalars layout
def test_custom_scalars_layout_shows_only_the_logged_scores_one_per_chart(tmp_path):
    logger = TensorBoardLogger(tmp_path, name="tb")
    cb = _cb(log_curves=False)
    quiet_trainer(tmp_path, [cb], max_epochs=1, logger=logger).fit(GaussianSampler())
    (layout,), acc = _layouts(logger.log_dir)
    logged = {t for t in acc.Tags()["scalars"] if t.startswith("prd/")} - {"prd/epoch"}  # the epoch is no score
    charts = [tags for category in layout.values() for tags in category.values()]
    assert all(len(tags) == 1 for tags in charts)  # one score per chart: its lines are the runs
    assert {tags[0] for tags in charts} == {f"^prd/{k[4:]}$" for k in logged}
    assert not {"prd/kid", "prd/vendi", "prd/top_precision", "prd/cmmd"} & logged  # off by default
    titles = list(layout["prd/"])
    assert titles[:4] == [f"{n} (higher is better)" for n in ("precision", "recall")] + [
        "density (1 is ideal)",
        "coverage (higher is better)",
    ]
    known = [n for n in DIRECTIONS if f"prd/{n}" in logged]
    assert [t.split(" (")[0] for t in titles] == known  # every logged score here has a direction


def test_custom_scalars_layout_grows_with_a_score_switched_on(tmp_path):
    logger = TensorBoardLogger(tmp_path, name="tb")
    cb = _cb(log_curves=False, metric={"kid": {"subset_size": 100, "subsets": 10}, "prd": False, "alpha_beta": False})
    quiet_trainer(tmp_path, [cb], max_epochs=1, logger=logger).fit(GaussianSampler())
    (layout,), _ = _layouts(logger.log_dir)
    assert "kid (lower is better)" in layout["prd/"] and "f_beta (higher is better)" not in layout["prd/"]
