"""Image preprocessing shared by the image extractors, and a tiny seeded CNN for tests.

Preprocessing is explicit and the same for every image model (only the size, the
interpolation and the normalisation constants differ):

1. **Input**: ``[B, C, H, W]`` (channels first) with ``C`` = 1 or 3, or ``[B, H, W]``
   grayscale. ``torch.uint8`` is read as 0..255; a floating tensor must lie in [0, 1]
   (a float image is the uint8 image divided by 255). Other dtypes raise ``TypeError``.
2. **Grayscale** (one channel) is repeated to 3 channels.
3. **Resize** to the model's ``input_size`` when the size differs: ``bilinear`` (or
   ``bicubic``) with ``antialias=True``, ``align_corners=False``.
4. **Normalise** ``(x - mean) / std`` per channel: ImageNet statistics by default;
   InceptionV3 uses mean = std = 0.5 (inputs in [-1, 1]), CLIP its own statistics.

Example:
    >>> import torch
    >>> from lightning_prd.features.images import preprocess_images
    >>> x8 = torch.full((1, 1, 4, 4), 255, dtype=torch.uint8)
    >>> out = preprocess_images(x8, size=(8, 8), mean=(0.5,) * 3, std=(0.5,) * 3)
    >>> tuple(out.shape), float(out.min()), float(out.max())
    ((1, 3, 8, 8), 1.0, 1.0)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_prd.features.base import FeatureExtractor
from lightning_prd.features.install_hint import missing_torchvision
from lightning_prd.features.paths import require_file
from lightning_prd.features.safe_pickle import torch_load_problem, torch_load_safe
from lightning_prd.functional.engine.inputs import check_positive_int, check_seed

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_RANGE_TOL = 1e-3
_MODES = ("bilinear", "bicubic")
WeightsArg = Union[None, str, "os.PathLike[str]", Mapping[str, Tensor]]
#: the FID Inception weights (the TF graph's, in pytorch-fid's state-dict layout) under the names the tools cache
#: them as in :func:`hub_checkpoint_dir`: pytorch-fid's, and torch-fidelity's (torchmetrics' FID, KID and IS
#: download through torch-fidelity's ``FeatureExtractorInceptionV3``, so theirs is the same file)
PYTORCH_FID_INCEPTION = "pt_inception-2015-12-05-6726825d.pth"
TORCH_FIDELITY_INCEPTION = "weights-inception-2015-12-05-6726825d.pth"
#: NVlabs' TorchScript FID Inception; clean-fid keeps it in the temporary directory (``/tmp`` on POSIX)
NVLABS_INCEPTION = "inception-2015-12-05.pt"
_KEYS_SHOWN = 8


def as_float_images(x: Any, name: str = "images") -> Tensor:
    """Validate an image batch and return it as float32 ``[B, 3, H, W]`` in [0, 1].

    Example:
        >>> import torch
        >>> as_float_images(torch.tensor([[[0, 255]]], dtype=torch.uint8)).tolist()
        [[[[0.0, 1.0]], [[0.0, 1.0]], [[0.0, 1.0]]]]
    """
    if not isinstance(x, Tensor):
        x = torch.as_tensor(x)
    if x.ndim == 3:
        x = x.unsqueeze(1)
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        hint = " (channels last? use x.permute(0, 3, 1, 2))" if x.ndim == 4 and x.shape[-1] in (1, 3, 4) else ""
        raise ValueError(
            f"Expected argument `{name}` to be images [B, C, H, W] with C = 1 or 3 (or [B, H, W] grayscale), "
            f"but got shape {tuple(x.shape)}{hint}"
        )
    if x.dtype == torch.uint8:
        x = x.to(torch.float32) / 255.0
    elif x.is_floating_point():
        x = x.to(torch.float32)
        if x.numel():
            low, high = float(x.min()), float(x.max())
            if low < -_RANGE_TOL or high > 1 + _RANGE_TOL or x.isnan().any():
                raise ValueError(
                    f"Expected argument `{name}` to hold float pixel values in [0, 1] (or uint8 in [0, 255]), "
                    f"but got values in [{low:g}, {high:g}]; divide 0..255 floats by 255 or cast them to torch.uint8"
                )
            x = x.clamp(0.0, 1.0)
    else:
        raise TypeError(
            f"Expected argument `{name}` to be torch.uint8 (0..255) or floating (0..1) images, but got dtype {x.dtype}"
        )
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    return x


def _size_pair(size: Any, name: str = "size") -> Tuple[int, int]:
    pair = (size, size) if isinstance(size, int) else tuple(size)
    if len(pair) != 2:
        raise ValueError(f"Expected argument `{name}` to be an int or an (H, W) pair, but got {size!r}")
    return check_positive_int(pair[0], name), check_positive_int(pair[1], name)


def preprocess_images(
    x: Any,
    *,
    size: Union[int, Tuple[int, int]],
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    mode: str = "bilinear",
    antialias: bool = True,
) -> Tensor:
    """Images (uint8 0..255 or float 0..1) to the normalised float32 ``[B, 3, *size]`` a network takes.

    Args:
        x: ``[B, C, H, W]`` with C = 1 or 3, or ``[B, H, W]``.
        size: ``(H, W)`` (or an int) the network runs at; other sizes are resized.
        mean, std: per-channel normalisation of the [0, 1] values.
        mode: ``"bilinear"`` or ``"bicubic"`` interpolation.
        antialias: low-pass filter when downsampling (no effect when upsampling).
    """
    if mode not in _MODES:
        raise ValueError(f"Expected argument `mode` to be one of {_MODES}, but got {mode!r}")
    size = _size_pair(size)
    x = as_float_images(x)
    if tuple(x.shape[-2:]) != size and x.shape[0]:
        x = F.interpolate(x, size=size, mode=mode, align_corners=False, antialias=antialias)
        if mode == "bicubic":
            x = x.clamp(0.0, 1.0)
    m = torch.as_tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    s = torch.as_tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return (x - m) / s


class ImageExtractor(FeatureExtractor):
    """Base of the image extractors: preprocessing (above) followed by ``embed`` on the network input.

    Frozen: parameters do not require gradients and ``train()`` keeps the module in eval mode
    (batch-norm statistics never move), as torchmetrics does for its FID Inception.

    Args:
        size: ``(H, W)`` the network runs at (``input_size``).
        mean, std: normalisation; ImageNet by default.
        mode: interpolation of the resize, ``"bilinear"`` or ``"bicubic"``.
        antialias: antialiased resize.
    """

    input_dtype = torch.uint8
    input_range = (0.0, 1.0)
    input_size: Tuple[int, int]  # always set: an image network runs at one size

    def __init__(
        self,
        size: Union[int, Tuple[int, int]],
        *,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        mode: str = "bilinear",
        antialias: bool = True,
    ) -> None:
        super().__init__()
        if mode not in _MODES:
            raise ValueError(f"Expected argument `mode` to be one of {_MODES}, but got {mode!r}")
        if not isinstance(antialias, bool):
            raise ValueError(f"Expected argument `antialias` to be a bool, but got {antialias!r}")
        self.input_size = _size_pair(size)
        self.mean, self.std = tuple(float(v) for v in mean), tuple(float(v) for v in std)
        self.mode, self.antialias = mode, antialias

    def preprocess(self, x: Any) -> Tensor:
        """The network input for images ``x`` (see :func:`preprocess_images`)."""
        device = next((p.device for p in self.parameters()), torch.device("cpu"))
        x = x.to(device) if isinstance(x, Tensor) else x
        return preprocess_images(
            x, size=self.input_size, mean=self.mean, std=self.std, mode=self.mode, antialias=self.antialias
        )

    def embed(self, x: Tensor) -> Tensor:
        """Features ``[B, D]`` of preprocessed images ``[B, 3, H, W]``."""
        raise NotImplementedError

    def forward(self, x: Any) -> Tensor:
        return self.embed(self.preprocess(x))

    def train(self, mode: bool = True) -> ImageExtractor:
        return super().train(False)

    def freeze(self) -> ImageExtractor:
        """No gradients, eval mode; returns self."""
        self.requires_grad_(False)
        return self.eval()


class RandomConvNet(ImageExtractor):
    """A tiny randomly initialised CNN (seeded): an offline image extractor for tests and smoke runs.

    Its features are random projections of local image statistics, so scores computed with
    it only say whether two image sets look alike to a random network: fine for checking a
    pipeline end to end, not for reporting.

    Args:
        num_features: output width ``D``.
        size: input size the images are resized to.
        seed: seeds the weights; the same seed gives the same network on every machine
            that shares torch's CPU RNG.

    Example:
        >>> import torch
        >>> net = RandomConvNet(num_features=8, size=16)
        >>> images = torch.randint(0, 256, (4, 3, 20, 24), dtype=torch.uint8)
        >>> tuple(net(images).shape)
        (4, 8)
        >>> torch.allclose(net(images), net(images.float() / 255))
        True
    """

    def __init__(self, num_features: int = 16, size: Union[int, Tuple[int, int]] = 32, seed: int = 0) -> None:
        super().__init__(size)
        self.num_features = check_positive_int(num_features, "num_features")
        with seeded(seed):
            self.net = nn.Sequential(
                nn.Conv2d(3, 8, 3, stride=2, padding=1),
                nn.ReLU(),
                nn.Conv2d(8, 16, 3, stride=2, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(16, self.num_features),
            )
        self.freeze()

    def embed(self, x: Tensor) -> Tensor:
        return self.net(x)


# ---------------------------------------------------------------------------- weights files
def hub_checkpoint_dir() -> Path:
    """``torch.hub.get_dir()/checkpoints``: where torch's own downloads are cached (``$TORCH_HOME/hub``)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def resolve_weights(
    weights: WeightsArg,
    *,
    model: str,
    filename: str,
    url: str,
    random_init: bool,
    also: Sequence[str] = (),
) -> Union[None, Path, Mapping[str, Tensor]]:
    """Find the weights of ``model`` without any download.

    Returns None for ``random_init``, the given state dict, the given existing file, or the
    first of ``filename``/``also`` found in :func:`hub_checkpoint_dir` (an absolute path in
    ``also`` is taken as it is, e.g. clean-fid's ``/tmp/inception-2015-12-05.pt``; the other
    tools' cache names are :data:`PYTORCH_FID_INCEPTION` and :data:`TORCH_FIDELITY_INCEPTION`).
    Otherwise raises ``FileNotFoundError`` saying which file to get, from where, and where to
    put it. Which file a named protocol accepts is checked in :mod:`lightning_prd.protocols`.
    """
    if not isinstance(random_init, bool):
        raise ValueError(f"Expected argument `random_init` to be a bool, but got {random_init!r}")
    hub = hub_checkpoint_dir()
    get = f"get `{filename}` from {url} on a machine with network access"
    if random_init:
        if weights is not None:
            raise ValueError(f"Expected either `weights` or `random_init=True` for {model}, but got both")
        return None
    if isinstance(weights, Mapping):
        return weights
    if weights is not None:
        if not isinstance(weights, (str, os.PathLike)):
            raise TypeError(
                f"Expected argument `weights` to be a file path or a state dict, but got {type(weights).__name__}"
            )
        path = Path(weights).expanduser()
        require_file(
            path,
            f"{model} weights file {str(path)!r}",
            f"expected the file `{filename}` there: {get} and pass its path as `weights` (CLI: --weights), "
            f"or put it at {hub / filename}",
        )
        return path
    for name in (filename, *also):
        if (hub / name).is_file():
            return hub / name
    raise FileNotFoundError(
        f"{model} weights not found (lightning_prd never downloads weights): {get} and put it at "
        f"{hub / filename} (torch's hub cache, moved by $TORCH_HOME), or pass weights=PATH (CLI: --weights PATH)"
    )


