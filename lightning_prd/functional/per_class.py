r"""Scores per class of a conditional model: :func:`per_class_metrics`, :func:`per_class_scalars`.

A class-conditional generator can score well overall while it fails on a few classes: it may
drop a class (mode dropping across labels) or draw it badly. Scoring each class on its own
rows, the real samples of class ``c`` against the generated samples labelled ``c``, shows
which. For every class ``c`` with real rows :math:`X_c` and generated rows :math:`Y_c`:

.. math::
    s_c = s(X_c, Y_c), \qquad \bar s = \frac{1}{|C_s|} \sum_{c \in C_s} s_c,

for each score ``s`` of :func:`.generative_metrics` among precision, recall (Kynkäänniemi et al.
2019), density, coverage (Naeem et al. 2020) and the Fréchet distance (Heusel et al. 2017),
where :math:`C_s` are the classes on which ``s`` is defined (its mean ignores the rest). The class
with the lowest coverage is named: the class the model covers worst, usually a dropped one.

Rules where a class is small or missing from one set (``n_r`` real rows, ``n_f`` generated rows):

- precision and recall need ``k_precision_recall + 1`` rows of the class in both sets;
- density and coverage need ``k_density_coverage + 1`` real rows and one generated row;
- the Fréchet distance needs 2 rows in each set (a covariance);

and are NaN otherwise, except where one set has no row of the class at all:

- **No generated sample of the class** (``n_f = 0 < n_r``): recall and coverage are 0 (no real
  sample can be inside a generated ball or have one in its own), precision and density NaN
  (they average over the generated samples, of which there are none).
- **No real sample of the class** (``n_r = 0 < n_f``): precision and density are 0 (no generated
  sample is inside a real ball of the class), recall and coverage NaN.
- A class named in ``classes`` but in neither set: every score NaN.

Labels are integer tensors (or arrays, or lists of ints), one per row; map other labels (strings)
to integers first and pass the names to :func:`per_class_scalars` for display.

Example:
    A conditional toy with three classes, one of which (label 2) the model never draws:

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> centres = torch.tensor([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    >>> real_labels = torch.arange(3).repeat_interleave(40)
    >>> real = centres[real_labels] + torch.randn(120, 2, generator=g)
    >>> fake_labels = torch.tensor([0, 1]).repeat_interleave(60)
    >>> fake = centres[fake_labels] + torch.randn(120, 2, generator=g)
    >>> out = per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels)
    >>> out["classes"], out["coverage_per_class"][2], int(out["lowest_coverage_class"])
    (tensor([0, 1, 2]), tensor(0., dtype=torch.float64), 2)
    >>> out["precision_per_class"][2]  # no generated sample of class 2
    tensor(nan, dtype=torch.float64)
    >>> scalars = per_class_scalars(out, names={0: "a", 1: "b", 2: "c"})
    >>> scalars["coverage/c"], scalars["lowest_coverage_class"]
    (0.0, 2)
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.families import family_of_keyword, get_family, registered_options, switch_families
from lightning_prd.functional.engine.inputs import (
    check_ball,
    check_block_bytes,
    distinct_class_keys,
)
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.vocabulary import check_renamed
from lightning_prd.functional.generative import generative_metrics

__all__ = ["distinct_class_keys", "per_class_metrics", "per_class_scalars"]

#: the per-class entries that count rows, not scores
_COUNTS = ("num_real_per_class", "num_fake_per_class")


def _labels(value: Any, name: str, rows: int, features: str) -> Tensor:
    """``value`` as a 1-D int64 CPU tensor with one label per row of ``features``."""
    if isinstance(value, Tensor):
        t = value.detach()
    else:
        try:
            t = torch.as_tensor(np.asarray(value))
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"Expected argument `{name}` to be a 1-D tensor of integer class labels, but got "
                f"{type(value).__name__} that torch cannot hold; map the labels to integers first"
            ) from err
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise TypeError(
            f"Expected argument `{name}` to hold integer class labels, but got dtype {t.dtype}; "
            "cast it with `.long()` if these are class indices, or map the labels to integers first"
        )
    if t.ndim != 1 or t.shape[0] != rows:
        raise ValueError(
            f"Expected argument `{name}` to be 1-D with one label per row of `{features}` ({rows}), "
            f"but got shape {tuple(t.shape)}"
        )
    return t.cpu().to(torch.int64)


def _classes(classes: Any, seen: Tensor) -> Tensor:
    """The reported classes: ``classes`` (checked: distinct ints that hold every label) or the labels seen."""
    if classes is None:
        return torch.unique(seen)  # sorted
    if isinstance(classes, Tensor):
        classes = classes.tolist()
    ok = isinstance(classes, Sequence) and not isinstance(classes, (str, bytes)) and len(classes) > 0
    ok = ok and all(isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) for c in classes)
    if not ok or len(set(int(c) for c in classes)) != len(classes):
        raise ValueError(
            f"Expected argument `classes` to be a non-empty sequence of distinct integers, but got {classes!r}"
        )
    out = torch.tensor([int(c) for c in classes], dtype=torch.int64)
    missing = sorted(set(torch.unique(seen).tolist()) - set(out.tolist()))
    if missing:
        raise ValueError(
            f"Expected argument `classes` to hold every label of `real_labels` and `fake_labels`, "
            f"but {missing[:10]} {'are' if len(missing) > 1 else 'is'} missing from {classes!r}"
        )
    return out


@score_precision()
def per_class_metrics(
    real: Any,
    fake: Any,
    *,
    real_labels: Any,
    fake_labels: Any,
    k_precision_recall: Optional[int] = 3,
    k_density_coverage: Optional[int] = 5,
    frechet: bool = True,
    ball: str = "closed",
    classes: Optional[Sequence[int]] = None,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    families: Optional[Mapping[str, Any]] = None,
    **unknown: Any,
) -> Dict[str, Tensor]:
    r"""Precision, recall, density, coverage and Fréchet distance per class, their means, the worst-covered class.

    Class ``c``'s scores are those of :func:`.generative_metrics` on the rows labelled ``c``:
    :math:`s_c = s(\{x_i : a_i = c\}, \{y_j : b_j = c\})` with the same ``k_precision_recall``,
    ``k_density_coverage`` and ``ball``, and ``s_mean`` is their mean over the classes where ``s`` is
    defined (NaN when it is defined on none). Classes too small for a score, or absent from one set, follow the
    module's rules: a class with no generated sample has recall and coverage 0 and precision and
    density NaN; one with no real sample has precision and density 0 and recall and coverage NaN;
    precision/recall need ``k_precision_recall + 1`` rows in both sets, density/coverage
    ``k_density_coverage + 1`` real rows and one generated row, the Fréchet distance 2 rows in each (NaN otherwise).

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        real_labels: ``[N]`` integer class label of each real row.
        fake_labels: ``[M]`` integer class label of each generated row (the class it was
            conditioned on).
        k_precision_recall: k of precision and recall (3, as the paper); None skips them.
        k_density_coverage: k of density and coverage (5, as the paper); None skips them (and the lowest
            coverage class).
        frechet: compute the Fréchet distance per class (one ``D x D`` eigendecomposition per
            class; switch it off for many classes of wide features).
        ball: ``"closed"`` (``d <= r``) or ``"open"`` (``d < r``, as ``prdc``) balls.
        classes: the classes to report, in this order (e.g. ``range(num_classes)``, so that the
            output has the same entries at every evaluation); every label must be in it. None:
            the labels present in either set, sorted.
        dtype: GEMM dtype of the k-NN passes, as in :func:`.generative_metrics`.
        block_bytes: memory budget of one distance tile, as in :func:`.generative_metrics`.
        families: switches of registered families with per-class scores (``{"rarity": True}``, a user
            family registered with ``per_class=True``), as in :func:`.generative_metrics`; each scalar output
            ``<key>`` gets ``<key>_per_class`` and ``<key>_mean``, NaN for a class too small for it.

    Returns:
        dict of tensors, on the features' device:

        - ``classes``: ``[C]`` int64, the class labels; every ``*_per_class`` entry follows this order;
        - ``<score>_per_class``: ``[C]`` float64 for each computed score of
          per-class family switched on (``precision``, ``recall`` with ``k_precision_recall``; ``density``,
          ``coverage`` with ``k_density_coverage``; ``frechet_distance`` with ``frechet``; the outputs of
          ``families``), in table order;
        - ``<score>_mean``: 0-dim float64, the mean over the classes where the score is defined;
        - ``num_real_per_class``, ``num_fake_per_class``: ``[C]`` int64 row counts;
        - with ``k_density_coverage``: ``coverage_min`` (0-dim float64, the lowest coverage; NaN when no class
          has one) and, when some class has a coverage, ``lowest_coverage_class`` (0-dim int64,
          the label; among equal lowest coverages, the first in ``classes`` order).

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(1)
        >>> real, fake = torch.randn(60, 3, generator=g), torch.randn(50, 3, generator=g)
        >>> real_labels = torch.arange(60) % 2
        >>> fake_labels = torch.zeros(50, dtype=torch.long)  # the model only draws class 0
        >>> out = per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels, frechet=False)
        >>> out["recall_per_class"][1], out["coverage_per_class"][1], int(out["lowest_coverage_class"])
        (tensor(0., dtype=torch.float64), tensor(0., dtype=torch.float64), 1)
        >>> want = generative_metrics(real[real_labels == 0], fake, frechet=False)["coverage"]
        >>> bool(out["coverage_per_class"][0] == want)
        True
    """
    check_renamed(unknown)
    if unknown:
        raise TypeError(f"per_class_metrics() got unexpected keyword arguments {sorted(unknown)}")
    sets = FeatureSets.check(real, fake)
    given = {name: value for name, value in locals().items() if family_of_keyword(name) is not None}
    switched = registered_options({**given, **(families or {})})
    for name in switched:
        if not get_family(name).per_class:
            raise ValueError(f"Expected families with per-class scores in `families`, but {name!r} has none")
    if not switched:
        raise ValueError(
            "Expected at least one score to compute, but `k_precision_recall` and `k_density_coverage` are None "
            "and `frechet=False`"
        )
    ball = check_ball(ball)
    block_bytes = check_block_bytes(block_bytes)
    sets.compute_dtype(dtype)  # a bad `dtype` raises here, even when every class is too small for k-NN scores
    rl = _labels(real_labels, "real_labels", sets.num_real, "real")
    fl = _labels(fake_labels, "fake_labels", sets.num_fake, "fake")
    labels = _classes(classes, torch.cat([rl, fl]))
    on = [(get_family(name), options) for name, options in switched.items()]
    names = [key for family, _ in on for key in family.per_class_keys]
    # every family off but the per-class ones that fit a class
    off = {
        f.keyword: f.switch_off
        for f in switch_families()
        if f.keyword in inspect.signature(generative_metrics).parameters
    }
    rows: Dict[str, List[float]] = {n: [] for n in names}
    device = sets.real.device
    rl_dev, fl_dev = rl.to(device), fl.to(device)
    num_real, num_fake = [], []
    for c in labels.tolist():
        n_r, n_f = int((rl == c).sum()), int((fl == c).sum())
        num_real.append(n_r)
        num_fake.append(n_f)
        row = {n: math.nan for n in names}
        for family, _ in on:
            if n_f == 0 and n_r > 0:  # dropped class: nothing generated covers or recalls it
                row.update(family.empty_class.get("no_fake", {}))
            if n_r == 0 and n_f > 0:  # class the data lack: no generated sample lies in its (empty) support
                row.update(family.empty_class.get("no_real", {}))
        fits = {f.keyword: f.switch(options) for f, options in on if _fits(f, options, n_r, n_f)}
        if fits:
            out = generative_metrics(
                sets.real[rl_dev == c],
                sets.fake[fl_dev == c],
                ball=ball,
                dtype=dtype,
                block_bytes=block_bytes,
                **{**off, **fits},
            )
            row.update({n: float(v) for n, v in out.items() if n in row})
        for n in names:
            rows[n].append(row[n])
    result: Dict[str, Tensor] = {"classes": labels.to(device)}
    for n in names:
        values = torch.tensor(rows[n], dtype=torch.float64)
        result[f"{n}_per_class"] = values.to(device)
        result[f"{n}_mean"] = torch.nanmean(values).to(device) if len(values) else torch.tensor(math.nan)
    result["num_real_per_class"] = torch.tensor(num_real, dtype=torch.int64, device=device)
    result["num_fake_per_class"] = torch.tensor(num_fake, dtype=torch.int64, device=device)
    if "coverage" in rows:  # the class the model covers worst
        coverage = torch.tensor(rows["coverage"], dtype=torch.float64)
        defined = ~torch.isnan(coverage)
        if bool(defined.any()):
            lowest = float(coverage[defined].min())
            first = int(torch.nonzero(coverage == lowest)[0])
            result["coverage_min"] = torch.tensor(lowest, dtype=torch.float64, device=device)
            result["lowest_coverage_class"] = labels[first].to(device)
        else:
            result["coverage_min"] = torch.tensor(math.nan, dtype=torch.float64, device=device)
    return result


def _fits(family: Any, options: Dict[str, Any], n_r: int, n_f: int) -> bool:
    """Whether a class of ``n_r`` real and ``n_f`` generated rows (at least one of each) is large enough for
    the family."""
    need_real, need_fake = family.fewest(options)
    return n_r >= max(1, need_real) and n_f >= max(1, need_fake)


@score_precision()
def per_class_scalars(
    result: Mapping[str, Tensor], *, names: Optional[Mapping[int, str]] = None, sep: str = "/"
) -> Dict[str, Union[float, int]]:
    """The output of :func:`per_class_metrics` as flat scalars, ready for ``log_dict`` or JSON.

    Keys: ``<score><sep><label>`` for each class (``precision/3``, or ``precision/cat`` with
    ``names={3: "cat"}``), ``<score>_mean``, ``coverage_min`` and ``lowest_coverage_class`` (the
    label, an int) where present. Values are Python floats (NaN where a score is undefined).

    Args:
        result: the dict returned by :func:`per_class_metrics`.
        names: display name of each label (e.g. for labels that were strings); labels without
            a name are shown as integers. Every class keeps its own key: a name that is another class's
            number, or two names that read the same, raise ``ValueError``
            (:func:`~lightning_prd.functional.engine.inputs.distinct_class_keys`).
        sep: separator between the score and the class in the keys.

    Returns:
        dict of scalar names to floats (and ``lowest_coverage_class`` to an int).

    Example:
        >>> import torch
        >>> res = {"classes": torch.tensor([0, 7]), "coverage_per_class": torch.tensor([0.75, 0.0]),
        ...        "coverage_mean": torch.tensor(0.375), "lowest_coverage_class": torch.tensor(7)}
        >>> per_class_scalars(res, names={7: "dog"})
        {'coverage/0': 0.75, 'coverage/dog': 0.0, 'coverage_mean': 0.375, 'lowest_coverage_class': 7}
    """
    if not isinstance(result, Mapping) or "classes" not in result:
        raise ValueError(
            "Expected argument `result` to be the dict returned by `per_class_metrics` (with a `classes` entry), "
            f"but got {type(result).__name__}"
        )
    if names is not None and not isinstance(names, Mapping):
        raise ValueError(f"Expected argument `names` to map labels to display names, but got {names!r}")
    if names is not None:
        distinct_class_keys(names, "names")
    labels = [int(c) for c in result["classes"].tolist()]
    shown = [str(names.get(c, c)) if names is not None else str(c) for c in labels]
    out: Dict[str, Union[float, int]] = {}
    scores = [key[: -len("_per_class")] for key in result if key.endswith("_per_class") and key not in _COUNTS]
    for score in scores:
        out.update({f"{score}{sep}{name}": float(v) for name, v in zip(shown, result[f"{score}_per_class"].tolist())})
    for score in scores:
        if f"{score}_mean" in result:
            out[f"{score}_mean"] = float(result[f"{score}_mean"])
    if "coverage_min" in result:
        out["coverage_min"] = float(result["coverage_min"])
    if "lowest_coverage_class" in result:
        out["lowest_coverage_class"] = int(result["lowest_coverage_class"])
    return out
