"""The callback's ``metric`` argument turned into a Metric, and which results are logged as scalars."""

from __future__ import annotations

from typing import Any, Mapping, Union

import torch
from torch import Tensor

from lightning_prd.metrics.generative import GenerativeMetrics


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
