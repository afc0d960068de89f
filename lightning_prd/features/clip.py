"""CLIP image embeddings as CMMD is defined: ViT-L/14 at 336 px, the CMMD code's preprocessing, unit norm.

CMMD (Jayasumana et al., CVPR 2024, "Rethinking FID: Towards a Better Evaluation Metric for Image
Generation"; code: google-research ``cmmd``, ported to PyTorch in sayakpaul/cmmd-pytorch) is the MMD
(Gaussian kernel, sigma = 10, times 1,000) of **unit-normalised** CLIP ViT-L/14@336px image
embeddings (``openai/clip-vit-large-patch14-336``: the projected image embedding, 768-D, divided by
its norm in ``embedding.py``). Here the network runs through open_clip: the default
``arch="ViT-L-14-336-quickgelu"`` is open_clip's name for that network with the QuickGELU activation
OpenAI's weights were trained with (open_clip's ``"ViT-L-14-336"`` builds it with GELU, which gives
other features from the same file).

**Preprocessing** (``resize=``), images uint8 ``[B, C, H, W]`` (0..255) or float in [0, 1], C = 1 or 3,
grayscale repeated to RGB; Pillow's 8-bit bicubic resize computed on tensors bit for bit
(:func:`~lightning_prd.features.dino_clip.pil_bicubic_uint8`; no PIL needed):

* ``"cmmd"`` (default): the CMMD code's ``io_util._center_crop_and_resize``: the largest centred
  square (top ``(h - l) // 2``, left ``(w - l) // 2``), resized to 336 x 336 with
  ``Image.BICUBIC``, then ``x / 255`` and CLIP's mean/std (``CLIPImageProcessor(do_normalize=True,
  do_resize=False, do_center_crop=False)``; its extra bicubic resize to 336 is the identity).
* ``"open_clip"``: open_clip's own evaluation transform (``image_transform(336, is_train=False)``,
  also dgm-eval's CLIP transform): ``Resize(336, BICUBIC)`` of the shorter side (the longer to
  ``int(336 * long / short)``), ``CenterCrop(336)`` (offsets ``round((h - 336) / 2)``), ``ToTensor``,
  ``Normalize``. For square images it equals ``"cmmd"``; for others the crop moves by up to a pixel
  and the resize happens before it instead of after.

**Embeddings**: ``encode_image`` (the image tower and its projection), divided by its L2 norm with
``normalize=True`` (default, CMMD's). dgm-eval's FD_CLIP takes the token before the projection,
unnormalised: not this extractor.

**Quantisation** of float input (``quantisation=``, :func:`~lightning_prd.features.resize.quantise`):
the CMMD code reads image files (uint8); float output is rounded as saving it would round it:
``"round"`` (``floor(255 f + 0.5)``, default) or ``"floor"`` (``trunc(255 f)``, torchvision's
``ToPILImage``).

**Weights** (nothing is downloaded): ``weights=PATH`` to an open_clip checkpoint of ``arch``; for
CMMD, ``open_clip_model.safetensors`` (or ``open_clip_pytorch_model.bin``) of the Hugging Face
repository ``timm/vit_large_patch14_clip_336.openai`` (open_clip's copy of OpenAI's
``ViT-L-14-336px.pt``, whose TorchScript archive is not loaded). ``pretrained=TAG`` (e.g.
``"openai"``) takes that tag's file from the local Hugging Face cache (``huggingface_hub`` needed).
Needs the ``open_clip_torch`` package and torchvision, which it imports (the release built for the
installed torch: :mod:`~lightning_prd.features.install_hint`).

Example (needs open_clip):
    >>> import torch
    >>> net = CLIPFeatures(arch="ViT-S-32", random_init=True, seed=0)  # doctest: +SKIP
    >>> feats = net(torch.randint(0, 256, (2, 3, 300, 200), dtype=torch.uint8))  # doctest: +SKIP
    >>> tuple(feats.shape), torch.allclose(feats.norm(dim=1), torch.ones(2))  # doctest: +SKIP
    ((2, 384), True)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_prd.features.dino_clip import (
    centre_crop,
    centre_square,
    normalisation,
    normalise,
    pil_bicubic_uint8,
    pil_pass_order,
    shorter_side,
)
from lightning_prd.features.images import ImageExtractor, file_sha256, seeded
from lightning_prd.features.install_hint import torchvision_install_command
from lightning_prd.features.paths import require_file
from lightning_prd.features.resize import uint8_images

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
CMMD_ARCH = "ViT-L-14-336-quickgelu"
CMMD_WEIGHTS = "open_clip_model.safetensors of https://huggingface.co/timm/vit_large_patch14_clip_336.openai"
RESIZES = ("cmmd", "open_clip")
QUANTISATIONS = ("round", "floor")
_CROP_LABELS = {"cmmd": "cmmd-centre-square-then-resize", "open_clip": "open_clip-resize-shorter-side-then-centre-crop"}
_HF_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")


def _require_open_clip() -> Any:
    try:
        import open_clip
    except ImportError as err:
        raise ImportError(
            f"The CLIP extractor needs open_clip, which is not installed: {torchvision_install_command()} && "
            "pip install open_clip_torch (open_clip needs torchvision: the one built for the installed torch first, "
            "or pip replaces that torch with the newest one)"
        ) from err
    return open_clip


def _cached_tag_file(arch: str, tag: str) -> Path:
    """The local file of open_clip's pretrained ``tag`` of ``arch`` in the Hugging Face cache, never downloaded."""
    cfg = _require_open_clip().get_pretrained_cfg(arch, tag) or {}
    repo = str(cfg.get("hf_hub") or "").strip("/")
    if not repo:
        raise FileNotFoundError(
            f"Expected argument `pretrained` to be an open_clip tag of {arch} with a Hugging Face repository, but "
            f"got {tag!r}; pass weights=PATH to the checkpoint file instead"
        )
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError as err:
        raise ImportError(
            "pretrained=TAG reads the Hugging Face cache with huggingface_hub, which is not installed: "
            "pass weights=PATH instead"
        ) from err
    for filename in _HF_FILES:
        found = try_to_load_from_cache(repo, filename)
        if isinstance(found, (str, os.PathLike)) and Path(found).is_file():
            return Path(found)
    raise FileNotFoundError(
        f"CLIP {arch} weights of tag {tag!r} are not in the local Hugging Face cache (lightning_prd never downloads "
        f"weights): get {_HF_FILES[0]} of https://huggingface.co/{repo} on a machine with network access and pass "
        "weights=PATH"
    )


