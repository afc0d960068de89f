"""``RealSide``: the callback's real data, from the ``real`` (and ``test``) arguments to the metric's features.

``real`` is resolved when it is set (:mod:`~lightning_prd.callback.real_sources`), a datamodule's loader
in ``setup``; at the first evaluation of a fit each rank reads its rows
(:mod:`~lightning_prd.callback.sharding`, :mod:`~lightning_prd.callback.image_folder`), embeds those
that are samples (through the disk cache when there is one) and hands the features to
``metric.update(..., real=True)`` (with their class labels for a per-class metric,
:mod:`~lightning_prd.callback.labels`). A file's features go to the metric as they are; a statistics file's
mean and covariance go to ``metric.set_real_statistics`` before every evaluation.

The held-out set ``test`` takes every form ``real`` takes but statistics and ``real`` itself, is read and
embedded the same way
(each rank its block, never through the disk cache) and goes to ``metric.update(..., role="test")``. A
failure leaves no half-read real or test set behind.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.callback.batches import OWNER, Halving, retry_halving
from lightning_prd.callback.image_folder import image_chunks
from lightning_prd.callback.labels import class_labels, relabel, zip_labels
from lightning_prd.callback.real_sources import (
    DATAMODULE,
    RealSource,
    bind_datamodule,
    check_held_out,
    check_network,
    check_statistics_serve,
    resolve_real,
)
from lightning_prd.callback.sharding import check_samplers_agree, labelled_chunks, rank_shard, real_chunks
from lightning_prd.callback.sources import extract
from lightning_prd.features.cache import RealFeatureCache
from lightning_prd.functional.engine.devices import compute_device

Pairs = Iterator[Tuple[Tensor, Optional[Tensor]]]


class RealSide:
    """The real side of :class:`~lightning_prd.callback.core.PRDCallbackCore` (see ``PRDCallback``'s ``real``,
    ``real_labels`` and ``test``)."""

    feature_extractor: Any
    metric: Any
    num_real: Optional[int]
    #: use at most this many held-out samples of ``test`` (the first ones); None: all
    num_test: Optional[int] = None
    batch_size: int
    _extraction: Halving
    log_images: bool
    cache: Optional[RealFeatureCache]
    extractor_precision: str
    _extractor_name: Optional[str]
    _real_ready: bool
    _source: RealSource
    _test_source: Optional[RealSource] = None
    _test: Any = None
    _real_labels: Optional[Tensor] = None
    #: real rows this rank handed to the metric (its block of the gathered real set)
    _real_rows: int = 0

    @property
    def labelled(self) -> bool:
        """Whether the metric takes class labels (``per_class=True``)."""
        return getattr(self.metric, "per_class", False) is True

    @property
    def real(self) -> Any:
        """The ``real`` argument as given; setting it resolves and checks the new value."""
        return self._real

    @real.setter
    def real(self, value: Any) -> None:
        source = resolve_real(value, self.feature_extractor is not None, self._extractor_name)
        if source.kind == "statistics":
            check_statistics_serve(source, self.metric, self.log_images, getattr(self, "log_closest_pairs", 0))
        check_network(source, self._extractor_name, self.feature_extractor)
        if self._test_source is not None:
            check_held_out(value, source, self._test, self._test_source, self.feature_extractor is None)
        self._real, self._source = value, source

    @property
    def test(self) -> Any:
        """The held-out ``test`` argument as given (``None``: none); setting it resolves and checks the value."""
        return self._test

    @test.setter
    def test(self, value: Any) -> None:
        if value is None:
            self._test, self._test_source = None, None
            return
        source = resolve_real(value, self.feature_extractor is not None, self._extractor_name, name="test")
        if source.kind == "statistics":
            raise ValueError(
                f"Expected argument `test` to hold held-out samples or per-sample features, but {source.path} "
                f"({source.reference.source if source.reference else 'a file'}) holds only a mean and covariance"
            )
        check_network(source, self._extractor_name, self.feature_extractor, name="test")
        check_held_out(self._real, self._source, value, source, self.feature_extractor is None)
        self._test, self._test_source = value, source

    def _set_real_labels(self, value: Any) -> None:
        """``real_labels`` checked: integers, one per row of ``real``, for a per-class metric only."""
        if value is None:
            self._real_labels = None
            return
        if not self.labelled:
            raise ValueError(
                "Expected no argument `real_labels` for a metric without per-class scores (pass "
                f"metric=dict(per_class=True) to score each class), but got {type(value).__name__}"
            )
        self._real_labels = class_labels(value, "argument `real_labels`", None)
        self._check_real_labels()

    def _check_real_labels(self) -> None:
        """For a per-class metric: ``real`` has labels, from ``real_labels`` (one per row) or from its batches."""
        if not self.labelled:
            return
        rows, kind = _row_count(self._source), self._source.kind
        given = self._real_labels
        if rows is None and given is not None:
            raise ValueError(
                f"Expected no argument `real_labels` when `real` is a DataLoader or {DATAMODULE}<split> (its batches "
                f"(samples, labels) give the labels), but got labels of shape {tuple(given.shape)}"
            )
        if rows is not None and given is None:
            raise ValueError(
                f"Expected argument `real_labels` (one integer class label per real sample) for the per-class scores "
                f"of `metric` (per_class=True), as `real` is {_kind_text(kind)} of {rows} rows, but got None; or pass "
                "a DataLoader of (samples, labels) batches as `real`"
            )
        if rows is not None and given is not None and given.shape[0] != rows:
            raise ValueError(
                f"Expected argument `real_labels` to hold one class label per row of `real` ({rows}), but got shape "
                f"{tuple(given.shape)}"
            )

    def _bind_real(self, trainer: Any) -> None:
        """In ``setup``: the datamodule's loaders that ``real``/``test`` = ``"datamodule:<split>"`` name."""
        for source, name in ((self._source, "real"), (self._test_source, "test")):
            if source is not None and source.kind == "datamodule":
                bind_datamodule(source, trainer, self.batch_size, name)

    def _real_chunks(self, rank: int, world: int) -> Iterator[Tensor]:
        """This rank's real rows, in order: samples, images or a file's features (none for statistics)."""
        return self._chunks(self._source, "real", self.num_real, rank, world)

    def _chunks(self, source: RealSource, name: str, num: Optional[int], rank: int, world: int) -> Iterator[Tensor]:
        if source.kind == "statistics":
            return iter(())
        if source.kind == "images":
            size = getattr(self.feature_extractor, "input_size", None)
            return image_chunks(source.rows, num, self.batch_size, rank, world, size, source.path, name)
        _check_bound(source, name)
        chunks = real_chunks(source.rows, num, self.batch_size, rank, world, name)
        if source.reference is not None and source.reference.images is not None:  # channels-last images, permuted
            return (chunk.contiguous() for chunk in chunks)
        return chunks

    def _real_pairs(self, rank: int, world: int) -> Pairs:
        """This rank's real rows with their labels (``None`` without a per-class metric)."""
        source = self._source
        if not self.labelled:
            return ((x, None) for x in self._real_chunks(rank, world))
        rows = _row_count(source)
        if rows is None:  # a DataLoader: the labels come in its batches
            _check_bound(source, "real")
            return labelled_chunks(source.rows, self.num_real, self.batch_size, rank, world)
        labels = self._real_labels if self._real_labels is not None else torch.zeros(0, dtype=torch.int64)
        start = rank_shard(min(rows, self.num_real or rows), rank, world).start
        return zip_labels(self._real_chunks(rank, world), labels, start)

    def _update_real(self, device: torch.device, rank: int, world: int) -> None:
        source = self._source
        check_samplers_agree(source.rows, rank, world)
        if self._test_source is not None:
            check_samplers_agree(self._test_source.rows, rank, world, "test")
        try:
            if source.kind == "statistics":
                ref = source.reference
                if ref is not None and ref.mean is not None and ref.cov is not None:
                    where = f"{source.path} ({ref.source})"
                    home = compute_device(device)  # float64 statistics: the CPU for a device without float64
                    self.metric.set_real_statistics(
                        ref.mean.to(home), ref.cov.to(home), num_samples=ref.num_samples, source=where
                    )
            self._real_rows = 0
            for f, y in self._real_features(device, rank, world):
                self._feed(f.to(device), "real", y)
                self._real_rows += f.shape[0]
            if self._test_source is not None:
                test = self._test_source
                for f in self._chunks(test, "test", self.num_test, rank, world):
                    feats = self._features(f, device, "the samples of argument `test`") if test.embedded else f
                    self._feed(feats.to(device), "test", None)
        except BaseException:
            self._clear_real()  # no half-extracted real set survives a failure
            raise
        self._real_ready = True

    def _check_file_width(self, feats: Tensor, generator: str) -> None:
        """Generated features ``feats`` (of ``generator``, e.g. ``sample_fn``) of the width of the features or the
        statistics' mean of the file ``real`` names, when it names one; ``ValueError`` naming both widths, the
        file and the generator."""
        ref, held = self._source.reference, self._source.kind
        if ref is None or held not in ("features", "statistics") or feats.ndim != 2:
            return  # (features of another shape are left to the metric's own checks)
        rows = ref.mean if held == "statistics" else ref.features  # [D] or [N, D]: the width is the last side
        width = None if rows is None else int(rows.shape[-1])
        if width is not None and feats.shape[1] != width:
            made = "`feature_extractor`'s features of" if self.feature_extractor is not None else "the features of"
            raise ValueError(
                f"Expected {made} the generated samples of `{generator}` to have the {width} features of "
                f"the {held} of argument `real` ({self._source.path}, {ref.source}), but got {feats.shape[1]} "
                f"(shape {tuple(feats.shape)})"
            )

    def _feed(self, feats: Tensor, role: str, labels: Optional[Tensor]) -> None:
        """``metric.update`` of one chunk of the ``role`` set; its errors name the callback's argument."""
        try:
            if role == "test":
                self.metric.update(feats, role="test")
            elif labels is not None:
                self.metric.update(feats, real=True, labels=labels.to(feats.device))
            else:
                self.metric.update(feats, real=True)
        except (ValueError, TypeError) as err:  # name the callback's argument, not the metric's
            kind = TypeError if isinstance(err, TypeError) else ValueError
            raise kind(f"{err} (in the features of argument `{role}`)") from err

    def _real_features(self, device: torch.device, rank: int, world: int) -> Iterable[Tuple[Tensor, Optional[Tensor]]]:
        """This rank's real features and labels: a file's as they are, samples embedded (through the cache if any)."""
        if not self._source.embedded:
            return self._real_pairs(rank, world)
        if self.cache is None:
            return ((self._features(x, device), y) for x, y in self._real_pairs(rank, world))
        seen: List[Optional[Tensor]] = []

        def samples() -> Iterator[Tensor]:  # the cache reads the samples (once or twice) before any feature
            seen.clear()
            for x, y in self._real_pairs(rank, world):
                seen.append(y)
                yield x

        feats = self.cache.real_features(
            self.feature_extractor,
            samples,
            lambda x: self._features(x, device),
            num_real=self.num_real,
            rank=rank,
            world=world,
            device=device,
            chunk_rows=self.batch_size,
            extractor_precision=self.extractor_precision,
        )
        return relabel(feats, seen) if self.labelled else ((f, None) for f in feats)

    def _features(self, x: Tensor, device: torch.device, role: str = "the samples of argument `real`") -> Tensor:
        """Features of the samples ``x`` (``role`` names them in the extractor's errors), embedded again from
        the first row of ``x`` when an extraction batch runs out of memory and halves
        (:func:`~lightning_prd.callback.batches.retry_halving`)."""
        return retry_halving(lambda: self._embed(x, device, role), [self._extraction], OWNER, device)

    def _embed(self, x: Tensor, device: torch.device, role: str) -> Tensor:
        """Features of the samples ``x``, ``extract_batch_size`` rows per extractor call, on ``device``."""
        if self.feature_extractor is None:
            x = x.to(device)
            return x.reshape(x.shape[0], -1) if x.ndim != 2 else x
        rows = x.shape[0]
        size = self._extraction.size or max(rows, 1)
        parts = [
            self._extraction.run(
                min(size, rows - i),
                extract,
                self.feature_extractor,
                x[i : i + size].to(device),
                role,
                self.extractor_precision,
            )
            for i in range(0, max(rows, 1), size)
        ]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _clear_real(self) -> None:
        """Drop cached real (and test) features (a new fit may shard the real set differently)."""
        keep = getattr(self.metric, "reset_real_features", None)
        if keep is False:
            self.metric.reset_real_features = True
            self.metric.reset()
            self.metric.reset_real_features = False
        else:
            self.metric.reset()
        self._real_ready = False
        self._real_rows = 0


def _check_bound(source: RealSource, name: str) -> None:
    if source.rows is None:
        raise ValueError(
            f"Expected argument `{name}`={DATAMODULE + source.split!r} to be read from the trainer's datamodule, "
            "but the callback's setup has not run in a fit yet"
        )


def _row_count(source: RealSource) -> Optional[int]:
    """Rows of a source that is indexed by row (a tensor, an image folder, a file); ``None`` for a DataLoader."""
    if source.kind == "images":
        return len(source.rows)
    if isinstance(source.rows, Tensor):
        return int(source.rows.shape[0])
    return None


def _kind_text(kind: str) -> str:
    return {"images": "an image folder", "features": "a features file"}.get(kind, "a tensor")
