"""Tiny Lightning modules and quiet-Trainer settings shared by the callback tests.

The modules are mixins on top of a LightningModule base, so the same module runs under
``pytorch_lightning`` (:class:`TinyTrainable`, :class:`GaussianSampler`) and ``lightning.pytorch``
(:func:`on_base`); :class:`ScriptedScores` is a metric whose scores follow a script. :data:`QUIET`
holds the Trainer settings that keep a test run silent and free of files it does not ask for;
:func:`quiet_trainer` builds a ``pytorch_lightning`` Trainer with them.
"""

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

#: Trainer settings of a silent test run: no logger, checkpoints, progress bar or model summary
QUIET = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)


class TinyTraining:
    """One parameter, one cheap training step per batch of ``train_rows`` zeros."""

    train_rows, train_batch = 8, 4

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch, batch_idx):
        return (self.w - 1).pow(2).sum() + 0 * batch[0].sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(self.train_rows, 2)), batch_size=self.train_batch)


class GaussianSampling:
    """``sample(n)``: ``scale * N(0, I) + shift`` in ``dim`` dimensions (class attributes), from
    the global generator (the callback seeds it)."""

    dim, scale, shift = 2, 1.0, 0.0

    def sample(self, n):
        return self.scale * torch.randn(n, self.dim) + self.shift


class Validating:
    """A validation loop of ``train_rows`` zeros that computes nothing."""

    def validation_step(self, batch, batch_idx):
        return None

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(self.train_rows, 2)), batch_size=self.train_batch)


class TinyTrainable(TinyTraining, pl.LightningModule):
    """One parameter, one cheap training step per batch of ``train_rows`` zeros."""


class GaussianSampler(GaussianSampling, TinyTrainable):
    """:class:`TinyTrainable` with ``sample(n)`` (:class:`GaussianSampling`)."""


class ScriptedScores:
    """A metric for the callback whose ``compute()`` returns the next of ``values`` as ``coverage`` (then
    repeats the last): scores that rise and fall on cue, for schedule and early-stopping tests."""

    reset_real_features = True

    def __init__(self, values):
        self.values, self.calls = list(values), 0

    def update(self, features, real):
        pass

    def compute(self):
        value = self.values[min(self.calls, len(self.values) - 1)]
        self.calls += 1
        return {"coverage": torch.tensor(value)}

    def reset(self):
        pass

    def to(self, device):
        return self


def on_base(base, *mixins):
    """A module class made of ``mixins`` (default: sampling and training) on another LightningModule
    ``base``, e.g. ``on_base(lightning.pytorch.LightningModule)``."""
    mixins = mixins or (GaussianSampling, TinyTraining)
    return type("".join(m.__name__ for m in mixins), (*mixins, base), {})


def quiet_settings(tmp_path, callbacks, max_epochs=1, **overrides):
    """:data:`QUIET` plus ``max_epochs``, ``callbacks`` and ``default_root_dir=tmp_path``; ``overrides`` win.
    For any Trainer class: ``lightning.pytorch.Trainer(**quiet_settings(tmp_path, [cb]))``."""
    options = dict(QUIET, max_epochs=max_epochs, default_root_dir=str(tmp_path), callbacks=callbacks)
    return {**options, **overrides}


def quiet_trainer(tmp_path, callbacks, max_epochs=1, **kwargs):
    """A ``pytorch_lightning`` Trainer with :func:`quiet_settings`, writing under ``tmp_path``."""
    return pl.Trainer(**quiet_settings(tmp_path, callbacks, max_epochs, **kwargs))


def sample_gaussian(pl_module, n):
    """A ``sample_fn`` importable by path (``tiny_modules:sample_gaussian``): ``n`` points of N(0, I) in 2-D,
    from the global generator (the callback seeds it)."""
    return torch.randn(n, 2)


class TinyGenerator(GaussianSampler):
    """:class:`GaussianSampler` whose one parameter trains on the datamodule's batches (for LightningCLI)."""

    def __init__(self, lr: float = 0.1):
        super().__init__()
        self.lr = lr

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class PointsData(pl.LightningDataModule):
    """``num_points`` seeded 2-D points; ``train_dataloader`` shuffles them (as a training loader does)."""

    def __init__(self, num_points: int = 64, batch_size: int = 16, seed: int = 0):
        super().__init__()
        self.num_points, self.batch_size, self.seed = num_points, batch_size, seed
        self.points = torch.randn(num_points, 2, generator=torch.Generator().manual_seed(seed))

    def train_dataloader(self):
        g = torch.Generator().manual_seed(self.seed + 1)
        return DataLoader(TensorDataset(self.points), batch_size=self.batch_size, shuffle=True, generator=g)


class TanhImages(TinyTrainable):
    """:class:`TinyTrainable` whose ``sample(n)`` gives ``n`` RGB images of ``size`` x ``size`` pixels in [-1, 1]
    (a generator ending in ``tanh``, the DCGAN convention), from the global generator; ``steps`` counts the
    training steps taken."""

    size = 8

    def __init__(self):
        super().__init__()
        self.steps = 0

    def training_step(self, batch, batch_idx):
        self.steps += 1
        return super().training_step(batch, batch_idx)

    def sample(self, n):
        return torch.tanh(2 * torch.randn(n, 3, self.size, self.size))


class AfterDryRun(pl.Callback):
    """After the callback's dry run (``on_fit_start``, :mod:`lightning_prd.callback.dry_run`), which embeds the
    first 2 real rows: the extractor's count of the real rows it embedded (attribute ``attr`` of ``of``, or of
    ``of.feature_extractor`` when ``of`` is the callback) checked to be at most those 2 and cleared, and the
    module's ``cursor`` back at 0, so what follows counts the real side's own extractor calls and a module drawing
    from a fixed table with a cursor samples it as a fit without the dry run would."""

    def __init__(self, of, attr="real_rows", rows=2):
        self.of, self.attr, self.rows = of, attr, rows

    def on_fit_start(self, trainer, pl_module):
        extractor = getattr(self.of, "feature_extractor", self.of)
        assert getattr(extractor, self.attr, 0) <= self.rows, getattr(extractor, self.attr)
        setattr(extractor, self.attr, 0)
        pl_module.cursor = 0
