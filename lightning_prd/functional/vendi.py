r"""Vendi score (Friedman & Dieng, TMLR 2023): the effective number of distinct samples of one set.

Reference: D. Friedman, A. B. Dieng, "The Vendi Score: A Diversity Evaluation Metric for
Machine Learning", TMLR 2023; reference code ``vendi-score`` 0.0.3 (vertaix/Vendi-Score).
Linear kernel on (by default L2-normalised) features, so :math:`k(x, x) = 1`; the eigenvalues
of :math:`K/n` are those of the smaller of the two Gram matrices :math:`X X^\top / n`
(``n x n``) and :math:`X^\top X / n` (``D x D``, the reference code's ``score_dual``): both have
the same nonzero spectrum, so no ``n x n`` matrix is formed when ``n > D``. Gram and
eigenvalues in float64; eigenvalues below ``size * eps * max`` (rounding noise of a zero
eigenvalue) count as 0, so orders ``q < 1`` do not count noise. ``q = inf`` is the order
the reference code spells ``"inf"`` (its ``score_X`` ignores ``q`` and always uses ``q = 1``).
"""

from __future__ import annotations

import math
from typing import Any, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.functional.engine.devices import to_compute_device
from lightning_prd.functional.engine.inputs import as_features, check_real
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.stats import gram64, row_chunks


def check_vendi_order(q: Any) -> float:
    """The order ``q`` as a float in ``(0, inf]`` (the string ``"inf"`` is accepted, as in ``vendi-score``)."""
    if isinstance(q, str) and q.strip().lower() == "inf":
        return math.inf
    try:
        return check_real(q, "q", low=0, low_open=True, allow_inf=True)
    except ValueError:
        raise ValueError(f'Expected argument `q` to be a number in (0, inf] (or "inf"), but got {q!r}') from None


def _scaled_norms(rows: Tensor) -> Tuple[Tensor, Tensor]:
    """``(s, n)`` of float64 rows: ``s`` the power of two that brings each row's largest entry
    into ``[0.5, 1)`` (1 for a zero row) and ``n`` the L2 norm of ``s x``, so ``s x / n`` is the unit
    row and neither its squares nor the norm overflow or underflow. Scaling by a power of two is
    exact: ``s x / n`` has the bits of ``x / ||x||`` wherever the latter is computable."""
    exponent = torch.frexp(rows.abs().amax(1)).exponent.clamp(-1000, 1000)
    scale = torch.ldexp(torch.ones_like(rows[:, 0]), -exponent)
    return scale, (rows * scale[:, None]).norm(dim=1)


def _gram64(x: Tensor, normalize: bool, name: str) -> Tensor:
    """The smaller Gram matrix of the (normalised) rows divided by n, in float64, in row chunks."""
    n, dim = x.shape
    scale = norms = None
    if normalize:
        parts = [_scaled_norms(rows) for _, rows in row_chunks(x)]
        scale, norms = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        zero = int((norms == 0).sum())
        if zero:
            raise ValueError(
                f"Expected argument `{name}` to have no all-zero row when `normalize=True` "
                f"(a zero vector has no direction), but got {zero} of {n}"
            )
    if n <= dim:
        rows = x.to(torch.float64)
        if scale is not None and norms is not None:
            rows = rows * scale[:, None] / norms[:, None]
        return rows @ rows.T / n
    return gram64(x, row_scale=scale, row_divisor=norms) / n


def vendi_from_eigenvalues(eigenvalues: Tensor, q: float) -> Tensor:
    r"""``exp(H_q(p))`` of the eigenvalues ``p`` (Rényi entropy of order q; Shannon at q = 1)."""
    p = eigenvalues.to(torch.float64)
    p = p[p > 0]
    if q == 1:
        return torch.exp(-(p * p.log()).sum())
    if math.isinf(q):
        return 1 / p.max()
    return torch.exp(torch.log((p**q).sum()) / (1 - q))


