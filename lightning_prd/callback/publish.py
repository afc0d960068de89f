"""From one evaluation's scores to the loggers: scalars (with a per-class metric's scores per class,
:func:`per_class_scalars`) and curves to every adapter (rank 0 only), and the image grids of
``log_images`` (the least realistic generated samples, the real samples no generated sample covers, a
histogram of realism scores) and ``log_closest_pairs`` (:mod:`~lightning_prd.callback.closest_pairs`)."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd.callback.sharding import rank_shard
from lightning_prd.loggers.base import PER_CLASS, LoggerAdapter
from lightning_prd.runs import plotting


def log_scores(
    adapters: Sequence[LoggerAdapter],
    scalars: Mapping[str, float],
    curves: Mapping[str, np.ndarray],
    history: Sequence[Mapping[str, Any]],
    epoch: int,
    step: int,
    *,
    log_curves: bool,
    warned: bool,
) -> bool:
    """Hand the prefixed scalars (and, with ``log_curves``, the curves) to every adapter and flush it.
    Warns once (``warned`` says whether it did already; the new flag is returned) when a logger, or the
    lack of one, shows no curves."""
    for adapter in adapters:
        adapter.log_scalars(scalars, epoch, step)
        if log_curves:
            adapter.log_curves(curves, history, epoch, step)
        adapter.flush()
    blind = [type(a.logger).__name__ for a in adapters if not a.supports_curves]
    if log_curves and not warned and (blind or not adapters):
        if blind:
            what = f"the loggers {blind} get the scores only: curves and figures are skipped for them"
        else:
            what = "the trainer has no logger: the scores are in `trainer.callback_metrics`, curves are skipped"
        warnings.warn(
            f"PRDCallback: {what}. TensorBoardLogger, WandbLogger and CSVLogger (or any logger with a "
            f"`log_dir`) show curves; pass `log_curves=False` to silence this.",
            UserWarning,
            stacklevel=3,
        )
        return True
    return warned


def log_samples(
    adapters: Sequence[LoggerAdapter],
    grids: Mapping[str, np.ndarray],
    histograms: Mapping[str, np.ndarray],
    epoch: int,
    step: int,
) -> None:
    """Hand the image grids (``log_images``' and ``log_closest_pairs``') and histograms of one evaluation to
    every adapter, in one call each, and flush it."""
    if not grids and not histograms:
        return
    for adapter in adapters:
        adapter.log_samples(grids, histograms, epoch, step)
        adapter.flush()


#: what the warnings say when a grid cannot be drawn
GRIDS_NEED = {
    "log_images": "sample images are logged only for image samples [n, 1 or 3, H, W] and a metric returning "
    "per-sample `realism` and `covered` (GenerativeMetrics(per_sample=True))",
    "log_closest_pairs": "the grid of closest pairs is logged only for image samples [n, 1 or 3, H, W], a real set "
    "of images (not a features file) and a metric returning `closest_fake_index` and `closest_real_index` "
    "(GenerativeMetrics(closest_pairs=n)); under DDP through torch.distributed",
}


def warn_no_grid(option: str, warned: bool) -> bool:
    """Warn once (``warned`` says whether it did already) that the grids of ``option`` cannot be drawn; True."""
    if not warned:
        warnings.warn(f"PRDCallback({option}=...): {GRIDS_NEED[option]}", UserWarning, stacklevel=4)
    return True


def per_class_scalars(result: Mapping[str, Any], names: Optional[Mapping[int, str]] = None) -> Dict[str, float]:
    """The per-class scores of a per-class metric's ``result`` as scalars ``per_class/<score>/<label>``: each
    float ``<score>_per_class`` ``[C]`` entry, labelled by ``result["classes"]`` (by ``names[label]`` where
    ``names`` has one); empty without ``classes``.

    Example:
        >>> res = {"classes": torch.tensor([0, 3]), "coverage_per_class": torch.tensor([0.5, 0.0])}
        >>> per_class_scalars(res)
        {'per_class/coverage/0': 0.5, 'per_class/coverage/3': 0.0}
        >>> per_class_scalars(res, {3: "truck"})
        {'per_class/coverage/0': 0.5, 'per_class/coverage/truck': 0.0}
    """
    classes = result.get("classes")
    if not isinstance(classes, Tensor) or classes.ndim != 1:
        return {}
    names = names or {}
    labels = [names.get(int(c), str(int(c))) for c in classes.tolist()]
    out: Dict[str, float] = {}
    for key, value in result.items():
        if not (key.endswith("_per_class") and isinstance(value, Tensor) and value.is_floating_point()):
            continue
        if value.ndim == 1 and value.shape[0] == len(labels):
            score = key[: -len("_per_class")]
            out.update({f"{PER_CLASS}{score}/{c}": float(v) for c, v in zip(labels, value.tolist())})
    return out


def sample_grids(
    fakes: Tensor,
    result: Mapping[str, Any],
    real_rows: Callable[[], Iterator[Tensor]],
    num_images: int,
    world: int,
) -> Optional[Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]]:
    """Rank 0's image grids and realism histogram, or ``None`` when the samples are not images
    ``[n, 1 or 3, H, W]`` or ``result`` has no per-sample ``realism`` and ``covered``.

    ``fakes`` are rank 0's generated samples (the first rows of the gathered order), ``real_rows()``
    yields rank 0's real rows in order."""
    realism, covered = result.get("realism"), result.get("covered")
    if fakes.ndim != 4 or fakes.shape[1] not in (1, 3) or realism is None or covered is None:
        return None
    mine = realism[: fakes.shape[0]]  # gathered order: rank 0's samples come first
    worst = torch.argsort(mine)[:num_images]
    grids = {"least_realistic": plotting.image_grid(fakes[worst])}
    n_real0 = len(rank_shard(covered.shape[0], 0, world))
    missed = (~covered[:n_real0]).nonzero().flatten()[:num_images].tolist()
    if missed:
        rows: List[Tensor] = []
        offset = 0
        for chunk in real_rows():
            rows += [chunk[i - offset] for i in missed if offset <= i < offset + chunk.shape[0]]
            offset += chunk.shape[0]
        if rows and rows[0].ndim == 3 and rows[0].shape[0] in (1, 3):
            grids["uncovered_real"] = plotting.image_grid(torch.stack(rows))
    finite = realism[torch.isfinite(realism)].double().numpy()
    return grids, ({"realism": finite} if finite.size else {})
