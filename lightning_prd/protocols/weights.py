"""Which weights file a protocol accepts, and building its extractor from that file only.

A file is the protocol's when

1. its SHA-256 starts with one of the protocol's known digests (``weights_sha256``: a full digest or the
   published prefix, e.g. the ``6726825d`` in ``pt_inception-2015-12-05-6726825d.pth``, torch.hub's
   ``check_hash`` convention), or
2. its name is one of ``weights_files`` and no published digest contradicts it: a name that carries a
   torch.hub hash suffix (``-<hex>.<ext>``) must have a SHA-256 starting with that suffix (a truncated or
   replaced download under the right name is refused).

Anything else raises ``ValueError`` naming the file, its SHA-256 prefix, the file the protocol expects and
where to download it; a path that is no readable file says what it is (missing, a directory, a broken
link, unreadable). With no file given, the protocol's files are looked for in torch's hub cache
(:func:`lightning_prd.features.hub_checkpoint_dir`) and each candidate is checked the same way; an
extractor is never left to pick a file of its own.

A TorchScript archive (NVlabs' ``vgg16.pt`` of ``pr50k3``, ``inception-2015-12-05.pt`` of
``clean-fid``) is code that ``torch.jit.load`` runs, so it is taken by a published SHA-256 or an explicit
path only: given as ``weights`` it is accepted as above, found by name in the hub cache only when its
SHA-256 starts with one of the protocol's digests (none is published for these two files).

Example:
    >>> import tempfile, pathlib
    >>> from lightning_prd.protocols import get_protocol
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "my-inception.pth"
    >>> _ = path.write_bytes(b"not the FID weights")
    >>> try:
    ...     check_weights_file(get_protocol("fid"), path)
    ... except ValueError as err:
    ...     print(str(err).split(";")[0])
    Expected a weights file of protocol 'fid' (pt_inception-2015-12-05-6726825d.pth or \
weights-inception-2015-12-05-6726825d.pth, SHA-256 starting 6726825d), but got 'my-inception.pth' (SHA-256 \
starting e49328e91e68)
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from lightning_prd.features.images import file_sha256, hub_checkpoint_dir
from lightning_prd.features.paths import not_a_file, require_file
from lightning_prd.features.registry import get_extractor
from lightning_prd.features.vgg_nvlabs import is_torchscript_file
from lightning_prd.protocols.checks import check_against_protocol

#: a :class:`~lightning_prd.protocols.Protocol` (typed loosely: the table imports this module)
Protocol = Any

_HUB_HASH = re.compile(r"-([a-f0-9]{6,64})\.[A-Za-z0-9]+$")


def _expected(protocol: Protocol) -> str:
    names = " or ".join(protocol.weights_files) or "no file"
    digests = ", ".join(protocol.weights_sha256)
    return f"{names}" + (f", SHA-256 starting {digests}" if digests else "")


def _where(protocol: Protocol) -> str:
    first = protocol.weights_files[0] if protocol.weights_files else "the weights"
    url = f" from {protocol.weights_url}" if protocol.weights_url else ""
    note = f" ({protocol.download_note})" if protocol.download_note else ""
    return (
        f"download `{first}`{url}{note} and pass its path as `weights` (CLI: --weights), "
        f"or put it in {hub_checkpoint_dir()}"
    )


def weights_problem(protocol: Protocol, path: Path) -> Optional[str]:
    """Why ``path`` is not the protocol's weights file, or None when it is (module docstring)."""
    sha = file_sha256(path)
    if any(sha.startswith(known.lower()) for known in protocol.weights_sha256):
        return None
    full = [known.lower() for known in protocol.weights_sha256 if len(known) == 64]
    if full:  # a published full digest decides alone: the right name with other content is another file
        published = " or ".join(d[:12] + "..." for d in full)
        return f"got {path.name!r}, whose SHA-256 starts {sha[:12]}, not the published {published}"
    if path.name in protocol.weights_files:
        match = _HUB_HASH.search(path.name)
        if match is None or sha.startswith(match.group(1)):
            return None
        return f"its name is {path.name!r}, but its SHA-256 starts {sha[:12]}, not {match.group(1)} (damaged copy?)"
    return f"got {path.name!r} (SHA-256 starting {sha[:12]})"


