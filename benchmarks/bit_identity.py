"""Save every score of a fixed set of calls to a file, or compare them bit for bit with a saved file.

An engine change must leave every score unchanged: run ``--save`` on the code before the change and
``--compare`` on the code after it (both on the same machine and tile path).

    python benchmarks/bit_identity.py --save /tmp/before.pt
    python benchmarks/bit_identity.py --compare /tmp/before.pt

The data sets: Gaussian features of three sizes, integer features full of exact ties, and a generated set
made of exact copies of real samples; each scored with the default call and with ``clipped``, ``symmetric``
and ``per_sample`` on, and by ``GenerativeMetrics(preset="training")`` (the callback's default metric, PRD on;
unequal sets truncated to the smaller, as PRD asks for equal sizes).
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict

import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import generative_metrics


def data_sets() -> Dict[str, tuple]:
    g = torch.Generator().manual_seed(0)
    real_copies = torch.randn(2000, 16, generator=g)
    return {
        "gauss_3000x2500x256": (torch.randn(3000, 256, generator=g), torch.randn(2500, 256, generator=g) + 0.1),
        "gauss_1500x1300x64": (torch.randn(1500, 64, generator=g), 1.2 * torch.randn(1300, 64, generator=g)),
        "gauss_40x37x5": (torch.randn(40, 5, generator=g), torch.randn(37, 5, generator=g)),
        "integer_ties": (
            torch.randint(0, 4, (600, 3), generator=g).float(),
            torch.randint(0, 4, (500, 3), generator=g).float(),
        ),
        "exact_copies": (real_copies, real_copies[torch.randperm(2000, generator=g)[:1500]].clone()),
    }


def scores() -> Dict[str, torch.Tensor]:
    out: Dict[str, torch.Tensor] = {}
    for name, (real, fake) in data_sets().items():
        for call, options in (("default", {}), ("joined", dict(clipped=True, symmetric=True, per_sample=True))):
            for key, value in generative_metrics(real, fake, **options).items():
                out[f"{name}/{call}/{key}"] = value.detach().clone()
        n = min(len(real), len(fake))
        metric = GenerativeMetrics(preset="training")
        metric.update(real[:n], real=True)
        metric.update(fake[:n], real=False)
        for key, value in metric.compute().items():
            out[f"{name}/training/{key}"] = value.detach().clone()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="FILE")
    group.add_argument("--compare", metavar="FILE")
    args = parser.parse_args()
    now = scores()
    if args.save:
        torch.save(now, args.save)
        print(f"saved {len(now)} tensors to {args.save}")
        return 0
    before = torch.load(args.compare, weights_only=True)
    missing = sorted(set(before) - set(now))
    differ = [k for k in before if k in now and not torch.equal(before[k], now[k])]
    new = len(set(now) - set(before))
    print(f"{len(before)} tensors compared: {len(differ)} differ, {len(missing)} missing, {new} new")
    for key in differ + missing:
        print("  ", key)
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main())
