"""A small GAN on a ring of 8 Gaussians, watched by ``PRDCallback``.

The ring of 8 Gaussians is the classic mode-collapse testbed: a generator that produces only
some of the modes still makes perfectly plausible points, so a single distance (FID) mixes
up "bad samples" and "missing modes". Precision/density measure the first, recall/coverage
the second. This script:

1. trains an MLP GAN (manual optimization, non-saturating loss with an R1 penalty) on CPU,
   with ``PRDCallback`` computing precision, recall, density, coverage and Fréchet distance
   every epoch, logged to TensorBoard and printed as a table;
2. scores the trained generator next to a deliberately collapsed sampler (2 of the 8 modes),
   an untrained generator, and a second sample of the real data (the ceiling);
3. sweeps the latent scale ("truncation"): narrow latent codes give typical samples (precision
   up) from fewer modes (recall down), wide ones reach further but off the ring.

Each run logs to ``<logdir>/<name>`` (default ``runs/gan_ring/seed0_epochs50``), so runs with
other settings sit side by side. Run::

    python examples/gan_ring.py                 # logs to runs/gan_ring/seed0_epochs50
    python examples/gan_ring.py --seed 1        # logs to runs/gan_ring/seed1_epochs50
    python examples/gan_ring.py --fast          # a few seconds (smoke test)
    lightning-prd runs runs/gan_ring --plot runs.png   # the runs side by side
    tensorboard --logdir runs                   # then open http://localhost:6006
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from typing import Dict, List, Optional

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import TensorBoardLogger
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback
from lightning_prd.metrics.generative import GenerativeMetrics
from lightning_prd.sweep import plot_sweep, sweep_knob

MODES, RADIUS, STD = 8, 2.0, 0.05
SCORES = ("precision", "recall", "density", "coverage", "frechet_distance")
EPOCH_COLUMNS = ("precision", "recall", "density", "coverage", "f_inv_beta", "f_beta", "frechet_distance")
SCALES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


def ring(n: int, *, seed: int, modes: Optional[List[int]] = None) -> Tensor:
    """``n`` points from the ring of 8 Gaussians (radius 2, std 0.05); ``modes`` keeps only those modes."""
    g = torch.Generator().manual_seed(seed)
    allowed = torch.tensor(modes if modes is not None else list(range(MODES)))
    which = allowed[torch.randint(len(allowed), (n,), generator=g)]
    angle = which.double() * (2 * math.pi / MODES)
    centres = RADIUS * torch.stack([angle.cos(), angle.sin()], dim=1)
    return (centres + STD * torch.randn(n, 2, generator=g, dtype=torch.float64)).float()


def mlp(inp: int, out: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inp, hidden),
        nn.LeakyReLU(0.2),
        nn.Linear(hidden, hidden),
        nn.LeakyReLU(0.2),
        nn.Linear(hidden, hidden),
        nn.LeakyReLU(0.2),
        nn.Linear(hidden, out),
    )


class RingGAN(pl.LightningModule):
    """MLP generator and discriminator trained with manual optimization.

    ``sample(n, latent_scale)`` draws ``z ~ latent_scale * N(0, I)``: the truncation-style knob.
    """

    def __init__(self, latent_dim: int = 8, hidden: int = 128, lr: float = 1e-4, r1: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.generator = mlp(latent_dim, 2, hidden)
        self.discriminator = mlp(2, 1, hidden)

    def sample(self, n: int, latent_scale: float = 1.0) -> Tensor:
        z = latent_scale * torch.randn(n, self.hparams.latent_dim, device=self.device)
        return self.generator(z)

    def training_step(self, batch: List[Tensor], batch_idx: int) -> None:
        opt_g, opt_d = self.optimizers()
        real = batch[0].requires_grad_(True)
        # discriminator: non-saturating loss + R1 penalty on real points
        fake = self.sample(real.shape[0]).detach()
        d_real = self.discriminator(real)
        grad = torch.autograd.grad(d_real.sum(), real, create_graph=True)[0]
        d_loss = nn.functional.softplus(-d_real).mean() + nn.functional.softplus(self.discriminator(fake)).mean()
        d_loss = d_loss + 0.5 * self.hparams.r1 * grad.pow(2).sum(1).mean()
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        # generator
        g_loss = nn.functional.softplus(-self.discriminator(self.sample(real.shape[0]))).mean()
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()
        self.log_dict({"loss/d": d_loss.detach(), "loss/g": g_loss.detach()}, on_step=False, on_epoch=True)

    def configure_optimizers(self):
        betas = (0.5, 0.99)
        return (
            torch.optim.Adam(self.generator.parameters(), lr=self.hparams.lr, betas=betas),
            torch.optim.Adam(self.discriminator.parameters(), lr=self.hparams.lr, betas=betas),
        )


class ScoreTable(pl.Callback):
    """Prints one row per evaluation of the ``PRDCallback`` that precedes it in ``callbacks``."""

    def __init__(self, prd: PRDCallback) -> None:
        self.prd = prd
        self.printed = 0

    def _print(self, trainer: pl.Trainer) -> None:
        cols = [c for c in EPOCH_COLUMNS if any(c in row for row in self.prd.history)]
        if self.printed == 0 and self.prd.history:
            print(f"{'epoch':>5} " + " ".join(f"{c:>9}" for c in cols) + f" {'loss/d':>8} {'loss/g':>8}")
        for row in self.prd.history[self.printed :]:
            losses = [float(trainer.callback_metrics.get(k, float("nan"))) for k in ("loss/d", "loss/g")]
            print(
                f"{row['epoch']:>5} "
                + " ".join(f"{row.get(c, float('nan')):>{max(len(c), 9)}.4f}" for c in cols)
                + f" {losses[0]:>8.3f} {losses[1]:>8.3f}",
                flush=True,
            )
        self.printed = len(self.prd.history)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._print(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._print(trainer)
        if self.printed:
            print(EPOCH_LEGEND)


EPOCH_LEGEND = """\
  precision, density: fidelity (share of samples near real data; density: 1 is ideal, above 1 piles into dense
  regions); recall, coverage: diversity (share of real data the samples reach); f_inv_beta = F_1/8 and
  f_beta = F_8 of the PRD curve (precision- and recall-weighted); frechet_distance: the FID formula on these
  2-D points (lower is better); loss/d, loss/g: the discriminator's and generator's mean training losses"""


def frechet_blind_spot(history: List[Dict[str, float]], gap: float = 0.2) -> str:
    """One line on where the Fréchet distance and precision disagree, computed from ``history``.

    First choice: epochs ``a`` and ``b`` with a lower Fréchet distance at ``a`` but precision lower
    by at least ``gap`` at ``a`` (the pair with the largest precision difference): the Fréchet
    distance ranks ``a`` better although fewer of its samples lie near real data. Otherwise, the
    epoch with the run's lowest Fréchet distance when its precision is below 0.5 (most of its
    samples outside every real k-NN ball). Otherwise a line saying neither happened.
    """
    rows = [h for h in history if "frechet_distance" in h and "precision" in h]
    if not rows:
        return ""
    pairs = [
        (b["precision"] - a["precision"], a, b)
        for a in rows
        for b in rows
        if a["frechet_distance"] < b["frechet_distance"] and b["precision"] - a["precision"] >= gap
    ]
    if pairs:
        _, a, b = max(pairs, key=lambda t: t[0])
        return (
            f"  Fréchet blind spot: epoch {a['epoch']} has a lower Fréchet distance than epoch {b['epoch']} "
            f"({a['frechet_distance']:.4f} vs {b['frechet_distance']:.4f}) but precision {a['precision']:.3f} vs "
            f"{b['precision']:.3f}:\n  FID ranks epoch {a['epoch']} better although fewer of its samples lie "
            "near real data"
        )
    low = min(rows, key=lambda h: h["frechet_distance"])
    first = rows[0]
    if low["precision"] < 0.5 and low is not first:
        return (
            f"  Fréchet blind spot: the run's lowest Fréchet distance, {low['frechet_distance']:.4f} at epoch "
            f"{low['epoch']} (epoch {first['epoch']}: {first['frechet_distance']:.4f}), comes with precision "
            f"{low['precision']:.3f}:\n  most of that epoch's samples lie outside every real sample's k-NN ball"
        )
    return (
        f"  no epoch had a lower Fréchet distance than another and a precision lower by {gap} or more, "
        "and the lowest Fréchet distance came with precision 0.5 or more"
    )


def knob_conclusions(trade: Dict[str, Dict[str, float]], scales=SCALES, base: float = 1.0) -> List[str]:
    """What the sweep's printed values show: the best value of each score, and how both move from ``base``."""

    def at(s: float, k: str) -> float:
        return trade[f"latent scale {s:g}"][k]

    def best(k: str) -> str:
        top = max(at(s, k) for s in scales)
        winners = [f"{s:g}" for s in scales if at(s, k) == top]
        return f"highest {k} at scale{'s' if len(winners) > 1 else ''} {', '.join(winners)} ({top:.3f})"

    lines = [f"  -> {best('precision')}, {best('recall')}"]
    for end in (min(scales), max(scales)):
        moves = {
            k: "rises" if at(end, k) > at(base, k) else "falls" if at(end, k) < at(base, k) else "stays"
            for k in ("precision", "recall")
        }
        if moves["precision"] == moves["recall"]:
            verdict = f"both {moves['precision'][:-1]}"
        elif "stays" in moves.values():
            verdict = f"precision {moves['precision']}, recall {moves['recall']}"
        else:
            rises = moves["precision"] == "rises"
            verdict = "precision bought with recall" if rises else "recall bought with precision"
        p0, p1, r0, r1 = at(base, "precision"), at(end, "precision"), at(base, "recall"), at(end, "recall")
        lines.append(
            f"     scale {base:g} -> {end:g}: precision {p0:.3f} -> {p1:.3f}, recall {r0:.3f} -> {r1:.3f}: {verdict}"
        )
    return lines


