"""Feature extractors: the protocol, Identity, image preprocessing, batched extraction, weights errors.

No test downloads anything; torchvision-based adapters are exercised only when torchvision
is installed, with random weights or a state dict saved in the test.
"""

import os
import sys
import types

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.features import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    FeatureExtractor,
    Identity,
    RandomConvNet,
    as_float_images,
    available_extractors,
    extract_features,
    get_extractor,
    hub_checkpoint_dir,
    num_features_of,
    preprocess_images,
    register_extractor,
)
from lightning_prd.features.images import resolve_weights


@pytest.fixture
def empty_hub(tmp_path, monkeypatch):
    """torch's hub cache pointed at an empty folder."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    monkeypatch.setattr(torch.hub, "_hub_dir", None, raising=False)
    assert str(hub_checkpoint_dir()).startswith(str(tmp_path))
    return hub_checkpoint_dir()


# ---------------------------------------------------------------------------- protocol, Identity
def test_protocol_attributes():
    assert issubclass(Identity, FeatureExtractor) and issubclass(RandomConvNet, FeatureExtractor)
    ident = Identity()
    assert (ident.num_features, ident.input_dtype, ident.input_range, ident.input_size) == (None, None, None, None)
    net = RandomConvNet(num_features=6, size=(20, 24))
    assert net.num_features == 6 and num_features_of(net) == 6
    assert net.input_dtype == torch.uint8 and net.input_range == (0.0, 1.0) and net.input_size == (20, 24)
    assert "input_size=(20, 24)" in repr(net)


def test_identity_passes_features_through():
    x = torch.randn(5, 3)
    assert torch.equal(Identity()(x), x)
    assert torch.equal(Identity(3)(x), x)
    assert Identity()(torch.zeros(4, 2, 3)).shape == (4, 6)
    assert Identity()(np.ones((2, 2))).shape == (2, 2)
    with pytest.raises(ValueError, match="Expected 4 features"):
        Identity(4)(x)
    with pytest.raises(ValueError, match="shape"):
        Identity()(torch.zeros(3))
    with pytest.raises(ValueError, match="num_features"):
        Identity(0)


# ---------------------------------------------------------------------------- preprocessing
def test_uint8_and_float_inputs_agree():
    gen = torch.Generator().manual_seed(0)
    x8 = torch.randint(0, 256, (2, 3, 10, 12), dtype=torch.uint8, generator=gen)
    xf = x8.float() / 255
    a = preprocess_images(x8, size=16)
    b = preprocess_images(xf, size=16)
    assert a.shape == (2, 3, 16, 16) and a.dtype == torch.float32
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(as_float_images(x8), xf)


def test_imagenet_normalisation_values():
    x = torch.full((1, 3, 4, 4), 0.5)
    out = preprocess_images(x, size=4)  # no resize
    expected = (0.5 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)
    torch.testing.assert_close(out[0, :, 0, 0], expected)
    out = preprocess_images(torch.full((1, 3, 4, 4), 255, dtype=torch.uint8), size=4, mean=(0.5,) * 3, std=(0.5,) * 3)
    assert torch.all(out == 1.0)


def test_resize_bilinear_antialias():
    x = torch.rand(1, 3, 64, 48)
    out = preprocess_images(x, size=(16, 8), mean=(0, 0, 0), std=(1, 1, 1))
    ref = torch.nn.functional.interpolate(x, size=(16, 8), mode="bilinear", align_corners=False, antialias=True)
    assert out.shape == (1, 3, 16, 8)
    torch.testing.assert_close(out, ref)
    # a constant image stays constant whatever the resize
    const = preprocess_images(torch.full((1, 3, 7, 9), 0.25), size=32, mean=(0, 0, 0), std=(1, 1, 1))
    torch.testing.assert_close(const, torch.full_like(const, 0.25))


def test_grayscale_repeated_to_three_channels():
    gray = torch.randint(0, 256, (2, 1, 8, 8), dtype=torch.uint8)
    out = preprocess_images(gray, size=8, mean=(0, 0, 0), std=(1, 1, 1))
    assert out.shape == (2, 3, 8, 8)
    assert torch.equal(out[:, 0], out[:, 1]) and torch.equal(out[:, 1], out[:, 2])
    torch.testing.assert_close(preprocess_images(gray[:, 0], size=8), preprocess_images(gray, size=8))  # [B, H, W]


@pytest.mark.parametrize(
    ("images", "error", "match"),
    [
        (torch.rand(2, 3, 8, 8) * 255, ValueError, r"\[0, 1\]"),
        (torch.rand(2, 3, 8, 8) - 0.5, ValueError, r"\[0, 1\]"),
        (torch.randint(0, 255, (2, 3, 8, 8)), TypeError, "int64"),
        (torch.rand(2, 8, 8, 3), ValueError, "channels last"),
        (torch.rand(2, 4, 8, 8), ValueError, "C = 1 or 3"),
        (torch.rand(8, 8), ValueError, "shape"),
    ],
)
def test_bad_images_raise(images, error, match):
    with pytest.raises(error, match=match):
        as_float_images(images)


def test_preprocess_rejects_bad_options():
    with pytest.raises(ValueError, match="mode"):
        preprocess_images(torch.rand(1, 3, 4, 4), size=4, mode="nearest")
    with pytest.raises(ValueError, match="size"):
        preprocess_images(torch.rand(1, 3, 4, 4), size=(4, 4, 4))


# ---------------------------------------------------------------------------- tiny extractor, extraction
def test_random_cnn_shapes_determinism_and_inputs():
    a, b = RandomConvNet(num_features=8, size=16, seed=3), RandomConvNet(num_features=8, size=16, seed=3)
    x8 = torch.randint(0, 256, (5, 3, 30, 20), dtype=torch.uint8)
    fa = a(x8)
    assert fa.shape == (5, 8)
    torch.testing.assert_close(fa, b(x8))
    torch.testing.assert_close(fa, a(x8.float() / 255))
    assert not torch.allclose(fa, RandomConvNet(num_features=8, size=16, seed=4)(x8))
    assert not any(p.requires_grad for p in a.parameters())
    a.train()
    assert not a.training  # frozen extractors stay in eval mode


def test_extract_features_tensor_and_loader_batch_independent():
    net = RandomConvNet(num_features=4, size=8)
    images = torch.randint(0, 256, (11, 3, 8, 8), dtype=torch.uint8)
    whole = net(images)
    torch.testing.assert_close(extract_features(net, images, batch_size=3), whole)
    loader = DataLoader(TensorDataset(images, torch.zeros(11)), batch_size=4)
    torch.testing.assert_close(extract_features(net, loader, progress=True), whole)
    torch.testing.assert_close(extract_features(net, [images[:5], images[5:]]), whole)
    torch.testing.assert_close(extract_features(net, images.numpy()), whole)


def test_extract_features_no_grad_and_restores_mode():
    lin = nn.Linear(3, 2)
    lin.train()
    out = extract_features(lin, torch.randn(4, 3), batch_size=2)
    assert out.shape == (4, 2) and not out.requires_grad
    assert lin.training
    out = extract_features(lambda x: x * 2, torch.ones(3, 2))  # plain callables work too
    torch.testing.assert_close(out, torch.full((3, 2), 2.0))


def test_extract_features_errors():
    with pytest.raises(ValueError, match="at least one sample"):
        extract_features(Identity(), torch.zeros(0, 3))
    with pytest.raises(ValueError, match=r"\[2, D\]"):
        extract_features(lambda x: x.sum(), torch.ones(2, 3))
    with pytest.raises(TypeError, match="tensor"):
        extract_features(lambda x: x.tolist(), torch.ones(2, 3))
    with pytest.raises(TypeError, match="callable"):
        extract_features(3, torch.ones(2, 3))
    with pytest.raises(TypeError, match="DataLoader"):
        extract_features(Identity(), "images/")
    with pytest.raises(ValueError, match="batch_size"):
        extract_features(Identity(), torch.ones(2, 3), batch_size=0)


# ---------------------------------------------------------------------------- registry
def test_registry_names_and_import_spec():
    names = available_extractors()
    assert {"identity", "inception", "vgg16", "dinov2", "clip", "random-cnn"} <= set(names)
    assert isinstance(get_extractor("identity"), Identity)
    assert isinstance(get_extractor("none", num_features=3), Identity)
    net = get_extractor("random", num_features=5, device="cpu")
    assert net.num_features == 5 and not net.training
    assert isinstance(get_extractor("lightning_prd.features:Identity"), Identity)
    with pytest.raises(ValueError, match="identity"):
        get_extractor("no-such-net")
    with pytest.raises(ValueError, match="Cannot import"):
        get_extractor("no_such_module_xyz:factory")
    with pytest.raises(ValueError, match="no attribute"):
        get_extractor("lightning_prd.features:NoSuchThing")
    with pytest.raises(ValueError, match="takes no weights"):
        get_extractor("identity", weights="w.pth")
    with pytest.raises(TypeError, match="string"):
        get_extractor(Identity())


def test_register_extractor():
    register_extractor("test-double", lambda weights=None, **o: Identity(**o), overwrite=True)
    assert get_extractor("test-double", num_features=2).num_features == 2
    with pytest.raises(ValueError, match="already registered"):
        register_extractor("identity", Identity)
    with pytest.raises(ValueError, match="name"):
        register_extractor("a:b", Identity)


# ---------------------------------------------------------------------------- weights (torchvision found or stood in)
@pytest.mark.parametrize(
    ("name", "filename", "url"),
    [
        (
            "inception",
            "inception_v3_google-0cc3c7bd.pth",
            "https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth",
        ),
        ("vgg16", "vgg16-397923af.pth", "https://download.pytorch.org/models/vgg16-397923af.pth"),
    ],
)
def test_missing_weights_message_says_what_and_where(empty_hub, torchvision_importable, name, filename, url):
    with pytest.raises(FileNotFoundError) as info:
        get_extractor(name)
    message = str(info.value)
    assert filename in message and url in message
    assert str(empty_hub / filename) in message
    assert "--weights" in message and "\n" not in message


def test_missing_weights_file_names_the_path(tmp_path, empty_hub, torchvision_importable):
    missing = tmp_path / "nope.pth"
    with pytest.raises(FileNotFoundError, match="nope.pth") as info:
        get_extractor("inception", weights=str(missing))
    assert "inception_v3_google-0cc3c7bd.pth" in str(info.value)


def test_resolve_weights_finds_hub_cache_and_local_files(tmp_path, empty_hub):
    kw = dict(model="M", filename="m.pth", url="https://example.invalid/m.pth")
    assert resolve_weights(None, random_init=True, **kw) is None
    with pytest.raises(ValueError, match="both"):
        resolve_weights("x.pth", random_init=True, **kw)
    empty_hub.mkdir(parents=True)
    (empty_hub / "alt.pth").write_bytes(b"")
    assert resolve_weights(None, random_init=False, also=("alt.pth",), **kw) == empty_hub / "alt.pth"
    local = tmp_path / "w.pth"
    local.write_bytes(b"")
    assert resolve_weights(str(local), random_init=False, **kw) == local
    state = {"w": torch.zeros(1)}
    assert resolve_weights(state, random_init=False, **kw) is state


# ---------------------------------------------------------------------------- torchvision: what to install
@pytest.mark.parametrize(
    ("torch_version", "command"),
    [
        ("2.13.0+cpu", "pip install torchvision==0.28.0 --index-url https://download.pytorch.org/whl/cpu"),
        ("2.14.1", "pip install torchvision==0.29.1"),
        ("2.9.1+cu128", "pip install torchvision==0.24.1 --index-url https://download.pytorch.org/whl/cu128"),
        ("2.1.2", "pip install torchvision==0.16.2"),
        ("2.6.0+rocm6.1", "pip install torchvision==0.21.0 --index-url https://download.pytorch.org/whl/rocm6.1"),
    ],
)
def test_the_torchvision_command_keeps_the_installed_torch(monkeypatch, torchvision_missing, torch_version, command):
    monkeypatch.setattr(torch, "__version__", torch_version)
    with pytest.raises(ImportError) as info:
        get_extractor("inception", random_init=True)
    message = str(info.value)
    assert f": {command} (" in message and f"torch {torch_version}" in message and "\n" not in message
    assert "lightning-prd[images]" not in message and "'[images]'" not in message


@pytest.mark.parametrize("torch_version", ["2.15.0.dev20261201+cpu", "2.0.1", "2.14.0a0+git1234abc"])
def test_a_torch_outside_the_release_pattern_gets_no_pinned_command(monkeypatch, torchvision_missing, torch_version):
    monkeypatch.setattr(torch, "__version__", torch_version)
    with pytest.raises(ImportError) as info:
        get_extractor("inception", random_init=True)
    message = str(info.value)
    assert f"the torchvision release built for torch {torch_version}" in message
    assert "torchvision==" not in message and "lightning-prd[images]" not in message


def test_torchvision_is_checked_before_the_weights(tmp_path, empty_hub, torchvision_missing, monkeypatch):
    """Missing weights and missing torchvision: torchvision is reported, so the user installs it first."""
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    for kwargs in ({}, {"weights": str(tmp_path / "missing.pth")}):  # hub cache empty; a file that is not there
        with pytest.raises(ImportError, match=r"needs torchvision.*torchvision==0\.28\.0"):
            get_extractor("inception", **kwargs)
    empty_hub.mkdir(parents=True)
    (empty_hub / "pt_inception-2015-12-05-6726825d.pth").write_bytes(b"")  # only the FID weights in the hub
    with pytest.raises(ImportError, match="needs torchvision"):
        get_extractor("inception")


def test_dinov2_needs_local_repo(tmp_path, empty_hub):
    with pytest.raises(FileNotFoundError, match="git clone https://github.com/facebookresearch/dinov2"):
        get_extractor("dinov2")
    with pytest.raises(ValueError, match="arch"):
        get_extractor("dinov2", arch="vit-huge")


def test_dinov2_from_a_local_hub_repo(tmp_path, empty_hub):
    """The adapter's wiring, with a stand-in hub repository (a tiny model under the dinov2 entry name)."""
    repo = tmp_path / "dinov2_repo"
    repo.mkdir()
    (repo / "hubconf.py").write_text(
        "import torch\n"
        "dependencies = ['torch']\n"
        "def dinov2_vits14(pretrained=True):\n"
        "    assert not pretrained\n"
        "    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 384))\n"
    )
    net = get_extractor("dinov2", arch="vits14", repo_dir=repo, random_init=True)
    assert net.num_features == 384 and net.input_size == (224, 224)
    assert net(torch.randint(0, 256, (2, 3, 30, 30), dtype=torch.uint8)).shape == (2, 384)
    with pytest.raises(FileNotFoundError, match="dinov2_vits14_pretrain.pth"):
        get_extractor("dinov2", arch="vits14", repo_dir=repo)
    weights = tmp_path / "w.pth"
    torch.save(net.net.state_dict(), weights)
    loaded = get_extractor("dinov2", arch="vits14", repo_dir=repo, weights=str(weights))
    images = torch.rand(2, 3, 16, 16)
    torch.testing.assert_close(loaded(images), net(images))


