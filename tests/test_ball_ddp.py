"""``GenerativeMetrics(ball="open")`` under DDP (2 gloo processes) equals one process and prdc.

Tied data (a partial copy of an integer-valued real set, with duplicates) split unevenly over
the ranks, small tiles so each rank computes several, with the bfloat16 screen on and off.
"""

from __future__ import annotations

import pytest
import torch
from test_ball import NAMES, counts, prdc_scores

from lightning_prd import GenerativeMetrics

from ddp_utils import run_ddp

BLOCK = 12000
G = torch.Generator().manual_seed(11)
REAL = torch.randint(-3, 4, (97, 4), generator=G).float()
FAKE = torch.cat([REAL[:40], REAL[:10], torch.randint(-3, 4, (23, 4), generator=G).float()])
#: (real rows, fake rows) of rank 0 and rank 1
SPLIT = [((0, 70), (0, 9)), ((70, 97), (9, 73))]
K = 3


def _metric():
    return GenerativeMetrics(K, K, prd=False, alpha_beta=True, frechet=False, ball="open", block_bytes=BLOCK)


def _rank_fn(rank, world):
    (r0, r1), (f0, f1) = SPLIT[rank]
    m = _metric()
    m.update(REAL[r0:r1], real=True)
    m.update(FAKE[f0:f1], real=False)
    return {k: v.clone() for k, v in m.compute().items()}


@pytest.mark.parametrize("screen", ["1", "0"], ids=["bf16-screen", "float32-tiles"])
def test_ddp_open_balls_equal_one_process_and_prdc(screen, monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", screen)
    single = _metric()
    single.update(REAL, real=True)
    single.update(FAKE, real=False)
    ref = single.compute()
    want = counts(prdc_scores(REAL.double().numpy(), FAKE.double().numpy(), K), len(REAL), len(FAKE), K)
    assert counts(ref, len(REAL), len(FAKE), K) == want
    assert float(ref["density"]) < float(_closed_density())  # the ties are on the radii
    for out in run_ddp(_rank_fn):
        for name in (*NAMES, "alpha_precision", "beta_recall", "authenticity"):
            assert float(out[name]) == float(ref[name]), name


def _closed_density():
    m = GenerativeMetrics(K, K, prd=False, alpha_beta=False, frechet=False, block_bytes=BLOCK)
    m.update(REAL, real=True)
    m.update(FAKE, real=False)
    return m.compute()["density"]
