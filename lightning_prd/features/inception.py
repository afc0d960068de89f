"""InceptionV3 pool features (2,048-D): the FID and PRD convention (Heusel et al. 2017; Sajjadi et al. 2018).

The network is torchvision's ``inception_v3`` architecture; the features are the output of
the last average pool (``pool3``), before the classifier. **Nothing is downloaded**: the
weights come from a local file (``weights=PATH``) or from torch's hub cache, where torchvision
would have stored them (``torch.hub.get_dir()/checkpoints``, i.e. ``$TORCH_HOME/hub/checkpoints``,
by default ``~/.cache/torch/hub/checkpoints``). Accepted files there, in this order:

* ``inception_v3_google-0cc3c7bd.pth``, torchvision's ImageNet weights, from
  https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth
  (the older ``inception_v3_google-1a9a5a14.pth`` works too);
* ``pt_inception-2015-12-05-6726825d.pth``, pytorch-fid's port of the TensorFlow FID
  Inception, from https://github.com/mseitzer/pytorch-fid/releases (weights 0.3.0).

Preprocessing: uint8 [0, 255] or float [0, 1] images, grayscale repeated to RGB, bilinear
antialiased resize to 299 x 299, then ``(x - 0.5) / 0.5`` (inputs in [-1, 1], what both weight
files were trained with). Needs torchvision (``pip install 'lightning-prd[images]'``).

Difference from the TensorFlow FID network: pytorch-fid's FID Inception changes the pooling
of a few blocks and resizes without antialiasing; with its weights loaded into torchvision's
architecture, features are close to but not bit-identical to published FID features. Use
this extractor to compare your own models with each other; to quote FID next to papers,
use the reference implementation.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from lightning_prd.features.images import (
    ImageExtractor,
    WeightsArg,
    load_into,
    load_state_dict,
    require_torchvision,
    resolve_weights,
    seeded,
)

FILENAME = "inception_v3_google-0cc3c7bd.pth"
URL = "https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth"
ALSO_ACCEPTED = ("inception_v3_google-1a9a5a14.pth", "pt_inception-2015-12-05-6726825d.pth")


class InceptionV3Features(ImageExtractor):
    """2,048-D InceptionV3 pool features of images (input contract: see :mod:`lightning_prd.features.base`).

    Args:
        weights: path to a state dict of torchvision's ``Inception3`` (1,000 or 1,008 classes,
            with or without the auxiliary head), or the state dict itself; None looks in
            torch's hub cache (module docstring) and raises ``FileNotFoundError`` saying which
            file to put where when it is not there.
        random_init: build a randomly initialised network instead (tests and smoke runs only).
        seed: seeds ``random_init``.
        antialias: antialiased resize to 299 x 299.

    Example (needs torchvision and the weights file)::

        extractor = InceptionV3Features(weights="~/weights/inception_v3_google-0cc3c7bd.pth")
        features = extractor(images_uint8)  # [B, 3, H, W] -> [B, 2048]
    """

    num_features = 2048

    def __init__(
        self, weights: WeightsArg = None, *, random_init: bool = False, seed: int = 0, antialias: bool = True
    ) -> None:
        source = resolve_weights(
            weights, model="InceptionV3", filename=FILENAME, url=URL, random_init=random_init, also=ALSO_ACCEPTED
        )
        tv = require_torchvision("InceptionV3")
        super().__init__(299, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), antialias=antialias)
        inception3 = tv.models.inception.Inception3
        if source is None:
            with seeded(seed):
                net = inception3(aux_logits=False, transform_input=False, init_weights=True)
        else:
            state = load_state_dict(source, "InceptionV3")
            fc = state.get("fc.weight")
            num_classes = int(fc.shape[0]) if fc is not None else 1000
            aux = any(k.startswith("AuxLogits.") for k in state)
            net = inception3(num_classes=num_classes, aux_logits=aux, transform_input=False, init_weights=False)
            load_into(net, state, "InceptionV3", source)
        net.aux_logits, net.AuxLogits = False, None
        net.fc = nn.Identity()  # the pool3 features come out of forward
        self.net = net
        self.freeze()

    def embed(self, x: Tensor) -> Any:
        return self.net(x)
