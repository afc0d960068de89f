r"""Family ``top_pr`` (Kim et al., NeurIPS 2023): TopP&R's ``top_precision``, ``top_recall``, ``top_f1`` on
topologically significant supports, its own pass in a random 32-D projection
(:func:`~lightning_prd.functional.top_pr.top_precision_recall`, the official code's settings).
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.top_pr import TOP_PR_DEFAULTS, check_top_pr_options, top_pr_scores

NAME = "top_pr"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return check_top_pr_options(**options, owner=NAME)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    return dict(top_pr_scores(ctx.sets, options, block_bytes=ctx.block_bytes, shard=ctx.shard))


register_family(
    NAME,
    outputs={"top_precision": "higher", "top_recall": "higher", "top_f1": "higher"},
    defaults=dict(TOP_PR_DEFAULTS),
    check=_check,
    meaning="precision and recall on topologically significant supports (Kim et al. 2023)",
    docs="metrics/top-pr.md",
    read=_read,
    cli=CliSpec(help="add TopP&R (top_precision, top_recall, top_f1; its own pass; more than 160 samples per set)"),
    order=150,
    _builtin=True,
)
