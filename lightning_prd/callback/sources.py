"""Where the callback's tensors come from, checked, with errors that say where: the generator's
output, the extractor's features and the metric's view of them.

**Rule.** An error raised on the generated side names the generator (``sample_fn`` or the
module's ``sample``) and the generated samples; an error of the extractor names
``feature_extractor`` and the samples it was given; an error the metric raises on features
names who made them. A ``TypeError``, ``ValueError`` or ``RuntimeError`` (exactly these types;
subclasses such as ``torch.OutOfMemoryError`` pass through unchanged) is raised again as the same
type with a message that says so, chained to the original.

Example:
    >>> import torch
    >>> try:
    ...     checked_samples(torch.full((4, 2), float("nan")), "sample_fn", 4)
    ... except ValueError as err:
    ...     print(err)
    Expected the generated samples of `sample_fn(…, 4)` to be finite, but 4 of its 4 samples hold NaN or Inf
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NoReturn, Optional, Tuple

from torch import Tensor

from lightning_prd.callback.labels import generated_pair
from lightning_prd.features.precision import DEFAULT_EXTRACTOR_PRECISION, precision_context
from lightning_prd.functional.engine.inputs import non_finite_rows

#: the exception types raised again with a message naming the source
RENAMED = (TypeError, ValueError, RuntimeError)


def renamed(err: BaseException, message: str) -> BaseException:
    """``err`` again with ``message`` when its type is exactly one of :data:`RENAMED`, else ``err`` itself."""
    return type(err)(message) if type(err) in RENAMED else err


def _raise(err: BaseException, message: str) -> NoReturn:
    new = renamed(err, message)
    if new is err:
        raise err
    raise new from err


def generator_name(sample_fn: Any, pl_module: Any) -> str:
    """How errors name the generator: ``sample_fn`` or ``<ModuleClass>.sample``."""
    return "sample_fn" if sample_fn is not None else f"{type(pl_module).__name__}.sample"


def draw(generate: Callable[[], Any], name: str, n: int) -> Tensor:
    """``generate()``, which must return ``n`` finite samples; errors name ``name`` and the samples."""
    try:
        out = generate()
    except RENAMED as err:
        _raise(err, f"`{name}(…, {n})` failed while generating samples: {err}")
    return checked_samples(out, name, n)


def draw_labelled(generate: Callable[[], Any], name: str, n: int) -> Tuple[Tensor, Tensor]:
    """``generate()`` for a per-class metric: ``(samples, labels)``, ``n`` finite samples and ``n`` integer
    class labels (:func:`~lightning_prd.callback.labels.generated_pair`); errors name ``name``."""
    try:
        out = generate()
    except RENAMED as err:
        _raise(err, f"`{name}(…, {n})` failed while generating samples: {err}")
    samples, labels = generated_pair(out, name, n)
    return checked_samples(samples, name, n), labels


def checked_samples(out: Any, name: str, n: int) -> Tensor:
    """``out`` if it is a tensor of ``n`` samples, finite when floating-point; else a ``TypeError`` or
    ``ValueError`` naming ``name`` and the generated samples."""
    if not isinstance(out, Tensor):
        raise TypeError(f"Expected `{name}(…, {n})` to return a tensor of {n} samples, but got {type(out).__name__}")
    if out.ndim == 0 or out.shape[0] != n:
        raise ValueError(f"Expected `{name}(…, {n})` to return {n} samples, but got shape {tuple(out.shape)}")
    bad = non_finite_rows(out.detach()) if out.is_floating_point() else 0
    if bad:
        raise ValueError(
            f"Expected the generated samples of `{name}(…, {n})` to be finite, but {bad} of its {n} samples "
            f"hold NaN or Inf"
        )
    return out


#: the entry of a dict output (one tensor per output, e.g. ``FIDInceptionFeatures(logits=True)``) the metric takes
MAIN_OUTPUT = "pool"


def extract(
    extractor: Callable[[Tensor], Any], x: Tensor, role: str, extractor_precision: str = DEFAULT_EXTRACTOR_PRECISION
) -> Tensor:
    """``extractor(x)``, which must be a tensor, or a dict whose :data:`MAIN_OUTPUT` entry (the pool features) is
    one; errors name ``feature_extractor`` and ``role`` (the samples). The call runs in
    :func:`~lightning_prd.features.precision.precision_context` of ``extractor_precision``."""
    try:
        with precision_context(extractor_precision):
            feats = extractor(x)
    except RENAMED as err:
        _raise(err, f"`feature_extractor` failed on {role}: {err}")
    if isinstance(feats, Mapping) and isinstance(feats.get(MAIN_OUTPUT), Tensor):
        feats = feats[MAIN_OUTPUT]
    if not isinstance(feats, Tensor):
        raise TypeError(
            f"Expected `feature_extractor` to return a tensor [n, D], but got {type(feats).__name__} on {role}"
        )
    return feats


def update_fake(metric: Any, feats: Tensor, name: str, extracted: bool, labels: Optional[Tensor] = None) -> None:
    """``metric.update(feats, real=False)`` (with ``labels=`` for a per-class metric); its errors name the
    generated samples of ``name`` (and ``feature_extractor`` when ``extracted``)."""
    try:
        if labels is None:
            metric.update(feats, real=False)
        else:
            metric.update(feats, real=False, labels=labels.to(feats.device))
    except (TypeError, ValueError) as err:
        made = "`feature_extractor` computed from" if extracted else "of"
        _raise(err, f"{err} (in the features {made} the generated samples of `{name}`)")


def fake_role(name: str) -> str:
    """The generated samples, as errors of the extractor name them."""
    return f"the generated samples of `{name}`"
