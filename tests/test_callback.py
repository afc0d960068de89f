"""PRDCallback with a tiny module: when it runs, what it logs, RNG and mode hygiene, checkpoints."""

from __future__ import annotations

import csv
import pickle
import random
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback, rank_shard
from lightning_prd.metrics.generative import GenerativeMetrics

KEYS = {"prd/precision", "prd/recall", "prd/density", "prd/coverage", "prd/frechet_distance"}
REAL = torch.randn(256, 2, generator=torch.Generator().manual_seed(0))

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*smaller than the logging interval.*",
    "ignore:.*LeafSpec.*",
    "ignore:.*callbacks used to create the checkpoint.*",
    "ignore:.*module\\(s\\) in eval mode.*",
)


class Tiny(pl.LightningModule):
    """``sample(n)``: N(0, s_e^2 I) with ``s_e = scales[current_epoch]``; a frozen eval-mode submodule."""

    def __init__(self, scales=(1.0,), validation=False):
        super().__init__()
        self.scales = list(scales)
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.frozen = torch.nn.Linear(2, 2).eval()
        self.has_validation = validation
        self.sampled_in = []  # (fx name, training flag, grad enabled, sanity checking) per sample() call

    def training_step(self, batch, batch_idx):
        return (self.w - 1).pow(2).sum() + 0 * batch[0].sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4)

    def sample(self, n):
        t = self.trainer
        self.sampled_in.append((self._current_fx_name, self.training, torch.is_grad_enabled(), t.sanity_checking))
        scale = self.scales[min(t.current_epoch, len(self.scales) - 1)]
        return torch.randn(n, 2) * scale


class TinyVal(Tiny):
    def validation_step(self, batch, batch_idx):
        return None

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4)


def trainer(tmp_path, **kw):
    opts = dict(
        max_epochs=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        num_sanity_val_steps=2,
    )
    opts.update(kw)
    return pl.Trainer(**opts)


def fit(tmp_path, cb, module=None, **kw):
    module = module or Tiny()
    t = trainer(tmp_path, callbacks=[cb] + kw.pop("extra", []), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "no logger: curves skipped" is tested in test_loggers
        t.fit(module)
    return t, module


def test_scalars_reach_callback_metrics_and_history(tmp_path):
    cb = PRDCallback(REAL, num_samples=256)
    t, _ = fit(tmp_path, cb)
    assert KEYS <= set(t.callback_metrics)
    assert [h["epoch"] for h in cb.history] == [0, 1, 2]
    assert float(t.callback_metrics["prd/coverage"]) == pytest.approx(cb.history[-1]["coverage"])
    assert 0.8 < cb.history[-1]["precision"] <= 1.0  # same distribution as the real set


def test_model_checkpoint_monitors_coverage(tmp_path):
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="prd/coverage", mode="max", filename="{epoch}")
    cb = PRDCallback(REAL, num_samples=256)
    fit(tmp_path, cb, Tiny(scales=[0.2, 1.0, 0.2]), enable_checkpointing=True, extra=[ckpt])
    coverage = [h["coverage"] for h in cb.history]
    assert coverage[1] > coverage[0] and coverage[1] > coverage[2]  # the collapsed epochs cover less
    assert ckpt.best_model_path.endswith("epoch=1.ckpt")
    assert float(ckpt.best_model_score) == pytest.approx(coverage[1])


def test_every_n_epochs(tmp_path):
    cb = PRDCallback(REAL, num_samples=64, every_n_epochs=2, evaluate_on_train_end=False)
    fit(tmp_path, cb, max_epochs=5)
    assert [h["epoch"] for h in cb.history] == [1, 3]


