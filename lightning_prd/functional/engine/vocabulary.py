"""One name and one default per option, on every surface; which options a caller actually gave.

:func:`~lightning_prd.functional.generative_metrics` and :class:`~lightning_prd.GenerativeMetrics` take the
same keywords with the same defaults (the callback's ``metric=`` dict, the protocol table, the fingerprint and
``--json`` settings use the same names; the CLI flag is the name with dashes). Their signatures mark each
default with :func:`default`: a value wrapped in :class:`Default` was **not given**, any other value was,
even one equal to the default. :func:`resolve` turns the caller's values into plain ones: given values as
they are, then a protocol's values, then a named preset's, then the defaults.

Presets (:data:`PRESETS`): ``"training"``, what the callback scores by default, adds the PRD curve and the
α-precision / β-recall curves (dashboards draw them every evaluation; authenticity comes with them) and
leaves out the per-sample realism scores.

Example:
    >>> from lightning_prd.functional.engine.vocabulary import Default, given, resolve
    >>> given(Default(3)), given(3)
    (False, True)
    >>> out = resolve({"prd": Default(False), "realism": Default(True), "k_precision_recall": 3}, preset="training")
    >>> out["prd"], out["realism"], out["k_precision_recall"]
    (True, False, 3)
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, TypeVar

T = TypeVar("T")


class Default:
    """A signature's default value, marked as not given by the caller (its ``repr`` is the value's)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Default) and type(other.value) is type(self.value) and other.value == self.value

    def __hash__(self) -> int:
        return hash(("Default", repr(self.value)))


def default(value: T) -> T:
    """``value`` marked as a default (typed as the value, for signatures)."""
    return Default(value)  # type: ignore[return-value]


def given(value: Any) -> bool:
    """Whether the caller gave ``value`` (it is no :class:`Default`)."""
    return not isinstance(value, Default)


def plain(value: Any) -> Any:
    """The value itself, unwrapped from :class:`Default`."""
    return value.value if isinstance(value, Default) else value


#: option -> its name before the options had one name on every surface (refused with the new name)
RENAMED: Dict[str, str] = {"k_pr": "k_precision_recall", "k_dc": "k_density_coverage"}

#: fingerprint key -> its name since the options have one name on every surface (read as the new one)
FINGERPRINT_RENAMED: Dict[str, str] = {"k": "k_precision_recall"}


def current_keys(fingerprint: Mapping[str, Any]) -> Dict[str, Any]:
    """A fingerprint (a logged run's, a ``--json`` file's) with its old keys (:data:`FINGERPRINT_RENAMED`) read
    as the new ones."""
    out = dict(fingerprint)
    for old, new in FINGERPRINT_RENAMED.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


#: named sets of defaults for a use; a given value or a protocol's wins over them
PRESETS: Dict[str, Dict[str, Any]] = {
    "training": {"prd": True, "alpha_beta": True, "realism": False, "authenticity": False},
}


def check_renamed(options: Mapping[str, Any], renamed: Optional[Mapping[str, str]] = None) -> None:
    """``ValueError`` in one line when an option is spelled by its old name (``renamed``: old -> new,
    :data:`RENAMED` by default; the protocol's and the fingerprint's field ``k`` is :data:`FINGERPRINT_RENAMED`)."""
    for old, new in (RENAMED if renamed is None else renamed).items():
        if old in options:
            raise ValueError(
                f"Expected argument `{new}`, but got `{old}`: the option is spelled `{new}` on every surface"
            )


def check_preset(preset: Any) -> Optional[str]:
    """The preset's name checked (None: no preset)."""
    if preset is None:
        return None
    if not isinstance(preset, str) or preset.strip().lower() not in PRESETS:
        raise ValueError(f"Expected argument `preset` to be None or one of {sorted(PRESETS)}, but got {preset!r}")
    return preset.strip().lower()


def resolve(values: Mapping[str, Any], *, preset: Any = None) -> Dict[str, Any]:
    """Plain values of every option in ``values``: given ones as they are (a protocol's values count as given:
    :func:`lightning_prd.protocols.resolve_arguments` fills them in first), then the preset's (``preset``
    checked here, a signature's :class:`Default` read as its value), then the defaults."""
    name_of_preset = check_preset(plain(preset))
    layer = PRESETS[name_of_preset] if name_of_preset is not None else {}
    out: Dict[str, Any] = {}
    for name, value in values.items():
        if given(value):
            out[name] = value
        elif name in layer:
            out[name] = layer[name]
        else:
            out[name] = plain(value)
    return out
