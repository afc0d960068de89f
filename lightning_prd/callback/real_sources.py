"""What the callback's ``real`` argument names, resolved: samples to embed, features to use as they are,
statistics for the Fréchet distance, or a loader of the trainer's datamodule.

**Rule.** ``real`` is resolved once, at construction (the datamodule's loader in ``setup``), and every
problem is one line naming ``real`` (or the argument at fault) and the value: ``FileNotFoundError`` for
a path that does not exist, ``ValueError`` for a file or folder that cannot serve, ``TypeError`` for a
value of none of the forms below:

* a tensor or a DataLoader (any iterable of batches): samples, embedded with ``feature_extractor``;
* ``"datamodule:train"`` (``val``, ``test``, ``predict``): in ``setup``, ``trainer.datamodule.<split>_dataloader()``
  read in index order (:func:`in_order`), then as a DataLoader;
* a folder: its PNG/JPEG images (:mod:`~lightning_prd.callback.image_folder`), embedded; needs a
  ``feature_extractor``; every file's header is read here (no pixel decoded:
  :func:`~lightning_prd.features.image_folder.check_headers`), so a file that is no image, or declares more
  pixels than Pillow's decompression-bomb limit, is refused at construction; one damaged past its header is
  named when it is read;
* a file, read by :func:`~lightning_prd.features.reference_files.read_reference` (recognised by its
  content): per-sample features are used **as they are**, never passed through ``feature_extractor``;
  guided-diffusion's images are embedded; a file of statistics only (``mu``/``sigma``) serves the
  Fréchet distance, so the metric must ask for nothing else (:func:`check_statistics_serve`). An EDM2
  reference pickle of several statistics (``fid``, ``fd_dinov2``) is read for the one made by the network
  ``feature_extractor`` names (:func:`edm2_detector`).

A file that says which network made its features is checked against ``feature_extractor``
(:func:`check_network`). The held-out ``test`` argument is resolved by the same functions (``name="test"``,
so errors name it); a statistics file cannot serve it, nor can the set ``real`` itself (:func:`check_held_out`).
"""

from __future__ import annotations

import filecmp
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, List, Mapping, Optional

import torch
from torch.utils.data import DataLoader, IterableDataset

from lightning_prd.callback.image_folder import require_pillow, unreadable_image
from lightning_prd.callback.options import check_real
from lightning_prd.callback.sources import RENAMED, renamed
from lightning_prd.features import registry
from lightning_prd.features.image_folder import check_headers, image_files
from lightning_prd.features.reference_files import EDM2_DETECTORS, ReferenceFileError, ReferenceSet, read_reference
from lightning_prd.functional.engine.families import family_of_keyword, switch_families
from lightning_prd.functional.engine.inputs import same_features

DATAMODULE = "datamodule:"
SPLITS = ("train", "val", "test", "predict")
#: network names other tools write -> (the registry name of that network, True when it is exactly that network)
FOREIGN_NAMES = {
    "inception-v3-tf": ("fid-inception", True),
    "dinov2-vit-l14": ("dinov2", False),
}
#: dgm-eval's ``model`` names: its "inception" is the FID Inception (with its own resize); its DINOv2 and CLIP
#: are ViT-L/14
DGM_EVAL_NAMES = {"inception": ("fid-inception", False), "dinov2": ("dinov2", False), "clip": ("clip", False)}
#: GenerativeMetrics options that are no family and turn their outputs off with another value than False
OFF_VALUES = {"error_bars": None, "closest_pairs": 0}


def _off_value(option: str) -> Any:
    """The value of a GenerativeMetrics option that turns it off (a family's from its record)."""
    family = family_of_keyword(option)
    return family.switch_off if family is not None else OFF_VALUES.get(option, False)


