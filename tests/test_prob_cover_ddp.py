"""Probabilistic P&R and PR-cover under DDP (2 gloo processes): the sharded pass equals one process."""

import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import probabilistic_precision_recall
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn.shard import Shard

from ddp_utils import run_ddp

BLOCK = 12000  # small tiles: each rank gets several
G = torch.Generator().manual_seed(7)
REAL = torch.randn(90, 5, generator=G)
FAKE = torch.cat([1.1 * torch.randn(60, 5, generator=G), REAL[:10]])  # with exact copies
KEYS = ("p_precision", "p_recall", "precision_cover", "recall_cover")
OPTS = dict(prd=False, alpha_beta=False, probabilistic=dict(k=3, a=1.3), pr_cover=dict(k=2), block_bytes=BLOCK)


def _rank_fn(rank, world):
    # the metric: uneven shards of both sets, features all-gathered, tiles split across ranks
    m = GenerativeMetrics(**OPTS)
    cut_r, cut_f = (0, 61) if rank == 0 else (61, 90), (0, 12) if rank == 0 else (12, 70)
    m.update(REAL[slice(*cut_r)], real=True)
    m.update(FAKE[slice(*cut_f)], real=False)
    metric = {k: v.clone() for k, v in m.compute().items() if k in KEYS}
    return metric, _per_sample(Shard(rank, world))  # the engine's sharded pass directly


def _per_sample(shard=None):
    """Per-sample soft probabilities (both variants) and PR-cover decisions of the engine's pass."""
    c = knn_pass(REAL, FAKE, cover=(2, 6), soft=(3, 1.3, False), block_bytes=BLOCK, shard=shard).cross
    near = knn_pass(REAL, FAKE, soft=(3, 1.5, True), block_bytes=BLOCK, shard=shard).cross
    return c.fake_soft, c.real_soft, c.fake_covered, c.real_covered, near.fake_soft, near.real_soft


@pytest.fixture(scope="module", params=["1", "0"], ids=["bf16-screen", "float32-tiles"])
def ddp_results(request):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIGHTNING_PRD_SCREEN", request.param)
        yield run_ddp(_rank_fn), request.param


def test_sharded_equals_single_process(ddp_results, monkeypatch):
    results, screen = ddp_results
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", screen)
    single = GenerativeMetrics(**OPTS)
    single.update(REAL, real=True)
    single.update(FAKE, real=False)
    want = single.compute()
    want_samples = _per_sample()
    for metric, samples in results:
        for key in KEYS:
            assert torch.equal(metric[key], want[key]), key
        for got, ref in zip(samples, want_samples):
            assert torch.equal(got, ref)
    pp = probabilistic_precision_recall(REAL, FAKE, k=3, a=1.3)[0]
    assert float(want["p_precision"]) == float(pp)
