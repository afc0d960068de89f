"""FIDInceptionFeatures, the reference resizers and quantisation rules, and InceptionV3Features' refusal of FID weights.

Runs without torchvision and without any weights file: random weights saved in the test, float64 NumPy
oracles written from the TensorFlow-1, torch and Pillow resampling formulas, Pillow itself, and a
TorchScript stand-in with the call signature of NVlabs' ``inception-2015-12-05.pt``. The comparison with
torch-fidelity, pytorch-fid and clean-fid is ``tests/test_fid_inception_references.py``.
"""

import hashlib
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lightning_prd.features import hub_checkpoint_dir
from lightning_prd.features.fid_inception import FIDInceptionFeatures
from lightning_prd.features.inception import InceptionV3Features
from lightning_prd.features.resize import (
    quantise,
    resize_pil_bicubic,
    resize_tf1,
    resize_torch_bilinear,
)

PFID = "pt_inception-2015-12-05-6726825d.pth"
TFID = "weights-inception-2015-12-05-6726825d.pth"


@pytest.fixture
def empty_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    monkeypatch.setattr(torch.hub, "_hub_dir", None, raising=False)
    hub = hub_checkpoint_dir()
    hub.mkdir(parents=True)
    return hub


@pytest.fixture(scope="module")
def random_state():
    """A random FID Inception state dict in pytorch-fid's layout (with the batch-norm counters)."""
    return FIDInceptionFeatures(random_init=True, seed=3).net.state_dict()


# ---------------------------------------------------------------------------- float64 NumPy oracles
def tf1_oracle(x: np.ndarray, out_h: int, out_w: int, position=np.float32) -> np.ndarray:
    """TensorFlow 1 ``resize_bilinear(align_corners=False)``: src = dst * float32(in / out), edge-clamped.

    TF forms the position in float32 (``position``; torch-fidelity in the image's dtype, float64 for float64).
    """

    def axis(n_in, n_out):
        scale = np.float32(n_in / n_out)
        src = (np.arange(n_out, dtype=position) * position(scale)).astype(np.float64)
        lo = np.floor(src).astype(int)
        return lo, np.minimum(lo + 1, n_in - 1), src - lo

    ylo, yhi, dy = axis(x.shape[-2], out_h)
    xlo, xhi, dx = axis(x.shape[-1], out_w)
    x = x.astype(np.float64)
    top = x[..., ylo, :][..., xlo] * (1 - dx) + x[..., ylo, :][..., xhi] * dx
    bottom = x[..., yhi, :][..., xlo] * (1 - dx) + x[..., yhi, :][..., xhi] * dx
    return top * (1 - dy[:, None]) + bottom * dy[:, None]


def torch_bilinear_oracle(x: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Half-pixel bilinear (``align_corners=False``): src = max((dst + 0.5) in / out - 0.5, 0)."""

    def axis(n_in, n_out):
        scale = np.float32(n_in / n_out)  # torch forms the position in float32 for float32 images
        src = np.maximum(scale * (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) - np.float32(0.5), 0)
        src = src.astype(np.float64)
        lo = np.minimum(np.floor(src).astype(int), n_in - 1)
        return lo, np.minimum(lo + 1, n_in - 1), src - lo

    ylo, yhi, dy = axis(x.shape[-2], out_h)
    xlo, xhi, dx = axis(x.shape[-1], out_w)
    x = x.astype(np.float64)
    top = x[..., ylo, :][..., xlo] * (1 - dx) + x[..., ylo, :][..., xhi] * dx
    bottom = x[..., yhi, :][..., xlo] * (1 - dx) + x[..., yhi, :][..., xhi] * dx
    return top * (1 - dy[:, None]) + bottom * dy[:, None]


def pil_bicubic_oracle(x: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Pillow's separable bicubic (Keys a = -0.5, support 2 widened by the downscale factor), float64, loops."""

    def cubic(t):
        t = abs(t)
        if t < 1:
            return (1.5 * t - 2.5) * t * t + 1
        if t < 2:
            return ((-0.5 * t + 2.5) * t - 4) * t + 2
        return 0.0

    def matrix(n_in, n_out):
        scale = n_in / n_out
        stretch = max(scale, 1.0)
        support = 2.0 * stretch
        w = np.zeros((n_out, n_in))
        for i in range(n_out):
            centre = (i + 0.5) * scale
            first = max(int(centre - support + 0.5), 0)
            last = min(int(centre + support + 0.5), n_in)
            taps = [cubic((j - centre + 0.5) / stretch) for j in range(first, last)]
            w[i, first:last] = np.array(taps) / sum(taps)
        return w

    wy, wx = matrix(x.shape[-2], out_h), matrix(x.shape[-1], out_w)
    return wy @ x.astype(np.float64) @ wx.T


def _images(n, h, w, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, h, w), dtype=torch.uint8, generator=g)


