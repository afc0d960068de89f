"""Time and peak memory of the k-NN metrics, side by side with their baselines, in one process.

For each size (N = M, D), on seeded Gaussian float32 features:

* ``gemm``   - the three bare GEMMs an exact evaluation needs (X Xᵀ, Y Yᵀ, X Yᵀ): the floor;
* ``ours``   - every k-NN score of the package from one shared pass (precision, recall,
  density, coverage, realism, nearest neighbours for authenticity, the beta-recall minimum);
* ``ours_cached`` - the same with the real side cached (the callback's steady state);
* ``+families`` - ``ours`` with the families that join the pass: probabilistic precision and
  recall (k = 4, a = 1.2) and PR-cover (default k, C = 3); ``fam/ours`` is their cost ratio;
* ``+clip+sym`` - ``ours`` with clipped density and coverage (k = 5: the clipped balls' counts in the
  cross pass, the real neighbours 1..6 from the self pass, the normaliser and the calibration) and
  symmetric precision and recall (k = 5: recall's fake balls at k = 5 too) joined, scores included;
  ``/ours`` is their cost ratio;
* ``f32 tiles`` - ``ours`` with the bfloat16 screen off (``LIGHTNING_PRD_SCREEN=0``): every
  tile a float32 GEMM, as on CPUs without native bfloat16 (the screen is on by default where
  the CPU has AVX512-BF16 or AMX; the header line says which);
* ``+prob+cover+cmmd`` - ``+families`` with CMMD joined too (its Gaussian kernel sums over the
  same tiles, which are then float32 GEMMs: the screen's values are not accurate enough for
  kernel sums), and its ratio to ``ours``; ``f32 +prob+cover+cmmd`` the same against ``f32 tiles``;
* ``prdc``   - ``prdc.compute_prdc`` (4 scores, full matrices, float32 sklearn distances);
* ``cdist``  - torch-fidelity-style full ``torch.cdist`` matrices + ``kthvalue`` (P/R/D/C),
  only where the matrices fit in memory.

Peak memory is the growth of the process's peak RSS during the call (``VmHWM``, reset
between calls through ``/proc/self/clear_refs``), above what the features already occupy.
With ``--repeats R`` every row but ``prdc`` and ``cdist`` is the fastest of R calls (peak memory
from the first); the calls of ``ours``, ``ours_cached``, ``+families`` and ``+clip+sym`` take turns,
so that their ratios compare calls made under the same conditions.

The header says what the run used: the CPU model and its relevant features (AVX2, AVX-512F,
AVX512-BF16, AMX from ``/proc/cpuinfo``), the kernels torch dispatches to
(``torch.backends.cpu.get_cpu_capability()``), the environment variables that restrict them
(``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``) or the engine (``LIGHTNING_PRD_SCREEN``,
``LIGHTNING_PRD_TILE``); the footer gives the tile side the GEMM probe chose
(:mod:`lightning_prd.functional.knn.shapes`). A CPU without native bfloat16 (AVX2 only) is
reproduced on a newer one by
``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 LIGHTNING_PRD_SCREEN=0``.

Usage::

    python benchmarks/bench_knn.py                       # 2,000/256, 5,000/1,024, 10,000/2,048
    python benchmarks/bench_knn.py --sizes 1000x64 --skip prdc
    python benchmarks/bench_knn.py --sizes 10000x2048 --repeats 3   # fastest of 3 calls per row
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch

from lightning_prd.functional.alpha_beta import fake_centre_distance
from lightning_prd.functional.clipped import clipped_from_pass
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import shapes
from lightning_prd.functional.knn.clipped import ClippedBalls
from lightning_prd.functional.knn.screen import SCREEN_MIN_ELEMENTS, SCREEN_MIN_ROWS, screen_available
from lightning_prd.functional.pr_cover import cover_k
from lightning_prd.functional.symmetric import symmetric_from_pass

#: Environment variables that change which kernels run.
ENV_KEYS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "LIGHTNING_PRD_SCREEN", "LIGHTNING_PRD_TILE")


def cpu_features() -> str:
    """One line: CPU model, AVX2 / AVX-512F / AVX512-BF16 / AMX flags, torch's dispatch level
    and the environment variables that restrict it (unset ones omitted)."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass

    def has(*names: str) -> str:
        return "yes" if any(n in flags for n in names) else ("no" if flags else "?")

    env = ", ".join(f"{k}={os.environ[k]}" for k in ENV_KEYS if k in os.environ) or "none set"
    return (
        f"{model}; AVX2 {has('avx2')}, AVX-512F {has('avx512f')}, AVX512-BF16 {has('avx512_bf16')}, "
        f"AMX {has('amx_bf16', 'amx_tile')}; torch CPU capability {torch.backends.cpu.get_cpu_capability()}; "
        f"env: {env}"
    )


