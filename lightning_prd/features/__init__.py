"""Feature extractors: modules mapping a batch of samples to ``[n, D]`` features.

* :class:`FeatureExtractor` — the protocol (``num_features`` and the input contract
  ``input_dtype``, ``input_range``, ``input_size``; see :mod:`lightning_prd.features.base`).
* :class:`Identity` — features and tabular data as they are.
* :func:`get_extractor` — by name: ``"identity"``, ``"fid-inception"``, ``"inception"``, ``"vgg16"``,
  ``"vgg16-nvlabs"``, ``"dinov2"``, ``"clip"``, ``"random-cnn"``, or ``"module:callable"``. Pretrained
  networks load local weights only (``weights=PATH`` or torch's hub cache). ``fid-inception`` and the
  VGG-16s are plain torch; torchvision's ``inception`` needs the ``images`` extra, CLIP open_clip, DINOv2
  its hub repository, each imported only when such an extractor is built.
* :class:`FIDInceptionFeatures`, :class:`VGG16Features`, :class:`NVlabsVGG16Features` — the field's
  FID and precision/recall networks, run as their references run them (:mod:`lightning_prd.protocols`).
* :func:`describe_extractor`, :func:`file_sha256` — what made the features, for the run fingerprint.
* :func:`extract_features` — run an extractor over a tensor or a DataLoader in batches.
* :func:`preprocess_images` — the explicit image preprocessing the image extractors share.
* :class:`RealFeatureCache` — real features kept on disk across runs (``PRDCallback(cache_dir=...)``).
* :func:`read_reference` — a reference set from a file this package or another tool wrote, told by
  its content (:class:`ReferenceSet`: features, images or only their mean and covariance).
* :func:`write_features` — a features file with its provenance, which :func:`read_reference` reads back.

Imports: ``functional.engine`` (input checks) only; torchvision and open_clip when an extractor needs them.

Example:
    >>> import torch
    >>> from lightning_prd.features import extract_features, get_extractor
    >>> extractor = get_extractor("random-cnn", num_features=8)
    >>> images = torch.randint(0, 256, (5, 3, 24, 24), dtype=torch.uint8)
    >>> tuple(extract_features(extractor, images, batch_size=2).shape)
    (5, 8)
"""

from lightning_prd.features.base import (
    FeatureExtractor,
    Identity,
    describe_contract,
    describe_extractor,
    extract_features,
)
from lightning_prd.features.cache import RealFeatureCache
from lightning_prd.features.fid_inception import FIDInceptionFeatures
from lightning_prd.features.images import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ImageExtractor,
    RandomConvNet,
    as_float_images,
    file_sha256,
    hub_checkpoint_dir,
    preprocess_images,
)
from lightning_prd.features.reference_files import ReferenceSet, read_reference
from lightning_prd.features.registry import available_extractors, get_extractor, num_features_of, register_extractor
from lightning_prd.features.vgg import VGG16Features
from lightning_prd.features.vgg_nvlabs import NVlabsVGG16Features
from lightning_prd.features.writer import write_features

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "FIDInceptionFeatures",
    "FeatureExtractor",
    "Identity",
    "ImageExtractor",
    "NVlabsVGG16Features",
    "RandomConvNet",
    "RealFeatureCache",
    "ReferenceSet",
    "VGG16Features",
    "as_float_images",
    "available_extractors",
    "describe_contract",
    "describe_extractor",
    "extract_features",
    "file_sha256",
    "get_extractor",
    "hub_checkpoint_dir",
    "num_features_of",
    "preprocess_images",
    "read_reference",
    "register_extractor",
    "write_features",
]