# ---------------------------------------------------------------------------- resizers
SHAPES = [
    ((32, 32), (299, 299)),
    ((512, 512), (299, 299)),
    ((64, 40), (299, 299)),
    ((299, 299), (17, 61)),
    ((5, 3), (7, 9)),
]


@pytest.mark.parametrize(("shape_in", "shape_out"), SHAPES)
def test_resize_tf1_matches_the_tensorflow_formula(shape_in, shape_out):
    x = _images(2, *shape_in).float()
    ours = resize_tf1(x, shape_out).double().numpy()
    oracle = tf1_oracle(x.numpy(), *shape_out)
    assert ours.shape == (2, 3, *shape_out)
    np.testing.assert_allclose(ours, oracle, rtol=0, atol=255 * 1e-6)
    ours64 = resize_tf1(x.double(), shape_out).numpy()
    np.testing.assert_allclose(ours64, tf1_oracle(x.numpy(), *shape_out, position=np.float64), rtol=0, atol=1e-9)


def test_resize_tf1_has_no_half_pixel_offset_and_clamps_the_edge():
    row = torch.tensor([[[[0.0, 10.0, 20.0, 30.0]]]])
    assert resize_tf1(row, (1, 2)).flatten().tolist() == [0.0, 20.0]  # src = 0, 2: no (dst + 0.5) offset
    assert resize_tf1(row, (1, 8)).flatten().tolist()[-2:] == [30.0, 30.0]  # src = 3, 3.5 -> clamped to x[3]
    same = torch.rand(1, 3, 5, 6)
    assert resize_tf1(same, (5, 6)) is same
    assert resize_tf1(torch.zeros(0, 3, 4, 4), (2, 2)).shape == (0, 3, 2, 2)


@pytest.mark.parametrize(("shape_in", "shape_out"), SHAPES)
def test_resize_torch_bilinear_matches_the_half_pixel_formula(shape_in, shape_out):
    x = _images(2, *shape_in, seed=1).float() / 255
    ours = resize_torch_bilinear(x, shape_out).double().numpy()
    # torch's kernel rounds its float32 weights its own way: agreement to 1e-5 of the [0, 1] range
    np.testing.assert_allclose(ours, torch_bilinear_oracle(x.numpy(), *shape_out), rtol=0, atol=1e-5)


@pytest.mark.parametrize(("shape_in", "shape_out"), SHAPES)
def test_resize_pil_bicubic_matches_the_pillow_formula(shape_in, shape_out):
    x = _images(1, *shape_in, seed=2).float()
    ours = resize_pil_bicubic(x, shape_out).double().numpy()
    oracle = pil_bicubic_oracle(x.numpy(), *shape_out)
    np.testing.assert_allclose(ours, oracle, rtol=0, atol=255 * 1e-6)


