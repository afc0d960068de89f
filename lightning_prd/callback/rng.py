"""The fixed noise of each evaluation: every random generator seeded inside, the user's states restored after."""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import torch


@contextmanager
def fixed_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch (CPU and ``device``), ``random`` and NumPy inside; restore their states after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    cuda = device.type == "cuda"
    index = (device.index if device.index is not None else torch.cuda.current_device()) if cuda else None
    with torch.random.fork_rng(devices=[index] if cuda else []):
        torch.default_generator.manual_seed(seed)
        if cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
