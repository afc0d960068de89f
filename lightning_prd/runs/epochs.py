"""The epoch of each score in a TensorBoard run that :class:`~lightning_prd.PRDCallback` logged.

The callback logs an evaluation at Lightning's step (several epochs' steps differ with the batches per
epoch), writing the scalar ``<prefix>epoch`` first at that step and the scores after it. A score's
epoch is the last ``<prefix>epoch`` written at its step before it (by wall time), so an epoch logged
again after a resume, or two evaluations at one step (a fit whose optimizer never steps), each keep
their epoch. A run without ``<prefix>epoch`` scalars has the epoch as step.

Example:
    >>> import os, tempfile
    >>> from torch.utils.tensorboard import SummaryWriter
    >>> from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    >>> run = tempfile.mkdtemp()
    >>> with SummaryWriter(run) as writer:
    ...     for epoch, step in enumerate((49, 99)):
    ...         writer.add_scalar("prd/epoch", epoch, global_step=step)
    ...         writer.add_scalar("prd/coverage", 0.5 + epoch / 4, global_step=step)
    >>> acc = EventAccumulator(run)
    >>> _ = acc.Reload()
    >>> scores_per_epoch(acc, acc.Tags()["scalars"], "prd/")
    {'coverage': {0: 0.5, 1: 0.75}}
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

#: the name (after the prefix) of the TensorBoard scalar of the epoch evaluated at a step
EPOCH = "epoch"

Marks = Dict[int, List[Tuple[float, int]]]


def scores_per_epoch(acc: Any, tags: Sequence[str], prefix: str) -> Dict[str, Dict[int, float]]:
    """Score name (without ``prefix``) -> ``{epoch: value}`` of the scalar ``tags`` of ``acc`` (a loaded
    ``EventAccumulator``) under ``prefix``; in file order, so an epoch logged twice keeps its last value."""
    epoch_tag = prefix + EPOCH
    marks = _epoch_marks(acc, epoch_tag) if epoch_tag in tags else None
    scores: Dict[str, Dict[int, float]] = {}
    for tag in tags:
        if tag.startswith(prefix) and tag != epoch_tag:
            per_epoch = scores.setdefault(tag[len(prefix) :], {})
            for event in acc.Scalars(tag):
                epoch = int(event.step) if marks is None else _epoch_at(marks, event)
                if epoch is not None:
                    per_epoch[epoch] = float(event.value)
    return scores


def _epoch_marks(acc: Any, tag: str) -> Marks:
    """Per step: the ``(wall time, epoch)`` of each ``<prefix>epoch`` scalar written at it, in file order."""
    marks: Marks = {}
    for event in acc.Scalars(tag):
        marks.setdefault(int(event.step), []).append((float(event.wall_time), int(round(event.value))))
    return marks


def _epoch_at(marks: Marks, event: Any) -> Optional[int]:
    """The epoch of a score ``event``: the last mark at its step written before it (the first mark if none
    was: a clock set back); None without a mark at its step (a scalar the callback did not log)."""
    at_step = marks.get(int(event.step))
    if not at_step:
        return None
    before = [epoch for wall_time, epoch in at_step if wall_time <= event.wall_time]
    return before[-1] if before else at_step[0][1]
