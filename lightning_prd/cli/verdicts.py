"""The verdict lines of ``lightning-prd runs``: per score, the runs ranked by their last evaluation
(:mod:`lightning_prd.runs.ranking`), one line each, under the table."""

from __future__ import annotations

import textwrap
from typing import List, Mapping, Sequence

from lightning_prd.runs.ranking import identical_curves, ranked, runs_direction
from lightning_prd.runs.reader import Run
from lightning_prd.runs.scores import format_score, label, tied


def verdict_lines(runs: Sequence[Run], names: Sequence[str], labels: Mapping[str, str]) -> List[str]:
    """One line per score of ``names`` (diagnostics aside): the runs ranked by their last evaluation, best first
    (:mod:`lightning_prd.runs.ranking`), ``>`` between a run and the next worse one, ``=`` between values equally
    good (:func:`~lightning_prd.runs.scores.tied`: equal to float32 precision, or as far from a target); then the
    runs without a finite last value and the runs whose curves of the score are identical. A score whose direction
    is unknown (neither recorded with the runs nor registered) reads ``not ranked``. The epoch of each value is
    shown when the runs' last evaluations lie at different epochs. ``labels`` maps a run's label to the one shown.
    Lines are wrapped at 100 columns.

    Example:
        >>> from lightning_prd.runs.reader import Run
        >>> a = Run("a", "a", "csv", [], scores={"recall": [(0, 0.5), (1, 0.8)], "density": [(0, 1.2), (1, 1.4)]})
        >>> b = Run("b", "b", "csv", [], scores={"recall": [(0, 0.6), (1, 0.7)], "density": [(0, 0.9), (1, 0.9)]})
        >>> print("\\n".join(verdict_lines([a, b], ["recall", "density"], {"a": "a", "b": "b"})))
          recall (higher)       a 0.8000 > b 0.7000
          density (1 is ideal)  b 0.9000 > a 1.4000
        >>> c = Run("c", "c", "csv", [], scores={"recall": [(0, 0.6), (1, 0.8)], "density": [(0, 0.9), (1, 0.6)]})
        >>> print("\\n".join(verdict_lines([a, c], ["recall", "density"], {"a": "a", "c": "c"})))
          recall (higher)       a 0.8000 = c 0.8000
          density (1 is ideal)  a 1.4000 = c 0.6000
    """
    ways = {n: runs_direction(runs, n) for n in names}
    heads = {n: f"{n} ({label(way)})" for n, way in ways.items() if way != "none"}
    width = max((len(h) for h in heads.values()), default=0)
    out = []
    for name, head in heads.items():
        if ways[name] == "unknown":
            out.append(f"  {head.ljust(width)}  not ranked: no direction recorded with the runs or registered")
            continue
        order = ranked(runs, name)
        at_epochs = len({epoch for _, epoch, _ in order}) > 1
        text = ""
        for i, (run, epoch, value) in enumerate(order):
            if i:
                text += " = " if tied(ways[name], value, order[i - 1][2]) else " > "
            text += f"{labels.get(run, run)} {format_score(value)}" + (f" (epoch {epoch})" if at_epochs else "")
        shown = {run for run, _, _ in order}
        missing = [labels.get(r.label, r.label) for r in runs if r.label not in shown]
        if missing:
            text += f"; no value: {', '.join(missing)}"
        for group in identical_curves(runs, name):
            text += f"; identical curves: {', '.join(labels.get(x, x) for x in group)}"
        out.append(
            textwrap.fill(
                f"{head.ljust(width)}  {text}",
                width=100,
                initial_indent="  ",
                subsequent_indent=" " * (width + 4),
                break_on_hyphens=False,
                break_long_words=False,
            )
        )
    return out
