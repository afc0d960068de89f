"""FIDInceptionFeatures against the reference tools' own code, on shared random weights.

Needs torch-fidelity, pytorch-fid and clean-fid (and so torchvision): run in the reference venv,
``/tmp/tvenv/bin/python -m pytest tests/test_fid_inception_references.py -q -s``. Elsewhere the module
is skipped with the reason printed by ``pytest -rs``.

The weights: torchvision's ``inception_v3(num_classes=1008, aux_logits=False)`` initialised with a fixed
seed, patched into pytorch-fid's ``fid_inception_v3()`` (its download replaced by that state dict), batch-norm
scales and shifts drawn at random, then the batch-norm running statistics set by one pass in training mode
(``momentum=None``: the statistics of that batch) over smooth random images normalised as pytorch-fid does,
so every layer sees O(1) activations and the features are not degenerate. The result is saved twice: as
``model.state_dict()`` (pytorch-fid's layout, with the ``num_batches_tracked`` counters) and as a plain dict
without the counters (torch-fidelity's converted file has none). No file is downloaded.

Compared, at input sizes 32, 64, 256, 299 and 512 px:

* ``resize="tf1"`` with torch-fidelity's ``FeatureExtractorInceptionV3`` (its own file layout): pool
  features and ``logits_unbiased``; uint8 images, and float images quantised by torch-fidelity's
  example rule ``(255 x).to(torch.uint8)`` on its side;
* ``resize="pytorch-fid"`` with pytorch-fid's ``InceptionV3([3])``: pool features of uint8 images
  (``/ 255`` on its side, as its ``ToTensor`` does) and of float images as they are; the sFID
  features against a forward hook on pytorch-fid's ``Mixed_6d.branch1x1``;
* ``resize="clean"``: clean-fid's network is only NVlabs' TorchScript file, so the same random weights
  are put into a TorchScript module with its ``layers`` submodule, and clean-fid's own
  ``make_resizer("PIL", False, "bicubic", (299, 299))`` (per image, on the uint8 HWC array) and
  ``InceptionV3W(resize_inside=False)`` are run on it, against ``FIDInceptionFeatures(resize="clean")``
  loading the state dict and loading that TorchScript file; the resized network inputs are compared too.

Criteria: max |ours - reference| <= 1e-4 x the range of the reference features, and the Fréchet
distance between the two networks' features of the same images <= 1e-6 x the Fréchet distance between
two independent image sets (both from ours). ``LPRD_REF_IMAGES`` images per set (default 4: the CPU
cost is one 299-px Inception pass per image per network); the distance is the float64 formula
``|mu1 - mu2|^2 + tr S1 + tr S2 - 2 ||X1c X2c^T||_* / (n - 1)`` (the nuclear norm gives
``tr sqrt(S1 S2)`` exactly for rank-deficient covariances).
"""

import os

import pytest
import torch

torch_fidelity = pytest.importorskip("torch_fidelity", reason="needs torch-fidelity (reference venv /tmp/tvenv)")
pytorch_fid = pytest.importorskip("pytorch_fid", reason="needs pytorch-fid (reference venv /tmp/tvenv)")
cleanfid = pytest.importorskip("cleanfid", reason="needs clean-fid (reference venv /tmp/tvenv)")
torchvision = pytest.importorskip("torchvision", reason="needs torchvision (reference venv /tmp/tvenv)")

from cleanfid.inception_torchscript import InceptionV3W  # noqa: E402
from cleanfid.resize import make_resizer  # noqa: E402
from pytorch_fid import inception as pfid_inception  # noqa: E402
from smooth_images import smooth_floats, smooth_images  # noqa: E402
from torch_fidelity.feature_extractor_inceptionv3 import FeatureExtractorInceptionV3  # noqa: E402

from lightning_prd.features.fid_inception import FIDInceptionFeatures  # noqa: E402

import oracle  # noqa: E402

SIZES = (32, 64, 256, 299, 512)
N = int(os.environ.get("LPRD_REF_IMAGES", "4"))
FEATURE_TOL = 1e-4
FD_TOL = 1e-6
RESULTS = []


