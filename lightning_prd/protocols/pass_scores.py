"""The scores of one FID Inception pass beyond those of its pool features: sFID and the Inception Score.

guided-diffusion's evaluation table (FID, sFID, IS, precision, recall) comes from one network pass: the FID
Inception with ``logits=True`` returns ``{"pool", "logits", "spatial"}``; the pool features serve the Fréchet
distance and precision/recall (:class:`~lightning_prd.GenerativeMetrics`), and this module turns the other two
outputs into ``sfid`` (:func:`~lightning_prd.functional.spatial_frechet_distance` of the real and generated
spatial features) and ``inception_score``, ``inception_score_std``
(:func:`~lightning_prd.functional.inception_score` of the generated logits, torch-fidelity's 10 splits).

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> real = {"spatial": torch.randn(30, 4, generator=g)}
    >>> fake = {"spatial": torch.randn(20, 4, generator=g), "logits": torch.zeros(20, 5)}
    >>> out = pass_scores(real, fake)
    >>> sorted(out), round(float(out["inception_score"]), 6)
    (['inception_score', 'inception_score_std', 'sfid'], 1.0)
"""

from __future__ import annotations

from typing import Dict, Mapping

from torch import Tensor

from lightning_prd.functional.inception_score import SPLITS, inception_score
from lightning_prd.functional.sfid import spatial_frechet_distance

#: the keys :func:`pass_scores` may return
PASS_SCORES = ("sfid", "inception_score", "inception_score_std")


def pass_scores(real: Mapping[str, Tensor], fake: Mapping[str, Tensor], *, splits: int = SPLITS) -> Dict[str, Tensor]:
    """``sfid`` when both sets hold ``"spatial"`` features; ``inception_score`` and ``inception_score_std`` when
    the generated set holds ``"logits"`` of at least ``splits`` samples (fewer cannot be split: left out)."""
    out: Dict[str, Tensor] = {}
    if "spatial" in real and "spatial" in fake:
        out["sfid"] = spatial_frechet_distance(real["spatial"], fake["spatial"])
    logits = fake.get("logits")
    if logits is not None and logits.shape[0] >= splits:
        out["inception_score"], out["inception_score_std"] = inception_score(logits, splits=splits)
    return out
