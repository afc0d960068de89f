"""A trivially trainable LightningModule for callback tests: subclasses add ``sample(n)``."""

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset


class TinyTrainable(pl.LightningModule):
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


class GaussianSampler(TinyTrainable):
    """``sample(n)``: ``scale * N(0, I) + shift`` in ``dim`` dimensions (class attributes), from
    the global generator (the callback seeds it)."""

    dim, scale, shift = 2, 1.0, 0.0

    def sample(self, n):
        return self.scale * torch.randn(n, self.dim) + self.shift


def quiet_trainer(tmp_path, callbacks, max_epochs=1, **kwargs):
    """A Trainer without logger, checkpoints, progress bar or model summary, writing under ``tmp_path``."""
    options = dict(
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=callbacks,
    )
    return pl.Trainer(**{**options, **kwargs})
