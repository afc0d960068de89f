"""The scores of one registry family (:mod:`.families`) on checked sets: read from the shared pass, or its
``compute`` called on the whole sets, its result checked against the outputs it declared."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import torch
from torch import Tensor

from lightning_prd.functional.engine.families import Family
from lightning_prd.functional.engine.one_pass import PassResult
from lightning_prd.functional.engine.sets import FeatureSets


def family_scores(
    family: Family, options: Mapping[str, Any], sets: FeatureSets, res: Optional[PassResult]
) -> Dict[str, Tensor]:
    """The scores of ``family`` with ``options``: ``from_pass(res, **options)`` for a family of the shared
    pass (``res`` ran its asks), ``compute(real, fake, **options)`` otherwise.

    A ``compute`` result must be a dict holding each declared output as a 0-dim tensor (or a number) and
    nothing else but the declared per-sample outputs; ``ValueError`` names the family otherwise.
    """
    if family.from_pass is not None:
        if res is None:
            raise RuntimeError(f"the k-NN pass of family {family.name!r} did not run")
        return dict(family.from_pass(res, **options))
    if family.compute is None:
        raise RuntimeError(f"family {family.name!r} has neither `compute` nor `from_pass`")
    got = family.compute(sets.real, sets.fake, **options)
    if not isinstance(got, Mapping):
        raise ValueError(
            f"Expected the `compute` of family {family.name!r} to return a dict {{key: 0-dim tensor}}, but got "
            f"{type(got).__name__}"
        )
    declared = set(family.outputs) | set(family.per_sample)
    extra, missing = sorted(set(got) - declared), sorted(set(family.outputs) - set(got))
    if extra or missing:
        raise ValueError(
            f"Expected the `compute` of family {family.name!r} to return exactly its outputs {sorted(family.outputs)}"
            f" (and per-sample {sorted(family.per_sample)}), but got {sorted(got)}"
            + (f": {missing} missing" if missing else "")
            + (f": {extra} not declared in `outputs`" if extra else "")
        )
    out: Dict[str, Tensor] = {}
    for key, value in got.items():
        tensor = torch.as_tensor(value)
        if key in family.outputs and tensor.dim() != 0:
            raise ValueError(
                f"Expected output `{key}` of family {family.name!r} to be a 0-dim tensor, but got shape "
                f"{tuple(tensor.shape)}"
            )
        out[key] = tensor
    return out