@score_precision()
def vendi_score(features: Any, *, q: Union[float, str] = 1, normalize: bool = True) -> Tensor:
    r"""Vendi score of one set of samples: the exponential of the entropy of the similarity spectrum.

    .. math::
        \mathrm{VS}_q(x_1, \dots, x_n) = \exp\Big(\frac{1}{1 - q}\log\sum_i \lambda_i^q\Big),
        \qquad \mathrm{VS}_1 = \exp\Big(-\sum_i \lambda_i \log \lambda_i\Big),
        \qquad \mathrm{VS}_\infty = 1 / \max_i \lambda_i,

    where :math:`\lambda_i` are the eigenvalues of :math:`K/n`, :math:`K_{ij} = \hat x_i^\top \hat x_j`
    with :math:`\hat x = x / \lVert x\rVert` (Friedman & Dieng, TMLR 2023). Between 1 (all
    samples identical in direction) and :math:`\min(n, D)` (orthogonal directions spread
    evenly); higher means more diverse. Needs no reference set: compare a model's value with
    the real set's. Small ``q`` weighs rare directions, large ``q`` common ones.

    Args:
        features: ``[n, D]`` features of one set.
        q: order of the entropy, a number in ``(0, inf]`` (``math.inf`` or ``"inf"``), 1 by default.
        normalize: divide each row by its L2 norm first (the paper's setting, ``k(x, x) = 1``;
            rows must then be nonzero). With False the rows are used as they are, as
            ``vendi-score``'s ``score_dual(..., normalize=False)`` does; the spectrum then sums to
            the mean squared norm, which is the paper's setting only for unit-norm rows.

    Returns:
        0-dim float64 tensor. With ``normalize=True`` it does not depend on the rows' scales (their
        norms are formed on rows scaled by exact powers of two, so no finite row overflows).

    Raises:
        ValueError: an all-zero row with ``normalize=True``; with ``normalize=False``, squared
            norms past float64's range.

    Example:
        >>> import torch
        >>> vendi_score(torch.eye(3).repeat(4, 1)), vendi_score(torch.ones(5, 2))  # 3 directions; 1 direction
        (tensor(3.0000, dtype=torch.float64), tensor(1.0000, dtype=torch.float64))
        >>> round(float(vendi_score(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))), 4)
        1.8899
        >>> round(float(vendi_score(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), q=math.inf)), 4)
        1.5
    """
    q = check_vendi_order(q)
    if not isinstance(normalize, bool):
        raise ValueError(f"Expected argument `normalize` to be a bool, but got {normalize!r}")
    return vendi_of(to_compute_device(as_features(features, "features")), q=q, normalize=normalize, name="features")


def vendi_of(x: Tensor, *, q: float, normalize: bool, name: str) -> Tensor:
    """:func:`vendi_score` of validated features ``x`` and options; errors name the argument ``name``."""
    gram = _gram64(x, normalize, name)
    if not bool(torch.isfinite(gram).all()):  # only unnormalised rows of norm past ~1e154 get here
        raise ValueError(
            f"Expected argument `{name}` to have rows whose squared norms fit float64's range when "
            "`normalize=False`, but they overflow; scale the features down (or pass `normalize=True`)"
        )
    eigenvalues = torch.linalg.eigvalsh(gram)
    tol = eigenvalues.shape[0] * torch.finfo(torch.float64).eps * eigenvalues.abs().max()
    eigenvalues = torch.where(eigenvalues > tol, eigenvalues, torch.zeros_like(eigenvalues))
    if not bool((eigenvalues > 0).any()):  # only all-zero rows (normalize=False) get here: no spectrum
        raise ValueError(
            f"Expected argument `{name}` to have a nonzero row when `normalize=False` (the kernel of all-zero "
            "rows is 0 and has no spectrum to take the entropy of), but every row is zero"
        )
    return vendi_from_eigenvalues(eigenvalues, q)
