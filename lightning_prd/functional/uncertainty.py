"""Sampling noise of the k-NN scores: a ± from disjoint subsamples of the generated set.

k-NN scores are not means of independent terms (each real radius depends on the whole real
set), so the usual bootstrap does not apply: resampling with replacement plants exact
duplicates, which shrink ``NND_k`` radii to 0 and bias every score. Instead the generated set
is split into ``num_splits`` disjoint random parts, each scored against the full real set
(whose radii are computed once), and the spread over parts is reported. It is the sampling
noise at ``M / num_splits`` generated samples, so it over-states the noise of the full-size
score (roughly by ``sqrt(num_splits)`` for precision and density, whose per-sample terms are
independent given the real set); recall and coverage also *drift* with the sample size, so
compare the full-size value, not the split mean, across runs.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.density_coverage import coverage_from_pass, density_from_pass
from lightning_prd.functional.engine.inputs import check_positive_int, check_seed
from lightning_prd.functional.engine.one_pass import run_pass
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.precision_recall import precision_from_pass, recall_from_pass


def score_spread(
    real: Any,
    fake: Any,
    *,
    num_splits: int = 5,
    k_precision_recall: int = 3,
    k_density_coverage: int = 5,
    seed: int = 0,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    ball: str = "closed",
) -> Dict[str, Dict[str, Tensor]]:
    """Precision, recall, density and coverage with a ± from disjoint generated subsamples.

    ``ball``: ``"closed"`` or ``"open"`` k-NN balls (see :func:`.density_coverage`).

    Returns:
        ``{name: {"value": full-set score, "mean": mean over splits, "std": standard
        deviation over splits (unbiased), "split_size": M // num_splits}}``.

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> real, fake = torch.randn(400, 3, generator=g), torch.randn(400, 3, generator=g)
        >>> out = score_spread(real, fake, num_splits=4)
        >>> sorted(out), sorted(out["precision"])
        (['coverage', 'density', 'precision', 'recall'], ['mean', 'split_size', 'std', 'value'])
    """
    k_precision_recall = check_positive_int(k_precision_recall, "k_precision_recall")
    k_density_coverage = check_positive_int(k_density_coverage, "k_density_coverage")
    sets = FeatureSets.check(real, fake)
    full = run_pass(
        sets,
        PassRequest(member_ks=(k_precision_recall, k_density_coverage), recall_ks=(k_precision_recall,), ball=ball),
        dtype=dtype,
        block_bytes=block_bytes,
    )
    spread = split_spread(
        sets,
        num_splits=num_splits,
        k_precision_recall=k_precision_recall,
        k_density_coverage=k_density_coverage,
        seed=seed,
        dtype=dtype,
        block_bytes=block_bytes,
        real_cache=full.real,
        ball=ball,
    )
    values = _scores(full, k_precision_recall, k_density_coverage)
    return {name: {"value": values[name], **spread[name]} for name in values}


def _scores(res: Any, k_precision_recall: int, k_density_coverage: int) -> Dict[str, Tensor]:
    return {
        "precision": precision_from_pass(res, k_precision_recall),
        "recall": recall_from_pass(res, k_precision_recall),
        "density": density_from_pass(res, k_density_coverage),
        "coverage": coverage_from_pass(res, k_density_coverage),
    }


def split_spread(
    sets: FeatureSets,
    *,
    num_splits: int,
    k_precision_recall: int,
    k_density_coverage: int,
    seed: int = 0,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    real_cache: Optional[Any] = None,
    shard: Optional[Any] = None,
    ball: str = "closed",
    names: Tuple[str, str] = ("num_splits", "k_precision_recall"),
) -> Dict[str, Dict[str, Tensor]]:
    """Mean and standard deviation of the four scores over ``num_splits`` disjoint random parts of
    the checked ``sets.fake``, each scored against all of ``sets.real`` (``real_cache`` reused).
    ``names``: how the caller calls ``num_splits`` and ``k_precision_recall``, for error messages."""
    num_splits = check_positive_int(num_splits, "num_splits")
    seed = check_seed(seed)
    if num_splits < 2:
        raise ValueError(f"Expected argument `num_splits` to be at least 2 for a spread, but got {num_splits}")
    fake = sets.fake
    size = fake.shape[0] // num_splits
    if size < k_precision_recall + 1:
        raise ValueError(
            f"Expected argument `fake` to hold at least {names[0]} * ({names[1]} + 1) = "
            f"{num_splits * (k_precision_recall + 1)} samples, but got {fake.shape[0]}"
        )
    perm = torch.randperm(fake.shape[0], generator=torch.Generator().manual_seed(int(seed))).to(fake.device)
    parts = []
    for s in range(num_splits):
        res = run_pass(
            sets.with_fake(fake[perm[s * size : (s + 1) * size]]),
            PassRequest(member_ks=(k_precision_recall, k_density_coverage), recall_ks=(k_precision_recall,), ball=ball),
            dtype=dtype,
            block_bytes=block_bytes,
            real_cache=real_cache,
            shard=shard,
        )
        real_cache = res.real
        parts.append(_scores(res, k_precision_recall, k_density_coverage))
    out = {}
    for name in parts[0]:
        vals = torch.stack([p[name].to(torch.float64) for p in parts])
        out[name] = {"mean": vals.mean(), "std": vals.std(unbiased=True), "split_size": torch.tensor(size)}
    return out
