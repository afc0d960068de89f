"""Tile shapes from the machine's GEMM: the smallest tile side that keeps it efficient.

Stage: planning only, beside :mod:`.points` (imports only torch). A GEMM ``s x C x D`` runs
slower per flop when ``s`` is small (packing, threading and per-call costs), and where that
happens depends on the CPU (AVX2 or AVX-512, caches, MKL's blocking, the thread count) or
the GPU. :func:`min_side` measures it once per process, dtype, device and depth: the rate of
square ``s x s x min(D, 512)`` products for ``s`` in :data:`CANDIDATES` (about 0.1 s on a
2-core CPU), and returns the smallest ``s`` within :data:`EFFICIENT` of the best rate. The
tile planner (:mod:`.tiling`) keeps the short side of the cross pass's tiles at or above it
where the memory budget allows, and computes the self pass's strips as wide tiles where
squares of the strip height would be slower. Shapes never change results (every decision is
exact, ties go by index), only speed.

``LIGHTNING_PRD_TILE`` overrides the probe: an integer is the minimum side itself,
``rule`` (or ``0``) uses :data:`DEFAULT_MIN_SIDE` without measuring. Small passes, where
the probe would cost more than it can save (under :data:`PROBE_MIN_WORK` multiply-adds), use
the default too, and so do bfloat16-screened passes: their GEMM runs about 4x faster, so the
reductions after it weigh more, and those run fastest on the small, cache-resident tiles.

Example:
    >>> import os, torch
    >>> os.environ["LIGHTNING_PRD_TILE"] = "768"
    >>> min_side(4096, torch.float32, torch.device("cpu"), work=10**12)
    768
    >>> del os.environ["LIGHTNING_PRD_TILE"]
    >>> min_side(64, torch.float32, torch.device("cpu"), work=10**6) == DEFAULT_MIN_SIDE
    True
"""

from __future__ import annotations

import os
import time
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch

#: Tile sides tried by the probe (rows of the left operand).
CANDIDATES: Tuple[int, ...] = (256, 512, 1024, 2048)
#: Share of the best measured rate that counts as efficient.
EFFICIENT = 0.9
#: Minimum side when the probe does not run (small passes, ``LIGHTNING_PRD_TILE=rule``).
DEFAULT_MIN_SIDE = 512
#: Multiply-adds of a pass below which the probe is not worth running (the probe does about
#: 6e9, 0.1 s at 120 GFLOP/s; a pass of 1e11 takes about 2 s there).
PROBE_MIN_WORK = 10**11
#: Largest depth of the probe's products.
PROBE_DEPTH = 512

_CACHE: Dict[Tuple[str, torch.dtype, int], int] = {}


def min_side(dim: int, dtype: torch.dtype, device: torch.device, work: int) -> int:
    """The smallest efficient tile side for GEMMs of depth ``dim`` in ``dtype`` on ``device``
    (measured once per process and cached), for a pass of ``work`` multiply-adds."""
    override = os.environ.get("LIGHTNING_PRD_TILE", "").strip().lower()
    if override in ("rule", "0"):
        return DEFAULT_MIN_SIDE
    if override:
        try:
            value = int(override)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(
                f"Expected environment variable `LIGHTNING_PRD_TILE` to be a positive integer or 'rule', "
                f"but got {override!r}"
            )
        return value
    if work < PROBE_MIN_WORK or dtype not in (torch.float32, torch.float64):
        return DEFAULT_MIN_SIDE
    depth = min(int(dim), PROBE_DEPTH)
    key = (str(torch.device(device)), dtype, depth)
    if key not in _CACHE:
        _CACHE[key] = choose(probe(depth, dtype, torch.device(device)))
    return _CACHE[key]


def choose(rates: Dict[int, float], efficient: float = EFFICIENT) -> int:
    """The smallest side whose rate is at least ``efficient`` times the best one.

    Example:
        >>> choose({256: 40.0, 512: 70.0, 1024: 95.0, 2048: 100.0})
        1024
    """
    best = max(rates.values())
    return min(s for s, r in rates.items() if r >= efficient * best)


def probe(
    depth: int,
    dtype: torch.dtype,
    device: torch.device,
    sides: Sequence[int] = CANDIDATES,
    clock: Optional[Callable[[], float]] = None,
) -> Dict[int, float]:
    """Multiply-adds per second of square ``s x s x depth`` products (``out.addmm_`` as the
    tiles do), best of two runs after one warm-up, for each side ``s``.

    On CUDA each timing waits for the device once: a constant number of synchronisations
    per process, never one per tile.
    """
    clock = clock or time.perf_counter
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(max(sides), depth, generator=g, device=device, dtype=dtype)
    buf = torch.zeros(max(sides) ** 2, device=device, dtype=dtype)
    rates = {}
    for s in (sides[0],) + tuple(sides):  # the first run warms up (thread pool, kernels)
        out, best = buf[: s * s].view(s, s), float("inf")
        for _ in range(2):
            sync()
            t0 = clock()
            out.addmm_(a[:s], a[:s].T, alpha=-2.0)
            sync()
            best = min(best, clock() - t0)
        rates[s] = s * s * depth / max(best, 1e-9)
    return rates
