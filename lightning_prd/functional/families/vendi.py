r"""Family ``vendi`` (Friedman & Dieng, TMLR 2023): the Vendi score ``vendi`` of the generated set and
``vendi_real`` of the real set, the effective number of distinct samples (:func:`~lightning_prd.functional.vendi.
vendi_score`); the real set's value is kept while the real set stays the same (``reset_real_features=False``).
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.families._rules import check_flag
from lightning_prd.functional.vendi import check_vendi_order, vendi_of

NAME = "vendi"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return {"q": check_vendi_order(options["q"]), "normalize": check_flag(options["normalize"], "normalize")}


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    real, fake = ctx.sets.real, ctx.sets.fake
    key = (NAME, options["q"], options["normalize"])
    return {
        "vendi": vendi_of(fake, name="fake", **options),
        "vendi_real": ctx.real_value(key, lambda: vendi_of(real, name="real", **options)),
    }


register_family(
    NAME,
    outputs={"vendi": "higher", "vendi_real": "higher"},
    defaults=dict(q=1.0, normalize=True),
    check=_check,
    meaning="effective number of distinct samples of each set (Friedman & Dieng 2023)",
    docs="metrics/vendi.md",
    read=_read,
    cli=CliSpec(help="add the Vendi score of the generated and of the real set"),
    order=140,
    _builtin=True,
)