@pytest.mark.parametrize("side", [32, 64, 256, 299, 512])
def test_resize_pil_bicubic_equals_pillow_on_clean_fid_sizes(side):
    Image = pytest.importorskip("PIL.Image", reason="needs Pillow")
    x = _images(1, side, side, seed=side)[0].float()
    theirs = np.stack(
        [np.asarray(Image.fromarray(c.numpy(), mode="F").resize((299, 299), resample=Image.BICUBIC)) for c in x]
    )
    ours = resize_pil_bicubic(x[None], (299, 299))[0].numpy()
    assert float(np.abs(ours - theirs).max()) <= 1e-4 * 255  # measured: bit-equal for square images


@pytest.mark.parametrize("resize", [resize_tf1, resize_torch_bilinear, resize_pil_bicubic])
def test_resizers_reject_bad_input(resize):
    with pytest.raises(ValueError, match="floating tensor"):
        resize(torch.zeros(1, 3, 4, 4, dtype=torch.uint8), (2, 2))
    with pytest.raises(ValueError, match="floating tensor"):
        resize(torch.zeros(3, 4, 4), (2, 2))
    with pytest.raises(ValueError, match="size"):
        resize(torch.zeros(1, 3, 4, 4), (0, 2))
    with pytest.raises(ValueError, match="size"):
        resize(torch.zeros(1, 3, 4, 4), (2, 2, 2))


# ---------------------------------------------------------------------------- quantisation
def test_quantise_rules_match_the_references_formulas():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(100_000, generator=g)
    on_grid = torch.arange(256, dtype=torch.float32) / 255
    # NVlabs: (img * 127.5 + 128).clamp(0, 255).to(uint8) on img in [-1, 1]
    nvlabs = ((2 * x - 1) * 127.5 + 128).clamp(0, 255).to(torch.uint8)
    away = ((255 * x.double()) % 1 - 0.5).abs() > 1e-4  # the two formulas may differ only at a half step
    assert torch.equal(quantise(x, "round")[away], nvlabs[away])
    assert quantise(on_grid, "round").tolist() == list(range(256))
    # torch-fidelity's example: (255 * (img.clamp(-1, 1) * 0.5 + 0.5)).to(uint8)
    fidelity = (255 * ((2 * x - 1).clamp(-1, 1) * 0.5 + 0.5)).to(torch.uint8)
    off = ((255 * x.double()) % 1).clamp(1e-4, 1 - 1e-4) == ((255 * x.double()) % 1)
    assert torch.equal(quantise(x, "floor")[off], fidelity[off])
    expected = np.floor(255 * x.double().numpy()).astype(np.uint8)
    assert np.array_equal(quantise(x, "floor").numpy()[off.numpy()], expected[off.numpy()])
    none = quantise(x, "none")
    assert none.dtype == torch.float32 and torch.equal(none, x * 255)
    assert quantise(torch.tensor([-0.2, 1.3]), "round").tolist() == [0, 255]


def test_quantise_rejects_bad_arguments():
    with pytest.raises(ValueError, match="`rule`"):
        quantise(torch.zeros(2), "nearest")
    with pytest.raises(TypeError, match="floating"):
        quantise(torch.zeros(2, dtype=torch.uint8), "round")


# ---------------------------------------------------------------------------- weights
def _fid_file(path, state, counters=True):
    """``state`` saved with (pytorch-fid's layout) or without (torch-fidelity's) the batch-norm counters."""
    torch.save(state if counters else {k: v for k, v in state.items() if "num_batches_tracked" not in k}, path)
    return path


def test_both_key_layouts_load_and_agree(tmp_path, random_state):
    with_counters = _fid_file(tmp_path / PFID, random_state)
    without = _fid_file(tmp_path / TFID, random_state, counters=False)
    for path in (with_counters, without):
        net = FIDInceptionFeatures(path)
        loaded = net.net.state_dict()
        assert set(loaded) == set(random_state)
        assert all(torch.equal(loaded[k], v) for k, v in random_state.items() if "num_batches_tracked" not in k)
        assert net.weights_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert net.name == "fid-inception"
    in_memory = FIDInceptionFeatures(dict(random_state))
    assert in_memory.weights_sha256 is None
    assert torch.equal(in_memory.net.fc.weight, random_state["fc.weight"])