def _fid_inception_v3(state):
    """pytorch-fid's own network builder, its download replaced by ``state``."""
    original = pfid_inception.load_state_dict_from_url
    pfid_inception.load_state_dict_from_url = lambda *args, **kwargs: state
    try:
        return pfid_inception.fid_inception_v3()
    finally:
        pfid_inception.load_state_dict_from_url = original


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fid_weights")
    torch.manual_seed(2015)
    init = torchvision.models.inception_v3(weights=None, num_classes=1008, aux_logits=False, init_weights=True)
    model = _fid_inception_v3(init.state_dict())
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for bn in bns:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_(0.0, 0.2)
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average: one batch gives that batch's statistics
        model.train()
        model(2 * smooth_images(8, 299, seed=7).float() / 255 - 1)
        model.eval()
    state = model.state_dict()
    pytorch_fid_file = folder / "pt_inception-2015-12-05-6726825d.pth"
    torch_fidelity_file = folder / "weights-inception-2015-12-05-6726825d.pth"
    torch.save(state, pytorch_fid_file)
    torch.save({k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}, torch_fidelity_file)
    return {"state": state, "pytorch-fid": pytorch_fid_file, "torch-fidelity": torch_fidelity_file}


@pytest.fixture(scope="module")
def nets(weights):
    fidelity = FeatureExtractorInceptionV3(
        "inception-v3-compat",
        ["2048", "logits_unbiased"],
        feature_extractor_weights_path=str(weights["torch-fidelity"]),
    )
    original = pfid_inception.load_state_dict_from_url
    pfid_inception.load_state_dict_from_url = lambda *args, **kwargs: torch.load(weights["pytorch-fid"])
    try:
        pfid = pfid_inception.InceptionV3([3], resize_input=True, normalize_input=True, use_fid_inception=True).eval()
    finally:
        pfid_inception.load_state_dict_from_url = original
    return {
        "fidelity": fidelity,
        "pytorch-fid": pfid,
        "ours-tf1": FIDInceptionFeatures(weights["torch-fidelity"], logits=True),
        "ours-pytorch-fid": FIDInceptionFeatures(weights["pytorch-fid"], resize="pytorch-fid", logits=True),
        "ours-clean": FIDInceptionFeatures(weights["pytorch-fid"], resize="clean"),
    }


def _pytorch_fid_with_spatial(net, x):
    """pytorch-fid's pool features and the output of its ``Mixed_6d.branch1x1`` (forward hook)."""
    seen = {}
    block = net.blocks[2][6]  # Mixed_5b, 5c, 5d, 6a, 6b, 6c, 6d: the seventh module of block 2
    handle = block.branch1x1.register_forward_hook(lambda module, args, out: seen.setdefault("out", out.clone()))
    try:
        pool = net(x)[0].flatten(1)
    finally:
        handle.remove()
    return pool, seen["out"]


def _close(name, size, ours, ref):
    """max |ours - ref| <= 1e-4 x the range of ``ref``; the ratio is printed."""
    diff, span = float((ours - ref).abs().max()), float(ref.max() - ref.min())
    print(f"\n{name} @ {size}px: max|diff|/range = {diff / span:.3g}")
    assert diff <= FEATURE_TOL * span, (name, size, diff, span)


def _check(name, size, ours, ref, scale_ours):
    diff = float((ours - ref).abs().max())
    span = float(ref.max() - ref.min())
    fd_same = oracle.frechet_few_samples(ours.numpy(), ref.numpy())
    fd_scale = oracle.frechet_few_samples(ours.numpy(), scale_ours.numpy())
    RESULTS.append((name, size, diff / span, abs(fd_same) / fd_scale))
    print(
        f"\n{name} @ {size}px: max|diff|/range = {diff / span:.3g}, FD(same images)/FD(independent) = "
        f"{abs(fd_same) / fd_scale:.3g} (FD independent {fd_scale:.4g}, {len(ours)} images per set)"
    )
    assert diff <= FEATURE_TOL * span, (name, size, diff, span)
    assert abs(fd_same) <= FD_TOL * fd_scale, (name, size, fd_same, fd_scale)


@pytest.mark.parametrize("size", SIZES)
def test_tf1_equals_torch_fidelity(nets, size):
    x, other = smooth_images(N, size, seed=size), smooth_images(N, size, seed=10_000 + size)
    floats = smooth_floats(2, size, seed=20_000 + size)
    ours, ref = nets["ours-tf1"], nets["fidelity"]
    with torch.no_grad():
        out, (pool, logits) = ours(x), ref(x)
        _check("tf1 vs torch-fidelity, uint8", size, out["pool"], pool, ours(other)["pool"])
        _close("tf1 logits vs torch-fidelity logits_unbiased, uint8", size, out["logits"], logits)
        float_ref = ref((255 * floats).to(torch.uint8))  # torch-fidelity's example rule for generator output
        float_ours = ours(floats)
    _close("tf1 vs torch-fidelity, float (floor)", size, float_ours["pool"], float_ref[0])
    _close("tf1 logits vs torch-fidelity, float (floor)", size, float_ours["logits"], float_ref[1])


