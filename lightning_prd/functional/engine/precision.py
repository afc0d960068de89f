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
from typing import Iterator, List

import torch

from lightning_prd.functional.knn.tiling import ieee_float32

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
