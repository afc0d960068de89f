"""Image folders of mixed sizes (``lightning_prd.features.image_folder``): every image is resized from its own size
by the extractor's own resize (the protocol's: TF1 bilinear, torch bilinear, Pillow bicubic), so the features and
the scores are the same at every batch size, in ``evaluate``, in ``features`` and in the callback's folder source.

The extractor is :class:`FIDInceptionFeatures` with its own preprocessing (each protocol's resize to 299 x 299 and
normalisation) in front of a tiny seeded network with the FID network's outputs (the real one costs about 0.1 s an
image on this CPU), on smooth images of 29 x 37, 64 x 64 and 450 x 150 pixels (one side above 299: a downscale);
the expected features are those of one image at a time."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from smooth_images import smooth_images
from torch import nn

from lightning_prd.callback import PRDCallback
from lightning_prd.cli import main
from lightning_prd.features import extract_features, register_extractor
from lightning_prd.features import registry as registry_module
from lightning_prd.features.fid_inception import FIDInceptionFeatures
from lightning_prd.features.image_folder import image_batches, image_files
from lightning_prd.features.images import file_sha256, seeded
from lightning_prd.protocols import get_protocol, register_protocol

SIZES = [(29, 37), (64, 64), (64, 64), (450, 150), (29, 37)]  # runs of one size and changes of size
RESIZES = ("tf1", "pytorch-fid", "clean")


class TinyNet(nn.Module):
    """The FID network's outputs (``pool`` [B, 2048], ``Mixed_6d`` [B, 768, 17, 17], ``fc``) from one strided
    convolution on the 299 x 299 input."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 8, stride=8)
        self.proj = nn.Linear(8, 2048)
        self.fc = nn.Linear(2048, 1008)

    def forward(self, x, with_mixed_6d=False):
        h = torch.relu(self.conv(x))
        pool = torch.relu(self.proj(h.mean((2, 3))))
        return (pool, F.adaptive_avg_pool2d(h, 17)) if with_mixed_6d else pool


class TinyFID(FIDInceptionFeatures):
    """:class:`FIDInceptionFeatures` (its ``preprocess``, ``forward``, outputs) with :class:`TinyNet` as the network."""

    def _load_state_dict(self, weights, random_init, seed):
        with seeded(seed):
            self.net = TinyNet()
        self.weights_sha256 = file_sha256(weights) if isinstance(weights, (str, Path)) else None


def _folder(path, seed, sizes=SIZES):
    path.mkdir()
    images = smooth_images(len(sizes), 450, seed)
    for i, (h, w) in enumerate(sizes):
        Image.fromarray(images[i, :, :h, :w].permute(1, 2, 0).numpy()).save(path / f"{i:03d}.png")
    return path


def _never(*args):
    raise AssertionError(f"unexpected refusal: {args}")


def _features(extractor, folder, batch_size):
    batches = image_batches(image_files(folder), batch_size, extractor.input_size, unreadable=_never, mixed=_never)
    return extract_features(extractor, batches)


def _one_at_a_time(extractor, folder):
    """The oracle: each file read with Pillow here and embedded alone, at its own size."""
    images = [
        torch.from_numpy(np.asarray(Image.open(p).convert("RGB")).copy()).permute(2, 0, 1) for p in image_files(folder)
    ]
    with torch.no_grad():
        return torch.cat([extractor(im[None]) for im in images])


def _close(a, b):
    scale = float(b.abs().max())
    return float((a - b).abs().max()) <= 1e-5 * scale


@pytest.mark.parametrize("resize", RESIZES)
def test_folder_features_are_those_of_one_image_at_a_time(tmp_path, resize):
    folder = _folder(tmp_path / "mixed", 0)
    extractor = TinyFID(random_init=True, seed=1, resize=resize)
    alone = _one_at_a_time(extractor, folder)
    for batch_size in (3, len(SIZES)):
        got = _features(extractor, folder, batch_size)
        assert got.shape == alone.shape
        assert _close(got, alone), (batch_size, float((got - alone).abs().max()), float(alone.abs().max()))


def test_batches_hold_images_of_one_size_in_file_order(tmp_path):
    folder = _folder(tmp_path / "mixed", 0)
    batches = list(image_batches(image_files(folder), 4, (299, 299), unreadable=_never, mixed=_never))
    assert [tuple(b.shape) for b in batches] == [
        (1, 3, 29, 37),
        (2, 3, 64, 64),
        (1, 3, 450, 150),
        (1, 3, 29, 37),
    ]
    assert all(b.dtype == torch.uint8 for b in batches)
    files = image_files(folder)
    stacked = [im for b in batches for im in b]
    for path, im in zip(files, stacked):  # each image as the file holds it, in sorted path order
        assert torch.equal(im, torch.from_numpy(np.asarray(Image.open(path).convert("RGB")).copy()).permute(2, 0, 1))


