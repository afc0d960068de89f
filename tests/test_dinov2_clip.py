"""DINOv2 (FD_DINOv2) and CLIP (CMMD) extractors against the references' own preprocessing steps.

References, written out here as oracles (none is pip-installable as used; each step cites its file):

* EDM2 (NVlabs/edm2 @ 4bf8162f, ``calculate_metrics.py`` lines 62-80, ``DINOv2Detector.__call__``):
  ``resize_mode="torch"``: ``interpolate(x.to(float32), (224, 224), bicubic, antialias=True)``, ``/ 255``,
  ``- mean``, ``/ std``; ``resize_mode="pil"`` (lines 64-68): ``PIL.Image.fromarray(x, "RGB").resize((224,
  224), BICUBIC)`` per image. Generator output to uint8: ``training/encoders.py`` line 73 (pixel space,
  ``(x * 127.5 + 128).clip(0, 255).to(uint8)``) and line 131 (latent models, ``x.clamp(0, 1).mul(255)``).
* dgm-eval (layer6ai-labs/dgm-eval @ 74c79f75, ``dgm_eval/models/dinov2.py`` ``DINOv2Encoder.transform``):
  ``TF.Resize((224, 224), BICUBIC)`` of the PIL image, ``TF.ToTensor()``, ``TF.Normalize(mean, std)``.
* CMMD (sayakpaul/cmmd-pytorch @ f7673a9f, a port of google-research ``cmmd``): ``io_util.py``
  ``_center_crop_and_resize`` (largest centred square, ``im.resize((336, 336), BICUBIC)``), ``/ 255``;
  ``embedding.py``: CLIP mean/std, ``image_embeds / norm``.
* open_clip's own evaluation transform, ``open_clip.image_transform(size, is_train=False)`` (tvenv only:
  open_clip imports torchvision).

The network is the same module on both sides (a small random ViT from a stand-in hub repository written
to a temporary folder, or a random open_clip model), so equal inputs give equal features.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lightning_prd.features import get_extractor
from lightning_prd.features.clip import CLIP_MEAN, CLIP_STD, CLIPFeatures, clip_preprocess
from lightning_prd.features.dino_clip import pil_bicubic_uint8
from lightning_prd.features.dinov2 import DINOv2Features

PIL = pytest.importorskip("PIL.Image", reason="Pillow is the reference of the PIL-mode resizes")
HAS_OPEN_CLIP = importlib.util.find_spec("open_clip") is not None
needs_open_clip = pytest.mark.skipif(not HAS_OPEN_CLIP, reason="open_clip (and torchvision) not installed")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SIZES = [(32, 32), (256, 256), (512, 512), (300, 200), (141, 380), (224, 224)]

HUBCONF = textwrap.dedent(
    '''
    import torch
    from torch import nn


    class TinyViT(nn.Module):
        """A small ViT with DINOv2's interface: 224 x 224 input, 14 px patches, the normalised CLS token."""

        def __init__(self, dim):
            super().__init__()
            self.embed_dim = dim
            self.patch_embed = nn.Conv2d(3, dim, 14, 14)
            self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
            self.pos_embed = nn.Parameter(torch.randn(1, 16 * 16 + 1, dim) * 0.02)
            self.block = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.0, batch_first=True, norm_first=True)
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            tokens = self.patch_embed(x).flatten(2).transpose(1, 2)
            tokens = torch.cat([self.cls_token.expand(len(tokens), -1, -1), tokens], 1) + self.pos_embed
            return self.norm(self.block(tokens))[:, 0]


    def dinov2_vitl14(*, pretrained=True, **kwargs):
        return TinyViT(32)


    def dinov2_vitb14(*, pretrained=True, **kwargs):
        return TinyViT(24)
    '''
)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    repo = tmp_path_factory.mktemp("dinov2_hub")
    (repo / "hubconf.py").write_text(HUBCONF)
    return repo


def _images(n, h, w, seed, noise=8.0):
    """uint8 [n, 3, h, w]: smooth random fields plus noise (``noise=None``: pure noise, Pillow's worst case)."""
    g = torch.Generator().manual_seed(seed)
    if noise is None:
        return torch.randint(0, 256, (n, 3, h, w), generator=g, dtype=torch.uint8)
    coarse = torch.rand(n, 3, max(2, h // 8), max(2, w // 8), generator=g)
    x = F.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=False) * 255
    return (x + noise * torch.randn(n, 3, h, w, generator=g)).round().clamp(0, 255).to(torch.uint8)


def _pil(x):
    return [PIL.fromarray(a, "RGB") for a in x.permute(0, 2, 3, 1).numpy()]


def _to_tensor_normalize(arrays, mean, std):
    """torchvision's ``ToTensor`` (``from_numpy(...).permute(2, 0, 1).float().div(255)``) and ``Normalize``."""
    x = torch.stack([torch.from_numpy(np.array(a, copy=True)).permute(2, 0, 1) for a in arrays]).to(torch.float32)
    x = x.div(255)
    return x.sub(torch.as_tensor(mean).view(1, -1, 1, 1)).div(torch.as_tensor(std).view(1, -1, 1, 1))


# --------------------------------------------------------------------------- Pillow's 8-bit bicubic
@pytest.mark.parametrize("seed", [0, 1])
def test_pil_bicubic_equals_pillow_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    cases = [tuple(int(v) for v in rng.integers(1, 90, 4)) for _ in range(60)]
    cases += [(512, 512, 224, 224), (32, 32, 224, 224), (300, 200, 336, 336), (141, 42, 88, 20), (60, 400, 336, 336)]
    for h, w, oh, ow in cases:  # pure noise: intermediate clipping and the pass order both show
        x = _images(2, h, w, seed=h * w + seed, noise=None)
        want = np.stack([np.asarray(im.resize((ow, oh), PIL.BICUBIC)) for im in _pil(x)])
        got = pil_bicubic_uint8(x, (oh, ow)).permute(0, 2, 3, 1).numpy()
        assert np.array_equal(got, want), ((h, w), (oh, ow), int(np.abs(got.astype(int) - want).max()))


# --------------------------------------------------------------------------- DINOv2: EDM2 and dgm-eval
def _edm2_torch_input(x):
    """EDM2 ``DINOv2Detector.__call__``, ``resize_mode="torch"`` (calculate_metrics.py lines 69-77)."""
    x = F.interpolate(x.to(torch.float32), size=(224, 224), mode="bicubic", antialias=True)
    x = x.to(torch.float32) / 255
    x = x - torch.as_tensor(np.asarray(MEAN), dtype=torch.float32).reshape(1, -1, 1, 1)
    return x / torch.as_tensor(np.asarray(STD), dtype=torch.float32).reshape(1, -1, 1, 1)


def _edm2_pil_input(x):
    """EDM2 ``resize_mode="pil"`` (lines 64-68) = dgm-eval's transform: Pillow bicubic to 224, /255, mean/std."""
    arrays = [np.uint8(im.resize((224, 224), PIL.Resampling.BICUBIC)) for im in _pil(x)]
    return _to_tensor_normalize(arrays, MEAN, STD)


@pytest.mark.parametrize(("h", "w"), SIZES)
def test_dinov2_inputs_and_features_equal_edm2_and_dgm_eval(hub, h, w):
    x = _images(3, h, w, seed=h + w)
    for resize, oracle in (("edm2", _edm2_torch_input), ("dgm-eval", _edm2_pil_input)):
        net = DINOv2Features(repo_dir=hub, random_init=True, seed=1, resize=resize)
        want = oracle(x)
        got = net.preprocess(x)
        assert got.shape == want.shape == (3, 3, 224, 224)
        assert float((got - want).abs().max()) <= 1e-6 * float(want.max() - want.min()), resize
        assert torch.equal(net(x), net.net(want))  # the same network on the same input


def test_dinov2_defaults_are_fd_dinov2s(hub):
    net = get_extractor("dinov2", repo_dir=hub, random_init=True)
    assert (net.name, net.arch, net.resize, net.input_size) == ("dinov2", "vitl14", "edm2", (224, 224))
    assert net.num_features == 32 and net.weights_sha256 is None  # the stand-in's embed_dim
    pre = json.loads(json.dumps(net.preprocessing))
    assert pre == {
        "resize": "edm2-torch-bicubic-antialias",
        "quantisation": "round",
        "input_size": [224, 224],
        "normalisation": {"scale": "x / 255", "mean": list(MEAN), "std": list(STD)},
        "crop": None,
    }
    assert DINOv2Features(repo_dir=hub, random_init=True, resize="dgm-eval").preprocessing["pil_pass_order"]


def test_dinov2_float_input_is_quantised_as_edm2s_generator_path(hub):
    f = torch.rand(2, 3, 40, 56, generator=torch.Generator().manual_seed(0))
    x = 2 * f - 1  # a pixel-space generator's [-1, 1] output, f = (x + 1) / 2
    standard = (x.to(torch.float32) * 127.5 + 128).clip(0, 255).to(torch.uint8)  # encoders.py line 73
    latent = f.clamp(0, 1).mul(255).to(torch.uint8)  # encoders.py line 131
    for rule, want in (("round", standard), ("floor", latent)):
        net = DINOv2Features(repo_dir=hub, random_init=True, quantisation=rule)
        assert torch.equal(net.preprocess(f), _edm2_torch_input(want)), rule
    unrounded = DINOv2Features(repo_dir=hub, random_init=True, quantisation="none").preprocess(f)
    assert not torch.equal(unrounded, _edm2_torch_input(standard))


def test_dinov2_random_init_is_seeded_and_weights_load_with_their_sha256(hub, tmp_path):
    def state(**kw):
        return DINOv2Features(repo_dir=hub, random_init=True, **kw).net.state_dict()

    before = torch.random.get_rng_state()
    a, b, c = state(seed=5), state(seed=5), state(seed=6)
    assert torch.equal(torch.random.get_rng_state(), before)  # the global RNG is left alone
    assert all(torch.equal(a[k], b[k]) for k in a) and not all(torch.equal(a[k], c[k]) for k in a)
    path = tmp_path / "dinov2_vitl14_pretrain.pth"
    torch.save(c, path)
    net = DINOv2Features(path, repo_dir=hub)
    assert net.weights_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert all(torch.equal(net.net.state_dict()[k], c[k]) for k in c)
    assert DINOv2Features(c, repo_dir=hub).weights_sha256 is None  # a state dict in memory has no file
    with pytest.raises(ValueError, match="do not fit the architecture"):
        DINOv2Features({"patch_embed.weight": torch.zeros(1)}, repo_dir=hub)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"arch": "vitx14"}, ValueError, r"Expected argument `arch` to be one of .*'vitx14'"),
        ({"resize": "pil"}, ValueError, r"Expected argument `resize` to be one of \('edm2', 'dgm-eval'\).*'pil'"),
        ({"quantisation": "none", "resize": "dgm-eval"}, ValueError, "Pillow resizes uint8"),
        ({"size": 100}, ValueError, "multiple of the patch size 14, but got 100"),
        ({"repo_dir": "/nonexistent/dinov2"}, FileNotFoundError, "git clone https://github.com/facebookresearch"),
    ],
)
def test_dinov2_bad_options_are_named(hub, options, error, match):
    with pytest.raises(error, match=match):
        DINOv2Features(**{"repo_dir": hub, "random_init": True, **options})


REAL_REPO = os.environ.get("LIGHTNING_PRD_DINOV2_REPO", "")


@pytest.mark.skipif(
    not (Path(REAL_REPO) / "hubconf.py").is_file(),
    reason="no clone of facebookresearch/dinov2 (set LIGHTNING_PRD_DINOV2_REPO to one)",
)
def test_real_dinov2_repository_vits14_equals_edm2():
    net = DINOv2Features(repo_dir=REAL_REPO, arch="vits14", random_init=True, seed=0)
    x = _images(2, 96, 160, seed=3)
    assert torch.equal(net(x), net.net(_edm2_torch_input(x)))
    assert net.num_features == 384


# --------------------------------------------------------------------------- CLIP: CMMD and open_clip
def _cmmd_input(x, size=336):
    """CMMD ``io_util._center_crop_and_resize`` + ``/ 255`` + CLIP normalisation (``embedding.py``)."""
    arrays = []
    for im in _pil(x):
        w, h = im.size
        side = min(w, h)
        top, left = (h - side) // 2, (w - side) // 2
        im = im.crop((left, top, left + side, top + side)).resize((size, size), resample=PIL.BICUBIC)
        arrays.append(np.asarray(im).astype(np.float32))
    x = torch.from_numpy(np.stack(arrays) / 255.0).permute(0, 3, 1, 2)
    return (x - torch.tensor(CLIP_MEAN).view(1, -1, 1, 1)) / torch.tensor(CLIP_STD).view(1, -1, 1, 1)


@pytest.mark.parametrize(("h", "w"), SIZES + [(336, 336), (337, 500)])
def test_clip_cmmd_preprocessing_equals_the_cmmd_code(h, w):
    x = _images(2, h, w, seed=h * 7 + w)
    want = _cmmd_input(x)
    got = clip_preprocess(x, (336, 336), "cmmd")
    assert float((got - want).abs().max()) <= 1e-6 * float(want.max() - want.min())


def test_clip_weights_are_required_and_exclusive(tmp_path, open_clip_importable):
    with pytest.raises(FileNotFoundError, match="timm/vit_large_patch14_clip_336.openai"):
        CLIPFeatures()
    with pytest.raises(ValueError, match="Expected one of `weights`, `pretrained` and `random_init`"):
        CLIPFeatures(tmp_path / "w.bin", random_init=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        CLIPFeatures(tmp_path / "missing.bin")
    with pytest.raises(ValueError, match=r"Expected argument `resize` to be one of \('cmmd', 'open_clip'\)"):
        CLIPFeatures(random_init=True, resize="squash")


def test_clip_without_open_clip_says_what_to_install(monkeypatch):
    """open_clip needs torchvision: the one built for the installed torch comes first, so pip keeps that torch."""
    monkeypatch.setitem(sys.modules, "open_clip", None)
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    with pytest.raises(ImportError) as info:
        CLIPFeatures(random_init=True)
    message = str(info.value)
    want = "torchvision==0.28.0 --index-url https://download.pytorch.org/whl/cpu && pip install open_clip_torch"
    assert want in message and "\n" not in message


def test_clip_checks_open_clip_before_the_weights(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "open_clip", None)
    for kwargs in ({}, {"weights": tmp_path / "missing.bin"}):  # no weights given; a file that is not there
        with pytest.raises(ImportError, match="needs open_clip"):
            CLIPFeatures(**kwargs)
    with pytest.raises(ValueError, match="Expected one of `weights`, `pretrained` and `random_init`"):
        CLIPFeatures(tmp_path / "w.bin", random_init=True)  # a contradiction in the arguments is said first


@pytest.fixture(scope="module")
def clip_nets():
    """A random ViT-S-32 from open_clip itself and ours under the same seed (one of another seed)."""
    import open_clip

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        ref = open_clip.create_model("ViT-S-32").eval()
    return {
        "ref": ref,
        "cmmd": CLIPFeatures(arch="ViT-S-32", random_init=True, seed=3),
        "open_clip_raw": CLIPFeatures(arch="ViT-S-32", random_init=True, seed=3, resize="open_clip", normalize=False),
        "seed4": CLIPFeatures(arch="ViT-S-32", random_init=True, seed=4),
    }


@needs_open_clip
@pytest.mark.parametrize(("h", "w"), SIZES + [(337, 500), (336, 336)])
def test_clip_open_clip_preprocessing_equals_open_clips_transform(h, w):
    import open_clip

    transform = open_clip.image_transform(336, is_train=False)
    x = _images(2, h, w, seed=h * 3 + w)
    want = torch.stack([transform(im) for im in _pil(x)])
    got = clip_preprocess(x, (336, 336), "open_clip")
    assert float((got - want).abs().max()) <= 1e-6 * float(want.max() - want.min())


@needs_open_clip
def test_dgm_eval_dinov2_transform_with_torchvision(hub):
    import torchvision.transforms as TF

    x = _images(2, 300, 200, seed=9)
    resize = TF.Compose([TF.Resize((224, 224), TF.InterpolationMode.BICUBIC), TF.ToTensor()])  # dinov2.py
    want = torch.stack([TF.Normalize(np.array(MEAN), np.array(STD))(resize(im)) for im in _pil(x)])
    got = DINOv2Features(repo_dir=hub, random_init=True, resize="dgm-eval").preprocess(x)
    assert float((got - want).abs().max()) <= 1e-6 * float(want.max() - want.min())


@needs_open_clip
@pytest.mark.parametrize(("key", "normalize"), [("cmmd", True), ("open_clip_raw", False)])
def test_clip_embeddings_equal_encode_image(clip_nets, key, normalize):
    import open_clip

    x = _images(3, 300, 200, seed=4)
    if key == "cmmd":
        pre = _cmmd_input(x, 224)
    else:
        pre = torch.stack([open_clip.image_transform(224, is_train=False)(im) for im in _pil(x)])
    with torch.no_grad():
        want = clip_nets["ref"].encode_image(pre, normalize=normalize)
    got = clip_nets[key](x)
    assert got.shape == want.shape == (3, 384)
    assert float((got - want).abs().max()) <= 1e-5 * float(want.abs().max())


@needs_open_clip
def test_clip_random_init_is_seeded_and_defaults_are_cmmds(clip_nets):
    ref, a, b, c = (clip_nets[k] for k in ("ref", "cmmd", "open_clip_raw", "seed4"))
    sr, sa, sb, sc = ref.visual.state_dict(), a.net.state_dict(), b.net.state_dict(), c.net.state_dict()
    assert all(torch.equal(sa[k], sb[k]) and torch.equal(sa[k], sr[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert (a.name, a.arch, a.weights_sha256, a.input_size) == ("clip", "ViT-S-32", None, (224, 224))
    pre = json.loads(json.dumps(a.preprocessing))
    assert pre["crop"] == "cmmd-centre-square-then-resize" and pre["embedding"] == "unit-norm"
    assert pre["resize"] == "pil-bicubic" and pre["quantisation"] == "round" and pre["input_size"] == [224, 224]


TINY_CLIP = {  # a tiny open_clip configuration (registered for the test): fast to build and to save
    "embed_dim": 16,
    "vision_cfg": {"image_size": 64, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 8, "vocab_size": 50, "width": 16, "heads": 2, "layers": 1},
}


@needs_open_clip
def test_clip_weights_file_loads_with_its_sha256_and_tags_come_from_the_cache(tmp_path, monkeypatch):
    import sys

    import open_clip

    (tmp_path / "Tiny-CLIP-test.json").write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(tmp_path / "Tiny-CLIP-test.json")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = open_clip.create_model("Tiny-CLIP-test")
    path = tmp_path / "open_clip_model.bin"
    torch.save(model.state_dict(), path)
    net = CLIPFeatures(path, arch="Tiny-CLIP-test", resize="open_clip")
    assert net.weights_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert all(torch.equal(v, model.visual.state_dict()[k]) for k, v in net.net.state_dict().items())
    x = _images(2, 80, 64, seed=1)
    with torch.no_grad():
        want = model.encode_image(torch.stack([open_clip.image_transform(64, False)(im) for im in _pil(x)]), True)
    assert torch.allclose(net(x), want, rtol=0, atol=1e-6)
    # pretrained=TAG: the tag's file from the local Hugging Face cache, never a download
    seen = []
    fake = types.SimpleNamespace(try_to_load_from_cache=lambda repo, name: seen.append((repo, name)) or None)
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    with pytest.raises(FileNotFoundError, match="not in the local Hugging Face cache"):
        CLIPFeatures(pretrained="openai")
    assert seen[0] == ("timm/vit_large_patch14_clip_336.openai", "open_clip_model.safetensors")