def test_runs_after_validation_never_in_sanity_check(tmp_path):
    module = TinyVal()
    cb = PRDCallback(REAL, num_samples=64, batch_size=64)
    fit(tmp_path, cb, module, max_epochs=2)
    assert [h["epoch"] for h in cb.history] == [0, 1]
    assert [call[0] for call in module.sampled_in] == ["on_fit_start"] + ["on_validation_epoch_end"] * 2  # dry run
    assert not any(call[3] for call in module.sampled_in)  # never while sanity checking
    real_rows = sum(int(t.shape[0]) for t in cb.metric.real_features)
    assert real_rows == len(REAL)  # real features extracted once, not once per evaluation


def test_runs_at_train_epoch_end_without_validation(tmp_path):
    module = Tiny()
    fit(tmp_path, PRDCallback(REAL, num_samples=64, batch_size=64), module, max_epochs=2)
    assert [call[0] for call in module.sampled_in] == ["on_fit_start"] + ["on_train_epoch_end"] * 2  # dry run


class Probe(Callback):
    """Records RNG states and the module's training flags at train-epoch end."""

    def __init__(self):
        self.states = []

    def on_train_epoch_end(self, trainer, pl_module):
        self.states.append(
            (
                torch.get_rng_state(),
                np.random.get_state()[1].copy(),
                random.getstate(),
                pl_module.training,
                pl_module.frozen.training,
            )
        )


def test_eval_mode_no_grad_restored_modes_and_untouched_rng(tmp_path):
    before, after = Probe(), Probe()
    module = Tiny()
    cb = PRDCallback(REAL, num_samples=64, batch_size=64)
    t = trainer(tmp_path, callbacks=[before, cb, after], max_epochs=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        t.fit(module)
    assert all(not training and not grad for _, training, grad, _ in module.sampled_in)
    for b, a in zip(before.states, after.states):
        assert torch.equal(b[0], a[0]) and np.array_equal(b[1], a[1]) and b[2] == a[2]
        assert a[3] is True and a[4] is False  # module back in train mode, frozen part still in eval


def test_fixed_noise_every_epoch_and_seed_changes_it(tmp_path):
    draws = []

    def sample_fn(module, n):
        draws.append(torch.randn(n, 2))
        return draws[-1]

    fit(tmp_path, PRDCallback(REAL, sample_fn=sample_fn, num_samples=32), max_epochs=2)
    fit(tmp_path, PRDCallback(REAL, sample_fn=sample_fn, num_samples=32, seed=1), max_epochs=1)
    draws = [d for d in draws if len(d) == 32]  # the dry run's 2 samples before each fit left out
    assert len(draws) == 3
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[0], draws[2])


def test_dataloader_real_num_real_and_feature_extractor(tmp_path):
    loader = DataLoader(TensorDataset(REAL, torch.zeros(len(REAL))), batch_size=50)
    seen = []

    def extractor(x):
        seen.append(x.shape[0])
        return x[:, :1] * 2

    cb = PRDCallback(loader, num_real=120, feature_extractor=extractor, num_samples=40, batch_size=40)
    fit(tmp_path, cb, max_epochs=2)
    real = torch.cat(list(cb.metric.real_features))
    assert real.shape == (120, 1)
    assert torch.equal(real, REAL[:120, :1] * 2)
    assert seen == [2, 2, 50, 50, 20, 40, 40]  # the dry run (2 fake, 2 real), real once (3 batches), 40 fake per epoch


def test_metric_that_resets_real_features_reextracts_them(tmp_path):
    calls = []

    def extractor(x):
        calls.append(x.shape[0])
        return x

    metric = GenerativeMetrics(reset_real_features=True)
    cb = PRDCallback(REAL, metric=metric, feature_extractor=extractor, num_samples=64, batch_size=256)
    fit(tmp_path, cb, max_epochs=2)
    assert calls == [2, 2, 256, 64, 256, 64]  # the dry run's 2 fake and 2 real rows first
    assert len(cb.history) == 2


