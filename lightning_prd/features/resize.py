"""Image resizing and quantisation exactly as the reference FID tools do them.

Three resizers, each the one a reference tool applies before its network, on float
``[B, C, H, W]`` tensors (any value range; the tools feed 0..255 or 0..1 values):

* :func:`resize_tf1`: TensorFlow 1.x ``tf.image.resize_bilinear(align_corners=False)``, the
  resize inside the TensorFlow FID graph (TTUR), torch-fidelity's
  ``interpolate_bilinear_2d_like_tensorflow1x(..., align_corners=False)`` and NVlabs'
  ``inception-2015-12-05.pt``. Source coordinate ``src = dst * (in / out)`` (no half-pixel
  offset, the scale rounded to float32 as TensorFlow does), ``lo = floor(src)``,
  ``hi = min(lo + 1, in - 1)`` (edge clamped), weights ``src - lo``; no antialiasing.
* :func:`resize_torch_bilinear`: ``F.interpolate(mode="bilinear", align_corners=False)`` without
  antialiasing (``src = (dst + 0.5) * in / out - 0.5``, clamped at 0): pytorch-fid.
* :func:`resize_pil_bicubic`: Pillow's bicubic resampling (Keys kernel, ``a = -0.5``, support
  widened by the downscale factor, so it antialiases when shrinking) of each channel as a
  32-bit float image (mode ``"F"``): clean-fid's ``make_resizer("PIL", False, "bicubic", ...)``,
  which then clips to [0, 255]. Written in torch: the filter weights are computed as Pillow's
  ``precompute_coeffs`` does (float64), the horizontal pass runs first, each pass accumulates
  ``pixel * weight`` tap by tap in float64 and stores float32 (as Pillow's 32-bit float path does).
  Measured against Pillow 13.0: bit-equal for square and landscape inputs resized to 299 x 299
  (float and integer-valued pixels); where Pillow 13 takes the vertical
  pass first (portrait inputs such as 512 x 256 -> 299 x 299, and some other shape pairs), a part of
  the pixels differ by one float32 ulp (relative 1.2e-7).

Quantisation of float images in [0, 1] (a generator's output) to uint8, :func:`quantise`:

* ``"round"``: ``floor(255 x + 0.5)`` clamped to [0, 255], NVlabs' rule
  (``(x * 127.5 + 128).clamp(0, 255).to(torch.uint8)`` on [-1, 1] output in StyleGAN2-ADA /
  StyleGAN3 ``metrics/metric_utils.py``) written for [0, 1]; equal to theirs except where
  float rounding of the two formulas differs at an exact half step.
* ``"floor"``: ``trunc(255 x)``, torch-fidelity's generator example
  (``(255 * (x.clamp(-1, 1) * 0.5 + 0.5)).to(torch.uint8)`` in ``examples/sngan_cifar10.py``).
* ``"none"``: no quantisation; what pytorch-fid (float images in [0, 1]) and clean-fid
  (generator output as float 0..255, ``fid.get_model_features``) do with float input.

Example:
    >>> import torch
    >>> from lightning_prd.features.resize import resize_tf1, quantise
    >>> x = torch.tensor([[[[0.0, 10.0]]]])
    >>> resize_tf1(x, (1, 4)).tolist()  # src = 0, 0.5, 1, 1.5 -> the last one clamped to the edge
    [[[[0.0, 5.0, 10.0, 10.0]]]]
    >>> quantise(torch.tensor([0.0, 0.5, 1.0]), "round").tolist(), quantise(torch.tensor([0.5]), "floor").tolist()
    ([0, 128, 255], [127])
"""

from __future__ import annotations

import math
from typing import Any, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_prd.features.images import as_float_images
from lightning_prd.functional.engine.inputs import check_positive_int

#: quantisation rules of :func:`quantise`
QUANTISATION_RULES = ("round", "floor", "none")
_PIL_BICUBIC_A = -0.5
_PIL_BICUBIC_SUPPORT = 2.0