@pytest.mark.parametrize("batch_size", [1, 3])
def test_mixed_sizes_without_an_input_size_are_refused_at_every_batch_size(tmp_path, batch_size):
    folder = _folder(tmp_path / "mixed", 0)

    def mixed(sizes):
        return ValueError(f"mixed: {sizes}")

    with pytest.raises(ValueError, match=r"^mixed: 29x37 and 64x64$"):
        list(image_batches(image_files(folder), batch_size, None, unreadable=_never, mixed=mixed))


@pytest.fixture
def weights(tmp_path):
    """``fid-inception`` replaced by :class:`TinyFID` and a weights file of it accepted by the FID protocols (told
    its SHA-256); all restored afterwards."""
    path = tmp_path / "tiny-fid.pth"
    torch.save(TinyNet().state_dict(), path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    before = {name: get_protocol(name) for name in ("fid", "pytorch-fid", "clean-fid")}
    factory = registry_module._REGISTRY["fid-inception"]
    register_extractor("fid-inception", TinyFID, overwrite=True)
    for protocol in before.values():
        register_protocol(dataclasses.replace(protocol, weights_sha256=(digest,)), overwrite=True)
    yield path
    for protocol in before.values():
        register_protocol(protocol, overwrite=True)
    register_extractor("fid-inception", factory, overwrite=True)


@pytest.mark.parametrize("protocol", ["fid", "pytorch-fid", "clean-fid"])
def test_evaluate_scores_do_not_depend_on_the_batch_size(tmp_path, capsys, weights, protocol):
    real = _folder(tmp_path / "real", 1, SIZES[:4])
    fake = _folder(tmp_path / "fake", 2, SIZES[1:])
    scores = []
    for batch_size in ("1", "64"):
        out = tmp_path / f"out-{batch_size}.json"
        argv = ["evaluate", "--protocol", protocol, "--real", str(real), "--fake", str(fake), "--weights", str(weights)]
        code = main([*argv, "--batch-size", batch_size, "--json", str(out), "-q", "--device", "cpu"])
        assert code == 0, capsys.readouterr().err
        scores.append(json.loads(out.read_text())["scores"])
    one, default = scores
    assert set(one) == set(default) and "frechet_distance" in one
    for key in one:
        assert default[key] == pytest.approx(one[key], rel=1e-6, abs=1e-9), key


def test_features_file_does_not_depend_on_the_batch_size(tmp_path, capsys, weights):
    folder = _folder(tmp_path / "mixed", 4, SIZES[1:])
    written = []
    for batch_size in ("1", "64"):
        out = tmp_path / f"features-{batch_size}.npz"
        argv = ["features", "--real", str(folder), "--extractor", "fid-inception", "--weights", str(weights)]
        assert main([*argv, "--out", str(out), "--batch-size", batch_size, "-q", "--device", "cpu"]) == 0
        written.append(np.load(out))
    one, default = written
    assert _close(torch.from_numpy(default["features"]), torch.from_numpy(one["features"]))
    assert np.array_equal(default["sample_sha256"], one["sample_sha256"])  # the rows digested are the images
    alone = _one_at_a_time(TinyFID(weights), folder)
    assert _close(torch.from_numpy(one["features"]), alone)


def test_callback_folder_features_do_not_depend_on_the_batch_size(tmp_path):
    folder = _folder(tmp_path / "mixed", 5, SIZES[1:])
    extractor = TinyFID(random_init=True, seed=2, resize="clean")
    alone = _one_at_a_time(extractor, folder)
    metric = dict(prd=False, alpha_beta=False, pr_cover=False)
    for batch_size in (1, 3):
        cb = PRDCallback(str(folder), feature_extractor=extractor, batch_size=batch_size, num_samples=4, metric=metric)
        got = torch.cat([f for f, _ in cb._real_features(torch.device("cpu"), 0, 1)])
        assert _close(got, alone), batch_size


def test_clean_fid_resizes_each_image_as_we_do(tmp_path):
    """clean-fid's own rule (``make_resizer("PIL", False, "bicubic", (299, 299))`` on each image, then clipped
    to [0, 255]) gives the network input of the folder's features at the default batch size."""
    resize = pytest.importorskip("cleanfid.resize", reason="clean-fid is not installed")
    folder = _folder(tmp_path / "mixed", 6)
    extractor = TinyFID(random_init=True, seed=1, resize="clean")
    resizer = resize.make_resizer("PIL", False, "bicubic", (299, 299))
    inputs = []
    for path in image_files(folder):
        image = np.asarray(Image.open(path).convert("RGB"))
        inputs.append(torch.from_numpy(resizer(image).clip(0, 255)).permute(2, 0, 1).float())
    with torch.no_grad():
        expected = extractor.net((torch.stack(inputs) - 128) / 128)
    assert _close(_features(extractor, folder, 64), expected)
