"""``--extractor-precision`` of the commands that run an extractor (``evaluate``, ``features``): the
precision the extractor runs in, ``ieee`` (default) or ``fast`` (:mod:`lightning_prd.features.precision`).

Example:
    >>> import argparse
    >>> p = argparse.ArgumentParser()
    >>> add_precision_argument(p)
    >>> precision_of(p.parse_args([])), precision_of(p.parse_args(["--extractor-precision", "fast"]))
    ('ieee', 'fast')
"""

from __future__ import annotations

import argparse

from lightning_prd.features.precision import DEFAULT_EXTRACTOR_PRECISION, EXTRACTOR_PRECISIONS


def add_precision_argument(p: argparse.ArgumentParser) -> None:
    """``--extractor-precision`` (:mod:`lightning_prd.features.precision`) on a command that runs an extractor."""
    p.add_argument(
        "--extractor-precision",
        choices=EXTRACTOR_PRECISIONS,
        default=DEFAULT_EXTRACTOR_PRECISION,
        help="precision of the extractor: ieee (default: no autocast, IEEE float32 matmuls and convolutions, the "
        "reference tools' features) or fast (the TF32 and autocast settings as they are: faster on GPUs, "
        "features not bit-comparable with the references')",
    )


def precision_of(args: argparse.Namespace) -> str:
    """The ``--extractor-precision`` of a command (``"ieee"`` for a command without the option)."""
    return str(getattr(args, "extractor_precision", "ieee"))
