"""The package's own score families, registered by :func:`register_builtins` through the public call
:func:`.families.register_family` (the registry calls it once, on first use).

The order is the order of printed tables and dashboards. These families are wired into
:func:`~lightning_prd.functional.generative.scores_from_plan` (``engine=True``); a family computed through its
record alone registers itself where it is defined, as a user's would (the rarity score:
:mod:`lightning_prd.functional.rarity`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from lightning_prd.functional.alpha_beta import PER_SAMPLE_KEYS as ALPHA_BETA_PER_SAMPLE
from lightning_prd.functional.cmmd import SCALE, SIGMA
from lightning_prd.functional.data_copying import CELL_THRESHOLD, NUM_CELLS, PCA_DIM
from lightning_prd.functional.fld import BATCH_SIZE, GEN_SIZE, LR, NUM_EPOCHS
from lightning_prd.functional.frechet_infinity import NUM_POINTS
from lightning_prd.functional.top_pr import TOP_PR_DEFAULTS


def register_builtins(register: Callable[..., Any]) -> None:
    """Register the package's families with ``register`` (:func:`.families.register_family`), in table order."""

    def _engine(name: str, outputs: Dict[str, Any], meaning: str, docs: str, **kwargs: Any) -> None:
        register(name, outputs=outputs, meaning=meaning, docs=docs, engine=True, _builtin=True, **kwargs)

    _engine(
        "precision_recall",
        {"precision": "higher", "recall": "higher"},
        "share of generated samples inside the real k-NN manifold / of real samples inside the generated one",
        "metrics/precision-recall.md",
        per_class=True,
    )
    _engine(
        "density_coverage",
        {"density": 1.0, "coverage": "higher"},
        "mean count of real balls holding a generated sample over k (1 is ideal) / share of real balls holding one",
        "metrics/density-coverage.md",
        per_class=True,
    )
    _engine(
        "probabilistic",
        {"p_precision": "higher", "p_recall": "higher"},
        "precision and recall with soft balls of one shared radius (Park & Kim 2023)",
        "metrics/probabilistic.md",
        defaults=dict(k=4, a=1.2, terms="all"),
    )
    _engine(
        "pr_cover",
        {"precision_cover": "higher", "recall_cover": "higher"},
        "share of samples whose own ball holds k samples of the other set (Cheema & Urner 2023)",
        "metrics/pr-cover.md",
        defaults=dict(k=None, C=3),
    )
    _engine(
        "clipped",
        {"clipped_density": "higher", "clipped_coverage": "higher"},
        "density and coverage bounded and robust to outliers (Salvy et al. 2026)",
        "metrics/clipped.md",
        defaults=dict(k=5),
    )
    _engine(
        "symmetric",
        {"sym_precision": "higher", "sym_recall": "higher"},
        "the lesser of precision (recall) and its mirror image (Khayatkhoei & AbdAlmageed 2023)",
        "metrics/symmetric.md",
        defaults=dict(k=5),
    )
    _engine(
        "prd",
        {"f_beta": "higher", "f_inv_beta": "higher"},
        "the PRD curve's best recall-weighted and precision-weighted F-scores (Sajjadi et al. 2018)",
        "metrics/prd.md",
        defaults=dict(num_clusters=20, num_angles=1001, num_runs=10, seed=0, enforce_balance="subsample", beta=8),
        other_keys=("prd_precision", "prd_recall"),
    )
    _engine(
        "alpha_beta",
        {"alpha_precision": "higher", "beta_recall": "higher"},
        "integrated alpha-precision and beta-recall curves (Alaa et al. 2022)",
        "metrics/alpha-beta.md",
        defaults=dict(num_alphas=30, k=5),
        other_keys=("alphas", "alpha_precision_curve", "beta_recall_curve", *ALPHA_BETA_PER_SAMPLE),
    )
    _engine(
        "authenticity",
        {"authenticity": "higher"},
        "share of generated samples that are no copy of their nearest real sample (Alaa et al. 2022)",
        "metrics/alpha-beta.md",
    )
    _engine(
        "frechet",
        {"frechet_distance": "lower"},
        "Fréchet distance of the feature Gaussians (the FID formula)",
        "metrics/frechet.md",
        per_class=True,
    )
    _engine("sfid", {"sfid": "lower"}, "Fréchet distance of Inception's spatial features", "protocols.md")
    _engine("inception_score", {"inception_score": "higher"}, "exp of the mean class-posterior KL", "protocols.md")
    _engine(
        "kid",
        {"kid": "lower"},
        "unbiased polynomial-kernel MMD² over random subsets (Bińkowski et al. 2018)",
        "metrics/kid.md",
        defaults=dict(subsets=100, subset_size=1000, degree=3, gamma=None, coef=1.0, seed=0),
        other_keys=("kid_std",),
    )
    _engine(
        "vendi",
        {"vendi": "higher", "vendi_real": "higher"},
        "effective number of distinct samples of each set (Friedman & Dieng 2023)",
        "metrics/vendi.md",
        defaults=dict(q=1.0, normalize=True),
    )
    _engine(
        "top_pr",
        {"top_precision": "higher", "top_recall": "higher", "top_f1": "higher"},
        "precision and recall on topologically significant supports (Kim et al. 2023)",
        "metrics/top-pr.md",
        defaults=dict(TOP_PR_DEFAULTS),
    )
    _engine(
        "cmmd",
        {"cmmd": "lower"},
        "Gaussian-kernel MMD of CLIP embeddings (Jayasumana et al. 2024)",
        "metrics/cmmd.md",
        defaults=dict(sigma=SIGMA, scale=SCALE, unbiased=False),
    )
    _engine(
        "fd_infinity",
        {"frechet_distance_infinity": "lower"},
        "the Fréchet distance extrapolated to infinitely many samples (Chong & Forsyth 2020)",
        "metrics/fd-infinity.md",
        defaults=dict(num_points=NUM_POINTS, min_size=None, max_size=None, seed=0),
        other_keys=("frechet_distance_infinity_sizes", "frechet_distance_infinity_values"),
    )
    _engine(
        "data_copying",
        {"ct": "zero", "ct_cells": "none", "authenticity_percentage": "higher"},
        "the C_T data-copying statistic against a held-out real set (Meehan et al. 2020)",
        "metrics/memorization.md",
        defaults=dict(num_cells=NUM_CELLS, cell_threshold=CELL_THRESHOLD, pca_dim=PCA_DIM, seed=0),
    )
    _engine(
        "fld",
        {
            "fld": "lower",
            "fld_gap": "zero",
            "fld_nll_test": "lower",
            "fld_train": "none",
            "fld_nll_train": "none",
            "fld_nll_baseline": "none",
        },
        "feature likelihood divergence against a held-out real set (Jiralerspong et al. 2023)",
        "metrics/memorization.md",
        defaults=dict(gen_size=GEN_SIZE, num_epochs=NUM_EPOCHS, lr=LR, batch_size=BATCH_SIZE, seed=0),
    )
    _engine(
        "realism",
        {},
        "per generated sample: the realism score (Kynkäänniemi et al. 2019)",
        "metrics/precision-recall.md",
        per_sample=("realism",),
    )
