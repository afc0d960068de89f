r"""The scores of :func:`.generative_metrics` beyond the k-NN pass that need more than two sets or many
Fréchet fits: FD∞, and the memorization panel that compares the generated set with the training set
``real`` and a held-out real set ``test``.

* ``fd_infinity`` (Chong & Forsyth, CVPR 2020; :func:`.frechet_infinity.frechet_distance_infinity`):
  ``frechet_distance_infinity``, the Fréchet distance extrapolated to :math:`M \to \infty` by a line in
  :math:`1/M_i` over seeded generated subsets (dgm-eval's 15 sizes). KID needs no such extrapolation:
  its MMD² U-statistic is unbiased at every subset size.
* ``data_copying`` (Meehan et al., AISTATS 2020; :func:`.data_copying.data_copying`): ``ct``, the
  test-share-weighted mean over k-means cells of the training set of the Mann-Whitney z-score of
  generated-to-training against test-to-training nearest-neighbour distances (below about -3: copying),
  ``ct_cells`` the cells kept; and dgm-eval's ``authenticity_percentage``,
  :math:`100 \times` ``authenticity`` (:func:`.memorization.authenticity_percentage`), read off the
  shared pass.
* ``fld`` (Jiralerspong et al., NeurIPS 2023; :func:`.fld.feature_likelihood_divergence`): ``fld``,
  ``fld_train``, ``fld_gap`` (test minus train likelihood: negative when the model memorises),
  ``fld_nll_test``, ``fld_nll_train``, ``fld_nll_baseline``.

Example:
    >>> import torch
    >>> from lightning_prd.functional import generative_metrics
    >>> g = torch.Generator().manual_seed(0)
    >>> real, test = torch.randn(300, 4, generator=g), torch.randn(200, 4, generator=g)
    >>> copies = real[:200] + 1e-3 * torch.randn(200, 4, generator=g)  # a model that copies its training set
    >>> out = generative_metrics(real, copies, test=test, data_copying=dict(cell_threshold=5))
    >>> bool(out["ct"] < -3), float(out["authenticity_percentage"])
    (True, 0.0)
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from torch import Tensor

from lightning_prd.functional.data_copying import data_copying as data_copying_of
from lightning_prd.functional.engine.one_pass import PassResult
from lightning_prd.functional.engine.plan import Plan
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.fld import feature_likelihood_divergence
from lightning_prd.functional.frechet_infinity import frechet_distance_infinity
from lightning_prd.functional.memorization import authenticity_percentage_of, check_test_set, nearest_real_from_pass

__all__ = ["check_held_out_test", "held_out_scores", "needs_test"]


def needs_test(plan: Plan) -> bool:
    """Whether ``plan`` asks for a score of the held-out set ``test``."""
    return plan.data_copying is not None or plan.fld is not None


def check_held_out_test(plan: Plan, real: Tensor, test: Optional[Any]) -> Optional[Tensor]:
    """``test`` checked against the checked ``real`` features: required when :func:`needs_test`, refused
    otherwise (each error names the argument ``test``)."""
    if not needs_test(plan):
        if test is not None:
            raise ValueError(
                "Expected no argument `test` without a score that uses it (`data_copying`, `fld`), but got a test set"
            )
        return None
    if test is None:
        asked = " and ".join(n for n, o in (("data_copying", plan.data_copying), ("fld", plan.fld)) if o)
        raise ValueError(f"Expected argument `test` (a held-out real set) for `{asked}`, but got None")
    return check_test_set(real, test)


def held_out_scores(
    sets: FeatureSets,
    plan: Plan,
    test: Optional[Tensor],
    res: Optional[PassResult],
) -> Dict[str, Tensor]:
    """FD∞ and the memorization panel of ``plan`` on checked sets, with ``test`` checked by
    :func:`check_held_out_test` (``res``: the shared k-NN pass, for the authenticity percentage)."""
    out: Dict[str, Tensor] = {}
    real, fake = sets.real, sets.fake
    if plan.fd_infinity is not None:
        fd = frechet_distance_infinity(real, fake, **plan.fd_infinity)
        out["frechet_distance_infinity"] = fd["frechet_distance_infinity"]
    if plan.data_copying is not None:
        ct = data_copying_of(real, fake, test, **plan.data_copying)
        out["ct"], out["ct_cells"] = ct["ct"], ct["ct_cells"]
        if res is not None and plan.authenticity:  # the pass found each generated sample's nearest real one
            out["authenticity_percentage"] = authenticity_percentage_of(nearest_real_from_pass(res))
    if plan.fld is not None:
        out.update(feature_likelihood_divergence(real, fake, test, **plan.fld))
    return out
