"""VGG-16 extractors without torchvision: the plain-torch VGG-16 (``resize=`` options, quantisation, weights
files) and the loader of NVlabs' TorchScript ``vgg16.pt``, driven as StyleGAN3's precision/recall drives it.

Oracles: StyleGAN3's feature path written out below from ``metrics/metric_utils.py`` and
``metrics/precision_recall.py`` (github.com/NVlabs/stylegan3, commit c233a91); TensorFlow-1 bilinear and
the ImageNet normalisation as float64 NumPy from their formulas; ``F.interpolate`` for the default
resize. Comparisons with torch-fidelity's own code are in ``tests/test_vgg_references.py``.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import zipfile

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_prd.features.cache import check_cacheable
from lightning_prd.features.images import IMAGENET_MEAN, IMAGENET_STD
from lightning_prd.features.vgg import VGG16Features
from lightning_prd.features.vgg_nvlabs import URL, NVlabsVGG16Features, is_torchscript_file, nvlabs_uint8_images

SIDE = 16  # 3 * 16 * 16 = 768 pixels: the stand-in returns every one of them


class NVlabsStandIn(nn.Module):
    """vgg16.pt's call signature, ``forward(img, return_features=False)``; features: each uint8 pixel
    ``p`` as ``p * scale + 1/3`` in float64, then H and W. Raises unless it gets uint8 ``[B, 3, H, W]``
    and ``return_features=True``, as only that call is the one StyleGAN3 makes."""

    def __init__(self, width: int = 4096) -> None:
        super().__init__()
        self.width = width
        self.register_buffer("scale", torch.tensor(0.5, dtype=torch.float64))

    def forward(self, img: Tensor, return_features: bool = False) -> Tensor:
        if img.dtype != torch.uint8:
            raise RuntimeError("stand-in: expected uint8 images")
        if not return_features:
            raise RuntimeError("stand-in: expected return_features=True")
        if img.dim() != 4 or img.size(1) != 3:
            raise RuntimeError("stand-in: expected [B, 3, H, W]")
        flat = img.flatten(1).to(torch.float64)
        n = min(flat.size(1), self.width - 2)
        out = torch.zeros(img.size(0), self.width, dtype=torch.float64, device=img.device)
        out[:, :n] = flat[:, :n] * self.scale + 1.0 / 3.0
        out[:, self.width - 2] = float(img.size(2))
        out[:, self.width - 1] = float(img.size(3))
        return out


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    path = tmp_path_factory.mktemp("nvlabs") / "vgg16.pt"
    torch.jit.save(torch.jit.script(NVlabsStandIn()), str(path))
    return path


# StyleGAN3 metrics/metric_utils.py, with detector_kwargs = dict(return_features=True) of
# metrics/precision_recall.py compute_pr, and FeatureStats.append (np.asarray(x, dtype=np.float32)).
def stylegan3_dataset_features(detector, images: Tensor) -> np.ndarray:
    """compute_feature_stats_for_dataset: dataset images (uint8 [B, C, H, W]) to stored features."""
    detector_kwargs = dict(return_features=True)
    if images.shape[1] == 1:
        images = images.repeat([1, 3, 1, 1])
    features = detector(images.to("cpu"), **detector_kwargs)
    return np.asarray(features.cpu().numpy(), dtype=np.float32)


def stylegan3_generator_features(detector, img: Tensor) -> np.ndarray:
    """compute_feature_stats_for_generator: generator output ``img`` in [-1, 1] to stored features."""
    detector_kwargs = dict(return_features=True)
    images = (img * 127.5 + 128).clamp(0, 255).to(torch.uint8)
    if images.shape[1] == 1:
        images = images.repeat([1, 3, 1, 1])
    features = detector(images, **detector_kwargs)
    return np.asarray(features.cpu().numpy(), dtype=np.float32)


def _dyadic_generator_output(shape, seed):
    """Values ``k / 1024 - 1`` in [-1, 1]: ``(img + 1) / 2`` and both quantisation formulas are exact in float32."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2049, shape, generator=g).to(torch.float32) / 1024 - 1


