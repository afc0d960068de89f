"""The VGG-16, DINOv2 and CLIP rows of ``bench_extractors.py``: factories ``(setup) -> features(uint8 batch)``.

Each reference is driven through its installed package where there is one (torch-fidelity, open_clip)
and otherwise written out from its own code, step by step, with the file and lines cited (EDM2 and
the CMMD code are not pip-installable). Both sides get the same random weights: a torchvision-layout
state dict file for VGG-16, the same seeded construction for the ViTs (checked by the feature
difference the benchmark prints).
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

if TYPE_CHECKING:  # the Setup of bench_extractors.py (weights files and objects made once)
    from bench_extractors import Setup

Features = Callable[[torch.Tensor], torch.Tensor]
CLIP_ARCH = "ViT-L-14-336-quickgelu"  # open_clip's name of CMMD's network (OpenAI's ViT-L/14@336px)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)  # OpenAI CLIP's, as CLIPImageProcessor and open_clip use
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def _pil_images(x: torch.Tensor) -> list:
    from PIL import Image

    return [Image.fromarray(a, "RGB") for a in x.permute(0, 2, 3, 1).numpy()]


# ---------------------------------------------------------------------------- VGG-16 (torch-fidelity)
def _vgg_file(setup: "Setup") -> Path:
    def make(path: Path) -> None:
        import torchvision

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            torch.save(torchvision.models.vgg16(weights=None).state_dict(), path)

    return setup.file("vgg16-397923af.pth", make)  # torchvision's file name, the layout torch-fidelity loads


def vgg_ours(setup: "Setup") -> Features:
    from lightning_prd.features import VGG16Features

    return VGG16Features(_vgg_file(setup), resize="tf1")


def vgg_torch_fidelity(setup: "Setup") -> Features:
    """torch-fidelity's ``FeatureExtractorVGG16("vgg16", ["fc2_relu"])`` given the file; its download is disabled."""
    import torch_fidelity.feature_extractor_vgg16 as fidelity_vgg

    def no_download(**kwargs: Any) -> None:
        raise RuntimeError("torch-fidelity tried to download VGG-16 weights")

    original = fidelity_vgg.torchvision_load_pretrained_vgg16
    fidelity_vgg.torchvision_load_pretrained_vgg16 = no_download
    try:
        net = fidelity_vgg.FeatureExtractorVGG16(
            "vgg16", ["fc2_relu"], feature_extractor_weights_path=str(_vgg_file(setup))
        )
    finally:
        fidelity_vgg.torchvision_load_pretrained_vgg16 = original
    return lambda x: net(x)[0]


# ---------------------------------------------------------------------------- DINOv2 ViT-L/14 (EDM2)
def dinov2_ours(setup: "Setup") -> Features:
    from lightning_prd.features.dinov2 import DINOv2Features

    return DINOv2Features(arch="vitl14", resize="edm2", random_init=True, seed=0, repo_dir=setup.dinov2_repo)


def dinov2_edm2(setup: "Setup") -> Features:
    """EDM2's ``DINOv2Detector(resize_mode="torch")`` (NVlabs/edm2 ``calculate_metrics.py``): its network is
    ``torch.hub.load(..., "dinov2_vitl14")``, here from the local clone with ``pretrained=False`` under seed 0
    (the weights ours draws), ``.eval().requires_grad_(False)``; ``__call__``: bicubic antialiased
    ``interpolate`` of ``x.to(float32)`` to 224, ``/ 255``, minus mean, divided by std, the model."""
    import warnings

    repo = Path(setup.dinov2_repo)
    if not (repo / "hubconf.py").is_file():
        raise FileNotFoundError(f"no DINOv2 hub repository (hubconf.py) at {repo}: pass --dinov2-repo")
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        torch.manual_seed(0)
        warnings.filterwarnings("ignore", "xFormers is not available")
        model = torch.hub.load(str(repo), "dinov2_vitl14", source="local", pretrained=False)
    model.eval().requires_grad_(False)
    mean = torch.tensor(IMAGENET_MEAN, dtype=torch.float32).reshape(1, -1, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=torch.float32).reshape(1, -1, 1, 1)

    def features(x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x.to(torch.float32), size=(224, 224), mode="bicubic", antialias=True)
        x = x.to(torch.float32) / 255
        return model((x - mean) / std)

    return features


# ---------------------------------------------------------------------------- CLIP ViT-L/14-336 (CMMD, open_clip)
def clip_ours(resize: str) -> Callable[["Setup"], Features]:
    def factory(setup: "Setup") -> Features:
        from lightning_prd.features.clip import CLIPFeatures

        return CLIPFeatures(arch=CLIP_ARCH, resize=resize, random_init=True, seed=0)

    return factory


def _open_clip_model(setup: "Setup") -> Any:
    """``open_clip.create_model_and_transforms(CLIP_ARCH)`` under seed 0 (random weights), made once for both rows."""

    def make() -> Any:
        import open_clip

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model, _, preprocess = open_clip.create_model_and_transforms(CLIP_ARCH)
        return model.eval(), preprocess

    return setup.shared("open_clip " + CLIP_ARCH, make)


def clip_open_clip(setup: "Setup") -> Features:
    """open_clip's evaluation transform (``preprocess_val`` of ``create_model_and_transforms``) on each PIL
    image, stacked, then ``model.encode_image(x, normalize=True)``."""
    model, preprocess = _open_clip_model(setup)
    return lambda x: model.encode_image(torch.stack([preprocess(im) for im in _pil_images(x)]), normalize=True)


def clip_cmmd(setup: "Setup") -> Features:
    """The CMMD code (sayakpaul/cmmd-pytorch, a port of google-research ``cmmd``), step by step:

    ``io_util.CMMDDataset._center_crop_and_resize`` (the largest centred square, ``resize((336, 336),
    BICUBIC)``) and ``_read_image`` (``np.asarray(im).astype(np.float32)``) per image,
    ``compute_embeddings_for_dir``'s ``/ 255.0`` of the batch, ``embedding._resize_bicubic`` (torch
    bicubic ``interpolate`` to 336 of the NHWC batch: the identity at 336), ``CLIPImageProcessor(
    do_normalize=True, do_center_crop=False, do_resize=False, do_rescale=False)`` (``(x - mean) / std``,
    channels first), the network's ``image_embeds`` divided by their norm. The network is open_clip's
    model (CMMD loads the same one through transformers, not installed here, with other key names)."""
    from PIL import Image

    model, _ = _open_clip_model(setup)
    size = 336
    mean, std = np.asarray(CLIP_MEAN, dtype=np.float32), np.asarray(CLIP_STD, dtype=np.float32)

    def centre_crop_and_resize(im: Any) -> Any:
        w, h = im.size
        side = min(w, h)
        top, left = (h - side) // 2, (w - side) // 2
        return im.crop((left, top, left + side, top + side)).resize((size, size), resample=Image.BICUBIC)

    def features(x: torch.Tensor) -> torch.Tensor:
        batch = np.stack([np.asarray(centre_crop_and_resize(im)).astype(np.float32) for im in _pil_images(x)])
        batch = batch / 255.0
        images = torch.from_numpy(batch.transpose(0, 3, 1, 2))
        images = F.interpolate(images, size=(size, size), mode="bicubic").permute(0, 2, 3, 1).numpy()
        pixels = torch.from_numpy(((images - mean) / std).transpose(0, 3, 1, 2).astype(np.float32))
        embeds = model.encode_image(pixels)
        return embeds / torch.linalg.norm(embeds, axis=-1, keepdims=True)

    return features
