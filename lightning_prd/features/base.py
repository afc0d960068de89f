"""The feature-extractor protocol, the identity extractor, and batched extraction.

A feature extractor is an :class:`torch.nn.Module` that maps a batch of ``n`` samples to an
``[n, D]`` floating tensor. Besides ``forward`` it declares:

* ``num_features`` (int): ``D``. Only :class:`Identity` may leave it ``None`` (width unknown
  until it sees data).
* ``input_dtype`` (``torch.dtype`` or None): the canonical dtype of its input. ``torch.uint8``
  for image models (pixel values 0..255); ``None`` for features and tabular data (any
  floating dtype).
* ``input_range`` (``(low, high)`` or None): the value range of *floating* input. Image models
  read floats in ``(0.0, 1.0)``: a float image equals the uint8 image divided by 255.
* ``input_size`` (``(H, W)`` or None): the spatial size the network runs at. Images of any
  other size are resized to it inside ``forward`` (bilinear, antialiased); None for non-images.

and, for the batches it is run in:

* ``default_batch_size`` (int or None): rows per call that fit a 24 GB card beside a model in training,
  from the extractor's measured peak memory per image (``benchmarks/bench_extractor_memory.py``); the
  callback's and the CLI's extraction batch when the user gives none. None: the caller's fallback
  (:func:`lightning_prd.callback.batches.extraction_batch`).

and, for the fingerprint that travels with every score (:func:`describe_extractor`):

* ``name`` (str or None): what the extractor is (a registry name such as ``"fid-inception"``);
  None reads as the class name.
* ``weights_sha256`` (hex str or None): the SHA-256 of the weights file it loaded; None for random
  or unknown weights.
* ``preprocessing`` (dict or None): JSON-friendly ``resize``, ``quantisation``, ``input_size``,
  ``normalisation`` (and what else acts before the network); None is filled in from the input
  contract by :func:`describe_extractor`.

``forward`` returns ``[n, D]`` features, or a dict of such tensors (one per output, e.g. the
FID Inception's ``{"pool", "logits", "spatial"}``): :func:`extract_features` then returns a dict.

:class:`FeatureExtractor` gives those attributes their defaults; any module or callable
with ``num_features`` works where the package asks for an extractor (duck typing).
:func:`extract_features` runs one over a tensor or a DataLoader in batches, without
gradients, with an optional tqdm progress bar.

Example:
    >>> import torch
    >>> from lightning_prd.features import Identity, extract_features
    >>> feats = extract_features(Identity(), torch.randn(10, 4), batch_size=3)
    >>> tuple(feats.shape)
    (10, 4)
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor, nn

from lightning_prd.features.precision import DEFAULT_EXTRACTOR_PRECISION, precision_context
from lightning_prd.functional.engine.inputs import check_positive_int


class FeatureExtractor(nn.Module):
    """Base class of the package's extractors: a module mapping ``[n, ...]`` samples to ``[n, D]``.

    Subclasses set ``num_features`` and the input contract (see the module docstring) and
    implement ``forward``.
    """

    num_features: Optional[int] = None
    input_dtype: Optional[torch.dtype] = None
    input_range: Optional[Tuple[float, float]] = None
    input_size: Optional[Tuple[int, int]] = None
    default_batch_size: Optional[int] = None
    name: Optional[str] = None
    weights_sha256: Optional[str] = None
    preprocessing: Optional[Dict[str, Any]] = None

    def extra_repr(self) -> str:
        return describe_contract(self)

    def describe(self) -> Dict[str, Any]:
        """``name``, ``weights_sha256`` and ``preprocessing`` of this extractor (:func:`describe_extractor`)."""
        return describe_extractor(self)


def json_value(value: Any) -> Any:
    """``value`` as JSON-safe data: torch dtypes by name, tuples as lists, dict keys as strings, other objects
    by ``str``.

    Example:
        >>> import torch
        >>> json_value({"dtype": torch.float32, "size": (299, 299), 1: None})
        {'dtype': 'float32', 'size': [299, 299], '1': None}
    """
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, (tuple, list)):
        return [json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _default_preprocessing(extractor: Any) -> Dict[str, Any]:
    """The preprocessing an extractor that declares none implies by its input contract."""
    size = getattr(extractor, "input_size", None)
    if size is None:
        return {}
    mode, antialias = getattr(extractor, "mode", None), getattr(extractor, "antialias", None)
    out: Dict[str, Any] = {
        "resize": None if mode is None else f"torch-{mode}" + ("-antialias" if antialias else ""),
        "quantisation": "none",
        "input_size": list(size),
    }
    mean, std = getattr(extractor, "mean", None), getattr(extractor, "std", None)
    if mean is not None and std is not None:
        out["normalisation"] = {"mean": list(mean), "std": list(std)}
    return out


def describe_extractor(extractor: Any) -> Dict[str, Any]:
    """What made the features, for the fingerprint: ``{"name", "weights_sha256", "preprocessing"}`` (and ``"arch"``
    when the extractor declares one, e.g. DINOv2's ``"vitl14"``).

    Works for any extractor (duck typing): ``name`` defaults to the class name, ``weights_sha256`` to
    None, ``preprocessing`` to what the input contract implies (resize mode, no quantisation of float
    input, ``input_size``, ``mean``/``std``) or ``{}`` for non-image extractors. Values are JSON-safe.

    Example:
        >>> describe_extractor(Identity())
        {'name': 'identity', 'weights_sha256': None, 'preprocessing': {}}
        >>> describe_extractor(lambda x: x)["name"]
        'function'
    """
    name = getattr(extractor, "name", None)
    if not isinstance(name, str) or not name:
        name = type(extractor).__name__
    sha = getattr(extractor, "weights_sha256", None)
    pre = getattr(extractor, "preprocessing", None)
    pre = dict(pre) if isinstance(pre, Mapping) else _default_preprocessing(extractor)
    out = {"name": name, "weights_sha256": sha if isinstance(sha, str) else None, "preprocessing": json_value(pre)}
    arch = getattr(extractor, "arch", None)
    if isinstance(arch, str) and arch:
        out["arch"] = arch
    return out


def describe_contract(extractor: Any) -> str:
    """One line naming an extractor's output width and input contract.

    Example:
        >>> describe_contract(Identity(8))
        'num_features=8, input_dtype=any float, input_range=None, input_size=None'
    """
    dtype = getattr(extractor, "input_dtype", None)
    return (
        f"num_features={getattr(extractor, 'num_features', None)}, "
        f"input_dtype={'any float' if dtype is None else str(dtype).replace('torch.', '')}, "
        f"input_range={getattr(extractor, 'input_range', None)}, input_size={getattr(extractor, 'input_size', None)}"
    )


class Identity(FeatureExtractor):
    """Features in, features out: for precomputed embeddings and tabular data.

    Samples with more than two dimensions are flattened to ``[n, prod(rest)]``.

    Args:
        num_features: expected width ``D``; if given, inputs of another width raise
            ``ValueError``. None accepts any width.

    Example:
        >>> import torch
        >>> Identity(num_features=3)(torch.zeros(2, 3)).shape
        torch.Size([2, 3])
        >>> Identity()(torch.zeros(2, 2, 2)).shape
        torch.Size([2, 4])
    """

    name = "identity"

    def __init__(self, num_features: Optional[int] = None) -> None:
        super().__init__()
        self.num_features = None if num_features is None else check_positive_int(num_features, "num_features")

    def forward(self, x: Any) -> Tensor:
        if not isinstance(x, Tensor):
            x = torch.as_tensor(np.asarray(x))
        if x.ndim < 2:
            raise ValueError(
                f"Expected samples of shape [n, D] (or [n, ...] to flatten), but got shape {tuple(x.shape)}"
            )
        if x.ndim > 2:
            x = x.reshape(x.shape[0], -1)
        if self.num_features is not None and x.shape[1] != self.num_features:
            raise ValueError(f"Expected {self.num_features} features per sample, but got shape {tuple(x.shape)}")
        return x


def first_tensor(batch: Any, where: str) -> Tensor:
    """The samples of one batch: a tensor/array, or the first element of a tuple/list (``(x, y)``)."""
    if isinstance(batch, (tuple, list)) and batch:
        batch = batch[0]
    if isinstance(batch, np.ndarray):
        batch = torch.from_numpy(batch)
    if not isinstance(batch, Tensor):
        raise TypeError(
            f"Expected {where} to yield tensors or (tensor, ...) tuples of samples, but got {type(batch).__name__}"
        )
    return batch


def _batches(data: Any, batch_size: int) -> Iterator[Tensor]:
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, Tensor):
        if data.ndim == 0:
            raise ValueError("Expected argument `data` to hold samples along dim 0, but got a 0-dim tensor")
        for start in range(0, data.shape[0], batch_size):
            yield data[start : start + batch_size]
        return
    if isinstance(data, (str, bytes, dict)) or not isinstance(data, Iterable):
        raise TypeError(
            "Expected argument `data` to be a tensor, an array or a DataLoader of samples, "
            f"but got {type(data).__name__}"
        )
    for batch in data:
        yield first_tensor(batch, "argument `data`")


def _total(data: Any) -> Optional[int]:
    if isinstance(data, (Tensor, np.ndarray)):
        return int(data.shape[0]) if data.ndim else None
    dataset = getattr(data, "dataset", None)
    try:
        return len(dataset) if dataset is not None else None
    except TypeError:
        return None


def _module_device(module: Any) -> torch.device:
    if isinstance(module, nn.Module):
        for tensor in list(module.parameters()) + list(module.buffers()):
            return tensor.device
    return torch.device("cpu")


def _check_output(out: Any, n: int, widths: Dict[str, int]) -> Dict[str, Tensor]:
    """One batch's output as ``{key: [n, D_key]}`` (key ``""`` for a plain tensor), checked against earlier batches."""
    if isinstance(out, Tensor):
        parts = {"": out}
    elif isinstance(out, Mapping) and out and all(isinstance(k, str) and k for k in out):
        parts = dict(out)
    else:
        raise TypeError(
            "Expected the extractor to return a tensor [n, D] or a dict of them, "
            f"but got {type(out).__name__}" + (" with non-string or empty keys" if isinstance(out, Mapping) else "")
        )
    if widths and set(parts) != set(widths):
        raise ValueError(
            f"Expected the extractor to return the same outputs in every batch, {sorted(widths)}, "
            f"but got {sorted(parts)}"
        )
    for key, value in parts.items():
        what = f"output {key!r}" if key else "features"
        if not isinstance(value, Tensor):
            raise TypeError(f"Expected the extractor's {what} to be a tensor [n, D], but got {type(value).__name__}")
        if value.ndim != 2 or value.shape[0] != n:
            raise ValueError(
                f"Expected the extractor to map a batch of {n} samples to [{n}, D] ({what}), "
                f"but got shape {tuple(value.shape)}"
            )
        if key in widths and value.shape[1] != widths[key]:
            raise ValueError(
                f"Expected the extractor to return {widths[key]} {what} per sample in every batch, "
                f"but got {value.shape[1]}"
            )
        widths[key] = value.shape[1]
    return parts


def extract_features(
    extractor: Any,
    data: Union[Tensor, np.ndarray, Iterable[Any]],
    *,
    batch_size: int = 256,
    device: Union[None, str, torch.device] = None,
    output_device: Union[str, torch.device] = "cpu",
    progress: bool = False,
    desc: str = "features",
    extractor_precision: str = DEFAULT_EXTRACTOR_PRECISION,
) -> Any:
    """Run ``extractor`` over ``data`` in batches, without gradients, and concatenate ``[n, D]``.

    Args:
        extractor: module or callable mapping a batch to ``[b, D]`` (e.g. from
            :func:`~lightning_prd.features.get_extractor`), or to a dict of such tensors (one
            per output; the keys must be the same in every batch). A module is put in eval mode
            for the run and its previous mode restored afterwards.
        data: a tensor/array of samples (split along dim 0 into ``batch_size`` chunks), or an
            iterable of batches such as a DataLoader (a batch may be ``(x, label)``; the first
            element is used).
        batch_size: rows per forward pass for tensor input.
        device: where to run; the extractor module is moved there (in place). Default: the
            device of the extractor's parameters (CPU for a callable).
        output_device: where the concatenated features go (CPU by default, to bound GPU memory).
        progress: show a tqdm progress bar on stderr.
        desc: the progress bar's label.
        extractor_precision: ``"ieee"`` (default: no autocast, IEEE float32 matmuls and convolutions, the
            reference tools' features) or ``"fast"`` (the caller's TF32 and autocast settings):
            :mod:`lightning_prd.features.precision`.

    Returns:
        ``[n, D]`` features (a ``Tensor``), in the extractor's output dtype; for an extractor
        returning dicts, a dict ``{key: [n, D_key]}`` concatenated per key.

    Example:
        >>> import torch
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> loader = DataLoader(TensorDataset(torch.randn(7, 5), torch.zeros(7)), batch_size=4)
        >>> tuple(extract_features(Identity(5), loader).shape)
        (7, 5)
        >>> two = extract_features(lambda x: {"a": x, "b": x[:, :2]}, torch.randn(7, 5), batch_size=3)
        >>> {key: tuple(value.shape) for key, value in two.items()}
        {'a': (7, 5), 'b': (7, 2)}
    """
    if not callable(extractor):
        raise TypeError(f"Expected argument `extractor` to be callable, but got {type(extractor).__name__}")
    batch_size = check_positive_int(batch_size, "batch_size")
    if device is not None:
        device = torch.device(device)
        if isinstance(extractor, nn.Module):
            extractor.to(device)
    run_device = device if device is not None else _module_device(extractor)
    from tqdm.auto import tqdm

    was_training = extractor.training if isinstance(extractor, nn.Module) else None
    if was_training:
        extractor.eval()
    chunks: Dict[str, List[Tensor]] = {}
    widths: Dict[str, int] = {}
    bar = tqdm(
        total=_total(data),
        desc=desc,
        unit="sample",
        disable=not progress,
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
    )
    try:
        with precision_context(extractor_precision):
            for batch in _batches(data, batch_size):
                if batch.shape[0] == 0:
                    continue
                parts = _check_output(extractor(batch.to(run_device)), batch.shape[0], widths)
                for key, value in parts.items():
                    chunks.setdefault(key, []).append(value.detach().to(output_device))
                bar.update(batch.shape[0])
    finally:
        bar.close()
        if was_training:
            extractor.train(True)
    if not chunks:
        raise ValueError("Expected argument `data` to hold at least one sample, but it was empty")
    if set(chunks) == {""}:
        return torch.cat(chunks[""])
    return {key: torch.cat(values) for key, values in chunks.items()}
