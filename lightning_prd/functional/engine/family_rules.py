"""What :func:`~lightning_prd.functional.engine.families.register_family` refuses, each in one line naming the
argument: a name that is no full match of ``[a-z][a-z0-9_]*`` or that is a keyword of a surface, an output key
that is no score name or that the package already uses, and an argument of the wrong type.

* **Names.** The keywords of the surfaces are read from their signatures (:func:`surface_keywords`):
  :func:`~lightning_prd.functional.generative_metrics`, :class:`~lightning_prd.GenerativeMetrics`, its
  :class:`~lightning_prd.metrics.base.FeatureMetric` base and torchmetrics' ``Metric`` (whose keywords, such as
  ``compute_on_cpu``, are read from its constructor's source), and the callback's constructor; the package's
  surfaces are read from their source (:data:`SURFACES`), so registering imports neither them nor Lightning.
* **Score names** (:func:`check_score_name`), the rule class names follow: a non-empty string equal to its own
  Unicode NFKC form, with no surrounding, inner or control characters of white space, and no ``/`` (loggers read
  it as a folder).
* **Types** (:func:`check_types`): each argument of ``register_family`` of the type its docstring states.
* **Keys already used** (:func:`used_keys`): every registered family's outputs and other keys (per-sample
  tensors, curves, spreads), the keys the package forms from a score (``<score>_std``, ``<score>_per_class``,
  ``<score>_mean``), the keys of the options that are no family (:data:`OPTION_KEYS`) and the callback's record
  (:data:`RECORD_KEYS`). A key ending in ``_per_class`` is read as a per-class score, so it is refused too.

Example:
    >>> check_score_name("mean_gap", "outputs")
    'mean_gap'
    >>> try:
    ...     check_score_name("mean gap", "outputs")
    ... except ValueError as err:
    ...     print(err)
    Expected argument `outputs` of register_family to hold score names (NFKC, no white space, control characters \
or '/', non-empty), but got 'mean gap'
    >>> "compute_on_cpu" in surface_keywords(), "epoch" in RECORD_KEYS
    (True, True)
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import unicodedata
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Set

from lightning_prd.functional.engine.family import CliSpec

#: the keys of the callback's record of one evaluation beside its scores (``history`` and the logged scalars)
RECORD_KEYS = ("epoch", "final")

#: the keys of the results that options which are no family add, by option
OPTION_KEYS: Dict[str, tuple] = {
    "per_class": ("classes", "num_real_per_class", "num_fake_per_class", "coverage_min", "lowest_coverage_class"),
    "closest_pairs": ("closest_fake_index", "closest_real_index", "closest_distance", "closest_ratio"),
}

#: the suffixes of the keys the package forms from a score key (error bars, per-class scores and their mean)
DERIVED_SUFFIXES = ("_std", "_per_class", "_mean")

#: keywords a torchmetrics ``Metric`` takes itself (``GenerativeMetrics`` passes them on), as torchmetrics 1.x
#: documents them; registration reads them from ``Metric.__init__`` itself where its source can be read
METRIC_KEYWORDS = frozenset(
    (
        "compute_on_cpu", "dist_sync_on_step", "process_group", "dist_sync_fn", "distributed_available_fn",
        "sync_on_compute", "compute_with_cache",
    )
)  # fmt: skip

_surface_keywords: Set[str] = set()


def _metric_keywords() -> Set[str]:
    """The keywords torchmetrics' ``Metric.__init__`` reads from its ``**kwargs`` (``kwargs.pop("name", ...)``
    in its source)."""
    from torchmetrics import Metric

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(Metric.__init__)))
    except (OSError, TypeError):  # no source (a frozen install): the keywords torchmetrics 1.x documents
        return set(METRIC_KEYWORDS)
    out = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("pop", "get")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "kwargs"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.add(node.args[0].value)
    return out


#: the surfaces a family switch joins, as (file under the package, function or ``Class.method``)
SURFACES = (
    ("functional/generative.py", "generative_metrics"),
    ("metrics/generative.py", "GenerativeMetrics.__init__"),
    ("metrics/base.py", "FeatureMetric.__init__"),
    ("callback/core.py", "PRDCallbackCore.__init__"),
)


def _parameters(path: Path, qualname: str) -> Set[str]:
    """The named parameters (not ``self``, ``*args`` or ``**kwargs``) of ``qualname`` as written in ``path``:
    read from the source, so neither the surface nor Lightning is imported."""
    body: List[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    node: Any = None
    for part in qualname.split("."):
        node = next(
            n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == part
        )
        body = node.body
    args = node.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {"self"}


def surface_keywords() -> Set[str]:
    """The keywords of every surface a family switch joins (:data:`SURFACES`: the function, the Metric and its
    base, the callback), read from their signatures in the package's source, and torchmetrics' ``Metric``
    keywords (once)."""
    if not _surface_keywords:
        root = Path(__file__).resolve().parents[2]
        for path, qualname in SURFACES:
            _surface_keywords.update(_parameters(root / path, qualname))
        _surface_keywords.update(_metric_keywords())
    return _surface_keywords


def check_score_name(key: Any, argument: str) -> str:
    """``key`` when it is a score name (module docstring); ``ValueError`` naming ``argument`` otherwise."""
    if (
        not isinstance(key, str)
        or not key
        or unicodedata.normalize("NFKC", key) != key
        or any(ch.isspace() or unicodedata.category(ch).startswith("C") for ch in key)
        or "/" in key
    ):
        raise ValueError(
            f"Expected argument `{argument}` of register_family to hold score names (NFKC, no white space, control "
            f"characters or '/', non-empty), but got {key!r}"
        )
    return key


def used_keys(registered: Iterable[Any], name: str) -> Dict[str, str]:
    """Every key the package already uses -> who uses it (a family, an option or the callback's record), the
    family ``name`` itself left out (it may be replaced)."""
    out: Dict[str, str] = {}
    for option, keys in OPTION_KEYS.items():
        out.update({key: f"option `{option}`" for key in keys})
    out.update({key: "the callback's record" for key in RECORD_KEYS})
    for family in registered:
        if family.name == name:
            continue
        owner = f"family {family.name!r}"
        for key in family.outputs:
            out.update({key + suffix: owner for suffix in DERIVED_SUFFIXES})
            out[key] = owner
        out.update({key: owner for key in (*family.per_sample, *family.other_keys)})
    return out


def check_output_keys(keys: Iterable[str], argument: str, taken: Mapping[str, str]) -> None:
    """``ValueError`` naming ``argument`` for a key in ``taken`` (:func:`used_keys`) or ending in ``_per_class``."""
    for key in keys:
        if key in taken:
            raise ValueError(
                f"Expected argument `{argument}` of register_family to name new scores, but {key!r} is a key of "
                f"{taken[key]}"
            )
        if key.endswith("_per_class"):
            raise ValueError(
                f"Expected argument `{argument}` of register_family to name new scores, but {key!r} ends in "
                f"'_per_class', the suffix of per-class scores"
            )


def check_type(argument: str, value: Any, ok: bool, expected: str) -> None:
    """``ValueError`` "Expected argument `argument` of register_family to be ``expected``, but got ..."
    unless ``ok``."""
    if not ok:
        raise ValueError(f"Expected argument `{argument}` of register_family to be {expected}, but got {value!r}")


def check_types(**arguments: Any) -> None:
    """The type of each argument of :func:`register_family` (``name`` and ``outputs`` aside), a ``ValueError``
    naming the first wrong one."""
    is_bool = ("per_class", "replace", "needs_test", "statistics", "switchable")
    callables = ("check", "pass_asks", "from_pass", "min_real", "min_fake", "fit", "link", "ask", "read", "shrink")
    for argument in is_bool:
        value = arguments[argument]
        check_type(argument, value, isinstance(value, bool), "a bool")
    for argument in callables:
        value = arguments[argument]
        check_type(argument, value, value is None or callable(value), "a callable or None")
    compute = arguments["compute"]
    check_type("compute", compute, compute is None or callable(compute), "a callable (real, fake, **options)")
    defaults = arguments["defaults"]
    check_type(
        "defaults",
        defaults,
        defaults is None
        or (isinstance(defaults, Mapping) and all(isinstance(k, str) and k.isidentifier() for k in defaults)),
        "a dict {option: default} with keyword (identifier) names",
    )
    check_type("meaning", arguments["meaning"], isinstance(arguments["meaning"], str), "a string")
    cli, order, empty = arguments["cli"], arguments["order"], arguments["empty_class"]
    check_type("cli", cli, cli is None or isinstance(cli, CliSpec), "a CliSpec or None")
    check_type(
        "order", order, order is None or (isinstance(order, (int, float)) and not isinstance(order, bool)), "a number"
    )
    check_type(
        "empty_class",
        empty,
        empty is None or (isinstance(empty, Mapping) and set(empty) <= {"no_fake", "no_real"}),
        "a dict with keys 'no_fake' / 'no_real' or None",
    )
    docs = arguments["docs"]
    check_type("docs", docs, docs is None or isinstance(docs, str), "a string or None")
    for argument in ("per_sample", "other_keys"):
        keys = arguments[argument]
        check_type(
            argument,
            keys,
            isinstance(keys, (list, tuple)) and all(isinstance(k, str) for k in keys),
            "a list or tuple of keys (strings)",
        )
