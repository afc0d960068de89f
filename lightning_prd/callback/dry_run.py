"""The callback's dry run before training, and the ``image_range`` of generated images.

**Rule.** In ``on_fit_start`` (after ``setup``, once the module is on its device, before the sanity check
and the first training step) each rank draws :data:`PROBE` generated samples (``sample_fn`` or the module's
``sample``) with the evaluation's own fixed noise and takes the first :data:`PROBE` rows of the real set
(the first two files of an image folder, the first batch of a DataLoader), embeds both with
``feature_extractor`` in eval mode under ``torch.no_grad()``, and refuses, in one line, what would fail at the
first evaluation:

* **range**: floating images outside the range the extractor takes (its ``input_range``, ``(0, 1)`` for the
  image extractors; uint8 is 0..255), or generated images outside ``image_range``;
* **width**: generated features of another width than the real features, the features file's or the
  statistics file's;
* **dtype**: features that are not floating-point (or samples the extractor does not take);
* **device**: generated and real features on different devices, or an extractor that fails on the
  module's device.

The RNG states are those on entry afterwards (:func:`~lightning_prd.callback.rng.preserved_rng`), every
module's training flag is restored, and the metric is not touched: the training run is the one without the
callback. Nothing is checked when the fit is no fit (``validate``, ``test``) or on ranks without generated
samples.

**``image_range=(low, high)``** says the generator's floating-point images lie in ``[low, high]``; they are
mapped to ``(x - low) / (high - low)``, the ``[0, 1]`` the image extractors take, before the extractor sees
them (and in the sample grids). ``image_range=(-1, 1)`` is the DCGAN convention (a generator ending in
``tanh``). Generated values outside ``image_range`` are refused, naming ``sample_fn``. uint8 samples
(0..255) and the real set are taken as they are: real images must be uint8 or floats in ``[0, 1]``.

Example:
    >>> import torch
    >>> to_unit_range(torch.tensor([-1.0, 0.0, 1.0]), (-1.0, 1.0), "sample_fn").tolist()
    [0.0, 0.5, 1.0]
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from lightning_prd.callback.batches import batch_seed, rows_of
from lightning_prd.callback.image_folder import image_chunks
from lightning_prd.callback.rng import REAL_STREAM, fixed_rng, preserved_rng, stream_seed
from lightning_prd.callback.schedule import fitting
from lightning_prd.callback.sources import RENAMED, fake_role, generator_name
from lightning_prd.features.base import first_tensor
from lightning_prd.functional.engine.inputs import as_features

#: generated samples (and real rows) the dry run embeds
PROBE = 2
#: values this far outside a range still count as inside it (float rounding of a [0, 1] image)
_TOL = 1e-3


def check_image_range(value: Any) -> Optional[Tuple[float, float]]:
    """``image_range`` checked: None, or a pair ``(low, high)`` of finite numbers with ``low < high``."""
    if value is None:
        return None
    pair = tuple(value) if isinstance(value, (tuple, list)) else ()
    ok = len(pair) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair)
    if not ok or not all(math.isfinite(v) for v in pair) or not pair[0] < pair[1]:
        raise ValueError(
            "Expected argument `image_range` to be None or a pair (low, high) of finite numbers with low < high, "
            f"the range of the generated images (e.g. (-1, 1) for a generator ending in tanh), but got {value!r}"
        )
    return float(pair[0]), float(pair[1])


def _span(x: Tensor) -> Tuple[float, float]:
    return float(x.min()), float(x.max())


def to_unit_range(samples: Tensor, image_range: Optional[Tuple[float, float]], name: str) -> Tensor:
    """Floating ``samples`` of ``name`` in ``image_range`` mapped to ``[0, 1]``; ``ValueError`` naming ``name`` and
    ``image_range`` when they lie outside it. uint8 samples, and every sample when ``image_range`` is None, as
    they are."""
    if image_range is None or not samples.is_floating_point() or not samples.numel():
        return samples
    low, high = image_range
    seen = _span(samples)
    slack = _TOL * (high - low)
    if seen[0] < low - slack or seen[1] > high + slack:
        raise ValueError(
            f"Expected the generated samples of `{name}` to lie in image_range=({low:g}, {high:g}), but got values "
            f"in [{seen[0]:.4g}, {seen[1]:.4g}]"
        )
    return ((samples - low) / (high - low)).clamp(0.0, 1.0)


def _hint(low: float, high: float) -> str:
    if low >= -1 - _TOL and high <= 1 + _TOL:
        return "; a generator ending in tanh gives [-1, 1]: pass image_range=(-1, 1)"
    if low >= -_TOL and high <= 255 + _TOL:
        return "; for 0..255 floats pass image_range=(0, 255), or return torch.uint8"
    return ""


def _check_taken(x: Tensor, extractor: Any, who: str, generated: bool, image_range: Any) -> None:
    """Floating samples ``x`` within the extractor's ``input_range`` (when it declares one)."""
    taken = getattr(extractor, "input_range", None)
    if taken is None or not isinstance(x, Tensor) or not x.is_floating_point() or not x.numel():
        return
    low, high = _span(x)
    if low >= taken[0] - _TOL and high <= taken[1] + _TOL:
        return
    fix = _hint(low, high) if generated else ": give real images as uint8 0..255 or floats in [0, 1]"
    mapped = f" after image_range={image_range}" if generated and image_range is not None else ""
    raise ValueError(
        f"Expected {who} to hold floating images in [{taken[0]:g}, {taken[1]:g}] (or uint8 0..255), the range "
        f"`feature_extractor` ({type(extractor).__name__}) takes, but got values in [{low:.4g}, {high:.4g}]"
        f"{mapped}{fix}"
    )


