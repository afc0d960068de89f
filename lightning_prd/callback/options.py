"""The callback's arguments checked (``real``, the callables, the switches), the ``metric`` argument turned
into a Metric, and which results are logged as scalars."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Union

import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import non_finite_rows
from lightning_prd.metrics.generative import GenerativeMetrics


def check_real(real: Any) -> None:
    """``real`` is a non-empty, finite tensor (checked once, before any training) or an iterable of batches."""
    if isinstance(real, Tensor):
        if real.ndim < 1 or real.shape[0] == 0:
            raise ValueError(f"Expected argument `real` to hold at least one sample, but got shape {tuple(real.shape)}")
        bad = non_finite_rows(real.detach()) if real.is_floating_point() else 0
        if bad:
            raise ValueError(
                f"Expected argument `real` to be finite, but {bad} of its {real.shape[0]} samples hold NaN or Inf"
            )
    elif isinstance(real, (str, bytes, Mapping)) or not isinstance(real, Iterable):
        raise TypeError(
            f"Expected argument `real` to be a tensor or a DataLoader of real samples, but got {type(real).__name__}"
        )


def check_callable(value: Any, name: str, how: str) -> None:
    """``value`` is ``None`` or callable; ``how`` says how it is called, in the error."""
    if value is not None and not callable(value):
        shown = repr(value) if name == "sample_fn" else type(value).__name__
        raise TypeError(f"Expected argument `{name}` to be {how}, but got {shown}")


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"Expected argument `{name}` to be a bool, but got {value!r}")
    return value


def build_metric(metric: Union[None, Mapping[str, Any], Any], per_sample: bool = False) -> Any:
    if metric is None:
        return GenerativeMetrics(reset_real_features=False, per_sample=per_sample)
    if isinstance(metric, Mapping):
        options = {"reset_real_features": False, "per_sample": per_sample, **metric}
        return GenerativeMetrics(**options)
    if isinstance(metric, type):
        raise TypeError(
            f"Expected argument `metric` to be a Metric instance, but got the class {metric.__name__}: call it"
        )
    if all(callable(getattr(metric, name, None)) for name in ("update", "compute", "reset", "to")):
        return metric
    raise TypeError(
        f"Expected argument `metric` to be None, a dict of GenerativeMetrics options or a Metric with "
        f"update/compute/reset, but got {type(metric).__name__}"
    )


def is_scalar(value: Any) -> bool:
    if isinstance(value, Tensor):
        return value.ndim == 0 and value.dtype != torch.bool
    return isinstance(value, (int, float)) and not isinstance(value, bool)