def test_metric_options_dict(tmp_path):
    cb = PRDCallback(REAL, metric={"k_precision_recall": 5, "frechet": False}, num_samples=64)
    t, _ = fit(tmp_path, cb, max_epochs=1)
    assert cb.metric.k_precision_recall == 5 and cb.metric.reset_real_features is False
    assert "prd/frechet_distance" not in t.callback_metrics and "prd/precision" in t.callback_metrics


def test_missing_sampler_fails_in_setup(tmp_path):
    class NoSample(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, batch_idx):
            return self.w.sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def train_dataloader(self):
            return DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=2)

    with pytest.raises(ValueError, match="sample_fn.*NoSample"):
        trainer(tmp_path, callbacks=[PRDCallback(REAL)]).fit(NoSample())


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(real="data.npy"), FileNotFoundError, "`real`.*data.npy"),
        (dict(real=torch.empty(0, 2)), ValueError, "`real`"),
        (dict(sample_fn=3), TypeError, "`sample_fn`"),
        (dict(num_samples=0), ValueError, "`num_samples`.*0"),
        (dict(num_real=-1), ValueError, "`num_real`"),
        (dict(every_n_epochs=1.5), ValueError, "`every_n_epochs`"),
        (dict(prefix=None), TypeError, "`prefix`"),
        (dict(seed=-1), ValueError, "`seed`"),
        (dict(metric="fid"), TypeError, "`metric`"),
        (dict(feature_extractor="vgg"), TypeError, "`feature_extractor`"),
        (dict(log_curves="yes"), TypeError, "`log_curves`"),
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    kwargs = {"real": REAL, **kwargs}
    with pytest.raises(error, match=match):
        PRDCallback(kwargs.pop("real"), **kwargs)


def test_bad_sample_fn_output(tmp_path):
    cb = PRDCallback(REAL, sample_fn=lambda m, n: torch.randn(n + 1, 2), num_samples=8)
    with pytest.raises(ValueError, match="sample_fn.*2 samples.* before the first training step"):
        fit(tmp_path, cb, max_epochs=1)


def test_state_dict_round_trip():
    cb = PRDCallback(REAL)
    cb.history = [{"epoch": 0, "precision": 0.5, "recall": 0.25}]
    other = PRDCallback(REAL)
    other.load_state_dict(pickle.loads(pickle.dumps(cb.state_dict())))
    assert other.history == cb.history
    assert PRDCallback(REAL, prefix="a/").state_key != cb.state_key


def test_resume_keeps_history_and_does_not_relog(tmp_path):
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    first = PRDCallback(REAL, num_samples=64)
    fit(tmp_path, first, max_epochs=2, enable_checkpointing=True, extra=[ckpt])
    saved = torch.load(ckpt.last_model_path, weights_only=False)["callbacks"][first.state_key]
    assert [h["epoch"] for h in saved["history"]] == [0, 1]

    module, second = Tiny(), PRDCallback(REAL, num_samples=64)
    logger = CSVLogger(tmp_path, name="resumed")
    t = trainer(tmp_path, callbacks=[second], max_epochs=4, logger=logger)
    t.fit(module, ckpt_path=ckpt.last_model_path)
    assert [h["epoch"] for h in second.history] == [0, 1, 2, 3]
    assert second.history[:2] == saved["history"]
    assert [c[0] for c in module.sampled_in] == ["on_fit_start"] + ["on_train_epoch_end"] * 2  # epochs 2, 3 only
    with open(f"{logger.log_dir}/metrics.csv") as fh:
        epochs = [int(r["epoch"]) for r in csv.DictReader(fh) if r.get("prd/coverage")]
    assert epochs == [2, 3]


def test_a_new_fit_starts_a_new_history(tmp_path):
    cb = PRDCallback(REAL, num_samples=64)
    fit(tmp_path, cb, max_epochs=2)
    fit(tmp_path, cb, max_epochs=1)
    assert [h["epoch"] for h in cb.history] == [0]


