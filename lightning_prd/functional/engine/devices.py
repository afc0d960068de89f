"""Where the float64 engine runs: on the features' device when it has float64, else on the CPU.

**Rule.** The scores are computed in float64 where it matters (statistics, radii decisions, curves),
so the engine runs on a device that has float64. :func:`compute_device` maps a device to the one
the engine runs on:

* ``cuda``, ``cpu`` and any other device type with float64: the device itself;
* ``mps`` (Apple GPUs) and ``xla`` (TPUs): the CPU, since they have no float64 (MPS raises on
  any float64 tensor; XLA on TPU has no native one);
* ``xpu`` (Intel GPUs): the device itself when it reports float64 (``has_fp64`` of
  ``torch.xpu.get_device_properties``: data-centre parts such as the Max series), else the CPU
  (Arc consumer parts have none).

Every compute path calls it once on its inputs: the public functions when they check their inputs
(:meth:`~lightning_prd.functional.engine.sets.FeatureSets.check`), the Metric classes when
``compute()`` reads their states. Features on a device without float64 are copied to the CPU
there, and the scores come back on the CPU, bit-identical to a CPU run (a float64 curve cannot live
on MPS, and one device for every score of a call keeps them together). Accumulation stays on the
device: only the compute moves.

Example:
    >>> compute_device("cuda:1"), compute_device("mps"), compute_device(torch.device("xla", 0))
    (device(type='cuda', index=1), device(type='cpu'), device(type='cpu'))
    >>> has_float64("cpu"), has_float64("mps")
    (True, False)
"""

from __future__ import annotations

from typing import Union

import torch
from torch import Tensor

#: device types that have no float64 on any part: their compute runs on the CPU
NO_FLOAT64_TYPES = frozenset({"mps", "xla"})

#: the device the engine runs on for devices without float64
FALLBACK = torch.device("cpu")

DeviceLike = Union[str, torch.device]


def _as_device(device: DeviceLike) -> torch.device:
    if isinstance(device, torch.device):
        return device
    if isinstance(device, str):
        try:
            return torch.device(device)
        except RuntimeError as err:
            raise ValueError(f"Expected argument `device` to name a torch device, but got {device!r}") from err
    raise TypeError(f"Expected argument `device` to be a str or torch.device, but got {type(device).__name__}")


def has_float64(device: DeviceLike) -> bool:
    """Whether tensors on ``device`` can hold float64: False for the types of :data:`NO_FLOAT64_TYPES`
    and for an ``xpu`` device whose properties report no ``has_fp64``; True otherwise (an ``xpu`` device
    whose properties cannot be read is taken to have it, as the data-centre parts do)."""
    dev = _as_device(device)
    if dev.type in NO_FLOAT64_TYPES:
        return False
    if dev.type == "xpu":
        return _xpu_has_fp64(dev)
    return True


def _xpu_has_fp64(dev: torch.device) -> bool:
    xpu = getattr(torch, "xpu", None)
    try:
        if xpu is None or not xpu.is_available():
            return True
        index = dev.index if dev.index is not None else xpu.current_device()
        return bool(getattr(xpu.get_device_properties(index), "has_fp64", True))
    except (RuntimeError, AssertionError, AttributeError):  # no usable XPU runtime in this build
        return True


def compute_device(device: DeviceLike) -> torch.device:
    """The device the float64 engine runs on for data on ``device`` (a ``torch.device`` or its name):
    ``device`` itself when it has float64 (:func:`has_float64`: ``cuda``, ``cpu``, most ``xpu``), else
    the CPU (``mps``, ``xla``).

    Example:
        >>> compute_device("cpu"), compute_device("cuda"), compute_device("mps:0")
        (device(type='cpu'), device(type='cuda'), device(type='cpu'))
    """
    dev = _as_device(device)
    return dev if has_float64(dev) else FALLBACK


def to_compute_device(x: Tensor) -> Tensor:
    """``x`` on :func:`compute_device` of its device: ``x`` itself when it is there already, else a copy."""
    target = compute_device(x.device)
    return x if x.device == target else x.to(target)