def scatter_figure(sets: Dict[str, Tensor]):
    """One scatter plot per named point set (matplotlib's object API, no pyplot state)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3.2 * len(sets), 3.2), layout="constrained")
    for ax, (name, pts) in zip(fig.subplots(1, len(sets), squeeze=False)[0], sets.items()):
        pts = pts.detach().cpu()
        ax.scatter(pts[:, 0], pts[:, 1], s=2, alpha=0.5)
        ax.set(title=name, xlim=(-3, 3), ylim=(-3, 3), aspect="equal")
    return fig


def score(real: Tensor, fake: Tensor) -> Dict[str, float]:
    """All scalar scores of ``GenerativeMetrics`` for one pair of sets."""
    metric = GenerativeMetrics()
    metric.update(real, real=True)
    metric.update(fake, real=False)
    return {k: float(v) for k, v in metric.compute().items() if v.ndim == 0}


def print_table(title: str, rows: Dict[str, Dict[str, float]], keys: Optional[List[str]] = None) -> None:
    """Rows of scores under named columns: ``keys``, or every score (the main five first)."""
    if keys is None:
        keys = [k for k in SCORES if any(k in r for r in rows.values())]
        keys += sorted({k for r in rows.values() for k in r} - set(keys))
    width = max(len(name) for name in rows) + 2
    cols = [max(len(k), 7) + 2 for k in keys]
    print(f"\n{title}")
    print(f"{'':<{width}}" + "".join(f"{k:>{c}}" for k, c in zip(keys, cols)))
    for name, r in rows.items():
        print(f"{name:<{width}}" + "".join(f"{r.get(k, float('nan')):>{c}.4f}" for k, c in zip(keys, cols)))


def run_name(logdir: str, given: Optional[str], default: str) -> str:
    """The run's name below ``logdir``: ``given`` (refused when it already holds a run), else ``default``
    with a suffix ``-2``, ``-3``, ... when that one is taken."""

    def taken(n: str) -> bool:
        path = os.path.join(logdir, n)
        return os.path.isdir(path) and bool(os.listdir(path))

    if given is not None:
        if not given.strip("/ ") or given.startswith("/") or ".." in given.split("/"):
            raise ValueError(
                f"Expected argument `--name` to be a relative path like gan_ring/baseline, but got {given!r}"
            )
        if taken(given):
            raise ValueError(
                f"Expected argument `--name` to name a new run, but {os.path.join(logdir, given)} "
                "already holds one (choose another --name or delete it)"
            )
        return given.strip("/")
    candidate, i = default, 1
    while taken(candidate):
        i += 1
        candidate = f"{default}-{i}"
    return candidate


def main(argv: Optional[List[str]] = None) -> Dict[str, Dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=50, help="training epochs (default 50)")
    parser.add_argument("--fast", action="store_true", help="a few seconds: 2 short epochs, small sample sets")
    parser.add_argument("--logdir", default="runs", help="TensorBoard root directory (default: runs)")
    parser.add_argument("--seed", type=int, default=0, help="seed of everything (default 0)")
    parser.add_argument(
        "--name",
        help="the run's directory below --logdir, e.g. gan_ring/baseline (default: "
        "gan_ring/seed<S>_epochs<E>, with _fast for --fast; a suffix -2, -3, ... when taken)",
    )
    args = parser.parse_args(argv)
    if args.epochs < 1:
        raise ValueError(f"Expected argument `--epochs` to be a positive integer, but got {args.epochs}")

    epochs = 2 if args.fast else args.epochs
    name = run_name(args.logdir, args.name, f"gan_ring/seed{args.seed}_epochs{epochs}" + ("_fast" if args.fast else ""))
    steps, n_eval = (20, 512) if args.fast else (100, 2048)
    torch.set_num_threads(1)  # tiny MLPs: one thread is fastest and avoids contention
    pl.seed_everything(args.seed, verbose=False)
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    warnings.filterwarnings("ignore", ".*LeafSpec.*")

    train = DataLoader(
        TensorDataset(ring(steps * 256, seed=args.seed + 1)),
        batch_size=256,
        shuffle=True,
        generator=torch.Generator().manual_seed(args.seed),
    )
    real_eval = ring(n_eval, seed=args.seed + 2)  # held-out real set for every evaluation
    model = RingGAN()
    prd = PRDCallback(real_eval, num_samples=n_eval, seed=args.seed, verbose=False)  # the table below prints more
    parent, _, version = name.rpartition("/")
    logger = TensorBoardLogger(args.logdir, name=parent, version=version, default_hp_metric=False)
    trainer = pl.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=logger,
        callbacks=[prd, ScoreTable(prd)],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
        log_every_n_steps=10,
    )
    start = time.time()
    print(f"Training a GAN on a ring of {MODES} Gaussians for {epochs} epochs of {steps} steps (CPU)\n")
    trainer.fit(model, train)
    print(frechet_blind_spot(prd.history))
    print(f"\ntrained in {time.time() - start:.1f} s")

    # --- the trained GAN next to a collapsed sampler, an untrained one, and real data ---------
    real_test = ring(n_eval, seed=args.seed + 3)
    model.eval()
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(args.seed + 4)
        rows = {
            "trained GAN": score(real_test, model.sample(n_eval)),
            "collapsed (2 of 8 modes)": score(real_test, ring(n_eval, seed=args.seed + 5, modes=[0, 1])),
            "untrained GAN": score(real_test, RingGAN().sample(n_eval)),
            "real data (2nd sample)": score(real_test, ring(n_eval, seed=args.seed + 6)),
        }
        print_table("Scores on a fresh real sample (precision/density: fidelity; recall/coverage: diversity)", rows)
        # the knob sweep: one real side, the same noise for every value
        sweep = sweep_knob(
            lambda s, n: model.sample(n, latent_scale=s), real_test, SCALES, num_samples=n_eval, seed=args.seed + 4
        )
        trade = {f"latent scale {r['value']:g}": {k: v for k, v in r.items() if k != "value"} for r in sweep.rows()}
        logger.experiment.add_figure(
            "samples/latent_scale_sweep", plot_sweep(sweep, knob="scale "), global_step=epochs - 1
        )
        logger.experiment.add_figure(
            "samples/ring",
            scatter_figure(
                {
                    "real": real_test,
                    "trained GAN": model.sample(n_eval),
                    "collapsed": ring(n_eval, seed=args.seed + 5, modes=[0, 1]),
                }
            ),
            global_step=epochs - 1,
        )
        logger.experiment.flush()
    gan, bad = rows["trained GAN"], rows["collapsed (2 of 8 modes)"]
    print(
        "\ncollapsed vs trained GAN: precision {:.2f} vs {:.2f}, recall {:.2f} vs {:.2f}, "
        "coverage {:.2f} vs {:.2f}".format(
            bad["precision"], gan["precision"], bad["recall"], gan["recall"], bad["coverage"], gan["coverage"]
        )
    )
    word = {k: "higher" if bad[k] > gan[k] else "lower" if bad[k] < gan[k] else "the same" for k in gan}
    print(
        f"  -> the collapsed sampler (2 of 8 modes by construction) scores {word['precision']} precision, "
        f"{word['recall']} recall and {word['coverage']} coverage than the trained GAN"
    )
    print_table(
        "Truncation-style knob: sample(n, latent_scale=s) draws z ~ s * N(0, I)",
        trade,
        keys=[k for k in ("precision", "recall", "density", "coverage", "f_inv_beta", "f_beta") if k in gan],
    )
    print("\n".join(knob_conclusions(trade)))
    if args.fast:
        print("\n(--fast: the GAN is barely trained; run without --fast for meaningful scores)")

    log_dir = logger.log_dir
    print(f"\nTensorBoard logs: {log_dir}")
    tabs = "Scalars, Custom Scalars, HParams, Images" + (", PR Curves" if "prd_precision" in prd.last_result else "")
    print(f"Open them with:   tensorboard --logdir {args.logdir}   (then http://localhost:6006: {tabs})")
    print(f"Compare runs:     lightning-prd runs {os.path.join(args.logdir, parent) if parent else args.logdir}")
    return {**rows, **trade}


if __name__ == "__main__":
    main()
