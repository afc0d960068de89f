"""Float64 statistics of feature sets without a float64 copy of the whole set."""

from __future__ import annotations

import math
from typing import Iterator, Optional, Tuple

import torch
from torch import Tensor

#: float64 values in one row chunk of the streamed statistics (8 MB: the chunk's float64 copy is
#: reused and stays in cache, where a fresh 64 MB copy per chunk measured 4-6x slower)
CHUNK_VALUES = 2**20


def chunk_rows(dim: int) -> int:
    """Rows of ``dim`` features in one chunk of :data:`CHUNK_VALUES` values."""
    return max(1, CHUNK_VALUES // max(1, dim))


def row_chunks(x: Tensor) -> Iterator[Tuple[int, Tensor]]:
    """``(first row, float64 copy of the rows)`` of ``x`` ``[n, D]`` in chunks of :func:`chunk_rows`
    rows, copied into one reused buffer (each copy is valid until the next one)."""
    rows = chunk_rows(x.shape[1])
    buf = torch.empty((min(rows, x.shape[0]), x.shape[1]), dtype=torch.float64, device=x.device)
    for s in range(0, x.shape[0], rows):
        blk = x[s : s + rows]
        yield s, buf[: blk.shape[0]].copy_(blk)


def mean64(x: Tensor) -> Tensor:
    """Float64 column mean of ``x``, summed in row chunks (``torch.mean(dtype=...)`` copies ``x``)."""
    total = torch.zeros(x.shape[1], dtype=torch.float64, device=x.device)
    for _, rows in row_chunks(x):
        total += rows.sum(0)
    return total / x.shape[0]


def gram64(
    x: Tensor,
    *,
    centre: Optional[Tensor] = None,
    scale: float = 1.0,
    row_scale: Optional[Tensor] = None,
    row_divisor: Optional[Tensor] = None,
) -> Tensor:
    """Float64 ``[D, D]`` sum of ``z_i z_i^T`` over the rows
    ``z_i = scale (x_i - centre) row_scale_i / row_divisor_i`` (each part optional), accumulated in
    row chunks (no float64 copy of ``x``)."""
    gram = torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64, device=x.device)
    for s, rows in row_chunks(x):
        if centre is not None:
            rows.sub_(centre)
        if scale != 1.0:
            rows.mul_(scale)
        if row_scale is not None:
            rows.mul_(row_scale[s : s + rows.shape[0], None])
        if row_divisor is not None:
            rows.div_(row_divisor[s : s + rows.shape[0], None])
        gram.addmm_(rows.T, rows)
    return gram


#: feature ranges inside ``[2^-SAFE_EXPONENT, 2^SAFE_EXPONENT]`` keep float64 moments and their
#: eigendecompositions far from overflow and underflow; others are scaled by a power of two
SAFE_EXPONENT = 100


def unit_scale(r: float) -> float:
    """A power of two ``s`` with ``s r`` in ``[0.5, 1)`` when ``r`` is outside
    ``[2^-SAFE_EXPONENT, 2^SAFE_EXPONENT]`` (or 0); else 1. Multiplying by ``s`` is exact.

    Example:
        >>> unit_scale(3.0), unit_scale(0.0), 0.5 <= unit_scale(3e40) * 3e40 < 1
        (1.0, 1.0, True)
    """
    if r == 0 or 2.0**-SAFE_EXPONENT <= r <= 2.0**SAFE_EXPONENT:
        return 1.0
    return math.ldexp(1.0, -max(-1000, min(1000, math.frexp(r)[1])))


#: relative rounding tolerance of a covariance given as numbers (:func:`covariance_defect`)
COVARIANCE_TOLERANCE = 1e-6


def covariance_defect(cov: Tensor) -> Optional[str]:
    """Why the float64 ``cov`` ``[D, D]`` is no covariance beyond rounding, as a phrase to follow its name
    (``"is not symmetric: ..."``), or ``None`` when it is one: symmetric within ``COVARIANCE_TOLERANCE`` of its
    largest entry and no eigenvalue below ``-COVARIANCE_TOLERANCE`` times its trace (float32 rounding of a stored or
    computed covariance moves its eigenvalues by about 1e-9 of the trace).

    Example:
        >>> import torch
        >>> covariance_defect(torch.eye(3, dtype=torch.float64)) is None
        True
        >>> covariance_defect(torch.diag(torch.tensor([1.0, 1.0, -3.0], dtype=torch.float64)))
        'has the eigenvalue -3, below -5e-06 (1e-06 of its trace, the rounding tolerance): no covariance'
    """
    largest = float(cov.abs().max()) if cov.numel() else 0.0
    if largest == 0:
        return None
    gap = float((cov - cov.T).abs().max())
    if gap > COVARIANCE_TOLERANCE * largest:
        return (
            f"is not symmetric: entries [i, j] and [j, i] differ by up to {gap:.3g}, beyond the rounding tolerance "
            f"{COVARIANCE_TOLERANCE * largest:.3g} ({COVARIANCE_TOLERANCE:g} of its largest entry)"
        )
    unit = (cov + cov.T) / (2 * largest)  # entries within [-1, 1]: no overflow in the factorisation
    floor = COVARIANCE_TOLERANCE * float(unit.diagonal().abs().sum())
    shifted = unit + floor * torch.eye(unit.shape[0], dtype=unit.dtype, device=unit.device)
    if floor > 0 and int(torch.linalg.cholesky_ex(shifted)[1]) == 0:  # every eigenvalue above -floor
        return None
    low = float(torch.linalg.eigvalsh(unit)[0])
    if low >= -floor:  # (Cholesky's own rounding at the boundary)
        return None
    low, floor = low * largest, floor * largest
    return (
        f"has the eigenvalue {low:.3g}, below {-floor:.3g} ({COVARIANCE_TOLERANCE:g} of its trace, the rounding "
        "tolerance): no covariance"
    )
