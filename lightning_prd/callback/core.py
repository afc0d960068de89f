"""``PRDCallbackCore``: the callback's hooks, schedule, evaluation and checkpoint state.

The core uses the trainer and module only through attributes shared by ``pytorch_lightning`` and
``lightning.pytorch``; :mod:`lightning_prd.callback.pl_callback` mixes it with
``pytorch_lightning.Callback`` and :mod:`lightning_prd.lightning` with ``lightning.pytorch.Callback``.
The real side (``real`` resolved, read, embedded) is :mod:`~lightning_prd.callback.real_side`, the
logging :mod:`~lightning_prd.callback.publish`, the fixed noise :mod:`~lightning_prd.callback.rng`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from lightning_prd.callback.batches import (
    OWNER,
    Halving,
    agree_on_sizes,
    batch_seed,
    extraction_batch,
    generated_batches,
    retry_halving,
)
from lightning_prd.callback.closest_pairs import gather_pairs, pair_grid
from lightning_prd.callback.dry_run import check_image_range, dry_run, to_unit_range
from lightning_prd.callback.labels import check_class_names
from lightning_prd.callback.options import build_metric, check_bool, is_scalar, resolve_sample_fn
from lightning_prd.callback.protocol import counts, metric_with, resolve, run_fingerprint, total_rows, warn_if_changed
from lightning_prd.callback.publish import log_samples, log_scores, per_class_scalars, sample_grids, warn_no_grid
from lightning_prd.callback.real_side import RealSide
from lightning_prd.callback.refusals import reported
from lightning_prd.callback.report import report_evaluation
from lightning_prd.callback.rng import COMPUTE_STREAM, REAL_STREAM, fixed_rng, preserved_rng, stream_seed
from lightning_prd.callback.schedule import (
    fit_ends_after_epoch,
    fitting,
    is_due,
    validation_ends_epoch,
    warn_plain_early_stopping,
)
from lightning_prd.callback.sources import draw, draw_labelled, fake_role, generator_name, update_fake
from lightning_prd.features.cache import RealFeatureCache, check_cacheable
from lightning_prd.features.precision import DEFAULT_EXTRACTOR_PRECISION, check_extractor_precision, describe_precision
from lightning_prd.functional.engine.inputs import check_int, check_positive_int, check_seed
from lightning_prd.loggers.base import CURVE_KEYS, PRD_KEYS, LoggerAdapter, compact_prd
from lightning_prd.loggers.factory import adapter_for, hold_sessions, release_sessions
from lightning_prd.protocols import Protocol

SampleFn = Callable[[Any, int], Tensor]


def logged_step(trainer: Any, epoch_ended: bool) -> int:
    """The step Lightning logs an epoch's metrics (``train_loss_epoch``, ``val_loss``) at: that of the epoch's last
    training batch, its count of batches trained (``fit_loop.epoch_loop._batches_that_stepped``, the global step
    when one optimizer steps per batch) less one after the epoch (``epoch_ended``; in validation the last batch is
    not counted yet). Every logger gets an evaluation at it."""
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    stepped = int(getattr(loop, "_batches_that_stepped", trainer.global_step))
    return max(stepped - 1, 0) if epoch_ended else stepped


class PRDCallbackCore(RealSide):
    """Everything of :class:`PRDCallback` except its Lightning base class (see that class)."""

    @reported  # a refused value ending the program (LightningCLI) is shown first and last
    def __init__(
        self,
        real: Union[str, os.PathLike[str], Tensor, DataLoader, Iterable[Any]],
        *,
        sample_fn: Union[None, str, SampleFn] = None,
        feature_extractor: Union[None, str, Dict[str, Any], nn.Module, Callable[[Tensor], Tensor]] = None,
        num_samples: Optional[int] = None,
        num_real: Optional[int] = None,
        every_n_epochs: int = 1,
        prefix: str = "prd/",
        metric: Union[None, Dict[str, Any], Any] = None,
        seed: int = 0,
        log_curves: bool = True,
        batch_size: int = 1024,
        extract_batch_size: Optional[int] = None,
        log_images: bool = False,
        num_images: int = 16,
        evaluate_on_train_end: bool = True,
        cache_dir: Union[None, str, os.PathLike[str], RealFeatureCache] = None,
        test: Union[None, str, os.PathLike[str], Tensor, DataLoader, Iterable[Any]] = None,
        num_test: Optional[int] = None,
        real_labels: Any = None,
        class_names: Union[None, Sequence[str], Mapping[int, str]] = None,
        log_closest_pairs: int = 0,
        protocol: Union[None, str, Protocol] = None,
        weights: Union[None, str, os.PathLike[str]] = None,
        verbose: bool = True,
        image_range: Optional[Tuple[float, float]] = None,
        extractor_precision: str = DEFAULT_EXTRACTOR_PRECISION,
    ) -> None:
        self.sample_fn = resolve_sample_fn(sample_fn)
        #: the range of the generated floating-point images, mapped to [0, 1] (:mod:`~lightning_prd.callback.dry_run`)
        self.image_range = check_image_range(image_range)
        self.extractor_precision = check_extractor_precision(extractor_precision)
        #: the named protocol (:mod:`lightning_prd.protocols`), or None
        self.protocol: Optional[Protocol]
        self.protocol, self.feature_extractor, self._extractor_name = resolve(protocol, weights, feature_extractor)
        if not isinstance(prefix, str):
            raise TypeError(f"Expected argument `prefix` to be a string, but got {prefix!r}")
        self.num_samples, self.num_real = counts(self.protocol, num_samples, num_real)
        self.every_n_epochs = check_positive_int(every_n_epochs, "every_n_epochs")
        self.prefix = prefix
        self.seed = check_seed(seed)
        self.log_curves = check_bool(log_curves, "log_curves")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        given = None if extract_batch_size is None else check_positive_int(extract_batch_size, "extract_batch_size")
        #: the generator's batch (``batch_size``, halved on out of memory) and the extractor's
        #: (:func:`~lightning_prd.callback.batches.extraction_batch`)
        self._sampling = Halving(self.batch_size, "sampling")
        self._extraction = Halving(extraction_batch(self.feature_extractor, given), "feature extraction")
        self.log_images = check_bool(log_images, "log_images")
        self.evaluate_on_train_end = check_bool(evaluate_on_train_end, "evaluate_on_train_end")
        self.verbose = check_bool(verbose, "verbose")
        self.num_images = check_positive_int(num_images, "num_images")
        self.log_closest_pairs = check_int(log_closest_pairs, "log_closest_pairs", minimum=0)
        self.metric = build_metric(
            metric_with(self.protocol, metric), per_sample=log_images, closest_pairs=self.log_closest_pairs
        )
        self.cache = (
            cache_dir if isinstance(cache_dir, RealFeatureCache) or cache_dir is None else RealFeatureCache(cache_dir)
        )
        if self.cache is not None:
            check_cacheable(self.feature_extractor, self.cache.name)  # fail early
        self.real = real  # resolved and checked (RealSide)
        self._set_real_labels(real_labels)
        #: chart names of the class labels of a per-class metric ({label: name}), or None
        self.class_names = check_class_names(class_names)
        if self.class_names is not None and not self.labelled:
            raise ValueError(
                "Expected argument `class_names` only with a per-class metric (metric=dict(per_class=True)), "
                f"but got {class_names!r} without one"
            )
        self.num_test = None if num_test is None else check_positive_int(num_test, "num_test")
        self.test = test  # resolved like `real`
        self._images: List[Tensor] = []
        #: rank 0's samples of the closest pairs of the last evaluation (generated, real)
        self._pairs: Optional[Any] = None
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
        self._warned_pairs = False
        #: how this fit's scores were made (:mod:`~lightning_prd.callback.protocol`), from its first evaluation on
        self.fingerprint: Optional[Dict[str, Any]] = None
        self._restored_fingerprint: Optional[Dict[str, Any]] = None  # a checkpoint's

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
            warn_plain_early_stopping(trainer, self.prefix, self.every_n_epochs)
            self._adapters = None
            self._check_roles()
            self._clear_real()
            self._bind_real(trainer)
            self._last_epoch = None
            self.fingerprint = self._restored_fingerprint = None
            if getattr(trainer, "ckpt_path", None) is None:  # a fresh fit; a resume reloads the state
                self.history, self.prd_curves, self._scored_step = [], [], None
            hold_sessions(trainer.loggers)  # before the trainer logs the hyperparameters

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        dry_run(self, trainer, pl_module)  # before the first training step (:mod:`~lightning_prd.callback.dry_run`)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            release_sessions(trainer.loggers)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        release_sessions(trainer.loggers)  # Lightning calls no ``teardown`` after an exception

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if fitting(trainer) and validation_ends_epoch(trainer) and self._due(trainer.current_epoch):
            self._evaluate(trainer, pl_module, trainer.current_epoch, in_validation=True)

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
            "fingerprint": dict(self.fingerprint or self._restored_fingerprint or {}) or None,
        }

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.history = [dict(h) for h in state_dict.get("history", [])]
        self.prd_curves = [dict(c) for c in state_dict.get("prd_curves", [])]
        self._scored_step = state_dict.get("scored_step")
        self._restored_fingerprint = state_dict.get("fingerprint")

    # ------------------------------------------------------------------ evaluation
    def _due(self, epoch: int) -> bool:
        """On the schedule and not scored yet (once per epoch, and not again after a resume)."""
        return is_due(epoch, self.every_n_epochs) and all(h["epoch"] != epoch for h in self.history)

    def _final_due(self, trainer: Any) -> bool:
        """The fit ends (or ended) with weights that no evaluation has seen."""
        return self.evaluate_on_train_end and fitting(trainer) and self._scored_step != int(trainer.global_step)

    def _evaluate(
        self, trainer: Any, pl_module: Any, epoch: int, final: bool = False, in_validation: bool = False
    ) -> None:
        """Score the module and publish the scores; the global RNG of every generator is restored after
        (:mod:`~lightning_prd.callback.rng`: seeded streams for the real side, the samples, ``compute``);
        with ``verbose``, one line of scores and wall time (:mod:`~lightning_prd.callback.report`)."""
        start = time.perf_counter()
        with preserved_rng(pl_module.device):
            result = self._score(trainer, pl_module)
            self._scored_step = int(trainer.global_step)
            self._publish(trainer, result, epoch, final, logged_step(trainer, epoch_ended=not in_validation))
        if self.verbose:
            report_evaluation(trainer, self.history[-1], time.perf_counter() - start, self.prefix)

    def _score(self, trainer: Any, pl_module: Any) -> Mapping[str, Any]:
        device = pl_module.device
        rank, world = trainer.global_rank, trainer.world_size
        self.metric.to(device)
        if isinstance(self.feature_extractor, nn.Module):
            self.feature_extractor.to(device)
        modules = [
            m for root in (pl_module, self.feature_extractor) if isinstance(root, nn.Module) for m in root.modules()
        ]
        modes = [(m, m.training) for m in modules]
        name = generator_name(self.sample_fn, pl_module)
        try:
            for m in modules:
                m.eval()
            with torch.no_grad():
                if not self._real_ready:
                    with fixed_rng(stream_seed(self.seed + rank, REAL_STREAM), device):
                        self._update_real(device, rank, world)
                self._images, self._pairs = [], None
                dtype = retry_halving(
                    lambda: self._generated(pl_module, device, rank, world, name),
                    [self._sampling, self._extraction],
                    OWNER,
                    device,
                )
                if self.fingerprint is None:  # the first evaluation of the fit; a collective under DDP
                    self._take_fingerprint(device, rank, dtype)
                with fixed_rng(stream_seed(self.seed, COMPUTE_STREAM), device):  # the same on every rank
                    result = self.metric.compute()  # a collective under DDP: every rank gets here
                if self.log_closest_pairs > 0:  # a collective under DDP too
                    with fixed_rng(stream_seed(self.seed + rank, REAL_STREAM), device):
                        self._pairs = self._gather_pairs(result, rank, world)
                    if not (self.log_images and rank == 0):
                        self._images = []
        finally:
            for m, mode in modes:
                m.training = mode  # per module, not recursive: submodules keep their own flags
            self.metric.reset()
            if getattr(self.metric, "reset_real_features", True) or self._source.kind == "statistics":
                self._real_ready = False
        return result

    def _publish(
        self, trainer: Any, result: Mapping[str, Any], epoch: Optional[int] = None, final: bool = False, step: int = 0
    ) -> None:
        """Record one evaluation of ``epoch`` and, on global rank 0, log it at ``step`` (:func:`logged_step`)."""
        epoch = int(trainer.current_epoch if epoch is None else epoch)
        self.last_result = {k: (v.detach().cpu() if isinstance(v, Tensor) else v) for k, v in result.items()}
        scalars = {k: float(v) for k, v in self.last_result.items() if is_scalar(v)}
        scalars.update(per_class_scalars(self.last_result, self.class_names))
        curves = {
            k: self.last_result[k].double().numpy().reshape(-1)
            for k in CURVE_KEYS
            if isinstance(self.last_result.get(k), Tensor) and self.last_result[k].ndim == 1
        }
        if trainer.is_global_zero and self._adapters is None:  # before this evaluation joins the state
            self._adapters = [adapter_for(logger, self.prefix) for logger in trainer.loggers]
            for adapter in self._adapters:
                adapter.restore(self.prd_curves, self.history)
                if self.fingerprint is not None:  # once per fit and logger
                    adapter.log_fingerprint(self.fingerprint, epoch, step)
        self.history.append({"epoch": epoch, **scalars, **({"final": True} if final else {})})
        if all(k in curves for k in PRD_KEYS):
            self.prd_curves.append(compact_prd(epoch, curves["prd_precision"], curves["prd_recall"]))
        prefixed = {f"{self.prefix}{k}": v for k, v in scalars.items()}
        root = trainer.strategy.root_device
        trainer.callback_metrics.update({k: torch.tensor(v, device=root) for k, v in prefixed.items()})
        if trainer.is_global_zero:
            self._log(prefixed, curves, epoch, step)
            if self.log_images or self.log_closest_pairs:
                self._log_samples(trainer, epoch, step)

    def _take_fingerprint(self, device: torch.device, rank: int, dtype: Optional[torch.dtype]) -> None:
        """:attr:`fingerprint`, with the real rows of every rank (a statistics file: its sample count)."""
        if self._source.kind == "statistics":
            ref = self._source.reference
            num_real = ref.num_samples if ref is not None else None
        else:
            num_real = total_rows(self._real_rows, device)
        self.fingerprint = run_fingerprint(
            self.feature_extractor,
            self.protocol,
            self.metric,
            num_real,
            self.num_samples,
            dtype,
            warn=rank == 0,
            extractor_precision=describe_precision(self.extractor_precision, device),
        )
        if rank == 0:
            warn_if_changed(self._restored_fingerprint, self.fingerprint)

    def _log_samples(self, trainer: Any, epoch: int, step: int) -> None:
        """Rank 0: the sample grids and realism histogram (:func:`~lightning_prd.callback.publish.sample_grids`)
        and the grid of closest pairs (:func:`~lightning_prd.callback.closest_pairs.pair_grid`)."""
        grids: Dict[str, np.ndarray] = {}
        histograms: Dict[str, np.ndarray] = {}
        if self.log_images:
            fakes = torch.cat(self._images) if self._images else torch.empty(0)
            world = trainer.world_size
            made = sample_grids(fakes, self.last_result, lambda: self._real_chunks(0, world), self.num_images, world)
            if made is None:
                self._warned_images = warn_no_grid("log_images", self._warned_images)
            else:
                grids.update(made[0])
                histograms.update(made[1])
        self._images = []
        if self.log_closest_pairs:
            grid = None if self._pairs is None else pair_grid(*self._pairs)
            if grid is None:
                self._warned_pairs = warn_no_grid("log_closest_pairs", self._warned_pairs)
            else:
                grids["closest_pairs"] = grid
        self._pairs = None
        log_samples(self._adapters or [], grids, histograms, epoch, step)

    def _gather_pairs(self, result: Mapping[str, Any], rank: int, world: int) -> Any:
        """Rank 0's samples of the closest pairs (every rank takes part; none for real features from a file)."""
        if not self._source.embedded:
            return None
        return gather_pairs(result, self._images, lambda: self._real_chunks(rank, world), self._real_rows, rank, world)

    def _log(self, scalars: Dict[str, float], curves: Dict[str, np.ndarray], epoch: int, step: int) -> None:
        adapters = self._adapters or []  # built in _publish on global zero, the only rank that logs
        self._warned_curves = log_scores(
            adapters, scalars, curves, self.history, epoch, step, log_curves=self.log_curves, warned=self._warned_curves
        )

    # ------------------------------------------------------------------ samples and features
    def _draw(self, pl_module: Any, n: int) -> Tuple[Tensor, Optional[Tensor]]:
        """``n`` generated samples, checked (:func:`~lightning_prd.callback.sources.draw`) and mapped from
        ``image_range`` (:func:`~lightning_prd.callback.dry_run.to_unit_range`), and their class labels for a
        per-class metric (:func:`~lightning_prd.callback.sources.draw_labelled`), else ``None``."""
        fn, name = self.sample_fn, generator_name(self.sample_fn, pl_module)

        def generate() -> Any:
            return fn(pl_module, n) if fn is not None else pl_module.sample(n)

        if self.labelled:
            samples, labels = draw_labelled(generate, name, n)
            return to_unit_range(samples, self.image_range, name), labels
        return to_unit_range(draw(generate, name, n), self.image_range, name), None

    def _generated(
        self, pl_module: Any, device: torch.device, rank: int, world: int, name: str
    ) -> Optional[torch.dtype]:
        """This rank's global batches of generated samples (:mod:`~lightning_prd.callback.batches`), each drawn
        under its own seed and embedded, then handed to the metric in order; the dtype of their features (None:
        this rank drew none). Under DDP the ranks then agree on the sampling and extraction batches (the smallest;
        a rank with a larger one draws again), so the gathered set is that of one process at those sizes."""
        keep = (self.log_images and rank == 0) or self.log_closest_pairs > 0
        while True:
            self._images = []
            drawn: List[Tuple[Tensor, Optional[Tensor]]] = []
            for b, n in generated_batches(self.num_samples, self._sampling.size or self.batch_size, rank, world):
                with fixed_rng(batch_seed(self.seed, b), device):
                    samples, labels = self._sampling.run(n, self._draw, pl_module, n)
                    if keep:
                        self._images.append(samples.detach().cpu())
                    feats = self._embed(samples, device, fake_role(name))
                self._check_file_width(feats, name)
                drawn.append((feats, labels))
            if agree_on_sizes([self._sampling, self._extraction], device, world):
                break
        for feats, labels in drawn:
            update_fake(self.metric, feats, name, extracted=self.feature_extractor is not None, labels=labels)
        return drawn[0][0].dtype if drawn else None

    def _check_roles(self) -> None:
        """In ``setup``: ``test`` given exactly when a score of the metric uses it, and labels for a per-class
        metric (``real_labels`` or labelled batches)."""
        check = getattr(self.metric, "check_test_role", None)
        if callable(check):
            try:
                check(self.test is not None)
            except ValueError as err:
                hint = (
                    "pass PRDCallback(..., test=held_out), a held-out real set in any form `real` takes"
                    if self.test is None
                    else "switch one on, e.g. metric=dict(data_copying=True), or drop `test`"
                )
                raise ValueError(f"{err}: {hint}") from None
        self._check_real_labels()
