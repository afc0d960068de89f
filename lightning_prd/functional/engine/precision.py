"""Scores in IEEE float32, outside autocast: :func:`score_precision`.

**Rule.** Every score is computed with float32 matrix products in IEEE float32 (no TF32, no
bfloat16 passes of oneDNN) and with autocast off on every device type, whatever the caller set
(``torch.set_float32_matmul_precision("high" | "medium")``, the per-backend ``fp32_precision``
settings, a ``torch.autocast`` block around ``compute()`` such as Lightning's ``bf16-mixed``
validation step); the caller's settings are restored after, also on an exception. The k-NN
tiles' rounding bounds assume IEEE products, and PRD's k-means labels follow its GEMMs, so a
reduced-precision product would move the scores. float64 work is unaffected by these settings
(float64 products are never TF32 and autocast never casts float64); without such settings the
guard changes nothing, so the scores are bit-identical with or without it.

The guard is a context manager and a decorator (``@score_precision()``); it nests freely.

The extractors' precision (option ``extractor_precision``, :mod:`lightning_prd.features.precision`, whose
page states its rule) is here too, below the features and the metrics that both use it:
:func:`precision_context`, :func:`describe_precision`, :func:`check_extractor_precision`.

Example:
    >>> import torch
    >>> torch.set_float32_matmul_precision("medium")
    >>> with torch.autocast("cpu", dtype=torch.bfloat16), score_precision():
    ...     inside = torch.get_float32_matmul_precision(), torch.is_autocast_enabled("cpu")
    >>> inside, torch.get_float32_matmul_precision()
    (('highest', False), 'medium')
    >>> torch.set_float32_matmul_precision("highest")
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any, Iterator, List, Tuple, Union

import torch

from lightning_prd.functional.knn import ieee_float32
from lightning_prd.functional.knn.tiling import ieee_settings

#: the device types whose autocast state is checked (each one that has autocast in this torch)
AUTOCAST_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "hpu", "xla")


def autocast_enabled(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` here (False for a type this torch has no autocast for)."""
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except TypeError:  # torch < 2.4: one query per device type
        if device_type == "cpu":
            return bool(torch.is_autocast_cpu_enabled())
        return bool(torch.is_autocast_enabled()) if device_type == "cuda" else False
    except RuntimeError:  # a device type without autocast in this build
        return False


def autocast_types() -> List[str]:
    """The device types on which autocast is on here."""
    return [t for t in AUTOCAST_DEVICE_TYPES if autocast_enabled(t)]


@contextmanager
def no_autocast() -> Iterator[None]:
    """Autocast off inside the block on every device type where the caller had it on; restored after."""
    with ExitStack() as stack:
        for device_type in autocast_types():
            stack.enter_context(torch.autocast(device_type, enabled=False))
        yield


@contextmanager
def score_precision() -> Iterator[None]:
    """IEEE float32 matrix products and no autocast inside the block (module docstring); the caller's
    settings restored after."""
    with ieee_float32(), no_autocast():
        yield


#: the values of ``extractor_precision``
EXTRACTOR_PRECISIONS = ("ieee", "fast")
#: the default ``extractor_precision``
DEFAULT_EXTRACTOR_PRECISION = "ieee"


def check_extractor_precision(value: Any, name: str = "extractor_precision") -> str:
    """``value`` if it is one of :data:`EXTRACTOR_PRECISIONS`, else a one-line ``ValueError`` naming ``name``."""
    if not isinstance(value, str) or value not in EXTRACTOR_PRECISIONS:
        raise ValueError(f"Expected argument `{name}` to be one of {EXTRACTOR_PRECISIONS}, but got {value!r}")
    return value


def _conv_settings() -> List[Any]:
    """The per-backend convolution settings of this torch (cuDNN's and oneDNN's ``conv``), those with
    ``fp32_precision`` (torch 2.9 and later)."""
    out = []
    for backend in (torch.backends.cudnn, torch.backends.mkldnn):
        conv = getattr(backend, "conv", None)
        if conv is not None and hasattr(conv, "fp32_precision"):
            out.append(conv)
    return out


@contextmanager
def ieee_convolutions() -> Iterator[None]:
    """float32 convolutions in IEEE float32 inside the block (cuDNN and oneDNN); the caller's settings
    restored after. Process-wide state, like :func:`~lightning_prd.functional.knn.ieee_float32`."""
    settings = _conv_settings()
    if settings:
        with ieee_settings(settings):
            yield
        return
    before = torch.backends.cudnn.allow_tf32  # torch < 2.9: the legacy flag
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = before


@contextmanager
def precision_context(mode: str = DEFAULT_EXTRACTOR_PRECISION) -> Iterator[None]:
    """The block of an extractor call under ``extractor_precision=mode`` (module docstring): gradients
    off; for ``"ieee"`` also autocast off and IEEE float32 matmuls and convolutions. The caller's
    settings are restored after."""
    mode = check_extractor_precision(mode)
    with ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        if mode == "ieee":
            stack.enter_context(no_autocast())
            stack.enter_context(ieee_float32())
            stack.enter_context(ieee_convolutions())
        yield


def _matmul_text() -> str:
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:  # the per-backend settings are in use
        cuda, onednn = torch.backends.cuda.matmul, torch.backends.mkldnn.matmul  # type: ignore[attr-defined]
        return f"cuda {cuda.fp32_precision}, onednn {onednn.fp32_precision}"


def _conv_text(device_type: str) -> str:
    settings = _conv_settings()
    if not settings:
        return "tf32" if device_type == "cuda" and torch.backends.cudnn.allow_tf32 else "ieee"
    conv = settings[0] if device_type == "cuda" else settings[-1]
    value = str(conv.fp32_precision)
    if value == "none":  # inherits: the backend's, then the global setting
        parent = torch.backends.cudnn if device_type == "cuda" else torch.backends.mkldnn
        value = str(getattr(parent, "fp32_precision", "none"))
        if value == "none":
            value = str(getattr(torch.backends, "fp32_precision", "none"))
    return value


def _autocast_text(device_type: str) -> str:
    if not autocast_enabled(device_type):
        return "off"
    try:
        dtype = torch.get_autocast_dtype(device_type)
    except (AttributeError, RuntimeError):  # torch < 2.4
        dtype = torch.get_autocast_cpu_dtype() if device_type == "cpu" else torch.get_autocast_gpu_dtype()
    return str(dtype).replace("torch.", "")


def describe_precision(mode: str, device: Union[None, str, torch.device] = None) -> str:
    """The precision an extractor on ``device`` runs in under ``extractor_precision=mode``, as the
    fingerprint and the cache key record it: ``"ieee"``, or for ``"fast"`` the caller's settings as they
    are now, e.g. ``"fast (matmul high, conv tf32, autocast bfloat16)"`` (``conv``: the float32
    convolutions of the device's backend, cuDNN or oneDNN; ``"none"``: the backend's default).

    Example:
        >>> describe_precision("fast", "cpu")
        'fast (matmul highest, conv none, autocast off)'
    """
    mode = check_extractor_precision(mode)
    if mode == "ieee":
        return mode
    device_type = torch.device(device if device is not None else "cpu").type
    parts: Tuple[str, ...] = (
        f"matmul {_matmul_text()}",
        f"conv {_conv_text(device_type)}",
        f"autocast {_autocast_text(device_type)}",
    )
    return f"fast ({', '.join(parts)})"