def check_weights_file(protocol: Protocol, path: Any) -> Path:
    """``path`` as a :class:`~pathlib.Path` when it is the protocol's weights file, else ``ValueError``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"Expected argument `weights` of protocol {protocol.name!r} to be a file path, "
            f"but got {type(path).__name__}"
        )
    path = Path(path).expanduser()
    require_file(
        path,
        f"Expected argument `weights` to be the weights file of protocol {protocol.name!r} "
        f"({_expected(protocol)}), but {str(path)!r}",
        _where(protocol),
    )
    problem = weights_problem(protocol, path)
    if problem is not None:
        raise ValueError(
            f"Expected a weights file of protocol {protocol.name!r} ({_expected(protocol)}), but {problem}; "
            f"{_where(protocol)}"
        )
    return path


def _unpublished_code(protocol: Protocol, path: Path) -> Optional[str]:
    """Why a TorchScript file found by name is not taken (it is code), or None when its SHA-256 is published."""
    if not is_torchscript_file(path):
        return None
    sha = file_sha256(path)
    if any(sha.startswith(known.lower()) for known in protocol.weights_sha256):
        return None
    return (
        f"it is a TorchScript archive, which is code: found by name in a cache directory it is taken only when its "
        f"SHA-256 is a published one, and {sha[:12]} is not; pass its path as `weights` to use it"
    )


def find_weights(protocol: Protocol) -> Path:
    """The first of the protocol's files in torch's hub cache that passes the check; errors say what to get."""
    hub = hub_checkpoint_dir()
    refused = []
    for name in protocol.weights_files:
        candidate = hub / name
        found = not_a_file(candidate)
        if found is not None:
            if found[0] is not FileNotFoundError or candidate.is_symlink():
                refused.append(f"{candidate} {found[1]}")
            continue
        problem = weights_problem(protocol, candidate) or _unpublished_code(protocol, candidate)
        if problem is None:
            return candidate
        refused.append(f"{candidate}: {problem}")
    seen = f" (refused: {'; '.join(refused)})" if refused else ""
    raise FileNotFoundError(
        f"Weights of protocol {protocol.name!r} not found in {hub}{seen} (lightning_prd never downloads weights): "
        f"{_where(protocol)}"
    )


def merged_options(protocol: Protocol, options: Mapping[str, Any]) -> Dict[str, Any]:
    """The protocol's extractor options with ``options`` added; a contradicting option raises ``ValueError``."""
    for key, value in options.items():
        if key in protocol.extractor_options:
            check_against_protocol(protocol, key, value, protocol.extractor_options[key])
    return {**protocol.extractor_options, **options}


def build_extractor(protocol: Protocol, weights: Any = None, **options: Any) -> Any:
    """The extractor of ``protocol`` (see :meth:`Protocol.build_extractor`)."""
    if protocol.extractor is None:
        if weights is not None or options:
            raise ValueError(
                f"Protocol {protocol.name!r} uses the features as given; it takes no weights or extractor options, "
                f"but got weights={weights!r}, options={sorted(options)}"
            )
        return get_extractor("identity")
    kwargs = merged_options(protocol, options)
    if kwargs.get("random_init", False):
        if weights is not None:
            raise ValueError(f"Expected either `weights` or `random_init=True` for {protocol.name!r}, but got both")
        return get_extractor(protocol.extractor, **kwargs)
    path = check_weights_file(protocol, weights) if weights is not None else find_weights(protocol)
    return get_extractor(protocol.extractor, weights=path, **kwargs)  # it carries the file's SHA-256
