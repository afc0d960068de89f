"""The precision every feature extractor runs in: option ``extractor_precision``.

**Rule.** An extractor call of the package (the callback's real and generated samples, a Metric's
``update`` with a ``feature_extractor``, ``lightning-prd evaluate/features``, the real-feature
cache) runs inside :func:`precision_context`:

* ``"ieee"`` (the default): gradients off, autocast off on every device type, and float32 matrix
  products and convolutions in IEEE float32: cuBLAS and oneDNN matmuls (TF32 and bfloat16 passes
  off: ``torch.set_float32_matmul_precision("highest")`` or the per-backend ``fp32_precision``,
  whichever the caller uses), cuDNN and oneDNN convolutions (``fp32_precision="ieee"``, or
  ``torch.backends.cudnn.allow_tf32=False`` on torch versions without it). The features are then
  those of the reference tools (which compute in float32), whatever the caller's training set:
  cuDNN's TF32 convolutions (on by default on Ampere and newer GPUs), Lightning's
  ``set_float32_matmul_precision("high")`` advice, a ``bf16-mixed`` validation step.
* ``"fast"``: gradients off; the caller's precision settings (TF32, autocast) left as they are.
  Faster on GPUs with tensor cores, but the features are then not bit-comparable with the
  reference tools' (TF32 moves features by about 1e-3 relative, bfloat16 autocast by about 1e-2).

The caller's settings are restored after the block, also on an exception. The precision used
goes into the run's fingerprint and the real-feature cache key (:func:`describe_precision`), so a
cache written under one precision is never read under another.

Example:
    >>> import torch
    >>> torch.set_float32_matmul_precision("high")
    >>> with torch.autocast("cpu", dtype=torch.bfloat16), precision_context("ieee"):
    ...     torch.get_float32_matmul_precision(), torch.is_autocast_enabled("cpu"), torch.is_grad_enabled()
    ('highest', False, False)
    >>> describe_precision("ieee", "cuda"), torch.get_float32_matmul_precision()
    ('ieee', 'high')
    >>> torch.set_float32_matmul_precision("highest")
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any, Iterator, List, Tuple, Union

import torch

from lightning_prd.functional.engine.precision import autocast_enabled, no_autocast
from lightning_prd.functional.knn.tiling import ieee_float32

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
        saved = [s.fp32_precision for s in settings]
        try:
            for s in settings:
                s.fp32_precision = "ieee"
            yield
        finally:
            for s, value in zip(settings, saved):
                s.fp32_precision = value
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
