"""Devices without float64 (Apple MPS, XLA): the float64 engine runs on the CPU for them.

No such device exists here, so features on one are played by :class:`NoFloat64Tensor`: CPU data that reports
another device (``mps`` by default) and, like MPS, raises on every float64 tensor made on it. Moving it to
the CPU (``.to("cpu")``, ``.cpu()``) gives a plain CPU copy. A score computed on such inputs can therefore
only succeed if every float64 step ran on the CPU; the tests also count the float64 results per device
(``Float64Spy``) and compare every score bit for bit with the plain CPU run.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Dict, List

import pytest
import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

import lightning_prd
import lightning_prd.functional as F
from lightning_prd.functional.engine import devices
from lightning_prd.functional.engine.devices import compute_device, has_float64, to_compute_device
from lightning_prd.functional.engine.one_pass import run_pass
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.metrics.inception_score import InceptionScore


class NoFloat64Tensor(Tensor):
    """CPU data on a pretend device ``pretend`` that has no float64: every float64 result raises."""

    pretend = "mps"

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device(self.pretend)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is Tensor.cpu or (func is Tensor.to and _retarget(args, kwargs) == "cpu"):
            with torch._C.DisableTorchFunctionSubclass():
                out = func(*args, **kwargs)
            return out.as_subclass(Tensor).clone()  # a copy, as a move between devices makes
        if func is Tensor.to:  # to the pretend device itself (a no-op), or a dtype change
            args, kwargs = _on_cpu(args, kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, Tensor) and t.dtype == torch.float64:
                raise TypeError(f"{func.__name__} made a float64 tensor on {cls.pretend}, which has no float64")
        return torch._tensor._convert(out, cls)


class NoFloat64Hpu(NoFloat64Tensor):
    """The same on a device type that the real table says has float64 (``hpu``): only a forced predicate helps."""

    pretend = "hpu"


def _retarget(args: Any, kwargs: Dict[str, Any]) -> Any:
    """The device type ``Tensor.to`` was asked for (None: a dtype change only)."""
    for a in list(args[1:]) + [kwargs.get("device")]:
        if isinstance(a, (str, torch.device)):
            return torch.device(a).type
    return None


def _on_cpu(args: Any, kwargs: Dict[str, Any]) -> Any:
    args = tuple("cpu" if isinstance(a, (str, torch.device)) else a for a in args)
    if isinstance(kwargs.get("device"), (str, torch.device)):
        kwargs["device"] = "cpu"
    return args, kwargs


class Float64Spy(TorchFunctionMode):
    """Counts the float64 tensors torch functions return, by the device their tensor reports."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Dict[str, int] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, Tensor) and t.dtype == torch.float64:
                key = t.device.type if isinstance(t, NoFloat64Tensor) else f"plain {t.device.type}"
                self.counts[key] = self.counts.get(key, 0) + 1
        return out


def _pretend(x: Tensor, cls: type = NoFloat64Tensor) -> Tensor:
    return x.clone().as_subclass(cls)


def _data() -> Dict[str, Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "real": torch.randn(120, 6, generator=g) * 2 + 1,
        "fake": torch.randn(120, 6, generator=g) * 2.2 + 1.3,
        "test": torch.randn(60, 6, generator=g) * 2 + 1,
        "real_labels": torch.arange(120) % 3,
        "fake_labels": torch.arange(120) % 2,
        "logits": torch.randn(80, 10, generator=g),
        "real_hist": torch.full((10,), 0.1),
        "fake_hist": torch.linspace(1, 10, 10) / 55,
    }


def _same(got: Any, want: Any) -> None:
    """Bit-identical results: the same structure, plain CPU tensors of the same dtype and values."""
    if isinstance(want, dict):
        assert sorted(got) == sorted(want)
        for key in want:
            _same(got[key], want[key])
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _same(a, b)
    elif isinstance(want, Tensor):
        assert type(got) is Tensor and got.device.type == "cpu" and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)  # equal, NaN where the CPU has NaN
    else:
        assert got == want


# ------------------------------------------------------------------------------------------- the table


