"""The precision every feature extractor runs in: option ``extractor_precision``.

**Rule.** An extractor call of the package (the callback's real and generated samples, a Metric's
``update`` with a ``feature_extractor``, ``lightning-prd evaluate/features``, the real-feature
cache) runs inside :func:`precision_context`:

* ``"ieee"`` (the default): gradients off, autocast off on every device type, and float32 matrix
  products and convolutions in IEEE float32: cuBLAS and oneDNN matmuls (TF32 and bfloat16 passes
  off: ``torch.set_float32_matmul_precision("highest")`` or the per-backend ``fp32_precision``,
  whichever the caller uses), cuDNN and oneDNN convolutions (``fp32_precision="ieee"``, or
  ``torch.backends.cudnn.allow_tf32=False`` on torch versions without it). The features are then
  those of the reference tools (which compute in float32), whatever the caller's training set:
  cuDNN's TF32 convolutions (on by default on Ampere and newer GPUs), Lightning's
  ``set_float32_matmul_precision("high")`` advice, a ``bf16-mixed`` validation step.
* ``"fast"``: gradients off; the caller's precision settings (TF32, autocast) left as they are.
  Faster on GPUs with tensor cores, but the features are then not bit-comparable with the
  reference tools' (TF32 moves features by about 1e-3 relative, bfloat16 autocast by about 1e-2).

The caller's settings are restored after the block, also on an exception. The precision used
goes into the run's fingerprint and the real-feature cache key (:func:`describe_precision`), so a
cache written under one precision is never read under another.

Example:
    >>> import torch
    >>> torch.set_float32_matmul_precision("high")
    >>> with torch.autocast("cpu", dtype=torch.bfloat16), precision_context("ieee"):
    ...     torch.get_float32_matmul_precision(), torch.is_autocast_enabled("cpu"), torch.is_grad_enabled()
    ('highest', False, False)
    >>> describe_precision("ieee", "cuda"), torch.get_float32_matmul_precision()
    ('ieee', 'high')
    >>> torch.set_float32_matmul_precision("highest")
"""

from lightning_prd.functional.engine.precision import (
    DEFAULT_EXTRACTOR_PRECISION,
    EXTRACTOR_PRECISIONS,
    check_extractor_precision,
    describe_precision,
    ieee_convolutions,
    precision_context,
)

__all__ = [
    "DEFAULT_EXTRACTOR_PRECISION",
    "EXTRACTOR_PRECISIONS",
    "check_extractor_precision",
    "describe_precision",
    "ieee_convolutions",
    "precision_context",
]
