"""The score-family registry: one record per family, read by every surface of the package.

A **family** is a switch of :func:`~lightning_prd.functional.generative_metrics` and
:class:`~lightning_prd.GenerativeMetrics` (``prd=True``, ``rarity={"k": 5}``, ``my_score=True``): a name, its
options with their defaults, the scalar scores it returns with the direction that is better, and how they
are computed. The function, the Metric (and so DDP), the callback's logged scalars and dashboards,
``lightning-prd evaluate`` (one flag per family), ``lightning-prd runs`` (the directions) and the docs'
tables read it; no other list of family names exists.

Every family, the package's own included, is such a record (:class:`~.family.Family`): its options and their
check, the sizes its options need (``fit``), how it depends on the other switches (``link``), what it asks of the
shared k-NN pass (``ask``: a :class:`~.request.PassRequest`) and how its scores are read (``read``, from the pass
or from the two feature sets); the plan, the pass, per-class and held-out scores, protocols, the command line and
the docs' tables loop over the records. A user family gives the short form (:mod:`.family_short_form`):

* ``compute(real, fake, **options) -> {key: 0-dim tensor}`` on the whole (under DDP: gathered) feature sets;
* or, from the shared k-NN pass, ``pass_asks(options) -> PassAsks`` (the real radii and tile reductions it
  needs) and ``from_pass(result, **options) -> {key: tensor}`` (the rarity score's form).

The package's families are one module each in :mod:`lightning_prd.functional.families`, imported on first use.

**Families of installed packages.** A package declares its families in the entry-point group
:data:`ENTRY_POINT_GROUP` (``lightning_prd.families``): each entry point is a callable that registers them. The
entry points are loaded (:func:`load_entry_points`) the first time a family that is not registered is asked for
(``GenerativeMetrics(nn_dist=True)``, :func:`get_family`), and by the command line before its flags are built;
a name that is still unknown raises naming the registered families and how to register one.

Directions: ``"higher"``, ``"lower"``, ``"none"`` (a diagnostic that ranks nothing) or a target value, the
best being the one closest to it (density's ``1``; ``1`` and ``0`` read ``"one"`` and ``"zero"``).

Example:
    >>> import torch
    >>> from lightning_prd.functional.engine.families import register_family, get_family, unregister_family
    >>> def mean_gap(real, fake, *, power=1.0):
    ...     return {"mean_gap": (real.mean(0) - fake.mean(0)).norm() ** power}
    >>> _ = register_family("mean_gap", mean_gap, outputs={"mean_gap": "lower"}, defaults={"power": 1.0})
    >>> fam = get_family("mean_gap")
    >>> fam.flag, fam.options({"power": 2.0}), fam.direction("mean_gap")
    ('--mean-gap', {'power': 2.0}, 'lower')
    >>> unregister_family("mean_gap")
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

from lightning_prd.functional.engine import family_rules as rules
from lightning_prd.functional.engine import family_short_form as short_form
from lightning_prd.functional.engine.family import CliSpec, Direction, Family, PassAsks, check_direction

__all__ = [
    "Direction",
    "Family",
    "PassAsks",
    "register_family",
    "unregister_family",
    "get_family",
    "families",
    "family_of_keyword",
    "switch_families",
    "registered_options",
    "directions",
    "ENTRY_POINT_GROUP",
    "load_entry_points",
    "pop_switches",
    "unknown_family",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


_REGISTRY: Dict[str, Family] = {}

#: the entry-point group of installed packages' score families
ENTRY_POINT_GROUP = "lightning_prd.families"

#: the entry points already called, as ``name=value``
_loaded: Dict[str, bool] = {}

#: keywords a torchmetrics ``Metric`` takes itself (``GenerativeMetrics`` passes them on)
METRIC_KEYWORDS = rules.METRIC_KEYWORDS


def load_entry_points() -> List[str]:
    """Call every entry point of :data:`ENTRY_POINT_GROUP` once (one that fails in any way, ``SystemExit``
    included, is named in a warning and skipped; only ``KeyboardInterrupt`` goes on); returns the names called by
    this call."""
    from importlib.metadata import entry_points

    called = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        key = f"{point.name}={point.value}"
        if key in _loaded:
            continue
        _loaded[key] = True
        try:
            point.load()()
        except KeyboardInterrupt:
            raise
        except BaseException as err:  # noqa: BLE001 - another package's bug (sys.exit too) must not stop the caller
            warnings.warn(
                f"score family entry point {key!r} ({ENTRY_POINT_GROUP}) failed and is skipped: "
                f"{type(err).__name__}: {err}",
                stacklevel=2,
            )
            continue
        called.append(point.name)
    return called


def _known(names: Iterable[str]) -> bool:
    """Whether every name is a registered family, after loading the entry points when one is not."""
    _builtins()
    names = list(names)
    if all(name in _REGISTRY for name in names):
        return True
    load_entry_points()
    return all(name in _REGISTRY for name in names)


def unknown_family(names: Sequence[str], registered: Optional[Sequence[str]] = None) -> ValueError:
    """The one-line error for names that are no registered family (entry points loaded): the registered ones and
    how to register one."""
    shown = sorted(_REGISTRY) if registered is None else list(registered)
    return ValueError(
        f"Expected score families registered with `register_family`, but got {list(names)}; registered: "
        f"{', '.join(shown)}; register one with lightning_prd.register_family(name, compute, outputs={{key: "
        f"'higher'|'lower'|target}}) before use, or install a package that declares it in the entry-point group "
        f"{ENTRY_POINT_GROUP!r}"
    )


def pop_switches(kwargs: Dict[str, Any], others: Iterable[str] = ()) -> Dict[str, Any]:
    """Take the switches of the families that are no keyword of the signature (the rarity score, user families)
    out of ``kwargs``; entry points are loaded when a name is not registered, and a name that is neither a family nor
    in ``others`` raises :func:`unknown_family`."""
    allowed = set(others)
    unknown = [name for name in kwargs if name not in allowed]
    if unknown and not _known(unknown):
        missing = [name for name in unknown if name not in _REGISTRY]
        raise unknown_family(missing)
    names = {family.keyword for family in switch_families()}
    return {name: kwargs.pop(name) for name in list(kwargs) if name in names}


def register_family(
    name: str,
    compute: Optional[Callable[..., Mapping[str, Any]]] = None,
    *,
    outputs: Mapping[str, Any],
    defaults: Optional[Mapping[str, Any]] = None,
    check: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None,
    meaning: str = "",
    per_class: bool = False,
    docs: Optional[str] = None,
    pass_asks: Optional[Callable[[Dict[str, Any]], PassAsks]] = None,
    from_pass: Optional[Callable[..., Mapping[str, Any]]] = None,
    min_real: Optional[Callable[[Dict[str, Any]], int]] = None,
    min_fake: Optional[Callable[[Dict[str, Any]], int]] = None,
    per_sample: Sequence[str] = (),
    other_keys: Sequence[str] = (),
    replace: bool = False,
    keyword: Optional[str] = None,
    value_option: Optional[str] = None,
    needs_test: bool = False,
    fit: Optional[Callable[..., Optional[Dict[str, Any]]]] = None,
    link: Optional[Callable[..., Optional[Dict[str, Any]]]] = None,
    ask: Optional[Callable[..., Any]] = None,
    read: Optional[Callable[..., Mapping[str, Any]]] = None,
    statistics: bool = False,
    empty_class: Optional[Mapping[str, Mapping[str, float]]] = None,
    shrink: Optional[Callable[..., Any]] = None,
    cli: Optional[CliSpec] = None,
    order: Optional[float] = None,
    switchable: bool = True,
    _builtin: bool = False,
) -> Family:
    """Register a score family; it is then a switch of every surface (module docstring).

    Every argument is checked here, each refusal a ``ValueError`` naming it (:mod:`.family_rules`). The record's
    full form (:class:`~.family.Family`: ``fit``, ``link``, ``ask``, ``read``, ...) is what the package's families
    give; ``compute``, ``pass_asks`` / ``from_pass`` and ``min_real`` / ``min_fake`` are the short form, turned into
    ``read``, ``ask`` and ``fit``.

    Args:
        name: the switch's keyword: lower case letters, digits and ``_``, starting with a letter (the whole
            string); not a keyword a surface already takes (``k_precision_recall``, ``ball``, ``compute_on_cpu``,
            ...: read from their signatures).
        compute: ``compute(real, fake, **options) -> {key: 0-dim tensor}`` on the whole feature sets (under DDP
            the gathered ones: the result equals one process's). Needed unless ``from_pass`` or ``read``.
        outputs: ``{key: "higher" | "lower" | "none" | target}``: every scalar key ``compute`` returns; each key
            a score name (NFKC, no white space or control characters, non-empty) that no family, option or the
            callback's record uses.
        defaults: the options (keyword names) and their defaults (``<name>=True`` asks for them; a dict
            overrides some).
        check: a callable that validates an options dict (raise ``ValueError`` naming the option) and returns
            the options.
        meaning: one line for tables and docs.
        per_class: a bool: also compute the family per class (with ``per_class=True``).
        docs: the page describing it (a string), or None.
        pass_asks, from_pass: callables of a family read from the shared k-NN pass instead of ``compute``.
        min_real, min_fake: callables ``f(options) -> int``: the fewest real / generated samples its options need.
        per_sample: keys of per-sample outputs (not logged as scalars), score names as ``outputs``' keys.
        other_keys: the other keys its results hold (curves, spreads), score names as ``outputs``' keys.
        replace: a bool: replace a family of the same name (otherwise that raises).
        keyword: the surfaces' keyword of its switch (a package family's may differ from its name).
        value_option: the option a plain value of the keyword sets (``k_precision_recall=3``), or None.
        needs_test: a bool: it scores against a held-out real set ``test``.
        fit: ``fit(options, num_real, num_fake, lenient) -> options | None`` (the short form: ``min_real`` /
            ``min_fake``).
        link: ``link(options, switched, call) -> options | None``: its options given the other switches.
        ask: ``ask(ctx, options) -> PassRequest`` (the short form: ``pass_asks``).
        read: ``read(ctx, options) -> {key: tensor}`` (the short form: ``compute`` or ``from_pass``).
        statistics: a bool: a real set's mean and covariance serve its scores.
        empty_class: per-class values where one set lacks a class (``{"no_fake": {...}, "no_real": {...}}``).
        shrink: ``shrink(options, num_real, num_fake) -> (options, warning)`` for the Metric's small sets.
        cli: its command-line switch (:class:`~.family.CliSpec`).
        order: its place in tables (after every registered family when None).
        switchable: a bool: a switch of the feature metrics (False: a score of an extractor's other outputs).

    Returns:
        The :class:`Family` record.
    """
    if not _builtin:
        _builtins()  # a user family's outputs are checked against the package's
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"Expected argument `name` of register_family to be lower case letters, digits and '_' starting with "
            f"a letter, but got {name!r}"
        )
    rules.check_types(
        compute=compute, defaults=defaults, check=check, meaning=meaning, per_class=per_class, docs=docs,
        pass_asks=pass_asks, from_pass=from_pass, min_real=min_real, min_fake=min_fake,
        per_sample=per_sample, other_keys=other_keys, replace=replace, builtin=_builtin, needs_test=needs_test,
        fit=fit, link=link, ask=ask, read=read, statistics=statistics, shrink=shrink, switchable=switchable,
        cli=cli, order=order, empty_class=empty_class,
    )  # fmt: skip
    keyword = name if keyword is None else keyword
    if keyword != name and not _builtin:
        raise ValueError(f"Expected argument `keyword` of register_family to be the name {name!r}, but got {keyword!r}")
    if value_option is not None and (not isinstance(value_option, str) or value_option not in (defaults or {})):
        raise ValueError(
            f"Expected argument `value_option` of register_family to be one of the options {sorted(defaults or {})}, "
            f"but got {value_option!r}"
        )
    if name in _REGISTRY and not replace:
        raise ValueError(
            f"Expected argument `name` of register_family to be a new family, but {name!r} is registered (pass "
            f"replace=True)"
        )
    if name in _REGISTRY and _REGISTRY[name].builtin and not _builtin:
        raise ValueError(
            f"Expected argument `name` of register_family to be a new family, but {name!r} is a built-in family"
        )
    if not _builtin and name not in _REGISTRY and name in rules.surface_keywords():
        raise ValueError(
            f"Expected argument `name` of register_family to be a new keyword, but {name!r} is a keyword of the "
            f"function, the Metric or the callback (an option of every surface)"
        )
    if switchable and read is None and from_pass is None and not callable(compute):
        raise ValueError(
            f"Expected argument `compute` of register_family to be a callable (real, fake, **options), but got "
            f"{compute!r}"
        )
    if from_pass is not None and pass_asks is None:
        raise ValueError(
            "Expected argument `pass_asks` of register_family with `from_pass`: what the family asks of the k-NN pass"
        )
    if not isinstance(outputs, Mapping):
        raise ValueError(
            f"Expected argument `outputs` of register_family to be a dict {{key: direction}}, but got {outputs!r}"
        )
    if not _builtin:
        for key in outputs:
            rules.check_score_name(key, "outputs")
    checked = {str(key): check_direction(str(key), way) for key, way in outputs.items()}
    taken = {key: fam.name for fam in _REGISTRY.values() if fam.name != name for key in fam.outputs}
    clash = sorted(key for key in checked if key in taken)
    if clash:
        raise ValueError(
            f"Expected argument `outputs` of register_family to name new scores, but {clash} are outputs of "
            f"family {taken[clash[0]]!r}"
        )
    if not _builtin:
        used = rules.used_keys(_REGISTRY.values(), name)
        rules.check_output_keys(checked, "outputs", used)
        for argument, keys in (("per_sample", per_sample), ("other_keys", other_keys)):
            rules.check_output_keys([rules.check_score_name(key, argument) for key in keys], argument, used)
    family = Family(
        name=name,
        outputs=checked,
        defaults=dict(defaults or {}),
        compute=compute,
        check=check,
        pass_asks=pass_asks,
        from_pass=from_pass,
        meaning=str(meaning),
        per_class=bool(per_class),
        min_real=min_real,
        min_fake=min_fake,
        docs=docs,
        builtin=_builtin,
        per_sample=tuple(per_sample),
        other_keys=tuple(other_keys),
        keyword=keyword,
        value_option=value_option,
        needs_test=needs_test,
        fit=fit,
        link=link,
        ask=ask if ask is not None else short_form.asks_of(pass_asks),
        read=read if read is not None or not switchable else short_form.reader(lambda: _REGISTRY[name]),
        statistics=statistics,
        empty_class=dict(empty_class or {}),
        shrink=shrink,
        cli=cli if cli is not None else CliSpec(help=f"{meaning or name} (family {name!r})"),
        order=_next_order() if order is None else float(order),
        switchable=switchable,
    )
    if family.fit is None:
        family = dataclasses.replace(family, fit=short_form.fit_of(family))
    _REGISTRY[name] = family
    return family


def _next_order() -> float:
    """The place of a family registered without one: after every registered family."""
    return max((f.order for f in _REGISTRY.values()), default=0.0) + 1.0


def unregister_family(name: str) -> None:
    """Remove a family registered from user code (built-in families stay)."""
    family = _REGISTRY.get(name)
    if family is None:
        raise ValueError(f"Expected argument `name` to be a registered family, but got {name!r}")
    if family.builtin:
        raise ValueError(f"Expected argument `name` to be a family registered from user code, but {name!r} is built in")
    del _REGISTRY[name]


def get_family(name: str) -> Family:
    """The family ``name`` (entry points loaded the first time it is not registered); :func:`unknown_family`
    otherwise."""
    if not _known([name]):
        raise unknown_family([name])
    return _REGISTRY[name]


def families() -> List[Family]:
    """Every registered family in table order: the package's by their ``order``, then user families in
    registration order."""
    _builtins()
    return sorted(_REGISTRY.values(), key=lambda f: f.order)


def switch_families() -> List[Family]:
    """The families that are a switch of the feature metrics, in table order."""
    return [f for f in families() if f.switchable]


def family_of_keyword(keyword: str) -> Optional[Family]:
    """The family whose switch is the keyword ``keyword`` (``k_precision_recall``: precision and recall), or
    None."""
    return next((f for f in switch_families() if f.keyword == keyword), None)


def registered_options(given: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The checked options of the switched-on families, by name in table order, from their switches by keyword
    (``{"k_precision_recall": 3, "prd": True}``); a keyword that is no family raises naming the registered ones."""
    keywords = {f.keyword for f in switch_families()}
    unknown = sorted(set(given) - keywords)
    if unknown and not _known_keywords(unknown):
        raise unknown_family(sorted(set(given) - {f.keyword for f in switch_families()}))
    out: Dict[str, Dict[str, Any]] = {}
    for family in switch_families():
        if family.keyword in given:
            options = family.options(given[family.keyword])
            if options is not None:
                out[family.name] = options
    return out


def _known_keywords(keywords: Sequence[str]) -> bool:
    """Whether every keyword is a family's switch, after loading the entry points when one is not."""
    load_entry_points()
    return set(keywords) <= {f.keyword for f in switch_families()}


def directions() -> Dict[str, Direction]:
    """Score key -> direction over every family's outputs, in table order."""
    return {key: way for fam in families() for key, way in fam.outputs.items()}


_loading = False
_builtins_loaded = False


def _builtins() -> None:
    """Register the package's families (once): import every module of :mod:`lightning_prd.functional.families`."""
    global _loading, _builtins_loaded
    if not _loading and not _builtins_loaded:
        _loading = True
        try:
            from lightning_prd.functional import families as family_modules

            family_modules.load()
            _builtins_loaded = True
        finally:
            _loading = False