@dataclass
class RealSource:
    """``real`` resolved. ``kind``: ``"samples"`` (a tensor or loader to embed), ``"images"`` (``rows`` is the
    list of image files), ``"features"`` (``rows`` is the ``[N, D]`` tensor), ``"statistics"`` (``rows`` is
    ``None``) or ``"datamodule"`` (``rows`` is the loader once :func:`bind_datamodule` ran)."""

    kind: str
    rows: Any = None
    path: str = ""
    reference: Optional[ReferenceSet] = None
    split: str = ""

    @property
    def embedded(self) -> bool:
        """Whether the rows go through ``feature_extractor`` (everything but a file's features)."""
        return self.kind in ("samples", "images", "datamodule")


def resolve_real(
    real: Any, has_extractor: bool, extractor_name: Optional[str] = None, name: str = "real"
) -> RealSource:
    """``real`` resolved at construction (module docstring); the datamodule's loader waits for ``setup``.
    ``extractor_name``: ``feature_extractor``'s registry name, which picks the statistics of an EDM2 pickle;
    ``name``: the argument errors name (``"real"``, or ``"test"`` for the held-out set read the same way)."""
    if isinstance(real, str) and real.startswith(DATAMODULE):
        split = real[len(DATAMODULE) :]
        if split not in SPLITS:
            choices = ", ".join(repr(DATAMODULE + s) for s in SPLITS)
            raise ValueError(
                f"Expected argument `{name}` to be one of {choices} to read a datamodule, but got {real!r}"
            )
        return RealSource("datamodule", split=split)
    if isinstance(real, (str, os.PathLike)):
        return _from_path(os.fspath(real), has_extractor, extractor_name, name)
    check_real(real, name)
    return RealSource("samples", real)


def _from_path(text: str, has_extractor: bool, extractor_name: Optional[str] = None, name: str = "real") -> RealSource:
    path = Path(text).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"Expected argument `{name}` to be an existing path, but {text} does not exist")
    if path.is_dir():
        files = image_files(path)
        if not files:
            raise ValueError(f"Expected argument `{name}` to be a folder of PNG/JPEG images, but {text} holds none")
        _need_extractor(has_extractor, f"{text} (an image folder of {len(files):,} images)", name)
        require_pillow(text, name)
        check_headers(files, lambda file, err: unreadable_image(file, err, name))  # headers only: no pixel decoded
        return RealSource("images", files, path=text)
    try:
        ref = read_reference(path, name=name)
    except ReferenceFileError as err:
        if not str(err).startswith("Expected argument `detector`"):  # only EDM2 asks which statistics to read
            raise
        ref = read_reference(path, name=name, detector=edm2_detector(text, extractor_name, name))
    if ref.features is not None:
        return RealSource("features", ref.features, path=text, reference=ref)
    if ref.images is not None:
        _need_extractor(has_extractor, f"{text} ({ref.source}: {ref.images.shape[0]:,} images)", name)
        return RealSource("samples", ref.images.permute(0, 3, 1, 2), path=text, reference=ref)
    return RealSource("statistics", path=text, reference=ref)


def edm2_detector(text: str, extractor_name: Optional[str], name: str = "real") -> str:
    """The statistics of an EDM2 reference pickle that hold several (``fid``, ``fd_dinov2``) made by the network
    ``feature_extractor`` names; ``ValueError`` when it names none of them."""
    ours = None if extractor_name is None else registry.canonical_name(extractor_name)
    for detector, network in EDM2_DETECTORS.items():
        if FOREIGN_NAMES[network][0] == ours:
            return detector
    picks = " or ".join(f"feature_extractor={FOREIGN_NAMES[n][0]!r} for {d!r}" for d, n in EDM2_DETECTORS.items())
    raise ValueError(
        f"Expected argument `feature_extractor` to name the network of the statistics to read from argument `{name}` "
        f"({text}, an EDM2 reference holding several), but got {extractor_name!r}: pass {picks} (a name, or a dict "
        "with a 'name'), the network that embeds the generated samples"
    )


def _need_extractor(has_extractor: bool, what: str, name: str = "real") -> None:
    if not has_extractor:
        raise ValueError(
            f"Expected argument `feature_extractor` to embed the images of argument `{name}`, {what}, but got None: "
            "pass an image extractor, e.g. feature_extractor='inception' or {'name': 'inception', 'weights': PATH}"
        )


