"""CSV adapter: scalars through ``log_metrics``, curve points as CSV files in the logger's directory.

Also used for any logger with a string ``log_dir``. Files (one per evaluated epoch), for the
default prefix ``prd/``::

    <log_dir>/prd_curves/epoch_0003.csv         recall,precision      (PRD curve, 1001 points)
    <log_dir>/alpha_beta_curves/epoch_0003.csv  alpha,alpha_precision,beta_recall
    <log_dir>/samples/<grid>/epoch_0003.png     image grids (``log_images``, ``log_closest_pairs``), 8-bit RGB
    <log_dir>/samples/<values>/epoch_0003.csv   value                 (per-sample values, e.g. realism)

Once per fit, the fingerprint (a flat JSON object) goes to ``<log_dir>/fingerprint.json`` (which
``lightning-prd runs`` reads) and, through ``log_hyperparams``, to the logger's ``hparams.yaml``
under ``Pfingerprint``.

Any other prefix ``P`` is put in front of the folder names, as it is in front of the keys:
``<log_dir>/Pprd_curves/...`` (``gen/`` gives ``<log_dir>/gen/prd_curves/``, ``ema_`` gives
``<log_dir>/ema_prd_curves/``), each path part kept to letters, digits, ``_``, ``-`` and ``.`` and
never ``..``, so the files stay inside ``log_dir``. Several callbacks on one logger therefore keep
their files apart; two prefixes that would share a folder (``""`` and ``"prd/"``, or ones that differ
only in replaced characters) raise ``ValueError`` at their first curves.
"""

from __future__ import annotations

import csv
import json
import os
import weakref
from typing import Any, Dict, List, Mapping, MutableMapping, Sequence

import numpy as np

from lightning_prd.loggers.base import LoggerAdapter, has_alpha_beta, has_prd
from lightning_prd.runs.reader import FINGERPRINT, prefixed_path

#: which prefix writes each curve folder, per logger
_FOLDERS: MutableMapping[Any, Dict[str, str]] = weakref.WeakKeyDictionary()


def curve_folder(log_dir: str, prefix: str, kind: str) -> str:
    """The folder of ``kind`` (``prd_curves``, ``alpha_beta_curves``) for ``prefix`` under ``log_dir``.

    Example:
        >>> curve_folder("logs", "prd/", "prd_curves"), curve_folder("logs", "gen/", "prd_curves")
        ('logs/prd_curves', 'logs/gen/prd_curves')
        >>> curve_folder("logs", "../x y/", "prd_curves")
        'logs/_/x_y/prd_curves'
    """
    return prefixed_path(log_dir, prefix, kind)


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

    def _folder(self, kind: str) -> str:
        folder = curve_folder(self.logger.log_dir, self.prefix, kind)
        try:
            owners = _FOLDERS.setdefault(self.logger, {})
        except TypeError:  # a logger that cannot be weakly referenced: nothing to compare with
            return folder
        owner = owners.setdefault(os.path.normpath(folder), self.prefix)
        if owner != self.prefix:
            raise ValueError(
                f"Expected PRDCallbacks on one logger to have a `prefix` each that keeps their curve files apart, "
                f"but {owner!r} and {self.prefix!r} both write to {folder}: give one of them another prefix"
            )
        return folder

    def log_curves(
        self, curves: Mapping[str, np.ndarray], history: Sequence[Mapping[str, Any]], epoch: int, step: int
    ) -> None:
        name = f"epoch_{epoch:04d}.csv"
        if has_prd(curves):
            write_curve_csv(
                os.path.join(self._folder("prd_curves"), name),
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
            write_curve_csv(os.path.join(self._folder("alpha_beta_curves"), name), cols, arrays)

    def log_samples(
        self, grids: Mapping[str, np.ndarray], histograms: Mapping[str, np.ndarray], epoch: int, step: int
    ) -> None:
        """Each grid as an 8-bit RGB PNG, each histogram's values as a one-column CSV, under ``samples/``."""
        from matplotlib.image import imsave

        folder, name = self._folder("samples"), f"epoch_{epoch:04d}"
        for key, grid in grids.items():
            path = os.path.join(folder, key, name + ".png")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            pixels = np.clip(np.rint(np.asarray(grid, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
            imsave(path, pixels)
        for key, values in histograms.items():
            write_curve_csv(os.path.join(folder, key, name + ".csv"), ["value"], [np.asarray(values).reshape(-1)])

    def log_fingerprint(self, fingerprint: Mapping[str, Any], epoch: int, step: int) -> None:
        """To ``fingerprint.json`` in the prefix's folder and as hyperparameters (``hparams.yaml``)."""
        super().log_fingerprint(fingerprint, epoch, step)
        path = self._folder(FINGERPRINT + ".json")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(dict(fingerprint), indent=2, sort_keys=True, allow_nan=False) + "\n")

    def flush(self) -> None:
        save = getattr(self.logger, "save", None)
        if callable(save):
            save()
