r"""Family ``prd`` (Sajjadi et al., NeurIPS 2018): the PRD curve of the k-means histograms of both sets
(``prd_precision``, ``prd_recall``) and its best recall-weighted and precision-weighted F-scores ``f_beta``,
``f_inv_beta`` (:func:`~lightning_prd.functional.prd.prd_curve`, :func:`~lightning_prd.functional.prd.prd_f_beta`;
unequal set sizes subsampled to the smaller one, seeded, with ``enforce_balance="subsample"``).
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.prd import check_beta, check_prd_options, prd_curve_of, prd_f_beta

NAME = "prd"
_CURVE = ("num_clusters", "num_angles", "num_runs", "seed", "enforce_balance")


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    checked = dict(zip(_CURVE, check_prd_options(*(options[key] for key in _CURVE))))
    return {**checked, "beta": check_beta(options["beta"])}


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    precision, recall = prd_curve_of(ctx.sets, **{key: options[key] for key in _CURVE})
    f_beta, f_inv_beta = prd_f_beta(precision, recall, beta=options["beta"])
    return {"f_beta": f_beta, "f_inv_beta": f_inv_beta, "prd_precision": precision, "prd_recall": recall}


register_family(
    NAME,
    outputs={"f_beta": "higher", "f_inv_beta": "higher"},
    defaults=dict(num_clusters=20, num_angles=1001, num_runs=10, seed=0, enforce_balance="subsample", beta=8),
    check=_check,
    meaning="the PRD curve's best recall-weighted and precision-weighted F-scores (Sajjadi et al. 2018)",
    docs="metrics/prd.md",
    read=_read,
    other_keys=("prd_precision", "prd_recall"),
    cli=CliSpec(
        on=True,
        seeded=True,
        flags={
            "--prd-clusters": ("num_clusters", "k-means clusters of PRD (default: 20)"),
            "--prd-runs": ("num_runs", "clusterings averaged by PRD, at most 10000 (default: 10)"),
        },
        help="the PRD curve and F_8 / F_1/8",
    ),
    order=70,
    _builtin=True,
)