def _rss_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(fn: Callable[[], object]) -> Tuple[float, Optional[float]]:
    """Seconds and peak-RSS growth (GiB) of one call."""
    gc.collect()
    ok = _reset_peak()
    base = _rss_kib("VmRSS")
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    peak = (_rss_kib("VmHWM") - base) / 2**20 if ok else None
    gc.collect()
    return dt, peak


def bare_gemms(real: torch.Tensor, fake: torch.Tensor) -> None:
    for a, b in ((real, real), (fake, fake), (real, fake)):
        torch.mm(a, b.T)


def ours(
    real: torch.Tensor, fake: torch.Tensor, cache=None, families: bool = False, cmmd: bool = False, new: bool = False
):
    """The shared pass; ``new``: with clipped density/coverage and symmetric precision/recall (k = 5)
    joined, their scores read off it."""
    k, C = cover_k(None, 3, len(real))
    res = knn_pass(
        real,
        fake,
        member_ks=[3, 5],
        recall_ks=[3, 5] if new else [3],
        realism_k=3,
        nearest="fake",
        real_ks=[1, 2, 3, 4, 5, 6] if new else [1],
        fake_values=fake_centre_distance(fake),
        value_ks=[5],
        cover=(k, C * k) if families else None,
        soft=(4, 1.2, False) if families else None,
        real_cache=cache,
        kernel_gamma=1 / 200 if cmmd else None,  # CMMD's sigma = 10
        clipped=ClippedBalls(5) if new else None,
    )
    if new:
        clipped_from_pass(res, 5)
        symmetric_from_pass(res, 5)
    return res


