"""``adapter_for``: the adapter of one Lightning logger, chosen by the logger's class. It lives beside
the adapters, not in their base, so the base never imports an adapter."""

from __future__ import annotations

from typing import Any, Iterable, List

from lightning_prd.loggers.base import LoggerAdapter
from lightning_prd.loggers.csv import CSVAdapter
from lightning_prd.loggers.tensorboard import TensorBoardAdapter
from lightning_prd.loggers.tensorboard_hparams import hold_session, release_session
from lightning_prd.loggers.wandb import WandbAdapter


def _type_names(obj: Any) -> List[str]:
    return [cls.__name__ for cls in type(obj).__mro__]


def adapter_for(logger: Any, prefix: str) -> LoggerAdapter:
    """The adapter for one logger, chosen by its class (or a parent class) name.

    ``TensorBoardLogger``, ``WandbLogger`` and ``CSVLogger`` get their own adapter, from
    ``pytorch_lightning`` and ``lightning.pytorch`` alike; any other logger with a string
    ``log_dir`` gets CSV curve files there; the rest get scalars only.
    """
    names = _type_names(logger)
    for name, cls in (
        ("TensorBoardLogger", TensorBoardAdapter),
        ("WandbLogger", WandbAdapter),
        ("CSVLogger", CSVAdapter),
    ):
        if name in names:
            return cls(logger, prefix)
    try:
        log_dir = getattr(logger, "log_dir", None)
    except Exception:  # noqa: BLE001 - some loggers compute log_dir lazily and may fail
        log_dir = None
    if isinstance(log_dir, str):
        return CSVAdapter(logger, prefix)
    return LoggerAdapter(logger, prefix)


def hold_sessions(loggers: Iterable[Any]) -> None:
    """At the start of a fit: each ``TensorBoardLogger`` keeps its *HParams* session for the fingerprint
    (:func:`~lightning_prd.loggers.tensorboard_hparams.hold_session`)."""
    for logger in loggers:
        if "TensorBoardLogger" in _type_names(logger):
            hold_session(logger)


def release_sessions(loggers: Iterable[Any]) -> None:
    """At the end of a fit: what :func:`hold_sessions` changed, back
    (:func:`~lightning_prd.loggers.tensorboard_hparams.release_session`)."""
    for logger in loggers:
        release_session(logger)
