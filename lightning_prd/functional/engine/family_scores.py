"""The scores of one registry family (:mod:`.families`) on checked sets: read from the shared pass, or its
``compute`` called on the whole sets, its result checked against the outputs it declared."""

from __future__ import annotations

import numbers
from typing import Any, Dict, Mapping, Optional

import numpy as np
import torch
from torch import Tensor

from lightning_prd.functional.engine.family import Family
from lightning_prd.functional.engine.one_pass import PassResult
from lightning_prd.functional.engine.sets import FeatureSets


class FamilyError(ValueError):
    """A registry family's ``compute`` raised or returned what it did not declare; :attr:`family` names it (the
    command line names its flag)."""

    def __init__(self, family: str, message: str) -> None:
        super().__init__(message)
        self.family = family


def family_scores(
    family: Family, options: Mapping[str, Any], sets: FeatureSets, res: Optional[PassResult]
) -> Dict[str, Tensor]:
    """The scores of ``family`` with ``options``: ``from_pass(res, **options)`` for a family of the shared
    pass (``res`` ran its asks), ``compute(real, fake, **options)`` otherwise.

    A ``compute`` result must be a dict holding each declared output as a real 0-dim tensor (or a real number)
    and nothing else but the declared per-sample outputs (real tensors); an exception of ``compute`` is raised
    again as a :class:`FamilyError` naming the family and its options, a bad result as one naming the family
    and the key.
    """
    if family.from_pass is not None:
        if res is None:
            raise RuntimeError(f"the k-NN pass of family {family.name!r} did not run")
        return dict(family.from_pass(res, **options))
    if family.compute is None:
        raise RuntimeError(f"family {family.name!r} has neither `compute` nor `from_pass`")
    try:
        got = family.compute(sets.real, sets.fake, **options)
    except (KeyboardInterrupt, FamilyError):
        raise
    except Exception as err:  # noqa: BLE001 - named with the family and its options, the cause chained
        raise FamilyError(
            family.name,
            f"The `compute` of family {family.name!r} failed with options {dict(options)}: {type(err).__name__}: {err}",
        ) from err
    if not isinstance(got, Mapping):
        raise FamilyError(
            family.name,
            f"Expected the `compute` of family {family.name!r} to return a dict {{key: 0-dim tensor}}, but got "
            f"{type(got).__name__}",
        )
    declared = set(family.outputs) | set(family.per_sample)
    extra, missing = sorted(set(got) - declared, key=repr), sorted(set(family.outputs) - set(got))
    if extra or missing:
        raise FamilyError(
            family.name,
            f"Expected the `compute` of family {family.name!r} to return exactly its outputs {sorted(family.outputs)}"
            f" (and per-sample {sorted(family.per_sample)}), but got {sorted(got, key=repr)}"
            + (f": {missing} missing" if missing else "")
            + (f": {extra} not declared in `outputs`" if extra else ""),
        )
    out: Dict[str, Tensor] = {}
    for key, value in got.items():
        out[key] = _real_tensor(family.name, key, value, scalar=key in family.outputs)
    return out


def _real_tensor(name: str, key: str, value: Any, scalar: bool) -> Tensor:
    """``value`` as a real (integer or floating) tensor, 0-dim where ``scalar``; :class:`FamilyError` naming the
    family ``name`` and ``key`` otherwise."""
    start = f"Expected output `{key}` of family {name!r} to be a real {'0-dim ' if scalar else ''}tensor or number"
    if isinstance(value, Tensor):
        tensor = value
    elif isinstance(value, (numbers.Real, np.ndarray)):
        tensor = torch.as_tensor(value)
    else:
        raise FamilyError(name, f"{start}, but got {type(value).__name__} {value!r:.80}")
    if tensor.is_complex() or tensor.dtype == torch.bool or not (tensor.is_floating_point() or _integer(tensor)):
        raise FamilyError(name, f"{start}, but got dtype {tensor.dtype}")
    if scalar and tensor.dim() != 0:
        raise FamilyError(name, f"{start}, but got shape {tuple(tensor.shape)}")
    return tensor


def _integer(tensor: Tensor) -> bool:
    return tensor.dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
