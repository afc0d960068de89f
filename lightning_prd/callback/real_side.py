"""``RealSide``: the callback's real set, from the ``real`` argument to the metric's real features.

``real`` is resolved when it is set (:mod:`~lightning_prd.callback.real_sources`), a datamodule's loader
in ``setup``; at the first evaluation of a fit each rank reads its rows
(:mod:`~lightning_prd.callback.sharding`, :mod:`~lightning_prd.callback.image_folder`), embeds those
that are samples (through the disk cache when there is one) and hands the features to
``metric.update(..., real=True)``. A file's features go to the metric as they are; a statistics file's
mean and covariance go to ``metric.set_real_statistics`` before every evaluation. A failure leaves no
half-read real set behind.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

import torch
from torch import Tensor

from lightning_prd.callback.image_folder import image_chunks
from lightning_prd.callback.real_sources import (
    DATAMODULE,
    RealSource,
    bind_datamodule,
    check_network,
    check_statistics_serve,
    resolve_real,
)
from lightning_prd.callback.sharding import check_samplers_agree, real_chunks
from lightning_prd.callback.sources import extract
from lightning_prd.features.cache import RealFeatureCache


class RealSide:
    """The real side of :class:`~lightning_prd.callback.core.PRDCallbackCore` (see ``PRDCallback``'s ``real``)."""

    feature_extractor: Any
    metric: Any
    num_real: Optional[int]
    batch_size: int
    log_images: bool
    cache: Optional[RealFeatureCache]
    _extractor_name: Optional[str]
    _real_ready: bool
    _source: RealSource

    @property
    def real(self) -> Any:
        """The ``real`` argument as given; setting it resolves and checks the new value."""
        return self._real

    @real.setter
    def real(self, value: Any) -> None:
        source = resolve_real(value, self.feature_extractor is not None, self._extractor_name)
        if source.kind == "statistics":
            check_statistics_serve(source, self.metric, self.log_images)
        check_network(source, self._extractor_name, self.feature_extractor)
        self._real, self._source = value, source

    def _bind_real(self, trainer: Any) -> None:
        """In ``setup``: the datamodule's loader that ``real="datamodule:<split>"`` names."""
        if self._source.kind == "datamodule":
            bind_datamodule(self._source, trainer, self.batch_size)

    def _real_chunks(self, rank: int, world: int) -> Iterator[Tensor]:
        """This rank's real rows, in order: samples, images or a file's features (none for statistics)."""
        source = self._source
        if source.kind == "statistics":
            return iter(())
        if source.kind == "images":
            size = getattr(self.feature_extractor, "input_size", None)
            return image_chunks(source.rows, self.num_real, self.batch_size, rank, world, size, source.path)
        if source.rows is None:
            raise ValueError(
                f"Expected argument `real`={DATAMODULE + source.split!r} to be read from the trainer's datamodule, "
                "but the callback's setup has not run in a fit yet"
            )
        chunks = real_chunks(source.rows, self.num_real, self.batch_size, rank, world)
        if source.reference is not None and source.reference.images is not None:  # channels-last images, permuted
            return (chunk.contiguous() for chunk in chunks)
        return chunks

    def _update_real(self, device: torch.device, rank: int, world: int) -> None:
        source = self._source
        check_samplers_agree(source.rows, rank, world)
        try:
            if source.kind == "statistics":
                ref = source.reference
                if ref is not None and ref.mean is not None and ref.cov is not None:
                    where = f"{source.path} ({ref.source})"
                    self.metric.set_real_statistics(
                        ref.mean.to(device), ref.cov.to(device), num_samples=ref.num_samples, source=where
                    )
            for f in self._real_features(device, rank, world):
                try:
                    self.metric.update(f.to(device), real=True)
                except (ValueError, TypeError) as err:  # name the callback's argument, not the metric's
                    kind = TypeError if isinstance(err, TypeError) else ValueError
                    raise kind(f"{err} (in the features of argument `real`)") from err
        except BaseException:
            self._clear_real()  # no half-extracted real set survives a failure
            raise
        self._real_ready = True

    def _real_features(self, device: torch.device, rank: int, world: int) -> Iterable[Tensor]:
        """This rank's real features: a file's as they are, samples embedded (through the cache if any)."""
        if not self._source.embedded:
            return self._real_chunks(rank, world)
        if self.cache is None:
            return (self._features(x, device) for x in self._real_chunks(rank, world))
        return self.cache.real_features(
            self.feature_extractor,
            lambda: self._real_chunks(rank, world),
            lambda x: self._features(x, device),
            num_real=self.num_real,
            rank=rank,
            world=world,
            device=device,
            chunk_rows=self.batch_size,
        )

    def _features(self, x: Tensor, device: torch.device, role: str = "the samples of argument `real`") -> Tensor:
        """Features of the samples ``x`` (``role`` names them in the extractor's errors)."""
        x = x.to(device)
        if self.feature_extractor is None:
            return x.reshape(x.shape[0], -1) if x.ndim != 2 else x
        return extract(self.feature_extractor, x, role)

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
