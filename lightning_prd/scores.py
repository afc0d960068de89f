"""Which way is better for each score; the table lives in :mod:`lightning_prd.runs.scores`, re-exported here."""

from lightning_prd.runs.scores import (
    DIRECTION_LABELS,
    DIRECTIONS,
    best_index,
    direction,
    direction_label,
    format_score,
)

__all__ = ["DIRECTIONS", "DIRECTION_LABELS", "best_index", "direction", "direction_label", "format_score"]
