"""Shared base of the package's Metric classes: feature states, validation, DDP, real-side cache."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np
import torch
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import as_features, check_block_bytes
from lightning_prd.functional.engine.one_pass import RealSide
from lightning_prd.functional.knn.shard import Shard, current_shard
from lightning_prd.metrics.gather import gather_features


class FeatureMetric(Metric):
    """Accumulates real and generated features (``update(features, real)``) and computes at the end.

    States ``real_features`` / ``fake_features`` are lists with ``dist_reduce_fx="cat"``; the
    same names in every class let a ``MetricCollection`` store them once. Under DDP they are
    gathered with :func:`lightning_prd.metrics.gather.gather_features`, which handles ranks with
    different sample counts and ranks that received no samples.

    Args:
        feature_extractor: module or callable applied to ``update``'s input (identity if None).
        reset_real_features: if False, ``reset()`` keeps the real features *and* the real-side
            k-NN radii, so the next evaluation only pays for the generated side. Set it here: in a
            ``MetricCollection`` it decides which members may share a compute group (members that
            keep their real set and members that reset it never do).
        block_bytes: memory budget of one distance tile (and of each set's centred working
            copy, made when the set fits it: peak extra memory is at most about 3x this).
        dtype: GEMM dtype for k-NN distances (None: float32, or float64 for float64 features).
        split_work: under DDP, after the features are gathered, split the work across the
            ranks (each computes 1/W of the k-NN and kernel distance tiles, of KID's subsets and
            of TopP&R's kernel density tiles) and combine the results, instead of every rank
            computing everything. Every rank still gets the full result.
        kwargs: passed to :class:`torchmetrics.Metric` (``dist_sync_fn`` defaults to the
            uneven-rank gather above).
    """

    # list states while accumulating; torchmetrics concatenates them into one tensor when it syncs
    real_features: Union[List[Tensor], Tensor]
    fake_features: Union[List[Tensor], Tensor]

    is_differentiable = False
    full_state_update = False
    feature_network: str = "feature_extractor"

    def __init__(
        self,
        feature_extractor: Optional[Callable[[Any], Tensor]] = None,
        reset_real_features: bool = True,
        block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
        dtype: Optional[torch.dtype] = None,
        split_work: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("dist_sync_fn", gather_features)
        super().__init__(**kwargs)
        if not isinstance(reset_real_features, bool):
            raise ValueError(f"Expected argument `reset_real_features` to be a bool, but got {reset_real_features!r}")
        if dtype not in (None, torch.float32, torch.float64):
            raise ValueError(f"Expected argument `dtype` to be None, torch.float32 or torch.float64, but got {dtype}")
        if feature_extractor is not None and not callable(feature_extractor):
            raise TypeError(
                f"Expected argument `feature_extractor` to be callable, but got {type(feature_extractor).__name__}"
            )
        if feature_extractor is None:
            self.feature_extractor: nn.Module = nn.Identity()
        elif isinstance(feature_extractor, nn.Module):
            self.feature_extractor = feature_extractor
        else:
            self.feature_extractor = _Wrap(feature_extractor)
        self.reset_real_features = reset_real_features
        self.block_bytes = check_block_bytes(block_bytes)
        self.knn_dtype = dtype
        if not isinstance(split_work, bool):
            raise ValueError(f"Expected argument `split_work` to be a bool, but got {split_work!r}")
        self.split_work = split_work
        self._real_cache: Optional[RealSide] = None
        self.add_state("real_features", [], dist_reduce_fx="cat")
        self.add_state("fake_features", [], dist_reduce_fx="cat")
        if not reset_real_features:
            # An always-empty marker state. A MetricCollection puts metrics with the same state names in one
            # compute group, whose members then share the leader's states and its reset: the marker keeps a
            # metric that keeps its real set apart from members that reset theirs (empty, it costs no sync).
            self.add_state("keeps_real_features", [], dist_reduce_fx=None)

    def update(self, features: Any, real: bool) -> None:
        """Add a batch of samples (passed through ``feature_extractor``) to the real or generated set.

        A rejected batch raises ``ValueError``/``TypeError`` and leaves the accumulated
        features untouched. The metric stores its own copy of every batch (unless validation
        already made one, e.g. by upcasting float16), so refilling a buffer between steps, an
        extractor returning a view of the batch or a persistent output buffer cannot change what
        was accumulated. The list state is rebound, not appended to in place: members of a
        ``MetricCollection`` compute group share list objects, and each member's ``forward``
        must not add the batch to the others' lists.
        """
        if not isinstance(real, bool):
            raise TypeError(f"Expected argument `real` to be a bool (True for real samples), but got {real!r}")
        out = self.feature_extractor(features)
        feats = as_features(out, "features", allow_empty=True).detach()
        first = self._first_accumulated()
        if first is not None and feats.shape[1] != first.shape[1]:
            raise ValueError(
                f"Expected argument `features` to have {first.shape[1]} features like the samples accumulated so far, "
                f"but got shape {tuple(feats.shape)}"
            )
        if first is not None and feats.device != first.device and not self.compute_on_cpu:
            # (with compute_on_cpu torchmetrics moves the states to the CPU after each update)
            raise ValueError(
                f"Expected argument `features` on {first.device} like the samples accumulated so far, "
                f"but got {feats.device}"
            )
        if _shares_memory(feats, out):
            feats = feats.clone()
        if first is None and feats.shape[0]:  # the first samples fix the width: drop empty batches of another
            for other in ("real_features", "fake_features"):
                state = getattr(self, other)
                if isinstance(state, list) and any(t.shape[1:] != feats.shape[1:] for t in state):
                    setattr(self, other, [t for t in state if t.shape[1:] == feats.shape[1:]])
        name = "real_features" if real else "fake_features"
        setattr(self, name, list(getattr(self, name)) + [feats.contiguous()])

    def forward(self, features: Any, real: bool) -> None:
        """``metric(features, real=...)`` accumulates like :meth:`update` and returns ``None``.

        torchmetrics' ``forward`` also computes the score of the batch alone, which for a set
        score of two sets is undefined (a batch holds one role, and a batch's own k-NN radii are
        not those of the whole set): it raised, and the reset it does for the batch value then
        dropped the features accumulated so far. Call :meth:`compute` for the score.
        """
        self.update(features, real=real)
        self._forward_cache = None
        return None

    def _first_accumulated(self) -> Optional[Tensor]:
        for state in (self.real_features, self.fake_features):
            tensors = state if isinstance(state, list) else [state]
            for t in tensors:
                if t.ndim == 2 and t.shape[0]:  # (an empty batch does not fix the width)
                    return t
        return None

    def _features(self, which: str) -> Tensor:
        state = getattr(self, f"{which}_features")
        feats = dim_zero_cat(state) if isinstance(state, list) and state else state
        if isinstance(state, list) and len(state) > 1 and not self._is_synced:
            # keep the concatenation as the state: one copy of the features, and the real-side
            # cache (which holds this tensor) is then recognised by identity on the next compute
            state[:] = [feats]
        if isinstance(feats, list) or feats.numel() == 0:
            raise ValueError(
                f"No {which} features accumulated: call `update(features, real={which == 'real'})` before `compute()`"
            )
        return feats

    def real_side(self, real: Tensor) -> Optional[RealSide]:
        """The cached real side (``knn_pass`` reuses it only if it still matches ``real``)."""
        return self._real_cache

    def knn_shard(self) -> Optional[Shard]:
        """This rank's share of the tile work when the states are synced across >1 ranks."""
        if not self.split_work or not self._is_synced:
            return None
        return current_shard(self.process_group)

    def compute(self) -> Dict[str, Tensor]:
        """Every score of the accumulated sets. Each batch was checked by :meth:`update` (and each rank's
        by its own ``update`` before a sync), so :meth:`_compute` wraps the sets in a
        :class:`~lightning_prd.functional.engine.sets.FeatureSets` as they are, without checking them again."""
        return self._compute(self._features("real"), self._features("fake"))

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        raise NotImplementedError

    def reset(self) -> None:
        """Clear the accumulated features; keep the real ones (and their radii) if configured."""
        if self.reset_real_features:
            self._real_cache = None
            super().reset()
            return
        kept = list(self.real_features)  # the base reset clears list states in place
        super().reset()
        self.real_features = kept

    def plot(self, val: Optional[Any] = None, ax: Optional[Any] = None) -> Any:
        """Plot the scalar scores (one call) or their history (a list of ``compute()`` results)."""
        return self._plot(val, ax)


class _Wrap(nn.Module):
    """Lets a plain callable stand where torchmetrics' ``FeatureShare`` expects a module."""

    def __init__(self, fn: Callable[[Any], Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Any) -> Tensor:
        return self.fn(x)


def _shares_memory(feats: Tensor, source: Any) -> bool:
    """Whether ``feats`` may use the memory of ``source`` (the extractor's output: the same tensor, a view,
    a wrapped array), i.e. whether validation left it without a copy of its own."""
    if feats.numel() == 0:
        return False
    try:
        if isinstance(source, Tensor):
            return feats.untyped_storage().data_ptr() == source.untyped_storage().data_ptr()
        if isinstance(source, np.ndarray) and feats.device.type == "cpu":
            return bool(np.may_share_memory(feats.numpy(), source))
    except (RuntimeError, NotImplementedError, TypeError):  # tensors without storage (e.g. some subclasses)
        return True
    return False
