r"""Family ``cmmd`` (Jayasumana et al., CVPR 2024): ``cmmd``, ``scale`` times the squared MMD with the Gaussian
kernel :math:`e^{-\lVert x - y\rVert^2 / 2\sigma^2}`, from the kernel sums of the shared pass's tiles (float tiles,
never the bfloat16 screen; :func:`~lightning_prd.functional.cmmd.cmmd`).
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.cmmd import SCALE, SIGMA, check_cmmd_options, check_cmmd_sizes, cmmd_from_pass, gamma_of
from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.request import PassRequest

NAME = "cmmd"
_KEYS = ("sigma", "scale", "unbiased")


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return dict(zip(_KEYS, check_cmmd_options(*(options[key] for key in _KEYS))))


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Dict[str, Any]:
    check_cmmd_sizes(num_real, num_fake, options["unbiased"])
    return options


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    return PassRequest(kernel_gamma=gamma_of(options["sigma"]), ball=ctx.plan.ball)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    res = ctx.pass_result(NAME)
    return {"cmmd": cmmd_from_pass(res, scale=options["scale"], unbiased=options["unbiased"])}


register_family(
    NAME,
    outputs={"cmmd": "lower"},
    defaults=dict(sigma=SIGMA, scale=SCALE, unbiased=False),
    check=_check,
    meaning="Gaussian-kernel MMD of CLIP embeddings (Jayasumana et al. 2024)",
    docs="metrics/cmmd.md",
    fit=_fit,
    ask=_ask,
    read=_read,
    cli=CliSpec(help="add CMMD (Gaussian-kernel MMD; its sigma = 10 is calibrated for unit-norm CLIP embeddings)"),
    order=160,
    _builtin=True,
)
