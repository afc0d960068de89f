"""Time of ``prd_curve`` against the reference's scikit-learn clustering, in one process.

On seeded float32 Gaussian-mixture features (``--n`` real and ``--n`` generated samples of
``--dim`` features, so ``2n`` points are clustered; ``--modes`` mixture components for the
real data, the first 70% of them for the generated data):

* ``ours``    - ``lightning_prd.functional.prd_curve`` (torch k-means, 20 clusters, 10 runs,
  1001 angles), everything included;
* ``sklearn`` - what the reference ``compute_prd_from_embedding`` does: ``MiniBatchKMeans(
  n_clusters=20, n_init=10)`` on the stacked sets, once per run, then histograms and our
  ``prd_from_histograms`` (so only the clustering differs), curves averaged over 10 runs.

Both get the same float32 array (the reference casts to float64, which would only slow it
down). The two are run alternately ``--repeats`` times and the best time of each is reported,
since a shared machine makes single timings noisy. F_8 / F_1/8 of both are printed as a check
that they measure the same thing.

Usage::

    python benchmarks/bench_prd.py                    # 20,000 x 2,048 per set
    python benchmarks/bench_prd.py --modes 20         # fewer, better separated modes
    python benchmarks/bench_prd.py --n 2000 --dim 64  # quick
"""

from __future__ import annotations

import argparse
import time
from typing import Callable, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd.functional.prd import prd_curve, prd_f_beta, prd_from_histograms

NUM_CLUSTERS, NUM_RUNS, NUM_ANGLES = 20, 10, 1001


def make_data(n: int, dim: int, modes: int = 50, spread: float = 0.5, seed: int = 0) -> Tuple[Tensor, Tensor]:
    """Real: ``modes`` Gaussian modes (centres ~ N(0, spread^2 I), unit noise); fake: the first
    70% of them, shifted by 0.05 and narrower (noise 0.8)."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(modes, dim, generator=gen) * spread
    kept = max(1, int(0.7 * modes))
    real = centres[torch.randint(0, modes, (n,), generator=gen)] + torch.randn(n, dim, generator=gen)
    fake = centres[torch.randint(0, kept, (n,), generator=gen)] + 0.05 + 0.8 * torch.randn(n, dim, generator=gen)
    return real, fake


def sklearn_prd(real: Tensor, fake: Tensor) -> Tuple[Tensor, Tensor]:
    from sklearn.cluster import MiniBatchKMeans

    data = np.concatenate([fake.numpy(), real.numpy()])  # (eval, ref) order, as the reference
    n_fake = fake.shape[0]
    precision = recall = 0.0
    for run in range(NUM_RUNS):
        labels = MiniBatchKMeans(n_clusters=NUM_CLUSTERS, n_init=10, random_state=run).fit(data).labels_
        fake_hist = np.bincount(labels[:n_fake], minlength=NUM_CLUSTERS) / n_fake
        real_hist = np.bincount(labels[n_fake:], minlength=NUM_CLUSTERS) / (len(labels) - n_fake)
        p, r = prd_from_histograms(real_hist, fake_hist, num_angles=NUM_ANGLES)
        precision, recall = precision + p, recall + r
    return precision / NUM_RUNS, recall / NUM_RUNS


def ours_prd(real: Tensor, fake: Tensor) -> Tuple[Tensor, Tensor]:
    return prd_curve(real, fake, num_clusters=NUM_CLUSTERS, num_angles=NUM_ANGLES, num_runs=NUM_RUNS, seed=0)


Curves = Tuple[Tensor, Tensor]


def timed(fn: Callable[[Tensor, Tensor], Curves], real: Tensor, fake: Tensor) -> Tuple[float, Curves]:
    start = time.perf_counter()
    out = fn(real, fake)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="samples per set (real and fake each)")
    parser.add_argument("--dim", type=int, default=2048, help="feature dimension")
    parser.add_argument("--modes", type=int, default=50, help="Gaussian modes of the real data")
    parser.add_argument("--spread", type=float, default=0.5, help="standard deviation of the mode centres")
    parser.add_argument("--repeats", type=int, default=1, help="alternating repetitions; best time reported")
    args = parser.parse_args()

    real, fake = make_data(args.n, args.dim, args.modes, args.spread)
    best = {"ours": float("inf"), "sklearn": float("inf")}
    scores = {}
    for _ in range(args.repeats):
        for name, fn in (("ours", ours_prd), ("sklearn", sklearn_prd)):
            seconds, curves = timed(fn, real, fake)
            best[name] = min(best[name], seconds)
            scores[name] = [float(v) for v in prd_f_beta(*curves)]

    print(
        f"PRD curve, {args.n:,} real + {args.n:,} fake x {args.dim:,} float32 ({args.modes} modes), "
        f"{NUM_CLUSTERS} clusters, {NUM_RUNS} runs, {NUM_ANGLES} angles, torch threads {torch.get_num_threads()}\n"
    )
    print("| method | seconds | vs sklearn | F_8 | F_1/8 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, label in (
        ("ours", "lightning_prd `prd_curve` (torch k-means)"),
        ("sklearn", "MiniBatchKMeans(n_init=10) x 10 + histograms"),
    ):
        f_8, f_inv = scores[name]
        print(f"| {label} | {best[name]:.2f} | {best[name] / best['sklearn']:.2f}x | {f_8:.3f} | {f_inv:.3f} |")


if __name__ == "__main__":
    main()
