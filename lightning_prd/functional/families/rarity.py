"""Family ``rarity`` (Han et al., ICLR 2023), registered in the short form a user family takes: what it asks of the
shared k-NN pass (``pass_asks``: the real radii of ``k`` and one :class:`~lightning_prd.functional.knn.smallest.
SmallestBall`) and how its scores are read (``from_pass``); the formula and conventions are in
:mod:`lightning_prd.functional.rarity`."""

from __future__ import annotations

from lightning_prd.functional.engine.families import PassAsks, register_family
from lightning_prd.functional.knn.smallest import SmallestBall
from lightning_prd.functional.rarity import K, check_rarity_options, rarity_from_pass

register_family(
    "rarity",
    outputs={"rarity_mean": "none"},
    defaults={"k": K},
    check=check_rarity_options,
    meaning="radius of the smallest real k-NN ball holding each generated sample (Han et al. 2023)",
    per_class=True,
    docs="metrics/rarity.md",
    pass_asks=lambda options: PassAsks(real_ks=[options["k"]], reductions=[SmallestBall(options["k"])]),
    from_pass=rarity_from_pass,
    min_real=lambda options: options["k"] + 1,
    per_sample=("rarity",),
    order=210,
    _builtin=True,
)