def test_clip_errors_and_wiring(monkeypatch, tmp_path, open_clip_importable):
    with pytest.raises(FileNotFoundError, match="open_clip_model.safetensors"):  # the default arch's file (CMMD's)
        get_extractor("clip")
    with pytest.raises(ValueError, match="one of"):
        get_extractor("clip", weights="a.bin", random_init=True)
    monkeypatch.setitem(sys.modules, "open_clip", None)  # makes `import open_clip` fail
    with pytest.raises(ImportError, match="open_clip_torch"):
        get_extractor("clip", random_init=True)

    class FakeVisual(nn.Module):  # open_clip's image tower: `visual(x)` is `encode_image(x)` before normalising
        image_size, output_dim = 32, 7

        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(3, 7)

        def forward(self, x):
            return self.proj(x.mean(dim=(2, 3)))

    class FakeCLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = FakeVisual()

    calls = []
    fake_module = types.SimpleNamespace(
        create_model=lambda arch, pretrained=None: calls.append((arch, pretrained)) or FakeCLIP()
    )
    monkeypatch.setitem(sys.modules, "open_clip", fake_module)
    weights = tmp_path / "clip.bin"
    weights.write_bytes(b"")
    net = get_extractor("clip", weights=str(weights), arch="ViT-X")
    assert calls == [("ViT-X", str(weights))]
    assert net.num_features == 7 and net.input_size == (32, 32)
    assert net(torch.randint(0, 256, (3, 1, 40, 40), dtype=torch.uint8)).shape == (3, 7)


