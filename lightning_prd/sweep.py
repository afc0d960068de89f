"""Scores of a generator across a knob: truncation ψ, latent scale, guidance weight, temperature.

Such knobs trade fidelity for diversity: shrinking the latents usually raises precision
and lowers recall (Kynkäänniemi et al. 2019, Fig. 6; Brock et al. 2019). :func:`sweep_knob`
evaluates ``generate(value, n)`` for each value against one real set, whose features and
k-NN radii are computed once (``GenerativeMetrics(reset_real_features=False)``), and
:func:`plot_sweep` draws the resulting precision–recall path.

The result carries the Pareto front of the sweep (by default over recall and precision, both
higher is better): the knob values that no other value beats on both scores at once
(:func:`~lightning_prd.functional.engine.pareto.pareto_front`; a value tied with another on one
score and worse on the other is off the front, exact duplicates are all on it).
:func:`plot_sweep` marks it.

Every value sees the same random numbers: the CPU and CUDA RNGs are seeded with ``seed``
before each ``generate`` call (and restored afterwards), so differences between values come
from the knob, not from sampling noise.

Example:
    >>> import torch
    >>> from lightning_prd.sweep import sweep_knob
    >>> real = torch.randn(200, 2, generator=torch.Generator().manual_seed(1234))
    >>> result = sweep_knob(lambda scale, n: scale * torch.randn(n, 2), real, [0.3, 2.0], num_samples=200)
    >>> result.values, result["precision"][0] > result["precision"][1], result["recall"][0] < result["recall"][1]
    ([0.3, 2.0], True, True)
    >>> result.front, result.front_axes  # neither value beats the other on both recall and precision
    ([0, 1], ('recall', 'precision'))
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.features.base import Identity, extract_features
from lightning_prd.functional.engine.inputs import check_positive_int, check_seed
from lightning_prd.functional.engine.pareto import check_maximize, pareto_front

#: the two scores of the default Pareto front, ``(x, y)`` as :func:`plot_sweep` draws them
FRONT_AXES: Tuple[str, str] = ("recall", "precision")


@dataclass
class SweepResult:
    """Scores per knob value: ``scores[name][i]`` belongs to ``values[i]``.

    Attributes:
        values: the knob values, in the order given.
        scores: score name -> one float per value (every scalar of the metric's ``compute()``).
        num_samples: generated samples per value.
        num_real: real samples.
        seed: the seed of each ``generate`` call.
        front: indices into ``values`` of the Pareto front over ``front_axes``, ordered by
            increasing first score (see :meth:`pareto_front`); None when the sweep lacks one of
            the two scores.
        front_axes: the two score names of ``front``, ``(x, y)``.
        front_maximize: per score of ``front_axes``, True when higher is better.
    """

    values: List[Any]
    scores: Dict[str, List[float]] = field(default_factory=dict)
    num_samples: int = 0
    num_real: int = 0
    seed: int = 0
    front: Optional[List[int]] = None
    front_axes: Tuple[str, str] = FRONT_AXES
    front_maximize: Tuple[bool, bool] = (True, True)

    def __getitem__(self, name: str) -> List[float]:
        """``result["precision"]``: the scores of one metric across the knob values."""
        if name not in self.scores:
            raise KeyError(f"No score named {name!r}; available: {sorted(self.scores)}")
        return self.scores[name]

    def pareto_front(
        self, x: str = FRONT_AXES[0], y: str = FRONT_AXES[1], *, maximize: Sequence[bool] = (True, True)
    ) -> List[int]:
        """Indices into ``values`` of the Pareto front of scores ``x`` and ``y``, by increasing ``x``.

        A value is on the front when no other value is at least as good on both scores and better
        on one (each score oriented by ``maximize``: True when higher is better, e.g.
        ``maximize=(True, False)`` for recall against the Fréchet distance). Exact duplicates
        are all kept; NaN scores are off the front.

        Example:
            >>> scores = {"precision": [0.9, 0.6, 0.7], "recall": [0.3, 0.5, 0.6]}
            >>> res = SweepResult(values=[0.5, 0.7, 1.0], scores=scores)
            >>> res.pareto_front()  # ψ=0.7 is beaten by ψ=1.0 on both scores
            [0, 2]
            >>> [res.values[i] for i in res.pareto_front("recall", "precision")]
            [0.5, 1.0]
        """
        return [int(i) for i in pareto_front(self[x], self[y], maximize=maximize)]

    def rows(self) -> List[Dict[str, Any]]:
        """One dict per knob value: ``{"value": v, "precision": ..., ...}`` (e.g. for a DataFrame)."""
        return [{"value": v, **{k: s[i] for k, s in self.scores.items()}} for i, v in enumerate(self.values)]

    def as_dict(self) -> Dict[str, Any]:
        """Plain, JSON-serialisable form (given JSON-serialisable knob values)."""
        return {
            "values": list(self.values),
            "scores": {k: list(v) for k, v in self.scores.items()},
            "num_samples": self.num_samples,
            "num_real": self.num_real,
            "seed": self.seed,
            "front": None if self.front is None else list(self.front),
            "front_axes": list(self.front_axes),
            "front_maximize": list(self.front_maximize),
        }


@contextlib.contextmanager
def _seeded_rng(seed: int) -> Iterator[None]:
    devices = (
        list(range(torch.cuda.device_count())) if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    )
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def _scalars(result: Mapping[str, Any]) -> Dict[str, float]:
    out = {}
    for name, value in result.items():
        if isinstance(value, Tensor) and value.numel() == 1:
            out[name] = float(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def sweep_knob(
    generate: Callable[[Any, int], Any],
    real: Union[Tensor, Any],
    values: Sequence[Any],
    *,
    num_samples: int,
    feature_extractor: Optional[Callable[[Any], Tensor]] = None,
    metric_factory: Optional[Callable[[], Any]] = None,
    seed: int = 0,
    batch_size: int = 256,
    front: Sequence[str] = FRONT_AXES,
    maximize: Sequence[bool] = (True, True),
) -> SweepResult:
    """Evaluate ``generate(value, num_samples)`` for each knob value against ``real``.

    Args:
        generate: ``generate(value, n)`` returns ``n`` generated samples (tensor or array)
            for one knob value.
        real: real samples (tensor/array) or a DataLoader of them.
        values: knob values, evaluated in this order (e.g. ``[0.5, 0.7, 1.0]``).
        num_samples: generated samples per value.
        feature_extractor: module/callable applied to real and generated samples, in
            batches under ``no_grad`` (see :func:`~lightning_prd.features.extract_features`);
            None uses them as features.
        metric_factory: returns the Metric to use, fed with features through
            ``update(features, real=...)``; its ``compute()`` scalars become the scores.
            Default: ``GenerativeMetrics(reset_real_features=False)`` (precision, recall,
            density, coverage, Fréchet distance), whose real-side radii are reused across values.
        seed: the RNGs are seeded with it before every ``generate`` call.
        batch_size: rows per extractor batch.
        front: the two scores ``(x, y)`` of the Pareto front kept in the result (recall and
            precision by default; e.g. ``("coverage", "frechet_distance")``). When the metric
            does not return the default pair, the result's ``front`` is None; a pair given
            otherwise must be among the scores.
        maximize: per score of ``front``, True when higher is better (``(True, False)`` for a
            score against the Fréchet distance or KID).

    Returns:
        :class:`SweepResult` with ``values``, ``scores[name]`` lists and the ``front``.
    """
    if not callable(generate):
        raise TypeError(
            f"Expected argument `generate` to be callable as generate(value, n), but got {type(generate).__name__}"
        )
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"Expected argument `values` to be a non-empty sequence of knob values, but got {values!r}")
    num_samples = check_positive_int(num_samples, "num_samples")
    seed = check_seed(seed)
    if isinstance(front, (str, bytes)) or not isinstance(front, Sequence) or len(front) != 2:
        raise ValueError(f"Expected argument `front` to be a pair of score names (x, y), but got {front!r}")
    if not all(isinstance(name, str) for name in front):
        raise ValueError(f"Expected argument `front` to be a pair of score names (x, y), but got {front!r}")
    front_axes = (front[0], front[1])
    front_maximize = check_maximize(maximize)
    if feature_extractor is not None and not callable(feature_extractor):
        raise TypeError(
            f"Expected argument `feature_extractor` to be callable, but got {type(feature_extractor).__name__}"
        )
    extractor = feature_extractor if feature_extractor is not None else Identity()
    if metric_factory is None:
        from lightning_prd.metrics import GenerativeMetrics

        metric = GenerativeMetrics(reset_real_features=False)
    elif not callable(metric_factory):
        raise TypeError(f"Expected argument `metric_factory` to be callable, but got {type(metric_factory).__name__}")
    else:
        metric = metric_factory()

    real_features = extract_features(extractor, real, batch_size=batch_size, desc="real")
    metric.update(real_features, real=True)
    scores: Dict[str, List[float]] = {}
    for i, value in enumerate(values):
        with _seeded_rng(seed):
            samples = generate(value, num_samples)
        if not isinstance(samples, Tensor):
            samples = torch.as_tensor(samples)
        if samples.ndim == 0 or samples.shape[0] != num_samples:
            raise ValueError(
                f"Expected `generate({value!r}, {num_samples})` to return {num_samples} samples, "
                f"but got shape {tuple(samples.shape)}"
            )
        fake_features = extract_features(extractor, samples, batch_size=batch_size, desc=f"value {value!r}")
        metric.update(fake_features, real=False)
        result = _scalars(metric.compute())
        metric.reset()
        if getattr(metric, "reset_real_features", True):  # this metric forgot the real set: add it again
            metric.update(real_features, real=True)
        if i == 0 and front_axes != FRONT_AXES:  # a front asked for by name: fail before the other values
            _check_front(front_axes, result)
        for name, score in result.items():
            scores.setdefault(name, [float("nan")] * i).append(score)
        for name in scores.keys() - result.keys():
            scores[name].append(float("nan"))
    result_ = SweepResult(
        values=list(values),
        scores=scores,
        num_samples=num_samples,
        num_real=int(real_features.shape[0]),
        seed=seed,
        front_axes=front_axes,
        front_maximize=front_maximize,
    )
    if all(name in scores for name in front_axes):
        result_.front = result_.pareto_front(*front_axes, maximize=front_maximize)
    return result_


def _check_front(front_axes: Tuple[str, str], scores: Mapping[str, Any]) -> None:
    missing = [name for name in front_axes if name not in scores]
    if missing:
        raise ValueError(
            f"Expected argument `front` to name two of the sweep's scores, but {missing} "
            f"{'is' if len(missing) == 1 else 'are'} not among {sorted(scores)}"
        )


def plot_sweep(
    result: Union[SweepResult, Mapping[str, Any]],
    ax: Optional[Any] = None,
    *,
    x: str = "recall",
    y: str = "precision",
    label: Optional[str] = None,
    knob: str = "",
    front: bool = True,
    maximize: Optional[Sequence[bool]] = None,
) -> Any:
    """The trade-off path over the knob: ``y`` (precision) against ``x`` (recall), points labelled with the value.

    The Pareto front of ``x`` and ``y`` (see :meth:`SweepResult.pareto_front`) is marked: a
    thick translucent line through the front's points, in the path's colour, with a ring on each,
    labelled "Pareto front" in the legend (``"<label>: Pareto front"`` with ``label``).

    Args:
        result: a :class:`SweepResult` or its :meth:`~SweepResult.as_dict`.
        ax: matplotlib axes to draw into; None makes a new figure (object-oriented API, no pyplot).
        x, y: score names for the axes (``"coverage"``/``"density"`` work too).
        label: legend label of the path (to overlay several generators on one ``ax``).
        knob: the knob's name, prefixed to the point labels (e.g. ``"ψ="``).
        front: mark the Pareto front.
        maximize: per axis ``(x, y)``, True when higher is better; None uses the result's
            ``front_maximize`` when its ``front_axes`` are ``(x, y)``, else ``(True, True)``.

    Returns:
        the matplotlib Figure.

    Example:
        >>> from lightning_prd.sweep import SweepResult, plot_sweep
        >>> res = SweepResult(values=[0.5, 1.0], scores={"precision": [0.9, 0.7], "recall": [0.3, 0.6]})
        >>> fig = plot_sweep(res, knob="ψ=")
        >>> [t.get_text() for t in fig.axes[0].texts]
        ['ψ=0.5', 'ψ=1']
        >>> [c.get_label() for c in fig.axes[0].collections if c.get_gid() == "pareto_front"]
        ['Pareto front']
    """
    values = result.values if isinstance(result, SweepResult) else list(result["values"])
    scores = result.scores if isinstance(result, SweepResult) else result["scores"]
    if not isinstance(front, bool):
        raise ValueError(f"Expected argument `front` to be a bool, but got {front!r}")
    if maximize is None:
        stored = result.as_dict() if isinstance(result, SweepResult) else result
        same_axes = list(stored.get("front_axes", ())) == [x, y]
        maximize = tuple(stored.get("front_maximize", (True, True))) if same_axes else (True, True)
    directions = check_maximize(maximize)
    for name in (x, y):
        if name not in scores:
            raise ValueError(f"Expected the sweep to hold a {name!r} score to plot, but it has {sorted(scores)}")
    if ax is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(4.8, 4.2), dpi=100, layout="constrained")
        ax = fig.add_subplot(1, 1, 1)
    xs, ys = [float(v) for v in scores[x]], [float(v) for v in scores[y]]
    line = ax.plot(xs, ys, marker="o", markersize=4, linewidth=1.2, label=label)[0]
    for value, xi, yi in zip(values, xs, ys):
        text = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
        ax.annotate(
            f"{knob}{text}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7, color=line.get_color()
        )
    if front:
        _mark_front(ax, xs, ys, directions, color=line.get_color(), label=label)
    right, top = (max([1.0, *[v for v in vs if v == v]]) for vs in (xs, ys))  # density may exceed 1
    ax.set(xlim=(0, 1.02 * right), ylim=(0, 1.02 * top), xlabel=x, ylabel=y, title=f"{y}–{x} over the knob")
    ax.grid(alpha=0.3)
    if label is not None or front:
        ax.legend(fontsize="small")
    return ax.figure


def _mark_front(
    ax: Any, xs: List[float], ys: List[float], maximize: Tuple[bool, bool], *, color: Any, label: Optional[str]
) -> None:
    """The Pareto front of the points ``(xs, ys)``: a line (gid ``pareto_front``, in the legend) and rings
    (gid ``pareto_front_points``), both collections, so ``ax.lines`` and ``ax.texts`` hold only the path."""
    from matplotlib.collections import LineCollection

    index = pareto_front(xs, ys, maximize=maximize).tolist()
    fx, fy = [xs[i] for i in index], [ys[i] for i in index]
    name = "Pareto front" if label is None else f"{label}: Pareto front"
    path = LineCollection([list(zip(fx, fy))], colors=[color], linewidths=4.0, alpha=0.3, label=name)
    path.set_gid("pareto_front")
    ax.add_collection(path, autolim=False)
    rings = ax.scatter(fx, fy, s=70, facecolors="none", edgecolors=[color], linewidths=1.3, zorder=3)
    rings.set_gid("pareto_front_points")
    rings.set_label("_nolegend_")


__all__ = ["FRONT_AXES", "SweepResult", "plot_sweep", "sweep_knob"]
