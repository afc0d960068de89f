"""``FeatureSets``: the two feature sets of one call, checked once, handed to the machinery.

Every public entry point (each family function, ``generative_metrics``, each Metric's ``compute``)
turns its inputs into one ``FeatureSets`` — :meth:`FeatureSets.check` converts and validates
(:func:`~lightning_prd.functional.engine.inputs.as_features` on each set, the same width and device
for both, then both on :func:`~lightning_prd.functional.engine.devices.compute_device` of that
device: the CPU for a device without float64 such as Apple's MPS) — and passes it down; the
machinery below (the k-NN pass, PRD's clustering, the Fréchet statistics, KID) takes it as it is
and never validates again. The per-set column minima and maxima, which the range checks and the
choice of tile dtype need, are computed at most once per set, when first asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.engine.devices import to_compute_device
from lightning_prd.functional.engine.inputs import as_features, check_pair, column_bounds, compute_dtype, span


@dataclass(frozen=True, eq=False)
class FeatureSets:
    """``real`` ``[N, D]`` and ``fake`` ``[M, D]``: finite, floating (float32 or float64), contiguous,
    detached, of one width on one device, one that has float64
    (:func:`~lightning_prd.functional.engine.devices.compute_device`).

    Build it with :meth:`check` from user input; the constructor itself trusts its arguments (the
    Metric classes use it on features their ``update`` already checked, batch by batch).

    Example:
        >>> import torch
        >>> sets = FeatureSets.check([[0.0, 1.0], [2.0, 3.0]], torch.zeros(3, 2))
        >>> sets.real.dtype, sets.num_real, sets.num_fake, sets.spread
        (torch.float32, 2, 3, 3.0)
    """

    real: Tensor
    fake: Tensor

    @classmethod
    def check(cls, real: Any, fake: Any) -> FeatureSets:
        """Convert and validate both sets (errors name the argument ``real`` or ``fake``); on a device
        without float64 (MPS, XLA) both are copied to the CPU, where the scores are then computed."""
        real_t, fake_t = as_features(real, "real"), as_features(fake, "fake")
        check_pair(real_t, fake_t)
        return cls(to_compute_device(real_t), to_compute_device(fake_t))

    @property
    def num_real(self) -> int:
        return int(self.real.shape[0])

    @property
    def num_fake(self) -> int:
        return int(self.fake.shape[0])

    @cached_property
    def real_bounds(self) -> Tuple[Tensor, Tensor]:
        """Column-wise float64 minimum and maximum of ``real`` (one pass, made once)."""
        return column_bounds(self.real)

    @cached_property
    def fake_bounds(self) -> Tuple[Tensor, Tensor]:
        """Column-wise float64 minimum and maximum of ``fake`` (one pass, made once)."""
        return column_bounds(self.fake)

    @property
    def spread(self) -> float:
        """``R``: the largest column range over both sets together."""
        return span(self.real_bounds, self.fake_bounds)

    def spread_of(self, role: str) -> float:
        """``R`` of one set, ``role`` ``"real"`` or ``"fake"``."""
        return span(self.real_bounds if role == "real" else self.fake_bounds)

    def compute_dtype(self, dtype: Optional[torch.dtype]) -> torch.dtype:
        """The tile dtype for these sets
        (:func:`~lightning_prd.functional.engine.inputs.compute_dtype`, from the kept bounds)."""
        wide = torch.float64 in (self.real.dtype, self.fake.dtype)
        needs_range = dtype != torch.float64 or wide  # float32 values always fit float64's range
        return compute_dtype(self.real, self.fake, dtype, spread=self.spread if needs_range else None)

    def with_fake(self, fake: Tensor) -> FeatureSets:
        """The same real set with another generated set drawn from this one's (a subset or a
        reordering: already checked); the real set's bounds are kept, not computed again."""
        out = FeatureSets(self.real, fake)
        if "real_bounds" in self.__dict__:
            out.__dict__["real_bounds"] = self.__dict__["real_bounds"]
        return out
