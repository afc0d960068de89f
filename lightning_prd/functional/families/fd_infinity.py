r"""Family ``fd_infinity`` (Chong & Forsyth, CVPR 2020): ``frechet_distance_infinity``, the Fréchet distance
extrapolated to :math:`M \to \infty` by a line in :math:`1/M_i` over seeded generated subsets
(:func:`~lightning_prd.functional.frechet_infinity.frechet_distance_infinity`,
:mod:`~lightning_prd.functional.held_out`).
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.inputs import check_int, check_seed
from lightning_prd.functional.frechet_infinity import NUM_POINTS, frechet_distance_infinity

NAME = "fd_infinity"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    sizes = {
        key: None if options[key] is None else check_int(options[key], key, minimum=2)
        for key in ("min_size", "max_size")
    }
    return {
        "num_points": check_int(options["num_points"], "num_points", minimum=2),
        **sizes,
        "seed": check_seed(options["seed"]),
    }


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    fd = frechet_distance_infinity(ctx.sets.real, ctx.sets.fake, **options)
    return {"frechet_distance_infinity": fd["frechet_distance_infinity"]}


register_family(
    NAME,
    outputs={"frechet_distance_infinity": "lower"},
    defaults=dict(num_points=NUM_POINTS, min_size=None, max_size=None, seed=0),
    check=_check,
    meaning="the Fréchet distance extrapolated to infinitely many samples (Chong & Forsyth 2020)",
    docs="metrics/fd-infinity.md",
    read=_read,
    other_keys=("frechet_distance_infinity_sizes", "frechet_distance_infinity_values"),
    cli=CliSpec(
        seeded=True,
        help="add FD-infinity (frechet_distance_infinity): the Frechet distance extrapolated to infinitely many "
        "generated samples, from 15 subsets of 2 to M samples seeded by --seed",
    ),
    order=170,
    _builtin=True,
)
