"""A second run's first evaluation with and without ``PRDCallback(cache_dir=...)``.

Real set: ``--n`` seeded uint8 images ``3 x --image x --image`` in a tensor, embedded by the
seeded ``RandomConvNet`` at ``--net-size`` (images resized to it). Each run is a fresh
``Trainer`` + callback + extractor (as a new training run would be); the time is the callback's
first evaluation of the second run: real features (extracted, or read from the cache after
hashing the real samples), ``--fake`` generated samples embedded, the k-NN scores and the
Fréchet distance computed (PRD and alpha/beta off, to keep the extraction's share visible).

Usage::

    python benchmarks/bench_feature_cache.py [--n 10000] [--image 32] [--net-size 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback
from lightning_prd.features import RandomConvNet


class Timed(PRDCallback):
    """Records the duration of each evaluation."""

    def _evaluate(self, trainer, pl_module, *args, **kwargs):
        t0 = time.perf_counter()
        super()._evaluate(trainer, pl_module, *args, **kwargs)
        self.timings = getattr(self, "timings", []) + [time.perf_counter() - t0]


class Generator(pl.LightningModule):
    def __init__(self, image: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.image = image

    def training_step(self, batch, batch_idx):
        return (self.w - 1).pow(2).sum() + 0 * batch[0].sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(2, 1)), batch_size=2)

    def sample(self, n):
        return torch.randint(0, 256, (n, 3, self.image, self.image), dtype=torch.uint8)


def run(real, args, cache_dir):
    cb = Timed(
        real,
        feature_extractor=RandomConvNet(num_features=args.features, size=args.net_size),
        num_samples=args.fake,
        batch_size=512,
        cache_dir=cache_dir,
        log_curves=False,
        metric={"prd": False, "alpha_beta": False},
    )
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Generator(args.image))
    return cb.timings[0], cb.history[0]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--net-size", type=int, default=128)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--fake", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    g = torch.Generator().manual_seed(0)
    real = torch.randint(0, 256, (args.n, 3, args.image, args.image), dtype=torch.uint8, generator=g)
    rows = {"no cache": [], "cache": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as folder:
            run(real, args, None)
            rows["no cache"].append(run(real, args, None))
            run(real, args, folder)  # writes the cache
            rows["cache"].append(run(real, args, folder))
    plain, cached = rows["no cache"][0][1], rows["cache"][0][1]
    same = all(plain[k] == cached[k] for k in plain)
    print(
        f"{args.n:,} real images 3x{args.image}x{args.image}, RandomConvNet at {args.net_size}, "
        f"{args.fake:,} generated, {args.repeats} repeats; scores equal with and without the cache: {same}"
    )
    print("| second run, first evaluation | median s | all s |")
    print("|---|---|---|")
    for name, values in rows.items():
        times = [t for t, _ in values]
        print(f"| {name} | {statistics.median(times):.2f} | {', '.join(f'{t:.2f}' for t in times)} |")


if __name__ == "__main__":
    main()
