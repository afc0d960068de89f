"""Rules several family records share: the size checks of k-NN radii on set sizes and a bool option."""

from __future__ import annotations


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
