"""Class labels for a per-class metric (``GenerativeMetrics(per_class=True)``): where the callback takes them
from, and the checks that name where a bad label came from.

**Rule.** With a per-class metric every real and generated sample carries one integer class label:

* generated: ``sample_fn(pl_module, n)`` (or ``pl_module.sample(n)``) returns ``(samples, labels)``;
* real, a DataLoader or ``"datamodule:<split>"``: each batch is ``(samples, labels, ...)``;
* real, a tensor, an image folder or a features file: the argument ``real_labels``, one label per row of
  ``real`` in its order (the first ``num_real`` are used).

Labels are 1-D integer tensors, arrays or lists, one per sample. A float, boolean or string label raises
``TypeError``, a wrong shape ``ValueError``; each names where the labels came from and what they were.
Without a per-class metric none of this applies: a generator returning a tuple is refused as it always was.

Example:
    >>> import torch
    >>> class_labels(torch.tensor([0, 2, 1]), "argument `real_labels`", 3)
    tensor([0, 2, 1])
    >>> try:
    ...     class_labels(torch.tensor([0.0, 1.0]), "argument `real_labels`", 2)
    ... except TypeError as err:
    ...     print(err)
    Expected argument `real_labels` to hold integer class labels, but got dtype torch.float32
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import distinct_class_keys


def class_labels(value: Any, what: str, rows: Optional[int]) -> Tensor:
    """``value`` as a 1-D int64 CPU tensor of ``rows`` labels (any length when ``rows`` is None); errors name
    ``what`` (e.g. ``"argument `real_labels`"``) and the value's dtype or shape."""
    if isinstance(value, Tensor):
        t = value.detach()
    else:
        try:
            t = torch.as_tensor(np.asarray(value))
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"Expected {what} to be a 1-D tensor of integer class labels, but got {type(value).__name__} "
                f"that torch cannot hold ({err}); map the labels to integers first"
            ) from err
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise TypeError(f"Expected {what} to hold integer class labels, but got dtype {t.dtype}")
    if t.ndim != 1 or (rows is not None and t.shape[0] != rows):
        count = "" if rows is None else f" ({rows})"
        raise ValueError(
            f"Expected {what} to be 1-D with one class label per sample{count}, but got shape {tuple(t.shape)}"
        )
    return t.cpu().to(torch.int64)


def batch_labels(batch: Any, rows: int, name: str, index: int) -> Tensor:
    """The labels of batch ``index`` of argument ``name``: its second item, checked against its ``rows`` samples."""
    what = f"the labels of batch {index} of argument `{name}`"
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        shown = (
            f"a {type(batch).__name__} of {len(batch)}" if isinstance(batch, (tuple, list)) else type(batch).__name__
        )
        raise TypeError(
            f"Expected the batches of argument `{name}` to be (samples, labels, ...) for the per-class scores of "
            f"`metric` (per_class=True), but batch {index} is {shown}"
        )
    return class_labels(batch[1], what, rows)


def generated_pair(out: Any, name: str, n: int) -> Tuple[Any, Tensor]:
    """``(samples, labels)`` of a generator's output for a per-class metric (the samples are checked by the
    caller); ``TypeError``/``ValueError`` naming the generator ``name``."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        shown = f"a {type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list)) else type(out).__name__
        raise TypeError(
            f"Expected `{name}(…, {n})` to return (samples, labels) for the per-class scores of `metric` "
            f"(per_class=True), but got {shown}"
        )
    return out[0], class_labels(out[1], f"the labels of `{name}(…, {n})`", n)


def zip_labels(chunks: Iterable[Tensor], labels: Tensor, start: int) -> Iterator[Tuple[Tensor, Tensor]]:
    """``(chunk, its labels)``: ``chunks`` are consecutive rows of a set from row ``start`` on, ``labels`` the
    labels of the whole set."""
    at = start
    for x in chunks:
        yield x, labels[at : at + x.shape[0]]
        at += x.shape[0]


def relabel(features: Iterable[Tensor], seen: List[Optional[Tensor]]) -> Iterator[Tuple[Tensor, Tensor]]:
    """``(features, labels)`` for features that come in other chunks than the samples they were made from (the
    disk cache): ``seen`` holds the samples' labels in order once the first features arrive."""
    labels: Optional[Tensor] = None
    at = 0
    for f in features:
        if labels is None:
            labels = torch.cat([y for y in seen if y is not None]) if seen else torch.zeros(0, dtype=torch.int64)
        yield f, labels[at : at + f.shape[0]]
        at += f.shape[0]
    if labels is not None and at != labels.shape[0]:
        raise RuntimeError(f"PRDCallback: {at} real features came back for {labels.shape[0]} labelled real samples")


def check_class_names(value: Any) -> Optional[Dict[int, str]]:
    """``class_names`` as ``{label: name}``: a sequence (class ``i`` is named ``value[i]``) or a mapping of
    integer labels to names, or None. Names are non-empty strings without ``/`` (they end a chart's tag), and
    every class keeps its own key: no name is another class's number or reads as another class's name
    (:func:`~lightning_prd.functional.engine.inputs.distinct_class_keys`); errors name ``class_names`` and the value.

    Example:
        >>> check_class_names(["cat", "dog"]), check_class_names({3: "truck"})
        ({0: 'cat', 1: 'dog'}, {3: 'truck'})
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    else:
        raise TypeError(
            f"Expected argument `class_names` to be a list of names or a mapping of class labels to names, "
            f"but got {type(value).__name__}"
        )
    out: Dict[int, str] = {}
    for label, name in items:
        if isinstance(label, bool) or not isinstance(label, (int, np.integer)):
            raise TypeError(f"Expected argument `class_names` to have integer class labels, but got {label!r}")
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(
                f"Expected argument `class_names` to hold non-empty names without '/', but got {name!r} "
                f"for class {int(label)}"
            )
        out[int(label)] = name
    distinct_class_keys(out, "class_names")
    return out