def load_state_dict(source: Union[Path, Mapping[str, Tensor]], model: str) -> Mapping[str, Tensor]:
    """Read a state dict with ``torch.load(..., weights_only=True)``.

    A file that asks for a global torch's weights-only loader refuses (or for ``builtins.bytearray``) raises
    ``ValueError`` on one line naming the file and the global.
    ``{"state_dict": ...}``/``{"model": ...}`` wrappers and ``module.`` prefixes are removed.
    """
    state: Any
    if isinstance(source, Mapping):
        state = source
    else:
        try:
            state = torch_load_safe(Path(source))
        except Exception as err:  # noqa: BLE001 - re-raised with the file and the model named
            problem = torch_load_problem(err)
            safe = "; it was read as data and nothing in it was run" if "refused" in problem else ""
            raise ValueError(
                f"{model} weights file {str(source)!r} is not a readable PyTorch state dict: {problem}{safe}"
            ) from None
    for key in ("state_dict", "model"):
        if isinstance(state, Mapping) and isinstance(state.get(key), Mapping):
            state = state[key]
    if not isinstance(state, Mapping) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ValueError(
            f"{model} weights {str(source)[:200]!r} must be a state dict of tensors "
            "(a TorchScript module is not supported)"
        )
    return {(k[7:] if k.startswith("module.") else k): v for k, v in state.items()}


