"""``PRDCallback``: precision, recall, density, coverage (and PRD, α/β) of a generator while it trains.

The callback owns the metric (:class:`~lightning_prd.GenerativeMetrics` by default). Every N
epochs it samples the model with fixed, seeded noise, extracts features, computes the scores
on every rank (the metric all-gathers the features), puts the scalars into
``trainer.callback_metrics`` and hands scalars, curves and figures to one adapter per attached
logger (:mod:`lightning_prd.loggers`).

The implementation lives in :class:`PRDCallbackCore`, which uses the trainer and module only
through attributes shared by ``pytorch_lightning`` and ``lightning.pytorch``; this module mixes
it with ``pytorch_lightning.Callback`` and :mod:`lightning_prd.lightning` with
``lightning.pytorch.Callback``.
"""

from __future__ import annotations

import os
import random
import warnings
from contextlib import contextmanager
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Union,
)

import numpy as np
import pytorch_lightning as pl
import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.utils.data import DistributedSampler

from lightning_prd import plotting
from lightning_prd._schedule import fit_ends_after_epoch, fitting, is_due, validation_ends_epoch
from lightning_prd.features.base import first_tensor
from lightning_prd.features.cache import RealFeatureCache, check_cacheable
from lightning_prd.functional._validation import check_positive_int, check_seed, non_finite_rows
from lightning_prd.loggers.base import CURVE_KEYS, PRD_KEYS, LoggerAdapter, adapter_for, compact_prd
from lightning_prd.metrics.generative import GenerativeMetrics
from lightning_prd.samplers import distributed_sampler_of, random_sampler_of, unpadded_count

SampleFn = Callable[[Any, int], Tensor]


