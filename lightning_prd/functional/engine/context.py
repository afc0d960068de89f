"""What a family's record reads when it scores: :class:`ScoreContext`, one per evaluation.

:func:`~lightning_prd.functional.generative.scores_from_plan` builds it, runs the shared k-NN pass of the merged
:class:`~.request.PassRequest` once (``res``) and hands it to each switched-on family's ``read``. Work that two
families share within one evaluation (the error bars of precision, recall, density and coverage) is done once
through :meth:`ScoreContext.once`; values of the real set alone that a caller keeps across evaluations (the real
set's Vendi score under ``reset_real_features=False``) go through :meth:`ScoreContext.real_value`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Hashable, Optional

import torch

from lightning_prd.functional import knn
from lightning_prd.functional.engine.one_pass import PassResult, RealSide
from lightning_prd.functional.engine.sets import FeatureSets


@dataclass
class ScoreContext:
    """One evaluation's sets, options and shared results.

    Attributes:
        sets: the checked real and generated features.
        plan: the :class:`~.plan.Plan` (its call options: ``ball``, ``per_sample``, ``error_bars``).
        res: the shared k-NN pass (None when no family asked for one).
        dtype, block_bytes: the pass's GEMM dtype and tile budget.
        real_cache: the real side of an earlier pass, reused when it matches.
        shard: the process group's split of the tile work, or None.
        test: the checked held-out real set, or None.
        real_memo: values of the real set alone, kept by the caller while its real set stays the same.
    """

    sets: FeatureSets
    plan: Any
    res: Optional[PassResult] = None
    dtype: Optional[torch.dtype] = None
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES
    real_cache: Optional[RealSide] = None
    shard: Optional[Any] = None
    test: Optional[torch.Tensor] = None
    real_memo: Optional[Dict[Hashable, Any]] = None
    _once: Dict[Hashable, Any] = field(default_factory=dict)

    def once(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per evaluation for ``key`` (two families sharing one piece of work)."""
        if key not in self._once:
            self._once[key] = make()
        return self._once[key]

    def real_value(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()`` for a value of the real set alone, reused from :attr:`real_memo` when the caller keeps one."""
        if self.real_memo is None:
            return make()
        if key not in self.real_memo:
            self.real_memo[key] = make()
        return self.real_memo[key]

    def pass_result(self, name: str) -> PassResult:
        """The shared pass, which family ``name`` asked for."""
        if self.res is None:
            raise RuntimeError(f"the k-NN pass of family {name!r} did not run")
        return self.res
