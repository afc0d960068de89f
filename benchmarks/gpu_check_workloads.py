"""The timing, memory and end-to-end steps of ``benchmarks/gpu_check.py`` (S9, S10, S12, S12b): the k-NN pass
and a full compute at 10k-50k x 2,048-4,096, the extractors and a compute inside a 24 GB memory budget, and the
callback in a short fit."""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings
from typing import Any, Dict

import torch
from gpu_check_common import Context, Skip, check, differences, fields, peak_gib, reset_peak, sync, timed, uint8_images
from torch import nn


def _device_features(n: int, dim: int, device: torch.device):
    """``real = randn``, ``fake = 1.1 randn + 0.1`` made on the device (as ``benchmarks/bench_50k.py``)."""
    g = torch.Generator(device=device).manual_seed(0)
    real = torch.randn(n, dim, generator=g, device=device)
    return real, 1.1 * torch.randn(n, dim, generator=g, device=device) + 0.1


def _pass_fields(res) -> Dict[str, Any]:
    return {
        "cross": fields(res.cross),
        "real_sq_radii": dict(res.real.sq_radii),
        "fake_sq_radii": dict(res.fake_sq_radii),
    }


def s9a_pass_timing(ctx: Context) -> Dict[str, Any]:
    """``benchmarks/bench_knn.py``'s "ours" pass (every k-NN score) per size: fastest of a few at 10k, one run
    at 50k (after one warm-up), peak memory above the features and the probed tile side."""
    from lightning_prd.functional.knn import shapes

    from bench_knn import ours

    out: Dict[str, Any] = {}
    keep = tuple(ctx.sizes["full_compute"])
    for n, dim in ctx.sizes["timing"]:
        real, fake = _device_features(n, dim, ctx.device)
        repeats = 1 if n >= 50000 else ctx.sizes["repeats"]
        if n < 50000 or not out:
            ours(real, fake)  # warm-up: the tile probe, cuBLAS handles, the allocator
        best, res = float("inf"), None
        base = reset_peak(ctx.device)
        for _ in range(repeats):
            seconds, res = timed(ours, ctx.device, real, fake)
            best = min(best, seconds)
        out[f"{n}x{dim}"] = {
            "seconds": round(best, 3),
            "repeats": repeats,
            "peak_gib_above_features": peak_gib(ctx.device, base),
        }
        if (n, dim) == keep:
            ctx.shared["pass"] = (real.cpu(), fake.cpu(), _pass_fields(res))
        del real, fake, res
        if ctx.cuda:
            torch.cuda.empty_cache()
    out["probed_tile_sides"] = {f"{d} {dt} depth {k}": s for (d, dt, k), s in shapes._CACHE.items()}
    return out


@contextlib.contextmanager
def stage_timers(device: torch.device, totals: Dict[str, float]):
    """Synchronised timers around the stages of a compute: self radii, cross pass, deferred decisions, PRD, FD."""
    from lightning_prd.functional import knn
    from lightning_prd.functional.families import frechet, prd
    from lightning_prd.functional.knn import deferred

    targets = [
        (knn, "self_radii", "self_radii"),
        (knn, "cross_pass", "cross_pass"),
        (deferred.DeferredDecisions, "settle", "deferred_settle"),
        (prd, "prd_curve_of", "prd_curve"),
        (frechet, "frechet_of", "frechet"),
    ]
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in targets]

    def wrap(fn, name):
        def timed_call(*args, **kwargs):
            sync(device)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                sync(device)
                totals[name] = round(totals.get(name, 0.0) + time.perf_counter() - t0, 3)

        return timed_call

    for (owner, attr, name), (_, _, fn) in zip(targets, saved):
        setattr(owner, attr, wrap(fn, name))
    try:
        yield
    finally:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)


def s9b_compute_timing(ctx: Context) -> Dict[str, Any]:
    """One full ``GenerativeMetrics(preset="training")`` compute, its stages timed."""

    n, dim = ctx.sizes["full_compute"]
    real, fake = _device_features(n, dim, ctx.device)
    metric = ctx.training_metric()
    metric.update(real, real=True)
    metric.update(fake, real=False)
    totals: Dict[str, float] = {}
    base = reset_peak(ctx.device)
    with stage_timers(ctx.device, totals):
        seconds, got = timed(metric.compute, ctx.device)
    ctx.shared["compute_s"] = seconds
    check(all(bool(torch.isfinite(v).all()) for v in got.values()), "non-finite scores")
    check(bool(totals), "no stage was timed: the stage names moved")
    return {
        "n": n,
        "dim": dim,
        "seconds": round(seconds, 3),
        "stages_s": totals,
        "peak_gib": peak_gib(ctx.device, base),
    }


