"""Shared base of the package's Metric classes: feature states, validation, DDP, real-side cache."""

from __future__ import annotations

import weakref
from copy import deepcopy
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from lightning_prd.functional import knn
from lightning_prd.functional.engine.devices import to_compute_device
from lightning_prd.functional.engine.inputs import as_features, check_block_bytes
from lightning_prd.functional.engine.one_pass import RealSide
from lightning_prd.functional.engine.precision import (
    DEFAULT_EXTRACTOR_PRECISION,
    check_extractor_precision,
    precision_context,
    score_precision,
)
from lightning_prd.functional.knn.collectives import to_group
from lightning_prd.functional.knn.shard import Shard, current_shard
from lightning_prd.metrics.gather import gather_features

#: the sets ``update`` accepts beside ``real`` and ``fake`` once a metric enables them
EXTRA_ROLES = ("test",)
ALL_ROLES = ("real", "fake") + EXTRA_ROLES


def check_like_accumulated(
    batch: Tensor, first: Optional[Tensor], *, name: str, unit: str, compute_on_cpu: bool
) -> None:
    """``ValueError`` when ``batch`` (argument ``name``) has another width (``unit`` per sample) or device than
    ``first``, a batch accumulated before (None: nothing accumulated yet, anything goes)."""
    if first is None:
        return
    if batch.shape[1] != first.shape[1]:
        raise ValueError(
            f"Expected argument `{name}` to have {first.shape[1]} {unit} like the samples accumulated so far, "
            f"but got shape {tuple(batch.shape)}"
        )
    if batch.device != first.device and not compute_on_cpu:
        # (with compute_on_cpu torchmetrics moves the states to the CPU after each update)
        raise ValueError(
            f"Expected argument `{name}` on {first.device} like the samples accumulated so far, but got {batch.device}"
        )


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
        extractor_precision: the precision ``feature_extractor`` runs in (:mod:`lightning_prd.features.precision`):
            ``"ieee"`` (default: no autocast, no gradients, IEEE float32 matmuls and convolutions, whatever the
            caller set, e.g. a ``bf16-mixed`` validation step) or ``"fast"`` (the caller's TF32 and autocast
            settings; faster on GPUs, features not bit-comparable with the reference tools').
        kwargs: passed to :class:`torchmetrics.Metric` (``dist_sync_fn`` defaults to the
            uneven-rank gather above).

    Kept real sets under DDP: with ``reset_real_features=False`` the real-data states (``real``, a
    ``test`` set, their labels) are gathered at the first evaluation and the gathered tensors kept; later
    evaluations gather only the generated set, as long as no rank added or replaced a real batch (one
    all-reduce of a flag decides; any change on any rank gathers the real set again). The gathered real
    set stays in memory between evaluations (on the states' device).
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
        extractor_precision: str = DEFAULT_EXTRACTOR_PRECISION,
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
        self.extractor_precision = check_extractor_precision(extractor_precision)
        self._real_cache: Optional[RealSide] = None
        self._synced_real: Optional[_Synced] = None  # kept real-data states as last gathered (see _sync_dist)
        self._roles: Tuple[str, ...] = ("real", "fake")
        self._labels_on = False
        self.add_state("real_features", [], dist_reduce_fx="cat")
        self.add_state("fake_features", [], dist_reduce_fx="cat")
        if not reset_real_features:
            # An always-empty marker state. A MetricCollection puts metrics with the same state names in one
            # compute group, whose members then share the leader's states and its reset: the marker keeps a
            # metric that keeps its real set apart from members that reset theirs (empty, it costs no sync).
            self.add_state("keeps_real_features", [], dist_reduce_fx=None)

    def enable_role(self, role: str) -> None:
        """Accept ``update(features, role=role)`` for a set beside ``real`` and ``fake``: ``"test"``, a
        held-out real set (the data-copying and likelihood scores compare generated samples with the
        training set ``real`` and this one). Its state ``test_features`` is kept across ``reset()`` like
        the real set when ``reset_real_features`` is False."""
        if role not in EXTRA_ROLES:
            raise ValueError(f"Expected argument `role` to be one of {EXTRA_ROLES}, but got {role!r}")
        if role not in self._roles:
            self._roles = self._roles + (role,)
            self.add_state(f"{role}_features", [], dist_reduce_fx="cat")
            if self._labels_on:
                self.add_state(f"{role}_labels", [], dist_reduce_fx="cat")

    def enable_labels(self) -> None:
        """Accept ``update(features, real=..., labels=...)``: one integer class label per sample, kept in
        the states ``<role>_labels`` beside the features (gathered with them under DDP, in the same order).
        Labels are then required for the real and generated sets and optional for a ``test`` set."""
        if not self._labels_on:
            self._labels_on = True
            for role in self._roles:
                self.add_state(f"{role}_labels", [], dist_reduce_fx="cat")

    def _role_of(self, real: Optional[bool], role: Optional[str]) -> str:
        if role is None:
            if not isinstance(real, bool):
                raise TypeError(f"Expected argument `real` to be a bool (True for real samples), but got {real!r}")
            return "real" if real else "fake"
        if not isinstance(role, str) or role not in ALL_ROLES:
            raise ValueError(f"Expected argument `role` to be one of {ALL_ROLES}, but got {role!r}")
        if real is not None and (not isinstance(real, bool) or ("real" if real else "fake") != role):
            raise ValueError(f"Expected either `real` or `role`, but got real={real!r} and role={role!r}")
        if role not in self._roles:
            raise ValueError(
                f"Expected argument `role` to be one of {self._roles} for this metric, but got {role!r}: "
                f"a {role!r} set serves only the scores that ask for one"
            )
        return role

    def _check_labels(self, labels: Any, rows: int, device: torch.device, role: str) -> Optional[Tensor]:
        if labels is None:
            if self._labels_on and role in ("real", "fake"):  # the per-class scores compare these two
                raise ValueError(
                    "Expected argument `labels` (one class label per sample) for a metric with per-class scores, "
                    "but got None"
                )
            return None
        if not self._labels_on:
            raise ValueError(
                "Expected no argument `labels` for a metric without per-class scores, but got labels "
                "(switch per-class scores on to use them)"
            )
        lab = torch.as_tensor(labels)
        if lab.dtype == torch.bool or lab.is_floating_point() or lab.is_complex():
            raise TypeError(f"Expected argument `labels` to hold integers, but got dtype {lab.dtype}")
        if lab.ndim != 1 or lab.shape[0] != rows:
            raise ValueError(
                f"Expected argument `labels` of shape ({rows},), one per sample of `features`, "
                f"but got shape {tuple(lab.shape)}"
            )
        return lab.to(device=device, dtype=torch.long).clone()

    def update(
        self, features: Any, real: Optional[bool] = None, *, role: Optional[str] = None, labels: Any = None
    ) -> None:
        """Add a batch of samples (passed through ``feature_extractor``) to the real or generated set
        (``real=True`` / ``False``), or to the set ``role`` names (``"real"``, ``"fake"``, or ``"test"``
        once :meth:`enable_role` accepts it); ``labels`` (with :meth:`enable_labels`) gives each sample's class.

        A rejected batch raises ``ValueError``/``TypeError`` and leaves the accumulated
        features untouched. The metric stores its own copy of every batch (unless validation
        already made one, e.g. by upcasting float16), so refilling a buffer between steps, an
        extractor returning a view of the batch or a persistent output buffer cannot change what
        was accumulated. The list state is rebound, not appended to in place: members of a
        ``MetricCollection`` compute group share list objects, and each member's ``forward``
        must not add the batch to the others' lists.
        """
        which = self._role_of(real, role)
        if type(self.feature_extractor) is nn.Identity:  # no extractor: nothing is computed
            out = features
        else:
            with precision_context(self.extractor_precision):
                out = self.feature_extractor(features)
        feats = as_features(out, "features", allow_empty=True).detach()
        lab = self._check_labels(labels, feats.shape[0], feats.device, which)
        first = self._first_accumulated()
        check_like_accumulated(feats, first, name="features", unit="features", compute_on_cpu=self.compute_on_cpu)
        if _shares_memory(feats, out):
            feats = feats.clone()
        if first is None and feats.shape[0]:  # the first samples fix the width: drop empty batches of another
            for other in self._roles:
                state = getattr(self, f"{other}_features")
                if isinstance(state, list) and any(t.shape[1:] != feats.shape[1:] for t in state):
                    keep = [i for i, t in enumerate(state) if t.shape[1:] == feats.shape[1:]]
                    setattr(self, f"{other}_features", [state[i] for i in keep])
                    labels = getattr(self, f"{other}_labels", None)
                    if isinstance(labels, list) and len(labels) == len(state):  # (a test set's labels are optional)
                        setattr(self, f"{other}_labels", [labels[i] for i in keep])
        setattr(self, f"{which}_features", list(getattr(self, f"{which}_features")) + [feats.contiguous()])
        if lab is not None:
            setattr(self, f"{which}_labels", list(getattr(self, f"{which}_labels")) + [lab])

    def forward(
        self, features: Any, real: Optional[bool] = None, *, role: Optional[str] = None, labels: Any = None
    ) -> None:
        """``metric(features, real=...)`` accumulates like :meth:`update` and returns ``None``.

        torchmetrics' ``forward`` also computes the score of the batch alone, which for a set
        score of two sets is undefined (a batch holds one role, and a batch's own k-NN radii are
        not those of the whole set): it raised, and the reset it does for the batch value then
        dropped the features accumulated so far. Call :meth:`compute` for the score.
        """
        self.update(features, real=real, role=role, labels=labels)
        self._forward_cache = None
        return None

    def _first_accumulated(self) -> Optional[Tensor]:
        for state in (getattr(self, f"{role}_features") for role in self._roles):
            tensors = state if isinstance(state, list) else [state]
            for t in tensors:
                if t.ndim == 2 and t.shape[0]:  # (an empty batch does not fix the width)
                    return t
        return None

    def _features(self, which: str) -> Tensor:
        """The accumulated ``which`` set as one tensor on the device the scores are computed on
        (:func:`~lightning_prd.functional.engine.devices.compute_device` of the states' device: the
        states' own, or a CPU copy for a device without float64 such as Apple's MPS; the real-side
        cache then lives there too)."""
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
        return to_compute_device(feats)

    def _labels(self, which: str) -> Tensor:
        """The class labels of the ``which`` set, in the order of its features (``[n]`` int64), on the device
        of :meth:`_features`."""
        if not self._labels_on:
            raise ValueError("Expected a metric with per-class scores (labels), but it takes none")
        state = getattr(self, f"{which}_labels")
        if isinstance(state, list):
            if not state:
                return torch.zeros(0, dtype=torch.long)
            return to_compute_device(torch.cat([t.reshape(-1) for t in state]).long())
        return to_compute_device(state.reshape(-1).long())

    def real_side(self, real: Tensor) -> Optional[RealSide]:
        """The cached real side (``knn_pass`` reuses it only if it still matches ``real``)."""
        return self._real_cache

    def knn_shard(self) -> Optional[Shard]:
        """This rank's share of the tile work when the states are synced across >1 ranks."""
        if not self.split_work or not self._is_synced:
            return None
        return current_shard(self.process_group)

    def _kept_states(self) -> Tuple[str, ...]:
        """The states ``reset()`` keeps (real-data features and labels), when ``reset_real_features`` is False."""
        if self.reset_real_features:
            return ()
        return tuple(
            name
            for role in self._roles
            if role != "fake"
            for name in (f"{role}_features", f"{role}_labels")
            if name in self._reductions
        )

    def _copy_state_dict(self) -> Dict[str, Union[Tensor, List[Any]]]:
        """The local states saved by ``sync()`` (and restored by ``unsync()``). The kept real-data lists are
        copied as lists of the same tensors (accumulated batches are never written in place), so their
        identity tells the next sync whether they changed; every other state is cloned as torchmetrics does."""
        kept = self._kept_states()
        cache: Dict[str, Union[Tensor, List[Any]]] = {}
        for attr in self._defaults:
            value = getattr(self, attr)
            if isinstance(value, Tensor):
                cache[attr] = value.detach().clone()
            elif attr in kept:
                cache[attr] = list(value)
            else:
                cache[attr] = [v.detach().clone() if isinstance(v, Tensor) else deepcopy(v) for v in value]
        return cache

    def _sync_dist(self, dist_sync_fn: Callable = gather_features, process_group: Optional[Any] = None) -> None:
        """Gather the states; the kept real-data states only when some rank's changed since they were last
        gathered (see the class docstring)."""
        kept = self._kept_states()
        if not kept:
            super()._sync_dist(dist_sync_fn, process_group)
            return
        group = process_group or self.process_group
        local = {name: getattr(self, name) for name in kept}
        key = (id(group), dist_sync_fn) + tuple(
            tuple(id(t) for t in v) if isinstance(v, list) else (id(v),) for v in local.values()
        )
        synced = _SYNCED.get(key)
        flag = to_group(torch.tensor([int(synced is not None)], dtype=torch.int32), group)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MIN, group=group)
        reductions = self._reductions
        if int(flag.item()):
            assert synced is not None  # (this rank voted 1)
            self._reductions = {k: v for k, v in reductions.items() if k not in kept}
            try:
                super()._sync_dist(dist_sync_fn, process_group)
            finally:
                self._reductions = reductions
            for name in kept:
                setattr(self, name, synced.values[name])
            self._synced_real = synced
            return
        self._synced_real = None  # (a stale gathered copy is not kept through the gather)
        super()._sync_dist(dist_sync_fn, process_group)
        entry = _Synced(local, {name: getattr(self, name) for name in kept})
        _SYNCED[key] = entry
        self._synced_real = entry  # held by the metric: alive while the metric keeps these states

    def compute(self) -> Dict[str, Tensor]:
        """Every score of the accumulated sets. Each batch was checked by :meth:`update` (and each rank's
        by its own ``update`` before a sync), so :meth:`_compute` wraps the sets in a
        :class:`~lightning_prd.functional.engine.sets.FeatureSets` as they are, without checking them again.
        The sets are read on :func:`~lightning_prd.functional.engine.devices.compute_device` of their device:
        on a device without float64 (Apple's MPS, XLA) they are copied to the CPU, and the scores are CPU
        tensors, bit-identical to a CPU run. The scores are computed in IEEE float32 outside autocast
        (:func:`~lightning_prd.functional.engine.precision.score_precision`)."""
        with score_precision():
            return self._compute(self._features("real"), self._features("fake"))

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        raise NotImplementedError

    def reset(self) -> None:
        """Clear the accumulated features; keep the real ones (and their radii) if configured."""
        if self.reset_real_features:
            self._real_cache = None
            super().reset()
            return
        kept = {  # the base reset clears list states in place; the real-data sets are kept
            name: list(getattr(self, name))
            for role in self._roles
            if role != "fake"
            for name in (f"{role}_features", f"{role}_labels")
            if name in self._defaults
        }
        super().reset()
        for name, value in kept.items():
            setattr(self, name, value)

    def merge_state(self, incoming_state: Union[Dict[str, Any], Metric]) -> None:
        """Add the sets of ``incoming_state`` (a metric of this class, or a dict of its states) to this metric's,
        as :meth:`torchmetrics.Metric.merge_state` does (the incoming rows first), and forget the result of an
        earlier ``compute()``: the next ``compute()`` scores the merged sets instead of returning the cached
        scores of this metric's own sets. A merged metric counts the incoming metric's updates as its own."""
        super().merge_state(incoming_state)
        self._computed = None
        if isinstance(incoming_state, Metric):
            self._update_count += incoming_state._update_count

    def plot(self, val: Optional[Any] = None, ax: Optional[Any] = None) -> Any:
        """Plot the scalar scores (one call) or their history (a list of ``compute()`` results)."""
        return self._plot(val, ax)


class _Synced:
    """Kept real-data states as they were on this rank (``local``, held so that their ids stay theirs) and
    as gathered from every rank (``values``)."""

    def __init__(self, local: Dict[str, Any], values: Dict[str, Any]) -> None:
        self.local = {name: list(v) if isinstance(v, list) else v for name, v in local.items()}
        self.values = values


#: gathered kept states by (group, gather function, ids of the local tensors): members of a
#: ``MetricCollection`` compute group share their states, and so one gathered copy
_SYNCED: weakref.WeakValueDictionary[Tuple[Any, ...], _Synced] = weakref.WeakValueDictionary()


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
