"""The image preprocessing the DINOv2 and CLIP extractors share: Pillow's 8-bit bicubic resize on tensors.

The adapters themselves are :class:`~lightning_prd.features.dinov2.DINOv2Features` (FD_DINOv2) and
:class:`~lightning_prd.features.clip.CLIPFeatures` (CMMD). The reference tools they follow resize
images with Pillow (dgm-eval's DINOv2 transform, EDM2's ``resize_mode="pil"``, open_clip's transform,
the CMMD code) on uint8 images; this module does the same computation on ``[B, C, H, W]`` uint8
tensors (CPU or GPU, no PIL needed), equal to Pillow bit for bit:

* :func:`pil_bicubic_uint8`: ``Image.resize(size, Image.BICUBIC)`` of an 8-bit image. Per axis the
  filter weights are Pillow's ``precompute_coeffs`` (Keys kernel ``a = -0.5``, support widened by the
  downscale factor: it antialiases when shrinking;
  :func:`~lightning_prd.features.resize.pil_bicubic_weights`), turned into Pillow's fixed-point
  integers ``int(w * 2**22 +- 0.5)`` (``normalize_coeffs_8bpc``); each pass sums ``pixel * weight``
  exactly (float64 holds these integer sums exactly), adds ``2**21``, shifts right by 22 and clips to
  0..255, as ``ImagingResampleHorizontal_8bpc`` / ``Vertical_8bpc`` do. The passes run horizontal
  first; **Pillow 13** runs the vertical pass first when the height shrinks by more than twice as
  many pixels as the width (``out_h < in_h`` and ``in_h - out_h > 2 (in_w - out_w)``), which moves
  a few pixels by 1. The order of the installed Pillow is used (Pillow 13's when Pillow is absent),
  and recorded in the extractors' ``preprocessing`` (``"pil_pass_order"``).
* :func:`centre_square` (the CMMD code's crop) and :func:`centre_crop` / :func:`shorter_side`
  (torchvision's ``CenterCrop`` and ``Resize(int)``, which open_clip's transform uses).
* :func:`normalise`: ``(x / 255 - mean) / std`` in float32, the operation order of torchvision's
  ``ToTensor`` + ``Normalize`` and of EDM2's detector.

Example:
    >>> import torch
    >>> x = torch.tensor([[[[0, 0, 255, 255]]]], dtype=torch.uint8)
    >>> pil_bicubic_uint8(x, (1, 2)).tolist()  # what Pillow's Image.resize((2, 1), Image.BICUBIC) gives
    [[[[21, 234]]]]
    >>> centre_square(torch.zeros(1, 3, 4, 7, dtype=torch.uint8)).shape[-2:]
    torch.Size([4, 4])
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Dict, Sequence, Tuple

import torch
from torch import Tensor

from lightning_prd.features.resize import pil_bicubic_weights
from lightning_prd.functional.engine.inputs import check_positive_int

_PRECISION_BITS = 22  # Pillow's PRECISION_BITS = 32 - 8 - 2 for 8-bit images
_CHUNK_ELEMENTS = 1 << 24  # float64 elements of one resize step (128 MiB)


def pillow_major_version() -> int:
    """The installed Pillow's major version, or 13 (the newest pass order) when Pillow is not installed."""
    try:
        import PIL
    except ImportError:
        return 13
    return int(str(PIL.__version__).split(".")[0])


def pil_pass_order() -> str:
    """Which of Pillow's pass orders :func:`pil_bicubic_uint8` follows: ``"pillow>=13"`` or ``"pillow<13"``."""
    return "pillow>=13" if pillow_major_version() >= 13 else "pillow<13"


@lru_cache(maxsize=64)
def _fixed_point_weights(in_size: int, out_size: int) -> Tensor:
    """Pillow's ``normalize_coeffs_8bpc`` of the bicubic weights: ``int(w * 2**22 + 0.5)`` (``- 0.5`` below 0)."""
    w = pil_bicubic_weights(in_size, out_size) * float(1 << _PRECISION_BITS)
    return torch.where(w < 0, w - 0.5, w + 0.5).trunc()  # C's (int) cast truncates toward zero; 0 stays 0


def _vertical_first(in_h: int, in_w: int, out_h: int, out_w: int) -> bool:
    return pillow_major_version() >= 13 and out_h < in_h and in_h - out_h > 2 * (in_w - out_w)