def test_mismatched_state_dicts_name_the_keys(tmp_path, random_state):
    broken = {k: v for k, v in random_state.items() if k != "Mixed_6d.branch1x1.conv.weight"}
    broken["head.extra.weight"] = torch.zeros(3)
    path = _fid_file(tmp_path / "broken.pth", broken)
    with pytest.raises(ValueError) as err:
        FIDInceptionFeatures(path)
    message = str(err.value)
    assert "Mixed_6d.branch1x1.conv.weight" in message and "head.extra.weight" in message
    assert "tensor(" not in message and "broken.pth" in message
    imagenet = dict(random_state, **{"fc.weight": torch.zeros(1000, 2048), "fc.bias": torch.zeros(1000)})
    with pytest.raises(ValueError, match=r"1000-class classifier.*get_extractor\('inception'\)") as err:
        FIDInceptionFeatures(_fid_file(tmp_path / "imagenet.pth", imagenet))
    assert "tensor(" not in str(err.value)


def test_hub_lookup_order_and_missing_file(empty_hub, random_state):
    with pytest.raises(FileNotFoundError, match="pt_inception-2015-12-05-6726825d.pth") as err:
        FIDInceptionFeatures()
    assert "mseitzer/pytorch-fid/releases" in str(err.value)
    fidelity = _fid_file(empty_hub / TFID, random_state, counters=False)
    assert FIDInceptionFeatures().weights_sha256 == hashlib.sha256(fidelity.read_bytes()).hexdigest()
    pfid = _fid_file(empty_hub / PFID, random_state)  # pytorch-fid's name comes first
    assert FIDInceptionFeatures().weights_sha256 == hashlib.sha256(pfid.read_bytes()).hexdigest()


def test_random_init_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b = FIDInceptionFeatures(random_init=True, seed=1), FIDInceptionFeatures(random_init=True, seed=1)
    assert torch.equal(torch.random.get_rng_state(), state)
    c = FIDInceptionFeatures(random_init=True, seed=2)
    w = "Mixed_7c.branch_pool.conv.weight"
    assert torch.equal(a.net.state_dict()[w], b.net.state_dict()[w])
    assert not torch.equal(a.net.state_dict()[w], c.net.state_dict()[w])
    assert a.weights_sha256 is None
    with pytest.raises(ValueError, match="both"):
        FIDInceptionFeatures("x.pth", random_init=True)


# ---------------------------------------------------------------------------- outputs and input contract
def test_logits_and_sfid_spatial_features():
    net = FIDInceptionFeatures(random_init=True, logits=True, seed=5)
    seen = {}
    hook = net.net.Mixed_6d.branch1x1.register_forward_hook(lambda m, a, out: seen.setdefault("x", out.clone()))
    x = _images(1, 50, 70, seed=4)
    out = net(x)
    hook.remove()
    assert set(out) == {"pool", "logits", "spatial"}
    branch = seen["x"].double().numpy()  # [B, 192, 17, 17], the graph's mixed_6/conv
    oracle = np.transpose(branch[:, :7], (0, 2, 3, 1)).reshape(1, -1)  # TF's NHWC order, flattened
    np.testing.assert_array_equal(out["spatial"].double().numpy(), oracle)
    assert out["spatial"].shape == (1, 17 * 17 * 7)
    w = net.net.fc.weight.double().numpy()
    logits = out["pool"].double().numpy() @ w.T  # no fc bias, as every Inception Score uses them
    np.testing.assert_allclose(out["logits"].double().numpy(), logits, rtol=1e-5, atol=1e-5)
    net.logits = False  # the same network, pool features only
    assert net(torch.zeros(0, 3, 8, 8, dtype=torch.uint8)).shape == (0, 2048)


