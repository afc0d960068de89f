"""DistributedSampler padding: its effect on the k-NN scores, and the two ways we leave it out.

``DistributedSampler`` pads the index list with up to ``W - 1`` repeated samples so every rank
gets the same count. Gathered, those are duplicate real samples, which shrink k-NN radii.
``lightning_prd.samplers.unpadded_count`` says how many leading rows of a shard are genuine;
the callback uses it for a real DataLoader with a DistributedSampler.
"""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from lightning_prd import GenerativeMetrics
from lightning_prd.callback import PRDCallback
from lightning_prd.functional import density_coverage, precision_recall
from lightning_prd.samplers import distributed_sampler_of, unpadded_count

from ddp_utils import run_ddp
from oracle import kth_radius

N = 97
REAL = torch.randn(N, 3, generator=torch.Generator().manual_seed(0))
FAKE = 1.2 * torch.randn(80, 3, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("world", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("limit", [None, 1, 10, 1000])
def test_unpadded_rows_are_every_sample_once(world, shuffle, drop_last, limit):
    for n in range(1, 24):
        dataset = range(n)
        samplers = [
            DistributedSampler(dataset, num_replicas=world, rank=r, shuffle=shuffle, drop_last=drop_last, seed=3)
            for r in range(world)
        ]
        kept = [i for s in samplers for i in list(s)[: unpadded_count(s, limit)]]
        genuine = min(n, samplers[0].total_size, limit or n)
        assert len(kept) == len(set(kept)) == genuine, (n, world)
        if not shuffle and not drop_last:
            assert sorted(kept) == list(range(genuine))
        if not drop_last and n % world:  # the padding the count leaves out is real: the shards repeat samples
            assert len([i for s in samplers for i in s]) > n


def test_unpadded_count_rejects_other_samplers():
    with pytest.raises(TypeError, match="`sampler` to be a torch DistributedSampler, but got SequentialSampler"):
        unpadded_count(torch.utils.data.SequentialSampler(range(4)))
    with pytest.raises(ValueError, match="`limit`.*0"):
        unpadded_count(DistributedSampler(range(4), num_replicas=2, rank=0), limit=0)


def test_padding_duplicates_shrink_radii_and_change_scores():
    """What the padding does (the effect the docs describe), checked against the float64 oracle."""
    world = 2
    padded = torch.cat([REAL, REAL[: world - 1]])  # the one duplicate DistributedSampler adds for N = 97, W = 2
    k = 3
    clean_r = kth_radius(REAL.double().numpy(), k)
    padded_r = kth_radius(padded.double().numpy(), k)
    assert padded_r[0] < clean_r[0]  # the duplicated sample's ball shrinks: its copy is a neighbour at distance 0
    assert np.all(padded_r[:N] <= clean_r)  # nobody's ball grows
    padded_scores = precision_recall(padded, FAKE) + density_coverage(padded, FAKE)
    clean_scores = precision_recall(REAL, FAKE) + density_coverage(REAL, FAKE)
    assert padded_scores[2] != clean_scores[2]  # density weighs the duplicated ball twice
    assert padded_scores[3] != clean_scores[3]  # coverage's denominator counts it twice


def _loader(rank, world, **kwargs):
    dataset = TensorDataset(REAL)
    return DataLoader(
        dataset, batch_size=10, sampler=DistributedSampler(dataset, num_replicas=world, rank=rank, **kwargs)
    )


@pytest.mark.parametrize("num_real", [None, 50, 96])
@pytest.mark.parametrize("shuffle", [False, True])
def test_callback_reads_each_real_sample_once_from_a_distributed_sampler(num_real, shuffle):
    rows = []
    for rank in range(2):
        cb = PRDCallback(_loader(rank, 2, shuffle=shuffle), sample_fn=lambda m, n: torch.zeros(n, 3), num_real=num_real)
        rows += list(cb._real_chunks(rank, 2))
    got = torch.cat(rows)
    assert got.shape[0] == (num_real or N)
    assert torch.unique(got, dim=0).shape[0] == got.shape[0]  # no duplicates
    assert (got[:, None, :] == REAL[None]).all(-1).any(1).all()  # all real rows
    if num_real is None:
        assert torch.equal(got[got[:, 0].argsort()], REAL[REAL[:, 0].argsort()])


def test_callback_rejects_a_sampler_of_another_rank_and_a_shuffling_loader():
    cb = PRDCallback(_loader(1, 2), sample_fn=lambda m, n: torch.zeros(n, 3))
    with pytest.raises(
        ValueError, match="match this process \\(num_replicas=2, rank=0\\), but it has num_replicas=2, rank=1"
    ):
        list(cb._real_chunks(0, 2))
    shuffled = PRDCallback(
        DataLoader(TensorDataset(REAL), batch_size=10, shuffle=True), sample_fn=lambda m, n: torch.zeros(n, 3)
    )
    with pytest.raises(ValueError, match="`real` to yield the same rows in the same order on every rank"):
        list(shuffled._real_chunks(0, 2))
    assert torch.equal(torch.cat(list(shuffled._real_chunks(0, 1))).sort(0).values, REAL.sort(0).values)  # fine alone


def test_distributed_sampler_found_in_loader():
    loader = _loader(0, 2)
    assert distributed_sampler_of(loader) is loader.sampler
    assert distributed_sampler_of(DataLoader(TensorDataset(REAL))) is None
    assert distributed_sampler_of(REAL) is None


def _metric_rank(rank, world, trim):
    sampler = DistributedSampler(range(N), num_replicas=world, rank=rank, shuffle=True, seed=7)
    rows = REAL[list(sampler)]
    if trim:
        rows = rows[: unpadded_count(sampler)]
    fake = FAKE[rank::world]
    m = GenerativeMetrics(prd=False, alpha_beta=dict(num_alphas=5), realism=False)
    for s in range(0, rows.shape[0], 16):
        m.update(rows[s : s + 16], real=True)
    m.update(fake, real=False)
    return {k: v for k, v in m.compute().items() if v.ndim == 0}


@pytest.mark.filterwarnings("ignore")
def test_ddp_metric_with_trimmed_sampler_equals_one_process():
    single = GenerativeMetrics(prd=False, alpha_beta=dict(num_alphas=5), realism=False)
    single.update(REAL, real=True)
    single.update(FAKE, real=False)
    expected = {k: v for k, v in single.compute().items() if v.ndim == 0}
    trimmed = run_ddp(_metric_rank, True)
    padded = run_ddp(_metric_rank, False)
    for rank in range(2):
        for key, value in expected.items():
            if key == "frechet_distance":  # summation order differs after the shuffle
                assert float(trimmed[rank][key]) == pytest.approx(float(value), rel=1e-9)
            else:
                assert torch.equal(trimmed[rank][key], value), (rank, key)
    # without trimming, the padded duplicate changes the k-NN scores
    assert any(not torch.equal(padded[0][k], expected[k]) for k in ("precision", "recall", "density", "coverage"))


@pytest.mark.parametrize(
    "make",
    [
        lambda ds: DataLoader(ds, batch_size=10, shuffle=True),
        lambda ds: DataLoader(
            ds, batch_sampler=torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(ds), 10, False)
        ),
        lambda ds: DataLoader(ds, batch_size=10, sampler=torch.utils.data.SubsetRandomSampler(range(len(ds)))),
        lambda ds: DataLoader(
            ds, batch_size=10, sampler=torch.utils.data.WeightedRandomSampler([1.0] * len(ds), len(ds))
        ),
    ],
    ids=["shuffle", "batch_sampler", "subset_random", "weighted"],
)
def test_callback_rejects_every_random_order_under_ddp(make):
    """Only `loader.sampler` was inspected: a random batch sampler, a SubsetRandomSampler or a
    WeightedRandomSampler made ranks embed overlapping blocks silently."""
    cb = PRDCallback(make(TensorDataset(REAL)), sample_fn=lambda m, n: torch.zeros(n, 3))
    with pytest.raises(
        ValueError, match="same rows in the same order on every rank, but its DataLoader draws them at random"
    ):
        list(cb._real_chunks(1, 2))


def _wrong_rank_everywhere(rank, world):
    dataset = TensorDataset(REAL)
    loader = DataLoader(dataset, batch_size=10, sampler=DistributedSampler(dataset, num_replicas=world, rank=0))
    cb = PRDCallback(loader, sample_fn=lambda m, n: torch.zeros(n, 3))
    try:
        cb._update_real(torch.device("cpu"), rank, world)
    except ValueError as err:
        return str(err)
    return "no error"


@pytest.mark.filterwarnings("ignore")
def test_a_sampler_wrong_on_one_rank_fails_on_every_rank():
    """rank=0 hard-coded on both ranks: rank 0's own check passes, so rank 0 alone used to go on
    into the all-gather and wait for rank 1, which had raised. Now both ranks raise."""
    for msg in run_ddp(_wrong_rank_everywhere):
        assert (
            "on each rank to match its process (num_replicas, rank) = [(2, 0), (2, 1)], "
            "but the ranks hold [(2, 0), (2, 0)]" in msg
        )
