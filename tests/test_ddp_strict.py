"""The Metric classes under NCCL's rules (enforced over gloo by ``strict_collectives``), with states kept on
the CPU (``compute_on_cpu=True``), and the kept real set gathered once."""

import threading

import pytest
import torch
import torch.distributed as dist
from test_ddp import BLOCK, FAKE, REAL, SPLITS, _single

from lightning_prd import DensityCoverage, GenerativeMetrics, PrecisionRecall

from ddp_utils import run_ddp

NAMES = ("precision", "recall", "density", "coverage", "alpha_precision", "beta_recall", "authenticity", "f_beta")


def _refusals(rank, world):
    """Each collective NCCL would refuse, issued under the wrapper: the error text of each (None if none)."""
    import strict_collectives

    from lightning_prd.functional.knn.collectives import to_group

    def attempt(fn):
        try:
            fn()
        except strict_collectives.StrictCollectiveError as err:
            return str(err)
        return None

    cpu_state = torch.ones(3)
    placed = to_group(torch.ones(3 + rank))  # another shape on each rank
    out = {
        "cpu tensor": attempt(lambda: dist.all_gather([torch.empty(3)] * world, cpu_state)),
        "shapes": attempt(lambda: dist.all_reduce(placed)),
        "op": attempt(lambda: dist.all_reduce(to_group(torch.ones(2)), op=dist.ReduceOp.PRODUCT)),
    }
    box = {}
    worker = threading.Thread(target=lambda: box.update(thread=attempt(lambda: dist.all_reduce(to_group(cpu_state)))))
    worker.start()
    worker.join()
    out.update(box)
    good = to_group(torch.full((2,), float(rank)))
    out["allowed"] = attempt(lambda: dist.all_reduce(good))  # placed, same shape, SUM, main thread
    out["sum"] = good.tolist()
    return out


def test_strict_wrapper_refuses_what_nccl_refuses():
    for got in run_ddp(_refusals, strict=True):
        assert "not placed on the group's device" in got["cpu tensor"]
        assert "different collectives or shapes" in got["shapes"]
        assert "only SUM, MIN and MAX" in got["op"]
        assert "not the main thread" in got["thread"]
        assert got["allowed"] is None and got["sum"] == [1.0, 1.0]


def _strict_cases(rank, world):
    out = {}
    for split in ("uneven", "rank1_idle"):
        for reset_real in (True, False):
            (r0, r1), (f0, f1) = SPLITS[split][rank]
            m = GenerativeMetrics(
                preset="training",
                realism=True,
                reset_real_features=reset_real,
                block_bytes=BLOCK,
                compute_on_cpu=True,
            )
            for s in range(r0, r1, 13):
                m.update(REAL[s : min(s + 13, r1)], real=True)
            if f1 > f0:
                m.update(FAKE[f0:f1], real=False)
            first = {k: v.clone() for k, v in m.compute().items()}
            m.reset()
            if f1 > f0:
                m.update(FAKE[f0:f1] * 0.5, real=False)
            if reset_real:
                for s in range(r0, r1, 13):
                    m.update(REAL[s : min(s + 13, r1)], real=True)
            second = {k: v.clone() for k, v in m.compute().items()}
            out[(split, reset_real)] = first, second
    return out


def test_ddp_under_nccl_rules_with_compute_on_cpu():
    ref_first, ref_second = _single()
    for per_rank in run_ddp(_strict_cases, strict=True):
        for case, (first, second) in per_rank.items():
            for name in NAMES:
                assert float(first[name]) == float(ref_first[name]), (case, name)
                assert float(second[name]) == float(ref_second[name]), (case, name)
            assert float(first["frechet_distance"]) == pytest.approx(float(ref_first["frechet_distance"]), rel=1e-9)


# per rank; wide, so that the k-NN lists merged across ranks are small beside the features
N_REAL, N_FAKE, WIDTH = 600, 100, 512


def _bytes_per_evaluation(rank, world, reset_real):
    import strict_collectives

    g = torch.Generator().manual_seed(rank)
    m = PrecisionRecall(reset_real_features=reset_real)
    real = torch.randn(N_REAL, WIDTH, generator=g)
    m.update(real, real=True)
    received, scores = [], []
    for evaluation in range(3):
        if evaluation and reset_real:
            m.update(real, real=True)
        m.update(torch.randn(N_FAKE, WIDTH, generator=g) + evaluation, real=False)
        strict_collectives.RECEIVED["all_gather"] = 0
        scores.append({k: float(v) for k, v in m.compute().items()})
        received.append(strict_collectives.RECEIVED["all_gather"])
        m.reset()
    m.update(torch.randn(N_REAL // 2, WIDTH, generator=g), real=True)  # the real set grows on every rank
    m.update(torch.randn(N_FAKE, WIDTH, generator=g), real=False)
    strict_collectives.RECEIVED["all_gather"] = 0
    scores.append({k: float(v) for k, v in m.compute().items()})
    received.append(strict_collectives.RECEIVED["all_gather"])
    return received, scores


def test_kept_real_set_is_gathered_once():
    fake_set = 2 * N_FAKE * WIDTH * 4  # the generated set of both ranks, float32
    real_set = 2 * N_REAL * WIDTH * 4
    kept = run_ddp(_bytes_per_evaluation, False, strict=True)
    reset = run_ddp(_bytes_per_evaluation, True, strict=True)
    for (got, scores), (got_reset, scores_reset) in zip(kept, reset):
        assert scores[:3] == scores_reset[:3]  # same sets, same scores
        assert got[0] >= real_set + fake_set  # the first evaluation gathers both sets
        assert got[1] <= 1.1 * fake_set and got[2] <= 1.1 * fake_set  # then only the generated set
        assert got_reset[1] >= real_set + fake_set  # (a metric that resets its real set gathers it again)
        assert got[3] >= 1.5 * real_set  # new real rows: the real set is gathered again
    assert kept[0][1] == kept[1][1]


def _collection_kept_real(rank, world):
    """A MetricCollection whose members keep the real set (one compute group: shared states)."""
    from torchmetrics import MetricCollection

    coll = MetricCollection([PrecisionRecall(reset_real_features=False), DensityCoverage(reset_real_features=False)])
    for s in range(rank * 7, 90, 14):
        coll.update(REAL[s : s + 7], real=True)
    out = []
    for scale in (1.0, 0.5, 2.0):
        coll.update(FAKE[rank::2] * scale, real=False)
        out.append({k: float(v) for k, v in coll.compute().items()})
        coll.reset()
    return out


def test_collection_keeping_its_real_set():
    expected = []
    for scale in (1.0, 0.5, 2.0):
        ref = {}
        for m in (PrecisionRecall(), DensityCoverage()):
            m.update(REAL, real=True)
            m.update(FAKE * scale, real=False)
            ref.update({k: float(v) for k, v in m.compute().items()})
        expected.append(ref)
    for got in run_ddp(_collection_kept_real, strict=True):
        assert got == expected
