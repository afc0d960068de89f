"""Run names as tables show them: the parts of the runs' paths that tell them apart.

TensorBoard shows runs relative to its log directory; with the usual ``logdir/<name>/version_N`` layout the
parts every run shares (a common prefix, ``version_0`` at the end) say nothing. :func:`distinct_names` drops
the path parts (``/``-separated) that every label shares at its start and at its end, keeping at least one part
of each label; a single run keeps its last part. ``--json`` keeps the labels whole.

Example:
    >>> distinct_names(["baseline-lr1/version_0", "wider-net-lr/version_0"])
    ['baseline-lr1', 'wider-net-lr']
    >>> distinct_names(["sweep/lr_0.1/seed0/version_0", "sweep/lr_0.1/seed1/version_0"])
    ['seed0', 'seed1']
    >>> distinct_names(["a/version_0", "a/version_1", "b/version_0"])
    ['a/version_0', 'a/version_1', 'b/version_0']
    >>> distinct_names(["logs/gan/version_3"])
    ['version_3']
"""

from __future__ import annotations

from typing import List, Sequence


def _shared(lists: Sequence[Sequence[str]], limit: int) -> int:
    """How many leading parts every list of ``lists`` shares, at most ``limit``."""
    n = 0
    while n < limit and len({tuple(parts[n : n + 1]) for parts in lists}) == 1:
        n += 1
    return n


def distinct_names(labels: Sequence[str]) -> List[str]:
    """``labels`` (``/``-separated paths) without the leading and trailing parts that all of them share (module
    docstring); labels that would no longer be distinct are returned whole."""
    parts = [[p for p in label.split("/") if p] or [label] for label in labels]
    if not parts:
        return []
    shortest = min(len(p) for p in parts)
    head = _shared(parts, shortest - 1)
    rest = [p[head:] for p in parts]
    tail = _shared([p[::-1] for p in rest], min(len(p) for p in rest) - 1) if len(parts) > 1 else 0
    names = ["/".join(p[: len(p) - tail]) for p in rest]
    return names if len(set(names)) == len(set(labels)) else list(labels)
