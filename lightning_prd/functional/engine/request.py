"""What the scores ask of the shared k-NN pass: one :class:`PassRequest`, built from every switched-on family's
ask (:meth:`PassRequest.merge`) and handed unchanged from :func:`~lightning_prd.functional.generative_metrics`
to :func:`~lightning_prd.functional.engine.one_pass.run_pass` and the tile loop.

A family asks for the radii it reads and the questions of the real x fake tiles (membership in the real balls of
a ``k``, recall's generated balls, realism, nearest neighbours, PR-cover, soft balls, the Gaussian kernel, clipped
counts, further :class:`~lightning_prd.functional.knn.reduction.TileReduction` objects); two families asking the
same question share its answer (membership at ``k = 5`` is decided once for density and coverage).

Example:
    >>> a = PassRequest(member_ks=(3,), recall_ks=(3,))
    >>> b = PassRequest(member_ks=(5,), real_ks=(1,), nearest="fake")
    >>> m = a.merge(b)
    >>> m.member_ks, m.recall_ks, m.real_ks, m.nearest
    ((3, 5), (3,), (1,), 'fake')
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional, Sequence, Tuple, Union

from torch import Tensor


def _union(a: Sequence[int], b: Sequence[int]) -> Tuple[int, ...]:
    return tuple(sorted(set(a) | set(b)))


def _one(name: str, a: Any, b: Any) -> Any:
    """The one value of a question two asks share (the same, or one of them None)."""
    if a is None:
        return b
    if b is None or a is b or (not isinstance(a, Tensor) and a == b):
        return a
    raise ValueError(f"two score families ask the k-NN pass for different `{name}`: {a!r} and {b!r}")


@dataclass(frozen=True)
class PassRequest:
    """One request of the shared k-NN pass (module docstring).

    Attributes:
        member_ks: k of the real balls whose generated members are decided (precision, density, coverage).
        recall_ks: k of the generated balls whose real members are decided (recall).
        realism_k: k of the median-pruned real balls of the realism score, or None.
        nearest: nearest neighbours across the sets (True: both directions; ``"fake"``: each generated sample's
            nearest real one; False: none).
        real_ks: further exact real radii ``NND_k`` (authenticity's ``NND_1``, a reduction's balls).
        fake_values, value_ks: per generated sample values minimised over each real ball of each k (beta-recall).
        cover: ``(k, k')`` of PR-cover, or None.
        soft: ``(k, a, nearest)`` of the soft balls (probabilistic precision and recall), or None.
        kernel_gamma: the Gaussian kernel's ``gamma`` (CMMD), or None.
        clipped: the clipped counts (:class:`~lightning_prd.functional.knn.clipped.ClippedBalls`), or None.
        reductions: further tile reductions, each one's result under its key.
        ball: ``"closed"`` or ``"open"`` balls of ``member_ks`` and ``recall_ks``.
    """

    member_ks: Tuple[int, ...] = ()
    recall_ks: Tuple[int, ...] = ()
    realism_k: Optional[int] = None
    nearest: Union[bool, str] = False
    real_ks: Tuple[int, ...] = ()
    fake_values: Optional[Tensor] = None
    value_ks: Tuple[int, ...] = ()
    cover: Optional[Tuple[int, int]] = None
    soft: Optional[Tuple[int, float, bool]] = None
    kernel_gamma: Optional[float] = None
    clipped: Optional[Any] = None
    reductions: Tuple[Any, ...] = field(default_factory=tuple)
    ball: str = "closed"

    def __post_init__(self) -> None:
        for name in ("member_ks", "recall_ks", "real_ks", "value_ks"):
            object.__setattr__(self, name, tuple(sorted(set(getattr(self, name)))))
        object.__setattr__(self, "reductions", tuple(self.reductions))

    @property
    def empty(self) -> bool:
        """Whether nothing is asked: no pass runs."""
        return not (
            self.member_ks or self.recall_ks or self.realism_k or self.nearest or self.real_ks or self.value_ks
            or self.cover or self.soft or self.kernel_gamma is not None or self.clipped is not None
            or self.reductions or self.fake_values is not None
        )  # fmt: skip

    def merge(self, other: PassRequest) -> PassRequest:
        """Both requests in one: the union of the radii and questions (a single-valued question two requests
        ask differently raises ``ValueError``)."""
        nearest: Union[bool, str] = (
            True if True in (self.nearest, other.nearest) else (self.nearest or other.nearest or False)
        )
        keys = {getattr(r, "key", id(r)) for r in self.reductions}
        return replace(
            self,
            member_ks=_union(self.member_ks, other.member_ks),
            recall_ks=_union(self.recall_ks, other.recall_ks),
            realism_k=_one("realism_k", self.realism_k, other.realism_k),
            nearest=nearest,
            real_ks=_union(self.real_ks, other.real_ks),
            fake_values=_one("fake_values", self.fake_values, other.fake_values),
            value_ks=_union(self.value_ks, other.value_ks),
            cover=_one("cover", self.cover, other.cover),
            soft=_one("soft", self.soft, other.soft),
            kernel_gamma=_one("kernel_gamma", self.kernel_gamma, other.kernel_gamma),
            clipped=_one("clipped", self.clipped, other.clipped),
            reductions=self.reductions + tuple(r for r in other.reductions if getattr(r, "key", id(r)) not in keys),
            ball=_one("ball", self.ball, other.ball),
        )
