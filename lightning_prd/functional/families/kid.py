r"""Family ``kid`` (Bińkowski et al., ICLR 2018): ``kid``, the mean over ``subsets`` random subsets of the unbiased
polynomial-kernel MMD², and ``kid_std`` its spread (:func:`~lightning_prd.functional.kid.kernel_inception_distance`).
The Metric takes subsets of ``min(N, M)`` samples when a set holds fewer than ``subset_size``, with one warning
(``shrink``); the function raises.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.kid import check_kid_options, kid_scores, kid_summary

NAME = "kid"
_KEYS = ("subsets", "subset_size", "degree", "gamma", "coef", "seed")


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return dict(zip(_KEYS, check_kid_options(*(options[key] for key in _KEYS))))


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    kid, std = kid_summary(kid_scores(ctx.sets, **options, shard=ctx.shard))
    return {"kid": kid, "kid_std": std}


def _shrink(options: Dict[str, Any], num_real: int, num_fake: int) -> Tuple[Dict[str, Any], str]:
    """Subsets of ``min(N, M)`` samples when a set is smaller than ``subset_size`` (and the warning); fewer than 2
    samples raise."""
    if min(num_real, num_fake) >= options["subset_size"]:
        return options, ""
    size = min(num_real, num_fake)
    if size < 2:  # an unbiased MMD² needs two samples of each set
        raise ValueError(
            f"Expected at least 2 real and 2 generated samples for KID (`kid`), but got N = {num_real} real "
            f"and M = {num_fake} generated"
        )
    warning = (
        f"KID: `subset_size={options['subset_size']}` is more than the smaller set holds "
        f"(N = {num_real} real, M = {num_fake} generated); subsets of {size} samples are used"
    )
    return {**options, "subset_size": size}, warning


register_family(
    NAME,
    outputs={"kid": "lower"},
    defaults=dict(subsets=100, subset_size=1000, degree=3, gamma=None, coef=1.0, seed=0),
    check=_check,
    meaning="unbiased polynomial-kernel MMD² over random subsets (Bińkowski et al. 2018)",
    docs="metrics/kid.md",
    read=_read,
    shrink=_shrink,
    other_keys=("kid_std",),
    cli=CliSpec(
        seeded=True,
        help="add the Kernel Inception Distance (100 subsets of min(1000, N, M) samples, seeded by --seed)",
    ),
    order=130,
    _builtin=True,
)