def _check(x: Any, size: Any, name: str) -> Tuple[Tensor, Tuple[int, int]]:
    if not isinstance(x, Tensor) or x.ndim != 4 or not x.is_floating_point():
        what = f"shape {tuple(x.shape)}, dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"Expected argument `x` of {name} to be a floating tensor [B, C, H, W], but got {what}")
    pair = (size, size) if isinstance(size, int) else tuple(size)
    if len(pair) != 2:
        raise ValueError(f"Expected argument `size` to be an (H, W) pair, but got {size!r}")
    return x, (check_positive_int(pair[0], "size"), check_positive_int(pair[1], "size"))


def _tf1_grid(in_size: int, out_size: int, device: torch.device, dtype: torch.dtype) -> Tuple[Tensor, Tensor, Tensor]:
    """TF1's source rows ``lo``, ``hi`` and weights of ``hi`` for one axis (legacy, no half-pixel offset)."""
    scale = torch.tensor(in_size / out_size, dtype=torch.float32)  # TF computes the scale in float32
    src = torch.arange(out_size, dtype=dtype) * scale
    lo = src.long().clamp_(max=in_size - 1)  # src >= 0, so truncation is floor
    hi = (lo + 1).clamp_(max=in_size - 1)
    frac = (src - lo.to(src.dtype)).to(dtype)
    return lo.to(device), hi.to(device), frac.to(device)


def resize_tf1(x: Tensor, size: Tuple[int, int]) -> Tensor:
    """TensorFlow 1.x ``resize_bilinear`` (``align_corners=False``) of float images ``[B, C, H, W]`` to ``size``.

    ``out[i, j] = top + (bottom - top) * dy`` with ``top = x[lo_i, lo_j] + (x[lo_i, hi_j] - x[lo_i, lo_j]) * dx``
    (and ``bottom`` on row ``hi_i``), where for each axis ``src = dst * float32(in / out)``,
    ``lo = floor(src)``, ``hi = min(lo + 1, in - 1)``, ``d = src - lo``: TensorFlow's kernel and
    torch-fidelity's ``interpolate_bilinear_2d_like_tensorflow1x(..., align_corners=False)``
    (its exact ``"slow"`` method), in the same operation order, so float32 results are equal to
    theirs bit for bit. No antialiasing: downsampling by more than 2 skips pixels, as TF1 does.

    Example:
        >>> import torch
        >>> x = torch.arange(4.0).view(1, 1, 2, 2)
        >>> resize_tf1(x, (4, 4))[0, 0].tolist()
        [[0.0, 0.5, 1.0, 1.0], [1.0, 1.5, 2.0, 2.0], [2.0, 2.5, 3.0, 3.0], [2.0, 2.5, 3.0, 3.0]]
    """
    x, (out_h, out_w) = _check(x, size, "resize_tf1")
    in_h, in_w = x.shape[-2:]
    if (in_h, in_w) == (out_h, out_w):
        return x
    if x.numel() == 0:
        return x.new_zeros(*x.shape[:2], out_h, out_w)
    ylo, yhi, dy = _tf1_grid(in_h, out_h, x.device, x.dtype)
    xlo, xhi, dx = _tf1_grid(in_w, out_w, x.device, x.dtype)
    rows_lo, rows_hi = x.index_select(2, ylo), x.index_select(2, yhi)
    top_left, top_right = rows_lo.index_select(3, xlo), rows_lo.index_select(3, xhi)
    bottom_left, bottom_right = rows_hi.index_select(3, xlo), rows_hi.index_select(3, xhi)
    top = top_left + (top_right - top_left) * dx.view(1, 1, 1, out_w)
    bottom = bottom_left + (bottom_right - bottom_left) * dx.view(1, 1, 1, out_w)
    return top + (bottom - top) * dy.view(1, 1, out_h, 1)


