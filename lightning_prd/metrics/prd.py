"""``PRDCurve``: PRD curves and F_8 / F_1/8 (Sajjadi et al. 2018) as a Metric."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from torch import Tensor

from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.prd import check_beta, check_prd_options, prd_curve_of, prd_f_beta
from lightning_prd.metrics.base import FeatureMetric


class PRDCurve(FeatureMetric):
    """PRD curve of the accumulated features; see :func:`lightning_prd.functional.prd_curve`.

    ``compute()`` returns ``{"prd_precision", "prd_recall"}`` (float64 curves of
    ``num_angles`` points, averaged over ``num_runs`` seeded k-means clusterings) and
    ``{"f_beta", "f_inv_beta"}`` (max F_beta, recall-weighted, and max F_1/beta,
    precision-weighted; F_8 and F_1/8 by default). :meth:`plot` draws the curves.

    Args:
        num_clusters: k-means clusters (histogram bins).
        num_angles: points on the curve, an integer in ``[3, 1e6]``.
        num_runs: clusterings whose curves are averaged.
        seed: seed of the clusterings; equal features and seed give equal results.
        beta: the ``b`` of the F-scores (8 in the paper).
        enforce_balance: ``True`` raises on unequal set sizes, ``'subsample'`` subsamples the
            larger set (seeded), ``False`` clusters the sets as they are.
        kwargs: passed to :class:`~lightning_prd.metrics.base.FeatureMetric`.

    Example:
        >>> import torch
        >>> from lightning_prd.metrics.prd import PRDCurve
        >>> metric = PRDCurve(num_clusters=2, num_runs=2)
        >>> metric.update(torch.cat([torch.zeros(50, 8), torch.full((50, 8), 10.0)]), real=True)
        >>> metric.update(torch.zeros(100, 8), real=False)  # the model drops one of two modes
        >>> out = metric.compute()
        >>> sorted(out), out["prd_precision"].shape
        (['f_beta', 'f_inv_beta', 'prd_precision', 'prd_recall'], torch.Size([1001]))
        >>> round(float(out["f_beta"]), 3), round(float(out["f_inv_beta"]), 3)
        (0.504, 0.985)
    """

    higher_is_better = True
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def __init__(
        self,
        num_clusters: int = 20,
        num_angles: int = 1001,
        num_runs: int = 10,
        seed: int = 0,
        beta: float = 8,
        enforce_balance: Union[bool, str] = True,
        **kwargs: Any,
    ) -> None:
        num_clusters, num_angles, num_runs, seed, enforce_balance = check_prd_options(
            num_clusters, num_angles, num_runs, seed, enforce_balance
        )
        beta = check_beta(beta)
        self.num_clusters, self.num_angles, self.num_runs = num_clusters, num_angles, num_runs
        self.seed, self.beta, self.enforce_balance = seed, beta, enforce_balance
        super().__init__(**kwargs)

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        sets = FeatureSets(real, fake)  # checked batch by batch in update()
        precision, recall = prd_curve_of(
            sets,
            num_clusters=self.num_clusters,
            num_angles=self.num_angles,
            num_runs=self.num_runs,
            seed=self.seed,
            enforce_balance=self.enforce_balance,
        )
        f_beta, f_inv_beta = prd_f_beta(precision, recall, beta=self.beta)
        return {"prd_precision": precision, "prd_recall": recall, "f_beta": f_beta, "f_inv_beta": f_inv_beta}

    def plot(
        self,
        curves: Optional[Union[Dict[str, Tensor], Sequence[Dict[str, Tensor]]]] = None,
        ax: Optional[Any] = None,
        labels: Optional[Sequence[str]] = None,
    ) -> Tuple[Any, Any]:
        """Draw PRD curves: recall on x, precision on y, both axes on [0, 1].

        Args:
            curves: one ``compute()`` result or a list of them, overlaid (None: ``compute()``).
            ax: matplotlib axes to draw into (None: a new 3.5 x 3.5 in figure, not managed
                by ``pyplot``, so figures made during training need no closing).
            labels: one legend label per curve.

        Returns:
            ``(fig, ax)``.
        """
        if curves is None:
            curves = self.compute()
        results: List[Dict[str, Tensor]] = [dict(curves)] if isinstance(curves, Mapping) else list(curves)
        if labels is not None and len(labels) != len(results):
            raise ValueError(f"Expected one label per curve ({len(results)}), but got {len(labels)} labels")
        if ax is None:
            from matplotlib.figure import Figure  # lazy: matplotlib is only needed for plots

            fig = Figure(figsize=(3.5, 3.5), dpi=150, layout="tight")
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        for i, res in enumerate(results):
            label = None if labels is None else labels[i]
            ax.plot(
                res["prd_recall"].cpu().numpy(), res["prd_precision"].cpu().numpy(), alpha=0.5, linewidth=3, label=label
            )
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("Recall")
        ax.set_ylabel("Precision")
        if labels is not None:
            ax.legend(loc="lower left")
        return fig, ax