@pytest.mark.parametrize(
    ("device", "want"),
    [
        ("cpu", torch.device("cpu")),
        ("cuda", torch.device("cuda")),
        ("cuda:1", torch.device("cuda", 1)),
        (torch.device("cuda", 0), torch.device("cuda", 0)),
        ("mps", torch.device("cpu")),
        ("mps:0", torch.device("cpu")),
        (torch.device("mps"), torch.device("cpu")),
        ("xla", torch.device("cpu")),
        (torch.device("xla", 1), torch.device("cpu")),
        (torch.device("cpu"), torch.device("cpu")),
    ],
)
def test_compute_device_table(device: Any, want: torch.device) -> None:
    assert compute_device(device) == want
    assert has_float64(device) == (want.type != "cpu" or torch.device(device).type == "cpu")


def test_compute_device_names_a_bad_argument() -> None:
    with pytest.raises(TypeError, match="Expected argument `device` to be a str or torch.device, but got int"):
        compute_device(0)
    with pytest.raises(ValueError, match="Expected argument `device` to name a torch device, but got 'gpu'"):
        compute_device("gpu")


@pytest.mark.parametrize("fp64", [True, False])
def test_xpu_follows_the_device_properties(monkeypatch: pytest.MonkeyPatch, fp64: bool) -> None:
    asked: List[int] = []
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "current_device", lambda: 2)
    monkeypatch.setattr(
        torch.xpu, "get_device_properties", lambda i: asked.append(i) or types.SimpleNamespace(has_fp64=fp64)
    )
    assert compute_device("xpu:1") == (torch.device("xpu", 1) if fp64 else torch.device("cpu"))
    assert compute_device("xpu") == (torch.device("xpu") if fp64 else torch.device("cpu"))
    assert asked == [1, 2]  # the device's own index, else the current one


def test_xpu_without_a_runtime_is_taken_to_have_float64() -> None:
    assert not torch.xpu.is_available()  # this CPU build
    assert compute_device("xpu:0") == torch.device("xpu", 0)


def test_a_tensor_already_on_its_compute_device_is_not_copied() -> None:
    x = torch.randn(4, 3)
    assert to_compute_device(x) is x


# ---------------------------------------------------------------- the stand-in fails where MPS would


def test_the_stand_in_fails_on_float64_like_mps() -> None:
    x = _pretend(torch.randn(5, 3))
    assert x.device == torch.device("mps") and (x * 2).device == torch.device("mps")
    with pytest.raises(TypeError, match="float64"):
        x.double()
    moved = x.to("cpu")
    assert type(moved) is Tensor and moved.data_ptr() != x.data_ptr()
    d = _data()  # the engine handed the pretend tensors directly (no compute_device) fails at its first float64
    with pytest.raises(TypeError, match="float64 tensor on mps"):
        run_pass(FeatureSets(_pretend(d["real"]), _pretend(d["fake"])), PassRequest(member_ks=(3,), recall_ks=(3,)))


# ------------------------------------------------------------------------------- the functional calls

