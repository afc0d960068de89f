"""The callback's arguments checked (``real``, the callables, the switches), ``sample_fn`` and
``feature_extractor`` given by name turned into callables, the ``metric`` argument turned into a Metric,
and which results are logged as scalars.

**Rule.** A ``sample_fn`` or ``feature_extractor`` that cannot be turned into a callable (an import path
that does not import, an unknown extractor name, an extractor whose weights are missing) raises
``TypeError`` at construction, one line naming the argument and the value, chained to the cause.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.features.registry import UnknownExtractorError, get_extractor
from lightning_prd.functional.engine.inputs import non_finite_rows
from lightning_prd.metrics.generative import GenerativeMetrics

#: the callback's defaults for scoring during training (the dashboards' PRD and α/β curves)
TRAINING = "training"


def check_real(real: Any, name: str = "real") -> None:
    """``real`` is a non-empty, finite tensor (checked once, before any training) or an iterable of batches;
    errors name the argument ``name``."""
    if isinstance(real, Tensor):
        if real.ndim < 1 or real.shape[0] == 0:
            raise ValueError(
                f"Expected argument `{name}` to hold at least one sample, but got shape {tuple(real.shape)}"
            )
        bad = non_finite_rows(real.detach()) if real.is_floating_point() else 0
        if bad:
            raise ValueError(
                f"Expected argument `{name}` to be finite, but {bad} of its {real.shape[0]} samples hold NaN or Inf"
            )
    elif isinstance(real, (str, bytes, Mapping)) or not isinstance(real, Iterable):
        raise TypeError(
            f"Expected argument `{name}` to be a tensor or a DataLoader of real samples, a path or "
            f"'datamodule:<split>', but got {type(real).__name__}"
        )


def check_callable(value: Any, name: str, how: str) -> None:
    """``value`` is ``None`` or callable; ``how`` says how it is called, in the error."""
    if value is not None and not callable(value):
        shown = repr(value) if name == "sample_fn" else type(value).__name__
        raise TypeError(f"Expected argument `{name}` to be {how}, but got {shown}")


def resolve_sample_fn(value: Any) -> Any:
    """``value`` itself, or the callable an import path ``"package.module:function"`` (or
    ``"package.module.function"``) names."""
    if not isinstance(value, str):
        check_callable(value, "sample_fn", "callable as sample_fn(pl_module, n)")
        return value
    module_name, sep, attr = value.strip().partition(":")
    if not sep:
        module_name, _, attr = module_name.rpartition(".")
    expected = "a callable or the import path 'package.module:function' of one"
    if not module_name or not attr:
        raise TypeError(f"Expected argument `sample_fn` to be {expected}, but got {value!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        problem = f"{value!r} fails to import: {err}"
        raise TypeError(f"Expected argument `sample_fn` to be {expected}, but {problem}") from err
    if not callable(obj):
        raise TypeError(f"Expected argument `sample_fn` to be {expected}, but {value!r} is a {type(obj).__name__}")
    return obj


def resolve_extractor(value: Any) -> Tuple[Any, Optional[str]]:
    """``(extractor, registry name)``: ``value`` itself (name ``None``), or the extractor
    :func:`~lightning_prd.features.get_extractor` builds from a name (``"inception"``,
    ``"module:callable"``), a dict ``{"name": ..., "weights": ..., **options}`` or a dict
    ``{"class_path": "package.module.Class", "init_args": {...}}`` (name ``None``). An extractor built from a
    weights file that declares no ``weights_sha256`` gets the file's, for the fingerprint (:func:`get_extractor`)."""
    if isinstance(value, Mapping) and "class_path" in value:
        return _from_class_path(value), None
    if isinstance(value, Mapping):
        options = dict(value)
        name = options.pop("name", None)
        if not isinstance(name, str):
            raise TypeError(f"Expected argument `feature_extractor` to be a dict with a 'name', but got {value!r}")
    elif isinstance(value, str):
        name, options = value, {}
    else:
        check_callable(value, "feature_extractor", "callable")
        return value, None
    try:
        extractor = get_extractor(name, **options)
    except UnknownExtractorError as err:
        raise TypeError(
            f"Expected argument `feature_extractor` to be one of {err.known}, 'module:callable', "
            f"a dict with a 'name' or a callable, but got {value!r}"
        ) from err
    except (ValueError, TypeError, ImportError, OSError) as err:
        raise TypeError(f"Expected argument `feature_extractor` {value!r} to build an extractor, but {err}") from err
    return extractor, name.strip()  # built from a weights file, it carries the file's SHA-256 (get_extractor)


def _from_class_path(value: Mapping[str, Any]) -> Any:
    path, init_args = value["class_path"], value.get("init_args") or {}
    module_name, _, attr = str(path).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
        extractor = cls(**init_args)
    except (ImportError, AttributeError, ValueError, TypeError, OSError) as err:
        raise TypeError(f"Expected argument `feature_extractor` {dict(value)!r} to build, but {err}") from err
    check_callable(extractor, "feature_extractor", "callable")
    return extractor


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"Expected argument `{name}` to be a bool, but got {value!r}")
    return value


def build_metric(metric: Union[None, Mapping[str, Any], Any], per_sample: bool = False, closest_pairs: int = 0) -> Any:
    """The callback's metric: ``GenerativeMetrics(preset="training", reset_real_features=False)`` (with
    ``per_sample`` for ``log_images`` and ``closest_pairs`` for ``log_closest_pairs`` when they are on), updated
    by the options of a dict ``metric`` (any keyword of ``GenerativeMetrics``, a family switch such as
    ``rarity: true``, or ``preset: null`` for the plain defaults), or the Metric ``metric`` itself."""
    extra: Dict[str, Any] = {"closest_pairs": closest_pairs} if closest_pairs else {}
    if per_sample:
        extra["per_sample"] = True
    if metric is None:
        return GenerativeMetrics(preset=TRAINING, reset_real_features=False, **extra)
    if isinstance(metric, Mapping):
        options = {"preset": TRAINING, "reset_real_features": False, **extra, **metric}
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
