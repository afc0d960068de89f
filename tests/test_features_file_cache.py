"""A features file written by ``lightning-prd features`` serves ``PRDCallback(cache_dir=...)`` (lightning_prd/features/
_cache_files.py, cache.py): a hit never calls the extractor on the real set and gives the features of the images
computed directly; another extractor, weights file, setting, cache name or real set is a miss, never a wrong hit.

The file is written through ``main([...])`` from a folder of PNG images; the extractor is a small seeded CNN
registered under a test name, from a weights file or from its seed. It counts the uint8 rows (real images) it
embeds in an attribute the cache key skips (its name starts with ``_``); generated samples are float images.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lightning_prd.callback import PRDCallback
from lightning_prd.cli import main
from lightning_prd.features import RandomConvNet, RealFeatureCache, read_reference, registry, write_features

from tiny_modules import AfterDryRun, GaussianSampler, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*LeafSpec.*",
    "ignore:.*module\\(s\\) in eval mode.*",
)

IMAGES = torch.randint(0, 256, (20, 3, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))
BATCH = 8
METRIC = dict(prd=False, alpha_beta=False, pr_cover=False, probabilistic=False)


class Counted(RandomConvNet):
    """A seeded RandomConvNet (6 features at 16 px) that counts the real (uint8) rows it embeds."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(num_features=6, size=16, seed=seed)

    def forward(self, x):
        if x.dtype == torch.uint8:
            self._real_rows = getattr(self, "_real_rows", 0) + int(x.shape[0])
        return super().forward(x)


def _net(weights=None, seed=3):
    """The registered factory: a Counted whose weights come from ``weights`` (else from ``seed``)."""
    net = Counted(seed=seed)
    if weights is not None:
        net.load_state_dict(torch.load(weights, weights_only=True))
    return net.eval()


def _flat(x):
    """A plain function as extractor: the pixels as float features (nothing the cache can fingerprint)."""
    return x.reshape(x.shape[0], -1).float()


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(registry._REGISTRY, "cache-test-net", lambda weights=None, **options: _net(weights))
    monkeypatch.setitem(registry._REGISTRY, "plain-function-net", lambda weights=None, **options: _flat)


def _folder(path: Path, images: torch.Tensor) -> Path:
    path.mkdir(parents=True)
    for i, image in enumerate(images):
        Image.fromarray(image.permute(1, 2, 0).numpy()).save(path / f"{i:02d}.png")  # lossless: decoded as written
    return path


def _weights(path: Path, seed: int) -> Path:
    torch.save(Counted(seed=seed).state_dict(), path)
    return path


def _direct(net, images):
    """The features of ``images`` computed directly, in the writer's batches."""
    with torch.no_grad():
        return torch.cat([net(images[i : i + BATCH]) for i in range(0, len(images), BATCH)])


def _write(tmp_path, folder, *extra):
    out = tmp_path / "cache" / "reference.npz"
    argv = ["features", "--real", str(folder), "--out", str(out), "--batch-size", str(BATCH), "--device", "cpu"]
    assert main([*argv, "-q", *extra]) == 0
    return out


def _through(cache, net, images, chunk=5):
    """``cache.real_features`` of ``images`` in chunks of ``chunk``; (features, rows the extractor was given)."""
    seen = []

    def extract(x):
        seen.append(int(x.shape[0]))
        return net(x)

    with torch.no_grad():
        feats = torch.cat(list(cache.real_features(net, lambda: iter(images.split(chunk)), extract)))
    return feats, sum(seen)


class FloatImages(GaussianSampler):
    def sample(self, n):
        return torch.rand(n, 3, 16, 16)


def _fit(tmp_path, folder, extractor, cache_dir=None):
    cb = PRDCallback(
        str(folder),
        feature_extractor=extractor,
        num_samples=16,
        num_real=15,  # the file holds 20: it serves any subset of its samples
        batch_size=BATCH,
        metric=METRIC,
        cache_dir=cache_dir,
        log_curves=False,
    )
    quiet_trainer(tmp_path, [cb, AfterDryRun(cb, "_real_rows")]).fit(FloatImages())
    return cb


