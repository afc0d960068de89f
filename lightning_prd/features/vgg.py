"""VGG-16 fc2 features (4,096-D): the improved precision/recall convention (Kynkäänniemi et al. 2019).

**Network.** VGG-16 (configuration D of Simonyan & Zisserman 2015) in plain torch, with torchvision's
``vgg16`` module layout (``features``, ``avgpool``, ``classifier``) and the same operations, so a
state dict of torchvision's ``vgg16`` loads as it is and gives torchvision's outputs; torchvision is
not needed. The features are the second fully connected layer, after its ReLU by default
(``layer="fc2_relu"``, what torch-fidelity's precision/recall and NVlabs' ``vgg16.pt`` use) or
before it (``layer="fc2"``).

**Weights** (``weights=PATH``, or found in torch's hub cache ``torch.hub.get_dir()/checkpoints``, i.e.
``$TORCH_HOME/hub/checkpoints``; **nothing is downloaded**): ``vgg16-397923af.pth``, torchvision's
ImageNet weights, from https://download.pytorch.org/models/vgg16-397923af.pth. torch-fidelity's
VGG-16 loads the same file (torchvision's ``VGG16_Weights.IMAGENET1K_V1``, cached in the hub cache
under that name when torch-fidelity downloaded it), and its ``feature_extractor_weights_path`` takes a
state dict of the same layout; any state dict of torchvision's ``vgg16`` (keys ``features.{0..28}``,
``classifier.{0,3,6}``) works, with or without a ``{"state_dict": ...}`` wrapper. A TorchScript file
(NVlabs' ``vgg16.pt``) is refused: it is code; load it explicitly with
:class:`~lightning_prd.features.vgg_nvlabs.NVlabsVGG16Features`.

**Preprocessing** (``resize=``), images uint8 ``[B, C, H, W]`` (0..255) or float in [0, 1], C = 1 or 3,
grayscale repeated to RGB:

* ``"antialias"`` (default): bilinear with antialiasing to 224 x 224 on [0, 1] values, ImageNet
  mean/std (:func:`~lightning_prd.features.preprocess_images`). The resize of no reference tool;
  fine for comparing your own models with each other.
* ``"bilinear"``: the same without antialiasing (``antialias=False`` selects it too).
* ``"tf1"``: torch-fidelity's ``FeatureExtractorVGG16`` exactly: uint8 values as float32 0..255,
  TensorFlow-1 bilinear to 224 x 224 (:func:`~lightning_prd.features.resize.resize_tf1`; applied at
  every size, the identity at 224), then ``(x - 255 mean) / (255 std)`` with ImageNet mean/std.
  Equal to torch-fidelity's features at every input size (``tests/test_vgg_references.py``, shared
  weights, 32 to 512 px on the CPU: bit for bit). torch-fidelity's own test suite
  (``tests/torch_pure/fe_vgg16/test_vgg16_fe.py``) asserts that its VGG-16 with the ImageNet weights
  and NVlabs' ``vgg16.pt`` differ by less than 1e-4 (one random image at each of 32 to 512 px).

**Quantisation** of float input (``quantisation=``, :func:`~lightning_prd.features.resize.quantise`):
``"round"`` (``floor(255 x + 0.5)``, NVlabs' rule for generator output; the default with ``"tf1"``:
torch-fidelity takes only uint8, and a float image ``k / 255`` then gives the features of ``k``),
``"floor"`` (``trunc(255 x)``, torch-fidelity's generator example) or ``"none"`` (the default
otherwise: float values go to the network unrounded).

Example:
    >>> import torch
    >>> net = VGG16Features(random_init=True, resize="tf1")
    >>> images = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    >>> feats = net(images)
    >>> tuple(feats.shape), bool((feats >= 0).all())
    ((2, 4096), True)
    >>> torch.equal(net(images.float() / 255), feats)  # float k / 255 is rounded back to k
    True
    >>> net.preprocessing["resize"], net.weights_sha256 is None
    ('tf1', True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import torch
from torch import Tensor, nn

from lightning_prd.features.images import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ImageExtractor,
    WeightsArg,
    as_float_images,
    file_sha256,
    load_into,
    load_state_dict,
    preprocess_images,
    resolve_weights,
    seeded,
)
from lightning_prd.features.resize import QUANTISATION_RULES, quantise, resize_tf1
from lightning_prd.features.vgg_nvlabs import is_torchscript_file, nvlabs_uint8_images

FILENAME = "vgg16-397923af.pth"
URL = "https://download.pytorch.org/models/vgg16-397923af.pth"
LAYERS = ("fc2_relu", "fc2")
RESIZE_MODES = ("antialias", "bilinear", "tf1")
_RESIZE_LABELS = {"antialias": "torch-bilinear-antialias", "bilinear": "torch-bilinear", "tf1": "tf1"}
_TF1_MEAN = tuple(255 * v for v in IMAGENET_MEAN)  # torch-fidelity normalises 0..255 values
_TF1_STD = tuple(255 * v for v in IMAGENET_STD)
_CONFIG_D = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG16(nn.Module):
    """VGG-16 with torchvision's module names and order (``features``, ``avgpool``, ``classifier``).

    ``init_weights`` redraws the weights as torchvision does (Kaiming normal, fan-out, for the
    convolutions; normal with std 0.01 for the linear layers; zero biases). The modules are built
    and initialised in torchvision's order, so under one seed the random weights equal those of
    ``torchvision.models.vgg16(weights=None)``.
    """

    def __init__(self, init_weights: bool = True) -> None:
        super().__init__()
        layers: List[nn.Module] = []
        channels = 3
        for width in _CONFIG_D:
            if width == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(channels, int(width), kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                channels = int(width)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(4096, 1000),
        )
        if init_weights:
            for module in self.modules():
                if isinstance(module, nn.Conv2d):
                    nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(module, nn.Linear):
                    nn.init.normal_(module.weight, 0, 0.01)
                if isinstance(module, (nn.Conv2d, nn.Linear)) and module.bias is not None:
                    nn.init.zeros_(module.bias)

    def fc2(self, x: Tensor) -> Tensor:
        """fc2 before its ReLU of network input ``x`` ``[B, 3, 224, 224]`` (dropout is the identity in eval mode)."""
        h = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.classifier[3](torch.relu(self.classifier[0](h)))


def _resize_mode(resize: Optional[str], antialias: Optional[bool]) -> str:
    if antialias is not None and not isinstance(antialias, bool):
        raise ValueError(f"Expected argument `antialias` to be a bool or None, but got {antialias!r}")
    if resize is None:
        return "bilinear" if antialias is False else "antialias"
    if resize not in RESIZE_MODES:
        raise ValueError(f"Expected argument `resize` to be one of {RESIZE_MODES}, but got {resize!r}")
    if antialias is not None and antialias != (resize == "antialias"):
        raise ValueError(
            f"Expected argument `antialias` to agree with resize={resize!r} (or to be left out), but got "
            f"antialias={antialias}; `resize` alone chooses the resize"
        )
    return resize


class VGG16Features(ImageExtractor):
    """4,096-D VGG-16 fc2 features of images (input contract: see :mod:`lightning_prd.features.base`).

    Args:
        weights: path of a state dict of torchvision's ``vgg16`` (module docstring) or the state
            dict; None looks in torch's hub cache and raises ``FileNotFoundError`` saying which
            file to put where when it is not there.
        layer: ``"fc2_relu"`` (default) or ``"fc2"`` (before the ReLU).
        resize: ``"antialias"`` (default), ``"bilinear"`` or ``"tf1"`` (torch-fidelity's; module docstring).
        quantisation: rounding of float input to uint8, ``"round"``, ``"floor"`` or ``"none"``;
            None: ``"round"`` with ``resize="tf1"``, else ``"none"``.
        antialias: the older switch of the resize: ``False`` is ``resize="bilinear"``; contradicting
            ``resize`` is an error.
        random_init: a randomly initialised network instead (tests and smoke runs only).
        seed: seeds ``random_init``.

    Attributes:
        name: ``"vgg16"``.
        weights_sha256: hex SHA-256 of the weights file, None for a state dict or ``random_init``.
        preprocessing: resize, quantisation, input size and normalisation (JSON values).
    """

    #: rows per call: at most about 4 GiB of activations (41.9 MiB per image; bench_extractor_memory.py)
    default_batch_size = 64

    num_features = 4096

    def __init__(
        self,
        weights: WeightsArg = None,
        *,
        layer: str = "fc2_relu",
        resize: Optional[str] = None,
        quantisation: Optional[str] = None,
        antialias: Optional[bool] = None,
        random_init: bool = False,
        seed: int = 0,
    ) -> None:
        if layer not in LAYERS:
            raise ValueError(f"Expected argument `layer` to be one of {LAYERS}, but got {layer!r}")
        mode = _resize_mode(resize, antialias)
        if quantisation is None:
            quantisation = "round" if mode == "tf1" else "none"
        if quantisation not in QUANTISATION_RULES:
            raise ValueError(
                f"Expected argument `quantisation` to be one of {QUANTISATION_RULES}, but got {quantisation!r}"
            )
        source = resolve_weights(weights, model="VGG-16", filename=FILENAME, url=URL, random_init=random_init)
        if isinstance(source, Path) and is_torchscript_file(source):
            raise ValueError(
                f"Expected argument `weights` to be a state dict of torchvision's VGG-16 ({FILENAME}), but "
                f"{str(source)!r} is a TorchScript archive (code, such as NVlabs' vgg16.pt): load it explicitly "
                "with NVlabsVGG16Features(weights=PATH) (registry name 'vgg16-nvlabs'), trusted files only"
            )
        super().__init__(224, antialias=mode == "antialias")
        if source is None:
            with seeded(seed):
                net = VGG16(init_weights=True)
        else:
            with torch.device("meta"):  # no random initialisation of weights that are overwritten
                net = VGG16(init_weights=False)
            net = net.to_empty(device="cpu")
            load_into(net, load_state_dict(source, "VGG-16"), "VGG-16", source)
        self.net = net
        self.layer, self.resize, self.quantisation = layer, mode, quantisation
        self.name = "vgg16"
        self.weights_sha256 = file_sha256(source) if isinstance(source, Path) else None
        self.preprocessing: Dict[str, Any] = {
            "resize": _RESIZE_LABELS[mode],
            "quantisation": quantisation,
            "input_size": list(self.input_size),
            "normalisation": {
                "mean": list(_TF1_MEAN if mode == "tf1" else IMAGENET_MEAN),
                "std": list(_TF1_STD if mode == "tf1" else IMAGENET_STD),
            },
        }
        self.freeze()

    def preprocess(self, x: Any) -> Tensor:
        """The network input ``[B, 3, 224, 224]`` for images ``x`` (module docstring)."""
        device = next((p.device for p in self.parameters()), torch.device("cpu"))
        x = (x if isinstance(x, Tensor) else torch.as_tensor(x)).to(device)
        if x.dtype != torch.uint8 and self.quantisation != "none":
            x = quantise(as_float_images(x), self.quantisation)
        if self.resize != "tf1":
            return preprocess_images(x, size=self.input_size, antialias=self.antialias)
        # torch-fidelity's FeatureExtractorVGG16.forward: float32 0..255, TF1 bilinear, normalize(255 mean, 255 std)
        x = nvlabs_uint8_images(x).to(torch.float32) if x.dtype == torch.uint8 else as_float_images(x) * 255.0
        x = resize_tf1(x, self.input_size)
        mean = torch.as_tensor(_TF1_MEAN, dtype=x.dtype, device=x.device)
        std = torch.as_tensor(_TF1_STD, dtype=x.dtype, device=x.device)
        return (x - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)

    def embed(self, x: Tensor) -> Tensor:
        h = self.net.fc2(x)
        return torch.relu(h) if self.layer == "fc2_relu" else h