def bind_datamodule(source: RealSource, trainer: Any, batch_size: int, name: str = "real") -> None:
    """``source.rows`` = the trainer's datamodule's ``<split>_dataloader()``, read in index order."""
    value = f"{DATAMODULE}{source.split}"
    datamodule = getattr(trainer, "datamodule", None)
    if datamodule is None:
        raise ValueError(
            f"Expected argument `{name}`={value!r} to name a loader of the trainer's datamodule, but the trainer has "
            "no datamodule: call trainer.fit(model, datamodule=...) or pass the real samples themselves"
        )
    hook = f"{source.split}_dataloader"
    owner = next((c for c in type(datamodule).__mro__ if hook in vars(c)), None)
    if owner is None or owner.__module__.split(".")[0] in ("pytorch_lightning", "lightning", "lightning_fabric"):
        raise ValueError(
            f"Expected argument `{name}`={value!r} to name a loader of the trainer's datamodule, but "
            f"{type(datamodule).__name__} defines no {hook}()"
        )
    try:
        loader = getattr(datamodule, hook)()
    except RENAMED as err:
        raise renamed(err, f"`{name}`={value!r}: {type(datamodule).__name__}.{hook}() failed: {err}") from err
    if isinstance(loader, (list, tuple)) and len(loader) == 1:
        loader = loader[0]
    if isinstance(loader, (list, tuple, Mapping, str, bytes)) or not isinstance(loader, Iterable):
        shown = f"{type(loader).__name__} of {len(loader)}" if isinstance(loader, (list, tuple, Mapping)) else ""
        raise TypeError(
            f"Expected argument `{name}`={value!r} to give one DataLoader, but {type(datamodule).__name__}.{hook}() "
            f"returned {shown or type(loader).__name__}"
        )
    source.rows = in_order(loader, batch_size)


def in_order(loader: Any, batch_size: int) -> Any:
    """A DataLoader over the same dataset in index order (no sampler, no shuffling, no rows dropped), with the
    loader's batch size (``batch_size`` when it has none), ``collate_fn`` and ``num_workers``; an
    iterable-style dataset or another iterable as it is."""
    if not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
        return loader
    return DataLoader(
        loader.dataset,
        batch_size=loader.batch_size or batch_size,
        shuffle=False,
        collate_fn=loader.collate_fn,
        num_workers=loader.num_workers,
    )


def check_statistics_serve(source: RealSource, metric: Any, log_images: bool, log_closest_pairs: int = 0) -> None:
    """A statistics-only file serves the Fréchet distance alone: the metric must take statistics and, when it
    is a :class:`~lightning_prd.GenerativeMetrics`, ask for nothing that needs per-sample real features."""
    ref = source.reference
    if ref is None:
        return
    where = f"{source.path} ({ref.source})"
    if not callable(getattr(metric, "set_real_statistics", None)):
        raise ValueError(
            f"Expected argument `metric` to take real statistics (a set_real_statistics method), as argument "
            f"`real` ({where}) holds only a mean and covariance, but got {type(metric).__name__}"
        )
    beyond = getattr(metric, "_scores_beyond_frechet", None)  # GenerativeMetrics' options beyond the Fréchet distance
    plan = getattr(metric, "plan", None)
    served = [family.keyword for family in switch_families() if family.statistics]  # what statistics can serve
    frechet = plan is None or any(plan.on(family.name) for family in switch_families() if family.statistics)
    on: List[str] = list(beyond()) if callable(beyond) else []
    if not on and frechet:
        return
    callback_made = {"per_sample": log_images, "closest_pairs": log_closest_pairs > 0}  # set by the callback's options
    offs = [f"{o}={_off_value(o)}" for o in on if not callback_made.get(o, False)]
    offs += [] if frechet else [f"{keyword}=True" for keyword in served]
    fix = f"metric=dict({', '.join(offs)})" + (" and log_images=False" if log_images else "")
    fix += " and log_closest_pairs=0" if log_closest_pairs else ""
    asked = ", ".join(on) or "frechet=False"
    try:
        ref.require_features(f"the scores `metric` asks for besides the Fréchet distance ({asked})")
    except ValueError as err:
        raise ValueError(f"{err}; or pass {fix} for the Fréchet distance alone") from None


