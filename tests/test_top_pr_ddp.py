"""TopP&R under DDP with 2 real gloo processes: the gathered result equals one process."""

import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional.knn import kde

from ddp_utils import run_ddp

KEYS = ("top_precision", "top_recall", "top_f1")
G = torch.Generator().manual_seed(8)
REAL = torch.randn(300, 40, generator=G)
FAKE = 1.2 * torch.randn(250, 40, generator=G) + 0.1
# (real rows, fake rows) of rank 0 and rank 1: uneven, and rank 1 holds most of the fakes
SPLIT = [((0, 170), (0, 50)), ((170, 300), (50, 250))]


def _metric():
    return GenerativeMetrics(top_pr=dict(num_bootstrap=20), prd=False, alpha_beta=False, block_bytes=40000)


def _counting_tiles(rows):
    """``kde._tiles`` that adds the rows of every tile it yields to ``rows[0]``."""
    original = kde._tiles

    def counted(*args, **kwargs):
        for i0, j0, sq in original(*args, **kwargs):
            rows[0] += sq.shape[0] * sq.shape[1]
            yield i0, j0, sq

    return counted


def _tile_entries(fn):
    entries = [0]
    original, kde._tiles = kde._tiles, _counting_tiles(entries)
    try:
        out = fn()
    finally:
        kde._tiles = original
    return out, entries[0]


def _rank_fn(rank, world):
    (r0, r1), (f0, f1) = SPLIT[rank]
    m = _metric()
    for s in range(r0, r1, 60):  # several batches per rank
        m.update(REAL[s : min(s + 60, r1)], real=True)
    m.update(FAKE[f0:f1], real=False)
    out, entries = _tile_entries(m.compute)
    return {**{k: v.clone() for k, v in out.items()}, "tile_entries": entries}


def test_ddp_top_pr_equals_single_process():
    single = _metric()
    single.update(REAL, real=True)  # the gathered order: rank 0's samples, then rank 1's
    single.update(FAKE, real=False)
    want, entries = _tile_entries(single.compute)
    assert 0 < float(want["top_precision"]) < 1  # an informative case
    outs = run_ddp(_rank_fn)
    for out in outs:
        for key in KEYS:
            assert torch.equal(out[key], want[key]), (key, out[key], want[key])
        assert torch.equal(out["precision"], want["precision"])
    # the kernel-density tiles are split between the ranks, none computed twice
    assert sum(out["tile_entries"] for out in outs) == entries
    assert all(0 < out["tile_entries"] < entries for out in outs)
