"""Ball membership of a cross tile: which pairs have ``d^2 <= r^2``, decided exactly.

Stage: used by the cross pass (may call :mod:`.bounds` and :mod:`.workspace` only; exact distances come in as a
callable). A pair is inside a ball when its tile value is at or below the bound's *sure*
threshold, outside when above the *maybe* threshold; pairs between are decided from their
float64 distance. Balls are closed (``d^2 <= r^2``, ``DESIGN.md``) unless ``strict`` asks for
open balls (``d^2 < r^2``, the ``prdc`` package's test): then a pair is surely inside only
when its tile value is strictly below the sure threshold, whose exact distance is then
strictly below the radius (the bound's upper end is increasing), so a pair exactly on the
radius is always decided in float64. :class:`Members` keeps the pairs of a tile's
balls (rows) as a sparse list or a dense mask and reduces them per row and per column
(precision, density, coverage, per-ball minima); :func:`rows_inside` answers only "inside
some ball of a column" (recall).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.bounds import Bound
    >>> sq = torch.tensor([[0.5, 2.0], [4.0, 0.9]])
    >>> b = Bound(0.0, None, torch.tensor([1e-6, 1e-6]))
    >>> m = Members(sq, torch.tensor([1.0, 1.0], dtype=torch.float64), b, None)
    >>> m.count_per_col().tolist(), m.any_per_row().tolist()
    ([1, 1], [True, True])
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.bounds import Bound
from lightning_prd.functional.knn.workspace import tile_mask

#: Above this share of candidate pairs in a tile, membership stays a dense mask.
_SPARSE_SHARE = 1 / 16


class Ambiguous(Exception):
    """Raised by :class:`Members` when a screened tile holds too many ambiguous pairs."""


def _check(ambiguous: int, limit: Optional[float]) -> None:
    if limit is not None and ambiguous > limit:
        raise Ambiguous()


def thresholds(thr: Tensor, bound: Bound, dtype: torch.dtype) -> Tuple[Tensor, Tensor]:
    """Tile values at or below which a pair is surely / maybe within ``thr`` (float64 squared
    radii), in the tile's dtype, widened by the rounding of the bounds themselves."""
    widen = torch.finfo(dtype).eps * thr
    return (bound.sure_below(thr) - widen).to(dtype), (bound.maybe_below(thr) + widen).to(dtype)


def inside_ball(values: Tensor, thr: Tensor, strict: bool) -> Tensor:
    """``values < thr`` (open balls) or ``values <= thr`` (closed balls)."""
    return values < thr if strict else values <= thr


def rows_inside(
    sq: Tensor,
    thr: Tensor,
    bound: Bound,
    exact_fn: Callable,
    decided: Tensor,
    limit: Optional[float],
    strict: bool = False,
) -> Tensor:
    """Per tile row: inside the ball (radius ``thr``, one per column) of some column (recall).

    Only an existence per row is wanted, so rows already ``decided`` (inside some ball of an
    earlier tile) or surely inside a ball of this one need no float64 work; the pairs that
    may be inside are listed only for the rows still open. With recall near 1 (most real
    samples inside some generated ball) almost every row is settled by one comparison.
    ``strict``: open balls (``d^2 < r^2``).
    """
    lo, hi = thresholds(thr, bound, sq.dtype)
    done = decided | inside_ball(sq, lo[None, :], strict).any(1)
    open_rows = (~done).nonzero(as_tuple=True)[0]
    if open_rows.numel() == 0:
        return done
    part = sq if open_rows.numel() * 2 > sq.shape[0] else sq[open_rows]
    r, c = (part <= hi[None, :]).nonzero(as_tuple=True)
    if part is sq:
        keep = ~done[r]
        r, c = r[keep], c[keep]
    else:
        r = open_rows[r]
    if r.numel():
        _check(r.numel(), limit)
        inside = inside_ball(exact_fn(r, c), thr[c], strict)
        done = done.index_fill(0, r[inside], True)
    return done


