"""Dashboards that read at a glance: the Custom Scalars layout, the trajectory's labels, the run
comparison figure, and flat checkpoint names from the README's ``ModelCheckpoint`` recipe."""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_prd.callback import PRDCallback
from lightning_prd.loggers.tensorboard import custom_scalars_layout
from lightning_prd.plotting import label_indices, plot_runs, plot_trajectory

from tiny_modules import TinyTrainable

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)


# ---------------------------------------------------------------------------------- Custom Scalars
def test_custom_scalars_has_one_chart_per_score():
    layout = custom_scalars_layout("prd/")
    assert list(layout) == ["prd/"]  # no chart overlaying several scores of every run
    per_score = layout["prd/"]
    tags = [chart[1] for chart in per_score.values()]
    assert all(len(t) == 1 for t in tags)  # one score per chart: the legend lists runs, not scores
    assert [t[0] for t in tags][:4] == ["^prd/precision$", "^prd/recall$", "^prd/density$", "^prd/coverage$"]
    assert "^prd/frechet_distance$" in [t[0] for t in tags]
    assert "density (1 is ideal)" in per_score and "frechet_distance (lower is better)" in per_score
    for chart in per_score.values():  # every pattern matches exactly one tag
        for pattern in chart[1]:
            name = pattern[len("^prd/") : -1]
            assert re.match(pattern, f"prd/{name}") and not re.match(pattern, f"prd/{name}_std")
    assert list(custom_scalars_layout("gen/")) == ["gen/"]  # the prefix is escaped and used
    assert custom_scalars_layout("a.b/")["a.b/"]["precision (higher is better)"][1] == [r"^a\.b/precision$"]


# ---------------------------------------------------------------------------------- trajectory labels
def _placed(fig):
    ax = fig.axes[0]
    return [(int(t.get_text()), t.xy) for t in ax.texts]


def test_trajectory_labels_do_not_pile_up_when_points_cluster():
    rng = np.random.default_rng(0)
    history = [{"epoch": 0, "precision": 0.05, "recall": 0.2}] + [
        {"epoch": e, "precision": 0.3 + 0.01 * rng.random(), "recall": 0.995 + 0.004 * rng.random()}
        for e in range(1, 50)
    ]
    labels = _placed(plot_trajectory(history))
    epochs = [e for e, _ in labels]
    assert 0 in epochs and 49 in epochs  # first and last always
    assert len(labels) <= 3  # 49 points within 0.01 of each other: one label for the whole cluster, not 49
    fig = plot_trajectory(history)
    assert len(fig.axes[0].collections[0].get_offsets()) == 50  # every point is still drawn


def test_trajectory_labels_on_a_spread_path_are_every_kth_and_apart():
    history = [{"epoch": e, "precision": e / 49, "recall": e / 49} for e in range(50)]
    labels = _placed(plot_trajectory(history, max_labels=8))
    epochs = [e for e, _ in labels]
    assert epochs[0] == 0 and epochs[-1] == 49 and 5 <= len(epochs) <= 8
    steps = {b - a for a, b in zip(epochs[:-2], epochs[1:-1])}
    assert len(steps) == 1  # every k-th epoch between first and last
    points = [xy for _, xy in labels]
    gaps = [math.dist(p, q) for i, p in enumerate(points) for q in points[i + 1 :]]
    assert min(gaps) >= 0.05


def test_label_indices_edge_cases():
    assert label_indices([], 8) == [] and label_indices([(0.5, 0.5)], 8) == [0]
    assert label_indices([(0.5, 0.5)] * 3, 8) == [0, 2]  # first and last even when they coincide
    assert label_indices([(0.1 * i, 0.0) for i in range(11)], 0) == []


# ---------------------------------------------------------------------------------- run comparison figure
def test_plot_runs_draws_every_run_in_every_panel():
    runs = {
        "a": {
            "precision": [(0, 0.1), (1, 0.5), (2, 0.7)],
            "recall": [(0, 0.2), (1, 0.4), (2, 0.9)],
            "density": [(0, 0.3), (1, 1.4), (2, 1.1)],
            "coverage": [(0, 0.1), (1, 0.3), (2, 0.5)],
        },
        "b": {
            "precision": [(0, 0.2), (1, 0.6)],
            "recall": [(0, 0.1), (1, 0.3)],
            "density": [(0, 0.5), (1, 0.9)],
            "coverage": [(0, 0.2), (1, 0.4)],
        },
    }
    fig = plot_runs(runs)
    traj, *panels = fig.axes
    assert traj.get_xlabel() == "recall" and traj.get_ylabel() == "precision"
    # per run: the path, an open circle at the first epoch and a square at the last
    assert len(traj.lines) == 6
    start, end = traj.lines[1], traj.lines[2]
    assert start.get_marker() == "o" and start.get_markerfacecolor() == "none" and end.get_marker() == "s"
    assert (start.get_xdata()[0], start.get_ydata()[0]) == (0.2, 0.1) and (end.get_xdata()[0], end.get_ydata()[0]) == (
        0.9,
        0.7,
    )
    assert [ax.get_title() for ax in panels] == [
        "precision (higher is better)",
        "recall (higher is better)",
        "density (1 is ideal)",
        "coverage (higher is better)",
    ]
    for ax, name in zip(panels, ("precision", "recall", "density", "coverage")):
        run_lines = [line for line in ax.lines if line.get_label() in runs]
        assert [line.get_label() for line in run_lines] == ["a", "b"]
        assert list(run_lines[0].get_ydata()) == [v for _, v in runs["a"][name]]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b", "first epoch", "last epoch"]


# ---------------------------------------------------------------------------------- ModelCheckpoint recipe
class Moving(TinyTrainable):
    def sample(self, n):
        e = self.trainer.current_epoch
        return torch.randn(n, 2, generator=torch.Generator().manual_seed(e)) * (0.3 + 0.3 * e)


def test_readme_checkpoint_recipe_writes_flat_file_names(tmp_path):
    real = torch.randn(200, 2, generator=torch.Generator().manual_seed(1))
    prd = PRDCallback(real, num_samples=200, log_curves=False)
    best = ModelCheckpoint(
        dirpath=tmp_path / "ckpt",
        monitor="prd/coverage",
        mode="max",
        save_top_k=-1,
        filename="epoch{epoch}-coverage{prd/coverage:.3f}",
        auto_insert_metric_name=False,
    )
    trainer = pl.Trainer(
        max_epochs=3,
        callbacks=[prd, best],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(Moving())
    entries = sorted(os.listdir(tmp_path / "ckpt"))
    assert all(os.path.isfile(tmp_path / "ckpt" / e) for e in entries)  # no sub-folder from the "/" in the key
    expected = [f"epoch{h['epoch']}-coverage{h['coverage']:.3f}.ckpt" for h in prd.history]
    assert entries == sorted(expected) and len(entries) == 3
    top = max(prd.history, key=lambda h: h["coverage"])
    assert os.path.basename(best.best_model_path) == f"epoch{top['epoch']}-coverage{top['coverage']:.3f}.ckpt"
