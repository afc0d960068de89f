"""Extractors by name: ``get_extractor("inception", weights=PATH)``.

Built-in names (aliases in brackets), with the output width D:

* ``identity`` [none, features]: :class:`~lightning_prd.features.Identity`; D of the input.
* ``fid-inception`` [inception-fid, fid_inception, pt_inception]: the TF-FID InceptionV3 in plain torch (pool3, the FID
  network of torch-fidelity, pytorch-fid and clean-fid; ``resize="tf1"|"pytorch-fid"|"clean"``); 2048.
* ``inception`` [inception_v3, inception-v3]: torchvision's ImageNet InceptionV3 pool3 (torchvision; not the FID
  network); 2048.
* ``vgg16`` [vgg, vgg-16]: VGG-16 fc2 after ReLU (plain torch; ``resize="antialias"|"bilinear"|"tf1"``, ``tf1`` =
  torch-fidelity's); 4096.
* ``vgg16-nvlabs`` [nvlabs-vgg16, vgg16_nvlabs]: NVlabs' TorchScript ``vgg16.pt`` (StyleGAN2-ADA/StyleGAN3 ``pr50k3``);
  ``weights=PATH`` required (a TorchScript file is code: trusted files only); 4096.
* ``dinov2`` [dino]: DINOv2 CLS token (local hub repository); 1024 for vitl14 (FD_DINOv2's default).
* ``clip``: unit-norm CLIP image embedding (open_clip); 768 for ViT-L-14-336-quickgelu (CMMD's default).
* ``random-cnn`` [random]: a tiny seeded random CNN, for tests and smoke runs only; 16.

A name of the form ``"package.module:factory"`` imports ``factory`` from that module: a
module instance is used as is, a class or function is called with ``weights=`` (when given)
and the options. :func:`register_extractor` adds names.

Example:
    >>> from lightning_prd.features import get_extractor
    >>> get_extractor("random-cnn", num_features=4).num_features
    4
    >>> get_extractor("lightning_prd.features:Identity").num_features is None
    True
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import torch
from torch import nn

from lightning_prd.features.base import Identity
from lightning_prd.features.images import RandomConvNet, file_sha256

Factory = Callable[..., Any]


class UnknownExtractorError(ValueError):
    """An extractor name that is neither registered nor ``"module:callable"``.

    ``get_extractor`` words it for its own argument, ``name``; a surface that takes the name under another
    argument (the CLI's ``--extractor``, the callback's ``feature_extractor``) catches it and names that
    argument instead, with :attr:`name` and :attr:`known`.
    """

    def __init__(self, name: str, known: List[str]) -> None:
        self.name, self.known = name, known
        super().__init__(f"Expected argument `name` to be one of {known} or 'module:callable', but got {name!r}")


def _no_weights(name: str, weights: Any) -> None:
    if weights is not None:
        raise ValueError(f"The {name!r} extractor takes no weights, but got weights={weights!r}")


def _identity(weights: Any = None, **options: Any) -> Any:
    _no_weights("identity", weights)
    return Identity(**options)


def _random_cnn(weights: Any = None, **options: Any) -> Any:
    _no_weights("random-cnn", weights)
    return RandomConvNet(**options)


def _inception(weights: Any = None, **options: Any) -> Any:
    from lightning_prd.features.inception import InceptionV3Features

    return InceptionV3Features(weights, **options)


def _fid_inception(weights: Any = None, **options: Any) -> Any:
    from lightning_prd.features.fid_inception import FIDInceptionFeatures

    return FIDInceptionFeatures(weights, **options)


def _vgg16(weights: Any = None, **options: Any) -> Any:
    from lightning_prd.features.vgg import VGG16Features

    return VGG16Features(weights, **options)


def _vgg16_nvlabs(weights: Any = None, **options: Any) -> Any:
    from lightning_prd.features.vgg_nvlabs import NVlabsVGG16Features

    return NVlabsVGG16Features(weights, **options)


def _dinov2(weights: Any = None, **options: Any) -> Any:
    from lightning_prd.features.dinov2 import DINOv2Features

    return DINOv2Features(weights, **options)


def _clip(weights: Any = None, **options: Any) -> Any:
    from lightning_prd.features.clip import CLIPFeatures

    return CLIPFeatures(weights, **options)


_REGISTRY: Dict[str, Factory] = {
    "identity": _identity,
    "fid-inception": _fid_inception,
    "inception": _inception,
    "vgg16": _vgg16,
    "vgg16-nvlabs": _vgg16_nvlabs,
    "dinov2": _dinov2,
    "clip": _clip,
    "random-cnn": _random_cnn,
}
_ALIASES = {
    "none": "identity",
    "features": "identity",
    "inception-fid": "fid-inception",
    "fid_inception": "fid-inception",
    "pt_inception": "fid-inception",
    "inception_v3": "inception",
    "inception-v3": "inception",
    "inceptionv3": "inception",
    "vgg": "vgg16",
    "vgg-16": "vgg16",
    "vgg_16": "vgg16",
    "nvlabs-vgg16": "vgg16-nvlabs",
    "vgg16_nvlabs": "vgg16-nvlabs",
    "dino": "dinov2",
    "random": "random-cnn",
}
_IMPORT_NAME = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def canonical_name(name: str) -> str:
    """An extractor's name as the registry keys it: aliases resolved, case and surrounding spaces ignored.

    Example:
        >>> canonical_name(" VGG-16 "), canonical_name("random-cnn")
        ('vgg16', 'random-cnn')
    """
    key = name.strip().lower()
    return _ALIASES.get(key, key)


def available_extractors() -> List[str]:
    """The registered names (aliases not included)."""
    return sorted(_REGISTRY)


def register_extractor(name: str, factory: Factory, *, overwrite: bool = False) -> None:
    """Make ``get_extractor(name, weights=..., **options)`` call ``factory(weights=..., **options)``.

    Example:
        >>> from lightning_prd.features import Identity, register_extractor, get_extractor
        >>> register_extractor("my-identity", lambda weights=None, **o: Identity(**o), overwrite=True)
        >>> get_extractor("my-identity", num_features=3).num_features
        3
    """
    if not isinstance(name, str) or not name.strip() or ":" in name:
        raise ValueError(f"Expected argument `name` to be a non-empty string without ':', but got {name!r}")
    if not callable(factory):
        raise TypeError(f"Expected argument `factory` to be callable, but got {type(factory).__name__}")
    key = name.strip().lower()
    if not overwrite and (key in _REGISTRY or key in _ALIASES):
        raise ValueError(f"An extractor named {name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[key] = factory


def _import(spec: str) -> Any:
    module_name, attr = spec.split(":", 1)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"Cannot import module {module_name!r} of extractor {spec!r}: {err}") from err
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"Module {module_name!r} has no attribute {attr!r} (extractor {spec!r})")
        obj = getattr(obj, part)
    return obj


def _from_import(spec: str, weights: Any, options: Dict[str, Any]) -> Any:
    obj = _import(spec)
    if isinstance(obj, nn.Module):
        if weights is not None or options:
            raise ValueError(f"Extractor {spec!r} is a module instance; it takes no weights or options")
        return obj
    if not callable(obj):
        raise TypeError(
            f"Expected extractor {spec!r} to be a module, a class or a factory function, but got {type(obj).__name__}"
        )
    kwargs = dict(options)
    if weights is not None:
        kwargs["weights"] = weights
    return obj(**kwargs)


def get_extractor(
    name: str,
    weights: Any = None,
    device: Union[None, str, torch.device] = None,
    **options: Any,
) -> Any:
    """Build a feature extractor by name, in eval mode, optionally moved to ``device``.

    Args:
        name: a registered name (module docstring), an alias, or ``"module:callable"``.
        weights: a local weights file (or state dict) for the pretrained networks; None
            looks in torch's hub cache. Never downloads.
        device: where to put the extractor (None leaves it on the CPU).
        options: passed to the extractor's constructor (e.g. ``random_init=True``,
            ``layer="fc2"``, ``arch="vitl14"``, ``num_features=...``).

    An extractor built from a weights file that declares no ``weights_sha256`` is given the file's (the run
    fingerprint and the feature cache key read it).

    Raises:
        UnknownExtractorError: unknown name, a ``ValueError`` (the message lists the known ones).
        FileNotFoundError: missing weights (the message says which file to put where).
        ImportError: a missing optional dependency (the message names the extra).
    """
    if not isinstance(name, str):
        raise TypeError(f"Expected argument `name` to be a string, but got {type(name).__name__}")
    key = canonical_name(name)
    if key in _REGISTRY:
        extractor = _REGISTRY[key](weights=weights, **options)
    elif _IMPORT_NAME.match(name.strip()):
        extractor = _from_import(name.strip(), weights, options)
    else:
        raise UnknownExtractorError(name, available_extractors())
    if not callable(extractor):
        raise TypeError(
            f"Expected extractor {name!r} to be callable, but its factory returned {type(extractor).__name__}"
        )
    if isinstance(extractor, nn.Module):
        extractor.eval()
        if device is not None:
            extractor.to(torch.device(device))
    _record_weights_file(extractor, weights)
    return extractor


def _record_weights_file(extractor: Any, weights: Any) -> None:
    """Give an extractor built from a weights file that declares no ``weights_sha256`` the file's, so the run
    fingerprint and the feature cache name the file the features came from, however the extractor was built."""
    if not isinstance(weights, (str, os.PathLike)) or getattr(extractor, "weights_sha256", None) is not None:
        return
    path = Path(weights).expanduser()
    if path.is_file():
        try:
            extractor.weights_sha256 = file_sha256(path)
        except AttributeError:  # an object that takes no attributes
            pass


def num_features_of(extractor: Any) -> Optional[int]:
    """The declared ``num_features`` of an extractor, or None when it does not declare one."""
    value = getattr(extractor, "num_features", None)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
