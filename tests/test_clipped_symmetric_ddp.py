"""Clipped density/coverage and symmetric precision/recall under DDP (2 gloo processes, uneven
shards, tiles split across ranks, bfloat16 screen forced): equal to one process."""

import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import clipped_density_coverage, symmetric_precision_recall
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn.clipped import ClippedBalls
from lightning_prd.functional.knn.shard import Shard

from ddp_utils import run_ddp

BLOCK = 12000  # small tiles: each rank gets several
G = torch.Generator().manual_seed(11)
REAL = torch.randn(90, 5, generator=G)
FAKE = torch.cat([1.2 * torch.randn(60, 5, generator=G) + 0.2, REAL[:10]])  # with exact copies
KEYS = ("clipped_density", "clipped_coverage", "sym_precision", "sym_recall")
OPTS = dict(prd=False, alpha_beta=False, clipped=dict(k=4), symmetric=dict(k=3), block_bytes=BLOCK)


def _counts(shard=None):
    """The cross pass's clipped counts and the real neighbours behind the normaliser."""
    res = knn_pass(
        REAL,
        FAKE,
        member_ks=[4],
        real_ks=[1, 2, 3, 4, 5],
        clipped=ClippedBalls(4),
        block_bytes=BLOCK,
        shard=shard,
    )
    return res.cross.clipped.fake_count, res.cross.clipped.real_count, res.real.sq_radii[5]


def _rank_fn(rank, world):
    m = GenerativeMetrics(**OPTS)
    cut_r, cut_f = (0, 61) if rank == 0 else (61, 90), (0, 12) if rank == 0 else (12, 70)
    m.update(REAL[slice(*cut_r)], real=True)
    m.update(FAKE[slice(*cut_f)], real=False)
    return {k: v.clone() for k, v in m.compute().items() if k in KEYS}, _counts(Shard(rank, world))


def test_sharded_equals_single_process(monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")
    results = run_ddp(_rank_fn)
    single = GenerativeMetrics(**OPTS)
    single.update(REAL, real=True)
    single.update(FAKE, real=False)
    want = single.compute()
    want_counts = _counts()
    for metric, counts in results:
        for key in KEYS:
            assert torch.equal(metric[key], want[key]), key
        for got, ref in zip(counts, want_counts):
            assert torch.equal(got, ref)
    assert [float(want[k]) for k in KEYS[:2]] == [float(v) for v in clipped_density_coverage(REAL, FAKE, k=4)]
    assert [float(want[k]) for k in KEYS[2:]] == [float(v) for v in symmetric_precision_recall(REAL, FAKE, k=3)]