def _probe_real(cb: Any, device: torch.device) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """The first :data:`PROBE` real rows (samples or a file's features) and their features; ``(None, None)``
    for a statistics file or an empty real set. A DataLoader's first batch is read as it comes (no sampler
    is consulted: every rank checks the same rows)."""
    source = cb._source
    first: Optional[Tensor]
    if source.kind == "statistics":
        return None, None
    if source.kind == "images":
        size = getattr(cb.feature_extractor, "input_size", None)
        first = next(iter(image_chunks(source.rows[:PROBE], PROBE, PROBE, 0, 1, size, source.path)), None)
    elif isinstance(source.rows, Tensor):
        first = source.rows[:PROBE]
    else:  # a DataLoader (any iterable of batches), a datamodule's included
        batch = next(iter(source.rows), None)
        first = None if batch is None else first_tensor(batch, "argument `real`")
    if first is None or not first.shape[0]:
        return None, None
    rows = first[:PROBE].contiguous()
    if not source.embedded:
        return rows, rows.to(device)
    _check_taken(rows, cb.feature_extractor, "the real samples of argument `real`", False, None)
    return rows, cb._features(rows, device)


def _features(feats: Tensor, who: str) -> Tensor:
    """``feats`` checked as the metric checks features (floating, finite, ``[n, D]``); errors say ``who`` made them."""
    try:
        return as_features(feats, "features")
    except (TypeError, ValueError) as err:
        raise type(err)(f"{err} (in the features {who})") from None


def _compare(fake: Tensor, real: Tensor, name: str, cb: Any) -> None:
    """Generated and real features of one width, on one device."""
    where = f" ({cb._source.path})" if cb._source.path else ""
    real_side = f"the real features of argument `real`{where}"
    if fake.shape[1] != real.shape[1]:
        raise ValueError(
            f"Expected the features of the generated samples of `{name}` to have the {real.shape[1]} features of "
            f"{real_side}, but got {fake.shape[1]}"
        )
    if fake.device != real.device:
        raise ValueError(
            f"Expected the features of the generated samples of `{name}` on {real.device} like {real_side}, but "
            f"got {fake.device}"
        )


def _one_line(err: BaseException, n: int) -> BaseException:
    """``err`` (exactly a TypeError, ValueError or RuntimeError) as one line saying when it was found."""
    if type(err) not in RENAMED:
        return err
    first = " ".join(str(err).strip().splitlines()[0].split()) if str(err).strip() else type(err).__name__
    return type(err)(f"{first} (PRDCallback's dry run on {n} samples, before the first training step)")


def dry_run(cb: Any, trainer: Any, pl_module: Any) -> None:
    """The checks of the module docstring, on this rank; raises one line, or returns having changed nothing."""
    if not fitting(trainer):
        return
    rank, world = trainer.global_rank, trainer.world_size
    rows = rows_of(cb.num_samples, cb.batch_size, rank, world)  # this rank's generated samples
    n = min(PROBE, len(rows))
    if n == 0:
        return
    device = pl_module.device
    extractor = cb.feature_extractor
    if isinstance(extractor, nn.Module):
        extractor.to(device)
    roots: Sequence[Any] = (pl_module, extractor)
    modes: List[Tuple[nn.Module, bool]] = [
        (m, m.training) for root in roots if isinstance(root, nn.Module) for m in root.modules()
    ]
    name = generator_name(cb.sample_fn, pl_module)
    try:
        for m, _ in modes:
            m.eval()
        with preserved_rng(device), torch.no_grad():
            # the noise of this rank's first samples at an evaluation: its first global batch's
            with fixed_rng(batch_seed(cb.seed, rows.start // cb.batch_size), device):
                samples, _ = cb._draw(pl_module, n)
            if extractor is not None:
                _check_taken(samples, extractor, f"the generated samples of `{name}`", True, cb.image_range)
            made = "`feature_extractor` computed from" if extractor is not None else "of"
            fake = _features(cb._features(samples, device, role=fake_role(name)), f"{made} {fake_role(name)}")
            cb._check_file_width(fake, name)
            with fixed_rng(stream_seed(cb.seed + rank, REAL_STREAM), device):
                _, real = _probe_real(cb, device)
            if real is not None:
                _compare(fake, _features(real, "of argument `real`"), name, cb)
    except RENAMED as err:
        raise _one_line(err, n) from err
    finally:
        for m, mode in modes:
            m.training = mode
