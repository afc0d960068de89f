"""When :class:`~lightning_prd.PRDCallback` scores the model: the rule and what it reads from the trainer.

**Rule.** An epoch ``e`` is *due* when ``(e + 1) % every_n_epochs == 0``. A due epoch is scored at
the end of its last validation run if it validates at its end (so ``ModelCheckpoint`` and
``EarlyStopping``, which act after validation, read fresh values), otherwise at the end of its
training epoch; never twice, never during the sanity check. When the fit ends and the current
weights were not scored, they are scored once more (``evaluate_on_train_end``).

**How Lightning orders things** (``pytorch_lightning`` / ``lightning.pytorch`` 2.x, the fit loop):
validation runs inside the training epoch loop, after a training batch (``on_advance_end`` of the
epoch loop: every ``val_check_interval`` batches, or after the last batch, on epochs allowed by
``check_val_every_n_epoch``; also right after ``trainer.should_stop`` is set). Only after the
epoch loop is done does the fit loop call ``on_train_epoch_end``. So the validation that follows
the epoch's last batch comes *before* ``on_train_epoch_end`` of the same epoch, and
``on_train_epoch_end`` is the place to catch every due epoch that had no such validation.

A validation run ends its epoch when the batch it follows is the epoch's last one
(``batch_progress.is_last_batch``, or ``num_training_batches`` batches done), when ``max_steps``
is reached, or when ``trainer.should_stop`` will end the fit (``min_epochs``/``min_steps`` met).

Example:
    >>> is_due(1, 2), is_due(2, 2), is_due(0, 1)
    (True, False, True)
"""

from __future__ import annotations

import warnings
from typing import Any

from lightning_prd.runs.scores import DIRECTIONS


def is_due(epoch: int, every_n_epochs: int) -> bool:
    """Whether epoch ``epoch`` (0-based) is on the ``every_n_epochs`` schedule."""
    return (int(epoch) + 1) % int(every_n_epochs) == 0


def fitting(trainer: Any) -> bool:
    """Inside ``trainer.fit`` and not in the sanity check."""
    return not trainer.sanity_checking and trainer.state.fn == "fit"


def _limit_reached(value: int, limit: Any) -> bool:
    return limit is not None and limit != -1 and value >= limit


def _stops_early(trainer: Any) -> bool:
    """``trainer.should_stop`` is set and the fit may stop (``min_epochs``/``min_steps`` met)."""
    return bool(trainer.should_stop) and bool(getattr(trainer.fit_loop, "_can_stop_early", True))


def validation_ends_epoch(trainer: Any) -> bool:
    """In ``on_validation_epoch_end`` during fit: no training batch of this epoch follows this validation."""
    loop = trainer.fit_loop.epoch_loop
    progress = loop.batch_progress
    batches = trainer.num_training_batches
    last = bool(progress.is_last_batch) or (batches != float("inf") and progress.current.ready >= batches)
    return last or _limit_reached(trainer.global_step, trainer.max_steps) or _stops_early(trainer)


def fit_ends_after_epoch(trainer: Any) -> bool:
    """In ``on_train_epoch_end``: the fit stops after this epoch (``max_epochs``, ``max_steps`` or a stop
    request already set). Mirrors ``FitLoop.done`` without calling it (it moves ``current_epoch``)."""
    return (
        _limit_reached(trainer.current_epoch + 1, trainer.max_epochs)
        or _limit_reached(trainer.global_step, trainer.max_steps)
        or _stops_early(trainer)
    )


def warn_plain_early_stopping(trainer: Any, prefix: str, every_n_epochs: int) -> None:
    """Warn about each ``EarlyStopping`` (not a PRDEarlyStopping) that monitors a key of ``prefix`` while
    some of its checks find no fresh score: ``every_n_epochs > 1`` or validation within the epoch."""
    if every_n_epochs == 1 and getattr(trainer, "val_check_interval", 1.0) == 1.0:
        return
    for cb in getattr(trainer, "callbacks", []):
        names = [cls.__name__ for cls in type(cb).__mro__]
        monitor = getattr(cb, "monitor", None)
        if "EarlyStopping" not in names or getattr(cb, "follows_prd_evaluations", False):
            continue
        if isinstance(monitor, str) and monitor.startswith(prefix) and (prefix or monitor in DIRECTIONS):
            warnings.warn(
                f"EarlyStopping(monitor={monitor!r}) checks epochs that PRDCallback(prefix={prefix!r}, "
                f"every_n_epochs={every_n_epochs}) does not score: it raises on them (strict=True) or counts "
                f"them against its patience. Use lightning_prd.callback.PRDEarlyStopping(monitor={monitor!r}, ...), "
                f"whose patience counts evaluations",
                UserWarning,
                stacklevel=3,
            )
