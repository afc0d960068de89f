"""Sample-level audit: which generated samples to keep, which real modes the model misses.

The α-Precision paper's model auditing (Alaa et al., ICML 2022, Sec. 5): judge each
generated sample by fidelity and authenticity and drop the bad ones post hoc; look at each
real sample to see which parts of the data the model does not reach. One k-NN pass gives
every per-sample flag at once.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.alpha_beta import alpha_beta_from_pass, check_num_alphas, fake_centre_distance
from lightning_prd.functional.engine.inputs import check_positive_int, check_real
from lightning_prd.functional.engine.one_pass import requested, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets


@score_precision()
def audit_samples(
    real: Any,
    fake: Any,
    *,
    k_precision: int = 3,
    k_coverage: int = 5,
    num_alphas: int = 30,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Dict[str, Tensor]:
    """Per-sample results for auditing a generated set against the real set.

    Generated samples (``[M]`` each):
        ``realism`` (Kynkäänniemi realism score, k = ``k_precision``; >= 1 inside a kept real
        ball), ``inside_precision`` (inside some real ``NND_k`` ball: counts for precision),
        ``real_ball_count`` (real balls of radius ``NND_{k_coverage}`` holding it: density's
        summand), ``authentic`` (farther from its nearest real sample ``i*`` than ``i*``'s own
        nearest real neighbour), ``nearest_real`` (index of ``i*``), ``nearest_real_distance``,
        ``copy_ratio`` (``d(y, x_i*) / NND_1(x_i*)``: the statistic behind authenticity,
        authentic exactly when > 1; 0 for an exact copy),
        ``alpha_typicality`` (smallest α whose real α-support holds it; 2.0 = outside all).

    Real samples (``[N]`` each):
        ``covered`` (its ``NND_{k_coverage}`` ball holds a generated sample: coverage's
        summand; False marks modes the model misses), ``recalled`` (inside some generated
        ``NND_{k_precision}`` ball: recall's summand), ``recalled_at_beta`` (smallest β at
        which it is β-recalled; 2.0 = never).

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[1.0], [1.4], [9.0]])
        >>> a = audit_samples(real, fake, k_precision=1, k_coverage=1)
        >>> a["inside_precision"].tolist(), a["authentic"].tolist(), a["covered"].tolist()
        ([True, True, False], [False, False, True], [True, True, True, False])
    """
    k_p = check_positive_int(k_precision, "k_precision")
    k_c = check_positive_int(k_coverage, "k_coverage")
    num_alphas = check_num_alphas(num_alphas)
    sets = FeatureSets.check(real, fake)
    fake_v = sets.fake
    dist_g = fake_centre_distance(fake_v)
    res = run_pass(
        sets,
        PassRequest(
            member_ks=(k_p, k_c),
            recall_ks=(k_p,),
            realism_k=k_p,
            nearest="fake",
            real_ks=(1,),
            fake_values=dist_g,
            value_ks=(k_c,),
        ),
        dtype=dtype,
        block_bytes=block_bytes,
    )
    ab = alpha_beta_from_pass(res, num_alphas=num_alphas, k=k_c, per_sample=True)
    nearest = requested(res.cross.fake_nn_index, "fake_nn_index")
    nn_d = requested(res.cross.fake_nn_sq_dist, "fake_nn_sq_dist").sqrt()
    nn_r = res.real.sq_radii[1][nearest].sqrt()
    copy_ratio = torch.where(
        nn_r > 0, nn_d / nn_r.clamp(min=torch.finfo(torch.float64).tiny), torch.where(nn_d > 0, torch.inf, 0.0)
    )
    return {
        "copy_ratio": copy_ratio,
        "realism": requested(res.cross.realism, "realism"),
        "inside_precision": res.cross.fake_in_real[k_p],
        "real_ball_count": res.cross.fake_ball_count[k_c],
        "authentic": ab["authentic"],
        "nearest_real": nearest,
        "nearest_real_distance": nn_d,
        "alpha_typicality": ab["alpha_typicality"],
        "covered": res.cross.real_ball_hit[k_c],
        "recalled": res.cross.real_in_fake[k_p],
        "recalled_at_beta": ab["recalled_at_beta"],
    }


def _audit_column(audit: Any, key: str, size: Optional[int]) -> Tensor:
    """``audit[key]``, a 1-D tensor (of ``size`` entries when given), else a ``ValueError`` naming ``audit``."""
    if not isinstance(audit, Mapping):
        raise ValueError(
            f"Expected argument `audit` to be the dict returned by `audit_samples`, but got {type(audit).__name__}"
        )
    column = audit.get(key)
    if not isinstance(column, Tensor) or column.ndim != 1 or (size is not None and column.shape[0] != size):
        got = "no such key" if key not in audit else f"{type(column).__name__} {tuple(getattr(column, 'shape', ()))}"
        raise ValueError(
            f"Expected argument `audit` to be the dict returned by `audit_samples`, with a 1-D tensor "
            f"`audit[{key!r}]`{'' if size is None else f' of {size} entries'}, but got {got}"
        )
    return column


@score_precision()
def filter_fake(
    fake: Any,
    audit: Dict[str, Tensor],
    *,
    copy_ratio: Optional[float] = 1.0,
    fidelity: Optional[str] = "precision",
    min_realism: float = 1.0,
    max_alpha: Optional[float] = None,
) -> Tuple[Tensor, Tensor]:
    """Keep the generated samples that pass the audit: not copies, and of high fidelity.

    Args:
        fake: the generated samples (any tensor whose first dimension matches the audit:
            features, images, ...).
        audit: the result of :func:`audit_samples` on those samples.
        copy_ratio: drop samples with ``d(y, x_i*) <= copy_ratio * NND_1(x_i*)``. 1.0 is the
            paper's authenticity test; it also rejects many fresh samples that merely fall
            close to a real one (about half of them for a perfect model), so a smaller ratio
            (e.g. 0.25) targets copies and near-copies only. None to skip.
        fidelity: ``"precision"`` keeps samples inside some real k-NN ball (precision's test),
            ``"realism"`` keeps those with realism score >= ``min_realism`` (median-pruned balls,
            stricter), None skips the fidelity test.
        max_alpha: drop samples less typical than the real α-support of this level
            (``alpha_typicality > max_alpha``); None to skip.

    Returns:
        ``(kept_samples, keep_mask)``.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[1.0], [1.4], [9.0]])
        >>> kept, mask = filter_fake(fake, audit_samples(real, fake, k_precision=1, k_coverage=1), copy_ratio=0.25)
        >>> mask.tolist()  # the copy of 1.0 and the outlier 9.0 go
        [False, True, False]
    """
    copy_ratio = None if copy_ratio is None else check_real(copy_ratio, "copy_ratio", low=0.0)
    if fidelity not in ("precision", "realism", None):
        raise ValueError(f"Expected argument `fidelity` to be 'precision', 'realism' or None, but got {fidelity!r}")
    min_realism = check_real(min_realism, "min_realism", allow_inf=True)
    max_alpha = None if max_alpha is None else check_real(max_alpha, "max_alpha", low=0.0, high=1.0)
    fake_t = torch.as_tensor(fake)
    first = _audit_column(audit, "copy_ratio", None)
    keep = torch.ones(first.shape[0], dtype=torch.bool, device=first.device)
    if fake_t.ndim == 0 or fake_t.shape[0] != keep.shape[0]:
        got = fake_t.shape[0] if fake_t.ndim else "a 0-d tensor"
        raise ValueError(f"Expected argument `fake` to hold {keep.shape[0]} samples like the audit, but got {got}")
    if copy_ratio is not None:
        keep &= first > copy_ratio
    if fidelity == "precision":
        keep &= _audit_column(audit, "inside_precision", keep.shape[0])
    elif fidelity == "realism":
        keep &= _audit_column(audit, "realism", keep.shape[0]) >= min_realism
    if max_alpha is not None:
        keep &= _audit_column(audit, "alpha_typicality", keep.shape[0]) <= max_alpha
    return fake_t[keep.to(fake_t.device)], keep
