"""``VGG16Features(resize="tf1")`` against torch-fidelity's own ``FeatureExtractorVGG16``, with shared random weights.

torch-fidelity and torchvision are test-only references (they are not installed in CI; this file then
skips). The weights are a seeded random initialisation of torchvision's ``vgg16``, saved as its state
dict, the layout torch-fidelity's ``feature_extractor_weights_path`` loads; its download function is
replaced by one that fails, so nothing is fetched. Images: smooth random uint8 images (a coarse
bicubic field, finer detail and a little noise) at 32, 64, 224, 256 and 512 px. Measured per size: the
largest absolute feature difference relative to the features' range, and the Fréchet distance between
the two networks' features of the same images relative to the one between two independent image
sets (float64 NumPy oracle from the formula).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

torchvision = pytest.importorskip("torchvision", reason="torchvision is a test-only reference dependency")
pytest.importorskip("torch_fidelity", reason="torch-fidelity is a test-only reference (needs torchvision)")
import torch_fidelity.feature_extractor_vgg16 as fidelity_vgg  # noqa: E402

from lightning_prd.features.vgg import FILENAME, VGG16, VGG16Features  # noqa: E402
from lightning_prd.functional import frechet_distance  # noqa: E402

import oracle  # noqa: E402

SIZES = (32, 64, 224, 256, 512)
NUM_IMAGES = 12  # two independent halves of 6 give the scale of the Fréchet distance


def smooth_images(n: int, size: int, seed: int) -> torch.Tensor:
    """Real-looking uint8 images: a coarse bicubic field, finer bilinear detail and a little noise."""
    g = torch.Generator().manual_seed(seed)
    coarse = F.interpolate(torch.rand(n, 3, 6, 6, generator=g), size=(size, size), mode="bicubic", align_corners=False)
    fine = max(size // 4, 2)
    detail = F.interpolate(torch.rand(n, 3, fine, fine, generator=g), size=(size, size), mode="bilinear")
    x = 0.75 * coarse + 0.25 * detail + 0.03 * torch.randn(n, 3, size, size, generator=g)
    return (x.clamp(0, 1) * 255).round().to(torch.uint8)


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    path = tmp_path_factory.mktemp("vgg") / FILENAME
    with torch.random.fork_rng():
        torch.manual_seed(0)
        torch.save(torchvision.models.vgg16(weights=None).state_dict(), path)

    def no_download(**kwargs):
        raise AssertionError("torch-fidelity tried to download VGG-16 weights")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fidelity_vgg, "torchvision_load_pretrained_vgg16", no_download)
        reference = fidelity_vgg.FeatureExtractorVGG16(
            "vgg16", ["fc2", "fc2_relu"], feature_extractor_weights_path=path
        )
    return reference, VGG16Features(path, resize="tf1")


def test_frechet_oracle_against_the_package():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(40, 12, generator=g), 0.5 + 2 * torch.randn(30, 12, generator=g)
    assert abs(oracle.frechet_few_samples(a, b) - float(frechet_distance(a, b))) <= 1e-9 * float(frechet_distance(a, b))


@pytest.mark.parametrize("size", SIZES)
def test_tf1_features_equal_torch_fidelity(networks, size):
    reference, ours = networks
    images = smooth_images(NUM_IMAGES, size, seed=size)
    with torch.no_grad():
        theirs_fc2, theirs = reference(images)
        mine = ours(images)
        mine_float = ours(images[:2].float() / 255)
    spread = float(theirs.max() - theirs.min())
    max_diff = float((mine - theirs).abs().max())
    fd_same = oracle.frechet_few_samples(mine, theirs)
    half = NUM_IMAGES // 2
    fd_scale = oracle.frechet_few_samples(theirs[:half], theirs[half:])
    ratio = fd_same / fd_scale
    print(f"\nvgg16 tf1 vs torch-fidelity {size}px: max|diff|/range {max_diff / spread:.2e}, FD ratio {ratio:.2e}")
    assert max_diff <= 1e-4 * spread
    assert fd_same <= 1e-6 * fd_scale
    assert float((mine_float - theirs[:2]).abs().max()) <= 1e-4 * spread  # float k / 255 is k
    assert bool((theirs_fc2.clamp(min=0) == theirs).all())


def test_float_input_equals_torch_fidelity_on_the_rounded_images(networks):
    reference, ours = networks
    x = torch.rand(2, 3, 48, 40, generator=torch.Generator().manual_seed(7))
    rounded = (x * 255 + 0.5).floor().to(torch.uint8)
    with torch.no_grad():
        theirs, mine = reference(rounded)[1], ours(x)
    assert float((mine - theirs).abs().max()) <= 1e-4 * float(theirs.max() - theirs.min())


def test_same_layout_and_random_init_as_torchvision():
    assert torchvision.models.VGG16_Weights.IMAGENET1K_V1.url.endswith("/" + FILENAME)  # torch-fidelity's file
    for seed in (0, 1):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            theirs = torchvision.models.vgg16(weights=None).state_dict()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            mine = VGG16(init_weights=True).state_dict()
        assert list(mine) == list(theirs) and all(torch.equal(mine[k], theirs[k]) for k in mine)
