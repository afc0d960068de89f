"""``PRDEarlyStopping``: Lightning's ``EarlyStopping`` that checks a PRDCallback's score right after each
evaluation of that callback, and only then.

**Rule.** Patience counts evaluations, not epochs: an epoch the PRDCallback does not score (its
``every_n_epochs``, a validation run that is not the epoch's last) is neither a check nor an error,
and each evaluation is checked once, in the first of ``on_validation_end`` / ``on_train_epoch_end``
that follows it (Lightning runs early stopping after the other callbacks' ``on_train_epoch_end``).
The PRDCallback whose ``prefix`` starts ``monitor`` (the longest, when several do) is the one
followed; ``setup`` raises when there is none. Everything else is ``EarlyStopping``'s: ``patience``,
``min_delta``, ``strict`` (a fresh evaluation without the ``monitor`` key raises),
``stopping_threshold``, ``divergence_threshold``, ``check_finite``; ``mode`` defaults to the
score's direction (``"max"`` for coverage, ``"min"`` for the Fréchet distance) and must be given
for density (1 is ideal) and scores the package does not know. How many evaluations were checked is
saved in checkpoints, so a resumed fit goes on counting.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import pytorch_lightning as pl

from lightning_prd.callback.core import PRDCallbackCore
from lightning_prd.callback.schedule import fitting
from lightning_prd.runs.scores import DIRECTIONS, target


def mode_for(monitor: str) -> str:
    """``"max"`` or ``"min"`` for a prefixed score name, from :data:`~lightning_prd.runs.scores.DIRECTIONS`."""
    name = monitor.rsplit("/", 1)[-1]
    way = DIRECTIONS.get(name)
    if way in ("higher", "lower"):
        return "max" if way == "higher" else "min"
    ideal = target(way) if way is not None else None
    if way is None:
        why = "has no known direction"
    elif ideal is not None:
        why = f"is best at {ideal:g}, so neither larger nor smaller is better"
    else:
        why = "is a diagnostic that ranks nothing"
    raise ValueError(
        f"Expected argument `mode` ('max' or 'min') for monitor {monitor!r}: the score {why}; "
        f"pass `mode=` or monitor another score"
    )


def followed_callback(monitor: str, callbacks: Sequence[Any]) -> PRDCallbackCore:
    """The PRDCallback among ``callbacks`` that logs ``monitor``: the longest prefix that starts it."""
    scorers = [cb for cb in callbacks if isinstance(cb, PRDCallbackCore)]
    matching = [cb for cb in scorers if monitor.startswith(cb.prefix) and len(monitor) > len(cb.prefix)]
    if not matching:
        prefixes = [cb.prefix for cb in scorers]
        raise ValueError(
            f"Expected argument `monitor` of PRDEarlyStopping to be a key logged by a PRDCallback of the trainer, "
            f"but {monitor!r} starts with none of their prefixes {prefixes}"
        )
    return max(matching, key=lambda cb: len(cb.prefix))


class PRDEarlyStoppingCore:
    """Everything of :class:`PRDEarlyStopping` except its ``EarlyStopping`` base class (see that class)."""

    #: read by PRDCallback, which warns about a plain ``EarlyStopping`` on its keys
    follows_prd_evaluations = True
    monitor: str

    def __init__(self, monitor: str, **kwargs: Any) -> None:
        if not isinstance(monitor, str):
            raise TypeError(f"Expected argument `monitor` to be a logged key like 'prd/coverage', but got {monitor!r}")
        kwargs.pop("check_on_train_epoch_end", None)  # the check follows each evaluation, wherever it happens
        if kwargs.get("mode") is None:
            kwargs["mode"] = mode_for(monitor)
        super().__init__(monitor, **kwargs)  # type: ignore[call-arg]
        self._followed: Optional[PRDCallbackCore] = None
        self._checked: Optional[int] = None  # evaluations of the followed callback checked so far

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        super().setup(trainer, pl_module, stage)  # type: ignore[misc]
        if stage == "fit":
            self._followed = followed_callback(self.monitor, trainer.callbacks)
            self._checked = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:  # after any checkpoint was restored
        if self._checked is None and self._followed is not None:
            self._checked = len(self._followed.history)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._check_new_evaluation(trainer)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._check_new_evaluation(trainer)

    def _check_new_evaluation(self, trainer: Any) -> None:
        if self._followed is None or not fitting(trainer):
            return
        count = len(self._followed.history)
        if count != self._checked:
            self._checked = count
            self._run_early_stopping_check(trainer)  # type: ignore[attr-defined]

    def state_dict(self) -> Dict[str, Any]:
        return {**super().state_dict(), "prd_evaluations_checked": self._checked}  # type: ignore[misc]

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        super().load_state_dict(state_dict)  # type: ignore[misc]
        self._checked = state_dict.get("prd_evaluations_checked")


class PRDEarlyStopping(PRDEarlyStoppingCore, pl.callbacks.EarlyStopping):
    """``EarlyStopping`` on a :class:`~lightning_prd.callback.PRDCallback` score, whose patience counts evaluations.

    A plain ``EarlyStopping`` reads ``trainer.callback_metrics`` at every epoch (or validation): with
    ``every_n_epochs > 1`` it raises at the first epoch that is not scored (``strict=True``) or counts
    the unscored epochs against ``patience`` (``strict=False``). This one checks the monitored score
    once per evaluation of the PRDCallback whose prefix starts ``monitor``, right after it, whatever
    the validation schedule (see :mod:`lightning_prd.callback.early_stopping` for the rule).

    Args:
        monitor: the logged key, e.g. ``"prd/coverage"``.
        **kwargs: ``EarlyStopping``'s other arguments (``patience``, ``min_delta``, ``mode``, ``strict``,
            ``verbose``, ``check_finite``, ``stopping_threshold``, ``divergence_threshold``,
            ``log_rank_zero_only``); ``mode`` defaults to the score's direction. A
            ``check_on_train_epoch_end`` is accepted and has no effect: the check follows each
            evaluation, in whichever hook comes first after it. With ``lightning.pytorch`` use
            ``lightning_prd.lightning.PRDEarlyStopping``.

    Example:
        >>> import torch
        >>> from lightning_prd.callback import PRDCallback, PRDEarlyStopping
        >>> prd = PRDCallback(torch.randn(512, 2), every_n_epochs=2)
        >>> stop = PRDEarlyStopping(monitor="prd/coverage", patience=3)  # three evaluations: six epochs
        >>> stop.mode
        'max'

        Then ``pl.Trainer(callbacks=[prd, stop]).fit(model)``.
    """
