r"""Family ``fld`` (Jiralerspong et al., NeurIPS 2023): the feature likelihood divergence ``fld`` of a kernel density
fitted on the generated set, its likelihoods of the held-out real set ``test`` and of the training set, ``fld_gap``
(test minus train: negative when the model memorises) (:func:`~lightning_prd.functional.fld.
feature_likelihood_divergence`); needs ``test``.
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.fld import (
    BATCH_SIZE,
    GEN_SIZE,
    LR,
    NUM_EPOCHS,
    check_fld_options,
    feature_likelihood_divergence,
)

NAME = "fld"
_KEYS = ("gen_size", "num_epochs", "lr", "batch_size")


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    gen_size, num_epochs, lr, batch_size = (options[key] for key in _KEYS)
    checked = check_fld_options(gen_size, num_epochs, lr, batch_size, None, options["seed"])
    return {**dict(zip(_KEYS, checked[:4])), "seed": checked[5]}


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    return dict(feature_likelihood_divergence(ctx.sets.real, ctx.sets.fake, ctx.test, **options))


register_family(
    NAME,
    outputs={
        "fld": "lower",
        "fld_gap": "zero",
        "fld_nll_test": "lower",
        "fld_train": "none",
        "fld_nll_train": "none",
        "fld_nll_baseline": "none",
    },
    defaults=dict(gen_size=GEN_SIZE, num_epochs=NUM_EPOCHS, lr=LR, batch_size=BATCH_SIZE, seed=0),
    check=_check,
    meaning="feature likelihood divergence against a held-out real set (Jiralerspong et al. 2023)",
    docs="metrics/memorization.md",
    needs_test=True,
    read=_read,
    cli=CliSpec(
        seeded=True,
        help="add the Feature Likelihood Divergence (fld, fld_gap: negative is memorization, and its "
        "likelihoods); needs --test",
    ),
    order=190,
    _builtin=True,
)