# ---------------------------------------------------------------------------- torchvision adapters
def test_inception_adapter_random_and_loaded(tmp_path):
    pytest.importorskip("torchvision")
    from lightning_prd.features.inception import InceptionV3Features

    net = InceptionV3Features(random_init=True)
    assert net.num_features == 2048 and net.input_size == (299, 299)
    images = torch.randint(0, 256, (2, 3, 64, 64), dtype=torch.uint8)
    out = net(images)
    assert out.shape == (2, 2048)
    torch.testing.assert_close(out, net(images.float() / 255))
    import torchvision

    full = torchvision.models.inception.Inception3(aux_logits=True, init_weights=False)
    path = tmp_path / "inception_v3_google-0cc3c7bd.pth"
    torch.save(full.state_dict(), path)
    loaded = InceptionV3Features(weights=str(path))
    assert loaded(images).shape == (2, 2048)


def test_vgg_adapter_random_and_loaded(tmp_path):
    pytest.importorskip("torchvision")
    from lightning_prd.features.vgg import VGG16Features

    net = VGG16Features(random_init=True)
    images = torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8)
    out = net(images)
    assert out.shape == (1, 4096) and bool((out >= 0).all())  # after the ReLU
    path = tmp_path / "vgg16-397923af.pth"
    import torchvision

    torch.save(torchvision.models.vgg16(weights=None).state_dict(), path)
    pre = VGG16Features(weights=str(path), layer="fc2")
    assert pre(images).shape == (1, 4096)
    with pytest.raises(ValueError, match="layer"):
        VGG16Features(random_init=True, layer="fc3")


