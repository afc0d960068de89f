"""``AlphaPrecisionBetaRecall``: alpha-Precision, beta-Recall and Authenticity (Alaa et al. 2022)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

from torch import Tensor

from lightning_prd.functional.alpha_beta import alpha_beta_from_sets, check_num_alphas
from lightning_prd.functional.engine.inputs import check_min_samples, check_positive_int, same_features
from lightning_prd.functional.engine.oneclass import check_embedding, embed_features, embedding_center, train_oneclass
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.metrics.base import FeatureMetric

_CURVE_KEYS = ("alphas", "alpha_precision_curve", "beta_recall_curve")


class AlphaPrecisionBetaRecall(FeatureMetric):
    """alpha-Precision / beta-Recall curves, their integrated scores and Authenticity.

    See :func:`lightning_prd.functional.alpha_precision_beta_recall` for the definitions and
    how they differ from the authors' code and synthcity. ``compute()`` returns ``alphas``,
    ``alpha_precision_curve``, ``beta_recall_curve`` (``[num_alphas]``), ``alpha_precision``,
    ``beta_recall`` (integrated, 1 is best) and ``authenticity``. Per-sample outputs are not
    returned here; call the functional with ``return_per_sample=True`` for audits.

    With ``embedding=None`` the real k-NN radii are cached (and kept across resets with
    ``reset_real_features=False``); with ``embedding="oneclass"`` the trained one-class
    embedding is kept as long as the real features do not change.

    Args:
        num_alphas: points of the alpha (= beta) grid ``linspace(0, 1, num_alphas)``, at least 2.
        k: neighbourhood size of beta-recall's real balls (5; beta = 1 is then coverage).
        embedding: None (naive mode), ``"oneclass"`` (Deep SVDD embedding trained on the real
            features, seed 0; it overfits small real sets, see the note of
            :func:`~lightning_prd.functional.engine.oneclass.train_oneclass`), or a module/callable
            mapping features to embeddings, e.g. a one-class model trained on a held-out real
            split (its ``center`` attribute, if any, is the real centre).
        kwargs: see :class:`~lightning_prd.metrics.base.FeatureMetric`.

    Example:
        >>> import torch
        >>> from lightning_prd.metrics.alpha_beta import AlphaPrecisionBetaRecall
        >>> metric = AlphaPrecisionBetaRecall(num_alphas=5, k=2)
        >>> metric.update(torch.arange(8.0)[:, None], real=True)
        >>> metric.update(torch.tensor([[3.25], [4.0], [5.5], [9.0]]), real=False)
        >>> out = metric.compute()
        >>> out["alpha_precision_curve"].tolist()
        [0.5, 0.5, 0.75, 0.75, 0.75]
        >>> [float(out[n]) for n in ("alpha_precision", "beta_recall", "authenticity")]
        [0.5625, 0.625, 0.25]
    """

    higher_is_better = True
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def __init__(self, num_alphas: int = 30, k: int = 5, embedding: Optional[Any] = None, **kwargs: Any) -> None:
        self.num_alphas = check_num_alphas(num_alphas)
        self.k = check_positive_int(k, "k")
        embedding = check_embedding(embedding)
        super().__init__(**kwargs)
        self.embedding = embedding
        self._oneclass_cache: Optional[Tuple[Tensor, Any]] = None

    def _embedding_for(self, real: Tensor) -> Any:
        """The embedding to apply: the user's, a (cached) one-class model, or None."""
        if not isinstance(self.embedding, str):
            return self.embedding
        cache = self._oneclass_cache
        if cache is not None and same_features(cache[0], real):
            return cache[1]
        model = train_oneclass(real)
        self._oneclass_cache = (real, model)
        return model

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        sets = FeatureSets(real, fake)  # checked batch by batch in update()
        check_min_samples(sets.real, self.k, "real")
        fn = self._embedding_for(sets.real)
        centre = None
        if fn is not None:
            real_e, fake_e = embed_features(fn, sets.real, "real"), embed_features(fn, sets.fake, "fake")
            centre = embedding_center(fn, real_e)
            sets = FeatureSets(real_e, fake_e)  # the embedding's outputs, each checked by embed_features
        out, res = alpha_beta_from_sets(
            sets,
            num_alphas=self.num_alphas,
            k=self.k,
            real_center=centre,
            dtype=self.knn_dtype,
            block_bytes=self.block_bytes,
            real_cache=self.real_side(sets.real),
            shard=self.knn_shard(),
        )
        self._real_cache = res.real
        return out

    def reset(self) -> None:
        """Clear the features; the one-class model goes with the real features."""
        if self.reset_real_features:
            self._oneclass_cache = None
        super().reset()

    def plot(
        self, val: Optional[Union[Dict[str, Tensor], Sequence[Dict[str, Tensor]]]] = None, ax: Optional[Any] = None
    ) -> Tuple[Any, Any]:
        """Draw the alpha-precision and beta-recall curves against the diagonal (the ideal).

        Args:
            val: a ``compute()`` result, a list of them (one pair of curves each, later ones
                darker), or None to call ``compute()``.
            ax: matplotlib axes to draw on (a new figure if None).

        Returns:
            ``(fig, ax)``.
        """
        import matplotlib.pyplot as plt  # lazy: matplotlib is only needed for plots

        vals = [self.compute()] if val is None else ([val] if isinstance(val, dict) else list(val))
        if not vals or any(not isinstance(v, dict) or any(key not in v for key in _CURVE_KEYS) for v in vals):
            raise ValueError(
                f"Expected argument `val` to be a `compute()` result (a dict with {_CURVE_KEYS}) or a list of them"
            )
        fig, ax = plt.subplots() if ax is None else (ax.figure, ax)
        ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="ideal")
        for i, v in enumerate(vals):
            shade = (i + 1) / len(vals)
            suffix = f" ({i})" if len(vals) > 1 else ""
            alphas = v["alphas"].detach().cpu().float()
            for key, score, colour, name in (
                ("alpha_precision_curve", "alpha_precision", "tab:blue", "α-precision"),
                ("beta_recall_curve", "beta_recall", "tab:orange", "β-recall"),
            ):
                label = f"{name}{suffix}"
                if score in v:
                    label += f" = {float(v[score]):.3f}"
                curve = v[key].detach().cpu().float()
                ax.plot(alphas, curve, color=colour, alpha=0.25 + 0.75 * shade, marker=".", label=label)
        ax.set_xlim(0.0, 1.0)
        ax.set_ylim(0.0, 1.0)
        ax.set_xlabel("α (β)")
        ax.set_ylabel("share of samples")
        ax.set_aspect("equal")
        ax.legend(loc="lower right", fontsize="small")
        return fig, ax