def s9c_cpu_pass(ctx: Context) -> Dict[str, Any]:
    """The CPU pass on the features of S9a's kept size, equal to the device's field by field; its time is the
    CPU baseline of this host."""
    from bench_knn import ours

    if "pass" not in ctx.shared:
        raise Skip("S9a kept no device pass to compare with")
    real, fake, want = ctx.shared.pop("pass")
    seconds, res = timed(ours, torch.device("cpu"), real, fake)
    diff = differences(_pass_fields(res), want)
    check(not diff, f"CPU pass != device pass in {diff}")
    return {"n": len(real), "dim": real.shape[1], "cpu_s": round(seconds, 3), "threads": torch.get_num_threads()}


def s10_memory_fraction(ctx: Context) -> Dict[str, Any]:
    """Inside a 22 GiB budget (a 24 GB card): the extractors' forward at the callback's batch sizes, and a full
    compute at 50k x 4,096: out of memory or the peak."""
    if not ctx.cuda:
        raise Skip("CUDA only: torch.cuda.set_per_process_memory_fraction")
    from lightning_prd.features import FIDInceptionFeatures, VGG16Features

    total = torch.cuda.get_device_properties(ctx.device).total_memory
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, 22 * 2**30 / total), ctx.device)
    out: Dict[str, Any] = {"budget_gib": 22}

    def attempt(fn, *args):
        base = reset_peak(ctx.device)
        try:
            seconds, _ = timed(fn, ctx.device, *args)
            return {"peak_gib": peak_gib(ctx.device, base), "seconds": round(seconds, 3)}
        except torch.OutOfMemoryError:
            return {"out_of_memory": True, "peak_gib": peak_gib(ctx.device, base)}
        finally:
            torch.cuda.empty_cache()

    try:
        for name, cls in (("vgg16", VGG16Features), ("fid-inception", FIDInceptionFeatures)):
            net = cls(random_init=True).eval().to(ctx.device)
            for batch in ctx.sizes["memory_batches"]:
                images = uint8_images(batch, ctx.sizes["side"], 3).to(ctx.device)
                with torch.no_grad():
                    out[f"{name}_batch_{batch}"] = attempt(net, images)
                del images
            del net
        n, dim = ctx.sizes["memory_compute"]
        real, fake = _device_features(n, dim, ctx.device)
        metric = ctx.training_metric()
        metric.update(real, real=True)
        metric.update(fake, real=False)
        out[f"compute_{n}x{dim}"] = attempt(metric.compute)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, ctx.device)
        torch.cuda.empty_cache()
    check(not out[f"compute_{n}x{dim}"].get("out_of_memory"), f"the compute at {n} x {dim} ran out of a 22 GiB budget")
    return out


class TinyImageFeatures(nn.Module):
    """A seeded convolution and pooling: ``[n, 3, H, W]`` images (uint8, or floats in (0, 1)) to ``[n, 48]``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Conv2d(3, 12, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
        return self.net(x.to(next(self.parameters()).device))


def _generator_module(side: int, samples: int):
    """A LightningModule whose ``sample(n)`` maps noise drawn on its device through ``Linear(64, 3 side^2)``
    and a sigmoid to float images in (0, 1)."""
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader, TensorDataset

    class Generator(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(64, 3 * side * side)

        def sample(self, n: int) -> torch.Tensor:
            z = torch.randn(n, 64, device=self.device)
            return torch.sigmoid(self.layer(z)).view(n, 3, side, side)

        def training_step(self, batch, batch_idx):
            return self.sample(len(batch[0])).mean() + 0 * batch[0].sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def train_dataloader(self):
            return DataLoader(TensorDataset(torch.zeros(max(8, samples // 16), 1)), batch_size=8)

    return Generator


def _fit(ctx: Context, callbacks, epochs: int):
    """A seeded fit of the generator; the device's RNG state after it."""
    import pytorch_lightning as pl

    spec = ctx.sizes["callback"]
    torch.manual_seed(0)
    module = _generator_module(spec["side"], spec["samples"])()
    trainer = pl.Trainer(
        accelerator="gpu" if ctx.cuda else "cpu",
        devices=1,
        precision="bf16-mixed",
        max_epochs=epochs,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=ctx.out,
    )
    seconds, _ = timed(lambda: trainer.fit(module), ctx.device)
    state = torch.cuda.get_rng_state(ctx.device) if ctx.cuda else torch.get_rng_state()
    return seconds, state


