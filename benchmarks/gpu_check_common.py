"""Shared pieces of ``benchmarks/gpu_check.py``: the run's context and sizes, seeded features, precision
states, exact comparisons and the outcome types of a step (:class:`Skip`, :class:`CheckFailed`)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Optional, Tuple

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "tests")
for _path in (HERE, TESTS):
    if _path not in sys.path:
        sys.path.insert(0, _path)

#: sizes of the full run (one H100/H200, under 8 minutes) and of ``--quick`` (the CPU in CI, under 2 minutes)
FULL: Dict[str, Any] = dict(
    oracle=(2000, 256),
    pair=(10000, 2048),
    tied=(10000, 64),
    copies=(400, 200),
    small_blocks=16 << 20,
    large_blocks=256 << 20,
    tile=2048,
    autocast=(10000, 2048),
    images=512,
    side=256,
    fd_dims=None,
    det=(5000, 256),
    det_kid=dict(subsets=10, subset_size=1000),
    timing=[(10000, 2048), (10000, 4096), (50000, 2048), (50000, 4096)],
    repeats=3,
    full_compute=(50000, 2048),
    fd_small=(1000, 2048),
    eigh=4096,
    prd=True,
    memory_batches=(1024, 256),
    memory_compute=(50000, 4096),
    callback=dict(samples=4096, batch=256, side=32, epochs=2),
)
QUICK: Dict[str, Any] = dict(
    oracle=(300, 16),
    pair=(400, 32),
    tied=(300, 6),
    copies=(40, 20),
    small_blocks=1 << 17,
    large_blocks=1 << 20,
    tile=256,
    autocast=(300, 16),
    images=2,
    side=64,
    fd_dims=32,  # the FD of the first 32 feature dimensions: a CPU's eigh of 4,096^2 takes too long here
    det=(400, 16),
    det_kid=dict(subsets=4, subset_size=100),
    timing=[(1000, 64), (2000, 64)],
    repeats=1,
    full_compute=(1000, 64),
    fd_small=(100, 256),
    eigh=256,
    prd=dict(num_runs=2),  # PRD's k-means dominates a small compute: 2 clusterings instead of 10
    memory_batches=(16, 4),
    memory_compute=(1000, 64),
    callback=dict(samples=128, batch=32, side=16, epochs=2),
)


class Skip(Exception):
    """The step does not apply here (its reason is recorded); not a failure."""


class CheckFailed(AssertionError):
    """A property the step checks does not hold."""


def check(ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


@dataclass
class Context:
    """What every step reads: the device, the sizes, the adversarial matmul precision and the shared results."""

    device: torch.device
    quick: bool
    out: str
    started: float = field(default_factory=time.perf_counter)
    #: the reduced float32 matmul precision the run keeps on: "high" (TF32) on CUDA; on the CPU "medium",
    #: which runs float32 products as bfloat16 passes on CPUs with native bfloat16 (where "high" changes nothing)
    adverse: str = "high"
    shared: Dict[str, Any] = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def sizes(self) -> Dict[str, Any]:
        return QUICK if self.quick else FULL

    def training_metric(self, **options: Any):
        """``GenerativeMetrics(preset="training", **options)`` on the run's device (``--quick``: PRD with fewer
        clusterings)."""
        from lightning_prd import GenerativeMetrics

        return GenerativeMetrics(preset="training", prd=self.sizes["prd"], **options).to(self.device)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device, *args: Any) -> Tuple[float, Any]:
    """Seconds of one call ``fn(*args)``, waiting for the device before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn(*args)
    sync(device)
    return time.perf_counter() - t0, out


def gaussian_pair(n: int, dim: int, seed: int = 0, scale=(3.0, 3.3), shift=(5.0, 5.2)):
    """``real = s_r * randn + t_r``, ``fake = s_f * randn + t_f`` from a seeded CPU generator (the same bits on
    every device)."""
    g = torch.Generator().manual_seed(seed)
    real = scale[0] * torch.randn(n, dim, generator=g) + shift[0]
    fake = scale[1] * torch.randn(n, dim, generator=g) + shift[1]
    return real, fake


def tied_pair(n: int, dim: int, near: int, copies: int, seed: int = 0):
    """Integer features (many pairs exactly on a ball's edge), ``near`` near-copies (``+1e-4 * randn``) and
    ``copies`` exact copies of real rows: every question of the cross pass has ambiguous pairs."""
    g = torch.Generator().manual_seed(seed)
    real = torch.randint(0, 3, (n, dim), generator=g).float()
    fake = torch.randint(0, 3, (n, dim), generator=g).float()
    fake[:near] = real[:near] + 1e-4 * torch.randn(near, dim, generator=g)
    fake[near : near + copies] = real[near + copies : near + 2 * copies]
    return real, fake


def uint8_images(n: int, side: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, side, side), generator=g, dtype=torch.uint8)


@contextlib.contextmanager
def precision_state(matmul: str, cudnn_tf32: Optional[bool] = None) -> Iterator[None]:
    """Run under ``set_float32_matmul_precision(matmul)`` (and cuDNN's TF32 flag), restoring both after."""
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision(matmul)
    if cudnn_tf32 is not None:
        torch.backends.cudnn.allow_tf32 = cudnn_tf32
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


def flags() -> Dict[str, Any]:
    """The precision flags in force."""
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }


def fields(result) -> Dict[str, Any]:
    """A dataclass result (``CrossResult``) as a dict of its fields."""
    return {name: getattr(result, name) for name in result.__dataclass_fields__}


def _entries(value: Any) -> Any:
    """A dataclass, tuple or list as a dict of its entries (compared entry by entry); anything else as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: getattr(value, name) for name in value.__dataclass_fields__}
    if isinstance(value, (tuple, list)):
        return dict(enumerate(value))
    return value


def differences(got: Dict[Any, Any], want: Dict[Any, Any], prefix: str = "") -> list:
    """Names of the entries that are not exactly equal (tensors compared on the CPU; dicts, dataclasses, tuples and
    lists entry by entry)."""
    out = []
    for name in sorted(set(got) | set(want), key=repr):
        a, b = _entries(got.get(name)), _entries(want.get(name))
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{prefix}{name}.")
        elif isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype or not torch.equal(a.cpu(), b.cpu()):
                out.append(prefix + str(name))
        elif type(a) is not type(b) or (a is not None and not isinstance(a, torch.Tensor) and a != b):
            out.append(prefix + str(name))
    return out


def peak_gib(device: torch.device, base: int) -> Optional[float]:
    if device.type != "cuda":
        return None
    return round((torch.cuda.max_memory_allocated(device) - base) / 2**30, 3)


def reset_peak(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)
