"""The correctness steps of ``benchmarks/gpu_check.py`` (S0-S6, S11): the environment, the CUDA-only tests,
the device against the float64 oracle and against the CPU path, sync freedom, TF32 kept out of the tiles,
autocast around ``compute()`` and the Fréchet distance's ``eigh``.

Each step takes the run's :class:`~gpu_check_common.Context` and returns its numbers; a property that does
not hold raises :class:`~gpu_check_common.CheckFailed`, a step that does not apply raises
:class:`~gpu_check_common.Skip`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import subprocess
import sys
import warnings
from typing import Any, Dict

import numpy as np
import torch
from gpu_check_common import (
    ROOT,
    CheckFailed,
    Context,
    Skip,
    check,
    differences,
    fields,
    flags,
    gaussian_pair,
    precision_state,
    tied_pair,
    timed,
)

#: the tests that skip without CUDA (``-k`` keeps the device tests of these files)
CUDA_TESTS = [
    "tests/test_sync_free.py",
    "tests/test_knn.py",
    "tests/test_prd.py",
    "tests/test_kid.py",
    "tests/test_vendi.py",
    "tests/test_bad_input.py",
    "tests/test_callback_rules.py",
]
#: the keys that depend on PRD's k-means (the one score whose GEMMs were once outside the IEEE guard)
PRD_KEYS = {"f_beta", "f_inv_beta", "prd_precision", "prd_recall"}


def s0_environment(ctx: Context) -> Dict[str, Any]:
    """Versions, the device and CPU, the precision flags as found; then the adversarial state for the run."""
    import lightning_prd

    from bench_knn import cpu_features

    out: Dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "lightning_prd": getattr(lightning_prd, "__version__", "?"),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "cpu": cpu_features(),
        "cpu_count": os.cpu_count(),
        "flags_found": flags(),
    }
    if ctx.cuda:
        props = torch.cuda.get_device_properties(ctx.device)
        out.update(
            gpu=props.name,
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            capability=f"{props.major}.{props.minor}",
        )
    ctx.adverse = "high" if ctx.cuda else "medium"
    torch.set_float32_matmul_precision(ctx.adverse)
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    if ctx.cuda and (os.cpu_count() or 1) >= 16:
        torch.set_num_threads(16)
    out["flags_run"] = flags()
    out["cpu_threads"] = torch.get_num_threads()
    return out


def s1_cuda_tests(ctx: Context) -> Dict[str, Any]:
    """The tests that skip without CUDA, in a subprocess: all pass (on CUDA none is skipped)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-rs",
        *CUDA_TESTS,
        "-k",
        "cuda or device or gpu",
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    if not ctx.cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300 if ctx.cuda else 150)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {key: int(n) for n, key in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", tail)}
    out = {"command": " ".join(cmd[1:]), "summary": tail, **counts, "returncode": proc.returncode}
    if proc.returncode not in (0,):
        out["output_tail"] = (proc.stdout + proc.stderr)[-3000:]
    check(proc.returncode == 0, f"pytest exited {proc.returncode}: {tail}")
    check(counts.get("passed", 0) > 0, f"no test passed: {tail}")
    if ctx.cuda:
        check(counts.get("skipped", 0) == 0, f"tests skipped on a CUDA machine: {tail}")
    return out


def _blocked_oracle():
    """``tests/oracle.py`` with its ``dist`` computed by row blocks and kept per pair of sets (the same
    direct float64 differences, without the ``[N, M, D]`` temporary of one call)."""
    import oracle

    plain, memo = oracle.dist, {}

    def dist(a, b):
        key = (id(a), id(b))
        if key not in memo:
            step = max(1, (1 << 26) // max(1, len(b) * a.shape[1]))
            memo[key] = np.concatenate([plain(a[i : i + step], b) for i in range(0, len(a), step)])
        return memo[key].copy()

    oracle.dist = dist
    return oracle, plain


def s2_oracle(ctx: Context) -> Dict[str, Any]:
    """``GenerativeMetrics(preset="training")`` on the device against the float64 NumPy oracle."""

    n, dim = ctx.sizes["oracle"]
    real, fake = gaussian_pair(n, dim)
    metric = ctx.training_metric(realism=True)
    metric.update(real.to(ctx.device), real=True)
    metric.update(fake.to(ctx.device), real=False)
    seconds, got = timed(metric.compute, ctx.device)
    oracle, plain = _blocked_oracle()
    try:
        r, f = real.double().numpy(), fake.double().numpy()
        precision, recall = oracle.precision_recall(r, f, 3)
        density, coverage = oracle.density_coverage(r, f, 5)
        realism = oracle.realism(r, f, 3)
        fd = oracle.frechet(r, f)
    finally:
        oracle.dist = plain
    counts = {  # the decisions as counts: exact equality
        "precision": (float(got["precision"]) * n, precision * n),
        "recall": (float(got["recall"]) * n, recall * n),
        "density": (float(got["density"]) * 5 * n, density * 5 * n),
        "coverage": (float(got["coverage"]) * n, coverage * n),
    }
    out: Dict[str, Any] = {"n": n, "dim": dim, "compute_s": round(seconds, 3)}
    for key, (a, b) in counts.items():
        out[key] = {"device": round(a), "oracle": round(b)}
        check(round(a) == round(b), f"{key}: device count {a} != oracle {b}")
    got_realism = got["realism"].double().cpu().numpy()
    rel = float(np.max(np.abs(got_realism - realism) / np.abs(realism)))
    out["realism_max_rel"] = rel
    check(rel <= 2**-23, f"realism: max relative difference {rel} beyond float32 rounding")
    fd_rel = abs(float(got["frechet_distance"]) - fd) / abs(fd)
    out["frechet_rel"] = fd_rel
    check(fd_rel <= 1e-9, f"frechet_distance: relative difference {fd_rel}")
    return out


def s2b_compute_device(ctx: Context) -> Dict[str, Any]:
    """``engine.devices.compute_device``: the device itself for CUDA and the CPU, the CPU for MPS and XLA."""
    try:
        from lightning_prd.functional.engine.devices import compute_device
    except ImportError as err:
        raise Skip(f"API not present: lightning_prd.functional.engine.devices.compute_device ({err})") from None
    got = {name: str(compute_device(torch.device(name))) for name in ("cpu", "cuda:0", "mps", "xla")}
    want = {"cpu": "cpu", "cuda:0": "cuda:0", "mps": "cpu", "xla": "cpu"}
    check(got == want, f"compute_device: {got}, expected {want}")
    return got


@contextlib.contextmanager
def device_path(ctx: Context):
    """The CUDA tile loops (sync-free, decisions deferred after the loop): native on CUDA, forced on the CPU."""
    from lightning_prd.functional.knn import cross, self_pass

    saved = cross.sync_free, self_pass.sync_free
    if not ctx.cuda:
        cross.sync_free = self_pass.sync_free = lambda device: True
    try:
        yield
    finally:
        cross.sync_free, self_pass.sync_free = saved


def _every_reduction(real, fake, block_bytes):
    """Every reduction of the cross pass at once, and the radii of both sets."""
    from lightning_prd.functional.engine.one_pass import knn_pass

    values = torch.rand(len(fake), generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(fake.device)
    res = knn_pass(
        real,
        fake,
        member_ks=[3, 5],
        recall_ks=[3, 5],
        realism_k=3,
        nearest=True,
        fake_values=values,
        value_ks=[3, 4],
        cover=(2, 6),
        soft=(4, 1.2, False),
        block_bytes=block_bytes,
    )
    return {
        "cross": fields(res.cross),
        "real_sq_radii": dict(res.real.sq_radii),
        "fake_sq_radii": dict(res.fake_sq_radii),
    }


def s3_device_vs_cpu(ctx: Context) -> Dict[str, Any]:
    """The device's cross pass (adversarial TF32 state in force) equal, field by field, to the CPU's listing
    path, for a Gaussian and a tied pair; tile-shape independence; whether the tied pair's log overflowed."""
    from lightning_prd.functional.knn import cross

    n, dim = ctx.sizes["pair"]
    tn, tdim = ctx.sizes["tied"]
    near, copies = ctx.sizes["copies"]
    small, large = ctx.sizes["small_blocks"], ctx.sizes["large_blocks"]
    pairs = {
        "gaussian": gaussian_pair(n, dim, scale=(1.0, 1.1), shift=(0.0, 0.1)),
        "tied": tied_pair(tn, tdim, near, copies),
    }
    out: Dict[str, Any] = {"gaussian": [n, dim], "tied": [tn, tdim], "adverse": torch.get_float32_matmul_precision()}
    calls: list = []
    first = cross._reduce

    def spy(*args, **kwargs):
        calls.append(bool(args[5]))  # no_sync: the deferred path; False after True: the rerun on the listing path
        return first(*args, **kwargs)

    for name, (real, fake) in pairs.items():
        cpu_s, want = timed(_every_reduction, torch.device("cpu"), real, fake, large)
        rd, fd = real.to(ctx.device), fake.to(ctx.device)
        with device_path(ctx):
            cross._reduce = spy
            try:
                calls.clear()
                dev_s, got = timed(_every_reduction, ctx.device, rd, fd, large)
                paths = list(calls)
                got_small = _every_reduction(rd, fd, small)
            finally:
                cross._reduce = first
        out[name] = {
            "cpu_s": round(cpu_s, 3),
            "device_s": round(dev_s, 3),
            "deferred_then_listing": paths,
            "log_overflowed": paths[:2] == [True, False],
            "differ_from_cpu": differences(got, want),
            "differ_across_tile_shapes": differences(got_small, got),
        }
        check(paths and paths[0], f"{name}: the device pass did not take the deferred path ({paths})")
        check(not out[name]["differ_from_cpu"], f"{name}: device != CPU in {out[name]['differ_from_cpu']}")
        check(
            not out[name]["differ_across_tile_shapes"],
            f"{name}: tile shapes change {out[name]['differ_across_tile_shapes']}",
        )
    return out


def s4_sync_free(ctx: Context) -> Dict[str, Any]:
    """No host synchronisation inside the cross pass's tile loop; synchronising calls of one whole compute."""
    from lightning_prd.functional.knn import cross

    n, dim = ctx.sizes["pair"]
    real, fake = (t.to(ctx.device) for t in gaussian_pair(n, dim, scale=(1.0, 1.1), shift=(0.0, 0.1)))
    out: Dict[str, Any] = {"n": n, "dim": dim}
    real_tiles = cross.tiling.tiles
    if ctx.cuda:

        def guarded(*args, **kwargs):
            torch.cuda.set_sync_debug_mode("error")
            try:
                yield from real_tiles(*args, **kwargs)
            finally:
                torch.cuda.set_sync_debug_mode(0)

        cross.tiling.tiles = guarded
        try:
            _every_reduction(real, fake, ctx.sizes["small_blocks"])
        finally:
            cross.tiling.tiles = real_tiles
            torch.cuda.set_sync_debug_mode(0)
        out["tile_loop"] = "no synchronising call under set_sync_debug_mode('error')"
        metric = ctx.training_metric()
        metric.update(real, real=True)
        metric.update(fake, real=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                metric.compute()
            finally:
                torch.cuda.set_sync_debug_mode(0)
        out["syncs_per_compute"] = sum("synchroniz" in str(w.message) for w in caught)
        return out
    try:
        from test_sync_free import SyncCounter
    except ImportError as err:
        raise Skip(f"the CPU stand-in tests/test_sync_free.py::SyncCounter cannot be imported ({err})") from None
    counter, counts = SyncCounter(), []

    def counted(*args, **kwargs):
        with counter:
            yield from real_tiles(*args, **kwargs)
        counts.append(counter.count)
        counter.count = 0

    cross.tiling.tiles = counted
    try:
        with device_path(ctx):
            _every_reduction(real, fake, ctx.sizes["small_blocks"])
    finally:
        cross.tiling.tiles = real_tiles
    out["syncs_in_tile_loop"] = counts
    check(counts and all(c == 0 for c in counts), f"synchronising operators in the tile loop: {counts}")
    metric = ctx.training_metric()
    metric.update(real, real=True)
    metric.update(fake, real=False)
    whole = SyncCounter()
    with device_path(ctx), whole:
        metric.compute()
    out["syncs_per_compute"] = whole.count
    return out


def _tile_key(*tensors) -> bytes:
    digest = hashlib.sha1()
    for t in tensors:
        digest.update(t.detach().contiguous().cpu().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.digest()


def s5_tf32_kept_out(ctx: Context) -> Dict[str, Any]:
    """A bare tile GEMM changes under the adversarial precision (it is active here); the pass's tiles do not;
    the caller's flags are back after the pass."""
    from lightning_prd.functional.engine.one_pass import knn_pass
    from lightning_prd.functional.knn import tiling
    from lightning_prd.functional.knn.points import prepare

    side = ctx.sizes["tile"]
    x = torch.randn(side, side, generator=torch.Generator().manual_seed(7)).to(ctx.device)
    p = prepare(x, torch.zeros(side, dtype=torch.float64, device=ctx.device), torch.float32)
    buf = (torch.empty(side * side, device=ctx.device), None)

    def bare():
        return tiling.sq_tile(
            buf, p.left(slice(0, side)), p.sq_norms[:, None], p.right(slice(0, side)), p.sq_norms
        ).clone()

    with precision_state("highest"):
        ieee = bare()
    with precision_state(ctx.adverse):
        reduced = bare()
    out: Dict[str, Any] = {"adverse": ctx.adverse, "bare_tile_max_abs_change": float((reduced - ieee).abs().max())}
    out["bare_tile_changes"] = not torch.equal(reduced, ieee)
    n, dim = ctx.sizes["oracle"]
    real, fake = (t.to(ctx.device) for t in gaussian_pair(n, dim))
    real_sq_tile = tiling.sq_tile

    def tiles_of_a_pass():
        seen = {}

        def spy(buf_, a_blk, a_sq, b_blk, b_sq, *rest, **kwargs):
            res = real_sq_tile(buf_, a_blk, a_sq, b_blk, b_sq, *rest, **kwargs)
            seen[_tile_key(a_blk, a_sq, b_blk, b_sq) + repr(rest).encode()] = res.clone()
            return res

        tiling.sq_tile = spy
        try:
            knn_pass(real, fake, member_ks=[3], recall_ks=[3], realism_k=3, nearest=True, block_bytes=1 << 16)
        finally:
            tiling.sq_tile = real_sq_tile
        return seen

    with precision_state("highest"):
        want = tiles_of_a_pass()
    with precision_state(ctx.adverse, cudnn_tf32=True):
        got = tiles_of_a_pass()
        after = torch.get_float32_matmul_precision()
    out.update(tiles=len(got), tiles_differ=sum(not torch.equal(got[k], want[k]) for k in got if k in want))
    out["flags_after_pass"] = after
    check(got.keys() == want.keys() and len(got) > 1, "the passes' tiles differ in number or inputs")
    check(out["tiles_differ"] == 0, f"{out['tiles_differ']} tiles changed under {ctx.adverse!r}")
    check(after == ctx.adverse, f"the caller's precision {ctx.adverse!r} was not restored (found {after!r})")
    if not out["bare_tile_changes"]:
        out["note"] = (
            f"{ctx.adverse!r} does not change float32 products on this device: the check above is vacuous here"
        )
    return out


def s6_autocast(ctx: Context) -> Dict[str, Any]:
    """``compute()`` under autocast (float16, bfloat16): only PRD's keys may differ, everything finite; float16
    again with features x 30 (VGG-like norms)."""

    n, dim = ctx.sizes["autocast"]
    real, fake = (t.to(ctx.device) for t in gaussian_pair(n, dim, scale=(1.0, 1.1), shift=(0.0, 0.1)))

    def run(scale=1.0, dtype=None):
        metric = ctx.training_metric()
        metric.update(real * scale, real=True)
        metric.update(fake * scale, real=False)
        if dtype is None:
            return metric.compute()
        with torch.autocast(ctx.device.type, dtype=dtype):
            return metric.compute()

    plain = run()
    out: Dict[str, Any] = {"n": n, "dim": dim}
    for name, dtype, scale in (
        ("float16", torch.float16, 1.0),
        ("bfloat16", torch.bfloat16, 1.0),
        ("float16_x30", torch.float16, 30.0),
    ):
        try:
            got = run(scale, dtype)
        except RuntimeError as err:
            out[name] = {"error": str(err).splitlines()[0]}
            raise CheckFailed(f"autocast {name}: {err}") from None
        base = plain if scale == 1.0 else run(scale)
        diff = differences(got, base)
        finite = all(bool(torch.isfinite(v).all()) for v in got.values() if isinstance(v, torch.Tensor))
        out[name] = {
            "keys_that_differ": diff,
            "finite": finite,
            "f_beta": float(got["f_beta"]),
            "f_beta_plain": float(base["f_beta"]),
        }
        check(finite, f"autocast {name}: non-finite scores")
        check(set(diff) <= PRD_KEYS, f"autocast {name}: non-PRD keys differ: {sorted(set(diff) - PRD_KEYS)}")
    return out


def s11_eigh(ctx: Context) -> Dict[str, Any]:
    """``frechet_distance`` on the device against the CPU (rank-deficient and full covariances), and the time of
    one float64 ``eigh``."""
    from lightning_prd.functional import frechet_distance

    out: Dict[str, Any] = {}
    for name, (n, dim) in (("rank_deficient", ctx.sizes["fd_small"]), ("full", ctx.sizes["full_compute"])):
        real, fake = gaussian_pair(n, dim, seed=11, scale=(1.0, 1.1), shift=(0.0, 0.1))
        cpu = float(frechet_distance(real, fake))
        dev_s, dev = timed(frechet_distance, ctx.device, real.to(ctx.device), fake.to(ctx.device))
        dev = float(dev)
        rel = abs(dev - cpu) / abs(cpu)
        out[name] = {"n": n, "dim": dim, "cpu": cpu, "device": dev, "rel": rel, "device_s": round(dev_s, 3)}
        check(rel <= 1e-9, f"frechet_distance {name}: device/CPU relative difference {rel}")
    side = ctx.sizes["eigh"]
    a = torch.randn(side, side, generator=torch.Generator().manual_seed(12), dtype=torch.float64).to(ctx.device)
    a = a @ a.T
    seconds, _ = timed(lambda: torch.linalg.eigh(a), ctx.device)
    out["eigh"] = {"side": side, "seconds": round(seconds, 3)}
    return out


__all__ = ["CheckFailed"]