def _check_one_source(weights: Any, pretrained: Any, random_init: Any) -> None:
    if not isinstance(random_init, bool):
        raise ValueError(f"Expected argument `random_init` to be a bool, but got {random_init!r}")
    given = [n for n, v in (("weights", weights), ("pretrained", pretrained), ("random_init", random_init)) if v]
    if len(given) > 1:
        raise ValueError(
            f"Expected one of `weights`, `pretrained` and `random_init` for CLIP, but got {' and '.join(given)}"
        )


def _weights_file(arch: str, weights: Any, pretrained: Any, random_init: Any) -> Optional[Path]:
    _check_one_source(weights, pretrained, random_init)
    if random_init:
        return None
    if pretrained is not None:
        return _cached_tag_file(arch, str(pretrained))
    if weights is None:
        raise FileNotFoundError(
            f"CLIP {arch} weights not given (lightning_prd never downloads weights): pass weights=PATH to a local "
            f"open_clip checkpoint of {arch} (for CMMD's {CMMD_ARCH}: {CMMD_WEIGHTS}), or pretrained=TAG when "
            "that tag is already in the Hugging Face cache, or random_init=True for tests"
        )
    if not isinstance(weights, (str, os.PathLike)):
        raise TypeError(f"Expected argument `weights` to be a file path, but got {type(weights).__name__}")
    path = Path(weights).expanduser()
    require_file(
        path, f"CLIP weights file {str(path)!r}", f"expected an open_clip checkpoint there (CMMD: {CMMD_WEIGHTS})"
    )
    return path


def _square_size(size: Any) -> Tuple[int, int]:
    pair = (int(size), int(size)) if isinstance(size, int) else (int(size[0]), int(size[1]))
    if pair[0] != pair[1]:
        raise ValueError(f"Expected a CLIP model with a square input size, but its image_size is {pair}")
    return pair


