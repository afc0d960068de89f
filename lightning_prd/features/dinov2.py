"""DINOv2 CLS embeddings as FD_DINOv2 is defined: ViT-L/14, EDM2's or dgm-eval's preprocessing, offline.

FD_DINOv2 (Stein et al. 2023, "Exposing flaws of generative model evaluation metrics", the dgm-eval
package; Karras et al. 2024, EDM2, ``calculate_metrics.py``) is the Fréchet distance of the
1,024-D CLS embeddings of **DINOv2 ViT-L/14** at 224 x 224. dgm-eval recommends ViT-L/14 for reported
numbers (ViT-B/14 is lighter, for tracking during training); the default here is ``arch="vitl14"``.

**Preprocessing** (``resize=``), images uint8 ``[B, C, H, W]`` (0..255) or float in [0, 1], C = 1 or 3,
grayscale repeated to RGB:

* ``"edm2"`` (default): EDM2's ``DINOv2Detector(resize_mode="torch")`` (NVlabs/edm2
  ``calculate_metrics.py``): the uint8 values as float32 0..255,
  ``F.interpolate(size=(224, 224), mode="bicubic", antialias=True)`` (at every input size, no
  clamping), then ``x / 255``, minus ImageNet mean, divided by ImageNet std. The network input
  equals EDM2's bit for bit (``tests/test_dinov2_clip.py``).
* ``"dgm-eval"``: dgm-eval's ``DINOv2Encoder.transform`` (``TF.Resize((224, 224), BICUBIC)`` of the
  PIL image, ``ToTensor``, ``Normalize``), which is also EDM2's ``resize_mode="pil"``: Pillow's 8-bit
  bicubic resize, computed on tensors bit for bit as Pillow does it
  (:func:`~lightning_prd.features.dino_clip.pil_bicubic_uint8`; no PIL needed), then the same
  normalisation. EDM2 calls its torch mode "almost the same"; the two differ by the uint8
  rounding of the resized image and Pillow's fixed-point weights.

**Quantisation** of float input (``quantisation=``, :func:`~lightning_prd.features.resize.quantise`):
EDM2 feeds its detector uint8 images; generator output reaches them through
``training/encoders.py``: ``StandardRGBEncoder.decode`` (pixel-space models such as
ImageNet-64) is ``(x * 127.5 + 128).clip(0, 255).to(torch.uint8)`` on [-1, 1] output, i.e.
``floor(255 f + 0.5)`` for ``f = (x + 1) / 2`` in [0, 1]: ``"round"`` (default);
``StabilityVAEEncoder.decode`` (the latent models, ImageNet-512) is
``x.clamp(0, 1).mul(255).to(torch.uint8)``: ``"floor"``. ``"none"`` (``resize="edm2"`` only)
resizes ``255 f`` unrounded.

**Files** (both local; nothing is downloaded):

1. the hub repository code, a clone of https://github.com/facebookresearch/dinov2, at
   ``torch.hub.get_dir()/facebookresearch_dinov2_main`` (where ``torch.hub`` caches it) or passed as
   ``repo_dir``; the network is ``torch.hub.load(repo_dir, "dinov2_<arch>", source="local",
   pretrained=False)``, whose ``forward`` returns the normalised CLS token (EDM2 and dgm-eval take
   the same output);
2. the checkpoint ``dinov2_<arch>_pretrain.pth`` (e.g. ``dinov2_vitl14_pretrain.pth``) from
   ``https://dl.fbaipublicfiles.com/dinov2/dinov2_<arch>/dinov2_<arch>_pretrain.pth``, in
   ``torch.hub.get_dir()/checkpoints`` or passed as ``weights`` (a path or a state dict).

Example (a stand-in hub repository; the real one is the clone above):
    >>> import pathlib, tempfile, torch
    >>> repo = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (repo / "hubconf.py").write_text(
    ...     "import torch\\n"
    ...     "def dinov2_vitl14(pretrained=True):\\n"
    ...     "    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 14, 14), torch.nn.AdaptiveAvgPool2d(1), "
    ...     "torch.nn.Flatten())\\n"
    ...     "    net.embed_dim = 8\\n"
    ...     "    return net\\n"
    ... )
    >>> net = DINOv2Features(repo_dir=repo, random_init=True, seed=0)
    >>> images = torch.randint(0, 256, (2, 3, 48, 64), dtype=torch.uint8)
    >>> tuple(net(images).shape), net.num_features, net.preprocessing["resize"]
    ((2, 8), 8, 'edm2-torch-bicubic-antialias')
    >>> torch.equal(net(images), net(images.float() / 255))  # float k / 255 is rounded back to k
    True
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Dict, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_prd.features.dino_clip import normalisation, normalise, pil_bicubic_uint8, pil_pass_order
from lightning_prd.features.images import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ImageExtractor,
    WeightsArg,
    file_sha256,
    load_into,
    load_state_dict,
    resolve_weights,
    seeded,
)
from lightning_prd.features.resize import QUANTISATION_RULES, uint8_images
from lightning_prd.functional.engine.inputs import check_positive_int

DINOV2_WIDTHS = {"vits14": 384, "vitb14": 768, "vitl14": 1024, "vitg14": 1536}
DINOV2_URL = "https://dl.fbaipublicfiles.com/dinov2/dinov2_{arch}/dinov2_{arch}_pretrain.pth"
RESIZES = ("edm2", "dgm-eval")
_RESIZE_LABELS = {"edm2": "edm2-torch-bicubic-antialias", "dgm-eval": "pil-bicubic"}


def default_dinov2_repo() -> Path:
    """Where ``torch.hub`` keeps its clone of the DINOv2 repository."""
    return Path(torch.hub.get_dir()) / "facebookresearch_dinov2_main"


def _check_options(arch: Any, resize: Any, quantisation: Any, size: Any) -> int:
    if arch not in DINOV2_WIDTHS:
        raise ValueError(f"Expected argument `arch` to be one of {sorted(DINOV2_WIDTHS)}, but got {arch!r}")
    if resize not in RESIZES:
        raise ValueError(f"Expected argument `resize` to be one of {RESIZES}, but got {resize!r}")
    if quantisation not in QUANTISATION_RULES:
        raise ValueError(
            f"Expected argument `quantisation` to be one of {QUANTISATION_RULES}, but got {quantisation!r}"
        )
    if quantisation == "none" and resize != "edm2":
        raise ValueError(
            f"Expected argument `quantisation` to be 'round' or 'floor' with resize={resize!r} (Pillow resizes "
            "uint8 images), but got 'none'"
        )
    size = check_positive_int(size, "size")
    if size % 14:
        raise ValueError(f"Expected argument `size` to be a multiple of the patch size 14, but got {size}")
    return size


class DINOv2Features(ImageExtractor):
    """DINOv2 CLS embeddings from a local hub repository and checkpoint (module docstring).

    Args:
        weights: checkpoint path (or state dict); None looks for ``dinov2_<arch>_pretrain.pth``
            in torch's hub cache and raises ``FileNotFoundError`` saying what to get when it is missing.
        arch: ``"vitl14"`` (default, FD_DINOv2's), ``"vits14"``, ``"vitb14"`` or ``"vitg14"``.
        repo_dir: local clone of facebookresearch/dinov2 (default: torch's hub cache). Any
            directory with a ``hubconf.py`` defining ``dinov2_<arch>(pretrained=...)`` works.
        resize: ``"edm2"`` (default) or ``"dgm-eval"`` (module docstring).
        quantisation: rounding of float input, ``"round"`` (default), ``"floor"`` or ``"none"``.
        random_init: random weights (tests and smoke runs only); the repository is still needed.
        seed: seeds the network's construction (its random initialisation with ``random_init``).
        size: input size, a multiple of 14 (224, as EDM2 and dgm-eval use).

    Attributes:
        name: ``"dinov2"``; ``arch``: the architecture.
        weights_sha256: hex SHA-256 of the weights file, None for a state dict or ``random_init``.
        preprocessing: resize, quantisation, input size, normalisation and crop (JSON values).
    """

    #: rows per call: at most about 4 GiB of activations (24.3 MiB per image, ViT-L/14; bench_extractor_memory.py)
    default_batch_size = 128

    def __init__(
        self,
        weights: WeightsArg = None,
        *,
        arch: str = "vitl14",
        repo_dir: Union[None, str, Path] = None,
        resize: str = "edm2",
        quantisation: str = "round",
        random_init: bool = False,
        seed: int = 0,
        size: int = 224,
    ) -> None:
        size = _check_options(arch, resize, quantisation, size)
        repo = Path(repo_dir).expanduser() if repo_dir is not None else default_dinov2_repo()
        if not (repo / "hubconf.py").is_file():
            raise FileNotFoundError(
                f"DINOv2 needs its hub repository code, not found at {repo}: run "
                f"`git clone https://github.com/facebookresearch/dinov2 {repo}` on a machine with network access "
                f"(or pass repo_dir=)"
            )
        entry = f"dinov2_{arch}"
        source = resolve_weights(
            weights,
            model=f"DINOv2 {arch}",
            filename=f"{entry}_pretrain.pth",
            url=DINOV2_URL.format(arch=arch),
            random_init=random_init,
        )
        super().__init__(size, mode="bicubic")
        with seeded(seed), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "xFormers is not available")  # as EDM2 does
            net = torch.hub.load(str(repo), entry, source="local", pretrained=False)
        if source is not None:
            load_into(net, load_state_dict(source, f"DINOv2 {arch}"), f"DINOv2 {arch}", source)
        self.net = net
        self.num_features = int(getattr(net, "embed_dim", DINOV2_WIDTHS[arch]))
        self.name, self.arch, self.resize, self.quantisation = "dinov2", arch, resize, quantisation
        self.weights_sha256 = file_sha256(source) if isinstance(source, Path) else None
        self.preprocessing: Dict[str, Any] = {
            "resize": _RESIZE_LABELS[resize],
            "quantisation": quantisation,
            "input_size": list(self.input_size),
            "normalisation": normalisation(IMAGENET_MEAN, IMAGENET_STD),
            "crop": None,
        }
        if resize == "dgm-eval":
            self.preprocessing["pil_pass_order"] = pil_pass_order()
        self.freeze()

    def preprocess(self, x: Any) -> Tensor:
        """The network input ``[B, 3, size, size]`` for images ``x`` (module docstring)."""
        device = next((p.device for p in self.parameters()), torch.device("cpu"))
        x = (x if isinstance(x, Tensor) else torch.as_tensor(x)).to(device)
        x = uint8_images(x, self.quantisation)
        if self.resize == "edm2":  # EDM2: interpolate(x.to(float32), bicubic, antialias=True), then / 255
            x = F.interpolate(x.to(torch.float32), size=self.input_size, mode="bicubic", antialias=True)
        else:
            x = pil_bicubic_uint8(x, self.input_size)
        return normalise(x, IMAGENET_MEAN, IMAGENET_STD)

    def embed(self, x: Tensor) -> Tensor:
        return self.net(x)


__all__ = ["DINOV2_URL", "DINOV2_WIDTHS", "DINOv2Features", "RESIZES", "default_dinov2_repo"]
