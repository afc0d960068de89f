"""The protocol table: which network, preprocessing, k, ball and sample counts each named protocol fixes.

Every row names the reference it follows (the facts were read from the reference's own source):

* ``"fid"`` — torch-fidelity 0.4.0 (``feature_extractor_inceptionv3.py``: TF1 bilinear resize to 299,
  ``(x - 128) / 128`` on 0..255) and the TensorFlow FID graph (TTUR); the FID, sFID (``mixed_6/conv``, first 7
  channels), Inception Score, precision and recall of guided-diffusion's ``evaluations/evaluator.py``
  (``ManifoldEstimator(nhood_sizes=(3,))`` on the pool features, ``<=``: closed balls). Weights: pytorch-fid's
  ``pt_inception-2015-12-05-6726825d.pth`` (``FID_WEIGHTS_URL`` in ``pytorch_fid/inception.py``) or
  torch-fidelity's ``weights-inception-2015-12-05-6726825d.pth`` (``URL_INCEPTION_V3``), the same state dict;
  ``6726825d`` is the published SHA-256 prefix (torch.hub's ``check_hash`` convention). 50,000 generated
  samples against the whole real set, as NVlabs' ``fid50k_full`` (``metrics/metric_main.py``).
* ``"pytorch-fid"`` — pytorch-fid 0.3.0 (``InceptionV3(resize_input=True, normalize_input=True)``: torch
  bilinear without antialiasing, ``2 x - 1`` on [0, 1]).
* ``"clean-fid"`` — clean-fid 0.1.35 (``make_resizer("PIL", False, "bicubic", (299, 299))`` on float
  0..255, clipped), with pytorch-fid's state dict or NVlabs' TorchScript ``inception-2015-12-05.pt``
  (``cleanfid/downloads_helper.py``).
* ``"pr50k3"`` — NVlabs StyleGAN2-ADA / StyleGAN3 ``metrics/metric_main.py::pr50k3``
  (``compute_pr(max_real=50000, num_gen=50000, nhood_size=3)``), ``metrics/precision_recall.py``
  (``(dist <= kth).any(dim=1)``: closed balls) with the TorchScript ``vgg16.pt`` called on uint8 images with
  ``return_features=True`` (URL in StyleGAN2-ADA's ``precision_recall.py``; StyleGAN3 downloads ``vgg16.pkl``
  instead, a pickled module, which this package does not unpickle).
* ``"fd-dinov2"`` — EDM2 ``calculate_metrics.py`` (``DINOv2Detector(resize_mode='torch')``: ViT-L/14,
  bicubic antialiased resize to 224, ImageNet mean/std; ``fd_dinov2``), modelled on dgm-eval; 50,000 images.
* ``"cmmd"`` — Jayasumana et al. 2024, "Rethinking FID" (CMMD): CLIP ViT-L/14 at 336 px
  (``openai/clip-vit-large-patch14-336`` in ``sayakpaul/cmmd-pytorch/embedding.py``; open_clip's
  ``ViT-L-14-336-quickgelu`` with ``timm/vit_large_patch14_clip_336.openai``, ``_VITL14_336`` in
  ``open_clip/pretrained.py``), centre crop and unit-norm embeddings, Gaussian kernel ``sigma = 10``, scale 1000
  (``distance.py``); every image of both sets (``max_count=-1``).
* ``"prdc"`` — clovaai ``prdc`` (Naeem et al. 2020; README: ``nearest_k = 5``, 10,000 real and 10,000 fake),
  strict ``<`` (open balls), on the features as given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from lightning_prd.functional.engine.vocabulary import FINGERPRINT_RENAMED, check_renamed

#: guided-diffusion's evaluation table, from one Inception pass
FID_SCORES = ("frechet_distance", "sfid", "inception_score", "inception_score_std", "precision", "recall")
FID_FILES = ("pt_inception-2015-12-05-6726825d.pth", "weights-inception-2015-12-05-6726825d.pth")
FID_SHA256 = ("6726825d",)
FID_URL = "https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/pt_inception-2015-12-05-6726825d.pth"
NVLABS_INCEPTION = "inception-2015-12-05.pt"
NVLABS_INCEPTION_URL = (
    "https://nvlabs-fi-cdn.nvidia.com/stylegan2-ada-pytorch/pretrained/metrics/inception-2015-12-05.pt"
)
CLIP_L14_336_URL = (
    "https://huggingface.co/timm/vit_large_patch14_clip_336.openai/resolve/main/open_clip_model.safetensors"
)


@dataclass(frozen=True)
class Protocol:
    """One named protocol: the feature network and every setting that acts on its features.

    Attributes:
        name: the protocol's name (``get_protocol(name)``).
        extractor: the registry name of its extractor (:func:`lightning_prd.features.get_extractor`); None when
            the features are used as given.
        extractor_options: the extractor's options the protocol fixes (e.g. ``{"resize": "tf1"}``); which outputs
            it returns (the FID Inception's ``logits=True`` for the Inception Score and sFID) is the caller's.
        weights_files: the file names it accepts; the first is the one to download.
        weights_sha256: known SHA-256 digests (full, or the published prefix) of the accepted files; may be empty.
        weights_url: where to download ``weights_files[0]``.
        k_precision_recall: k of precision/recall (None: not reported).
        ball: ``"closed"`` (``d <= r``) or ``"open"`` (``d < r``) balls of the k-NN scores.
        num_real, num_fake: sample counts (None: every sample given).
        scores: the score keys it reports.
        matches: which tool and which papers' tables it matches, one line.
        k_density_coverage: k of density/coverage, where the protocol reports them.
        quantisation: how float images in [0, 1] become uint8 before the network (``"round"``, ``"floor"``,
            ``"none"``), as its reference does.
        metric_options: further options of :class:`~lightning_prd.GenerativeMetrics` it fixes (``cmmd``).
        download_note: one line on where the files come from, for error messages and docs.
    """

    name: str
    extractor: Optional[str]
    extractor_options: Mapping[str, Any]
    weights_files: Tuple[str, ...]
    weights_sha256: Tuple[str, ...]
    weights_url: Optional[str]
    k_precision_recall: Optional[int]
    ball: Optional[str]
    num_real: Optional[int]
    num_fake: Optional[int]
    scores: Tuple[str, ...]
    matches: str
    k_density_coverage: Optional[int] = None
    quantisation: Optional[str] = None
    metric_options: Mapping[str, Any] = field(default_factory=dict)
    download_note: str = ""

    def __getattr__(self, name: str) -> Any:  # only for names that are no field
        if name == "k":
            raise AttributeError("Protocol.k is spelled Protocol.k_precision_recall")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def build_extractor(self, weights: Any = None, **options: Any) -> Any:
        """The protocol's extractor, loaded from its weights file (checked: :mod:`lightning_prd.protocols.weights`).

        ``weights`` None looks for the protocol's files in torch's hub cache; ``options`` may add extractor
        options but not contradict the protocol's (``ValueError`` naming the option and both values).
        ``random_init=True`` builds the network with random weights instead (tests and smoke runs).
        """
        from lightning_prd.protocols.weights import build_extractor

        return build_extractor(self, weights, **options)

    def describe(self) -> Dict[str, Any]:
        """The row as a JSON-friendly dict (for docs, ``--json`` and logs)."""
        return {
            "name": self.name,
            "extractor": self.extractor,
            "extractor_options": dict(self.extractor_options),
            "weights_files": list(self.weights_files),
            "weights_url": self.weights_url,
            "k_precision_recall": self.k_precision_recall,
            "k_density_coverage": self.k_density_coverage,
            "ball": self.ball,
            "num_real": self.num_real,
            "num_fake": self.num_fake,
            "quantisation": self.quantisation,
            "scores": list(self.scores),
            "matches": self.matches,
        }


def _fid_row(name: str, resize: str, quantisation: str, matches: str, files: Tuple[str, ...] = FID_FILES) -> Protocol:
    return Protocol(
        name=name,
        extractor="fid-inception",
        extractor_options={"resize": resize, "quantisation": quantisation},
        weights_files=files,
        weights_sha256=FID_SHA256,
        weights_url=FID_URL,
        k_precision_recall=3,
        ball="closed",
        num_real=None,
        num_fake=50_000,
        scores=FID_SCORES,
        matches=matches,
        quantisation=quantisation,
        download_note="pytorch-fid's release 'fid_weights'; torch-fidelity's v0.2.0 release holds the same file",
    )


_TABLE: Dict[str, Protocol] = {
    p.name: p
    for p in (
        _fid_row(
            "fid",
            "tf1",
            "floor",
            "torch-fidelity and the TensorFlow FID graph (TTUR); guided-diffusion's FID/sFID/IS/precision/recall "
            "table (ADM, DiT, ...); NVlabs' fid50k_full runs the same graph on uint8 images rounded from [-1, 1] "
            "(feed it those uint8 images)",
        ),
        _fid_row("pytorch-fid", "pytorch-fid", "none", "pytorch-fid (mseitzer) and the papers that report its FID"),
        _fid_row(
            "clean-fid",
            "clean",
            "none",
            "clean-fid (Parmar et al. 2022, mode 'clean') and the papers that report clean FID",
            files=FID_FILES + (NVLABS_INCEPTION,),
        ),
        Protocol(
            name="pr50k3",
            extractor="vgg16-nvlabs",
            extractor_options={},
            weights_files=("vgg16.pt",),
            weights_sha256=(),
            weights_url="https://nvlabs-fi-cdn.nvidia.com/stylegan2-ada-pytorch/pretrained/metrics/vgg16.pt",
            k_precision_recall=3,
            ball="closed",
            num_real=50_000,
            num_fake=50_000,
            scores=("precision", "recall"),
            matches="NVlabs StyleGAN2-ADA / StyleGAN3 pr50k3 (Kynkaanniemi et al. 2019 precision/recall tables)",
            quantisation="round",
            download_note="NVlabs' metric networks of StyleGAN2-ADA",
        ),
        Protocol(
            name="fd-dinov2",
            extractor="dinov2",
            extractor_options={"arch": "vitl14", "resize": "edm2", "quantisation": "round"},
            weights_files=("dinov2_vitl14_pretrain.pth",),
            weights_sha256=(),
            weights_url="https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/dinov2_vitl14_pretrain.pth",
            k_precision_recall=None,
            ball=None,
            num_real=None,
            num_fake=50_000,
            scores=("frechet_distance",),
            matches="EDM2's fd_dinov2 (Karras et al. 2024) and dgm-eval's FD_DINOv2 (Stein et al. 2023)",
            quantisation="round",
            download_note="Meta's DINOv2 release (the hub repository facebookresearch/dinov2 is needed too)",
        ),
        Protocol(
            name="cmmd",
            extractor="clip",
            extractor_options={
                "arch": "ViT-L-14-336-quickgelu",
                "resize": "cmmd",
                "normalize": True,
                "quantisation": "round",
            },
            weights_files=("open_clip_model.safetensors", "open_clip_pytorch_model.bin"),
            weights_sha256=(),
            weights_url=CLIP_L14_336_URL,
            k_precision_recall=None,
            ball=None,
            num_real=None,
            num_fake=None,
            scores=("cmmd",),
            matches="CMMD (Jayasumana et al. 2024, google-research/cmmd and sayakpaul/cmmd-pytorch)",
            quantisation="round",
            metric_options={"cmmd": {"sigma": 10.0, "scale": 1000.0}},
            download_note="open_clip's copy of OpenAI's ViT-L/14@336px, the Hugging Face repository "
            "timm/vit_large_patch14_clip_336.openai",
        ),
        Protocol(
            name="prdc",
            extractor=None,
            extractor_options={},
            weights_files=(),
            weights_sha256=(),
            weights_url=None,
            k_precision_recall=5,
            ball="open",
            num_real=10_000,
            num_fake=10_000,
            scores=("precision", "recall", "density", "coverage"),
            matches="clovaai prdc (Naeem et al. 2020) compute_prdc(nearest_k=5), on features given as they are",
            k_density_coverage=5,
        ),
    )
}


def available_protocols() -> List[str]:
    """The names of the protocols, sorted.

    Example:
        >>> available_protocols()
        ['clean-fid', 'cmmd', 'fd-dinov2', 'fid', 'pr50k3', 'prdc', 'pytorch-fid']
    """
    return sorted(_TABLE)


def protocol_key(name: str) -> str:
    """The one spelling a protocol name is stored and looked up by: case, surrounding spaces and ``_`` / ``-``
    ignored (``"My_Proto"`` and ``"my-proto"`` name the same protocol).

    Example:
        >>> protocol_key(" Clean_FID ")
        'clean-fid'
    """
    return name.strip().lower().replace("_", "-")


def get_protocol(name: Any) -> Protocol:
    """The protocol of that name (:func:`protocol_key`: case, spaces and ``_`` / ``-`` ignored); a
    :class:`Protocol` is returned as is.

    Example:
        >>> p = get_protocol("pr50k3")
        >>> p.extractor, p.k_precision_recall, p.ball, p.num_real, p.num_fake
        ('vgg16-nvlabs', 3, 'closed', 50000, 50000)
    """
    if isinstance(name, Protocol):
        return name
    if not isinstance(name, str):
        raise TypeError(f"Expected argument `protocol` to be a protocol name (str), but got {type(name).__name__}")
    key = protocol_key(name)
    if key not in _TABLE:
        raise ValueError(f"Expected argument `protocol` to be one of {available_protocols()}, but got {name!r}")
    return _TABLE[key]


def register_protocol(protocol: Protocol, *, overwrite: bool = False) -> None:
    """Add a protocol under ``protocol.name`` (``overwrite=True`` replaces one of that name).

    Example:
        >>> import dataclasses
        >>> mine = dataclasses.replace(get_protocol("prdc"), name="prdc_k3", k_precision_recall=3, k_density_coverage=3)
        >>> register_protocol(mine)
        >>> get_protocol("prdc-k3").k_precision_recall
        3
        >>> unregister_protocol("prdc-k3")
    """
    if not isinstance(protocol, Protocol):
        raise TypeError(f"Expected argument `protocol` to be a Protocol, but got {type(protocol).__name__}")
    key = protocol_key(protocol.name)
    if not key:
        raise ValueError(f"Expected argument `protocol` to have a non-empty name, but got {protocol.name!r}")
    if key in _TABLE and not overwrite:
        raise ValueError(f"A protocol named {protocol.name!r} is already registered; pass overwrite=True to replace it")
    _TABLE[key] = protocol


def unregister_protocol(name: str) -> None:
    """Remove a protocol added by :func:`register_protocol` (no error when absent)."""
    _TABLE.pop(protocol_key(name), None)


_dataclass_init = Protocol.__init__


def _init(self: Protocol, *args: Any, **kwargs: Any) -> None:
    check_renamed(kwargs, FINGERPRINT_RENAMED)  # the field's name before the options had one name on every surface
    _dataclass_init(self, *args, **kwargs)


Protocol.__init__ = _init  # type: ignore[method-assign]
