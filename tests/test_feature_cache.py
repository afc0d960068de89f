"""Real features cached on disk across fits (``PRDCallback(cache_dir=...)``, :mod:`lightning_prd.features.cache`).

Each fit builds a fresh callback and a fresh extractor, as a new run would; the extractor counts the
calls it gets on real rows (rows of ``REAL``), so a hit is seen as zero calls, not inferred from timing.
"""

from __future__ import annotations

import json
import warnings

import pytest
import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback, rank_shard
from lightning_prd.callback.batches import rows_of
from lightning_prd.features.cache import RealFeatureCache, extractor_identity

from ddp_utils import run_ddp
from tiny_modules import AfterDryRun, TinyTrainable

REAL = torch.randn(70, 3, generator=torch.Generator().manual_seed(0))
FAKE = 0.8 * torch.randn(50, 3, generator=torch.Generator().manual_seed(1)) + 0.2

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*smaller than the logging interval.*",
    "ignore:.*module\\(s\\) in eval mode.*",
    "ignore:.*LeafSpec.*",
)


class Counting(nn.Module):
    """A seeded linear map to 4 features; counts the real rows it embeds (rows of ``REAL`` in any dtype)."""

    def __init__(self, seed=0, scale=1.0, in_dim=3):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.lin = nn.Linear(in_dim, 4)
        self.scale = scale
        self.real_rows = 0

    def forward(self, x):
        real = REAL.to(x.dtype)
        self.real_rows += int(sum(bool((real == row).all(dim=1).any()) for row in x))
        return torch.tanh(self.lin(x.to(self.lin.weight.dtype)) * self.scale)


class FromFile(Counting):
    """Weights read from a file, as the pretrained extractors do."""

    def __init__(self, path):
        super().__init__()
        self.lin.load_state_dict(torch.load(path, weights_only=True))


class Tiny(TinyTrainable):
    def sample(self, n):
        """This rank's block of ``FAKE`` (all of it in one process): the gathered set is ``FAKE`` either way."""
        mine = rows_of(len(FAKE), 16, self.trainer.global_rank, self.trainer.world_size)  # batch_size=16
        start = getattr(self, "cursor", 0)  # the callback asks for the block in batches, once per evaluation
        self.cursor = (start + n) % len(mine)
        return FAKE[mine.start + start : mine.start + start + n]


def fit(real=REAL, extractor=None, cache_dir=None, **options):
    extractor = Counting() if extractor is None else extractor
    cb = PRDCallback(
        real,
        feature_extractor=extractor,
        num_samples=50,
        batch_size=16,
        cache_dir=cache_dir,
        log_curves=False,
        **options,
    )
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb, AfterDryRun(extractor)],
    )
    trainer.fit(Tiny())
    return cb.history[0], extractor.real_rows, cb


