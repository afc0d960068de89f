"""NVlabs' VGG-16 metric network ``vgg16.pt`` (TorchScript), driven as StyleGAN2-ADA / StyleGAN3 drive it.

The improved precision/recall of Kynkäänniemi et al. (2019) as NVlabs' ``pr50k3`` metric reports it
(StyleGAN2-ADA, StyleGAN3 and the papers that quote them) embeds images with NVlabs' VGG-16, a
TorchScript archive that resizes and normalises inside itself and returns the 4,096-D fc2 features
after the ReLU. :class:`NVlabsVGG16Features` loads that file and calls it exactly as
``metrics/metric_utils.py`` of StyleGAN2-ADA-pytorch / StyleGAN3 does:

1. images as uint8 ``[B, 3, H, W]`` at their own size (the network resizes); a one-channel batch
   is repeated to three channels (``images.repeat([1, 3, 1, 1])``), ``[B, H, W]`` is read as one
   channel;
2. float images in [0, 1] are quantised by NVlabs' rule for generator output. NVlabs maps the
   generator's [-1, 1] output ``img`` with ``(img * 127.5 + 128).clamp(0, 255).to(torch.uint8)``;
   for ``x = (img + 1) / 2`` in [0, 1] that is ``floor(255 x + 0.5)`` clamped to [0, 255]
   (:func:`~lightning_prd.features.resize.quantise` with ``"round"``): a float image ``k / 255``
   gives back ``k``. The two formulas can differ only where float rounding puts a value on the
   other side of a half step;
3. ``detector(images, return_features=True)``, the result stored as float32 (NVlabs'
   ``FeatureStats.append`` does ``np.asarray(x, dtype=np.float32)``). NVlabs' ``compute_pr`` then
   casts the features to float16 for its distances; that belongs to the metric, not to the
   features, and is not done here.

**The file is code.** A TorchScript archive holds a program that ``torch.jit.load`` compiles and
runs; load only a file from a source you trust. This package otherwise treats files from elsewhere
as data (state dicts read with ``weights_only=True``), so a TorchScript file is taken by a published
SHA-256 or an explicit path only: this class loads the path given to it (registry name
``"vgg16-nvlabs"``, ``weights=PATH``) and looks in no cache directory; the ``pr50k3`` protocol's lookup
in torch's hub cache takes a TorchScript ``vgg16.pt`` only when its SHA-256 is a published one, and
none is published, so pass the path; :class:`~lightning_prd.features.vgg.VGG16Features` refuses it.

Files: ``vgg16.pt`` from https://nvlabs-fi-cdn.nvidia.com/stylegan2-ada-pytorch/pretrained/metrics/vgg16.pt
(the URL in StyleGAN2-ADA-pytorch's ``metrics/precision_recall.py``, loaded there with
``torch.jit.load``). StyleGAN3's ``metrics/precision_recall.py`` names
https://api.ngc.nvidia.com/v2/models/nvidia/research/stylegan3/versions/1/files/metrics/vgg16.pkl,
a Python pickle loaded with ``pickle.load``; a pickle is not read here (it runs arbitrary code when
read), use the ``vgg16.pt`` file. torch-fidelity's test suite
(``tests/torch_pure/fe_vgg16/test_vgg16_fe.py``) asserts that ``vgg16.pt`` and its own VGG-16
(torchvision's ``vgg16-397923af.pth``, TensorFlow-1 bilinear resize; here
``VGG16Features(resize="tf1")``, equal to it) differ by less than 1e-4 (one random image at each of
32 to 512 px).

Example (a TorchScript stand-in with the call signature of ``vgg16.pt``):
    >>> import os, tempfile, torch
    >>> class StandIn(torch.nn.Module):
    ...     def forward(self, img: torch.Tensor, return_features: bool = False) -> torch.Tensor:
    ...         return img.float().mean(dim=(2, 3)).repeat(1, 4096 // 3 + 1)[:, :4096]
    >>> path = os.path.join(tempfile.mkdtemp(), "vgg16.pt")
    >>> torch.jit.save(torch.jit.script(StandIn()), path)
    >>> net = NVlabsVGG16Features(path)
    >>> images = torch.full((2, 1, 8, 8), 255, dtype=torch.uint8)
    >>> feats = net(images)
    >>> tuple(feats.shape), feats.dtype, float(feats[0, 0])
    ((2, 4096), torch.float32, 255.0)
    >>> torch.equal(net(images.float() / 255), feats)
    True
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional, Union

import torch
from torch import Tensor

from lightning_prd.features.base import FeatureExtractor
from lightning_prd.features.images import file_sha256
from lightning_prd.features.paths import require_file
from lightning_prd.features.resize import uint8_images

FILENAME = "vgg16.pt"
URL = "https://nvlabs-fi-cdn.nvidia.com/stylegan2-ada-pytorch/pretrained/metrics/vgg16.pt"
STYLEGAN3_URL = "https://api.ngc.nvidia.com/v2/models/nvidia/research/stylegan3/versions/1/files/metrics/vgg16.pkl"
QUANTISATION = "round"  # floor(255 x + 0.5): NVlabs' (img * 127.5 + 128).clamp(0, 255).to(uint8) for x = (img + 1) / 2
PathArg = Union[str, "os.PathLike[str]"]


def is_torchscript_file(path: PathArg) -> bool:
    """Whether ``path`` is a TorchScript archive (``torch.jit.save``): a zip with ``code/`` or ``constants.pkl``.

    A state dict saved by ``torch.save`` is a zip too, but holds only ``data.pkl`` and tensor data.
    Nothing is unpickled or run to tell them apart.

    Example:
        >>> import os, tempfile, torch
        >>> folder = tempfile.mkdtemp()
        >>> torch.save({"w": torch.zeros(1)}, os.path.join(folder, "state.pth"))
        >>> torch.jit.save(torch.jit.script(torch.nn.Identity()), os.path.join(folder, "script.pt"))
        >>> [is_torchscript_file(os.path.join(folder, name)) for name in ("state.pth", "script.pt")]
        [False, True]
    """
    if not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
    inner = [name.split("/", 1)[1] for name in names if "/" in name]
    return any(name == "constants.pkl" or name.startswith("code/") for name in inner)


def nvlabs_uint8_images(x: Any, name: str = "images") -> Tensor:
    """Images as the uint8 ``[B, 3, H, W]`` NVlabs' metric networks take (module docstring, steps 1 and 2).

    uint8 input is kept as it is (one channel repeated to three); float input in [0, 1] is rounded to
    ``floor(255 x + 0.5)``. The checks and messages are :func:`~lightning_prd.features.as_float_images`'.

    Example:
        >>> import torch
        >>> nvlabs_uint8_images(torch.tensor([[[0.0, 0.5, 1.0]]])).tolist()
        [[[[0, 128, 255]], [[0, 128, 255]], [[0, 128, 255]]]]
    """
    return uint8_images(x, QUANTISATION, name).contiguous()  # gray repeated into memory, as NVlabs' `repeat`


class NVlabsVGG16Features(FeatureExtractor):
    """4,096-D features of NVlabs' TorchScript ``vgg16.pt``, called as StyleGAN3's precision/recall calls it.

    Args:
        weights: path of the TorchScript file (``vgg16.pt``, module docstring). Required: a
            TorchScript file is code, so this class loads only a path given here and looks in no
            cache directory. Trusted sources only.

    Attributes:
        weights_sha256: hex SHA-256 of the file.
        preprocessing: what happens to images before the network (JSON values).

    The module stays in eval mode, on the CPU until moved (``.to(device)`` moves the TorchScript
    module); images are moved to its device. Example: see the module docstring.
    """

    #: rows per call: at most about 4 GiB of activations (41.9 MiB per image as VGG-16; bench_extractor_memory.py)
    default_batch_size = 64

    num_features = 4096
    input_dtype = torch.uint8
    input_range = (0.0, 1.0)
    input_size = (224, 224)  # vgg16.pt resizes every image to 224 x 224 inside itself

    def __init__(self, weights: Optional[PathArg] = None, *, random_init: bool = False) -> None:
        super().__init__()
        if random_init is not False:
            raise ValueError(
                "Expected argument `random_init` to be False for NVlabs' vgg16.pt (a TorchScript file has no random "
                f"initialisation), but got {random_init!r}; VGG16Features(resize='tf1', random_init=True) is an "
                "offline stand-in"
            )
        if weights is None:
            raise FileNotFoundError(
                f"NVlabs VGG-16 needs the path of its TorchScript file: get `{FILENAME}` from {URL} on a machine with "
                "network access and pass its path as `weights` (CLI: --weights PATH); a TorchScript file is code, "
                "so it is taken from a cache directory only with a published SHA-256, and none is published for it"
            )
        if not isinstance(weights, (str, os.PathLike)):
            raise TypeError(
                f"Expected argument `weights` to be the path of NVlabs' TorchScript file {FILENAME}, "
                f"but got {type(weights).__name__}"
            )
        path = Path(weights).expanduser()
        require_file(
            path,
            f"NVlabs VGG-16 file {str(path)!r}",
            f"expected the file `{FILENAME}` there: get it from {URL} on a machine with network access and pass "
            "its path as `weights` (CLI: --weights)",
        )
        if not is_torchscript_file(path):
            raise ValueError(
                f"Expected argument `weights` to be a TorchScript archive (NVlabs' {FILENAME} from {URL}), but "
                f"{str(path)!r} is not one; a state dict of torchvision's VGG-16 goes to VGG16Features(weights=..., "
                f"resize='tf1'), and StyleGAN3's vgg16.pkl is a Python pickle, which is never loaded (use {FILENAME})"
            )
        self.net = torch.jit.load(str(path), map_location="cpu")  # runs the archive's code: trusted files only
        self.name = "vgg16-nvlabs"
        self.weights_sha256 = file_sha256(path)
        self.preprocessing: Dict[str, Any] = {
            "resize": "inside the TorchScript file",
            "quantisation": QUANTISATION,
            "input_size": list(self.input_size),
            "normalisation": "inside the TorchScript file",
        }
        self.requires_grad_(False)
        self.eval()

    def forward(self, x: Any) -> Tensor:
        images = nvlabs_uint8_images(x)
        device = next((t.device for t in [*self.net.parameters(), *self.net.buffers()]), torch.device("cpu"))
        features = self.net(images.to(device), return_features=True)
        if not isinstance(features, Tensor) or features.ndim != 2 or features.shape[0] != images.shape[0]:
            got = f"shape {tuple(features.shape)}" if isinstance(features, Tensor) else type(features).__name__
            raise ValueError(
                f"Expected the TorchScript module to return [{images.shape[0]}, {self.num_features}] features for "
                f"{images.shape[0]} images (NVlabs' {FILENAME}), but got {got}"
            )
        if features.shape[1] != self.num_features:
            raise ValueError(
                f"Expected the TorchScript module to return {self.num_features} features per image (NVlabs' "
                f"{FILENAME}), but got {features.shape[1]}: is it another network (e.g. inception-2015-12-05.pt)?"
            )
        return features.to(torch.float32)

    def train(self, mode: bool = True) -> NVlabsVGG16Features:
        return super().train(False)
