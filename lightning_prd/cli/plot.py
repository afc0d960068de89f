"""``--plot`` of ``lightning-prd evaluate`` and ``compare``: the PRD and alpha/beta curves and the (recall,
precision) points of every generated set, in one image."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Sequence, Tuple

from lightning_prd.cli.checks import write_output


class _Panel(NamedTuple):
    """One panel of curves: the x key and its ``(y key, line style, label suffix)`` curves (keys of the results'
    curves), the axes' limits and words, and whether the diagonal is drawn."""

    x: str
    ys: Tuple[Tuple[str, str, str], ...]
    xlim: Tuple[float, float]
    xlabel: str
    ylabel: str
    title: str
    diagonal: bool
    legend: str


#: the curve panels of --plot, each drawn when a generated set's results hold its curves
PANELS = (
    _Panel("prd_recall", (("prd_precision", "-", ""),), (0, 1.02), "recall", "precision", "PRD curve", False,
           "lower left"),
    _Panel("alphas", (("alpha_precision_curve", "-", " α-precision"), ("beta_recall_curve", "--", " β-recall")),
           (0, 1), "α, β", "score", "α-precision (solid), β-recall (dashed)", True, "upper left"),
)  # fmt: skip


def write_plot(path: str, results: Sequence[Tuple[str, Any]]) -> None:
    """One PNG: the curve panels (:data:`PANELS`) whose curves were computed, and the (recall, precision) points."""
    from matplotlib.figure import Figure

    panels = [p for p in PANELS if any(p.x in curves for _, (_, curves, _) in results)]
    fig = Figure(figsize=(4.6 * (len(panels) + 1), 4.2), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(panels) + 1, squeeze=False)[0]
    colours = [f"C{i % 10}" for i in range(len(results))]
    for ax, panel in zip(axes, panels):
        for (label, (_, c, _)), colour in zip(results, colours):
            for y, style, suffix in panel.ys if panel.x in c else ():
                ax.plot(c[panel.x], c[y], color=colour, linestyle=style, label=f"{label}{suffix}")
        if panel.diagonal:
            ax.plot([0, 1], [0, 1], color="0.6", linewidth=1, linestyle=":")
        ax.set(xlim=panel.xlim, ylim=(0, 1.02), xlabel=panel.xlabel, ylabel=panel.ylabel, title=panel.title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc=panel.legend)
    ax = axes[-1]
    for (label, (scores, _, _)), colour in zip(results, colours):
        if "precision" in scores and "recall" in scores:
            ax.scatter([scores["recall"]], [scores["precision"]], color=colour, zorder=2)
            ax.annotate(
                label, (scores["recall"], scores["precision"]), textcoords="offset points", xytext=(4, 4), fontsize=7
            )
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall", ylabel="precision", title="k-NN precision / recall")
    ax.grid(alpha=0.3)
    write_output("--plot", path, lambda out: fig.savefig(out, format=plot_format(out)))


def plot_format(out: Path) -> str:
    """The image format of ``--plot``: its extension, PNG when it has none (written at exactly that path)."""
    return out.suffix[1:].lower() or "png"
