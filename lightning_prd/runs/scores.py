"""Which way is better for each scalar score: one table shared by the CLI, the callback and ``runs``.

Three directions:

- ``"higher"``: larger is better (precision, recall, coverage, F-scores, α/β, authenticity);
- ``"lower"``: smaller is better (the Fréchet distance, KID);
- ``"one"``: 1 is ideal (density: below 1 means samples in empty regions, above 1 means samples
  piled in dense regions), so the best value is the one closest to 1.

Example:
    >>> from lightning_prd.runs.scores import best_index, direction
    >>> direction("density"), direction("frechet_distance"), direction("precision")
    ('one', 'lower', 'higher')
    >>> best_index("density", [0.7, 1.2, 0.95])
    2
    >>> best_index("frechet_distance", [3.0, 1.5, 2.0])
    1
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence

#: score name -> direction; the order is the order of printed tables
DIRECTIONS: Dict[str, str] = {
    "precision": "higher",
    "recall": "higher",
    "density": "one",
    "coverage": "higher",
    "p_precision": "higher",
    "p_recall": "higher",
    "precision_cover": "higher",
    "recall_cover": "higher",
    "clipped_density": "higher",
    "clipped_coverage": "higher",
    "sym_precision": "higher",
    "sym_recall": "higher",
    "f_beta": "higher",
    "f_inv_beta": "higher",
    "alpha_precision": "higher",
    "beta_recall": "higher",
    "authenticity": "higher",
    "frechet_distance": "lower",
    "sfid": "lower",
    "inception_score": "higher",
    "kid": "lower",
    "vendi": "higher",
    "vendi_real": "higher",
    "top_precision": "higher",
    "top_recall": "higher",
    "top_f1": "higher",
    "cmmd": "lower",
    # with a held-out real set: 0 is ideal for ct and fld_gap (negative: copying); "none" marks
    # diagnostics that rank nothing
    "frechet_distance_infinity": "lower",
    "ct": "zero",
    "ct_cells": "none",
    "authenticity_percentage": "higher",
    "fld": "lower",
    "fld_gap": "zero",
    "fld_nll_test": "lower",
    "fld_train": "none",
    "fld_nll_train": "none",
    "fld_nll_baseline": "none",
}

#: how each direction reads in a table
DIRECTION_LABELS: Dict[str, str] = {
    "higher": "higher",
    "lower": "lower",
    "one": "1 is ideal",
    "zero": "0 is ideal",
    "none": "-",
}


def direction(name: str) -> str:
    """The direction of score ``name`` (``"higher"`` for scores not in :data:`DIRECTIONS`).

    Names may carry a prefix (``"prd/coverage"``) or an error-bar suffix (``"precision_std"``
    has no direction: a spread is neither better nor worse, it returns ``"higher"`` like any
    unknown score, so callers that rank should skip ``*_std`` keys).
    """
    base = name.rsplit("/", 1)[-1]
    return DIRECTIONS.get(base, "higher")


def direction_label(name: str) -> str:
    """How the direction of ``name`` reads in a table: ``higher``, ``lower``, ``1 is ideal``, ``0 is ideal``
    or ``-`` (a diagnostic)."""
    return DIRECTION_LABELS[direction(name)]


def format_score(value: float) -> str:
    """A score as the command line prints it: 4 decimals (never ``-0.0000``), 4 significant digits from 1e5.

    Example:
        >>> format_score(0.123456), format_score(-1e-7), format_score(123456.0)
        ('0.1235', '0.0000', '1.235e+05')
    """
    return f"{round(value, 4) + 0.0:.4f}" if abs(value) < 1e5 else f"{value:.4g}"


def best_index(name: str, values: Sequence[float]) -> Optional[int]:
    """Index of the best finite value of score ``name`` (first one on ties), ``None`` if none is finite.

    Best is the maximum for ``"higher"``, the minimum for ``"lower"``, the value closest to 1
    for ``"one"`` (density) and closest to 0 for ``"zero"`` (``ct``, ``fld_gap``); a ``"none"``
    score (a diagnostic) has no best.
    """
    way = direction(name)
    if way == "none":
        return None
    best: Optional[int] = None
    best_key = math.inf
    for i, value in enumerate(values):
        v = float(value)
        if not math.isfinite(v):
            continue
        key = -v if way == "higher" else v if way == "lower" else abs(v) if way == "zero" else abs(v - 1.0)
        if key < best_key:
            best, best_key = i, key
    return best