def _pass(x: Tensor, weights: Tensor, axis: int) -> Tensor:
    """One 8-bit pass along ``axis`` (-1: width, -2: height) of float64 integer pixels, exactly as Pillow's."""
    w = weights.to(device=x.device)
    acc = torch.matmul(x, w.T) if axis == -1 else torch.matmul(w, x)
    acc = torch.floor((acc + float(1 << (_PRECISION_BITS - 1))) / float(1 << _PRECISION_BITS))  # >> 22
    return acc.clamp_(0.0, 255.0)


def pil_bicubic_uint8(x: Tensor, size: Tuple[int, int]) -> Tensor:
    """Pillow's ``resize((W, H), Image.BICUBIC)`` of uint8 images ``[B, C, H, W]``, bit for bit (module docstring).

    Example:
        >>> import torch
        >>> x = torch.arange(16, dtype=torch.uint8).view(1, 1, 4, 4) * 16
        >>> pil_bicubic_uint8(x, (2, 2))[0, 0].tolist()
        [[47, 77], [163, 193]]
    """
    if not isinstance(x, Tensor) or x.dtype != torch.uint8 or x.ndim != 4:
        what = f"dtype {x.dtype}, shape {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"Expected argument `x` to be a uint8 tensor [B, C, H, W], but got {what}")
    out_h, out_w = check_positive_int(size[0], "size"), check_positive_int(size[1], "size")
    in_h, in_w = int(x.shape[-2]), int(x.shape[-1])
    if (in_h, in_w) == (out_h, out_w) or x.shape[0] == 0:
        return x.clone() if x.shape[0] else x.new_zeros(*x.shape[:2], out_h, out_w)
    steps = [(-1, in_w, out_w), (-2, in_h, out_h)]
    if _vertical_first(in_h, in_w, out_h, out_w):
        steps.reverse()
    per_image = int(x.shape[1]) * max(in_h, out_h) * max(in_w, out_w)  # the largest of input, pass and output
    chunk = max(1, _CHUNK_ELEMENTS // per_image)
    outs = []
    for part in x.split(chunk):
        y = part.to(torch.float64)
        for axis, n_in, n_out in steps:
            if n_in != n_out:
                y = _pass(y, _fixed_point_weights(n_in, n_out), axis)
        outs.append(y.to(torch.uint8))
    return torch.cat(outs)


def centre_square(x: Tensor) -> Tensor:
    """The largest centred square, as the CMMD code crops: side ``l = min(h, w)``, top ``(h - l) // 2``, left
    ``(w - l) // 2``."""
    h, w = int(x.shape[-2]), int(x.shape[-1])
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    return x[..., top : top + side, left : left + side]


def shorter_side(h: int, w: int, size: int) -> Tuple[int, int]:
    """``(H, W)`` after torchvision's ``Resize(size)``: the shorter side to ``size``, the longer to
    ``int(size * long / short)``.

    Example:
        >>> shorter_side(300, 200, 224)
        (336, 224)
    """
    if w <= h:
        return int(size * h / w), size
    return size, int(size * w / h)


def centre_crop(x: Tensor, size: Tuple[int, int]) -> Tensor:
    """torchvision's ``CenterCrop(size)`` of images at least ``size``: top ``int(round((h - H) / 2))`` (Python's
    round, half to even), left likewise."""
    h, w = int(x.shape[-2]), int(x.shape[-1])
    if h < size[0] or w < size[1]:
        raise ValueError(f"Expected images of at least {tuple(size)} to centre-crop, but got {(h, w)}")
    top, left = int(round((h - size[0]) / 2.0)), int(round((w - size[1]) / 2.0))
    return x[..., top : top + size[0], left : left + size[1]]


def normalise(x: Tensor, mean: Sequence[float], std: Sequence[float]) -> Tensor:
    """``(x / 255 - mean) / std`` of uint8 (or float 0..255) images, float32, in that operation order."""
    x = x.to(torch.float32) / 255
    m = torch.as_tensor(mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    s = torch.as_tensor(std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    return (x - m) / s


def normalisation(mean: Sequence[float], std: Sequence[float]) -> Dict[str, Any]:
    """The ``"normalisation"`` entry of an extractor's ``preprocessing``: values in [0, 1], then mean/std."""
    return {"scale": "x / 255", "mean": [float(v) for v in mean], "std": [float(v) for v in std]}


__all__ = [
    "centre_crop",
    "centre_square",
    "normalisation",
    "normalise",
    "pil_bicubic_uint8",
    "pil_pass_order",
    "pillow_major_version",
    "shorter_side",
]
