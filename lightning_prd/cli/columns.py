"""The columns of ``evaluate`` and ``compare``: which scores they show, in which order, which way each is
better, how a value prints, and the per-class table of ``evaluate --real-labels/--fake-labels``.

The columns are the scores of :data:`lightning_prd.runs.scores.DIRECTIONS`, in its order and with its
directions; among the held-out and memorization scores at its end, two are best at 0 (``ct``,
``fld_gap``: negative means copying) and four are diagnostics that rank nothing (``ct_cells``,
``fld_train``, ``fld_nll_train``, ``fld_nll_baseline``).

Example:
    >>> from lightning_prd.cli.columns import better, best, cell
    >>> better("ct"), better("ct_cells"), better("fld"), better("density")
    ('0 is ideal', '-', 'lower', '1 is ideal')
    >>> best("ct", [-4.2, 0.3, 1.1]), best("ct_cells", [3, 2]), best("frechet_distance_infinity", [2.0, 1.5])
    (1, None, 1)
    >>> cell(3), cell(0.123456), cell(float("nan"))
    ('3', '0.1235', 'nan')
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from torch import Tensor

from lightning_prd.runs.scores import DIRECTION_LABELS, DIRECTIONS, best_index, format_score, label

#: every scalar column, in table order, with its direction (the registry's families, user ones included)
COLUMNS = DIRECTIONS

Value = Union[int, float]


def better(name: str) -> str:
    """The ``better`` cell of score ``name``: ``higher``, ``lower``, ``1 is ideal``, ``0 is ideal`` or ``-`` (a
    diagnostic, and a spread such as ``inception_score_std``)."""
    if name.endswith("_std") and name not in COLUMNS:
        return DIRECTION_LABELS["none"]
    return label(COLUMNS.get(name, "higher"))


def best(name: str, values: Sequence[float]) -> Optional[int]:
    """Index of the best finite value of ``name`` (the first on ties), None when none is finite or it ranks nothing."""
    return best_index(name, values)


def cell(value: Value) -> str:
    """A value as the tables print it: integers (counts, class labels) whole, scores with 4 decimals."""
    return str(value) if isinstance(value, int) else format_score(value)


def scalar(value: Tensor) -> Value:
    """A 0-dim result as a JSON-ready number: ``int`` for integer tensors (counts), else ``float``."""
    return int(value) if not value.is_floating_point() else float(value)


# ---------------------------------------------------------------------------- per-class scores
def per_class_columns(result: Mapping[str, Tensor]) -> List[str]:
    """The per-class scores in ``result`` (the output of ``per_class_metrics``), in table order."""
    names = [key[: -len("_per_class")] for key in result if key.endswith("_per_class")]
    return [name for name in names if f"{name}_mean" in result]  # scores (with a mean), not the class sizes


def per_class_payload(result: Mapping[str, Tensor]) -> Dict[str, Any]:
    """The per-class part of ``--json``: one list per score, in the order of ``classes``, their means and the
    lowest coverage with its class (None when no class has a coverage)."""
    names = per_class_columns(result)
    lowest = result.get("lowest_coverage_class")
    return {
        "classes": [int(c) for c in result["classes"].tolist()],
        "num_real": [int(n) for n in result["num_real_per_class"].tolist()],
        "num_fake": [int(n) for n in result["num_fake_per_class"].tolist()],
        "scores": {s: [float(v) for v in result[f"{s}_per_class"].tolist()] for s in names},
        "mean": {s: float(result[f"{s}_mean"]) for s in names},
        "coverage_min": float(result["coverage_min"]) if "coverage_min" in result else None,
        "lowest_coverage_class": int(lowest) if lowest is not None else None,
    }


def per_class_rows(payload: Mapping[str, Any]) -> List[List[str]]:
    """The rows of the per-class table (header first): one per class, then the means and the directions."""
    names = list(payload["scores"])
    rows = [["class", "N", "M", *names]]
    for i, c in enumerate(payload["classes"]):
        values = [cell(payload["scores"][s][i]) for s in names]
        rows.append([str(c), str(payload["num_real"][i]), str(payload["num_fake"][i]), *values])
    rows.append(["(mean)", "", "", *[cell(payload["mean"][s]) for s in names]])
    rows.append(["(better)", "", "", *[better(s) for s in names]])
    return rows


def lowest_coverage_line(payload: Mapping[str, Any]) -> str:
    """The line under the per-class table that names the class covered worst."""
    lowest = payload["lowest_coverage_class"]
    if lowest is None:
        return "lowest coverage: none (no class has enough samples for a coverage)"
    i = payload["classes"].index(lowest)
    held = f"N = {payload['num_real'][i]}, M = {payload['num_fake'][i]}"
    return f"lowest coverage: class {lowest}, coverage {cell(payload['coverage_min'])} ({held})"
