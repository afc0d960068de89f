"""Rules several family records share: radii of both sets (left out when switched on by ``True``) and a bool
option."""

from __future__ import annotations

from typing import Optional

from lightning_prd.functional.engine.inputs import check_min_count


def too_small(num_real: int, num_fake: int, k: int) -> bool:
    """Whether a set is too small for radii of ``k`` (``k + 1`` samples)."""
    return min(num_real, num_fake) < k + 1


def check_flag(value: object, name: str) -> bool:
    """``value`` if it is a bool; ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(value, bool):
        raise ValueError(f"Expected argument `{name}` to be a bool, but got {value!r}")
    return value


def fit_both(options: dict, num_real: int, num_fake: int, lenient: bool, k: int, k_name: str) -> Optional[dict]:
    """``options`` when both sets hold ``k + 1`` samples for radii of ``k``; otherwise None when ``lenient``
    (switched on by ``True``: left out), else ``ValueError`` naming the set and ``k_name``."""
    if lenient and too_small(num_real, num_fake, k):
        return None
    check_min_count(num_real, k, "real", k_name)
    check_min_count(num_fake, k, "fake", k_name)
    return options
