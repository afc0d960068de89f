"""Matplotlib figures of the scores: PRD curves, α-Precision/β-Recall curves, the trajectory over epochs.

Every function returns a :class:`matplotlib.figure.Figure` built with the object-oriented API
(no ``pyplot`` state, so it works under the Agg backend, in threads and on headless machines).
matplotlib is imported when a function is called, never at import time.

Example:
    >>> import torch
    >>> from lightning_prd.runs.plotting import plot_trajectory
    >>> history = [{"epoch": 0, "precision": 0.5, "recall": 0.2}, {"epoch": 1, "precision": 0.8, "recall": 0.6}]
    >>> fig = plot_trajectory(history)
    >>> fig.axes[0].get_xlabel()
    'recall'
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

ArrayLike = Any
Curves = Union[Tuple[ArrayLike, ArrayLike], Mapping[str, Tuple[ArrayLike, ArrayLike]]]


def _np(x: ArrayLike) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=float).reshape(-1)


def _new_figure(size: Tuple[float, float] = (4.5, 4.0)) -> Tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100, layout="constrained")
    return fig, fig.add_subplot(1, 1, 1)


def plot_prd_curve(curves: Curves, *, title: str = "PRD curve") -> Any:
    """Precision (y) over recall (x) of one or several PRD curves (Sajjadi et al. 2018).

    Args:
        curves: ``(precision, recall)`` arrays, or a mapping ``label -> (precision, recall)``
            to overlay several curves (e.g. epochs or runs).
        title: axes title.

    Example:
        >>> from lightning_prd.runs.plotting import plot_prd_curve
        >>> fig = plot_prd_curve({"epoch 3": ([1.0, 0.5, 0.0], [0.0, 0.5, 1.0])})
        >>> len(fig.axes[0].lines)
        1
    """
    fig, ax = _new_figure()
    items = curves.items() if isinstance(curves, Mapping) else [(None, curves)]
    for label, (precision, recall) in items:
        ax.plot(_np(recall), _np(precision), label=label, linewidth=1.5)
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall", ylabel="precision", title=title)
    ax.grid(alpha=0.3)
    if isinstance(curves, Mapping) and curves:
        ax.legend(loc="lower left", fontsize="small")
    return fig


def plot_alpha_beta(
    alphas: ArrayLike,
    alpha_precision_curve: Optional[ArrayLike] = None,
    beta_recall_curve: Optional[ArrayLike] = None,
    *,
    title: str = "α-Precision / β-Recall",
) -> Any:
    """α-Precision and β-Recall curves against the diagonal of an ideal model (Alaa et al. 2022).

    A curve above the diagonal means the model's mass is more concentrated than the data's,
    below it means less. Either curve may be omitted.

    Example:
        >>> from lightning_prd.runs.plotting import plot_alpha_beta
        >>> fig = plot_alpha_beta([0, 0.5, 1], [0, 0.4, 1], [0, 0.6, 0.9])
        >>> [line.get_label() for line in fig.axes[0].lines]
        ['ideal', 'α-precision', 'β-recall']
    """
    fig, ax = _new_figure()
    a = _np(alphas)
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.5", linewidth=1, label="ideal")
    if alpha_precision_curve is not None:
        ax.plot(a, _np(alpha_precision_curve), marker=".", label="α-precision")
    if beta_recall_curve is not None:
        ax.plot(a, _np(beta_recall_curve), marker=".", label="β-recall")
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="α, β (quantile of the support)", ylabel="score", title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    return fig


def how_to_read(name: str) -> str:
    """``higher is better``, ``lower is better``, ``1 is ideal``, ``0 is ideal`` or ``a diagnostic`` for ``name``
    (:mod:`lightning_prd.runs.scores`).

    Example:
        >>> how_to_read("prd/density"), how_to_read("frechet_distance")
        ('1 is ideal', 'lower is better')
    """
    from lightning_prd.runs.scores import direction_label

    label = direction_label(name)
    if label == "-":
        return "a diagnostic"
    return label if label.endswith("is ideal") else f"{label} is better"


def label_indices(points: Sequence[Tuple[float, float]], max_labels: int, min_gap: float = 0.06) -> list:
    """Which of a path's points get a text label: the last, the first, then every k-th, none crowded.

    A point other than the first and the last is labelled only when it lies at least ``min_gap``
    (in the axes' units) from every labelled point, so labels never pile up where the path
    lingers; ``k`` spreads at most ``max_labels`` labels evenly along the path.

    Example:
        >>> label_indices([(0.1 * i, 0.1 * i) for i in range(10)], max_labels=4)
        [0, 3, 6, 9]
        >>> label_indices([(0.99, 0.5 + 1e-3 * i) for i in range(50)], max_labels=8)
        [0, 49]
    """
    n = len(points)
    if n == 0 or max_labels <= 0:
        return []
    step = max(1, math.ceil((n - 1) / max(max_labels - 1, 1)))
    chosen = [n - 1] + ([0] if n > 1 else [])
    for i in range(step, n - 1, step):
        if len(chosen) >= max_labels:
            break
        if all(math.dist(points[i], points[j]) >= min_gap for j in chosen):
            chosen.append(i)
    return sorted(chosen)


def _gap(value: Any) -> float:
    """``value`` as a float, NaN (a gap in a line) when it is not finite."""
    value = float(value)
    return value if math.isfinite(value) else math.nan


def plot_trajectory(
    history: Sequence[Mapping[str, Any]],
    *,
    x: str = "recall",
    y: str = "precision",
    title: str = "precision–recall over epochs",
    max_labels: int = 8,
) -> Any:
    """The path of ``(x, y)`` scores over epochs, coloured by epoch, a few points labelled with theirs.

    The first and the last evaluation are always labelled, others every k-th epoch when they
    are not crowded (:func:`label_indices`); the colour bar gives every point's epoch.

    Args:
        history: one mapping per evaluation with an ``"epoch"`` key and the ``x`` and ``y``
            keys (e.g. :attr:`lightning_prd.PRDCallback.history`). Entries missing a key are skipped;
            a non-finite value (NaN, inf) is a gap in the path.
        x, y: score names for the axes (``coverage``/``density`` work too).
        max_labels: label at most this many points with their epoch (first and last included).
    """
    fig, ax = _new_figure()
    path = [(int(h["epoch"]), _gap(h[x]), _gap(h[y])) for h in history if x in h and y in h]
    pts = [p for p in path if not (math.isnan(p[1]) or math.isnan(p[2]))]  # a non-finite value: a gap
    top = max([1.0] + [p[2] for p in pts])
    if pts:
        ax.plot([p[1] for p in path], [p[2] for p in path], color="0.6", linewidth=1, zorder=1)
        epochs, xs, ys = (np.array(v) for v in zip(*pts))
        sc = ax.scatter(xs, ys, c=epochs, cmap="viridis", zorder=2, s=28)
        scaled = [(xi / 1.02, yi / (1.02 * top)) for _, xi, yi in pts]  # axes units
        shown = label_indices(scaled, max_labels)
        for i in shown:
            e, xi, yi = pts[i]
            below = i == 0 and len(pts) > 1 and math.dist(scaled[0], scaled[-1]) < 0.06  # first and last meet
            ax.annotate(
                str(e),
                (xi, yi),
                textcoords="offset points",
                xytext=(-4, -10) if below else (4, 4),
                ha="right" if below else "left",
                fontsize=7,
            )
        fig.colorbar(sc, ax=ax, label="epoch")
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02 * top), xlabel=x, ylabel=y, title=title)
    ax.grid(alpha=0.3)
    return fig


def plot_runs(
    runs: Mapping[str, Mapping[str, Sequence[Tuple[int, float]]]],
    *,
    panels: Sequence[str] = ("precision", "recall", "density", "coverage"),
) -> Any:
    """Several runs side by side: their precision–recall trajectories in one panel, each score over epochs.

    The left panel overlays the path of (recall, precision) over epochs of every run, its first
    evaluation marked by an open circle and its last by a filled square; the other panels draw
    each score of ``panels`` against the epoch, one line per run (density with its ideal, 1).
    A non-finite value (NaN, inf) is a gap in its line, and the axes' limits come from the finite ones.

    Args:
        runs: run label -> score name -> ``[(epoch, value), ...]`` (e.g. from
            :func:`lightning_prd.runs.load_runs`: ``{r.label: r.scores for r in runs}``).
        panels: the scores drawn over epochs, one panel each (missing ones are left empty).

    Example:
        >>> from lightning_prd.runs.plotting import plot_runs
        >>> fig = plot_runs({"a": {"precision": [(0, 0.2), (1, 0.6)], "recall": [(0, 0.1), (1, 0.5)]}})
        >>> sorted(fig.axes[0].get_title() for _ in [0]), len(fig.axes)
        (['precision–recall over epochs'], 5)
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    from lightning_prd.runs.scores import direction

    names = list(panels)
    rows = (len(names) + 1) // 2
    mosaic: List[Any] = [["trajectory", *names[2 * r : 2 * r + 2]] for r in range(rows)]
    mosaic = [row + ["."] * (3 - len(row)) for row in mosaic] or [["trajectory"]]
    fig = Figure(figsize=(13, 3.3 * max(rows, 2)), dpi=100, layout="constrained")
    axes = fig.subplot_mosaic(mosaic)
    traj = axes["trajectory"]
    for i, (label, scores) in enumerate(runs.items()):
        colour = f"C{i % 10}"
        precision = {e: _gap(v) for e, v in scores.get("precision", [])}
        recall = {e: _gap(v) for e, v in scores.get("recall", [])}
        epochs = sorted(set(precision) & set(recall))
        if epochs:
            xs, ys = [recall[e] for e in epochs], [precision[e] for e in epochs]
            traj.plot(xs, ys, color=colour, linewidth=1.2, marker=".", markersize=4, label=label)
            whole = [i for i in range(len(epochs)) if not (math.isnan(xs[i]) or math.isnan(ys[i]))]
            if whole:  # the first and the last evaluation drawn
                first, last = whole[0], whole[-1]
                traj.plot(
                    xs[first], ys[first], "o", markersize=9, markerfacecolor="none", markeredgecolor=colour, mew=1.5
                )
                traj.plot(xs[last], ys[last], "s", markersize=8, color=colour)
        for name in names:
            points = scores.get(name, [])
            if points:
                epochs_, values = [e for e, _ in points], [_gap(v) for _, v in points]
                axes[name].plot(epochs_, values, color=colour, marker=".", markersize=4, linewidth=1.2, label=label)
    top = max([1.0] + [v for s in runs.values() for _, v in s.get("precision", []) if math.isfinite(v)])
    traj.set(xlim=(0, 1.02), ylim=(0, 1.02 * top), xlabel="recall", ylabel="precision")
    traj.set_title("precision–recall over epochs")
    handles, _ = traj.get_legend_handles_labels()
    grey: Dict[str, Any] = {"linestyle": "none", "markeredgecolor": "0.3"}
    handles += [
        Line2D([], [], marker="o", markerfacecolor="none", label="first epoch", **grey),
        Line2D([], [], marker="s", markerfacecolor="0.3", label="last epoch", **grey),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize="small")
    traj.grid(alpha=0.3)
    for name in names:
        ax = axes[name]
        values = [v for s in runs.values() for _, v in s.get(name, []) if math.isfinite(v)]
        if name == "density":
            ax.axhline(1.0, color="0.5", linestyle=":", linewidth=1)
        if direction(name) != "lower":  # scores in [0, 1]; density may exceed 1
            ax.set_ylim(0, 1.05 * max([1.0] + values))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlabel="epoch", title=f"{name} ({how_to_read(name)})")
        ax.grid(alpha=0.3)
    return fig