def _keys(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(k) for k in keys[:_KEYS_SHOWN])
    return shown + (f" and {len(keys) - _KEYS_SHOWN} more" if len(keys) > _KEYS_SHOWN else "")


def state_dict_mismatch(module: nn.Module, state: Mapping[str, Any]) -> List[str]:
    """What keeps ``state`` from loading into ``module`` strictly: missing and unexpected keys and shape
    mismatches, each named by key (lists truncated; tensors are never printed). Empty when it fits. A missing
    batch-norm ``num_batches_tracked`` counter is not a mismatch: torch's loader fills it in.

    Example:
        >>> import torch
        >>> net = nn.Linear(2, 3)
        >>> for line in state_dict_mismatch(net, {"weight": torch.zeros(3, 4), "extra": torch.zeros(1)}):
        ...     print(line)
        missing keys: 'bias'
        unexpected keys: 'extra'
        shape mismatch: 'weight' is (3, 4) in the file, (3, 2) in the model
    """
    expected: Dict[str, Tensor] = dict(module.state_dict())
    # batch norm fills a missing ``num_batches_tracked`` counter itself (older files, e.g. torch-fidelity's, lack it)
    missing = [k for k in expected if k not in state and not k.endswith(".num_batches_tracked")]
    unexpected = [k for k in state if k not in expected]
    shapes = [
        f"{k!r} is {tuple(v.shape)} in the file, {tuple(expected[k].shape)} in the model"
        for k, v in state.items()
        if k in expected and isinstance(v, Tensor) and tuple(v.shape) != tuple(expected[k].shape)
    ]
    out = []
    if missing:
        out.append(f"missing keys: {_keys(missing)}")
    if unexpected:
        out.append(f"unexpected keys: {_keys(unexpected)}")
    if shapes:
        more = f" and {len(shapes) - _KEYS_SHOWN} more" if len(shapes) > _KEYS_SHOWN else ""
        out.append("shape mismatch: " + "; ".join(shapes[:_KEYS_SHOWN]) + more)
    return out


