"""Rules several family records share: the size checks of k-NN radii on set sizes and a bool option."""

from __future__ import annotations

from typing import Optional


def need_radii(count: int, k: int, role: str, k_name: str) -> None:
    """A k-NN radius needs ``k + 1`` samples in the set of ``count``: ``ValueError`` naming the set and ``k_name``
    otherwise."""
    if count < k + 1:
        raise ValueError(
            f"Expected argument `{role}` to hold at least {k_name} + 1 = {k + 1} samples for k-NN radii, "
            f"but got {count}"
        )


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
    need_radii(num_real, k, "real", k_name)
    need_radii(num_fake, k, "fake", k_name)
    return options
