"""The figures of scores, curves and runs; they live in :mod:`lightning_prd.runs.plotting`, re-exported here."""

from lightning_prd.runs.plotting import (
    downsample,
    figure_to_array,
    how_to_read,
    image_grid,
    label_indices,
    plot_alpha_beta,
    plot_prd_curve,
    plot_runs,
    plot_trajectory,
)

__all__ = [
    "downsample",
    "figure_to_array",
    "how_to_read",
    "image_grid",
    "label_indices",
    "plot_alpha_beta",
    "plot_prd_curve",
    "plot_runs",
    "plot_trajectory",
]