def _extractor(ctx: Context):
    if ctx.quick:
        return "tiny convolution", TinyImageFeatures()
    from lightning_prd.features import FIDInceptionFeatures

    return "FIDInceptionFeatures(random_init=True)", FIDInceptionFeatures(random_init=True)


def s12_callback(ctx: Context) -> Dict[str, Any]:
    """``PRDCallback`` in a bf16-mixed fit of a tiny generator: one evaluation per epoch in ``history``, the
    device's RNG state as without the callback, seconds per evaluation."""
    from lightning_prd import PRDCallback

    spec = ctx.sizes["callback"]
    real = uint8_images(spec["samples"], spec["side"], 4)
    name, extractor = _extractor(ctx)
    plain_s, plain_state = _fit(ctx, [], spec["epochs"])
    cb = PRDCallback(
        real, feature_extractor=extractor, num_samples=spec["samples"], batch_size=spec["batch"], verbose=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds, state = _fit(ctx, [cb], spec["epochs"])
    evaluations = len(cb.history)
    out = {
        "extractor": name,
        "samples": spec["samples"],
        "evaluations": evaluations,
        "seconds_per_evaluation": round((seconds - plain_s) / max(1, evaluations), 3),
        "last": {k: v for k, v in cb.history[-1].items() if isinstance(v, (int, float))} if cb.history else {},
        "rng_state_as_without_callback": bool(torch.equal(state, plain_state)),
    }
    check(evaluations >= spec["epochs"], f"{evaluations} evaluations in history, expected {spec['epochs']}")
    check(out["rng_state_as_without_callback"], "the callback changed the device's RNG state")
    return out


class OutOfMemoryAbove(nn.Module):
    """``inner``, raising ``torch.OutOfMemoryError`` on batches of more than ``rows`` rows."""

    def __init__(self, inner: nn.Module, rows: int) -> None:
        super().__init__()
        self.inner, self.rows = inner, rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(x) > self.rows:
            raise torch.OutOfMemoryError(f"a stand-in: {len(x)} rows > {self.rows}")
        return self.inner(x)


def s12b_extract_batch_halving(ctx: Context) -> Dict[str, Any]:
    """``PRDCallback(extract_batch_size=None)`` with an extractor out of memory above a few rows: the fit
    completes with the scores of a run at that size from the start."""
    from lightning_prd import PRDCallback

    if "extract_batch_size" not in inspect.signature(PRDCallback.__init__).parameters:
        raise Skip("API not present: PRDCallback(extract_batch_size=...)")
    spec = ctx.sizes["callback"]
    rows = max(2, spec["batch"] // 4)
    real = uint8_images(spec["samples"], spec["side"], 4)
    runs = {}
    for name, extractor, size in (
        ("halving", OutOfMemoryAbove(TinyImageFeatures(), rows), None),
        ("fixed", TinyImageFeatures(), rows),
    ):
        cb = PRDCallback(
            real,
            feature_extractor=extractor,
            num_samples=spec["samples"],
            batch_size=spec["batch"],
            extract_batch_size=size,
            verbose=False,
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _fit(ctx, [cb], 1)
        runs[name] = (cb.history, [str(w.message)[:200] for w in caught if "memory" in str(w.message).lower()])
    same = [{k: v for k, v in h.items() if k != "time"} for h in runs["halving"][0]] == [
        {k: v for k, v in h.items() if k != "time"} for h in runs["fixed"][0]
    ]
    out = {"rows": rows, "warnings": runs["halving"][1], "scores_equal_fixed_size": same}
    check(bool(runs["halving"][0]), "no evaluation")
    check(same, "the halved run's scores differ from a run at that size from the start")
    check(len(runs["halving"][1]) == 1, f"expected one out-of-memory warning, got {runs['halving'][1]}")
    return out
