"""CSV adapter: scalars through ``log_metrics``, curve points as CSV files in the logger's directory.

Also used for any logger with a string ``log_dir``. Files (one per evaluated epoch)::

    <log_dir>/prd_curves/epoch_0003.csv         recall,precision      (PRD curve, 1001 points)
    <log_dir>/alpha_beta_curves/epoch_0003.csv  alpha,alpha_precision,beta_recall
"""

from __future__ import annotations

import csv
import os
from typing import Any, List, Mapping, Sequence

import numpy as np

from lightning_prd.loggers.base import LoggerAdapter, has_alpha_beta, has_prd


def write_curve_csv(path: str, columns: Sequence[str], arrays: Sequence[np.ndarray]) -> None:
    """Write equal-length 1-D arrays as the columns of a CSV file (directories created)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for row in zip(*arrays):
            writer.writerow([f"{float(v):.8g}" for v in row])


class CSVAdapter(LoggerAdapter):
    """Scalars as CSV rows (with an ``epoch`` column), curves as files under ``logger.log_dir``."""

    supports_curves = True

    def log_curves(self, curves: Mapping[str, np.ndarray], history: Sequence[Mapping[str, Any]], epoch: int) -> None:
        root = self.logger.log_dir
        name = f"epoch_{epoch:04d}.csv"
        if has_prd(curves):
            write_curve_csv(
                os.path.join(root, "prd_curves", name),
                ["recall", "precision"],
                [curves["prd_recall"], curves["prd_precision"]],
            )
        if has_alpha_beta(curves):
            cols: List[str] = ["alpha"]
            arrays: List[np.ndarray] = [curves["alphas"]]
            for key, col in (("alpha_precision_curve", "alpha_precision"), ("beta_recall_curve", "beta_recall")):
                if key in curves:
                    cols.append(col)
                    arrays.append(curves[key])
            write_curve_csv(os.path.join(root, "alpha_beta_curves", name), cols, arrays)

    def flush(self) -> None:
        save = getattr(self.logger, "save", None)
        if callable(save):
            save()
