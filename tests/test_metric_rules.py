"""Rules of the Metric classes that hold inside collections and across processes.

* ``reset_real_features`` is honoured per metric inside a ``MetricCollection``, with compute groups
  (the default) or without, whichever member leads the group.
* Summed scores (CMMD's kernel sums) under 2-process gloo DDP equal one process bit for bit, like the
  k-NN scores.
"""

import pytest
import torch
from torchmetrics import MetricCollection

from lightning_prd import DensityCoverage, GenerativeMetrics, PrecisionRecall
from lightning_prd.functional import cmmd, density_coverage, precision_recall

from ddp_utils import run_ddp

G = torch.Generator().manual_seed(5)
REAL = torch.randn(120, 6, generator=G)
FAKE = torch.randn(90, 6, generator=G) + 0.2
FAKE2 = torch.randn(80, 6, generator=G) * 1.3


@pytest.mark.parametrize("keeper_first", [True, False])
@pytest.mark.parametrize("compute_groups", [True, False])
def test_reset_real_features_is_kept_per_metric_in_a_collection(keeper_first, compute_groups):
    keep, fresh = PrecisionRecall(k=3, reset_real_features=False), DensityCoverage(k=5)
    members = {"keep": keep, "fresh": fresh} if keeper_first else {"fresh": fresh, "keep": keep}
    coll = MetricCollection(members, compute_groups=compute_groups)
    coll.update(REAL, real=True)
    coll.update(FAKE, real=False)
    first = coll.compute()
    want_p, want_r = precision_recall(REAL, FAKE, k=3)
    want_d, want_c = density_coverage(REAL, FAKE, k=5)
    assert (float(first["precision"]), float(first["recall"])) == (float(want_p), float(want_r))
    assert (float(first["density"]), float(first["coverage"])) == (float(want_d), float(want_c))

    coll.reset()
    coll.update(FAKE2, real=False)  # a new generated set; only `keep` still holds the real one
    out = keep.compute()
    p2, r2 = precision_recall(REAL, FAKE2, k=3)
    assert (float(out["precision"]), float(out["recall"])) == (float(p2), float(r2))
    with pytest.raises(ValueError, match="No real features accumulated"):
        fresh.compute()  # it was reset: no real set

    coll.reset()  # and the fresh member, given a real set again, sees only that one
    coll.update(REAL[:60], real=True)
    coll.update(FAKE2, real=False)
    d3, c3 = density_coverage(REAL[:60], FAKE2, k=5)
    assert (float(fresh.compute()["density"]), float(fresh.compute()["coverage"])) == (float(d3), float(c3))


def test_keepers_still_share_a_compute_group():
    """Members with the same policy keep sharing one copy of the features."""
    a, b = PrecisionRecall(reset_real_features=False), DensityCoverage(reset_real_features=False)
    coll = MetricCollection({"a": a, "b": b})
    coll.update(REAL, real=True)
    coll.update(FAKE, real=False)
    coll.compute()
    assert len(coll.compute_groups) == 1


BLOCK = 12000  # small tiles: each rank computes several of each pass
UNIT = torch.nn.functional.normalize(torch.randn(97, 6, generator=G), dim=1)
UNIT_FAKE = torch.nn.functional.normalize(torch.randn(71, 6, generator=G) + 0.8, dim=1)
OPTIONS = dict(sigma=0.7, scale=10.0)


def _cmmd_rank(rank, world):
    rows_real = slice(0, 60) if rank == 0 else slice(60, 97)
    rows_fake = slice(0, 11) if rank == 0 else slice(11, 71)
    out = {}
    for unbiased in (False, True):
        m = GenerativeMetrics(cmmd=dict(OPTIONS, unbiased=unbiased), prd=False, alpha_beta=False, block_bytes=BLOCK)
        m.update(UNIT[rows_real], real=True)
        m.update(UNIT_FAKE[rows_fake], real=False)
        out[unbiased] = float(m.compute()["cmmd"])
    return out


def test_cmmd_under_ddp_is_bit_identical_to_one_process():
    results = run_ddp(_cmmd_rank)
    for unbiased in (False, True):
        single = GenerativeMetrics(
            cmmd=dict(OPTIONS, unbiased=unbiased), prd=False, alpha_beta=False, block_bytes=BLOCK
        )
        single.update(UNIT, real=True)
        single.update(UNIT_FAKE, real=False)
        want = float(single.compute()["cmmd"])
        assert want == float(cmmd(UNIT, UNIT_FAKE, **OPTIONS, unbiased=unbiased, block_bytes=BLOCK))
        assert [r[unbiased] for r in results] == [want, want], unbiased
