"""Metrics under DDP with 2 real gloo processes: uneven shards, idle ranks, repeated compute."""

import pytest
import torch

from lightning_prd import DensityCoverage, GenerativeMetrics, PrecisionRecall

from ddp_utils import run_ddp

BLOCK = 12000  # small tiles: each rank gets several, so the split of the work is exercised
G = torch.Generator().manual_seed(5)
REAL = torch.randn(90, 5, generator=G)
FAKE = 1.1 * torch.randn(70, 5, generator=G)

# (real rows, fake rows) held by rank 0 and rank 1
SPLITS = {
    "uneven": [((0, 61), (0, 12)), ((61, 90), (12, 70))],
    "rank1_no_fake": [((0, 40), (0, 70)), ((40, 90), (70, 70))],
    "rank1_idle": [((0, 90), (0, 70)), ((90, 90), (70, 70))],
    "rank0_no_real": [((0, 0), (0, 30)), ((0, 90), (30, 70))],
}


def _scores(metric):
    return {k: v.clone() for k, v in metric.compute().items()}


def _rank_fn(rank, world, split, reset_real):
    (r0, r1), (f0, f1) = SPLITS[split][rank]
    m = GenerativeMetrics(preset="training", realism=True, reset_real_features=reset_real, block_bytes=BLOCK)
    for s in range(r0, r1, 13):  # several batches per rank
        m.update(REAL[s : min(s + 13, r1)], real=True)
    if f1 > f0:
        m.update(FAKE[f0:f1], real=False)
    first = _scores(m)
    again = _scores(m)  # computed twice in an epoch
    m.reset()
    if f1 > f0:
        m.update(FAKE[f0:f1] * 0.5, real=False)
    if reset_real:
        for s in range(r0, r1, 13):
            m.update(REAL[s : min(s + 13, r1)], real=True)
    second = _scores(m)
    return first, again, second


def _all_cases(rank, world):
    return {(split, reset): _rank_fn(rank, world, split, reset) for split in SPLITS for reset in (True, False)}


