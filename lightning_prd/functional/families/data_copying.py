r"""Family ``data_copying`` (Meehan et al., AISTATS 2020): ``ct``, the test-share-weighted mean over k-means cells
of the training set of the Mann-Whitney z-score of generated-to-training against test-to-training nearest-neighbour
distances (below about -3: copying), ``ct_cells`` the cells kept, and dgm-eval's ``authenticity_percentage``
(:math:`100 \times` authenticity) read off the shared pass; needs a held-out real set ``test``
(:mod:`~lightning_prd.functional.held_out`).
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.data_copying import CELL_THRESHOLD, NUM_CELLS, PCA_DIM, check_data_copying_options
from lightning_prd.functional.data_copying import data_copying as data_copying_of
from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.memorization import authenticity_percentage_of, nearest_real_from_pass

NAME = "data_copying"
_KEYS = ("num_cells", "cell_threshold", "pca_dim", "seed")


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return dict(zip(_KEYS, check_data_copying_options(*(options[key] for key in _KEYS))))


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    return PassRequest(nearest="fake", real_ks=(1,), ball=ctx.plan.ball)  # the authenticity percentage


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    ct = data_copying_of(ctx.sets.real, ctx.sets.fake, ctx.test, **options)
    share = authenticity_percentage_of(nearest_real_from_pass(ctx.pass_result(NAME)))
    return {"ct": ct["ct"], "ct_cells": ct["ct_cells"], "authenticity_percentage": share}


register_family(
    NAME,
    outputs={"ct": "zero", "ct_cells": "none", "authenticity_percentage": "higher"},
    defaults=dict(num_cells=NUM_CELLS, cell_threshold=CELL_THRESHOLD, pca_dim=PCA_DIM, seed=0),
    check=_check,
    meaning="the C_T data-copying statistic against a held-out real set (Meehan et al. 2020)",
    docs="metrics/memorization.md",
    needs_test=True,
    ask=_ask,
    read=_read,
    cli=CliSpec(
        seeded=True,
        help="add the C_T data-copying statistic (ct, ct_cells; below about -3: copying) and "
        "authenticity_percentage; needs --test",
    ),
    order=180,
    _builtin=True,
)