def test_second_fit_reads_the_real_features_from_disk(tmp_path):
    plain, calls, _ = fit()
    assert calls == 70
    first, calls, cb = fit(cache_dir=tmp_path)
    assert calls == 70 and cb.cache.last_status == "miss"
    assert len(list(tmp_path.glob("real-*.pt"))) == 1 and not list(tmp_path.glob(".tmp-*"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        second, calls, cb = fit(cache_dir=tmp_path)
    assert calls == 0 and cb.cache.last_status == "hit"
    assert first == plain and second == plain  # every score, to the last bit, with and without the cache


def test_the_content_is_the_key_not_the_batching(tmp_path):
    fit(cache_dir=tmp_path)
    loader = DataLoader(TensorDataset(REAL.clone(), torch.zeros(70)), batch_size=9)  # other container, chunks
    _, calls, cb = fit(loader, cache_dir=str(tmp_path))
    assert calls == 0 and cb.cache.last_status == "hit"


class _Augmented(torch.utils.data.Dataset):
    """REAL with fresh noise at every read (a random augmentation): the samples differ between reads."""

    def __len__(self):
        return len(REAL)

    def __getitem__(self, i):
        return (REAL[i] + 1e-3 * torch.randn(REAL.shape[1]),)


def test_samples_that_change_between_two_reads_are_not_cached(tmp_path):
    fit(cache_dir=tmp_path)  # a file of this extractor exists: the next fit hashes first, then extracts
    augmented = DataLoader(_Augmented(), batch_size=16)
    with pytest.warns(UserWarning, match="differed between two reads"):
        _, calls, cb = fit(augmented, cache_dir=tmp_path)
    assert calls == 0 and cb.cache.last_status == "unwritten"  # (Counting counts only rows of REAL itself)
    assert len(list(tmp_path.glob("real-*.pt"))) == 1


def test_the_same_samples_in_another_order_are_the_same_set(tmp_path):
    first, _, _ = fit(cache_dir=tmp_path)
    shuffled = DataLoader(TensorDataset(REAL), batch_size=16, shuffle=True)
    second, calls, cb = fit(shuffled, cache_dir=tmp_path)
    assert calls == 0 and cb.cache.last_status == "hit"  # the cache is keyed by the set, not its order
    for name in ("precision", "recall", "density", "coverage"):  # (k-NN scores do not depend on the order)
        assert second[name] == pytest.approx(first[name], rel=1e-6), name


def _weights(path, seed):
    torch.save(Counting(seed).lin.state_dict(), path)
    return path


@pytest.mark.parametrize(
    "change",
    ["weights", "extractor setting", "extractor class", "data", "num_real", "data dtype", "extractor dtype", "name"],
)
def test_anything_that_changes_the_features_misses(tmp_path, change):
    cache = tmp_path / "cache"
    first, _, _ = fit(cache_dir=cache)
    changed = {"real": REAL, "extractor": Counting(), "cache_dir": cache}
    if change == "weights":
        changed["extractor"] = Counting(seed=1)
    elif change == "extractor setting":
        changed["extractor"] = Counting(scale=0.5)
    elif change == "extractor class":
        changed["extractor"] = type("Other", (Counting,), {})()
    elif change == "data":
        changed["real"] = REAL.clone()
        changed["real"][37, 1] += 1e-6
    elif change == "num_real":
        changed["num_real"] = 69
    elif change == "data dtype":
        changed["real"] = REAL.double()
    elif change == "extractor dtype":
        changed["extractor"] = Counting().double()
    elif change == "name":
        changed["cache_dir"] = RealFeatureCache(cache, name="v2")
    second, calls, cb = fit(**changed)
    assert calls == (69 if change in ("num_real", "data") else 70)  # (the changed row is not one of REAL's)
    assert cb.cache.last_status == "miss"
    assert len(list(cache.glob("real-*.pt"))) == 2
    if change in ("weights", "extractor setting", "num_real"):
        assert second != first


def test_weights_files_are_told_apart_by_content(tmp_path):
    a, b = _weights(tmp_path / "a.pt", 0), _weights(tmp_path / "b.pt", 1)
    fit(extractor=FromFile(a), cache_dir=tmp_path / "cache")
    assert fit(extractor=FromFile(b), cache_dir=tmp_path / "cache")[1] == 70  # another file: miss
    copy = tmp_path / "copy.pt"
    copy.write_bytes(a.read_bytes())
    assert fit(extractor=FromFile(copy), cache_dir=tmp_path / "cache")[1] == 0  # same weights elsewhere: hit


@pytest.mark.parametrize("damage", ["corrupt", "truncated"])
def test_a_damaged_file_is_ignored_once_and_rewritten(tmp_path, damage):
    expected, _, _ = fit(cache_dir=tmp_path)
    (path,) = tmp_path.glob("real-*.pt")
    data = bytearray(path.read_bytes())
    if damage == "corrupt":
        where = data.index(_first_feature_bytes()) + 17  # a byte inside the stored features, not the metadata
        data[where] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    reason = "checksum does not match" if damage == "corrupt" else "corrupt or truncated cache file"
    with pytest.warns(UserWarning, match=reason) as record:
        got, calls, cb = fit(cache_dir=tmp_path)
    assert len([w for w in record if "cache file" in str(w.message)]) == 1
    assert calls == 70 and cb.cache.last_status == "miss" and got == expected
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # rewritten in place, no temporary file left
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        again, calls, _ = fit(cache_dir=tmp_path)
    assert calls == 0 and again == expected


def _first_feature_bytes():
    """The bytes of the first stored feature rows (the extraction is deterministic)."""
    return Counting()(REAL[:16]).detach().numpy().tobytes()[:64]


def test_a_plain_function_needs_a_name(tmp_path):
    fn = lambda x: x * 2  # noqa: E731 - an anonymous lambda is the case under test
    with pytest.raises(ValueError, match="feature_extractor.*RealFeatureCache"):
        PRDCallback(REAL, feature_extractor=fn, cache_dir=tmp_path)
    PRDCallback(REAL, feature_extractor=fn, cache_dir=RealFeatureCache(tmp_path, name="double"))
    assert extractor_identity(fn, "double")["name"] == "double"
    with pytest.raises(ValueError, match="`cache_dir`.*is a file"):
        RealFeatureCache(__file__)


def _ranks(rank, world, folder):
    out, save = {}, torch.save
    if rank == 1:  # only rank 0 may write: a save here fails the test
        torch.save = _refuse
    try:
        for total in (7, 1):  # uneven shards; rank 1 idle
            mine = rank_shard(total, rank, world)

            def chunks(mine=mine):
                return iter(REAL[mine.start : mine.stop].split(4))

            out[total] = []
            for _ in range(2):
                extractor, cache = Counting(), RealFeatureCache(f"{folder}/{total}")
                feats = cache.real_features(
                    extractor, chunks, extractor, num_real=total, rank=rank, world=world, chunk_rows=5
                )
                feats = list(feats)
                out[total].append(
                    (torch.cat(feats) if feats else torch.empty(0, 4), extractor.real_rows, cache.last_status)
                )
    finally:
        torch.save = save
    return out


def _refuse(*args, **kwargs):
    raise AssertionError("rank 1 wrote a cache file")


def test_two_ranks_share_one_file_written_by_rank_zero(tmp_path):
    results = run_ddp(_ranks, str(tmp_path), strict=True)  # the cache's collectives under NCCL's rules
    for total in (7, 1):
        assert len(list((tmp_path / str(total)).glob("real-*.pt"))) == 1
        assert not list((tmp_path / str(total)).glob(".tmp-*"))
        for rank, runs in enumerate(results):
            mine = rank_shard(total, rank, 2)
            # the extractor on the rank's own chunks, as the rank calls it (a GEMM's last bit can depend on
            # the batch's shape on some CPUs, so the rows are embedded in the same batches)
            parts = [Counting()(c).detach() for c in REAL[mine.start : mine.stop].split(4)]
            expected = torch.cat(parts) if parts else torch.empty(0, 4)
            (first, calls1, status1), (second, calls2, status2) = runs[total]
            assert (status1, status2) == ("miss", "hit")
            assert calls1 == len(mine) and calls2 == 0
            assert torch.equal(first, expected) and torch.equal(second, first)


class DumpRank(pl.Callback):
    """Each rank's scores, real-row extractor calls and cache status, as JSON (a spawned rank's objects stay there)."""

    def __init__(self, prd, folder):
        self.prd, self.folder = prd, str(folder)

    def on_train_end(self, trainer, pl_module):
        info = {
            "scores": self.prd.history[0],
            "calls": self.prd.feature_extractor.real_rows,
            "status": self.prd.cache.last_status,
        }
        with open(f"{self.folder}/rank{trainer.global_rank}.json", "w") as fh:
            json.dump(info, fh)

    def teardown(self, trainer, pl_module, stage):  # see tests/test_callback_ddp.py: Dump.teardown
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


@pytest.mark.filterwarnings("ignore")
def test_callback_under_ddp_reads_its_own_cache(tmp_path):
    expected, _, _ = fit()
    for run in ("first", "second"):
        out = tmp_path / run
        out.mkdir()
        cb = PRDCallback(
            REAL,
            feature_extractor=Counting(),
            num_samples=50,
            batch_size=16,
            cache_dir=tmp_path / "cache",
            log_curves=False,
        )
        trainer = pl.Trainer(
            max_epochs=1,
            accelerator="cpu",
            devices=2,
            strategy="ddp_spawn",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[cb, AfterDryRun(cb), DumpRank(cb, out)],
        )
        trainer.fit(Tiny())
        for rank in (0, 1):
            info = json.loads((out / f"rank{rank}.json").read_text())
            assert info["status"] == ("miss" if run == "first" else "hit"), (run, rank)
            assert info["calls"] == (35 if run == "first" else 0), (run, rank)  # each rank embeds its half once
            for key, value in expected.items():
                assert info["scores"][key] == pytest.approx(value, rel=1e-6, abs=1e-9), (run, rank, key)
    assert len(list((tmp_path / "cache").glob("real-*.pt"))) == 1