@pytest.fixture(scope="module", params=["1", "0"], ids=["bf16-screen", "float32-tiles"])
def ddp_results(request):
    """One 2-process run covers every case (process start-up dominates the cost), with the
    bfloat16 screen of the tiles on and off (the single-process reference too)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIGHTNING_PRD_SCREEN", request.param)
        yield run_ddp(_all_cases)


def _single():
    m = GenerativeMetrics(preset="training", realism=True, block_bytes=BLOCK)
    m.update(REAL, real=True)
    m.update(FAKE, real=False)
    first = _scores(m)
    m.reset()
    m.update(REAL, real=True)
    m.update(FAKE * 0.5, real=False)
    return first, _scores(m)


@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("reset_real", [True, False])
def test_ddp_equals_single_process(split, reset_real, ddp_results):
    ref_first, ref_second = _single()
    for per_rank in ddp_results:
        first, again, second = per_rank[(split, reset_real)]
        for name in (
            "precision",
            "recall",
            "density",
            "coverage",
            "alpha_precision",
            "beta_recall",
            "authenticity",
            "f_beta",
            "f_inv_beta",
        ):
            assert float(first[name]) == float(ref_first[name]), (split, name)
            assert float(again[name]) == float(ref_first[name])
            assert float(second[name]) == float(ref_second[name]), (split, name)
        assert float(first["frechet_distance"]) == pytest.approx(float(ref_first["frechet_distance"]), rel=1e-9)
        # realism is per generated sample, in gathered order: compare as multisets
        torch.testing.assert_close(first["realism"].sort().values, ref_first["realism"].sort().values)


def _width_mismatch(rank, world):
    m = PrecisionRecall()
    m.update(torch.randn(10, 3 + rank), real=True)
    m.update(torch.randn(10, 3 + rank), real=False)
    try:
        m.compute()
    except ValueError as err:
        return str(err)
    return "no error"


def test_ddp_width_mismatch_is_a_clear_error():
    for msg in run_ddp(_width_mismatch):
        assert "one width" in msg


def _count_tiles(rank, world, split_work):
    from lightning_prd.functional.knn import shard as _shard

    owned = []
    orig = _shard.Shard.owns
    _shard.Shard.owns = lambda self, c: owned.append(c) or orig(self, c)
    m = GenerativeMetrics(preset="training", block_bytes=BLOCK, split_work=split_work)
    m.update(REAL[rank::2], real=True)
    m.update(FAKE[rank::2], real=False)
    out = {k: float(v) for k, v in m.compute().items() if v.ndim == 0}
    _shard.Shard.owns = orig
    return out, sum(orig(_shard.Shard(rank, world), c) for c in owned), len(owned)


def test_distance_work_is_split_across_ranks():
    split = run_ddp(_count_tiles, True)
    (out0, mine0, seen0), (out1, mine1, seen1) = split
    assert out0 == out1
    assert seen0 == seen1 and mine0 + mine1 == seen0  # every tile computed exactly once
    assert abs(mine0 - mine1) <= 3  # and shared out evenly (3 passes, round-robin)
    unsplit = run_ddp(_count_tiles, False)
    assert unsplit[0][2] == 0 and unsplit[0][0] == out0  # no sharding, same scores


def _empty_batch(rank, world):
    m = PrecisionRecall()
    m.update(REAL[rank::2], real=True)
    m.update(FAKE[:40] if rank == 0 else FAKE[:0], real=False)  # rank 1: one empty [0, D] batch
    return {k: float(v) for k, v in m.compute().items()}


def test_ddp_rank_with_only_an_empty_batch():
    ref = PrecisionRecall()
    ref.update(torch.cat([REAL[0::2], REAL[1::2]]), real=True)
    ref.update(FAKE[:40], real=False)
    expected = {k: float(v) for k, v in ref.compute().items()}
    assert run_ddp(_empty_batch) == [expected, expected]


def _empty_batch_of_another_width(rank, world):
    m = PrecisionRecall()
    # rank 1's only real batch is empty and of another width: it holds no rows, so no width
    m.update(REAL if rank == 0 else torch.empty(0, REAL.shape[1] + 3), real=True)
    m.update(FAKE[rank * 20 : rank * 20 + 20], real=False)
    return {k: float(v) for k, v in m.compute().items()}


def test_ddp_empty_batch_of_another_width_does_not_count():
    ref = PrecisionRecall()
    ref.update(REAL, real=True)
    ref.update(FAKE[:40], real=False)
    expected = {k: float(v) for k, v in ref.compute().items()}
    assert run_ddp(_empty_batch_of_another_width) == [expected, expected]


def _collection_forward_and_explicit_sync(rank, world):
    """A MetricCollection (shared feature states: one compute group) fed through ``forward``;
    then an explicit ``sync()`` / ``unsync()`` around a compute, and a second epoch."""
    from torchmetrics import MetricCollection

    coll = MetricCollection([PrecisionRecall(), DensityCoverage()])
    for s in range(rank * 7, 90, 14):  # uneven, interleaved batches
        assert coll(REAL[s : s + 7], real=True) == {"PrecisionRecall": None, "DensityCoverage": None}
    coll(FAKE[rank::2], real=False)
    first = {k: float(v) for k, v in coll.compute().items()}
    again = {k: float(v) for k, v in coll.compute().items()}  # cached: no second gather

    single = PrecisionRecall()
    for s in range(rank * 7, 90, 14):
        single.update(REAL[s : s + 7], real=True)
    single.update(FAKE[rank::2], real=False)
    single.sync()  # synced by hand (e.g. to inspect the gathered features) ...
    rows = (
        single.real_features.shape[0]
        if torch.is_tensor(single.real_features)
        else sum(t.shape[0] for t in single.real_features)
    )
    single.unsync()  # ... and back: compute syncs again, once
    synced = {k: float(v) for k, v in single.compute().items()}
    return first, again, synced, rows


def test_ddp_collection_forward_and_repeated_sync():
    ref = {}
    for m in (PrecisionRecall(), DensityCoverage()):
        m.update(REAL, real=True)
        m.update(FAKE, real=False)
        ref.update({k: float(v) for k, v in m.compute().items()})
    for first, again, synced, rows in run_ddp(_collection_forward_and_explicit_sync):
        assert first == again == ref
        assert synced == {k: ref[k] for k in ("precision", "recall")}
        assert rows == REAL.shape[0]  # the hand-made sync held every rank's rows
