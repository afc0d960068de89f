"""``lightning-prd features``: embed a set once and write a features file with its provenance.

``--real`` is an image folder, a ``.npy``/``.npz``/``.pt`` of images ``[N, C, H, W]``, or a
guided-diffusion reference batch (read by content, :mod:`lightning_prd.cli.reference`); a file of
features or of statistics is refused (there is nothing to embed). The samples are read, subsampled
(``--num-samples``, ``--seed``) and embedded exactly as ``evaluate`` does with the same flags, so
``evaluate --real OUT`` gives the scores of ``evaluate --real PATH --extractor NAME``.

``--out`` is written by :func:`lightning_prd.features.write_features`: a ``.npz`` of ``features``
and ``provenance`` (the extractor's registry name, the SHA-256 of ``--weights``, the preprocessing
the extractor declares, the number of samples, this package's version), atomically (a temporary
file renamed over the target). Every check of ``--out`` runs before any work: it must end in
``.npz``, not be a folder or an input (compared by file identity), and its folder must be writable
(missing folders are created).

The file also serves ``PRDCallback(cache_dir=...)`` when placed in that folder: every sample is
digested as it goes into the extractor (:class:`Digesting`), the digests are written as the entry
``sample_sha256`` and the extractor's cache key (:func:`~lightning_prd.features.cache.cache_provenance`,
on ``--device``) as ``provenance["cache"]`` (:mod:`lightning_prd.features.cache`). An extractor the
cache cannot key (a plain function, a setting it cannot read) gives a file without them and one
warning line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from torch import Tensor

from lightning_prd import __version__
from lightning_prd.cli.checks import check_outputs
from lightning_prd.cli.evaluate import _device, _extractor
from lightning_prd.cli.inputs import CLIError, _check_path
from lightning_prd.cli.reference import load_set
from lightning_prd.features._cache_io import RowDigests
from lightning_prd.features.registry import canonical_name


class Digesting:
    """The extractor, calling ``digests.update(batch)`` on each batch before it embeds it; every other
    attribute (``input_size``, ...) is the extractor's."""

    def __init__(self, extractor: Any, digests: RowDigests) -> None:
        self.extractor, self.digests = extractor, digests

    def __call__(self, batch: Tensor) -> Any:
        self.digests.update(batch)
        return self.extractor(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["extractor"], name)


def preprocessing_of(extractor: Any) -> Optional[Any]:
    """What the extractor does to samples before its network, as it declares it: its ``preprocessing``
    attribute (a string or dict) if it has one, else the image contract of an
    :class:`~lightning_prd.features.ImageExtractor` (input size, normalisation, resize), else None."""
    declared = getattr(extractor, "preprocessing", None)
    if isinstance(declared, (str, dict)):
        return declared
    size = getattr(extractor, "input_size", None)
    if size is None:
        return None
    out: Dict[str, Any] = {"input_size": [int(v) for v in size]}
    for name, key in (("mean", "mean"), ("std", "std"), ("mode", "resize"), ("antialias", "antialias")):
        value = getattr(extractor, name, None)
        if isinstance(value, (tuple, list)):
            out[key] = [float(v) for v in value]
        elif isinstance(value, (str, bool)):
            out[key] = value
    return out


def _check_out(args: argparse.Namespace) -> None:
    """``--out`` ends in ``.npz`` and can be written without touching an input (before any work)."""
    check_outputs(args, [("--real", args.real)], lambda out: "png", flags=("--out",))
    if Path(args.out).suffix.lower() != ".npz":
        raise CLIError(f"--out {args.out}: expected a .npz file path (the features file is a .npz)")


def run_features(args: argparse.Namespace) -> int:
    """Run ``features`` on parsed arguments; returns the exit status."""
    from lightning_prd.features import write_features

    device = _device(args.device)
    _check_path(args.real, "--real", True, by_content=True)
    _check_out(args)
    if args.weights is not None and not Path(args.weights).expanduser().is_file():
        raise CLIError(f"--weights {args.weights}: no such file")
    extractor = _extractor(args, device)
    digests = RowDigests()
    real = load_set(args.real, "--real", args, Digesting(extractor, digests), device, embed_only=True)
    name = args.extractor if ":" in args.extractor else canonical_name(args.extractor)
    weights = None if args.weights is None else Path(args.weights).expanduser()
    cache = _cache_provenance(extractor, device, args.extractor_precision)
    if cache is not None and len(digests.digests) != real.num:
        cache = None  # not one digest per row: the extractor was not run once per sample here
    try:
        Path(args.out).expanduser().parent.mkdir(parents=True, exist_ok=True)
        provenance = write_features(
            Path(args.out).expanduser(),
            real.features,
            extractor=name,
            weights=weights,
            preprocessing=preprocessing_of(extractor),
            version=__version__,
            inputs=[Path(args.real).expanduser()],
            sample_digests=None if cache is None else digests.digests,
            cache=cache,
        )
    except OSError as err:
        raise CLIError(f"--out {args.out}: cannot write the file: {err.strerror or err}") from err
    except ValueError as err:
        raise CLIError(f"--out {args.out}: {' '.join(str(err).split())}") from err
    shown = f"{real.num} of {real.total}" if real.num != real.total else str(real.num)
    print(
        f"wrote {args.out}: {shown} samples of {real.path}, {provenance['num_features']} features each "
        f"(extractor {name})"
    )
    return 0


def _cache_provenance(extractor: Any, device: Any, precision: str) -> Optional[Dict[str, Any]]:
    """The extractor's cache key as it ran, or None (with a warning line) when the cache cannot key it."""
    from lightning_prd.features.cache import cache_provenance

    try:
        return cache_provenance(extractor, device=device, extractor_precision=precision)
    except (TypeError, ValueError) as err:
        reason = " ".join(str(err).split())[:300]
        print(
            f"lightning-prd features: warning: the file will not serve cache_dir (the disk cache cannot key the "
            f"extractor: {reason})",
            file=sys.stderr,
        )
        return None