def test_input_contract_and_quantisation_per_mode():
    tf1 = FIDInceptionFeatures(random_init=True)
    gray = _images(1, 30, 30, seed=6)[:, :1]
    assert torch.equal(tf1.preprocess(gray), tf1.preprocess(gray.expand(-1, 3, -1, -1)))
    assert torch.equal(tf1.preprocess(gray[:, 0]), tf1.preprocess(gray))
    floats = torch.rand(1, 3, 30, 30, generator=torch.Generator().manual_seed(1))
    # tf1: float input quantised by torch-fidelity's example rule (floor), then as uint8
    assert torch.equal(tf1.preprocess(floats), tf1.preprocess((255 * floats).to(torch.uint8)))
    rounding = FIDInceptionFeatures(random_init=True, quantisation="round")
    assert torch.equal(rounding.preprocess(floats), rounding.preprocess(quantise(floats, "round")))
    assert rounding.preprocessing["quantisation"] == "round"
    x8 = _images(1, 30, 30, seed=7)
    expected = (tf1_oracle(x8.numpy(), 299, 299) - 128) / 128
    np.testing.assert_allclose(tf1.preprocess(x8).double().numpy(), expected, rtol=0, atol=1e-5)
    pfid = FIDInceptionFeatures(random_init=True, resize="pytorch-fid")
    assert pfid.preprocessing["quantisation"] == "none"
    expected = 2 * torch_bilinear_oracle(floats.numpy(), 299, 299) - 1  # floats used as they are
    np.testing.assert_allclose(pfid.preprocess(floats).double().numpy(), expected, rtol=0, atol=1e-5)
    expected = 2 * torch_bilinear_oracle(x8.numpy() / 255, 299, 299) - 1
    np.testing.assert_allclose(pfid.preprocess(x8).double().numpy(), expected, rtol=0, atol=1e-5)
    clean = FIDInceptionFeatures(random_init=True, resize="clean")
    expected = (np.clip(pil_bicubic_oracle(255 * floats.numpy().astype(np.float64), 299, 299), 0, 255) - 128) / 128
    np.testing.assert_allclose(clean.preprocess(floats).double().numpy(), expected, rtol=0, atol=1e-4)
    assert clean.preprocessing == {
        "resize": "clean",
        "quantisation": "none",
        "input_size": [299, 299],
        "normalisation": "(x - 128) / 128 on 0..255",
        "network": "state-dict",
    }


