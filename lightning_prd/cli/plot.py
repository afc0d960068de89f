"""``--plot`` of ``lightning-prd evaluate`` and ``compare``: the PRD and alpha/beta curves and the (recall,
precision) points of every generated set, in one image."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence, Tuple

from lightning_prd.cli.checks import write_output


def write_plot(path: str, results: Sequence[Tuple[str, Any]]) -> None:
    """One PNG: PRD curves and alpha/beta curves when computed, and the (recall, precision) points."""
    from matplotlib.figure import Figure

    marker = {"prd": "prd_precision", "alpha_beta": "alphas"}
    panels = [p for p in ("prd", "alpha_beta") if any(marker[p] in curves for _, (_, curves, _) in results)]
    fig = Figure(figsize=(4.6 * (len(panels) + 1), 4.2), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(panels) + 1, squeeze=False)[0]
    colours = [f"C{i % 10}" for i in range(len(results))]
    for ax, panel in zip(axes, panels):
        for (label, (_, c, _)), colour in zip(results, colours):
            if panel == "prd" and "prd_precision" in c:
                ax.plot(c["prd_recall"], c["prd_precision"], color=colour, label=label)
            elif panel == "alpha_beta" and "alphas" in c:
                ax.plot(c["alphas"], c["alpha_precision_curve"], color=colour, label=f"{label} α-precision")
                ax.plot(c["alphas"], c["beta_recall_curve"], color=colour, linestyle="--", label=f"{label} β-recall")
        if panel == "prd":
            ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall", ylabel="precision", title="PRD curve")
        else:
            ax.plot([0, 1], [0, 1], color="0.6", linewidth=1, linestyle=":")
            ax.set(
                xlim=(0, 1),
                ylim=(0, 1.02),
                xlabel="α, β",
                ylabel="score",
                title="α-precision (solid), β-recall (dashed)",
            )
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="lower left" if panel == "prd" else "upper left")
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
