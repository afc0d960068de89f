"""The extractor and determinism steps of ``benchmarks/gpu_check.py`` (S7, S7b, S8): feature extractors under
the device's precision settings and autocast, the metrics' ``extractor_precision`` option, and one compute
under ``torch.use_deterministic_algorithms(True)`` in a process of its own."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import subprocess
import sys
import warnings
from typing import Any, Dict

import torch
from gpu_check_common import Context, Skip, check, differences, gaussian_pair, precision_state, uint8_images

#: the rows a call of an extractor embeds at once
EMBED_BATCH = 64


def embed(net, images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``net``'s float32 CPU features of ``images``, embedded on ``device`` in batches, without grad."""
    with torch.no_grad():
        parts = [net(images[i : i + EMBED_BATCH].to(device)).float().cpu() for i in range(0, len(images), EMBED_BATCH)]
    return torch.cat(parts)


def _settings(ctx: Context):
    """(name, float32 matmul precision, cuDNN TF32, autocast dtype) of the runs compared with IEEE float32."""
    if ctx.cuda:
        return [
            ("ieee", "highest", False, None),
            ("cudnn_tf32", "highest", True, None),
            ("tf32", "high", True, None),
            ("autocast_bfloat16", "highest", False, torch.bfloat16),
        ]
    return [
        ("ieee", "highest", None, None),
        ("medium", "medium", None, None),
        ("autocast_bfloat16", "highest", None, torch.bfloat16),
    ]


def _extractors():
    from lightning_prd.features import FIDInceptionFeatures, VGG16Features

    return {"fid-inception": FIDInceptionFeatures, "vgg16": VGG16Features}


def _row_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float(((got.double() - want.double()).norm(dim=1) / want.double().norm(dim=1).clamp_min(1e-30)).max())


def s7_extractor_precision(ctx: Context) -> Dict[str, Any]:
    """Random-init FID Inception and VGG-16 on seeded uint8 images: the device's features under each precision
    setting against CPU IEEE float32 (max relative row error), and the change of the Fréchet distance between
    two image sets against the device's IEEE run."""
    from lightning_prd.functional import frechet_distance

    n, side = ctx.sizes["images"], ctx.sizes["side"]
    first, second = uint8_images(n, side, 1), uint8_images(n, side, 2)
    cpu_rows, dims = min(n, 64), ctx.sizes["fd_dims"]
    out: Dict[str, Any] = {"images": n, "side": side, "cpu_rows": cpu_rows, "fd_dims": dims or "all"}
    for name, cls in _extractors().items():
        net = cls(random_init=True).eval()
        reference = None
        if ctx.cuda:
            with precision_state("highest"):
                reference = embed(net, first[:cpu_rows], torch.device("cpu"))
        net = net.to(ctx.device)
        runs: Dict[str, Any] = {}
        for setting, matmul, cudnn, dtype in _settings(ctx):
            autocast = torch.autocast(ctx.device.type, dtype=dtype) if dtype else contextlib.nullcontext()
            with precision_state(matmul, cudnn), autocast:
                a, b = embed(net, torch.cat([first, second]), ctx.device).split(n)
            check(bool(torch.isfinite(a).all() and torch.isfinite(b).all()), f"{name} {setting}: non-finite features")
            if reference is None:  # on the CPU the first setting, IEEE float32, is the reference
                reference = a[:cpu_rows]
            runs[setting] = {
                "max_rel_row_error_vs_cpu": _row_error(a[:cpu_rows], reference),
                "fd": float(frechet_distance(a[:, :dims], b[:, :dims])),
            }
        fd_ieee = runs["ieee"]["fd"]
        for values in runs.values():
            values["fd_rel_change"] = abs(values["fd"] - fd_ieee) / abs(fd_ieee)
        out[name] = runs
        error = runs["ieee"]["max_rel_row_error_vs_cpu"]
        check(error <= 1e-3, f"{name}: IEEE float32 features on the device differ from the CPU's by {error} (relative)")
        net.cpu()
    return out