def figure_to_array(fig: Any, close: bool = True) -> np.ndarray:
    """Render a figure to an ``[H, W, 3]`` uint8 array (Agg canvas; no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[..., :3].copy()
    if close:
        fig.clear()
    return image


def downsample(n: int, points: int) -> np.ndarray:
    """At most ``points`` indices spread evenly over ``range(n)``, ends included.

    Example:
        >>> downsample(1001, 5).tolist()
        [0, 250, 500, 750, 1000]
    """
    if n <= points:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, points).round().astype(int))


def image_grid(images: Any, nrow: int = 8, pad: int = 2) -> np.ndarray:
    """A ``[H, W, 3]`` float grid in [0, 1] of ``[n, C, H, W]`` images (C = 1 or 3), min-max scaled.

    Example:
        >>> import torch
        >>> image_grid(torch.rand(5, 3, 4, 4), nrow=4).shape
        (14, 26, 3)
    """
    x = np.asarray(images.detach().cpu().float() if hasattr(images, "detach") else images, dtype=np.float64)
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        raise ValueError(f"Expected images of shape [n, 1 or 3, H, W], but got shape {tuple(x.shape)}")
    lo, hi = float(x.min()), float(x.max())
    x = (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)
    if x.shape[1] == 1:
        x = np.repeat(x, 3, axis=1)
    n, _, h, w = x.shape
    cols = min(nrow, n)
    rows = (n + cols - 1) // cols
    grid = np.ones((rows * (h + pad) + pad, cols * (w + pad) + pad, 3))
    for i in range(n):
        r, c = divmod(i, cols)
        top, left = pad + r * (h + pad), pad + c * (w + pad)
        grid[top : top + h, left : left + w] = x[i].transpose(1, 2, 0)
    return grid
