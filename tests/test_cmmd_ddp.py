"""CMMD under DDP, 2 real gloo processes: the kernel sums of the sharded tiles, all-reduced,
equal the single-process value (uneven shards, the real side's cached sum, the bfloat16 screen
forced on: the kernel passes run float32 tiles on every rank)."""

import pytest
import torch
from test_cmmd import oracle, unit_rows

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import cmmd

from ddp_utils import run_ddp

BLOCK = 12000  # small tiles: each rank computes several of each pass
G = torch.Generator().manual_seed(11)
REAL = unit_rows(97, 6, G)
FAKE = unit_rows(71, 6, G, shift=0.8)
OPTIONS = dict(sigma=0.7, scale=10.0)


def _rank_fn(rank, world, unbiased):
    rows_real = slice(0, 60) if rank == 0 else slice(60, 97)
    rows_fake = slice(0, 11) if rank == 0 else slice(11, 71)
    m = GenerativeMetrics(
        cmmd=dict(OPTIONS, unbiased=unbiased), prd=False, alpha_beta=False, reset_real_features=False, block_bytes=BLOCK
    )
    m.update(REAL[rows_real], real=True)
    m.update(FAKE[rows_fake], real=False)
    first = {k: v.clone() for k, v in m.compute().items()}
    m.reset()  # the real side (and its kernel sum) is kept
    m.update(FAKE[rows_fake] * 0.9, real=False)
    second = {k: v.clone() for k, v in m.compute().items()}
    return first, second, list(m._real_cache.kernel_sums)


def _cases(rank, world):
    return {unbiased: _rank_fn(rank, world, unbiased) for unbiased in (False, True)}


@pytest.fixture(scope="module")
def ddp_results():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIGHTNING_PRD_SCREEN", "1")
        yield run_ddp(_cases)


@pytest.mark.parametrize("unbiased", [False, True])
def test_ddp_cmmd_equals_single_process(unbiased, ddp_results, monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")
    single = GenerativeMetrics(cmmd=dict(OPTIONS, unbiased=unbiased), prd=False, alpha_beta=False, block_bytes=BLOCK)
    single.update(REAL, real=True)
    single.update(FAKE, real=False)
    ref = single.compute()
    want_second = float(cmmd(REAL, FAKE * 0.9, **OPTIONS, unbiased=unbiased))
    per_rank = [results[unbiased] for results in ddp_results]
    for first, second, gammas in per_rank:
        # the ranks compute the single-process tiles and the tile sums are added correctly rounded
        assert float(first["cmmd"]) == float(ref["cmmd"])
        assert float(first["cmmd"]) == pytest.approx(oracle(REAL, FAKE, **OPTIONS, unbiased=unbiased), rel=1e-6)
        assert float(second["cmmd"]) == pytest.approx(want_second, rel=1e-7)
        assert gammas == [1 / (2 * 0.7**2)]
        for name in ("precision", "recall", "density", "coverage"):  # the k-NN scores of the same pass
            assert float(first[name]) == float(ref[name]), name
    assert float(per_rank[0][0]["cmmd"]) == float(per_rank[1][0]["cmmd"])  # the same on every rank
