"""The ring GAN of ``gan_ring.py`` trained with LightningCLI, ``PRDCallback`` configured in ``config.yaml``.

Every argument of the callback is a plain YAML value there: ``real: datamodule:train`` (the
datamodule's training points, read in index order), ``metric`` a mapping of ``GenerativeMetrics``
options, ``feature_extractor`` a registered name. LightningCLI needs jsonargparse
(``pip install "jsonargparse[signatures]"``; the ``test`` extra has it). Run::

    python examples/gan_ring_cli.py fit --config examples/config.yaml
    python examples/gan_ring_cli.py fit --config examples/config.yaml --trainer.max_epochs 2   # a quick look
    python examples/gan_ring_cli.py fit --help                       # every option, the callback's included
    tensorboard --logdir runs                                        # then open http://localhost:6006
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import pytorch_lightning as pl
import torch
from pytorch_lightning.cli import LightningCLI
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gan_ring.py lies beside this script
from gan_ring import RingGAN, ring  # noqa: E402


class RingData(pl.LightningDataModule):
    """``num_train`` points of the ring of 8 Gaussians (seeded), in shuffled batches of ``batch_size``."""

    def __init__(self, num_train: int = 25_600, batch_size: int = 256, seed: int = 1) -> None:
        super().__init__()
        self.num_train, self.batch_size, self.seed = num_train, batch_size, seed

    def setup(self, stage: str) -> None:
        self.points = ring(self.num_train, seed=self.seed)

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(TensorDataset(self.points), batch_size=self.batch_size, shuffle=True, generator=generator)


def main(args: Optional[List[str]] = None) -> LightningCLI:
    torch.set_num_threads(1)  # tiny MLPs: one thread is fastest
    return LightningCLI(RingGAN, RingData, args=args, save_config_kwargs={"overwrite": True})


if __name__ == "__main__":
    main()
