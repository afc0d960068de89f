"""The entries of a reference file, read as values and checked, each error naming the argument and the file.

:func:`~lightning_prd.features.reference_files.read_reference` finds a file's layout; these read what its
entries hold: arrays (:func:`tensor_of`), ``[N, D]`` features (:func:`features_of`), float64 statistics whose
covariance is one up to rounding (:func:`moments_of`, :func:`check_covariance`), text and counts.

Example:
    >>> from pathlib import Path
    >>> import numpy as np
    >>> ctx = FileContext("real", Path("stats.npz"), "npz")
    >>> try:
    ...     moments_of(np.zeros(3), np.diag([1.0, 1.0, -3.0]), ctx, "the file")
    ... except ReferenceFileError as err:
    ...     print(err)  # doctest: +NORMALIZE_WHITESPACE
    Expected argument `real` to be a file of statistics with a covariance matrix, but stats.npz holds a
    covariance (`sigma` of the file) that has the eigenvalue -3, below -5e-06 (1e-06 of its trace, the
    rounding tolerance): no covariance
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import as_features, torch_compatible
from lightning_prd.functional.engine.stats import covariance_defect


class ReferenceFileError(ValueError):
    """A reference file that cannot serve: missing entries, a refused global, bad shapes or values, damage.

    Its message is one line naming the argument and the file.
    """


@dataclass
class FileContext:
    name: str
    path: Path
    container: str  # "npy", "npz", "torch" or "pickle"

    def fail(self, problem: str, expected: str = "a reference file in a known layout") -> ReferenceFileError:
        return ReferenceFileError(f"Expected argument `{self.name}` to be {expected}, but {self.path} {problem}")


def tensor_of(value: Any, ctx: FileContext, where: str) -> Tensor:
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise ctx.fail(f"holds Python objects (dtype object) in {where}", "a file of numeric arrays")
        try:
            return torch.from_numpy(torch_compatible(value))
        except TypeError:
            raise ctx.fail(f"holds {where} of dtype {value.dtype}", "a file of numeric arrays") from None
    if isinstance(value, Tensor):
        value = value.detach().cpu()
        return value.to_dense() if value.layout != torch.strided else value
    place = "" if where == "the array" else f" as {where}"
    raise ctx.fail(f"holds a {type(value).__name__}{place}, not an array", "a file of numeric arrays")


def features_of(value: Any, ctx: FileContext, where: str) -> Tensor:
    x = tensor_of(value, ctx, where)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ctx.fail(f"holds {where} of shape {list(x.shape)}", "a file of features of shape [N, D] with N >= 1")
    try:
        return as_features(x, ctx.name)
    except (TypeError, ValueError) as err:
        raise ReferenceFileError(f"{err} (in {where} of {ctx.path})") from None


def moments_of(mu: Any, sigma: Any, ctx: FileContext, where: str, raw: bool = False) -> Dict[str, Any]:
    """``mean`` and ``cov`` in float64, finite, ``cov`` a covariance up to rounding (``raw``: second moments,
    checked by the caller once the covariance is formed)."""
    mean = tensor_of(mu, ctx, f"`mu` of {where}")
    cov = tensor_of(sigma, ctx, f"`sigma` of {where}")
    ok = mean.ndim == 1 and mean.shape[0] >= 1 and tuple(cov.shape) == (mean.shape[0],) * 2
    if not ok or not (mean.is_floating_point() and cov.is_floating_point()):
        raise ctx.fail(
            f"holds `mu` {mean.dtype} {list(mean.shape)} and `sigma` {cov.dtype} {list(cov.shape)} in {where}",
            "a file of float statistics, `mu` [D] and `sigma` [D, D]",
        )
    mean, cov = mean.to(torch.float64), cov.to(torch.float64)
    if not bool(torch.isfinite(mean).all() and torch.isfinite(cov).all()):
        raise ctx.fail(f"holds NaN or Inf in the statistics of {where}", "a file of finite statistics")
    if not raw:
        check_covariance(cov, ctx, f"`sigma` of {where}")
    return {"mean": mean, "cov": cov}


def check_covariance(cov: Tensor, ctx: FileContext, what: str) -> None:
    defect = covariance_defect(cov)
    if defect is not None:
        raise ctx.fail(f"holds a covariance ({what}) that {defect}", "a file of statistics with a covariance matrix")


def text_of(value: Any) -> str:
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "US":
        value = value.item()
    return value.decode() if isinstance(value, bytes) else value if isinstance(value, str) else ""


def count_of(value: Any) -> Optional[int]:
    value = value.item() if isinstance(value, (np.ndarray, np.generic, Tensor)) and np.ndim(value) == 0 else value
    return int(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else None