def resize_torch_bilinear(x: Tensor, size: Tuple[int, int]) -> Tensor:
    """``F.interpolate(x, size, mode="bilinear", align_corners=False)``, no antialiasing: pytorch-fid's resize.

    ``src = max((dst + 0.5) * in / out - 0.5, 0)``, ``lo = floor(src)``, ``hi = min(lo + 1, in - 1)``,
    linear weights; applied by pytorch-fid's ``InceptionV3(resize_input=True)`` to [0, 1] images.

    Example:
        >>> import torch
        >>> resize_torch_bilinear(torch.tensor([[[[0.0, 10.0]]]]), (1, 4)).tolist()
        [[[[0.0, 2.5, 7.5, 10.0]]]]
    """
    x, pair = _check(x, size, "resize_torch_bilinear")
    if x.numel() == 0:
        return x.new_zeros(*x.shape[:2], *pair)
    return F.interpolate(x, size=pair, mode="bilinear", align_corners=False, antialias=False)


def _bicubic(t: Tensor) -> Tensor:
    """Pillow's ``bicubic_filter`` (Keys, a = -0.5), in its operation order, on float64."""
    a = _PIL_BICUBIC_A
    t = t.abs()
    near = ((a + 2.0) * t - (a + 3.0)) * t * t + 1
    far = (((t - 5) * t + 8) * t - 4) * a
    return torch.where(t < 1.0, near, torch.where(t < 2.0, far, torch.zeros_like(t)))


def _pil_taps(in_size: int, out_size: int) -> Tuple[Tensor, Tensor]:
    """Pillow's ``precompute_coeffs`` for bicubic on the box ``(0, in_size)``: source index and weight of each tap.

    ``[out_size, ksize]`` each; taps past an output's last source pixel have weight 0 (and a clamped index).
    """
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = _PIL_BICUBIC_SUPPORT * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    centre = (torch.arange(out_size, dtype=torch.float64) + 0.5) * scale
    xmin = (centre - support + 0.5).trunc().clamp(min=0).long()  # C's (int) cast truncates toward zero
    xmax = (centre + support + 0.5).trunc().clamp(max=in_size).long() - xmin
    taps = torch.arange(ksize, dtype=torch.long)
    index = xmin[:, None] + taps[None, :]
    valid = taps[None, :] < xmax[:, None]
    w = _bicubic((index.to(torch.float64) - centre[:, None] + 0.5) * (1.0 / filterscale))
    w = torch.where(valid, w, torch.zeros_like(w))
    total = w.sum(1, keepdim=True)
    w = torch.where(total != 0, w / total, w)
    return index.clamp(max=in_size - 1), w


def pil_bicubic_weights(in_size: int, out_size: int) -> Tensor:
    """The ``[out_size, in_size]`` float64 matrix of Pillow's bicubic resampling along one axis.

    Pillow's ``precompute_coeffs`` for the box ``(0, in_size)``: ``scale = in / out``,
    ``filterscale = max(scale, 1)``, ``support = 2 * filterscale``; output ``i`` has centre
    ``c = (i + 0.5) * scale`` and taps ``j`` from ``int(c - support + 0.5)`` (at least 0) to
    ``int(c + support + 0.5)`` (at most ``in``, exclusive), weight
    ``bicubic((j - c + 0.5) / filterscale)`` normalised to sum 1.

    Example:
        >>> w = pil_bicubic_weights(4, 2)
        >>> tuple(w.shape), [round(float(v), 6) for v in w.sum(1)]
        ((2, 4), [1.0, 1.0])
    """
    in_size, out_size = check_positive_int(in_size, "in_size"), check_positive_int(out_size, "out_size")
    index, w = _pil_taps(in_size, out_size)
    return torch.zeros(out_size, in_size, dtype=torch.float64).scatter_add_(1, index, w)


