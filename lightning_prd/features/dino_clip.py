"""DINOv2 and CLIP image embeddings, offline (optional adapters).

dgm-eval (Stein et al. 2023) recommends DINOv2 ViT-L/14 features for reported numbers and
ViT-B/14 for tracking during training; Inception under-rates diffusion models. Both adapters
here follow that package's conventions (bicubic resize, CLS embedding) and never download.

**DINOv2** (``DINOv2Features``) needs two local things, both of which ``torch.hub.load``
would normally fetch:

1. the hub repository code: a clone of https://github.com/facebookresearch/dinov2 at
   ``torch.hub.get_dir()/facebookresearch_dinov2_main`` (where ``torch.hub`` caches it),
   or anywhere else passed as ``repo_dir``;
2. the checkpoint ``dinov2_<arch>_pretrain.pth`` (e.g. ``dinov2_vitb14_pretrain.pth``) from
   ``https://dl.fbaipublicfiles.com/dinov2/dinov2_<arch>/dinov2_<arch>_pretrain.pth``, in
   ``torch.hub.get_dir()/checkpoints`` or passed as ``weights``.

Features: the normalised CLS token (384/768/1024/1536-D for vits14/vitb14/vitl14/vitg14);
images resized to 224 x 224 (bicubic, antialiased), ImageNet mean/std.

**CLIP** (``CLIPFeatures``) needs the ``open_clip_torch`` package and a local checkpoint
(``weights=PATH``: an open_clip ``.bin``/``.pt``/``.safetensors`` file for ``arch``, e.g.
``open_clip_pytorch_model.bin`` of the Hugging Face repository
``laion/CLIP-ViT-B-32-laion2B-s34B-b79K`` for ``arch="ViT-B-32"``), or ``pretrained=TAG`` when
that tag's files are already in the local Hugging Face cache. Features: ``encode_image``,
the projected image embedding (512-D for ViT-B-32), images resized bicubically to the
model's size and normalised with CLIP's statistics. (dgm-eval takes the token before the
projection instead; the two differ by a linear map.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import torch
from torch import Tensor

from lightning_prd.features.images import ImageExtractor, WeightsArg, load_into, load_state_dict, resolve_weights

DINOV2_WIDTHS = {"vits14": 384, "vitb14": 768, "vitl14": 1024, "vitg14": 1536}
DINOV2_URL = "https://dl.fbaipublicfiles.com/dinov2/dinov2_{arch}/dinov2_{arch}_pretrain.pth"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def default_dinov2_repo() -> Path:
    """Where ``torch.hub`` keeps its clone of the DINOv2 repository."""
    return Path(torch.hub.get_dir()) / "facebookresearch_dinov2_main"


class DINOv2Features(ImageExtractor):
    """DINOv2 CLS embeddings from a local hub repository and checkpoint (module docstring).

    Args:
        weights: checkpoint path (or state dict); None looks for ``dinov2_<arch>_pretrain.pth``
            in torch's hub cache.
        arch: ``"vits14"``, ``"vitb14"`` (default), ``"vitl14"`` or ``"vitg14"``.
        repo_dir: local clone of facebookresearch/dinov2 (default: torch's hub cache).
        random_init: random weights (tests and smoke runs only); the repository is still needed.
        size: input size, a multiple of 14 (224).
    """

    def __init__(
        self,
        weights: WeightsArg = None,
        *,
        arch: str = "vitb14",
        repo_dir: Union[None, str, Path] = None,
        random_init: bool = False,
        size: int = 224,
    ) -> None:
        if arch not in DINOV2_WIDTHS:
            raise ValueError(f"Expected argument `arch` to be one of {sorted(DINOV2_WIDTHS)}, but got {arch!r}")
        repo = Path(repo_dir).expanduser() if repo_dir is not None else default_dinov2_repo()
        if not (repo / "hubconf.py").is_file():
            raise FileNotFoundError(
                f"DINOv2 needs its hub repository code, not found at {repo}: run "
                f"`git clone https://github.com/facebookresearch/dinov2 {repo}` on a machine with network access "
                f"(or pass repo_dir=)"
            )
        name = f"dinov2_{arch}"
        source = resolve_weights(
            weights,
            model=f"DINOv2 {arch}",
            filename=f"{name}_pretrain.pth",
            url=DINOV2_URL.format(arch=arch),
            random_init=random_init,
        )
        super().__init__(size, mode="bicubic")
        self.num_features = DINOV2_WIDTHS[arch]
        self.net = torch.hub.load(str(repo), name, source="local", pretrained=False)
        if source is not None:
            load_into(self.net, load_state_dict(source, f"DINOv2 {arch}"), f"DINOv2 {arch}", source)
        self.freeze()

    def embed(self, x: Tensor) -> Tensor:
        return self.net(x)


def _require_open_clip() -> Any:
    try:
        import open_clip
    except ImportError as err:
        raise ImportError(
            "The CLIP extractor needs open_clip, which is not installed: pip install open_clip_torch"
        ) from err
    return open_clip


class CLIPFeatures(ImageExtractor):
    """CLIP image embeddings through open_clip, from a local checkpoint (module docstring).

    Args:
        weights: path to an open_clip checkpoint of ``arch``.
        arch: open_clip model name, e.g. ``"ViT-B-32"`` or ``"ViT-L-14"``.
        pretrained: an open_clip pretrained tag to resolve from the local Hugging Face cache
            instead of ``weights``.
        random_init: random weights (tests and smoke runs only).
    """

    def __init__(
        self,
        weights: Union[None, str, Path] = None,
        *,
        arch: str = "ViT-B-32",
        pretrained: Optional[str] = None,
        random_init: bool = False,
    ) -> None:
        given = [
            n
            for n, v in (("weights", weights), ("pretrained", pretrained), ("random_init", random_init))
            if v not in (None, False)
        ]
        if len(given) > 1:
            raise ValueError(
                f"Expected one of `weights`, `pretrained` and `random_init` for CLIP, but got {' and '.join(given)}"
            )
        if not given:
            raise FileNotFoundError(
                f"CLIP {arch} weights not given (lightning_prd never downloads weights): pass weights=PATH to a local "
                f"open_clip checkpoint of {arch} (e.g. for ViT-B-32 the file `open_clip_pytorch_model.bin` of the "
                f"Hugging Face "
                f"repository laion/CLIP-ViT-B-32-laion2B-s34B-b79K), or pretrained=TAG when that tag is already in the "
                f"Hugging Face cache, or random_init=True for tests"
            )
        if weights is not None and not Path(weights).expanduser().is_file():
            raise FileNotFoundError(f"CLIP weights file {str(weights)!r} does not exist")
        open_clip = _require_open_clip()
        tag = str(Path(weights).expanduser()) if weights is not None else pretrained
        net = open_clip.create_model(arch, pretrained=tag)
        size = net.visual.image_size
        super().__init__(size if isinstance(size, int) else tuple(size), mean=CLIP_MEAN, std=CLIP_STD, mode="bicubic")
        self.num_features = int(net.visual.output_dim)
        self.net = net
        self.freeze()

    def embed(self, x: Tensor) -> Tensor:
        return self.net.encode_image(x)


__all__ = ["CLIPFeatures", "DINOv2Features", "default_dinov2_repo"]
