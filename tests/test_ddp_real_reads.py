"""A DataLoader real set under 2 gloo processes: each rank loads only its own share of an indexable dataset,
and the ranks' rows, concatenated, are the dataset's rows in order."""

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from lightning_prd.callback.sharding import labelled_chunks, real_chunks

from ddp_utils import run_ddp

ROWS, WIDTH, BATCH = 103, 3, 8
DATA = torch.arange(ROWS * WIDTH, dtype=torch.float32).reshape(ROWS, WIDTH)


class Counting(Dataset):
    """Map-style dataset that counts its reads."""

    def __init__(self):
        self.reads = 0

    def __len__(self):
        return ROWS

    def __getitem__(self, i):
        self.reads += 1
        return DATA[i], i % 5


class Stream(IterableDataset):
    """The same rows without ``__len__`` or indexing: read in order up to the rank's block."""

    def __iter__(self):
        return iter(DATA)


def _reads(rank, world):
    data = Counting()
    rows = torch.cat(list(real_chunks(DataLoader(data, batch_size=BATCH), None, BATCH, rank, world)))
    reads = data.reads
    labelled = list(labelled_chunks(DataLoader(Counting(), batch_size=BATCH), 60, BATCH, rank, world))
    stream = torch.cat(list(real_chunks(DataLoader(Stream(), batch_size=BATCH), None, BATCH, rank, world)))
    return rows, reads, labelled, stream


def test_each_rank_reads_its_share_of_a_dataloader():
    results = run_ddp(_reads)
    share = -(-ROWS // 2)
    for _, reads, _, _ in results:
        assert reads <= share + BATCH  # (the whole loader: the last rank read all 103 rows)
    assert torch.equal(torch.cat([r[0] for r in results]), DATA)
    assert torch.equal(torch.cat([r[3] for r in results]), DATA)
    xs = torch.cat([x for r in results for x, _ in r[2]])
    ys = torch.cat([y for r in results for _, y in r[2]])
    assert torch.equal(xs, DATA[:60]) and torch.equal(ys, torch.arange(60) % 5)