def test_rank_shard_is_an_ordered_partition():
    for total in (0, 1, 7, 10):
        for world in (1, 2, 3):
            parts = [list(rank_shard(total, r, world)) for r in range(world)]
            assert [i for p in parts for i in p] == list(range(total))  # contiguous, in rank order
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_dataloader_shards_match_tensor_shards():
    loader = DataLoader(TensorDataset(REAL), batch_size=7)
    unsized = [REAL[:50], (REAL[50:120], None), [REAL[120:]]]  # no `.dataset`: rows are counted first
    for world in (1, 2, 3):
        for num_real in (100, None):
            for rank in range(world):
                want = torch.cat(list(PRDCallback(REAL, num_real=num_real, batch_size=1000)._real_chunks(rank, world)))
                for source in (loader, unsized):
                    got = PRDCallback(source, num_real=num_real)._real_chunks(rank, world)
                    assert torch.equal(torch.cat(list(got)), want)


def test_empty_real_dataloader_raises():
    with pytest.raises(ValueError, match="`real`.*empty"):
        list(PRDCallback([])._real_chunks(0, 1))


def test_non_finite_real_samples_are_named_as_the_argument_real():
    bad = REAL.clone()
    bad[5, 1] = float("nan")
    with pytest.raises(ValueError, match="`real` to be finite, but 1 of its 256 samples hold NaN or Inf"):
        PRDCallback(bad)  # a tensor: at construction, before any training
    callback = PRDCallback(DataLoader(TensorDataset(bad), batch_size=30))  # a loader: when first read
    with pytest.raises(ValueError, match=r"`features` to be finite.*\(in the features of argument `real`\)"):
        callback._update_real(torch.device("cpu"), 0, 1)
    assert not callback._real_ready


def test_unified_lightning_package(tmp_path):
    L = pytest.importorskip("lightning.pytorch")
    from lightning_prd.lightning import PRDCallback as LPRDCallback

    class Gen(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, batch_idx):
            return self.w.pow(2).sum() + 0 * batch[0].sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def sample(self, n):
            return torch.randn(n, 2)

    cb = LPRDCallback(REAL, num_samples=64)
    assert isinstance(cb, L.Callback)
    t = L.Trainer(
        max_epochs=2,
        logger=L.loggers.CSVLogger(tmp_path),
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    t.fit(Gen(), DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4))
    assert [h["epoch"] for h in cb.history] == [0, 1]
    assert KEYS <= set(t.callback_metrics)
    with open(tmp_path / "lightning_logs" / "version_0" / "metrics.csv") as fh:
        assert [int(r["epoch"]) for r in csv.DictReader(fh) if r.get("prd/coverage")] == [0, 1]


def test_gan_ring_example_fast(tmp_path):
    import glob
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, os.path.join(root, "examples", "gan_ring.py"), "--fast", "--logdir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["epoch", "precision", "recall"])
    assert [line.split()[0] for line in lines[header + 1 : header + 3]] == ["0", "1"]  # one row per epoch
    start = next(i for i, line in enumerate(lines) if line.startswith("Scores on a fresh real sample"))
    columns = lines[start + 1].split()

    def row(name):
        line = next(line for line in lines[start:] if line.startswith(name))
        return dict(zip(columns, map(float, line[len(name) :].split())))

    collapsed, reference = row("collapsed (2 of 8 modes)"), row("real data (2nd sample)")
    assert collapsed["precision"] > 0.8 and collapsed["recall"] < 0.4 and collapsed["coverage"] < 0.4
    assert reference["precision"] > 0.8 and reference["recall"] > 0.8 and reference["coverage"] > 0.8
    assert "latent scale 0.25" in out and "latent scale 2" in out
    assert f"tensorboard --logdir {tmp_path / 'runs'}" in out
    assert glob.glob(str(tmp_path / "runs" / "gan_ring" / "seed0_epochs2_fast" / "events.out.tfevents.*"))