def without_screen(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with ``LIGHTNING_PRD_SCREEN=0`` (float32 tiles)."""

    def call() -> object:
        saved = os.environ.get("LIGHTNING_PRD_SCREEN")
        os.environ["LIGHTNING_PRD_SCREEN"] = "0"
        try:
            return fn()
        finally:
            if saved is None:
                del os.environ["LIGHTNING_PRD_SCREEN"]
            else:
                os.environ["LIGHTNING_PRD_SCREEN"] = saved

    return call


def cdist_full(real: torch.Tensor, fake: torch.Tensor, k: int = 5) -> None:
    r_real = torch.cdist(real, real).kthvalue(k + 1, dim=1).values
    r_fake = torch.cdist(fake, fake).kthvalue(k + 1, dim=1).values
    d = torch.cdist(real, fake)
    member = d <= r_real[:, None]
    _ = (
        member.any(0).float().mean(),
        (d <= r_fake[None, :]).any(1).float().mean(),
        member.sum() / (k * len(fake)),
        member.any(1).float().mean(),
    )


def fastest(fn: Callable[[], object], repeats: int) -> Tuple[float, Optional[float]]:
    """The fastest of ``repeats`` calls, with the first call's peak memory."""
    first = measure(fn)
    return min([first[0]] + [measure(fn)[0] for _ in range(repeats - 1)]), first[1]


def fastest_in_turn(fns: Dict[str, Callable[[], object]], repeats: int) -> Dict[str, Tuple[float, Optional[float]]]:
    """:func:`fastest` of each function, the calls taking turns (``a b c a b c ...``): a machine
    whose speed drifts during the run then biases no ratio between them."""
    first = {name: measure(fn) for name, fn in fns.items()}
    times = {name: [first[name][0]] for name in fns}
    for _ in range(repeats - 1):
        for name, fn in fns.items():
            times[name].append(measure(fn)[0])
    return {name: (min(times[name]), first[name][1]) for name in fns}


def run(n: int, dim: int, skip: List[str], repeats: int = 1) -> Dict[str, Tuple[float, Optional[float]]]:
    g = torch.Generator().manual_seed(0)
    real = torch.randn(n, dim, generator=g)
    fake = 1.1 * torch.randn(n, dim, generator=g) + 0.1
    rows: Dict[str, Tuple[float, Optional[float]]] = {}
    rows["gemm"] = fastest(lambda: bare_gemms(real, fake), repeats)
    holder = {}
    passes = {
        "ours": lambda: holder.__setitem__("res", ours(real, fake)),
        "ours_cached": lambda: ours(real, fake, cache=holder["res"].real),
        "ours_fam": lambda: ours(real, fake, families=True),
        "ours_new": lambda: ours(real, fake, new=True),
    }
    rows.update(fastest_in_turn(passes, repeats))
    rows["f32"] = fastest(without_screen(lambda: ours(real, fake)), repeats)
    if "cmmd" not in skip:
        rows["ours_all"] = fastest(lambda: ours(real, fake, families=True, cmmd=True), repeats)
        rows["f32_all"] = fastest(without_screen(lambda: ours(real, fake, families=True, cmmd=True)), repeats)
    if "prdc" not in skip:
        try:
            import prdc

            rn, fk = real.numpy(), fake.numpy()
            rows["prdc"] = measure(lambda: prdc.compute_prdc(real_features=rn, fake_features=fk, nearest_k=5))
        except ImportError:
            pass
    full_bytes = 3 * n * n * 4 * 2
    if "cdist" not in skip and full_bytes < 8 * 2**30:
        rows["cdist"] = measure(lambda: cdist_full(real, fake))
    return rows


def _row(n: int, dim: int, r: Dict[str, Tuple[float, Optional[float]]]) -> str:
    """One markdown row of the timing table."""

    def fmt(key: str, i: int = 0) -> str:
        value = r[key][i] if key in r else None
        return f"{value:.2f}" if value is not None else "-"

    def ratio(a: str, b: str) -> str:
        return f"{r[a][0] / r[b][0]:.2f}x" if a in r and b in r else "-"

    return (
        f"| {n:,} | {dim:,} | {fmt('gemm')} | {fmt('ours')} | {ratio('ours', 'gemm')} | {fmt('ours_cached')} | "
        f"{ratio('ours_cached', 'ours')} | {fmt('ours_fam')} | {ratio('ours_fam', 'ours')} | {fmt('ours_new')} | "
        f"{ratio('ours_new', 'ours')} | {fmt('ours_all')} | "
        f"{ratio('ours_all', 'ours')} | {fmt('f32')} | {fmt('f32_all')} | {ratio('f32_all', 'f32')} | "
        f"{fmt('prdc')} | {ratio('prdc', 'ours')} | "
        f"{fmt('cdist')} | {fmt('ours', 1)} / {fmt('prdc', 1)} / {fmt('cdist', 1)} |"
    )


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["2000x256", "5000x1024", "10000x2048"], help="NxD, N = M")
    ap.add_argument("--skip", nargs="*", default=[], choices=["prdc", "cdist", "cmmd"])
    ap.add_argument("--repeats", type=int, default=1, help="fastest of R calls per row (not prdc, cdist)")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    big = screen_available(torch.device("cpu"), torch.float32, SCREEN_MIN_ROWS, SCREEN_MIN_ELEMENTS)
    print(cpu_features())
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, fastest of {args.repeats} call(s); "
        "bfloat16 screen "
        + (
            f"on for sets of >= {SCREEN_MIN_ROWS:,} rows and >= {SCREEN_MIN_ELEMENTS:.0e} elements\n"
            if big
            else "off\n"
        )
    )
    print(
        "| N = M | D | bare GEMMs s | ours s | ours/GEMM | cached s | cached/uncached | +prob+cover s | /ours | "
        "+clip+sym s | /ours | "
        "+prob+cover+cmmd s | /ours | f32 tiles s | f32 +prob+cover+cmmd s | /f32 | prdc s | prdc/ours | cdist s | "
        "peak GiB ours / prdc / cdist |"
    )
    print("|" + "---|" * 20)
    for size in args.sizes:
        n, dim = (int(v) for v in size.lower().split("x"))
        r = run(n, dim, args.skip, args.repeats)
        print(_row(n, dim, r), flush=True)
    probed = ", ".join(f"{dt} depth {depth}: {side}" for (_, dt, depth), side in shapes._CACHE.items())
    print(f"\nsmallest efficient tile side (GEMM probe): {probed or f'not probed (rule, {shapes.DEFAULT_MIN_SIDE})'}")


if __name__ == "__main__":
    main()
