"""``InceptionScore``: the Inception Score (Salimans et al. 2016) of accumulated generated logits."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from lightning_prd.functional.engine.inputs import as_features
from lightning_prd.functional.engine.precision import (
    DEFAULT_EXTRACTOR_PRECISION,
    check_extractor_precision,
    precision_context,
    score_precision,
)
from lightning_prd.functional.inception_score import (
    SEED,
    SHUFFLE,
    SPLITS,
    check_inception_score_options,
    check_logits,
    inception_score_summary,
    split_scores,
)
from lightning_prd.metrics.base import check_like_accumulated
from lightning_prd.metrics.gather import gather_features

#: the entry of an extractor's dict output that holds the class logits
LOGITS_KEY = "logits"


class InceptionScore(Metric):
    """Inception Score of the generated samples; see :func:`lightning_prd.functional.inception_score`.

    ``update(logits)`` adds a batch of ``[n, C]`` class logits of generated samples (the TF Inception
    graph's 1,008 logits without the bias for the published score); with ``feature_extractor``,
    ``update(images)`` runs it first and takes its output, or the ``"logits"`` entry of a dict
    output (e.g. ``FIDInceptionFeatures(..., logits=True)``). The score needs no real samples:
    ``update(..., real=True)`` raises. ``compute()`` returns ``{"inception_score",
    "inception_score_std"}`` (float64): the mean over ``splits`` parts and the population standard
    deviation, torch-fidelity's estimator and defaults (``splits=10``, ``shuffle=True``,
    ``seed=2020``).

    Under DDP the state ``fake_logits`` (a list, ``dist_reduce_fx="cat"``) is gathered in rank order
    with :func:`lightning_prd.metrics.gather.gather_features` (ranks with different counts, or none):
    the gathered logits are one process's in the same order, so every rank gets its score.

    Args:
        splits: number of parts the score is averaged over.
        shuffle: permute the samples before splitting (torch-fidelity's order).
        seed: seed of the permutation (NumPy's ``RandomState``, as torch-fidelity).
        feature_extractor: module or callable applied to ``update``'s input (identity if None).
        extractor_precision: the precision ``feature_extractor`` runs in, ``"ieee"`` (default) or ``"fast"``
            (:mod:`lightning_prd.features.precision`).
        kwargs: passed to :class:`torchmetrics.Metric` (``dist_sync_fn`` defaults to the gather above).

    Example:
        >>> import torch
        >>> from lightning_prd.metrics import InceptionScore
        >>> metric = InceptionScore(splits=2, shuffle=False)
        >>> confident = 50 * torch.eye(4)  # each sample sure of its class, every class used
        >>> metric.update(confident)
        >>> metric.update(confident)
        >>> {name: round(float(v), 6) for name, v in metric.compute().items()}
        {'inception_score': 4.0, 'inception_score_std': 0.0}
    """

    fake_logits: Union[List[Tensor], Tensor]

    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    plot_lower_bound = 1.0

    def __init__(
        self,
        splits: int = SPLITS,
        shuffle: bool = SHUFFLE,
        seed: int = SEED,
        feature_extractor: Optional[Callable[[Any], Any]] = None,
        extractor_precision: str = DEFAULT_EXTRACTOR_PRECISION,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("dist_sync_fn", gather_features)
        super().__init__(**kwargs)
        self.splits, self.shuffle, self.seed = check_inception_score_options(splits, shuffle, seed)
        self.extractor_precision = check_extractor_precision(extractor_precision)
        if feature_extractor is not None and not callable(feature_extractor):
            raise TypeError(
                f"Expected argument `feature_extractor` to be callable, but got {type(feature_extractor).__name__}"
            )
        # a module is registered (it moves with the metric's ``.to()``); any other callable is kept as is
        self.feature_extractor = feature_extractor if isinstance(feature_extractor, nn.Module) else None
        self._extract_fn = None if isinstance(feature_extractor, nn.Module) else feature_extractor
        self.add_state("fake_logits", [], dist_reduce_fx="cat")

    def update(self, logits: Any, real: bool = False) -> None:
        """Add a batch of generated samples' logits (passed through ``feature_extractor`` first).

        A rejected batch raises ``ValueError``/``TypeError`` and leaves the accumulated logits untouched;
        the metric keeps its own copy of every batch."""
        if real is not False:
            raise ValueError(
                f"Expected argument `real` to be False (the Inception Score scores generated samples only), "
                f"but got {real!r}"
            )
        extract = self.feature_extractor if self.feature_extractor is not None else self._extract_fn
        if extract is None:
            out = logits
        else:
            with precision_context(self.extractor_precision):
                out = extract(logits)
        if isinstance(out, Mapping):
            if LOGITS_KEY not in out:
                raise ValueError(
                    f"Expected the feature extractor's dict output to hold {LOGITS_KEY!r}, but it holds "
                    f"{sorted(map(str, out))[:8]}; build the extractor with its logits on (e.g. `logits=True`)"
                )
            out = out[LOGITS_KEY]
        batch = as_features(out, "logits", allow_empty=True).detach()
        first = next((t for t in self._batches() if t.shape[0]), None)
        check_like_accumulated(batch, first, name="logits", unit="classes", compute_on_cpu=self.compute_on_cpu)
        if batch.shape[0]:  # an empty batch neither adds samples nor fixes the width
            self.fake_logits = self._batches() + [batch.clone()]

    def forward(self, logits: Any, real: bool = False) -> None:
        """``metric(logits)`` accumulates like :meth:`update` and returns ``None`` (the score of a batch
        alone would be another estimate, on too few samples per part): call :meth:`compute` for it."""
        self.update(logits, real=real)
        self._forward_cache = None
        return None

    def _batches(self) -> List[Tensor]:
        state = self.fake_logits
        return list(state) if isinstance(state, list) else [state]

    def compute(self) -> Dict[str, Tensor]:
        """``{"inception_score", "inception_score_std"}`` of every generated sample accumulated (on every rank)."""
        state = self.fake_logits
        logits = dim_zero_cat(state) if isinstance(state, list) and state else state
        if isinstance(logits, list) or logits.numel() == 0:
            raise ValueError("No generated logits accumulated: call `update(logits)` before `compute()`")
        logits = check_logits(logits, self.splits)
        with score_precision():
            scores = split_scores(logits, splits=self.splits, shuffle=self.shuffle, seed=self.seed)
        mean, std = inception_score_summary(scores)
        return {"inception_score": mean, "inception_score_std": std}

    def plot(self, val: Optional[Any] = None, ax: Optional[Any] = None) -> Any:
        """Plot the scores of one ``compute()`` or their history (a list of ``compute()`` results)."""
        return self._plot(val, ax)