class Members:
    """The pairs ``(row, col)`` of a tile with ``sq <= thr[row]`` (balls of the tile's rows): a
    sparse list or a dense mask; ``sq < thr[row]`` with ``strict`` (open balls).

    A ball holds few points of the other set (about k per ball when the sets match), so the
    pairs below the upper rounding bound are usually a small share of the tile: they are
    listed once and every reduction runs on the list. Dense tiles (collapsed models, ties)
    keep a mask. Pairs within the rounding margin are decided in float64 (``exact_fn``).
    """

    def __init__(
        self,
        sq: Tensor,
        thr: Tensor,
        bound: Bound,
        exact_fn: Callable,
        within: Optional[Members] = None,
        limit: Optional[float] = None,
        strict: bool = False,
    ) -> None:
        """``limit``: raise :class:`Ambiguous` rather than decide more pairs in float64.
        ``within``: members of balls of the same centres and radii at least ``thr`` (either
        kind). ``strict``: open balls."""
        lo, hi = thresholds(thr, bound, sq.dtype)
        self.shape, self.limit, self.strict = sq.shape, limit, strict
        self.maybe: Optional[Tuple[Tensor, Tensor, Tensor]] = None
        self.mask: Optional[Tensor] = None
        if within is not None and within.maybe is not None:
            # smaller balls of the same centres (thr <= within's thr, elementwise): the pairs
            # below this upper bound are among ``within``'s listed pairs, no tile pass needed
            r, c, v = within.maybe
            sel = v <= hi[r]
            self._sparse(r[sel], c[sel], v[sel], thr, lo, exact_fn)
            return
        maybe = torch.le(sq, hi[:, None], out=tile_mask(sq, "members"))
        if int(torch.count_nonzero(maybe)) <= _SPARSE_SHARE * sq.numel():
            r, c = maybe.nonzero(as_tuple=True)
            self._sparse(r, c, sq[r, c], thr, lo, exact_fn)
        else:
            sure = inside_ball(sq, lo[:, None], strict)
            amb = maybe & ~sure
            if bool(amb.any()):
                r, c = amb.nonzero(as_tuple=True)
                _check(r.numel(), self.limit)
                sure[r, c] = inside_ball(exact_fn(r, c), thr[r], strict)
            self.mask = sure

    def _sparse(self, r: Tensor, c: Tensor, v: Tensor, thr: Tensor, lo: Tensor, exact_fn: Callable) -> None:
        """Members from the listed pairs below the upper bound (values ``v``): sure below ``lo``,
        the rest decided in float64."""
        self.maybe = (r, c, v)
        keep = inside_ball(v, lo[r], self.strict)
        amb = (~keep).nonzero(as_tuple=True)[0]
        if amb.numel():
            _check(amb.numel(), self.limit)
            keep[amb] = inside_ball(exact_fn(r[amb], c[amb]), thr[r[amb]], self.strict)
        self.rows, self.cols, self.mask = r[keep], c[keep], None

    def any_per_col(self) -> Tensor:
        if self.mask is not None:
            return self.mask.any(0)
        out = torch.zeros(self.shape[1], dtype=torch.bool, device=self.cols.device)
        return out.index_fill_(0, self.cols, True)

    def any_per_row(self) -> Tensor:
        if self.mask is not None:
            return self.mask.any(1)
        out = torch.zeros(self.shape[0], dtype=torch.bool, device=self.rows.device)
        return out.index_fill_(0, self.rows, True)

    def count_per_col(self) -> Tensor:
        if self.mask is not None:
            return self.mask.sum(0)
        return torch.bincount(self.cols, minlength=self.shape[1])

    def min_per_row(self, col_values: Tensor) -> Tensor:
        """Minimum of ``col_values`` over each row's member columns (``inf`` when none)."""
        if self.mask is not None:
            return torch.where(self.mask, col_values[None, :], math.inf).amin(1)
        out = torch.full((self.shape[0],), math.inf, dtype=col_values.dtype, device=col_values.device)
        return out.scatter_reduce_(0, self.rows, col_values[self.cols], reduce="amin")