# ---------------------------------------------------------------------------- weights files that cannot serve
def test_a_weights_path_that_is_no_file_says_what_it_is(tmp_path, empty_hub, paths_that_are_no_file):
    kw = dict(model="M", filename="m.pth", url="https://example.invalid/m.pth", random_init=False)
    for path, error, what in paths_that_are_no_file:
        with pytest.raises(error) as info:
            resolve_weights(str(path), **kw)
        text = str(info.value)
        assert f"{str(path)!r} {what}" in text and "expected the file `m.pth` there" in text, text
        assert "\n" not in text
    with pytest.raises(ValueError, match="folder' is a directory; expected the file `vgg16.pt` there"):
        get_extractor("vgg16-nvlabs", weights=tmp_path / "folder")


class _System:
    def __reduce__(self):
        return (os.system, ("true",))


class _Allocates:
    def __reduce__(self):
        return (bytearray, (1 << 30,))


@pytest.mark.parametrize("payload, refused", [(_System, f"{os.system.__module__}.system"), (_Allocates, "bytearray")])
def test_a_hostile_weights_file_is_refused_in_one_line(tmp_path, empty_hub, payload, refused):
    path = tmp_path / "weights.pth"
    torch.save({"Conv2d_1a_3x3.conv.weight": torch.zeros(1), "extra": payload()}, path)
    with pytest.raises(ValueError) as info:
        get_extractor("fid-inception", weights=path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text and "refused" in text and refused in text, text
    assert "weights_only=False" not in text and "`weights_only` set to `False`" not in text and len(text) < 400
