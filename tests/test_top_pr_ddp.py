"""TopP&R under DDP with 2 real gloo processes: the gathered result equals one process."""

import torch

from lightning_prd import GenerativeMetrics

from ddp_utils import run_ddp

KEYS = ("top_precision", "top_recall", "top_f1")
G = torch.Generator().manual_seed(8)
REAL = torch.randn(300, 40, generator=G)
FAKE = 1.2 * torch.randn(250, 40, generator=G) + 0.1
# (real rows, fake rows) of rank 0 and rank 1: uneven, and rank 1 holds most of the fakes
SPLIT = [((0, 170), (0, 50)), ((170, 300), (50, 250))]


def _metric():
    return GenerativeMetrics(top_pr=dict(num_bootstrap=20), prd=False, alpha_beta=False, block_bytes=40000)


def _rank_fn(rank, world):
    (r0, r1), (f0, f1) = SPLIT[rank]
    m = _metric()
    for s in range(r0, r1, 60):  # several batches per rank
        m.update(REAL[s : min(s + 60, r1)], real=True)
    m.update(FAKE[f0:f1], real=False)
    return {k: v.clone() for k, v in m.compute().items()}


def test_ddp_top_pr_equals_single_process():
    single = _metric()
    single.update(REAL, real=True)  # the gathered order: rank 0's samples, then rank 1's
    single.update(FAKE, real=False)
    want = single.compute()
    assert 0 < float(want["top_precision"]) < 1  # an informative case
    for out in run_ddp(_rank_fn):
        for key in KEYS:
            assert torch.equal(out[key], want[key]), (key, out[key], want[key])
        assert torch.equal(out["precision"], want["precision"])