def test_bad_input_and_options_raise():
    net = FIDInceptionFeatures(random_init=True)
    with pytest.raises(ValueError, match="channels last"):
        net(torch.zeros(1, 8, 8, 3, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        net(torch.full((1, 3, 8, 8), 2.0))
    with pytest.raises(TypeError, match="dtype"):
        net(torch.zeros(1, 3, 8, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match="`resize`"):
        FIDInceptionFeatures(random_init=True, resize="bilinear")
    with pytest.raises(ValueError, match="`logits`"):
        FIDInceptionFeatures(random_init=True, logits="yes")
    with pytest.raises(ValueError, match="`quantisation`"):
        FIDInceptionFeatures(random_init=True, quantisation="nearest")
    assert not net.training and not any(p.requires_grad for p in net.parameters())
    net.train()
    assert not net.training


# ---------------------------------------------------------------------------- NVlabs' TorchScript file
class _StandIn(torch.nn.Module):
    """NVlabs' inception-2015-12-05.pt interface: uint8 images in, resize and normalisation inside."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = _StandInLayers()

    def forward(
        self, img: torch.Tensor, return_features: bool = False, use_fp16: bool = False, no_output_bias: bool = False
    ) -> torch.Tensor:
        if img.dtype != torch.uint8:
            raise RuntimeError("expected uint8 images")
        x = F.interpolate(img.to(torch.float32), size=[299, 299], mode="bilinear", align_corners=False)
        features = self.layers((x - 128) / 128).reshape(-1, 2048)
        if return_features:
            return features
        return torch.softmax(features[:, :1008], dim=1)  # the probabilities: a different shape


class _StandInLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(12, 2048)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stats = torch.cat([x.mean(dim=(2, 3)), x.std(dim=(2, 3)), x.amax(dim=(2, 3)), x[:, :, 150, 150]], 1)
        return self.proj(stats)[:, :, None, None]


@pytest.fixture
def standin_file(tmp_path):
    torch.manual_seed(0)
    module = torch.jit.script(_StandIn())
    path = tmp_path / "inception-2015-12-05.pt"
    torch.jit.save(module, str(path))
    return path, torch.jit.load(str(path))


def test_torchscript_is_driven_as_nvlabs_and_clean_fid_drive_it(standin_file):
    path, module = standin_file
    x8 = _images(3, 40, 52, seed=8)
    floats = torch.rand(2, 3, 40, 52, generator=torch.Generator().manual_seed(2))
    nvlabs = FIDInceptionFeatures(path)  # resize="tf1": the network resizes inside
    assert nvlabs.weights_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert nvlabs.preprocessing["network"] == "torchscript"
    with torch.no_grad():
        assert torch.equal(nvlabs(x8), module(x8, return_features=True))
        assert torch.equal(nvlabs(floats), module((255 * floats).to(torch.uint8), return_features=True))
        rounding = FIDInceptionFeatures(path, quantisation="round")
        assert torch.equal(rounding(floats), module(quantise(floats, "round"), return_features=True))
        clean = FIDInceptionFeatures(path, resize="clean")  # clean-fid: PIL resize here, then layers
        resized = resize_pil_bicubic(x8.float(), (299, 299)).clamp(0, 255)
        expected = module.layers.forward((resized - 128) / 128).view(3, 2048)
        assert torch.equal(clean(x8), expected)
    assert nvlabs(x8[:0]).shape == (0, 2048)


def test_torchscript_refuses_what_it_cannot_give(standin_file, torchvision_importable):
    path, _ = standin_file
    with pytest.raises(ValueError, match="pytorch-fid"):
        FIDInceptionFeatures(path, resize="pytorch-fid")
    with pytest.raises(ValueError, match="`logits`"):
        FIDInceptionFeatures(path, logits=True)
    with pytest.raises(ValueError, match="TorchScript"):
        InceptionV3Features(weights=path)


# ---------------------------------------------------------------------------- "inception" refuses FID weights
def test_inception_refuses_the_fid_weights(tmp_path, empty_hub, random_state, torchvision_importable):
    path = _fid_file(tmp_path / PFID, random_state)
    with pytest.raises(ValueError, match=r"fid-inception") as err:
        InceptionV3Features(weights=str(path))
    assert "FIDInceptionFeatures" in str(err.value) and "tensor(" not in str(err.value)
    with pytest.raises(ValueError, match="1,008"):
        InceptionV3Features(weights=dict(random_state))
    _fid_file(empty_hub / TFID, random_state, counters=False)
    with pytest.raises(ValueError, match=r"holds weights-inception-2015-12-05-6726825d\.pth.*fid-inception"):
        InceptionV3Features()


def test_network_shape_is_the_fid_graph():
    net = FIDInceptionFeatures(random_init=True).net
    assert net.Mixed_7b.pool == "avg" and net.Mixed_7c.pool == "max"
    bns = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(bns) == len(convs) == 94 and all(math.isclose(b.eps, 1e-3) for b in bns)
    assert all(c.bias is None for c in convs)
    n_params = sum(p.numel() for p in net.parameters())
    assert n_params == 23_850_960  # torchvision 0.29 Inception3(num_classes=1008, aux_logits=False).parameters()
