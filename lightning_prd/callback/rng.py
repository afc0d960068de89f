"""The callback's random numbers: the user's generators saved and restored around each evaluation, and
every random generator seeded inside, so an evaluation depends on the weights and ``seed`` only.

**Rule.** Around one evaluation, the states of torch's CPU generator, the generator of the module's
device (CUDA, Apple MPS or Intel XPU), Python's ``random`` and NumPy's global generator are saved and restored
(:func:`preserved_rng`), whatever the generator, the extractor, the metric and the loggers draw.
Inside, three seeded streams (:func:`fixed_rng`): the real side on rank ``r`` with
``stream_seed(seed + r, REAL_STREAM)``, the generated samples per global batch ``b`` with
:func:`~lightning_prd.callback.batches.batch_seed` (the same noise at every evaluation, even the first,
which also embeds the real set, and with any number of processes), the metric's ``compute`` with
``stream_seed(seed, COMPUTE_STREAM)`` (the same on every rank, so ranks agree on what it draws).

Example:
    >>> import torch
    >>> state = torch.get_rng_state()
    >>> with fixed_rng(0, torch.device("cpu")):
    ...     a = torch.rand(2)
    >>> with fixed_rng(0, torch.device("cpu")):
    ...     b = torch.rand(2)
    >>> torch.equal(a, b), torch.equal(torch.get_rng_state(), state)
    (True, True)
    >>> stream_seed(0, REAL_STREAM) != stream_seed(0, COMPUTE_STREAM)
    True
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Tuple

import numpy as np
import torch

#: stream of the real side's seed, apart from the generated samples' (``batches.FAKE_STREAM``)
REAL_STREAM = 1
#: stream of the metric's ``compute`` seed
COMPUTE_STREAM = 2
_MASK = 2**64 - 1


def stream_seed(seed: int, stream: int) -> int:
    """A seed in ``[0, 2**63)`` for stream ``stream`` of ``seed`` (SplitMix64 of both): unrelated to
    ``seed + r`` for any small ``r``."""
    z = (int(seed) + 0x9E3779B97F4A7C15 * (int(stream) + 1)) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) >> 1


#: accelerator types whose generator (one per device) is saved, restored and seeded like the CPU's
ACCELERATORS = ("cuda", "mps", "xpu")
_GENERATOR_CALLS = ("get_rng_state", "set_rng_state", "manual_seed")


def device_generator(device: torch.device) -> Optional[Tuple[Any, Any]]:
    """``(module, which)`` for the generator of ``device``: ``torch.cuda``/``torch.xpu`` and the device's index
    (its own, else the current one), or ``torch.mps`` and ``"mps"`` (one device); None for the CPU and other
    types, or where this build of torch lacks the module's generator calls (its ``get_rng_state``,
    ``set_rng_state`` and ``manual_seed``)."""
    if device.type not in ACCELERATORS:
        return None
    module = getattr(torch, device.type, None)
    if module is None or not all(callable(getattr(module, name, None)) for name in _GENERATOR_CALLS):
        return None
    if device.type == "mps":
        return module, "mps"
    return module, device.index if device.index is not None else module.current_device()


@contextmanager
def preserved_rng(device: torch.device) -> Iterator[None]:
    """Restore torch's CPU generator and the generator of ``device`` (CUDA, MPS or XPU:
    :func:`device_generator`), ``random`` and NumPy to their states on entry, on exit."""
    py_state, np_state, cpu_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    gen = device_generator(device)
    device_state = None if gen is None else gen[0].get_rng_state(gen[1])
    try:
        yield
    finally:
        torch.set_rng_state(cpu_state)
        if gen is not None:
            gen[0].set_rng_state(device_state, gen[1])
        random.setstate(py_state)
        np.random.set_state(np_state)


@contextmanager
def fixed_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch (CPU and the generator of ``device``: :func:`device_generator`), ``random`` and NumPy
    inside; restore their states after."""
    with preserved_rng(device):
        torch.default_generator.manual_seed(seed)
        gen = device_generator(device)
        if gen is not None:
            module, which = gen
            if which == "mps":
                module.manual_seed(seed)
            else:
                with module.device(which):
                    module.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        yield
