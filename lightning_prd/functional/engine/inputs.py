"""Input checks shared by every public entry point.

Messages follow torchmetrics: they name the argument and the value that was given.
No ``assert`` on user input: these raise ``ValueError``/``TypeError``.
"""

from __future__ import annotations

import math
import numbers
import unicodedata
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

#: narrow float dtypes, widened to float32 without loss (the float8 kinds this torch has)
NARROW_FLOATS = (torch.float16, torch.bfloat16) + tuple(
    getattr(torch, name)
    for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")
    if hasattr(torch, name)
)


def check_int(value: Any, name: str, *, minimum: Optional[int] = None, maximum: Optional[int] = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[minimum, maximum]``, else raise ``ValueError``.

    Python and NumPy integers (anything :class:`numbers.Integral`) and 0-d integer tensors or
    arrays are accepted; ``bool``, floats (even ``3.0``) and strings are not.
    """
    value = _scalar(value)
    ok = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
    if ok:
        value = int(value)
        ok = (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
    if not ok:
        if minimum == 1 and maximum is None:
            what = "a positive integer"
        elif minimum == 0 and maximum is None:
            what = "a non-negative integer"
        elif minimum is None and maximum is None:
            what = "an integer"
        elif maximum is None:
            what = f"an integer of at least {minimum}"
        else:
            what = f"an integer in [{minimum}, {maximum:,}]"
        raise ValueError(f"Expected argument `{name}` to be {what}, but got {_show(value)}")
    return value


def _show(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_positive_int(value: Any, name: str, *, maximum: Optional[int] = None) -> int:
    """Return ``value`` as an ``int`` if it is a positive integer (at most ``maximum``), else raise ``ValueError``."""
    return check_int(value, name, minimum=1, maximum=maximum)


#: the largest seed every generator we seed accepts (torch takes 64-bit seeds, Python's random any)
MAX_SEED = 2**63 - 1


def check_seed(value: Any, name: str = "seed") -> int:
    """Return ``value`` as an ``int`` if it is a seed in ``[0, 2**63 - 1]``, else raise ``ValueError``."""
    return check_int(value, name, minimum=0, maximum=MAX_SEED)


def _scalar(value: Any) -> Any:
    """A 0-d tensor or array as its Python number (e.g. a quantile of a score); anything else as is."""
    if isinstance(value, (Tensor, np.ndarray)) and value.ndim == 0 and value.dtype not in (torch.bool, np.bool_):
        return value.item()
    return value


def check_real(
    value: Any,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a ``float`` if it is a real number in the given interval, else raise ``ValueError``.

    Finite unless ``allow_inf`` (NaN never); ``low_open``/``high_open`` exclude the end points.
    Python and NumPy numbers and 0-d tensors or arrays are accepted, ``bool`` and strings are not.
    """
    value = _scalar(value)
    ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    if ok:
        try:
            value = float(value)
        except OverflowError:  # an int beyond the float range
            ok = False
    if ok:
        ok = math.isfinite(value) or (allow_inf and not math.isnan(value))
        ok = ok and (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        if high == math.inf and low == 0:
            what = "a positive finite number" if low_open else "a non-negative finite number"
        elif high == math.inf and low == -math.inf:
            what = "a number (not NaN)" if allow_inf else "a finite number"
        else:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            what = f"a number in {left}{low:g}, {high:g}{right}"
        raise ValueError(f"Expected argument `{name}` to be {what}, but got {_show(value)}")
    return value


def torch_compatible(array: np.ndarray) -> np.ndarray:
    """``array`` in a layout torch can wrap: native byte order (big-endian data, e.g. a ``.npy``
    written on another machine, is converted) and no negative strides (reversed views are copied)."""
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if any(s < 0 for s in array.strides):
        array = np.ascontiguousarray(array)
    return array


def non_finite_rows(x: Tensor) -> int:
    """How many samples (entries of the first dimension) of a floating tensor hold NaN or Inf.

    A finite sum means every value is finite (NaN and inf propagate); only a non-finite sum,
    from bad values or an overflow of huge ones, needs the elementwise test (5x the cost).
    """
    if x.numel() == 0 or bool(torch.isfinite(x.sum())):
        return 0
    return int((~torch.isfinite(x)).reshape(x.shape[0], -1).any(1).sum())


def as_features(x: Any, name: str, *, allow_empty: bool = False) -> Tensor:
    """Convert ``x`` to a finite floating ``[n, D]`` tensor.

    float16/bfloat16/float8 are upcast to float32; integer, bool and complex inputs, sparse
    tensors and arrays of dtypes torch lacks (``numpy.longdouble``) raise
    ``TypeError`` (features are continuous embeddings; cast them explicitly if meant).
    Non-contiguous inputs are copied to a contiguous tensor; tensors that require grad are
    detached (no score is differentiable).
    """
    if isinstance(x, np.ndarray):
        x = torch_compatible(x)
    if type(x).__module__.startswith("scipy.sparse"):
        raise TypeError(
            f"Expected argument `{name}` to be a dense tensor or array, but got a SciPy sparse "
            f"{type(x).__name__}; convert it with `.toarray()`"
        )
    if not isinstance(x, Tensor):
        try:
            x = torch.as_tensor(x)
        except Exception as err:  # noqa: BLE001 - re-raised with the argument name
            dtype = getattr(x, "dtype", None)
            held = (
                "" if dtype is None else f" of dtype {dtype}, which torch cannot hold (cast it to float64 or float32)"
            )
            raise TypeError(
                f"Expected argument `{name}` to be a tensor or array of features, but got {type(x).__name__}{held}"
            ) from err
    if x.layout != torch.strided:
        raise TypeError(
            f"Expected argument `{name}` to be a dense tensor, but got layout {x.layout}; convert it with `.to_dense()`"
        )
    x = x.detach()
    if not x.is_floating_point():
        raise TypeError(
            f"Expected argument `{name}` to hold floating-point features, but got dtype {x.dtype}; "
            f"cast it with `.float()` if these are really feature values"
        )
    if x.is_meta:
        raise ValueError(
            f"Expected argument `{name}` to hold data, but got a tensor on the meta device of shape {tuple(x.shape)}"
        )
    if x.dtype in NARROW_FLOATS:
        x = x.float()
    if x.ndim != 2:
        raise ValueError(
            f"Expected argument `{name}` to be a 2-D tensor [num_samples, num_features], but got shape {tuple(x.shape)}"
        )
    if x.shape[0] == 0 and not allow_empty:
        raise ValueError(f"Expected argument `{name}` to hold at least one sample, but got shape {tuple(x.shape)}")
    if x.shape[1] == 0:
        raise ValueError(f"Expected argument `{name}` to have at least one feature, but got shape {tuple(x.shape)}")
    bad = non_finite_rows(x)
    if bad:
        raise ValueError(f"Expected argument `{name}` to be finite, but {bad} of its {x.shape[0]} rows hold NaN or Inf")
    # one memory layout for every caller: BLAS kernels (and so float32 rounding of values such
    # as realism) depend on it, and results must not depend on how the caller sliced the data
    return x.contiguous()


def check_pair(real: Tensor, fake: Tensor) -> None:
    """Same feature width and same device for the two sets."""
    if real.shape[1] != fake.shape[1]:
        raise ValueError(
            "Expected `real` and `fake` to have the same number of features, "
            f"but got {real.shape[1]} and {fake.shape[1]}"
        )
    if real.device != fake.device:
        raise ValueError(f"Expected `real` and `fake` on the same device, but got {real.device} and {fake.device}")


def check_min_samples(x: Tensor, k: int, name: str, k_name: str = "k") -> None:
    """A k-NN radius needs at least ``k + 1`` samples in the set."""
    check_min_count(x.shape[0], k, name, k_name)


def check_min_count(count: int, k: int, name: str, k_name: str = "k") -> None:
    """A k-NN radius needs at least ``k + 1`` samples in a set of ``count``: ``ValueError`` naming the set ``name``
    and ``k_name`` otherwise."""
    if count < k + 1:
        raise ValueError(
            f"Expected argument `{name}` to hold at least {k_name} + 1 = {k + 1} samples for k-NN radii, "
            f"but got {count}"
        )


def column_bounds(x: Tensor) -> Tuple[Tensor, Tensor]:
    """The column-wise minimum and maximum of an ``[n, D]`` set, in float64: the one pass over a set's
    values that the range checks need (:class:`~lightning_prd.functional.engine.sets.FeatureSets`
    keeps it per set)."""
    return x.amin(0).to(torch.float64), x.amax(0).to(torch.float64)


def span(*bounds: Tuple[Tensor, Tensor]) -> float:
    """``R = max_j (max x_j - min x_j)`` over sets given by their :func:`column_bounds`."""
    lo = torch.stack([b[0] for b in bounds]).amin(0)
    hi = torch.stack([b[1] for b in bounds]).amax(0)
    return float((hi - lo).max())


def value_range(*sets: Tensor) -> float:
    """``R = max_j (max x_j - min x_j)``: the largest column range over all the ``[n, D]`` sets, in float64."""
    return span(*(column_bounds(x) for x in sets))


def range_limits(dim: int, dtype: torch.dtype) -> Tuple[float, float]:
    """The feature ranges ``R`` (:func:`value_range`) for which tiles of ``dtype`` stay within its range.

    Tiles are GEMMs on features centred by a point inside their range, so every centred entry
    is at most ``R`` in magnitude, every squared norm, product sum and squared distance at most
    ``4 D R^2``. ``dtype`` is safe when

    * ``8 D R^2 <= max`` (no overflow, with a factor 2 to spare), and
    * ``eps R^2 >= 16 (D + 2) tiny`` (the products lost to underflow, at most ``tiny`` each,
      stay far below the rounding margin ``~ eps R^2``; else most decisions would fall to
      float64 one pair at a time, or the squared distances themselves would underflow),

    or ``R = 0`` (identical rows: every distance is exactly 0).

    Example:
        >>> import torch
        >>> ["%.1e" % v for v in range_limits(8, torch.float32)]
        ['4.0e-15', '2.3e+18']
        >>> ["%.1e" % v for v in range_limits(8, torch.float64)]
        ['1.3e-145', '1.7e+153']
    """
    info = torch.finfo(dtype)
    return math.sqrt(16 * (dim + 2) * info.tiny / info.eps), math.sqrt(info.max / (8 * dim))


def _inside(r: float, dim: int, dtype: torch.dtype) -> bool:
    low, high = range_limits(dim, dtype)
    return r == 0 or low <= r <= high


def fits_range(*sets: Tensor, dtype: torch.dtype = torch.float32) -> bool:
    """Whether tiles of ``dtype`` on these ``[n, D]`` feature sets stay within its range
    (:func:`range_limits`). One column-wise min/max per set decides, before any tile is computed.

    Example:
        >>> import torch
        >>> fits_range(torch.randn(5, 8)), fits_range(torch.randn(5, 8) * 1e19)
        (True, False)
        >>> fits_range(torch.randn(5, 8) * 1e-25), fits_range(torch.randn(5, 8).double() * 1e-25, dtype=torch.float64)
        (False, True)
    """
    return _inside(value_range(*sets), sets[0].shape[1], dtype)


def _float64_range_error(real: Tensor, fake: Tensor, scores: str) -> ValueError:
    """The error for features whose range leaves float64's (:func:`range_limits`), naming the set(s) at fault."""
    alone = [(name, x) for name, x in (("real", real), ("fake", fake)) if not fits_range(x, dtype=torch.float64)]
    named = alone or [("real", real), ("fake", fake)]
    names = " and ".join(f"`{name}`" for name, _ in named) + ("" if alone else " together")
    low, high = range_limits(real.shape[1], torch.float64)
    return ValueError(
        f"Expected features whose range R (the largest column max - min) lies in [{low:.3g}, {high:.3g}] for "
        f"{real.shape[1]} features, where squared distances stay within float64's range, but {names} span "
        f"R = {value_range(*(x for _, x in named)):.3g}; multiply both sets by one common factor "
        f"({scores} do not depend on it; a kernel bandwidth such as CMMD's `sigma` scales with it)"
    )


def check_float64_range(real: Tensor, fake: Tensor, *, scores: str = "the k-NN scores") -> None:
    """Raise ``ValueError`` when even float64 tiles of ``real`` and ``fake`` would leave float64's
    range (:func:`range_limits`: features spanning more than ``~1e150`` or less than ``~1e-145``;
    only float64 features can, float32 values always fit). The message names the set(s) at
    fault and the remedy: a common factor, on which ``scores`` do not depend."""
    if not fits_range(real, fake, dtype=torch.float64):
        raise _float64_range_error(real, fake, scores)


def compute_dtype(
    real: Tensor, fake: Tensor, dtype: Optional[torch.dtype], *, spread: Optional[float] = None
) -> torch.dtype:
    """The dtype of the distance tiles: float64 when asked for, when either input is float64,
    or when the features' range would leave float32's (:func:`fits_range`: squared distances
    past float32's maximum, or so small that underflow swamps them; float32 is then widened to
    float64, even when asked for); else float32. float64 features whose range would leave even
    float64's raise ``ValueError`` (:func:`check_float64_range`). ``spread``: the two sets' range
    :func:`value_range` when already known (no pass over the data then)."""
    if dtype is not None and dtype not in (torch.float32, torch.float64):
        raise ValueError(f"Expected argument `dtype` to be torch.float32 or torch.float64, but got {dtype}")
    wide = torch.float64 in (real.dtype, fake.dtype)
    if dtype is None:
        dtype = torch.float64 if wide else torch.float32
    if dtype == torch.float64 and not wide:  # float32 values always fit float64's range
        return dtype
    r, dim = (value_range(real, fake) if spread is None else spread), real.shape[1]
    if dtype == torch.float32 and _inside(r, dim, torch.float32):
        return dtype
    if wide and not _inside(r, dim, torch.float64):
        raise _float64_range_error(real, fake, "the k-NN scores")
    return torch.float64


def check_block_bytes(block_bytes: Any) -> int:
    """The tile memory budget must be a positive integer number of bytes."""
    return check_positive_int(block_bytes, "block_bytes")


#: the k-NN balls: ``"closed"`` (``d <= r``, the default) or ``"open"`` (``d < r``, as ``prdc``)
BALLS = ("closed", "open")


def check_ball(ball: Any) -> str:
    """``ball`` must be ``"closed"`` or ``"open"``."""
    if not isinstance(ball, str) or ball not in BALLS:
        raise ValueError(f"Expected argument `ball` to be 'closed' or 'open', but got {_show(ball)}")
    return ball


def same_features(cached: Tensor, features: Tensor) -> bool:
    """True when ``features`` are the very tensor ``cached`` or equal to it (same shape, device
    and values): the test of every cache keyed by the real features."""
    if cached.shape != features.shape or cached.device != features.device:
        return False
    return cached is features or bool(torch.equal(cached, features))


def distinct_class_keys(names: Mapping[Any, Any], argument: str = "names") -> None:
    """``ValueError`` naming both classes when two classes of ``names`` (``{label: name}``; a class without a name
    is shown by its number) would be logged under one key: a name that is another class's number (``{2: "0"}``
    would log class 2 as class 0), or two names that read the same once Unicode-normalised (NFKC) and stripped
    of surrounding white space (``"cat"``, ``"cat "``, ``"ｃａｔ"``). ``argument`` names the argument in errors.

    Example:
        >>> distinct_class_keys({0: "cat", 1: "dog", 2: "2"})
        >>> try:
        ...     distinct_class_keys({2: "0"}, "class_names")
        ... except ValueError as err:
        ...     print(err)
        Expected argument `class_names` to hold distinct names, one key per class, but class 2's name '0' is the \
number of class 0
    """
    seen: Dict[str, Any] = {}
    for label, name in names.items():
        key = unicodedata.normalize("NFKC", str(name)).strip()
        start = f"Expected argument `{argument}` to hold distinct names, one key per class, but"
        number = _number(key)
        if number is not None and number != label:
            raise ValueError(f"{start} class {label}'s name {name!r} is the number of class {number}")
        if key in seen:
            other = seen[key]
            raise ValueError(
                f"{start} classes {other} and {label} are named {names[other]!r} and {name!r}, which read the same"
            )
        seen[key] = label


def _number(key: str) -> Optional[int]:
    """The integer whose decimal form is ``key`` (the key of an unnamed class), else None."""
    try:
        value = int(key)
    except ValueError:
        return None
    return value if str(value) == key else None