def test_nvlabs_loader_drives_the_network_as_stylegan3(stand_in):
    net = NVlabsVGG16Features(stand_in)
    detector = torch.jit.load(str(stand_in), map_location="cpu")  # metric_utils loads it as it is
    g = torch.Generator().manual_seed(0)
    rgb = torch.randint(0, 256, (3, 3, SIDE, SIDE), generator=g, dtype=torch.uint8)
    gray = torch.randint(0, 256, (2, 1, SIDE, SIDE + 4), generator=g, dtype=torch.uint8)
    for images in (rgb, gray):
        expected = torch.from_numpy(stylegan3_dataset_features(detector, images))
        got = net(images)
        assert got.dtype == torch.float32 and torch.equal(got, expected)
    assert torch.equal(net(gray[:, 0]), net(gray))  # [B, H, W] is one channel
    assert float(net(gray)[0, -1]) == SIDE + 4 and float(net(gray)[0, -2]) == SIDE
    for shape in ((3, 3, SIDE, SIDE), (2, 1, SIDE, SIDE)):
        img = _dyadic_generator_output(shape, seed=1)
        expected = torch.from_numpy(stylegan3_generator_features(detector, img))
        assert torch.equal(net((img + 1) / 2), expected)
        assert torch.equal(net(((img + 1) / 2).double()), expected)


def test_stand_in_refuses_any_other_call(stand_in):
    detector = torch.jit.load(str(stand_in), map_location="cpu")
    images = torch.zeros(1, 3, 4, 4, dtype=torch.uint8)
    with pytest.raises(Exception, match="uint8"):
        detector(images.float(), return_features=True)
    with pytest.raises(Exception, match="return_features"):
        detector(images)


def test_nvlabs_quantisation_is_the_generator_rule_for_unit_interval_input():
    img = torch.rand(200_000, generator=torch.Generator().manual_seed(2)) * 2 - 1
    theirs = (img * 127.5 + 128).clamp(0, 255).to(torch.uint8).to(torch.int64).numpy()
    x = ((img + 1) / 2).view(1, 1, 1, -1)
    ours = nvlabs_uint8_images(x)[0, 0, 0].to(torch.int64).numpy()
    x32 = x.view(-1).numpy()
    assert np.array_equal(ours, np.floor(x32 * np.float32(255) + np.float32(0.5)).clip(0, 255))  # in float32
    exact = 255 * x32.astype(np.float64) + 0.5
    half_step = np.abs(exact - np.round(exact))  # distance of 255 x + 1/2 from an integer
    for other in (theirs, np.floor(exact).clip(0, 255)):  # NVlabs' formula; the rule in exact arithmetic
        differ = np.nonzero(ours != other)[0]
        assert np.abs(ours - other).max() <= 1 and differ.size <= 50 and bool((half_step[differ] < 1e-4).all())
    grid = torch.arange(256, dtype=torch.uint8).view(1, 1, 1, -1)
    assert torch.equal(nvlabs_uint8_images(grid.float() / 255)[0, 0], grid[0, 0])
    assert torch.equal(nvlabs_uint8_images(grid)[:, 2], grid[:, 0])