class CLIPFeatures(ImageExtractor):
    """CLIP image embeddings through open_clip, from a local checkpoint (module docstring).

    Args:
        weights: path to an open_clip checkpoint of ``arch``.
        arch: open_clip model name; ``"ViT-L-14-336-quickgelu"`` (default, CMMD's network).
        pretrained: an open_clip pretrained tag to read from the local Hugging Face cache instead
            of ``weights``.
        resize: ``"cmmd"`` (default) or ``"open_clip"`` (module docstring).
        normalize: divide each embedding by its L2 norm (default True, CMMD's).
        quantisation: rounding of float input, ``"round"`` (default) or ``"floor"``.
        random_init: random weights (tests and smoke runs only).
        seed: seeds the model's construction (its random initialisation with ``random_init``).

    Attributes:
        name: ``"clip"``; ``arch``: the open_clip model name.
        weights_sha256: hex SHA-256 of the weights file, None for ``random_init``.
        preprocessing: resize, quantisation, input size, normalisation and crop (JSON values).
    """

    #: rows per call: at most about 4 GiB of activations (63.7 MiB per image, ViT-L/14-336; bench_extractor_memory.py)
    default_batch_size = 64

    def __init__(
        self,
        weights: Union[None, str, Path] = None,
        *,
        arch: str = CMMD_ARCH,
        pretrained: Optional[str] = None,
        resize: str = "cmmd",
        normalize: bool = True,
        quantisation: str = "round",
        random_init: bool = False,
        seed: int = 0,
    ) -> None:
        if resize not in RESIZES:
            raise ValueError(f"Expected argument `resize` to be one of {RESIZES}, but got {resize!r}")
        if quantisation not in QUANTISATIONS:
            raise ValueError(f"Expected argument `quantisation` to be one of {QUANTISATIONS}, but got {quantisation!r}")
        if not isinstance(normalize, bool):
            raise ValueError(f"Expected argument `normalize` to be a bool, but got {normalize!r}")
        if not isinstance(arch, str) or not arch:
            raise ValueError(f"Expected argument `arch` to be an open_clip model name, but got {arch!r}")
        _check_one_source(weights, pretrained, random_init)
        open_clip = _require_open_clip()  # what to install comes before which weights to fetch
        path = _weights_file(arch, weights, pretrained, random_init)
        with seeded(seed):
            model = open_clip.create_model(arch, pretrained=None if path is None else str(path))
        visual = model.visual  # the image tower: encode_image(x) == visual(x) before normalisation
        del model
        super().__init__(_square_size(visual.image_size), mean=CLIP_MEAN, std=CLIP_STD, mode="bicubic")
        self.net = visual
        self.num_features = int(visual.output_dim)
        self.name, self.arch, self.resize = "clip", arch, resize
        self.normalize, self.quantisation = normalize, quantisation
        self.weights_sha256 = file_sha256(path) if path is not None else None
        self.preprocessing: Dict[str, Any] = {
            "resize": "pil-bicubic",
            "pil_pass_order": pil_pass_order(),
            "quantisation": quantisation,
            "input_size": list(self.input_size),
            "normalisation": normalisation(CLIP_MEAN, CLIP_STD),
            "crop": _CROP_LABELS[resize],
            "embedding": "unit-norm" if normalize else "raw",
        }
        self.freeze()

    def preprocess(self, x: Any) -> Tensor:
        """The network input ``[B, 3, S, S]`` for images ``x`` (module docstring)."""
        device = next((p.device for p in self.parameters()), torch.device("cpu"))
        x = (x if isinstance(x, Tensor) else torch.as_tensor(x)).to(device)
        return clip_preprocess(uint8_images(x, self.quantisation), self.input_size, self.resize)

    def embed(self, x: Tensor) -> Tensor:
        features = self.net(x)
        return F.normalize(features, dim=-1) if self.normalize else features


def clip_preprocess(x: Tensor, size: Tuple[int, int], resize: str = "cmmd") -> Tensor:
    """CLIP's network input for uint8 images ``[B, 3, H, W]``: crop and resize by ``resize``, then CLIP mean/std.

    Example:
        >>> import torch
        >>> x = torch.randint(0, 256, (1, 3, 40, 30), dtype=torch.uint8)
        >>> tuple(clip_preprocess(x, (24, 24), "cmmd").shape), tuple(clip_preprocess(x, (24, 24), "open_clip").shape)
        ((1, 3, 24, 24), (1, 3, 24, 24))
    """
    if resize not in RESIZES:
        raise ValueError(f"Expected argument `resize` to be one of {RESIZES}, but got {resize!r}")
    if resize == "cmmd":
        x = pil_bicubic_uint8(centre_square(x), size)
    else:
        x = centre_crop(pil_bicubic_uint8(x, shorter_side(int(x.shape[-2]), int(x.shape[-1]), size[0])), size)
    return normalise(x, CLIP_MEAN, CLIP_STD)


__all__ = ["CLIPFeatures", "CLIP_MEAN", "CLIP_STD", "CMMD_ARCH", "RESIZES", "clip_preprocess"]
