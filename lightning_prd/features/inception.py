"""torchvision's InceptionV3 with its ImageNet weights: 2,048-D pool features, **not** the FID network.

The network is torchvision's ``inception_v3`` architecture; the features are the output of
the last average pool, before the classifier. **Nothing is downloaded**: the weights come from a
local file (``weights=PATH``) or from torch's hub cache, where torchvision would have stored them
(``torch.hub.get_dir()/checkpoints``, i.e. ``$TORCH_HOME/hub/checkpoints``, by default
``~/.cache/torch/hub/checkpoints``). Accepted files, in this order: ``inception_v3_google-0cc3c7bd.pth``,
torchvision's ImageNet weights, from https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth,
and the older ``inception_v3_google-1a9a5a14.pth``.

**For FID use** :class:`~lightning_prd.features.fid_inception.FIDInceptionFeatures`
(``get_extractor("fid-inception")``): the TensorFlow FID graph, whose pooling differs from
torchvision's (no padding counted in the Mixed blocks' average pools, a max pool in ``Mixed_7c``) and
whose weights are the 1,008-class TF weights (pytorch-fid's ``pt_inception-2015-12-05-6726825d.pth``,
torch-fidelity's ``weights-inception-2015-12-05-6726825d.pth``). Those weights in this architecture give
features that are neither FID features nor ImageNet features, so this extractor refuses them (a
``ValueError`` naming the extractor to use), whether given as ``weights`` or found in the hub cache
without torchvision's file.

Preprocessing: uint8 [0, 255] or float [0, 1] images, grayscale repeated to RGB, bilinear
antialiased resize to 299 x 299, then ``(x - 0.5) / 0.5`` (inputs in [-1, 1]). Needs torchvision, the
release built for the installed torch, checked before the weights are looked for (the error gives the
pip command: :func:`~lightning_prd.features.install_hint.torchvision_install_command`). Use it to
compare your own models with each other on ImageNet features; to quote FID next to papers, use
``"fid-inception"`` with a named protocol.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from torch import Tensor, nn

from lightning_prd.features.images import (
    PYTORCH_FID_INCEPTION,
    TORCH_FIDELITY_INCEPTION,
    ImageExtractor,
    WeightsArg,
    hub_checkpoint_dir,
    load_into,
    load_state_dict,
    require_torchvision,
    resolve_weights,
    seeded,
)
from lightning_prd.features.vgg_nvlabs import is_torchscript_file

FILENAME = "inception_v3_google-0cc3c7bd.pth"
URL = "https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth"
ALSO_ACCEPTED = ("inception_v3_google-1a9a5a14.pth",)
FID_FILES = (PYTORCH_FID_INCEPTION, TORCH_FIDELITY_INCEPTION)
_USE_FID = (
    "FID weights (the TensorFlow graph's, 1,008 classes) belong to the FID network: use "
    "FIDInceptionFeatures(weights=...) / get_extractor('fid-inception', weights=...) (CLI: --extractor fid-inception); "
    f"this extractor takes torchvision's ImageNet Inception ({FILENAME} from {URL})"
)


def _refuse_fid_weights(source: Any, state: Mapping[str, Any]) -> None:
    """``ValueError`` when ``state`` is the FID Inception's state dict (a 1,008-class ``fc``)."""
    fc = state.get("fc.weight")
    if isinstance(fc, Tensor) and fc.ndim == 2 and fc.shape[0] == 1008:
        where = repr(str(source)[:200]) if isinstance(source, Path) else "a state dict"
        raise ValueError(
            f"Expected torchvision's ImageNet InceptionV3 weights (1,000 classes), but got {where}: {_USE_FID}"
        )


def _check_hub_for_fid_only(weights: Any, random_init: bool) -> None:
    """With no file given, a hub cache holding only the FID weights gets an error naming the FID extractor."""
    if weights is not None or random_init:
        return
    hub = hub_checkpoint_dir()
    if any((hub / name).is_file() for name in (FILENAME, *ALSO_ACCEPTED)):
        return
    found = [name for name in FID_FILES if (hub / name).is_file()]
    if found:
        raise ValueError(
            f"InceptionV3 (torchvision, ImageNet) weights not found in {hub}, which holds {found[0]}: {_USE_FID}"
        )


class InceptionV3Features(ImageExtractor):
    """2,048-D InceptionV3 pool features of images (input contract: see :mod:`lightning_prd.features.base`).

    Args:
        weights: path to a state dict of torchvision's ImageNet ``Inception3`` (1,000 classes,
            with or without the auxiliary head), or the state dict itself; None looks in
            torch's hub cache (module docstring) and raises ``FileNotFoundError`` saying which
            file to put where when it is not there. FID weights (1,008 classes) raise
            ``ValueError``: they go to ``FIDInceptionFeatures``.
        random_init: build a randomly initialised network instead (tests and smoke runs only).
        seed: seeds ``random_init``.
        antialias: antialiased resize to 299 x 299.

    Raises:
        ImportError: torchvision is not installed (checked first; the message gives the pip command of
            the torchvision built for the installed torch).

    Example (needs torchvision and the weights file)::

        extractor = InceptionV3Features(weights="~/weights/inception_v3_google-0cc3c7bd.pth")
        features = extractor(images_uint8)  # [B, 3, H, W] -> [B, 2048]
    """

    #: rows per call: at most about 4 GiB of activations (20.4 MiB per image, FID Inception; bench_extractor_memory.py)
    default_batch_size = 128

    num_features = 2048

    def __init__(
        self, weights: WeightsArg = None, *, random_init: bool = False, seed: int = 0, antialias: bool = True
    ) -> None:
        tv = require_torchvision("InceptionV3")  # what to install comes before which weights to fetch
        _check_hub_for_fid_only(weights, random_init)
        source = resolve_weights(
            weights, model="InceptionV3", filename=FILENAME, url=URL, random_init=random_init, also=ALSO_ACCEPTED
        )
        if isinstance(source, Path) and is_torchscript_file(source):
            raise ValueError(
                f"Expected a state dict file, but {str(source)[:200]!r} is a TorchScript archive: {_USE_FID}"
            )
        state = None if source is None else load_state_dict(source, "InceptionV3")
        if state is not None:
            _refuse_fid_weights(source, state)
        super().__init__(299, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), antialias=antialias)
        inception3 = tv.models.inception.Inception3
        if state is None:
            with seeded(seed):
                net = inception3(aux_logits=False, transform_input=False, init_weights=True)
        else:
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
