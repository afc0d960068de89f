r"""Family ``frechet`` (Heusel et al., NeurIPS 2017): ``frechet_distance``
:math:`\lVert\mu_r - \mu_f\rVert^2 + \mathrm{Tr}(\Sigma_r + \Sigma_f - 2(\Sigma_r\Sigma_f)^{1/2})` of the feature
Gaussians (:func:`~lightning_prd.functional.frechet.frechet_distance`); the one score a real set given as a mean
and covariance (a statistics file) serves.
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.frechet import frechet_of


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    return {"frechet_distance": frechet_of(ctx.sets)}


register_family(
    "frechet",
    outputs={"frechet_distance": "lower"},
    meaning="Fréchet distance of the feature Gaussians (the FID formula)",
    per_class=True,
    docs="metrics/frechet.md",
    read=_read,
    fit=lambda options, num_real, num_fake, lenient: options,  # frechet_of names a set too small itself
    statistics=True,
    min_real=lambda options: 2,
    min_fake=lambda options: 2,
    cli=CliSpec(on=True, help="the Fréchet distance"),
    order=100,
    _builtin=True,
)
