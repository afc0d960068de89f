r"""MIND, the Monge Inception Distance (Berthet et al. 2026): a sliced squared 2-Wasserstein distance between
the real and the generated features.

Reference: Berthet et al., "MIND: Monge Inception Distance for Generative Models Evaluation", arXiv 2605.06797
(2026); reference code: torch-fidelity, ``torch_fidelity/metric_mind.py``, ``mind_features_to_metric``.
With :math:`n` samples of each set, :math:`d` features and :math:`M` random unit directions
:math:`u_1, \dots, u_M \in \mathbb{R}^d`,

.. math::
    \mathrm{MIND} = \frac{\alpha}{M} \sum_{i=1}^{M} \frac{1}{n} \sum_{j=1}^{n}
        \bigl(\mathrm{sort}(X u_i)_j - \mathrm{sort}(Y u_i)_j\bigr)^2, \qquad \alpha = 3d,

the squared 2-Wasserstein distance between the two sets projected on each direction (the sorted projections
are the optimal, monotone, matching in one dimension), averaged over the directions and scaled by
:math:`\alpha`. Lower is better; identical sets score 0.

Convention (torch-fidelity's, step for step, so the value equals its function at the same seed): one CPU
``torch.Generator`` seeded with ``seed`` (2020, torch-fidelity's ``rng_seed``); when the sets differ in size,
the larger one is subsampled to :math:`n` = the smaller size, without replacement, as the first :math:`n`
indices of ``torch.randperm`` of its size (the only draw before the directions; the value does not depend on
which set is the real one); then the directions, ``torch.randn(num_projections, d)`` in float32, each divided
by its Euclidean norm (at least :math:`10^{-12}`); the features, subsampled, in float32 on their device; the
projections sorted per direction; the mean over samples, then over directions, both in float32; the product
with :math:`\alpha` in float64. The products run in IEEE float32 (:func:`score_precision`), whatever the
caller's TF32 or autocast settings.

The family is registered here through :func:`~lightning_prd.functional.engine.families.register_family`, so
``mind=True`` or ``mind={"num_projections": 500, "seed": 0}`` switches it on in
:func:`~lightning_prd.functional.generative_metrics`, :class:`~lightning_prd.GenerativeMetrics` (under DDP on
the gathered sets), the callback's ``metric=`` dict and ``lightning-prd evaluate --mind [num_projections=500]``.

Example:
    >>> import torch
    >>> real = torch.randn(300, 8, generator=torch.Generator().manual_seed(0))
    >>> fake = real + 1.0
    >>> round(float(mind_distance(real, fake)), 1)  # a shift by 1 in all 8 features: about 3d x 8 / d = 24
    24.2
"""

from __future__ import annotations

from typing import Any, Dict

import torch
from torch import Tensor

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.inputs import check_positive_int, check_seed
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets

#: torch-fidelity's ``mind_num_projections``
NUM_PROJECTIONS = 1000
#: torch-fidelity's ``rng_seed``
SEED = 2020


def check_mind_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """The options of ``mind=`` checked: ``num_projections`` a positive integer, ``seed`` in ``[0, 2**63 - 1]``."""
    return {
        "num_projections": check_positive_int(options["num_projections"], "num_projections"),
        "seed": check_seed(options["seed"], "seed"),
    }


@score_precision()
def mind_distance(real: Any, fake: Any, *, num_projections: int = NUM_PROJECTIONS, seed: int = SEED) -> Tensor:
    """MIND between ``real`` ``[N, D]`` and ``fake`` ``[M, D]`` (module docstring): a float64 0-dim tensor on
    their device."""
    options = check_mind_options({"num_projections": num_projections, "seed": seed})
    sets = FeatureSets.check(real, fake)
    real_t, fake_t = sets.real, sets.fake
    n, width = min(sets.num_real, sets.num_fake), real_t.shape[1]
    generator = torch.Generator(device="cpu").manual_seed(options["seed"])
    if sets.num_real > n:
        real_t = real_t[torch.randperm(sets.num_real, generator=generator)[:n].to(real_t.device)]
    elif sets.num_fake > n:
        fake_t = fake_t[torch.randperm(sets.num_fake, generator=generator)[:n].to(fake_t.device)]
    directions = torch.randn(options["num_projections"], width, generator=generator, dtype=torch.float32)
    directions = (directions / directions.norm(dim=1, keepdim=True).clamp_min(1e-12)).to(real_t.device)
    sorted_real = (real_t.to(torch.float32) @ directions.T).sort(dim=0).values
    sorted_fake = (fake_t.to(torch.float32) @ directions.T).sort(dim=0).values
    per_direction = (sorted_real - sorted_fake).square().mean(dim=0)  # the 1-D squared W2 of each direction
    return per_direction.mean().to(torch.float64) * (3.0 * width)


def mind_scores(real: Tensor, fake: Tensor, *, num_projections: int, seed: int) -> Dict[str, Tensor]:
    """``{"mind": ...}``: the family's ``compute`` on the whole (under DDP: gathered) feature sets."""
    return {"mind": mind_distance(real, fake, num_projections=num_projections, seed=seed)}


register_family(
    "mind",
    mind_scores,
    outputs={"mind": "lower"},
    defaults={"num_projections": NUM_PROJECTIONS, "seed": SEED},
    check=check_mind_options,
    meaning="sliced squared 2-Wasserstein distance x 3d over seeded random directions (Berthet et al. 2026)",
    docs="metrics/mind.md",
    _builtin=True,
)
