"""Real-looking random images for comparing feature networks: smooth colour fields, so that a network's
features (and batch-norm statistics set from them) are not those of white noise."""

from __future__ import annotations

import torch


def smooth_images(n: int, size: int, seed: int) -> torch.Tensor:
    """Real-looking uint8 images: smooth random colour fields with some finer texture."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn(n, 3, 6, 6, generator=g)
    fine = torch.randn(n, 3, 24, 24, generator=g) * 0.35
    x = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=False)
    x = x + torch.nn.functional.interpolate(fine, size=(size, size), mode="bilinear", align_corners=False)
    return (torch.sigmoid(1.5 * x) * 255).round().clamp(0, 255).to(torch.uint8)


def smooth_floats(n: int, size: int, seed: int) -> torch.Tensor:
    """Float images in [0, 1] off the uint8 grid (a generator's output)."""
    x = smooth_images(n, size, seed).float() / 255
    g = torch.Generator().manual_seed(seed + 1)
    return (x + torch.rand(x.shape, generator=g) / 255).clamp(0, 1)
