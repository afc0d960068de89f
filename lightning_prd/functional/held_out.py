r"""The held-out real set ``test`` of the families that need one (their records' ``needs_test``), and the scores
beyond the k-NN pass that need more than two sets or many Fréchet fits: FD∞, and the memorization panel that
compares the generated set with the training set ``real`` and ``test`` (each family's record in
:mod:`lightning_prd.functional.families` reads its scores).

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

from typing import Any, List, Optional

from torch import Tensor

from lightning_prd.functional.engine.plan import Plan
from lightning_prd.functional.memorization import check_test_set

__all__ = ["check_held_out_test", "needs_test", "held_out_families"]


def held_out_families(plan: Plan) -> List[str]:
    """The switched-on families of ``plan`` that score against a held-out real set ``test`` (their records'
    ``needs_test``)."""
    return [family.name for family, _ in plan.registered() if family.needs_test]


def needs_test(plan: Plan) -> bool:
    """Whether ``plan`` asks for a score of the held-out set ``test``."""
    return bool(held_out_families(plan))


def check_held_out_test(plan: Plan, real: Tensor, test: Optional[Any]) -> Optional[Tensor]:
    """``test`` checked against the checked ``real`` features: required when :func:`needs_test`, refused
    otherwise (each error names the argument ``test``)."""
    asked = held_out_families(plan)
    if not asked:
        if test is not None:
            from lightning_prd.functional.engine.families import families

            users = ", ".join(f"`{f.keyword}`" for f in families() if f.needs_test)
            raise ValueError(f"Expected no argument `test` without a score that uses it ({users}), but got a test set")
        return None
    if test is None:
        raise ValueError(f"Expected argument `test` (a held-out real set) for `{' and '.join(asked)}`, but got None")
    return check_test_set(real, test)
