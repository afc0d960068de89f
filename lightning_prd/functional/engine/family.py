"""A score family's record (:class:`Family`), what it asks of the shared k-NN pass (:class:`PassAsks`) and
its outputs' directions; the registry of records is :mod:`.families`.

Example:
    >>> from lightning_prd.functional.engine.family import check_direction
    >>> check_direction("density", 1), check_direction("fid", "lower"), check_direction("gap", 0.5)
    ('one', 'lower', 0.5)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

Direction = Union[str, float]

#: the named directions; any other direction is a target value
NAMED_DIRECTIONS = ("higher", "lower", "none", "one", "zero")


@dataclass(frozen=True)
class PassAsks:
    """What a family asks of the shared k-NN pass: the real radii ``NND_k`` it reads and its tile reductions
    (:class:`~lightning_prd.functional.knn.reduction.TileReduction`, one fresh object per pass)."""

    real_ks: Sequence[int] = ()
    reductions: Sequence[Any] = ()


@dataclass(frozen=True)
class CliSpec:
    """How ``lightning-prd evaluate`` switches a family (data of its record; the parser and the scorer loop over
    the records).

    Attributes:
        on: on by default in ``evaluate`` (its flag then reads ``--no-<name>``); otherwise off unless its flag is
            given.
        seeded: its ``seed`` option takes ``--seed``.
        flags: extra flags setting one option each: ``{flag: (option, help)}`` (``--prd-clusters``), its value
            checked by the record.
        linked: options taken from another flag's value: ``{option: dest}`` (α-precision's ``k`` follows
            ``--k-density-coverage``).
        help: the help line of its flag.
    """

    on: bool = False
    seeded: bool = False
    flags: Mapping[str, Tuple[str, str]] = field(default_factory=dict)
    linked: Mapping[str, str] = field(default_factory=dict)
    help: str = ""


@dataclass(frozen=True)
class Family:
    """One score family (module docstring).

    Attributes:
        name: the switch's keyword (lower case, digits, ``_``); the CLI flag is ``--<name with dashes>``.
        outputs: scalar score key -> direction, in table order.
        defaults: option -> default; ``True`` asks for these, a dict overrides some.
        compute: ``compute(real, fake, **options)`` on the whole feature sets, or None.
        check: ``check(options) -> options``: raises ``ValueError`` naming a bad option, or None.
        pass_asks, from_pass: what it asks of the shared pass and how its scores are read from it, or None.
        engine: computed by the package's engine (a built-in family wired there).
        meaning: one line: what the scores measure.
        per_class: whether per-class scores are computed for it.
        min_real, min_fake: the fewest samples of each set its options need (``f(options) -> int``), or None.
        docs: the docs page that describes it.
        builtin: registered by the package.
        per_sample: keys of per-sample (non-scalar) outputs.
        other_keys: the other keys its results hold (curves, spreads): no scores, but no other family's key.
        keyword: the surfaces' keyword of its switch (its name, or ``k_precision_recall`` for a valued switch).
        value_option: the option a plain value of the keyword sets (``"k"``: ``k_precision_recall=3``;
            ``None`` switches it off), or None for a ``True``/dict switch.
        needs_test: it scores against a held-out real set ``test``.
        fit: ``fit(options, num_real, num_fake, lenient) -> options | None``: the options for sets of these
            sizes (a ``ValueError`` naming the option when too small; None leaves it out when ``lenient``, i.e.
            switched on by ``True``).
        link: ``link(options, switched, call) -> options | None``: its options given the other families'
            (``switched``: name -> options) and the call's options (``ball``, ``per_sample``, ``error_bars``).
        ask: ``ask(ctx, options) -> PassRequest``: what it asks of the shared k-NN pass, or None.
        read: ``read(ctx, options) -> {key: tensor}``: its scores, from ``ctx.res`` (the pass) or ``ctx.sets``.
        statistics: its scores need only the real set's mean and covariance (a statistics file).
        empty_class: per-class values where one set has no row of a class: ``{"no_fake": {key: value},
            "no_real": {key: value}}`` (the other keys are NaN).
        shrink: ``shrink(options, num_real, num_fake) -> (options, warning)``: the Metric's options for sets
            smaller than the options ask (KID's subset size), or None.
        cli: the command line's switch (:class:`CliSpec`).
        order: its place in tables (the package's families; user families follow in registration order).
        switchable: a switch of the feature metrics (False: a score the callback and the command line compute
            from an extractor's other outputs, the Inception Score and sFID, listed for its direction).
    """

    name: str
    outputs: Dict[str, Direction]
    defaults: Dict[str, Any] = field(default_factory=dict)
    compute: Optional[Callable[..., Mapping[str, Any]]] = None
    check: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None
    pass_asks: Optional[Callable[[Dict[str, Any]], PassAsks]] = None
    from_pass: Optional[Callable[..., Mapping[str, Any]]] = None
    engine: bool = False
    meaning: str = ""
    per_class: bool = False
    min_real: Optional[Callable[[Dict[str, Any]], int]] = None
    min_fake: Optional[Callable[[Dict[str, Any]], int]] = None
    docs: Optional[str] = None
    builtin: bool = False
    per_sample: Sequence[str] = ()
    other_keys: Sequence[str] = ()
    keyword: str = ""
    value_option: Optional[str] = None
    needs_test: bool = False
    fit: Optional[Callable[..., Optional[Dict[str, Any]]]] = None
    link: Optional[Callable[..., Optional[Dict[str, Any]]]] = None
    ask: Optional[Callable[..., Any]] = None
    read: Optional[Callable[..., Mapping[str, Any]]] = None
    statistics: bool = False
    empty_class: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    shrink: Optional[Callable[..., Tuple[Dict[str, Any], str]]] = None
    cli: CliSpec = field(default_factory=CliSpec)
    order: float = 0.0
    switchable: bool = True

    def __post_init__(self) -> None:
        if not self.keyword:
            object.__setattr__(self, "keyword", self.name)

    @property
    def flag(self) -> str:
        """The command line's flag of this family: its keyword with dashes."""
        return "--" + self.keyword.replace("_", "-")

    @property
    def switch_on(self) -> Any:
        """The keyword's value that switches the family on with its defaults (``True``, or the default of its
        :attr:`value_option`: ``k_precision_recall=3``)."""
        return True if self.value_option is None else self.defaults[self.value_option]

    @property
    def switch_off(self) -> Any:
        """The keyword's value that switches the family off (``False``, or ``None`` for a valued keyword)."""
        return False if self.value_option is None else None

    def switch(self, options: Mapping[str, Any]) -> Any:
        """The keyword's value that switches the family on with ``options`` (a dict, or the value of its
        :attr:`value_option`)."""
        if self.value_option is not None:
            return options[self.value_option]
        return dict(options) if self.defaults else True

    def cli_args(self, options: Optional[Mapping[str, Any]] = None) -> list:
        """The command line's arguments that switch the family on with ``options`` (its defaults when None):
        ``--k-precision-recall 3``, ``--kid subsets=10``."""
        if self.value_option is not None:
            value = self.defaults[self.value_option] if options is None else options[self.value_option]
            return [self.flag, str(value)]
        return [self.flag, *(f"{key}={value!r}" for key, value in (options or {}).items())]

    def direction(self, key: str) -> Direction:
        """The direction of output ``key``."""
        return self.outputs[key]

    @property
    def per_class_keys(self) -> Tuple[str, ...]:
        """The scalar outputs scored per class (none when the family has no per-class scores)."""
        return tuple(self.outputs) if self.per_class else ()

    def fewest(self, options: Dict[str, Any]) -> Tuple[int, int]:
        """The fewest real and generated samples the family needs with ``options`` (0 where it sets none)."""
        return (
            self.min_real(options) if self.min_real is not None else 0,
            self.min_fake(options) if self.min_fake is not None else 0,
        )

    def options(self, value: Any) -> Optional[Dict[str, Any]]:
        """The checked options of a switch: ``False``/``None`` -> None (off), ``True`` -> the defaults, a dict
        -> the defaults it overrides. ``ValueError`` names the family and the option (an error of ``check`` other
        than ``ValueError``: the family and its options)."""
        if self.value_option is not None:
            if value is None:
                return None
            if isinstance(value, (bool, Mapping)):
                raise ValueError(
                    f"Expected argument `{self.keyword}` to be a value of `{self.value_option}` or None, but got "
                    f"{value!r}"
                )
            return self._checked({**self.defaults, self.value_option: value})
        if value is False or value is None:
            return None
        if not self.defaults and value is not True:  # a family without options is a bool
            raise ValueError(f"Expected argument `{self.keyword}` to be a bool, but got {value!r}")
        if value is True:
            options = dict(self.defaults)
        elif isinstance(value, Mapping):
            unknown = set(value) - set(self.defaults)
            if unknown:
                raise ValueError(
                    f"Expected argument `{self.name}` to hold only {sorted(self.defaults)}, but got unknown keys "
                    f"{sorted(unknown)}"
                )
            options = {**self.defaults, **value}
        else:
            raise ValueError(f"Expected argument `{self.name}` to be a bool or a dict of options, but got {value!r}")
        return self._checked(options)

    def _checked(self, options: Dict[str, Any]) -> Dict[str, Any]:
        """``options`` through :attr:`check`, its errors named with the family."""
        if self.check is not None:
            try:
                options = dict(self.check(options))
            except ValueError as err:
                if self.value_option is not None:  # the keyword is the argument the error names
                    raise
                raise ValueError(f"{err} (an option of `{self.name}`)") from None
            except Exception as err:  # noqa: BLE001 - a check's own error, named with the family and its options
                raise ValueError(
                    f"The `check` of family {self.name!r} failed with options {options}: {type(err).__name__}: {err}"
                ) from err
        return options


def check_direction(key: str, way: Any) -> Direction:
    """The checked direction ``way`` of output ``key`` (1 and 0 read ``"one"`` and ``"zero"``)."""
    if isinstance(way, str):
        if way not in NAMED_DIRECTIONS:
            raise ValueError(
                f"Expected the direction of output `{key}` to be one of {list(NAMED_DIRECTIONS)} or a target number, "
                f"but got {way!r}"
            )
        return way
    if isinstance(way, numbers.Real) and not isinstance(way, bool) and math.isfinite(float(way)):
        target = float(way)
        return "one" if target == 1.0 else "zero" if target == 0.0 else target
    raise ValueError(f"Expected the direction of output `{key}` to be a string or a finite number, but got {way!r}")
