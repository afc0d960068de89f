"""Input checks shared by every public entry point.

Messages follow torchmetrics: they name the argument and the value that was given.
No ``assert`` on user input: these raise ``ValueError``/``TypeError``.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

_UPCAST = (torch.float16, torch.bfloat16)


def check_positive_int(value: Any, name: str) -> int:
    """Return ``value`` if it is a positive ``int`` (not a bool), else raise ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Expected argument `{name}` to be a positive integer, but got {value!r}")
    return value


def check_int(value: Any, name: str, *, minimum: Optional[int] = None) -> int:
    """Return ``value`` if it is an ``int`` (not a bool) and at least ``minimum``, else raise ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        what = "an integer" if minimum is None else "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        raise ValueError(f"Expected argument `{name}` to be {what}, but got {value!r}")
    return value


def as_features(x: Any, name: str, *, allow_empty: bool = False) -> Tensor:
    """Convert ``x`` to a finite floating ``[n, D]`` tensor.

    float16/bfloat16 are upcast to float32; integer, bool and complex inputs raise
    ``TypeError`` (features are continuous embeddings; cast them explicitly if meant).
    """
    if not isinstance(x, Tensor):
        try:
            x = torch.as_tensor(x)
        except Exception as err:  # noqa: BLE001 - re-raised with the argument name
            raise TypeError(f"Expected argument `{name}` to be a tensor or array of features, but got {type(x).__name__}") from err
    if not x.is_floating_point():
        raise TypeError(
            f"Expected argument `{name}` to hold floating-point features, but got dtype {x.dtype}; "
            f"cast it with `.float()` if these are really feature values"
        )
    if x.dtype in _UPCAST:
        x = x.float()
    if x.ndim != 2:
        raise ValueError(f"Expected argument `{name}` to be a 2-D tensor [num_samples, num_features], but got shape {tuple(x.shape)}")
    if x.shape[0] == 0 and not allow_empty:
        raise ValueError(f"Expected argument `{name}` to hold at least one sample, but got shape {tuple(x.shape)}")
    if x.shape[1] == 0:
        raise ValueError(f"Expected argument `{name}` to have at least one feature, but got shape {tuple(x.shape)}")
    if x.numel() and not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).any(1).sum())
        raise ValueError(f"Expected argument `{name}` to be finite, but {bad} of its {x.shape[0]} rows hold NaN or Inf")
    return x


def check_pair(real: Tensor, fake: Tensor) -> None:
    """Same feature width and same device for the two sets."""
    if real.shape[1] != fake.shape[1]:
        raise ValueError(
            f"Expected `real` and `fake` to have the same number of features, but got {real.shape[1]} and {fake.shape[1]}"
        )
    if real.device != fake.device:
        raise ValueError(f"Expected `real` and `fake` on the same device, but got {real.device} and {fake.device}")


def check_min_samples(x: Tensor, k: int, name: str, k_name: str = "k") -> None:
    """A k-NN radius needs at least ``k + 1`` samples in the set."""
    if x.shape[0] < k + 1:
        raise ValueError(
            f"Expected argument `{name}` to hold at least {k_name} + 1 = {k + 1} samples for k-NN radii, "
            f"but got {x.shape[0]}"
        )


def compute_dtype(real: Tensor, fake: Tensor, dtype: Optional[torch.dtype]) -> torch.dtype:
    """float64 when asked for or when either input is float64, else float32."""
    if dtype is not None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"Expected argument `dtype` to be torch.float32 or torch.float64, but got {dtype}")
        return dtype
    return torch.float64 if torch.float64 in (real.dtype, fake.dtype) else torch.float32


def check_block_bytes(block_bytes: Any) -> int:
    """The tile memory budget must be a positive integer number of bytes."""
    return check_positive_int(block_bytes, "block_bytes")