def test_nvlabs_loader_errors(stand_in, tmp_path):
    with pytest.raises(FileNotFoundError, match="vgg16.pt") as info:
        NVlabsVGG16Features()
    assert URL in str(info.value) and "code" in str(info.value)
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        NVlabsVGG16Features(tmp_path / "nope.pt")
    with pytest.raises(TypeError, match="weights"):
        NVlabsVGG16Features({"w": torch.zeros(1)})
    with pytest.raises(ValueError, match="random_init"):
        NVlabsVGG16Features(stand_in, random_init=True)
    state = tmp_path / "state.pth"
    torch.save({"w": torch.zeros(1)}, state)
    with pytest.raises(ValueError, match="VGG16Features"):
        NVlabsVGG16Features(state)
    pkl = tmp_path / "vgg16.pkl"
    pkl.write_bytes(pickle.dumps({"not": "run"}))
    with pytest.raises(ValueError, match="pickle"):
        NVlabsVGG16Features(pkl)
    narrow = tmp_path / "narrow.pt"
    torch.jit.save(torch.jit.script(NVlabsStandIn(width=2048)), str(narrow))
    with pytest.raises(ValueError, match="4096"):
        NVlabsVGG16Features(narrow)(torch.zeros(1, 3, 4, 4, dtype=torch.uint8))
    net = NVlabsVGG16Features(stand_in)
    with pytest.raises(ValueError, match="images"):
        net(torch.zeros(1, 4, 8, 8, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        net(torch.full((1, 3, 8, 8), 2.0))
    with pytest.raises(TypeError, match="dtype"):
        net(torch.zeros(1, 3, 8, 8, dtype=torch.int32))


def test_nvlabs_fingerprint_and_frozen_module(stand_in):
    net = NVlabsVGG16Features(stand_in)
    assert net.name == "vgg16-nvlabs"
    assert net.weights_sha256 == hashlib.sha256(stand_in.read_bytes()).hexdigest()
    assert json.loads(json.dumps(net.preprocessing)) == net.preprocessing
    assert net.preprocessing["quantisation"] == "round" and net.preprocessing["input_size"] == [224, 224]
    assert not net.train().training and not any(t.requires_grad for t in net.parameters())
    assert check_cacheable(net) is net  # the disk cache can key it (the file's SHA-256 is a public attribute)


def test_torchscript_detection(stand_in, tmp_path):
    state = tmp_path / "vgg16-397923af.pth"
    torch.save({"features.0.weight": torch.zeros(1)}, state)
    other_zip = tmp_path / "other.zip"
    with zipfile.ZipFile(other_zip, "w") as archive:
        archive.writestr("a/data.pkl", b"")
    text = tmp_path / "text.pt"
    text.write_text("not a zip")
    assert is_torchscript_file(stand_in)
    assert not any(is_torchscript_file(p) for p in (state, other_zip, text))
    with pytest.raises(ValueError, match="NVlabsVGG16Features") as info:
        VGG16Features(weights=stand_in)
    assert "TorchScript" in str(info.value)


# ---------------------------------------------------------------------------- the plain-torch VGG-16
@pytest.fixture(scope="module")
def random_tf1():
    return VGG16Features(random_init=True, seed=3, resize="tf1")


@pytest.fixture(scope="module")
def vgg_state(random_tf1):
    """The random network's state dict: an extractor built from it copies the weights without reading a file."""
    return random_tf1.net.state_dict()


def test_resize_options_and_their_names():
    with pytest.raises(ValueError, match="resize"):
        VGG16Features(random_init=True, resize="tf2")
    with pytest.raises(ValueError, match="antialias"):
        VGG16Features(random_init=True, resize="tf1", antialias=True)
    with pytest.raises(ValueError, match="antialias"):
        VGG16Features(random_init=True, antialias="yes")
    with pytest.raises(ValueError, match="quantisation"):
        VGG16Features(random_init=True, quantisation="nearest")
    with pytest.raises(ValueError, match="layer"):
        VGG16Features(random_init=True, layer="fc3")


def test_preprocessing_of_each_resize_mode(vgg_state):
    g = torch.Generator().manual_seed(4)
    images = torch.randint(0, 256, (2, 3, 37, 53), generator=g, dtype=torch.uint8)
    net = VGG16Features(vgg_state)
    assert (net.resize, net.quantisation, net.antialias) == ("antialias", "none", True)
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    for mode, antialias in (("antialias", True), ("bilinear", False)):
        resized = F.interpolate(images.float() / 255, size=(224, 224), mode="bilinear", antialias=antialias)
        for extractor in (VGG16Features(vgg_state, resize=mode), VGG16Features(vgg_state, antialias=antialias)):
            assert extractor.resize == mode
            torch.testing.assert_close(extractor.preprocess(images), (resized - mean) / std, rtol=0, atol=1e-5)
    tf1 = VGG16Features(vgg_state, resize="tf1")
    assert tf1.quantisation == "round"
    assert json.loads(json.dumps(tf1.preprocessing)) == tf1.preprocessing
    assert tf1.preprocessing["resize"] == "tf1" and tf1.preprocessing["normalisation"]["mean"][0] == 255 * 0.485
    assert net.preprocessing["resize"] == "torch-bilinear-antialias" and net.preprocessing["quantisation"] == "none"


def _tf1_oracle(x: np.ndarray, size: int) -> np.ndarray:
    """TensorFlow 1 resize_bilinear(align_corners=False): ``src = dst * float32(in / out)`` in float32 (as TF
    computes it), ``lo = floor(src)``, ``hi = min(lo + 1, in - 1)``; the interpolation in float64."""

    def axis(n_in):
        src = np.arange(size, dtype=np.float32) * np.float32(n_in / size)
        lo = np.floor(src).astype(int)
        return lo, np.minimum(lo + 1, n_in - 1), src - lo

    (ylo, yhi, dy), (xlo, xhi, dx) = axis(x.shape[-2]), axis(x.shape[-1])
    top = x[..., ylo, :][..., xlo] * (1 - dx) + x[..., ylo, :][..., xhi] * dx
    bottom = x[..., yhi, :][..., xlo] * (1 - dx) + x[..., yhi, :][..., xhi] * dx
    return top * (1 - dy[:, None]) + bottom * dy[:, None]


@pytest.mark.parametrize("side", [7, 32, 224, 512])
def test_tf1_network_input_against_a_float64_oracle(random_tf1, side):
    g = torch.Generator().manual_seed(side)
    images = torch.randint(0, 256, (1, 3, side, side + 3), generator=g, dtype=torch.uint8)
    net = random_tf1
    x = _tf1_oracle(images.double().numpy(), 224)
    mean, std = (255 * np.array(v).reshape(1, 3, 1, 1) for v in (IMAGENET_MEAN, IMAGENET_STD))
    expected = (x - mean) / std
    got = net.preprocess(images)
    assert got.dtype == torch.float32 and tuple(got.shape) == (1, 3, 224, 224)
    np.testing.assert_allclose(got.double().numpy(), expected, rtol=0, atol=1e-4)
    assert torch.equal(net.preprocess(images[:, :1]), net.preprocess(images[:, :1].repeat(1, 3, 1, 1)))


def test_tf1_float_input_is_quantised(random_tf1, vgg_state):
    g = torch.Generator().manual_seed(5)
    images = torch.randint(0, 256, (2, 3, 20, 20), generator=g, dtype=torch.uint8)
    x = torch.rand(2, 3, 20, 20, generator=g)
    net = random_tf1
    assert torch.equal(net.preprocess(images.float() / 255), net.preprocess(images))
    rounded = torch.from_numpy(np.floor(255 * x.double().numpy() + 0.5)).to(torch.uint8)
    assert torch.equal(net.preprocess(x), net.preprocess(rounded))
    truncated = torch.from_numpy(np.floor(255 * x.double().numpy())).to(torch.uint8)
    assert torch.equal(
        VGG16Features(vgg_state, resize="tf1", quantisation="floor").preprocess(x), net.preprocess(truncated)
    )
    unrounded = VGG16Features(vgg_state, resize="tf1", quantisation="none").preprocess(x)
    expected = (_tf1_oracle(255 * x.double().numpy(), 224) - 255 * np.array(IMAGENET_MEAN).reshape(1, 3, 1, 1)) / (
        255 * np.array(IMAGENET_STD).reshape(1, 3, 1, 1)
    )
    np.testing.assert_allclose(unrounded.double().numpy(), expected, rtol=0, atol=1e-4)


def test_weights_files_and_layers(random_tf1, vgg_state, tmp_path):
    images = torch.randint(0, 256, (2, 3, 32, 32), generator=torch.Generator().manual_seed(6), dtype=torch.uint8)
    path = tmp_path / "vgg16-397923af.pth"
    torch.save({"state_dict": vgg_state}, path)  # a wrapped state dict is unwrapped
    loaded = VGG16Features(path, resize="tf1")
    assert loaded.name == "vgg16" and loaded.weights_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert random_tf1.weights_sha256 is None
    feats = loaded(images)
    assert feats.shape == (2, 4096) and feats.dtype == torch.float32 and torch.equal(feats, random_tf1(images))
    del loaded
    fc2 = VGG16Features(vgg_state, resize="tf1", layer="fc2")
    assert fc2.weights_sha256 is None and torch.equal(torch.relu(fc2(images)), feats)
    assert list(fc2.net.state_dict())[:2] == ["features.0.weight", "features.0.bias"]
    assert not fc2.train().training and not any(p.requires_grad for p in fc2.parameters())
    broken = {k: v for k, v in vgg_state.items() if k != "classifier.6.weight"}
    with pytest.raises(ValueError, match=r"classifier\.6\.weight"):
        VGG16Features(broken)