def _pil_pass(x: Tensor, out_size: int) -> Tensor:
    """One Pillow pass along dim -2: ``sum_k x[..., index_k, :] * w_k`` in tap order, in float64, stored float32."""
    index, w = _pil_taps(x.shape[-2], out_size)
    index, w = index.to(x.device), w.to(x.device)
    x = x.to(torch.float64).contiguous()
    acc = torch.zeros(*x.shape[:-2], out_size, x.shape[-1], dtype=torch.float64, device=x.device)
    tap = torch.empty_like(acc)
    for k in range(index.shape[1]):  # Pillow's loop: ss += pixel * k[x], from the first tap on
        torch.index_select(x, -2, index[:, k], out=tap)
        acc.add_(tap.mul_(w[:, k, None]))
    return acc.to(torch.float32)


def resize_pil_bicubic(x: Tensor, size: Tuple[int, int]) -> Tensor:
    """Pillow's bicubic resize of each channel as a float32 image (``Image.fromarray(c, "F").resize``).

    Horizontal pass first, then vertical (Pillow's ``ImagingResampleInner``), each summing
    ``pixel * weight`` over the taps of :func:`pil_bicubic_weights` in Pillow's order, in float64,
    and storing float32. An unchanged size is returned as is (Pillow copies). No clipping:
    clean-fid clips the result to [0, 255].

    Example:
        >>> import torch
        >>> x = torch.tensor([[[[0.0, 0.0, 255.0, 255.0]]]])
        >>> [round(v, 3) for v in resize_pil_bicubic(x, (1, 2))[0, 0, 0].tolist()]  # Pillow 13 gives the same
        [21.074, 233.926]
    """
    x, (out_h, out_w) = _check(x, size, "resize_pil_bicubic")
    in_h, in_w = x.shape[-2:]
    if x.numel() == 0:
        return x.new_zeros(*x.shape[:2], out_h, out_w)
    out = x
    if in_w != out_w:
        out = _pil_pass(out.transpose(-1, -2), out_w).transpose(-1, -2)
    if in_h != out_h:
        out = _pil_pass(out, out_h)
    return out.contiguous().to(x.dtype) if out is not x else x


def quantise(x: Tensor, rule: str) -> Tensor:
    """Float images in [0, 1] as uint8 0..255 by ``rule`` (module docstring); ``"none"`` returns ``255 x`` (float).

    Args:
        x: floating tensor with values in [0, 1] (values outside are clamped by ``"round"``/``"floor"``).
        rule: ``"round"`` (``floor(255 x + 0.5)``, NVlabs), ``"floor"`` (``trunc(255 x)``,
            torch-fidelity's example) or ``"none"`` (``255 x`` unquantised, float32).
    """
    if rule not in QUANTISATION_RULES:
        raise ValueError(f"Expected argument `rule` to be one of {QUANTISATION_RULES}, but got {rule!r}")
    if not isinstance(x, Tensor) or not x.is_floating_point():
        what = x.dtype if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"Expected argument `x` to be a floating tensor with values in [0, 1], but got {what}")
    scaled = x.to(torch.float32) * 255.0
    if rule == "none":
        return scaled
    if rule == "round":
        scaled = scaled + 0.5
    return scaled.clamp(0.0, 255.0).to(torch.uint8)


def uint8_images(x: Any, quantisation: str, name: str = "images") -> Tensor:
    """Images as uint8 ``[B, 3, H, W]``: uint8 kept, float in [0, 1] quantised by ``quantisation``, gray to RGB.

    The checks and messages are :func:`~lightning_prd.features.as_float_images`'.

    Example:
        >>> import torch
        >>> uint8_images(torch.tensor([[[0.0, 0.5, 1.0]]]), "round")[0, :, 0].tolist()
        [[0, 128, 255], [0, 128, 255], [0, 128, 255]]
    """
    if not isinstance(x, Tensor):
        x = torch.as_tensor(x)
    if x.dtype != torch.uint8:
        return quantise(as_float_images(x, name), quantisation)
    as_float_images(x[:0], name)  # the shape checks, on an empty batch
    x = x.unsqueeze(1) if x.ndim == 3 else x
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x
