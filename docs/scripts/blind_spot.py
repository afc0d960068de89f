"""The Fréchet distance's blind spot, drawn from computed scores: ``docs/img/blind_spot.png``.

Real data N(0, I₂) and three models N(0, s² I₂), s = 0.3 (collapsed), 1 (matched), 1.7 (spread
out), 2,000 samples each, seed 7. The Fréchet
distance of the collapsed and the spread-out model is the same (2(1 - s)² = 0.98 in the limit);
precision, recall, density and coverage tell them apart. Every number in the figure is computed
here by ``lightning_prd.functional``.

Run::

    python docs/scripts/blind_spot.py            # writes docs/img/blind_spot.png, prints the table
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from lightning_prd.functional import density_coverage, frechet_distance, precision_recall  # noqa: E402

MODELS = (("collapsed", 0.3), ("matched", 1.0), ("spread out", 1.7))


def scores(seed: int = 7, n: int = 2000):
    """``(name, s, real, fake, {score: value})`` for each model, real and fake drawn as the tests do."""
    rows = []
    for name, s in MODELS:
        g = torch.Generator().manual_seed(seed)
        real = torch.randn(n, 2, generator=g, dtype=torch.float64)
        fake = s * torch.randn(n, 2, generator=g, dtype=torch.float64)
        p, r = precision_recall(real, fake, k=3)
        d, c = density_coverage(real, fake, k=5)
        fd = frechet_distance(real, fake)
        values = dict(fd=float(fd), precision=float(p), recall=float(r), density=float(d), coverage=float(c))
        rows.append((name, s, real, fake, values))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "img" / "blind_spot.png"))
    args = parser.parse_args()

    rows = scores()
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.6), sharex=True, sharey=True)
    print("| model | FD | precision | recall | density | coverage |\n|---|---|---|---|---|---|")
    for ax, (name, s, real, fake, v) in zip(axes, rows):
        ax.scatter(real[:, 0], real[:, 1], s=3, c="0.6", alpha=0.5, lw=0, label="real N(0, I)")
        ax.scatter(fake[:, 0], fake[:, 1], s=3, c="tab:red", alpha=0.5, lw=0, label=f"model N(0, {s:g}² I)")
        ax.set_title(f"{name}, s = {s:g}\nFréchet distance {v['fd']:.2f}", fontsize=10)
        ax.text(
            0.03,
            0.03,
            f"precision {v['precision']:.2f}   recall {v['recall']:.2f}\n"
            f"density {v['density']:.2f}   coverage {v['coverage']:.2f}",
            transform=ax.transAxes,
            fontsize=8.5,
            family="monospace",
            bbox=dict(boxstyle="round", fc="white", ec="0.8", alpha=0.9),
        )
        ax.set_xlim(-6, 6)
        ax.set_ylim(-6, 6)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.legend(loc="upper right", fontsize=7.5, markerscale=3, frameon=False)
        print(
            f"| {name}, s = {s:g} | {v['fd']:.2f} | {v['precision']:.2f} | {v['recall']:.2f} "
            f"| {v['density']:.2f} | {v['coverage']:.2f} |"
        )
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=80, bbox_inches="tight")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
