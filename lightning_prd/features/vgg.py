"""VGG-16 fc2 features (4,096-D): the improved precision/recall convention (Kynkäänniemi et al. 2019).

The network is torchvision's ``vgg16``; features are the second fully connected layer,
after its ReLU by default (``layer="fc2_relu"``, what NVIDIA's ``vgg16.pt`` metric network
returns and torch-fidelity's precision/recall uses) or before it (``layer="fc2"``).
**Nothing is downloaded**: the weights come from ``weights=PATH`` or from torch's hub cache,
``torch.hub.get_dir()/checkpoints`` (``$TORCH_HOME/hub/checkpoints``, by default
``~/.cache/torch/hub/checkpoints``), file ``vgg16-397923af.pth`` from
https://download.pytorch.org/models/vgg16-397923af.pth (torchvision's ImageNet weights).

Preprocessing: uint8 [0, 255] or float [0, 1] images, grayscale repeated to RGB, bilinear
antialiased resize to 224 x 224, ImageNet mean/std. NVIDIA's and torch-fidelity's networks
resize without antialiasing (TensorFlow-1 bilinear); pass ``antialias=False`` to come closer
when downsampling large images. Needs torchvision (``pip install 'lightning-prd[images]'``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from lightning_prd.features.images import (
    ImageExtractor,
    WeightsArg,
    load_into,
    load_state_dict,
    require_torchvision,
    resolve_weights,
    seeded,
)

FILENAME = "vgg16-397923af.pth"
URL = "https://download.pytorch.org/models/vgg16-397923af.pth"
LAYERS = ("fc2_relu", "fc2")


class VGG16Features(ImageExtractor):
    """4,096-D VGG-16 fc2 features of images (input contract: see :mod:`lightning_prd.features.base`).

    Args:
        weights: path to a state dict of torchvision's ``vgg16`` (or the state dict); None
            looks in torch's hub cache and raises ``FileNotFoundError`` saying which file to put
            where when it is not there.
        layer: ``"fc2_relu"`` (default) or ``"fc2"`` (before the ReLU).
        random_init: build a randomly initialised network instead (tests and smoke runs only).
        seed: seeds ``random_init``.
        antialias: antialiased resize to 224 x 224.

    Example (needs torchvision and the weights file)::

        extractor = VGG16Features(weights="~/weights/vgg16-397923af.pth")
        features = extractor(images_uint8)  # [B, 3, H, W] -> [B, 4096]
    """

    num_features = 4096

    def __init__(
        self,
        weights: WeightsArg = None,
        *,
        layer: str = "fc2_relu",
        random_init: bool = False,
        seed: int = 0,
        antialias: bool = True,
    ) -> None:
        if layer not in LAYERS:
            raise ValueError(f"Expected argument `layer` to be one of {LAYERS}, but got {layer!r}")
        source = resolve_weights(weights, model="VGG-16", filename=FILENAME, url=URL, random_init=random_init)
        tv = require_torchvision("VGG-16")
        super().__init__(224, antialias=antialias)
        if source is None:
            with seeded(seed):
                net = tv.models.vgg16(weights=None, init_weights=True)
        else:
            net = tv.models.vgg16(weights=None, init_weights=False)
            load_into(net, load_state_dict(source, "VGG-16"), "VGG-16", source)
        self.layer = layer
        self.conv, self.pool = net.features, net.avgpool
        self.fc1, self.fc2 = net.classifier[0], net.classifier[3]  # classifier: fc1 relu drop fc2 relu drop fc3
        self.freeze()

    def embed(self, x: Tensor) -> Tensor:
        h = torch.flatten(self.pool(self.conv(x)), 1)
        h = self.fc2(torch.relu(self.fc1(h)))  # dropout is the identity in eval mode
        return torch.relu(h) if self.layer == "fc2_relu" else h
