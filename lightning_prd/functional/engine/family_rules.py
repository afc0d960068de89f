"""What :func:`~lightning_prd.functional.engine.families.register_family` refuses, each in one line naming the
argument: a name that is no full match of ``[a-z][a-z0-9_]*`` or that is a keyword of a surface, an output key
that is no score name or that the package already uses, and an argument of the wrong type.

* **Names.** The keywords of the surfaces are read from their signatures (:func:`surface_keywords`):
  :func:`~lightning_prd.functional.generative_metrics`, :class:`~lightning_prd.GenerativeMetrics`, its
  :class:`~lightning_prd.metrics.base.FeatureMetric` base and torchmetrics' ``Metric`` (whose keywords, such as
  ``compute_on_cpu``, are read from its constructor's source), and the callback's constructor.
* **Score names** (:func:`check_score_name`), the rule class names follow: a non-empty string equal to its own
  Unicode NFKC form, with no surrounding, inner or control characters of white space, and no ``/`` (loggers read
  it as a folder).
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
from typing import Any, Dict, Iterable, Mapping, Set

#: the keys of the callback's record of one evaluation beside its scores (``history`` and the logged scalars)
RECORD_KEYS = ("epoch", "final")

#: the keys of the results that options which are no family add, by option
OPTION_KEYS: Dict[str, tuple] = {
    "per_class": ("classes", "num_real_per_class", "num_fake_per_class", "coverage_min", "lowest_coverage_class"),
    "per_sample": ("inside_precision", "covered"),
    "closest_pairs": ("closest_fake_index", "closest_real_index", "closest_distance", "closest_ratio"),
}

#: the suffixes of the keys the package forms from a score key (error bars, per-class scores and their mean)
DERIVED_SUFFIXES = ("_std", "_per_class", "_mean")

_surface_keywords: Set[str] = set()


def _metric_keywords() -> Set[str]:
    """The keywords torchmetrics' ``Metric.__init__`` reads from its ``**kwargs`` (``kwargs.pop("name", ...)``
    in its source)."""
    from torchmetrics import Metric

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(Metric.__init__)))
    except (OSError, TypeError):  # no source (a frozen install): the keywords the package passes on
        from lightning_prd.functional.engine.families import METRIC_KEYWORDS

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


def _parameters(fn: Any) -> Set[str]:
    """The named parameters of ``fn`` (not ``self``, ``*args`` or ``**kwargs``)."""
    params = inspect.signature(fn).parameters.values()
    return {p.name for p in params if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def surface_keywords() -> Set[str]:
    """The keywords of every surface a family switch joins, read from their signatures (once): the function,
    the Metric with its bases (torchmetrics' included) and the callback (its Lightning-free core, so Lightning
    is not imported)."""
    if not _surface_keywords:
        from lightning_prd.callback.core import PRDCallbackCore
        from lightning_prd.functional.generative import generative_metrics
        from lightning_prd.metrics.base import FeatureMetric
        from lightning_prd.metrics.generative import GenerativeMetrics

        for fn in (generative_metrics, GenerativeMetrics.__init__, FeatureMetric.__init__, PRDCallbackCore.__init__):
            _surface_keywords.update(_parameters(fn))
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
