"""Logger adapters: how each Lightning logger shows the callback's scalars, curves and figures.

``adapter_for(logger, prefix)`` picks one by the logger's type:

=====================  ==============================================================
``TensorBoardLogger``  :class:`TensorBoardAdapter`: scalars at Lightning's step, PR-curve
                       dashboard, figures, a Custom Scalars layout, the HParams session
``WandbLogger``        :class:`WandbAdapter`: scalars by epoch with best-value summaries,
                       one accumulated curve table, figures as images
``CSVLogger``          :class:`CSVAdapter`: scalar rows, curve points as CSV files
other, with log_dir    :class:`CSVAdapter`
other                  :class:`LoggerAdapter`: scalars only
=====================  ==============================================================

The base (:mod:`~lightning_prd.loggers.base`) knows no adapter; the factory
(:mod:`~lightning_prd.loggers.factory`) picks one. Imports: ``runs`` only (the figures); ``wandb`` when
an adapter needs it.
"""

from lightning_prd.loggers.base import LoggerAdapter
from lightning_prd.loggers.csv import CSVAdapter
from lightning_prd.loggers.factory import adapter_for
from lightning_prd.loggers.tensorboard import TensorBoardAdapter
from lightning_prd.loggers.wandb import WandbAdapter

__all__ = ["CSVAdapter", "LoggerAdapter", "TensorBoardAdapter", "WandbAdapter", "adapter_for"]