def check_network(source: RealSource, extractor_name: Optional[str], extractor: Any, name: str = "real") -> None:
    """The network a features or statistics file names against the callback's ``feature_extractor``:
    different networks raise ``ValueError``; where the names cannot settle it, one warning."""
    ref = source.reference
    if ref is None or source.embedded:
        return
    where = f"{source.path} ({ref.source})"
    what = "features" if ref.features is not None else "statistics"
    ours = None if extractor_name is None else registry.canonical_name(extractor_name)
    if extractor_name is not None:
        whose = f"the generated samples' features (`feature_extractor`={extractor_name!r})"
    elif extractor is not None:
        whose = f"the generated samples' features (`feature_extractor`: {type(extractor).__name__})"
    else:
        whose = "the generated samples (`feature_extractor`=None: compared as they are)"
    if ref.extractor is None:
        _warn(
            f"The real {what} of argument `{name}` ({where}) do not say which network made them: {whose} must "
            "come from that same network, or every score compares two different embeddings"
        )
        return
    theirs = registry.canonical_name(ref.extractor)
    if ref.source == "lightning-prd":
        family, exact = theirs, True
    else:
        family, exact = (DGM_EVAL_NAMES if ref.source == "dgm-eval" else FOREIGN_NAMES).get(theirs, (theirs, False))
    known = family in registry.available_extractors() or family in {f for f, _ in FOREIGN_NAMES.values()}
    if ours is not None and ours == family and exact:
        return
    if ours is not None and ours != family and (known or ref.source == "lightning-prd"):
        raise ValueError(
            f"Expected argument `feature_extractor` to be the network that made the {what} of argument `{name}` "
            f"({ref.extractor!r}, {where}), but got {extractor_name!r}"
        )
    _warn(
        f"The real {what} of argument `{name}` ({where}) were made with {ref.extractor!r}: {whose} must come "
        "from that very network (architecture, weights and preprocessing), or every score compares two different "
        "embeddings"
    )


def _warn(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=5)  # the caller of PRDCallback(...)


def check_held_out(
    real: Any, real_source: RealSource, test: Any, test_source: RealSource, identity: bool = False
) -> None:
    """``ValueError`` when the held-out ``test`` is the training set ``real`` itself: the same object, the same
    datamodule split, the same file or folder (by its resolved identity, as :func:`os.path.samefile`), a file
    of the same bytes, equal tensors, or a features file holding ``real``'s very features (also against a
    tensor of samples when ``identity``: no ``feature_extractor``, samples are features). A held-out set must
    be real samples the model was not trained on; ``real`` itself would score as no memorisation."""
    same = ""
    if real_source.kind == "datamodule" or test_source.kind == "datamodule":
        same = "the same datamodule loader" if real_source.split == test_source.split != "" else ""
    elif real_source.path and test_source.path:
        if os.path.samefile(real_source.path, test_source.path):
            same = "the same file" if os.path.isfile(real_source.path) else "the same folder"
        elif os.path.isfile(real_source.path) and os.path.isfile(test_source.path):
            same = "a file of the same content" if filecmp.cmp(real_source.path, test_source.path, False) else ""
    elif test is real:
        same = "the same object"
    elif isinstance(real, DataLoader) and isinstance(test, DataLoader) and test.dataset is real.dataset:
        same = "a loader of the same dataset"
    comparable = identity or real_source.embedded == test_source.embedded
    rows = (real_source.rows, test_source.rows)
    if not same and comparable and all(isinstance(r, torch.Tensor) for r in rows) and same_features(*rows):
        same = "the same samples" if real_source.embedded else "the same features"
    if same:
        shown = f"{test_source.path} and {real_source.path}" if test_source.path else type(test).__name__
        shown = repr(test) if isinstance(test, str) else shown
        raise ValueError(
            f"Expected argument `test` to be a held-out real set the model was not trained on, but it is {same} as "
            f"argument `real` ({shown}); pass real samples kept out of training"
        )
