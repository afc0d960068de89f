"""The FID InceptionV3 (TensorFlow's ``inception-2015-12-05``) in plain torch, with each reference's preprocessing.

:class:`FIDInceptionFeatures` (registry name ``"fid-inception"``) computes the 2,048-D ``pool_3``
features the Fréchet Inception Distance is defined on (Heusel et al. 2017), with the network of
:mod:`lightning_prd.features.fid_inception_blocks` (no torchvision), and the preprocessing of one of
three reference tools, chosen by ``resize``:

* ``"tf1"`` (default): torch-fidelity's ``FeatureExtractorInceptionV3``, the TensorFlow FID graph
  (TTUR), the guided-diffusion evaluator and torchmetrics' FID with ``antialias=False`` (it runs
  torch-fidelity's network; its default ``antialias=True`` resizes with torch's antialiased bilinear and
  agrees only at 299 px):
  TensorFlow 1 bilinear resize to 299 x 299 on 0..255 (:func:`~lightning_prd.features.resize.resize_tf1`),
  then ``(x - 128) / 128``.
* ``"pytorch-fid"``: pytorch-fid's ``InceptionV3([3])``: torch bilinear resize without antialiasing on
  [0, 1] (:func:`~lightning_prd.features.resize.resize_torch_bilinear`), then ``2 x - 1``.
* ``"clean"``: clean-fid's ``mode="clean"``: Pillow bicubic resize of float 0..255 images, clipped to
  [0, 255] (:func:`~lightning_prd.features.resize.resize_pil_bicubic`), then ``(x - 128) / 128``.

**Input.** ``[B, 3, H, W]`` (or one channel, repeated; or ``[B, H, W]``) at any size. uint8 is used
as it is (0..255; the tools read image files as uint8). Float input in [0, 1] (a generator's
output) is handled as the chosen reference handles generator output, by ``quantisation``
(:func:`~lightning_prd.features.resize.quantise`), whose default depends on ``resize``:

* ``"tf1"`` -> ``"floor"``, ``uint8(trunc(255 x))``: torch-fidelity takes only uint8 images from a
  generator (its ``forward`` asserts ``torch.uint8``) and its example converts with
  ``(255 * (x.clamp(-1, 1) * 0.5 + 0.5)).to(torch.uint8)``; guided-diffusion's samplers, whose
  ``.npz`` files the TF evaluator reads, write ``((x + 1) * 127.5).clamp(0, 255).to(torch.uint8)``,
  the same rule, and so does torchmetrics' FID with ``normalize=True`` (``(imgs * 255).byte()``).
  NVlabs (StyleGAN2-ADA, StyleGAN3, EDM, EDM2) round instead,
  ``(x * 127.5 + 128).clamp(0, 255).to(torch.uint8)``: pass ``quantisation="round"`` for theirs.
* ``"pytorch-fid"`` -> ``"none"``: pytorch-fid's network takes float [0, 1] images as they are.
* ``"clean"`` -> ``"none"``: clean-fid's ``get_model_features`` resizes the generator's float
  0..255 output without quantising (here ``255 x``).

**Weights.** Nothing is downloaded. ``weights`` is a path or a state dict; with None the file is
looked for in torch's hub cache (:func:`~lightning_prd.features.hub_checkpoint_dir`), first under
pytorch-fid's name, then torch-fidelity's (torchmetrics' FID downloads torch-fidelity's file):

* ``pt_inception-2015-12-05-6726825d.pth``, pytorch-fid's, from
  https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/pt_inception-2015-12-05-6726825d.pth
* ``weights-inception-2015-12-05-6726825d.pth``, torch-fidelity's (the same state dict), from
  https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/weights-inception-2015-12-05-6726825d.pth

Both are the TF graph's weights in torchvision's ``Inception3`` key layout (``Conv2d_1a_3x3.conv.weight``,
``Mixed_5b.branch1x1.bn.running_mean``, ..., ``fc.weight`` of shape 1008 x 2048) and load as they are.
A path to NVlabs' TorchScript ``inception-2015-12-05.pt`` (from
https://nvlabs-fi-cdn.nvidia.com/stylegan2-ada-pytorch/pretrained/metrics/inception-2015-12-05.pt, the
file clean-fid uses too) is loaded with ``torch.jit.load`` and driven as its users drive it:
``resize="tf1"`` calls ``detector(images, return_features=True)`` on uint8 images, the network resizing
inside (StyleGAN2-ADA / StyleGAN3 ``metrics/metric_utils.py``); ``resize="clean"`` resizes here and calls
``detector.layers.forward((x - 128) / 128)`` (clean-fid's ``InceptionV3W(resize_inside=False)``). A
TorchScript file is a program: it is loaded only from a path given here, from trusted sources.

**Outputs.** ``forward`` returns ``[B, 2048]`` float32. With ``logits=True`` it returns
``{"pool": [B, 2048], "logits": [B, 1008], "spatial": [B, 2023]}``:

* ``logits`` are ``pool @ fc.weight.T`` *without* the fc bias: the logits every Inception Score
  implementation uses (torch-fidelity's ``logits_unbiased``, NVlabs' ``no_output_bias=True``, the
  guided-diffusion evaluator's ``softmax/logits/MatMul``).
* ``spatial`` are the sFID features (Nash et al. 2021) as guided-diffusion's
  ``evaluations/evaluator.py`` takes them: the tensor ``mixed_6/conv:0``, its first 7 channels, in
  TensorFlow's NHWC order, flattened (17 * 17 * 7 = 2023). In the TF graph ``mixed_6`` is the seventh
  mixed block (``mixed`` .. ``mixed_10`` are ``Mixed_5b`` .. ``Mixed_7c``; torch-fidelity's
  ``util_convert_inception_weights.py`` maps ``mixed_6/conv/conv2d_params`` and
  ``mixed_6/conv/batchnorm`` to ``Mixed_6d.branch1x1``), and the op named ``mixed_6/conv`` itself is
  the layer's ReLU, after ``mixed_6/conv/Conv2D`` and ``mixed_6/conv/batchnorm`` (the graph names each
  layer's output after its scope, as ``pool_3`` is the average pool): so ``spatial`` is the output of
  ``Mixed_6d.branch1x1`` after batch norm and ReLU, which is channels 0..191 of ``Mixed_6d``'s output.

Attributes for the fingerprint: ``name = "fid-inception"``, ``weights_sha256`` (of the file; None
for a state dict given in memory or random weights) and ``preprocessing``.

Example (random weights: offline, for tests and smoke runs only):
    >>> import torch
    >>> from lightning_prd.features.fid_inception import FIDInceptionFeatures
    >>> net = FIDInceptionFeatures(random_init=True, logits=True)
    >>> images = torch.randint(0, 256, (2, 3, 64, 64), dtype=torch.uint8)
    >>> out = net(images)
    >>> {key: tuple(value.shape) for key, value in out.items()}
    {'pool': (2, 2048), 'logits': (2, 1008), 'spatial': (2, 2023)}
    >>> net.preprocessing["resize"], net.preprocessing["quantisation"]
    ('tf1', 'floor')
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

import torch
from torch import Tensor, nn

from lightning_prd.features.base import FeatureExtractor
from lightning_prd.features.fid_inception_blocks import NUM_CLASSES, FIDInceptionNet, random_init_
from lightning_prd.features.images import (
    PYTORCH_FID_INCEPTION,
    TORCH_FIDELITY_INCEPTION,
    WeightsArg,
    as_float_images,
    file_sha256,
    load_into,
    load_state_dict,
    resolve_weights,
    seeded,
)
from lightning_prd.features.resize import (
    QUANTISATION_RULES,
    quantise,
    resize_pil_bicubic,
    resize_tf1,
    resize_torch_bilinear,
)
from lightning_prd.features.vgg_nvlabs import is_torchscript_file

URL = f"https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/{PYTORCH_FID_INCEPTION}"
TORCH_FIDELITY_URL = f"https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/{TORCH_FIDELITY_INCEPTION}"
NVLABS_URL = "https://nvlabs-fi-cdn.nvidia.com/stylegan2-ada-pytorch/pretrained/metrics/inception-2015-12-05.pt"
RESIZE_MODES = ("tf1", "pytorch-fid", "clean")
#: the quantisation of float input each mode's reference applies (module docstring)
DEFAULT_QUANTISATION = {"tf1": "floor", "pytorch-fid": "none", "clean": "none"}
NORMALISATION = {
    "tf1": "(x - 128) / 128 on 0..255",
    "pytorch-fid": "2 x - 1 on [0, 1]",
    "clean": "(x - 128) / 128 on 0..255",
}
RESIZE_NAMES = {
    "tf1": "tf1-bilinear (TensorFlow 1 resize_bilinear, align_corners=False)",
    "pytorch-fid": "torch-bilinear (align_corners=False, no antialias)",
    "clean": "pil-bicubic on float32, clipped to [0, 255]",
}
SIZE = (299, 299)
MODEL = "FID InceptionV3"
_GET = (
    f"pytorch-fid's {PYTORCH_FID_INCEPTION} from {URL} or torch-fidelity's {TORCH_FIDELITY_INCEPTION} "
    f"from {TORCH_FIDELITY_URL}"
)


def _check_options(resize: Any, logits: Any, quantisation: Any) -> str:
    if resize not in RESIZE_MODES:
        raise ValueError(f"Expected argument `resize` to be one of {RESIZE_MODES}, but got {resize!r}")
    if not isinstance(logits, bool):
        raise ValueError(f"Expected argument `logits` to be a bool, but got {logits!r}")
    if quantisation is None:
        return DEFAULT_QUANTISATION[resize]
    if quantisation not in QUANTISATION_RULES:
        raise ValueError(
            f"Expected argument `quantisation` to be None or one of {QUANTISATION_RULES}, but got {quantisation!r}"
        )
    return str(quantisation)


class FIDInceptionFeatures(FeatureExtractor):
    """2,048-D FID Inception features (and optionally logits and sFID features) of images; see the module docstring.

    Args:
        weights: path of pytorch-fid's or torch-fidelity's state dict (or NVlabs' TorchScript
            ``inception-2015-12-05.pt``), or the state dict itself; None looks in torch's hub cache
            and raises ``FileNotFoundError`` saying which file to get from where.
        resize: ``"tf1"`` (torch-fidelity / TF FID), ``"pytorch-fid"`` or ``"clean"`` (clean-fid).
        logits: return ``{"pool", "logits", "spatial"}`` instead of the pool features alone.
        random_init: random weights (seeded by ``seed``) instead of a file: offline tests only.
        seed: seeds ``random_init``.
        quantisation: how float input in [0, 1] becomes uint8, ``"floor"``, ``"round"`` or
            ``"none"``; None takes the reference's rule for ``resize`` (module docstring).
    """

    #: rows per call: at most about 4 GiB of activations (20.4 MiB per image; bench_extractor_memory.py)
    default_batch_size = 128

    num_features = 2048
    input_dtype = torch.uint8
    input_range = (0.0, 1.0)
    input_size = SIZE

    def __init__(
        self,
        weights: WeightsArg = None,
        *,
        resize: str = "tf1",
        logits: bool = False,
        random_init: bool = False,
        seed: int = 0,
        quantisation: Optional[str] = None,
    ) -> None:
        super().__init__()
        self.quantisation = _check_options(resize, logits, quantisation)
        self.resize, self.logits = resize, logits
        self.name = "fid-inception"
        self.net: Optional[FIDInceptionNet] = None
        self.detector: Optional[nn.Module] = None
        path = Path(weights).expanduser() if isinstance(weights, (str, os.PathLike)) else None
        if path is not None and path.is_file() and is_torchscript_file(path) and not random_init:
            self._load_torchscript(path)
        else:
            self._load_state_dict(weights, random_init, seed)
        inside = self.detector is not None and resize == "tf1"  # NVlabs' module resizes and normalises itself
        self.preprocessing: Dict[str, Any] = {
            "resize": resize,
            "quantisation": self.quantisation,
            "input_size": list(SIZE),
            "normalisation": "inside the TorchScript module" if inside else NORMALISATION[resize],
            "network": "torchscript" if self.detector is not None else "state-dict",
        }
        self.requires_grad_(False)
        self.eval()

    def _load_state_dict(self, weights: WeightsArg, random_init: bool, seed: int) -> None:
        source = resolve_weights(
            weights,
            model=MODEL,
            filename=PYTORCH_FID_INCEPTION,
            url=URL,
            random_init=random_init,
            also=(TORCH_FIDELITY_INCEPTION,),
        )
        with seeded(seed):  # construction draws default initial weights: keep the caller's RNG untouched
            net = FIDInceptionNet()
            if source is None:
                random_init_(net)
        self.weights_sha256 = file_sha256(source) if isinstance(source, Path) else None
        if source is not None:
            state = load_state_dict(source, MODEL)
            fc = state.get("fc.weight")
            if isinstance(fc, Tensor) and fc.ndim == 2 and fc.shape[0] != NUM_CLASSES:
                where = str(source)[:200] if isinstance(source, Path) else "state dict"
                raise ValueError(
                    f"{MODEL} weights {where!r} have a {fc.shape[0]}-class classifier; the FID network has "
                    f"{NUM_CLASSES} classes (torchvision's ImageNet Inception has 1000: use get_extractor('inception') "
                    f"for it). Get {_GET}"
                )
            # torch-fidelity's file has no batch-norm counters (unused in eval); torch's own loader fills them in too
            counters = {k: torch.tensor(0) for k in net.state_dict() if k.endswith(".num_batches_tracked")}
            state = {**{k: v for k, v in counters.items() if k not in state}, **state}
            load_into(net, state, MODEL, source if isinstance(source, Path) else state)
        self.net = net

    def _load_torchscript(self, path: Path) -> None:
        if self.resize == "pytorch-fid":
            raise ValueError(
                f"Expected argument `resize` to be 'tf1' or 'clean' for the TorchScript file {str(path)!r} (NVlabs' "
                f"inception-2015-12-05.pt), but got 'pytorch-fid'; pytorch-fid's features need its state dict: {_GET}"
            )
        if self.logits:
            raise ValueError(
                f"Expected argument `logits` to be False for the TorchScript file {str(path)!r}: it returns the pool "
                f"features only; logits and sFID features need the state dict: {_GET}"
            )
        detector = torch.jit.load(str(path), map_location="cpu")  # runs the archive's code: trusted files only
        if self.resize == "clean" and not hasattr(detector, "layers"):
            raise ValueError(
                f"The TorchScript file {str(path)!r} has no `layers` submodule, which clean-fid calls on resized "
                f"images; expected NVlabs' inception-2015-12-05.pt from {NVLABS_URL}"
            )
        self.detector = detector
        self.weights_sha256 = file_sha256(path)

    def _device(self) -> torch.device:
        module: nn.Module = self.net if self.net is not None else self.detector  # type: ignore[assignment]
        return next((t.device for t in [*module.parameters(), *module.buffers()]), torch.device("cpu"))

    def images(self, x: Any) -> Tensor:
        """Images as ``[B, 3, H, W]`` uint8 (uint8 input, or float input quantised), or float [0, 1] for ``"none"``."""
        if not isinstance(x, Tensor):
            x = torch.as_tensor(x)
        x = x.to(self._device())
        if x.dtype != torch.uint8:
            x = as_float_images(x)  # checks shape, dtype and the [0, 1] range; three channels
            return x if self.quantisation == "none" else quantise(x, self.quantisation)
        as_float_images(x[:0])  # the shape checks, on an empty batch
        x = x.unsqueeze(1) if x.ndim == 3 else x
        return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x

    def pixels(self, x: Any) -> Tensor:
        """Images as float32 on the reference's scale: 0..255, or [0, 1] for ``resize="pytorch-fid"``."""
        x = self.images(x)
        if x.dtype == torch.uint8:
            x = x.to(torch.float32)
            return x / 255 if self.resize == "pytorch-fid" else x
        return x if self.resize == "pytorch-fid" else quantise(x, "none")  # 255 x, unquantised

    def preprocess(self, x: Any) -> Tensor:
        """The normalised ``[B, 3, 299, 299]`` network input of images ``x`` (all but the tf1 TorchScript)."""
        x = self.pixels(x)
        if self.resize == "tf1":
            return (resize_tf1(x, SIZE) - 128) / 128
        if self.resize == "pytorch-fid":
            return 2 * resize_torch_bilinear(x, SIZE) - 1
        return (resize_pil_bicubic(x, SIZE).clamp(0, 255) - 128) / 128

    def forward(self, x: Any) -> Union[Tensor, Dict[str, Tensor]]:
        if self.detector is not None:
            return self._forward_torchscript(x)
        assert self.net is not None  # set in __init__ when there is no detector
        inputs = self.preprocess(x)
        if inputs.shape[0] == 0:
            empty = inputs.new_zeros(0, self.num_features)
            if not self.logits:
                return empty
            return {"pool": empty, "logits": inputs.new_zeros(0, NUM_CLASSES), "spatial": inputs.new_zeros(0, 2023)}
        if not self.logits:
            return self.net(inputs)
        pool, mixed_6d = self.net(inputs, with_mixed_6d=True)
        spatial = mixed_6d[:, :7].permute(0, 2, 3, 1).reshape(mixed_6d.shape[0], -1)  # NHWC, as TF flattens it
        return {"pool": pool, "logits": pool.mm(self.net.fc.weight.T), "spatial": spatial}

    def _forward_torchscript(self, x: Any) -> Tensor:
        detector: Any = self.detector
        if self.resize == "clean":
            inputs = self.preprocess(x)
            features = detector.layers.forward(inputs) if inputs.shape[0] else inputs.new_zeros(0, self.num_features)
        else:  # NVlabs: detector(uint8 images, return_features=True); it resizes and normalises inside
            images = self.images(x)
            images = images if images.dtype == torch.uint8 else quantise(images, "none")
            features = detector(images, return_features=True) if images.shape[0] else images.new_zeros(0, 2048)
        if not isinstance(features, Tensor) or features.numel() != features.shape[0] * self.num_features:
            got = f"shape {tuple(features.shape)}" if isinstance(features, Tensor) else type(features).__name__
            raise ValueError(
                f"Expected the TorchScript module to return {self.num_features} features per image "
                f"(NVlabs' inception-2015-12-05.pt), but got {got}"
            )
        return features.reshape(features.shape[0], self.num_features).to(torch.float32)

    def train(self, mode: bool = True) -> FIDInceptionFeatures:
        return super().train(False)