def s7b_extractor_precision_option(ctx: Context) -> Dict[str, Any]:
    """``GenerativeMetrics(extractor_precision="ieee")`` updated inside autocast with grad on and the adversarial
    precision: the stored features equal IEEE float32 features (``"fast"``: the difference is reported)."""
    from lightning_prd import GenerativeMetrics, PRDCallback
    from lightning_prd.metrics.base import FeatureMetric

    params = set(inspect.signature(FeatureMetric.__init__).parameters) | set(
        inspect.signature(GenerativeMetrics.__init__).parameters
    )
    if "extractor_precision" not in params:
        raise Skip("API not present: the `extractor_precision` option of GenerativeMetrics/FeatureMetric")
    from lightning_prd.features import FIDInceptionFeatures

    n, side = ctx.sizes["images"], ctx.sizes["side"]
    images = uint8_images(min(n, EMBED_BATCH), side, 1).to(ctx.device)
    net = FIDInceptionFeatures(random_init=True).eval().to(ctx.device)
    with precision_state("highest", False):
        want = embed(net, images, ctx.device)
    out: Dict[str, Any] = {
        "callback_option": "extractor_precision" in inspect.signature(PRDCallback.__init__).parameters
    }
    for option in ("ieee", "fast"):
        metric = GenerativeMetrics(feature_extractor=net, extractor_precision=option).to(ctx.device)
        with (
            precision_state(ctx.adverse, True),
            torch.autocast(ctx.device.type, dtype=torch.bfloat16),
            torch.enable_grad(),
        ):
            metric.update(images, real=True)
        got = metric.real_features[0] if isinstance(metric.real_features, list) else metric.real_features
        out[option] = {
            "dtype": str(got.dtype),
            "requires_grad": bool(got.requires_grad),
            "max_rel_row_error": _row_error(got.float().cpu(), want),
        }
    check(out["ieee"]["dtype"] == "torch.float32" and not out["ieee"]["requires_grad"], f"ieee features: {out['ieee']}")
    check(out["ieee"]["max_rel_row_error"] <= 1e-4, f"ieee features differ from IEEE float32 ones: {out['ieee']}")
    return out


def deterministic_worker(ctx: Context) -> Dict[str, Any]:
    """One ``GenerativeMetrics(preset="training", kid=...)`` compute, twice, under deterministic algorithms (run
    in a process of its own: the switch is global); then with ``warn_only=True``, collecting the warned ops."""

    n, dim = ctx.sizes["det"]
    real, fake = (t.to(ctx.device) for t in gaussian_pair(n, dim))

    def run():
        metric = ctx.training_metric(kid=dict(ctx.sizes["det_kid"]))
        metric.update(real, real=True)
        metric.update(fake, real=False)
        return metric.compute()

    out: Dict[str, Any] = {"n": n, "dim": dim}
    torch.use_deterministic_algorithms(True)
    try:
        first, second = run(), run()
        out["strict"] = "ok"
        out["differ_between_computes"] = differences(first, second)
    except Exception as err:  # the exact error is the finding
        out["strict"] = f"{type(err).__name__}: {err}"[:1000]
    torch.use_deterministic_algorithms(True, warn_only=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    out["warned"] = sorted({str(w.message).splitlines()[0][:300] for w in caught if "determinis" in str(w.message)})
    return out


def s8_deterministic(ctx: Context) -> Dict[str, Any]:
    """:func:`deterministic_worker` in a subprocess with ``CUBLAS_WORKSPACE_CONFIG=:4096:8``."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_check.py")
    cmd = [sys.executable, script, "--worker", "deterministic", "--device", str(ctx.device), "--out", ctx.out]
    if ctx.quick:
        cmd.append("--quick")
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    check(
        proc.returncode == 0 and bool(lines), f"worker exited {proc.returncode}: {(proc.stdout + proc.stderr)[-2000:]}"
    )
    out = json.loads(lines[-1])
    check(out["strict"] == "ok", f"deterministic mode: {out['strict']}")
    check(not out["differ_between_computes"], f"two deterministic computes differ in {out['differ_between_computes']}")
    return out
