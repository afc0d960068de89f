"""The one error for an explicit value that contradicts a protocol, shared by the metrics, the callback and the CLI.

Example:
    >>> try:
    ...     check_against_protocol("pr50k3", "--k", 5, 3)
    ... except ValueError as err:
    ...     print(str(err).split(";")[0])
    Expected argument `--k` to agree with protocol 'pr50k3', which sets it to 3, but got 5
"""

from __future__ import annotations

from typing import Any, Mapping


def _normal(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    return value


def same_value(value: Any, protocol_value: Any) -> bool:
    """Whether two option values agree (tuples equal lists, ``True`` is not ``1``).

    Example:
        >>> same_value((1, 2), [1, 2]), same_value(True, 1), same_value(3, 3.0)
        (True, False, True)
    """
    if isinstance(value, bool) != isinstance(protocol_value, bool):
        return False
    try:
        return bool(_normal(value) == _normal(protocol_value))
    except Exception:  # noqa: BLE001 - values that cannot be compared do not agree
        return False


def check_against_protocol(protocol: Any, name: str, value: Any, protocol_value: Any) -> None:
    """``ValueError`` naming the argument, its value, the protocol and the protocol's value when they differ.

    ``name`` is written as given: ``"k"`` for an argument, ``"--k"`` for a command-line flag.
    """
    if same_value(value, protocol_value):
        return
    label = getattr(protocol, "name", protocol)
    raise ValueError(
        f"Expected argument `{name}` to agree with protocol {label!r}, which sets it to {protocol_value!r}, "
        f"but got {value!r}; leave it out to take the protocol's value, or drop the protocol"
    )