CALLS: Dict[str, Callable[[Callable[[Tensor], Tensor], Dict[str, Tensor]], Any]] = {
    "precision_recall": lambda w, d: F.precision_recall(w(d["real"]), w(d["fake"])),
    "density_coverage": lambda w, d: F.density_coverage(w(d["real"]), w(d["fake"])),
    "realism_score": lambda w, d: F.realism_score(w(d["real"]), w(d["fake"])),
    "prd_curve": lambda w, d: F.prd_curve(w(d["real"]), w(d["fake"]), num_clusters=5, num_runs=2),
    "alpha_precision_beta_recall": lambda w, d: F.alpha_precision_beta_recall(w(d["real"]), w(d["fake"])),
    "frechet_distance": lambda w, d: F.frechet_distance(w(d["real"]), w(d["fake"])),
    "kernel_inception_distance": lambda w, d: F.kernel_inception_distance(w(d["real"]), w(d["fake"]), subset_size=50),
    "generative_metrics training": lambda w, d: F.generative_metrics(w(d["real"]), w(d["fake"]), preset="training"),
    "generative_metrics held-out": lambda w, d: F.generative_metrics(
        w(d["real"]), w(d["fake"]), data_copying=True, fld=True, vendi=True, test=w(d["test"])
    ),
    "data_copying": lambda w, d: F.data_copying(w(d["real"]), w(d["fake"]), w(d["test"])),
    "per_class_metrics": lambda w, d: F.per_class_metrics(
        w(d["real"]), w(d["fake"]), real_labels=w(d["real_labels"]), fake_labels=w(d["fake_labels"])
    ),
    "inception_score": lambda w, d: F.inception_score(w(d["logits"]), splits=2),
    "vendi_score": lambda w, d: F.vendi_score(w(d["real"])),
    "prd_from_histograms": lambda w, d: F.prd_from_histograms(w(d["real_hist"]), w(d["fake_hist"]), num_angles=11),
    "prd_f_beta": lambda w, d: F.prd_f_beta(w(d["real_hist"]), w(d["fake_hist"])),
    "train_oneclass": lambda w, d: F.train_oneclass(w(d["real"]), epochs=2)(d["real"]),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_functional_call_on_a_device_without_float64_runs_on_the_cpu(name: str) -> None:
    d = _data()
    want = CALLS[name](lambda x: x, d)
    with Float64Spy() as spy:
        got = CALLS[name](_pretend, d)
    _same(got, want)
    assert spy.counts.get("plain cpu", 0) > 0  # the float64 engine ran, on the CPU
    assert "mps" not in spy.counts  # never on the input device


#: what float64 work on the pretend ``hpu`` device meets: a float64 result made there, or (``torch.zeros(...,
#: device="hpu")``) this build's missing HPU runtime
ON_HPU = (TypeError, ImportError)


def test_forced_predicate_sends_a_device_with_float64_to_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    d = _data()
    want = F.generative_metrics(d["real"], d["fake"], preset="training")
    hpu = lambda x: _pretend(x, NoFloat64Hpu)  # noqa: E731
    with pytest.raises(ON_HPU):  # hpu has float64 in the table: the float64 engine runs there
        F.generative_metrics(hpu(d["real"]), hpu(d["fake"]), preset="training")
    monkeypatch.setattr(devices, "has_float64", lambda device: torch.device(device).type != "hpu")
    assert compute_device("hpu") == torch.device("cpu")
    with Float64Spy() as spy:
        got = F.generative_metrics(hpu(d["real"]), hpu(d["fake"]), preset="training")
    _same(got, want)
    assert spy.counts.get("plain cpu", 0) > 100 and "hpu" not in spy.counts


# ----------------------------------------------------------------------------------- the Metric classes

METRICS: Dict[str, Callable[[], Any]] = {
    "PrecisionRecall": lambda: lightning_prd.PrecisionRecall(),
    "DensityCoverage": lambda: lightning_prd.DensityCoverage(),
    "PRDCurve": lambda: lightning_prd.PRDCurve(num_clusters=5, num_runs=2),
    "AlphaPrecisionBetaRecall": lambda: lightning_prd.AlphaPrecisionBetaRecall(),
    "AlphaPrecisionBetaRecall oneclass": lambda: lightning_prd.AlphaPrecisionBetaRecall(embedding="oneclass"),
    "FrechetDistance": lambda: lightning_prd.FrechetDistance(),
    "GenerativeMetrics training": lambda: lightning_prd.GenerativeMetrics(preset="training"),
}


def _fed(make: Callable[[], Any], wrap: Callable[[Tensor], Tensor], d: Dict[str, Tensor]) -> Any:
    metric = make()
    metric.update(wrap(d["real"][:70]), real=True)
    metric.update(wrap(d["real"][70:]), real=True)
    metric.update(wrap(d["fake"]), real=False)
    return metric


@pytest.mark.parametrize("name", list(METRICS))
def test_metric_compute_on_a_device_without_float64_runs_on_the_cpu(name: str) -> None:
    d = _data()
    want = _fed(METRICS[name], lambda x: x, d).compute()
    metric = _fed(METRICS[name], _pretend, d)
    assert metric.real_features[0].device.type == "mps"  # accumulated on the device
    with Float64Spy() as spy:
        got = metric.compute()
    _same(got, want)
    assert spy.counts.get("plain cpu", 0) > 0 and "mps" not in spy.counts


def test_kept_real_side_lives_on_the_cpu_and_serves_the_next_evaluation() -> None:
    d = _data()
    ref = lightning_prd.GenerativeMetrics(preset="training", reset_real_features=False)
    metric = lightning_prd.GenerativeMetrics(preset="training", reset_real_features=False)
    for m, wrap in ((ref, lambda x: x), (metric, _pretend)):
        m.update(wrap(d["real"]), real=True)
        m.update(wrap(d["fake"]), real=False)
    _same(metric.compute(), ref.compute())
    kept = metric._real_cache
    assert kept is not None and type(kept.points) is Tensor and kept.points.device.type == "cpu"
    assert all(type(r) is Tensor and r.device.type == "cpu" for r in kept.sq_radii.values())
    for m, wrap in ((ref, lambda x: x), (metric, _pretend)):
        m.reset()
        m.update(wrap(d["test"]), real=False)
    _same(metric.compute(), ref.compute())
    assert metric._real_cache is kept  # the radii were reused, not computed again


def test_metric_labels_held_out_set_and_statistics_on_a_device_without_float64() -> None:
    d = _data()
    results = []
    for wrap in (lambda x: x, _pretend):
        per_class = lightning_prd.GenerativeMetrics(per_class=True, data_copying=True)
        per_class.update(wrap(d["real"]), real=True, labels=wrap(d["real_labels"]))
        per_class.update(wrap(d["fake"]), real=False, labels=wrap(d["fake_labels"]))
        per_class.update(wrap(d["test"]), role="test")
        stats = lightning_prd.GenerativeMetrics(
            k_precision_recall=None, k_density_coverage=None, realism=False, authenticity=False,
            probabilistic=False, pr_cover=False,
        )  # fmt: skip
        stats.set_real_statistics(wrap(d["real"].mean(0)), wrap(torch.cov(d["real"].T)))
        stats.update(wrap(d["fake"]), real=False)
        score = InceptionScore(splits=2)
        score.update(wrap(d["logits"]))
        results.append([per_class.compute(), stats.compute(), score.compute()])
    _same(results[1], results[0])


def test_forced_predicate_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    d = _data()
    want = _fed(METRICS["GenerativeMetrics training"], lambda x: x, d).compute()
    hpu = lambda x: _pretend(x, NoFloat64Hpu)  # noqa: E731
    with pytest.raises(ON_HPU):
        _fed(METRICS["GenerativeMetrics training"], hpu, d).compute()
    monkeypatch.setattr(devices, "has_float64", lambda device: torch.device(device).type != "hpu")
    metric = _fed(METRICS["GenerativeMetrics training"], hpu, d)
    with Float64Spy() as spy:
        got = metric.compute()
    _same(got, want)
    assert spy.counts.get("plain cpu", 0) > 100 and "hpu" not in spy.counts


class ToPretendDevice(TorchFunctionMode):
    """``plain.to("mps")`` gives a :class:`NoFloat64Tensor` copy (this build has no MPS to copy to)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is Tensor.to and type(args[0]) is Tensor and _retarget(args, kwargs) == "mps":
            args, kwargs = _on_cpu(args, kwargs)
            return func(*args, **kwargs).clone().as_subclass(NoFloat64Tensor)
        return func(*args, **kwargs)


def test_an_embedding_module_on_the_device_gets_its_chunks_there() -> None:
    d = _data()
    seen: List[str] = []
    lin = torch.nn.Linear(6, 4)
    lin.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].device.type))
    want = lightning_prd.AlphaPrecisionBetaRecall(embedding=lin)
    want.update(d["real"], real=True)
    want.update(d["fake"], real=False)
    want = want.compute()
    on_mps = torch.nn.Linear(6, 4)
    on_mps.load_state_dict(lin.state_dict())
    on_mps.weight = torch.nn.Parameter(_pretend(on_mps.weight.detach()), requires_grad=False)
    on_mps.bias = torch.nn.Parameter(_pretend(on_mps.bias.detach()), requires_grad=False)
    on_mps.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].device.type))
    metric = lightning_prd.AlphaPrecisionBetaRecall(embedding=on_mps)
    metric.update(_pretend(d["real"]), real=True)
    metric.update(_pretend(d["fake"]), real=False)
    with ToPretendDevice():
        got = metric.compute()
    _same(got, want)
    assert seen == ["cpu", "cpu", "mps", "mps"]  # the module ran where its parameters are