@pytest.mark.parametrize("size", SIZES)
def test_pytorch_fid_mode_equals_pytorch_fid(nets, size):
    x, other = smooth_images(N, size, seed=size), smooth_images(N, size, seed=10_000 + size)
    floats = smooth_floats(2, size, seed=20_000 + size)
    ours, ref = nets["ours-pytorch-fid"], nets["pytorch-fid"]
    with torch.no_grad():
        out = ours(x)
        pool, branch = _pytorch_fid_with_spatial(ref, x.float() / 255)
        _check("pytorch-fid mode vs pytorch-fid, uint8", size, out["pool"], pool, ours(other)["pool"])
        spatial = branch[:, :7].permute(0, 2, 3, 1).reshape(len(x), -1)  # mixed_6/conv, 7 channels, NHWC
        assert out["spatial"].shape == (len(x), 2023)
        _close("pytorch-fid mode spatial vs hook on Mixed_6d.branch1x1", size, out["spatial"], spatial)
        float_ref = ref(floats)[0].flatten(1)  # pytorch-fid takes float images in [0, 1] as they are
        float_ours = ours(floats)["pool"]
    _close("pytorch-fid mode vs pytorch-fid, float", size, float_ours, float_ref)


class _CleanFidStandIn(torch.nn.Module):
    """NVlabs' TorchScript interface as clean-fid uses it: a ``layers`` submodule on normalised 299-px input."""

    def __init__(self, layers: torch.nn.Module) -> None:
        super().__init__()
        self.layers = layers

    def forward(self, img: torch.Tensor, return_features: bool = False) -> torch.Tensor:
        return self.layers(img)


class _Layers(torch.nn.Module):
    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[:, :, None, None]  # [B, 2048, 1, 1], as the archive's pool_3 output


@pytest.fixture(scope="module")
def clean_fid(nets, tmp_path_factory):
    """clean-fid's ``InceptionV3W`` on a TorchScript file holding the shared random network, and ours on that file."""
    folder = tmp_path_factory.mktemp("clean_fid")
    layers = torch.jit.trace(_Layers(nets["ours-clean"].net).eval(), torch.zeros(1, 3, 299, 299))
    torch.jit.save(torch.jit.script(_CleanFidStandIn(layers)), folder / "inception-2015-12-05.pt")
    clean = InceptionV3W(str(folder), download=False, resize_inside=False).eval()
    return clean, FIDInceptionFeatures(folder / "inception-2015-12-05.pt", resize="clean")


@pytest.mark.parametrize("size", SIZES)
def test_clean_mode_equals_clean_fid(nets, clean_fid, size):
    ours = nets["ours-clean"]
    clean, scripted = clean_fid
    resizer = make_resizer("PIL", False, "bicubic", (299, 299))
    x, other = smooth_images(N, size, seed=size), smooth_images(N, size, seed=10_000 + size)
    # clean-fid's ResizeDataset: the uint8 HWC array through fn_resize, then ToTensor of the float32 result
    batch = torch.stack([torch.from_numpy(resizer(img.permute(1, 2, 0).numpy())).permute(2, 0, 1) for img in x])
    inputs = ours.preprocess(x)
    reference_inputs = (batch - 128) / 128
    _close("clean network input vs clean-fid's resize", size, inputs, reference_inputs)
    with torch.no_grad():
        ref = clean(batch)
        _check("clean mode vs clean-fid, uint8", size, ours(x), ref, ours(other))
        _close("clean mode, TorchScript file, vs clean-fid", size, scripted(x), ref)
        floats = smooth_floats(2, size, seed=20_000 + size)
        # clean-fid's generator path: float 0..255 images through the same resizer, no quantisation
        fbatch = torch.stack(
            [torch.from_numpy(resizer((255 * img).permute(1, 2, 0).numpy())).permute(2, 0, 1) for img in floats]
        )
        fref, fours = clean(fbatch), ours(floats)
    _close("clean mode vs clean-fid, float", size, fours, fref)


def test_state_dict_layouts_are_the_references(weights, nets):
    ours = set(nets["ours-tf1"].net.state_dict())
    assert ours == set(weights["state"])  # pytorch-fid's fid_inception_v3() keys
    fidelity = {k for k in nets["fidelity"].state_dict() if not k.endswith("num_batches_tracked")}
    assert fidelity == {k for k in ours if not k.endswith("num_batches_tracked")}
