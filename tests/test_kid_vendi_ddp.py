"""KID and the Vendi score under DDP (2 gloo processes): sharded features, gathered result equal to one process."""

import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import kid as kid_module

from ddp_utils import run_ddp

G = torch.Generator().manual_seed(9)
REAL = torch.randn(83, 5, generator=G)
FAKE = 0.7 * torch.randn(61, 5, generator=G) + 0.2
OPTS = dict(kid=dict(subsets=7, subset_size=40, seed=3), vendi=dict(q=2.0), prd=False, alpha_beta=False)
KEYS = ("kid", "kid_std", "vendi", "vendi_real")
# (real rows, fake rows) of rank 0 and rank 1: uneven, and one rank without generated samples
SPLITS = {
    "uneven": [((0, 50), (0, 9)), ((50, 83), (9, 61))],
    "rank1_no_fake": [((0, 30), (0, 61)), ((30, 83), (61, 61))],
}


def _two_epochs(metric, real_parts, fake_parts):
    """Scores of FAKE, then of FAKE / 2 after a reset (the real set re-sent only if it is not kept)."""
    results = []
    for scale in (1.0, 0.5):
        if scale == 1.0 or metric.reset_real_features:
            for r0, r1 in real_parts:
                metric.update(REAL[r0:r1], real=True)
        for f0, f1 in fake_parts:
            if f1 > f0:
                metric.update(FAKE[f0:f1] * scale, real=False)
        results.append({k: v.clone() for k, v in metric.compute().items() if k in KEYS})
        metric.reset()
    return results


def _counting_mmd2(calls):
    """``kid.poly_mmd2`` that counts its calls in ``calls`` (one per subset computed)."""
    original = kid_module.poly_mmd2

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    return counted


def _rank_fn(rank, world):
    out = {}
    calls = [0]
    kid_module.poly_mmd2 = _counting_mmd2(calls)  # a fresh process per rank: nothing to restore
    for split, parts in SPLITS.items():
        (r0, r1), (f0, f1) = parts[rank]
        for keep in (False, True):
            metric = GenerativeMetrics(reset_real_features=not keep, **OPTS)
            out[(split, keep)] = _two_epochs(metric, [(r0, r1)], [(f0, f1)])
    out["subsets_computed"] = calls[0]
    return out


@pytest.fixture(scope="module")
def ddp_results():
    return run_ddp(_rank_fn)


@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("keep_real", [False, True])
def test_ddp_equals_one_process(ddp_results, split, keep_real):
    single = _two_epochs(GenerativeMetrics(reset_real_features=not keep_real, **OPTS), [(0, 83)], [(0, 61)])
    for per_rank in ddp_results:
        for got, want in zip(per_rank[(split, keep_real)], single):
            assert set(got) == set(KEYS)
            for name in KEYS:
                # the gathered sets are the single-process sets in the same order: same subsets, same Gram
                assert float(got[name]) == pytest.approx(float(want[name]), rel=1e-12, abs=1e-15), name


def test_ddp_kid_subsets_are_split_between_ranks(ddp_results):
    # 8 computes per rank (2 splits x 2 settings x 2 epochs) of 7 subsets: rank 0 computes
    # subsets 0, 2, 4, 6 and rank 1 subsets 1, 3, 5 (one process would compute all 7 each time)
    computes = 2 * len(SPLITS) * 2
    assert [r["subsets_computed"] for r in ddp_results] == [computes * 4, computes * 3]