def rank_shard(total: int, rank: int, world_size: int) -> range:
    """The contiguous block of ``range(total)`` that rank ``rank`` of ``world_size`` handles.

    Blocks differ in size by at most one and, concatenated in rank order (as the metric's
    all-gather does), give back ``range(total)`` in order. The callback splits both the
    generated samples and the real set this way, so a DDP run sees the very sets of a
    single-process run, in the same order (which even order-dependent steps, such as PRD's
    seeded k-means, need to agree).

    Example:
        >>> [list(rank_shard(5, r, 2)) for r in range(2)]
        [[0, 1, 2], [3, 4]]
    """
    base, extra = divmod(total, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


class PRDCallbackCore:
    """Everything of :class:`PRDCallback` except its Lightning base class (see that class)."""

    def __init__(
        self,
        real: Union[Tensor, Iterable[Any]],
        *,
        sample_fn: Optional[SampleFn] = None,
        feature_extractor: Optional[Callable[[Tensor], Tensor]] = None,
        num_samples: int = 2048,
        num_real: Optional[int] = None,
        every_n_epochs: int = 1,
        prefix: str = "prd/",
        metric: Union[None, Mapping[str, Any], Any] = None,
        seed: int = 0,
        log_curves: bool = True,
        batch_size: int = 1024,
        log_images: bool = False,
        num_images: int = 16,
        evaluate_on_train_end: bool = True,
        cache_dir: Union[None, str, os.PathLike[str], RealFeatureCache] = None,
    ) -> None:
        if isinstance(real, Tensor):
            if real.ndim < 1 or real.shape[0] == 0:
                raise ValueError(
                    f"Expected argument `real` to hold at least one sample, but got shape {tuple(real.shape)}"
                )
            bad = non_finite_rows(real.detach()) if real.is_floating_point() else 0
            if bad:  # checked once, before any training
                raise ValueError(
                    f"Expected argument `real` to be finite, but {bad} of its {real.shape[0]} samples hold NaN or Inf"
                )
        elif isinstance(real, (str, bytes, Mapping)) or not isinstance(real, Iterable):
            raise TypeError(
                "Expected argument `real` to be a tensor or a DataLoader of real samples, "
                f"but got {type(real).__name__}"
            )
        if sample_fn is not None and not callable(sample_fn):
            raise TypeError(
                f"Expected argument `sample_fn` to be callable as sample_fn(pl_module, n), but got {sample_fn!r}"
            )
        if feature_extractor is not None and not callable(feature_extractor):
            raise TypeError(
                f"Expected argument `feature_extractor` to be callable, but got {type(feature_extractor).__name__}"
            )
        if num_real is not None:
            num_real = check_positive_int(num_real, "num_real")
        if not isinstance(prefix, str):
            raise TypeError(f"Expected argument `prefix` to be a string, but got {prefix!r}")
        seed = check_seed(seed)
        if not isinstance(log_curves, bool):
            raise TypeError(f"Expected argument `log_curves` to be a bool, but got {log_curves!r}")
        self.real = real
        self.sample_fn = sample_fn
        self.feature_extractor = feature_extractor
        self.num_samples = check_positive_int(num_samples, "num_samples")
        self.num_real = num_real
        self.every_n_epochs = check_positive_int(every_n_epochs, "every_n_epochs")
        self.prefix = prefix
        self.seed = seed
        self.log_curves = log_curves
        self.batch_size = check_positive_int(batch_size, "batch_size")
        if not isinstance(log_images, bool):
            raise TypeError(f"Expected argument `log_images` to be a bool, but got {log_images!r}")
        self.log_images = log_images
        if not isinstance(evaluate_on_train_end, bool):
            raise TypeError(
                f"Expected argument `evaluate_on_train_end` to be a bool, but got {evaluate_on_train_end!r}"
            )
        self.evaluate_on_train_end = evaluate_on_train_end
        self.num_images = check_positive_int(num_images, "num_images")
        self.metric = _build_metric(metric, per_sample=log_images)
        self.cache = (
            cache_dir if isinstance(cache_dir, RealFeatureCache) or cache_dir is None else RealFeatureCache(cache_dir)
        )
        if self.cache is not None:
            check_cacheable(feature_extractor, self.cache.name)  # fail early
        self._images: List[Tensor] = []
        #: one dict per evaluation: ``{"epoch": e, "<score>": value, ...}`` (plain score names)
        self.history: List[Dict[str, float]] = []
        #: the PRD curve of each evaluation, compact (:func:`~lightning_prd.loggers.base.compact_prd`)
        self.prd_curves: List[Dict[str, Any]] = []
        self._scored_step: Optional[int] = None  # global step of the last evaluation
        self._last_epoch: Optional[int] = None  # last training epoch that ended in this fit
        #: the last ``compute()`` result, on the CPU (scalars and curves)
        self.last_result: Dict[str, Tensor] = {}
        self._real_ready = False
        self._adapters: Optional[List[LoggerAdapter]] = None
        self._warned_curves = False
        self._warned_images = False

    # ------------------------------------------------------------------ Lightning hooks
    @property
    def state_key(self) -> str:
        return self._generate_state_key(prefix=self.prefix)  # type: ignore[attr-defined]

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.sample_fn is None and not callable(getattr(pl_module, "sample", None)):
            raise ValueError(
                f"PRDCallback needs generated samples: pass `sample_fn=lambda pl_module, n: ...` or give "
                f"`{type(pl_module).__name__}` a `sample(n)` method returning n samples"
            )
        if stage == "fit":
            self._adapters = None
            self._clear_real()
            self._last_epoch = None
            if getattr(trainer, "ckpt_path", None) is None:  # a fresh fit; a resume reloads the state
                self.history, self.prd_curves, self._scored_step = [], [], None

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if fitting(trainer) and validation_ends_epoch(trainer) and self._due(trainer.current_epoch):
            self._evaluate(trainer, pl_module, trainer.current_epoch)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if not fitting(trainer):
            return
        epoch = self._last_epoch = int(trainer.current_epoch)
        if self._due(epoch):
            self._evaluate(trainer, pl_module, epoch)
        elif self._final_due(trainer) and fit_ends_after_epoch(trainer):
            self._evaluate(trainer, pl_module, epoch, final=True)  # before ModelCheckpoint saves this epoch

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:  # the stop was not known at epoch end
        if self._last_epoch is not None and self._final_due(trainer):
            self._evaluate(trainer, pl_module, self._last_epoch, final=True)

    def state_dict(self) -> Dict[str, Any]:
        return {
            "history": [dict(h) for h in self.history],
            "prd_curves": [dict(c) for c in self.prd_curves],
            "scored_step": self._scored_step,
        }

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.history = [dict(h) for h in state_dict.get("history", [])]
        self.prd_curves = [dict(c) for c in state_dict.get("prd_curves", [])]
        self._scored_step = state_dict.get("scored_step")

    # ------------------------------------------------------------------ evaluation
    def _due(self, epoch: int) -> bool:
        """On the schedule and not scored yet (once per epoch, and not again after a resume)."""
        return is_due(epoch, self.every_n_epochs) and all(h["epoch"] != epoch for h in self.history)

    def _final_due(self, trainer: Any) -> bool:
        """The fit ends (or ended) with weights that no evaluation has seen."""
        return self.evaluate_on_train_end and fitting(trainer) and self._scored_step != int(trainer.global_step)

    def _evaluate(self, trainer: Any, pl_module: Any, epoch: int, final: bool = False) -> None:
        device = pl_module.device
        rank, world = trainer.global_rank, trainer.world_size
        self.metric.to(device)
        if isinstance(self.feature_extractor, nn.Module):
            self.feature_extractor.to(device)
        modules = [
            m for root in (pl_module, self.feature_extractor) if isinstance(root, nn.Module) for m in root.modules()
        ]
        modes = [(m, m.training) for m in modules]
        try:
            for m in modules:
                m.eval()
            with torch.no_grad():
                if not self._real_ready:
                    self._update_real(device, rank, world)
                n_fake = len(rank_shard(self.num_samples, rank, world))
                keep = self.log_images and rank == 0
                self._images = []
                with _fixed_rng(self.seed + rank, device):
                    for start in range(0, n_fake, self.batch_size):
                        n = min(self.batch_size, n_fake - start)
                        samples = self._sample(pl_module, n)
                        if keep:
                            self._images.append(samples.detach().cpu())
                        self.metric.update(self._features(samples, device), real=False)
                result = self.metric.compute()  # a collective under DDP: every rank gets here
        finally:
            for m, mode in modes:
                m.training = mode  # per module, not recursive: submodules keep their own flags
            self.metric.reset()
            if getattr(self.metric, "reset_real_features", True):
                self._real_ready = False
        self._scored_step = int(trainer.global_step)
        self._publish(trainer, result, epoch, final)

    def _update_real(self, device: torch.device, rank: int, world: int) -> None:
        self._check_samplers_agree(rank, world)
        try:
            if self.cache is None:
                feats: Iterable[Tensor] = (self._features(x, device) for x in self._real_chunks(rank, world))
            else:
                feats = self.cache.real_features(
                    self.feature_extractor,
                    lambda: self._real_chunks(rank, world),
                    lambda x: self._features(x, device),
                    num_real=self.num_real,
                    rank=rank,
                    world=world,
                    device=device,
                    chunk_rows=self.batch_size,
                )
            for f in feats:
                try:
                    self.metric.update(f.to(device), real=True)
                except (ValueError, TypeError) as err:  # name the callback's argument, not the metric's
                    kind = TypeError if isinstance(err, TypeError) else ValueError
                    raise kind(f"{err} (in the features of argument `real`)") from err
        except BaseException:
            self._clear_real()  # no half-extracted real set survives a failure
            raise
        self._real_ready = True

    def _publish(
        self, trainer: Any, result: Mapping[str, Any], epoch: Optional[int] = None, final: bool = False
    ) -> None:
        epoch = int(trainer.current_epoch if epoch is None else epoch)
        self.last_result = {k: (v.detach().cpu() if isinstance(v, Tensor) else v) for k, v in result.items()}
        scalars = {k: float(v) for k, v in self.last_result.items() if _is_scalar(v)}
        curves = {
            k: self.last_result[k].double().numpy().reshape(-1)
            for k in CURVE_KEYS
            if isinstance(self.last_result.get(k), Tensor) and self.last_result[k].ndim == 1
        }
        if trainer.is_global_zero and self._adapters is None:  # before this evaluation joins the state
            self._adapters = [adapter_for(logger, self.prefix) for logger in trainer.loggers]
            for adapter in self._adapters:
                adapter.restore(self.prd_curves, self.history)
        self.history.append({"epoch": epoch, **scalars, **({"final": True} if final else {})})
        if all(k in curves for k in PRD_KEYS):
            self.prd_curves.append(compact_prd(epoch, curves["prd_precision"], curves["prd_recall"]))
        prefixed = {f"{self.prefix}{k}": v for k, v in scalars.items()}
        root = trainer.strategy.root_device
        trainer.callback_metrics.update({k: torch.tensor(v, device=root) for k, v in prefixed.items()})
        if trainer.is_global_zero:
            self._log(trainer, prefixed, curves, epoch)
            if self.log_images:
                self._log_samples(trainer, epoch)

    def _log_samples(self, trainer: Any, epoch: int) -> None:
        """Rank 0: grids of its least realistic generated samples and of its real samples that no
        generated sample covers (the modes the model misses), and a histogram of realism scores."""
        fakes = torch.cat(self._images) if self._images else torch.empty(0)
        self._images = []
        realism, covered = self.last_result.get("realism"), self.last_result.get("covered")
        if fakes.ndim != 4 or fakes.shape[1] not in (1, 3) or realism is None or covered is None:
            if not self._warned_images:
                self._warned_images = True
                warnings.warn(
                    "PRDCallback(log_images=True): sample images are logged only for image samples [n, 1 or 3, H, W] "
                    "and a metric returning per-sample `realism` and `covered` (GenerativeMetrics(per_sample=True))",
                    UserWarning,
                    stacklevel=2,
                )
            return
        mine = realism[: fakes.shape[0]]  # gathered order: rank 0's samples come first
        worst = torch.argsort(mine)[: self.num_images]
        grids = {"least_realistic": plotting.image_grid(fakes[worst])}
        n_real0 = len(rank_shard(covered.shape[0], 0, trainer.world_size))
        missed = (~covered[:n_real0]).nonzero().flatten()[: self.num_images].tolist()
        if missed:
            rows, offset = [], 0
            for chunk in self._real_chunks(0, trainer.world_size):
                rows += [chunk[i - offset] for i in missed if offset <= i < offset + chunk.shape[0]]
                offset += chunk.shape[0]
            if rows and rows[0].ndim == 3 and rows[0].shape[0] in (1, 3):
                grids["uncovered_real"] = plotting.image_grid(torch.stack(rows))
        finite = realism[torch.isfinite(realism)].double().numpy()
        for adapter in self._adapters or []:
            adapter.log_samples(grids, {"realism": finite} if finite.size else {}, epoch)
            adapter.flush()

    def _log(self, trainer: Any, scalars: Dict[str, float], curves: Dict[str, np.ndarray], epoch: int) -> None:
        step = int(getattr(getattr(trainer.fit_loop, "epoch_loop", None), "_batches_that_stepped", trainer.global_step))
        adapters = self._adapters or []  # built in _publish on global zero, the only rank that logs
        for adapter in adapters:
            adapter.log_scalars(scalars, epoch, step)
            if self.log_curves:
                adapter.log_curves(curves, self.history, epoch)
            adapter.flush()
        blind = [type(a.logger).__name__ for a in adapters if not a.supports_curves]
        if self.log_curves and not self._warned_curves and (blind or not adapters):
            self._warned_curves = True
            if blind:
                what = f"the loggers {blind} get the scores only: curves and figures are skipped for them"
            else:
                what = "the trainer has no logger: the scores are in `trainer.callback_metrics`, curves are skipped"
            warnings.warn(
                f"PRDCallback: {what}. TensorBoardLogger, WandbLogger and CSVLogger (or any logger with a "
                f"`log_dir`) show curves; pass `log_curves=False` to silence this.",
                UserWarning,
                stacklevel=2,
            )

    # ------------------------------------------------------------------ samples and features
    def _sample(self, pl_module: Any, n: int) -> Tensor:
        out = self.sample_fn(pl_module, n) if self.sample_fn is not None else pl_module.sample(n)
        name = "sample_fn" if self.sample_fn is not None else f"{type(pl_module).__name__}.sample"
        if not isinstance(out, Tensor):
            raise TypeError(
                f"Expected `{name}(…, {n})` to return a tensor of {n} samples, but got {type(out).__name__}"
            )
        if out.ndim == 0 or out.shape[0] != n:
            raise ValueError(f"Expected `{name}(…, {n})` to return {n} samples, but got shape {tuple(out.shape)}")
        return out

    def _features(self, x: Tensor, device: torch.device) -> Tensor:
        x = x.to(device)
        if self.feature_extractor is None:
            return x.reshape(x.shape[0], -1) if x.ndim != 2 else x
        feats = self.feature_extractor(x)
        if not isinstance(feats, Tensor):
            raise TypeError(f"Expected `feature_extractor` to return a tensor [n, D], but got {type(feats).__name__}")
        return feats

    def _real_chunks(self, rank: int, world: int) -> Iterator[Tensor]:
        if isinstance(self.real, Tensor):
            mine = rank_shard(min(self.real.shape[0], self.num_real or self.real.shape[0]), rank, world)
            for start in range(mine.start, mine.stop, self.batch_size):
                yield self.real[start : min(start + self.batch_size, mine.stop)]
            return
        sampler = distributed_sampler_of(self.real)
        if sampler is not None:
            yield from self._sampler_chunks(sampler, rank, world)
            return
        shuffler = random_sampler_of(self.real) if world > 1 else None
        if shuffler is not None:
            raise ValueError(
                "Expected argument `real` to yield the same rows in the same order on every rank, but its DataLoader "
                f"draws them at random ({type(shuffler).__name__}): ranks would embed overlapping blocks, counting "
                "some real samples twice and missing others. Pass `shuffle=False`, or a DataLoader with a "
                "DistributedSampler"
            )
        mine = rank_shard(self._real_total(), rank, world)
        seen = 0
        for batch in self.real:
            if seen >= mine.stop:
                break
            x = first_tensor(batch, "argument `real`")
            lo, hi = max(mine.start - seen, 0), min(mine.stop - seen, x.shape[0])
            if hi > lo:
                yield x[lo:hi]
            seen += x.shape[0]

    def _check_samplers_agree(self, rank: int, world: int) -> None:
        """Under DDP, a DistributedSampler of ``real`` that does not match its process (e.g. ``rank=0``
        hard-coded on every rank) must fail on every rank: a rank raising alone would leave the
        others waiting in the metric's all-gather. One all-gather of ``(num_replicas, rank)`` decides."""
        sampler = distributed_sampler_of(self.real)
        if sampler is None or world < 2 or not (dist.is_available() and dist.is_initialized()):
            return
        seen: List[Any] = [None] * world
        dist.all_gather_object(seen, (sampler.num_replicas, sampler.rank))
        expected = [(world, r) for r in range(world)]
        if seen != expected:
            raise ValueError(
                f"Expected the DistributedSampler of argument `real` on each rank to match its process "
                f"(num_replicas, rank) = {expected}, but the ranks hold {seen}"
            )

    def _sampler_chunks(self, sampler: DistributedSampler, rank: int, world: int) -> Iterator[Tensor]:
        """This rank's real rows from a DataLoader with a ``DistributedSampler``: its shard without the
        padding duplicates (:func:`lightning_prd.samplers.unpadded_count`), ``num_real`` over all ranks."""
        if (sampler.num_replicas, sampler.rank) != (world, rank):
            raise ValueError(
                f"Expected the DistributedSampler of argument `real` to match this process (num_replicas={world}, "
                f"rank={rank}), but it has num_replicas={sampler.num_replicas}, rank={sampler.rank}"
            )
        keep, seen = unpadded_count(sampler, self.num_real), 0
        for batch in self.real:
            if seen >= keep:
                break
            x = first_tensor(batch, "argument `real`")
            yield x[: keep - seen]
            seen += x.shape[0]

    def _real_total(self) -> int:
        """Rows of a real DataLoader: ``num_real`` capped by ``len(dataset)``, or counted in one pass."""
        dataset = getattr(self.real, "dataset", None)
        try:
            total = len(dataset)  # type: ignore[arg-type]
        except TypeError:
            total = 0
            for batch in self.real:
                total += first_tensor(batch, "argument `real`").shape[0]
                if self.num_real is not None and total >= self.num_real:
                    break
        if total == 0:
            raise ValueError("Expected argument `real` to yield at least one sample, but the DataLoader was empty")
        return min(total, self.num_real) if self.num_real is not None else total

    def _clear_real(self) -> None:
        """Drop cached real features (a new fit may shard the real set differently)."""
        keep = getattr(self.metric, "reset_real_features", None)
        if keep is False:
            self.metric.reset_real_features = True
            self.metric.reset()
            self.metric.reset_real_features = False
        else:
            self.metric.reset()
        self._real_ready = False


class PRDCallback(PRDCallbackCore, pl.Callback):
    """Sample the model every N epochs and log precision, recall, density, coverage, PRD and α/β scores.

    **When it runs** (:mod:`lightning_prd._schedule`). An epoch due under ``every_n_epochs`` is
    scored at the end of its last validation run if it validates at its end (so ``ModelCheckpoint``
    and ``EarlyStopping`` read fresh values), otherwise at the end of its training epoch; once,
    never in the sanity check, only while fitting. When the fit ends on weights no evaluation has
    seen, ``evaluate_on_train_end`` scores them once more, logged at the last epoch reached with
    ``"final": True`` in ``history``. The module is sampled in eval mode under ``no_grad``; every
    submodule's training flag is restored afterwards.

    **Fixed noise.** Each evaluation samples inside a forked RNG (torch CPU and the module's CUDA
    device, Python ``random``, NumPy) seeded with ``seed + global_rank``, so the same latent
    codes are drawn every epoch and the user's global RNG state is left as it was.

    **Distributed.** Rank ``r`` of ``W`` generates its contiguous share of ``num_samples`` and
    embeds its contiguous block of the real rows (:func:`rank_shard`: no duplicates, and the
    gathered sets keep the single-process order). The metric all-gathers the features and
    every rank computes the same values, so every rank must reach the hook (it does under
    Lightning). Real features are extracted once per fit (first
    evaluation) and kept, with their k-NN radii, by ``GenerativeMetrics(reset_real_features=False)``.

    Args:
        real: a tensor of real samples ``[N, ...]`` or a DataLoader (any iterable) of batches
            (a tensor, or a tuple/list whose first item is the tensor). A plain DataLoader must
            yield the same rows in the same order on every rank (``shuffle=False``; a shuffling
            one raises under DDP); its size is ``len(loader.dataset)`` (or counted in one pass);
            each rank reads it up to the end of its block and embeds only its rows. A DataLoader
            with a ``DistributedSampler`` is read as this rank's shard **without the padding
            duplicates** the sampler adds when the world size does not divide the dataset
            (:mod:`lightning_prd.samplers`): the k-NN scores equal the single-process ones; the
            gathered order differs, so PRD's seeded clustering (and Fréchet's last digits) may too.
        sample_fn: ``sample_fn(pl_module, n) -> Tensor`` of ``n`` generated samples. Default:
            ``pl_module.sample(n)``; ``setup`` raises ``ValueError`` when neither exists.
            Called with ``n <= batch_size``, repeatedly, inside the seeded RNG.
        feature_extractor: module or callable mapping a batch of samples to ``[n, D]`` features,
            applied to real and generated samples alike, under ``no_grad`` in eval mode (an
            ``nn.Module`` is moved to the module's device). Default: identity (samples
            flattened to ``[n, -1]``).
        num_samples: generated samples per evaluation, over all ranks.
        num_real: use at most this many real samples (the first ones); default all.
        every_n_epochs: evaluate every N epochs.
        prefix: key prefix of everything logged.
        metric: ``None`` (``GenerativeMetrics(reset_real_features=False)``), a dict of
            ``GenerativeMetrics`` options, or a Metric with ``update(features, real: bool)``,
            ``compute() -> dict`` and ``reset()``. With ``reset_real_features=True`` the real
            features are extracted again at each evaluation.
        seed: base seed of the fixed noise.
        log_curves: log curves and figures (scalars are always logged).
        batch_size: chunk size for sampling and feature extraction.
        log_images: when samples are images ``[n, 1 or 3, H, W]``, also log (rank 0, TensorBoard and
            W&B) a grid of the ``num_images`` least realistic generated samples, a grid of real samples
            that no generated sample covers (the modes the model misses) and a histogram of realism
            scores under ``<prefix>samples/...`` and ``<prefix>realism``. Off by default: rank 0 keeps its
            generated samples of the evaluation in CPU memory until they are logged.
        num_images: images per grid.
        evaluate_on_train_end: score the final weights when the fit ends on weights that were
            not scored (see *When it runs*). Every rank takes part (the metric all-gathers).
        cache_dir: a folder (or a :class:`~lightning_prd.features.cache.RealFeatureCache`) where the
            real features are kept across runs: a later fit with the same real samples (as read),
            extractor (class, weights, settings), ``num_real``, world size and dtype loads them
            instead of calling the extractor. The key is described in
            :mod:`lightning_prd.features.cache`; a plain function as extractor needs
            ``RealFeatureCache(PATH, name=...)``. Default None: no disk cache.

    Logged keys (``P`` = ``prefix``, default ``"prd/"``). Every 0-dim value of the metric's
    ``compute()`` is logged as ``P<name>``; with the default metric:

    * ``Pprecision``, ``Precall``: k-NN precision and recall (Kynkäänniemi et al. 2019, k=3);
    * ``Pdensity``, ``Pcoverage``: Naeem et al. 2020, k=5;
    * ``Pp_precision``, ``Pp_recall``: probabilistic precision and recall (Park & Kim 2023);
      ``Pprecision_cover``, ``Precall_cover``: PR-cover (Cheema & Urner 2023), on sets large
      enough for their radii;
    * ``Pfrechet_distance``: the FID formula on the features (lower is better);
    * when the metric returns them: ``Pf_beta``, ``Pf_inv_beta`` (PRD F_8, F_1/8),
      ``Palpha_precision``, ``Pbeta_recall``, ``Pauthenticity``; with ``metric=dict(kid=True)``
      ``Pkid``, ``Pkid_std``; with ``metric=dict(vendi=True)`` ``Pvendi``, ``Pvendi_real``.

    They go to ``trainer.callback_metrics`` on every rank (so ``ModelCheckpoint(monitor=
    "prd/coverage", mode="max")`` and ``EarlyStopping`` work) and, from rank 0, to every logger:
    TensorBoard with the epoch as step; W&B with a ``Pepoch`` step metric and best-value
    summaries; CSV and other loggers through ``log_metrics`` with an ``epoch`` column. Curves
    (when ``log_curves``; PRD from ``prd_precision``/``prd_recall``, α/β from ``alphas``,
    ``alpha_precision_curve``, ``beta_recall_curve``):

    * ``Pprd_curve``: TensorBoard PR-curve dashboard entry per epoch; W&B line chart over an
      accumulated table (one line per epoch);
    * ``Pfigures/prd_curve``, ``Pfigures/alpha_beta``, ``Pfigures/trajectory`` (precision over
      recall across epochs): TensorBoard images, W&B ``wandb.Image``;
    * CSV (and any logger with a ``log_dir``): ``<log_dir>/prd_curves/epoch_NNNN.csv`` and
      ``<log_dir>/alpha_beta_curves/epoch_NNNN.csv``.

    With no logger, or one that shows no curves, one warning says curves are skipped. Between
    evaluations (``every_n_epochs > 1``) ``callback_metrics`` keeps the last values: give
    ``ModelCheckpoint`` the same ``every_n_epochs`` so it does not act on stale scores.

    **Checkpoint state**: ``history`` (one dict of plain scores per evaluation, with ``"epoch"``)
    and ``prd_curves`` (each evaluation's PRD curve, at most 127 float16 points; about 0.8 kB
    per evaluation in all). A resumed run never re-evaluates an epoch already in ``history``,
    draws the trajectory figure over every epoch and rebuilds the W&B ``Pprd_curve`` table with
    every epoch once. An epoch logged after the last checkpoint (a killed run) is logged again
    by the resumed run; ``tensorboard --logdir`` (its default data server) keeps, per tag, the
    newest event when a step repeats, so it shows each epoch once (``--load_fast=false``, the
    older reader, shows such an epoch twice).

    Example:
        >>> import torch
        >>> from lightning_prd.callback import PRDCallback
        >>> real = torch.randn(512, 2)
        >>> cb = PRDCallback(real, sample_fn=lambda module, n: torch.randn(n, 2), num_samples=512)
        >>> cb.state_key
        "PRDCallback{'prefix': 'prd/'}"

        Then ``pl.Trainer(callbacks=[cb, ModelCheckpoint(monitor="prd/coverage", mode="max")]).fit(model)``.
    """


def _build_metric(metric: Union[None, Mapping[str, Any], Any], per_sample: bool = False) -> Any:
    if metric is None:
        return GenerativeMetrics(reset_real_features=False, per_sample=per_sample)
    if isinstance(metric, Mapping):
        options = {"reset_real_features": False, "per_sample": per_sample, **metric}
        return GenerativeMetrics(**options)
    if isinstance(metric, type):
        raise TypeError(
            f"Expected argument `metric` to be a Metric instance, but got the class {metric.__name__}: call it"
        )
    if all(callable(getattr(metric, name, None)) for name in ("update", "compute", "reset", "to")):
        return metric
    raise TypeError(
        f"Expected argument `metric` to be None, a dict of GenerativeMetrics options or a Metric with "
        f"update/compute/reset, but got {type(metric).__name__}"
    )


def _is_scalar(value: Any) -> bool:
    if isinstance(value, Tensor):
        return value.ndim == 0 and value.dtype != torch.bool
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@contextmanager
def _fixed_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch (CPU and ``device``), ``random`` and NumPy inside; restore their states after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    cuda = device.type == "cuda"
    index = (device.index if device.index is not None else torch.cuda.current_device()) if cuda else None
    with torch.random.fork_rng(devices=[index] if cuda else []):
        torch.default_generator.manual_seed(seed)
        if cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
