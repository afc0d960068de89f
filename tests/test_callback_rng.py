"""The callback's RNG helpers on accelerators: the generator of the module's device (CUDA, MPS, XPU) is
seeded inside :func:`fixed_rng` and restored by :func:`preserved_rng`, like the CPU's.

No accelerator exists here, so each backend's generator calls (``get_rng_state``, ``set_rng_state``,
``manual_seed``, and ``device``/``current_device`` where the backend has several devices) are replaced by a
fake generator per device that records every call.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import torch

from lightning_prd.callback.rng import device_generator, fixed_rng, preserved_rng


class FakeBackend:
    """The generator calls of ``torch.<backend>``: one integer state per device, every call recorded."""

    def __init__(self, indexed: bool) -> None:
        self.indexed = indexed
        self.states: Dict[Any, int] = {}
        self.current = 0
        self.calls: List[Tuple[Any, ...]] = []

    def _key(self, device: Any) -> Any:
        return device if self.indexed else "mps"

    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        self.calls.append(("get", device))
        return torch.tensor([self.states.get(self._key(device), 0)])

    def set_rng_state(self, state: torch.Tensor, device: Any = None) -> None:
        self.calls.append(("set", int(state), device))
        self.states[self._key(device)] = int(state)

    def manual_seed(self, seed: int) -> None:
        key = self.current if self.indexed else "mps"
        self.calls.append(("seed", seed, key))
        self.states[key] = 1000 + seed

    def draw(self, device: Any) -> None:
        """What a sampler drawing on the device does to its generator."""
        key = self._key(device)
        self.states[key] = self.states.get(key, 0) + 7

    def current_device(self) -> int:
        return self.current

    @contextlib.contextmanager
    def device(self, index: int) -> Iterator[None]:
        before, self.current = self.current, index
        try:
            yield
        finally:
            self.current = before


def _install(monkeypatch: pytest.MonkeyPatch, backend: str) -> FakeBackend:
    fake = FakeBackend(indexed=backend != "mps")
    module = getattr(torch, backend)
    names = ["get_rng_state", "set_rng_state", "manual_seed"] + (["current_device", "device"] if fake.indexed else [])
    for name in names:
        monkeypatch.setattr(module, name, getattr(fake, name))
    return fake


@pytest.mark.parametrize(
    ("device", "key"),
    [(torch.device("mps"), "mps"), (torch.device("xpu", 1), 1), (torch.device("cuda", 1), 1), (torch.device("xpu"), 3)],
)
def test_fixed_rng_seeds_and_restores_the_device_generator(
    monkeypatch: pytest.MonkeyPatch, device: torch.device, key: Any
) -> None:
    fake = _install(monkeypatch, device.type)
    fake.current = 3  # the current device, used when the device names no index
    fake.states[key] = 42
    cpu = torch.get_rng_state()
    with fixed_rng(5, device):
        assert fake.states[key] == 1005  # seeded with the seed, on the module's device
        fake.draw(key)
        torch.rand(3)
    assert fake.states[key] == 42  # the user's stream, as it was
    assert torch.equal(torch.get_rng_state(), cpu)
    assert ("seed", 5, key) in fake.calls
    assert fake.current == 3  # the current device is left as it was
    where = "mps" if device.type == "mps" else key
    assert fake.calls[0] == ("get", where) and fake.calls[-1] == ("set", 42, where)


def test_preserved_rng_restores_the_mps_generator_after_a_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _install(monkeypatch, "mps")
    fake.states["mps"] = 9
    with preserved_rng(torch.device("mps")):
        fake.draw("mps")
        assert fake.states["mps"] == 16
    assert fake.states["mps"] == 9
    assert [c[0] for c in fake.calls] == ["get", "set"]


def test_same_seed_same_noise_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _install(monkeypatch, "mps")
    seen = []
    for _ in range(2):
        with fixed_rng(11, torch.device("mps")):
            seen.append(fake.states["mps"])
    assert seen == [1011, 1011]


def test_a_build_without_the_generator_calls_seeds_the_cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch.mps, "manual_seed")
    assert device_generator(torch.device("mps")) is None
    with fixed_rng(3, torch.device("mps")):
        a = torch.rand(2)
    with fixed_rng(3, torch.device("cpu")):
        b = torch.rand(2)
    assert torch.equal(a, b)


def test_cpu_and_other_devices_have_no_device_generator() -> None:
    assert device_generator(torch.device("cpu")) is None
    assert device_generator(torch.device("xla")) is None
