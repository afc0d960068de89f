"""Named protocols: a feature network, its preprocessing, k, ball and sample counts, as a reference runs them.

* :class:`Protocol`, :func:`get_protocol`, :func:`available_protocols`, :func:`register_protocol` — the table
  (:mod:`lightning_prd.protocols.table`: ``"fid"``, ``"pytorch-fid"``, ``"clean-fid"``, ``"pr50k3"``,
  ``"fd-dinov2"``, ``"cmmd"``, ``"prdc"``, each with the tool and papers it matches).
* :meth:`Protocol.build_extractor` — the protocol's extractor from its own weights file only
  (:mod:`lightning_prd.protocols.weights`: the name or SHA-256 is checked).
* :func:`metric_arguments`, :func:`resolve_arguments`, :func:`check_against_protocol` — what a protocol sets
  on :class:`~lightning_prd.GenerativeMetrics`, the callback and ``lightning-prd evaluate``, and the error for
  an explicit argument that contradicts it.
* :func:`fingerprint`, :func:`fingerprint_differences` — the record of what produced a score.

Imports: ``features`` and ``functional`` only (the package version is read from the loaded root module, not
imported, since the root imports the callback, which imports this).

Example:
    >>> from lightning_prd.protocols import get_protocol
    >>> fid = get_protocol("fid")
    >>> fid.extractor, dict(fid.extractor_options), fid.k_precision_recall, fid.ball, fid.num_fake
    ('fid-inception', {'resize': 'tf1', 'quantisation': 'floor'}, 3, 'closed', 50000)
"""

from lightning_prd.protocols.checks import check_against_protocol, same_value
from lightning_prd.protocols.fingerprint import FINGERPRINT_KEYS, fingerprint, fingerprint_differences
from lightning_prd.protocols.options import metric_arguments, resolve_arguments
from lightning_prd.protocols.table import (
    Protocol,
    available_protocols,
    get_protocol,
    register_protocol,
    unregister_protocol,
)
from lightning_prd.protocols.weights import check_weights_file, find_weights

__all__ = [
    "FINGERPRINT_KEYS",
    "Protocol",
    "available_protocols",
    "check_against_protocol",
    "check_weights_file",
    "find_weights",
    "fingerprint",
    "fingerprint_differences",
    "get_protocol",
    "metric_arguments",
    "register_protocol",
    "resolve_arguments",
    "same_value",
    "unregister_protocol",
]