def load_into(module: nn.Module, state: Mapping[str, Tensor], model: str, source: Any) -> None:
    """``module.load_state_dict(state)`` (strict); a mismatch raises ``ValueError`` naming the file and the
    missing/unexpected keys and shape mismatches by key (:func:`state_dict_mismatch`), never tensors."""
    where = f"{model} weights {str(source)[:200]!r}" if not isinstance(source, Mapping) else f"{model} state dict"
    problems = state_dict_mismatch(module, state)
    if problems:
        raise ValueError(f"{where} do not fit the architecture: {'; '.join(problems)}")
    try:
        module.load_state_dict(state)
    except RuntimeError as err:  # e.g. a dtype the parameter cannot take: keep the first line only
        first = " ".join(str(err).split("\n")[0].split())[:300]
        raise ValueError(f"{where} do not fit the architecture: {first}") from err


_SHA_CACHE: Dict[Tuple[str, int, int], str] = {}


def file_sha256(path: Union[str, os.PathLike[str]], chunk: int = 1 << 20) -> str:
    """The SHA-256 (hex) of a file's bytes, computed once per (path, size, modification time).

    Example:
        >>> import tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "w.bin"
        >>> _ = f.write_bytes(b"abc")
        >>> file_sha256(f)[:16]
        'ba7816bf8f01cfea'
    """
    resolved = Path(path).expanduser().resolve()
    stat = resolved.stat()
    key = (str(resolved), stat.st_size, stat.st_mtime_ns)
    if key not in _SHA_CACHE:
        digest = hashlib.sha256()
        with open(resolved, "rb") as handle:
            for piece in iter(lambda: handle.read(chunk), b""):
                digest.update(piece)
        _SHA_CACHE[key] = digest.hexdigest()
    return _SHA_CACHE[key]


def require_torchvision(model: str) -> Any:
    """Import torchvision or raise ``ImportError`` giving the pip command of the torchvision built for the
    installed torch (:func:`~lightning_prd.features.install_hint.torchvision_install_command`)."""
    try:
        import torchvision
    except ImportError as err:
        raise ImportError(missing_torchvision(f"The {model} extractor")) from err
    return torchvision


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed the CPU RNG inside the block and restore its state afterwards (random initialisation)."""
    seed = check_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