@pytest.mark.parametrize("source", ["weights file", "registered name"])
def test_a_written_features_file_is_a_hit_with_the_features_of_the_images(tmp_path, registered, source):
    folder = _folder(tmp_path / "real", IMAGES)
    weights = _weights(tmp_path / "net.pth", seed=1) if source == "weights file" else None
    extra = ["--weights", str(weights)] if weights is not None else []
    out = _write(tmp_path, folder, "--extractor", "cache-test-net", *extra)
    prov = read_reference(out).provenance
    assert prov["cache"]["device"] == "cpu" and len(prov["cache"]["key"]) == 64
    want = _direct(_net(weights), IMAGES)
    assert not torch.equal(want, _direct(_net(_weights(tmp_path / "other.pth", seed=2)), IMAGES))

    cache = RealFeatureCache(out.parent)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got, rows = _through(cache, _net(weights), IMAGES)
        assert (cache.last_status, cache.last_file, rows) == ("hit", out, 0) and torch.equal(got, want)
        order = torch.tensor([13, 2, 19, 7, 0, 5])  # a subset in another order: its own rows
        got, rows = _through(cache, _net(weights), IMAGES[order], chunk=4)
        assert (cache.last_status, rows) == ("hit", 0) and torch.equal(got, want[order])

    spec = {"name": "cache-test-net", **({"weights": str(weights)} if weights is not None else {})}
    plain = _fit(tmp_path / "plain", folder, spec)
    cached = _fit(tmp_path / "cached", folder, spec, cache_dir=out.parent)
    assert plain.feature_extractor._real_rows == 15  # the count works: the plain fit embeds the real set
    assert getattr(cached.feature_extractor, "_real_rows", 0) == 0  # the cached fit never embeds it
    assert (cached.cache.last_status, cached.cache.last_file) == ("hit", out)
    assert cached.history == plain.history  # every score, to the last bit
    assert sorted(p.name for p in out.parent.iterdir()) == ["reference.npz"]  # nothing else written


CHANGES = ["weights", "extractor class", "setting", "samples", "cache name"]


@pytest.mark.parametrize("change", CHANGES)
def test_another_extractor_weights_setting_or_real_set_misses(tmp_path, registered, change):
    weights = _weights(tmp_path / "net.pth", seed=1)
    out = _write(
        tmp_path, _folder(tmp_path / "real", IMAGES), "--extractor", "cache-test-net", "--weights", str(weights)
    )
    net, images, name = _net(weights), IMAGES.clone(), None
    if change == "weights":
        net = _net(_weights(tmp_path / "other.pth", seed=2))
    elif change == "extractor class":  # the same weights in the base class
        net = RandomConvNet(num_features=6, size=16)
        net.load_state_dict(torch.load(weights, weights_only=True))
    elif change == "setting":
        net.mean = (0.4, 0.45, 0.5)  # the normalisation the network sees
    elif change == "samples":
        images[11] = 255 - images[11]  # one image of twenty
    else:
        name = "mine"
    cache = RealFeatureCache(out.parent, name=name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a file of other samples or another key: no warning
        got, rows = _through(cache, net, images)
    assert (cache.last_status, rows) == ("miss", len(images)) and cache.last_file != out
    with torch.no_grad():
        assert torch.allclose(got, net(images), atol=1e-6)  # the features of this extractor and these samples
    if change in ("weights", "setting", "samples"):
        assert not torch.allclose(got, read_reference(out).features, atol=1e-3)  # which the file does not hold


def test_a_tampered_features_file_is_ignored_with_one_warning(tmp_path, registered):
    out = _write(tmp_path, _folder(tmp_path / "real", IMAGES), "--extractor", "cache-test-net")
    with np.load(out) as archive:
        entries = {k: archive[k] for k in archive.files}
    entries["features"] = entries["features"] + 1  # provenance (and its checksum) kept
    np.savez(out, **entries)
    cache = RealFeatureCache(out.parent)
    with pytest.warns(UserWarning, match=r"ignoring the features file .*reference\.npz.*checksum") as record:
        got, rows = _through(cache, _net(), IMAGES)
    assert len([w for w in record if "RealFeatureCache" in str(w.message)]) == 1
    assert (cache.last_status, rows) == ("miss", 20) and torch.equal(got, _direct(_net(), IMAGES))
    assert out.is_file()  # a features file is never rewritten


def test_an_extractor_the_cache_cannot_key_writes_a_file_for_real_only(tmp_path, registered, capfd):
    images = _folder(tmp_path / "real", IMAGES[:, :, :4, :4].contiguous())
    out = tmp_path / "plain.npz"
    argv = ["features", "--real", str(images), "--extractor", "plain-function-net", "--out", str(out), "-q"]
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "warning: the file will not serve cache_dir" in err and "`feature_extractor`" in err
    with np.load(out) as archive:
        assert sorted(archive.files) == ["features", "provenance"]
        assert "cache" not in json.loads(str(archive["provenance"][()]))
    assert torch.equal(read_reference(out).features, IMAGES[:, :, :4, :4].reshape(20, -1).float())


def test_write_features_checks_the_digests_and_the_cache_entry(tmp_path):
    feats, digests, cache = torch.ones(3, 2), [bytes(32)] * 3, {"key": "k"}
    for kwargs, match in [
        (dict(sample_digests=digests), r"`cache` with argument `sample_digests`, but got cache=None"),
        (dict(cache=cache), r"`sample_digests` with argument `cache`"),
        (dict(sample_digests=digests[:2], cache=cache), r"`sample_digests` to be 3 SHA-256 digests .*got 2 digests"),
        (dict(sample_digests=[b"x"] * 3, cache=cache), r"`sample_digests` .*but got a digest b'x'"),
        (dict(sample_digests=digests, cache={"key": 1}), r"`cache` to be a mapping with a text 'key'"),
    ]:
        with pytest.raises(ValueError, match=match) as info:
            write_features(tmp_path / "f.npz", feats, **kwargs)
        assert "\n" not in str(info.value)
    assert not list(tmp_path.iterdir())
