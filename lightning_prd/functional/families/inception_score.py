"""Family ``inception_score`` (Salimans et al. 2016): ``exp E_x KL(p(y|x) || p(y))`` of the Inception class
posteriors, a score of the ``"fid"`` protocols computed from the extractor's logits by the callback and the
command line (:func:`~lightning_prd.functional.inception_score.inception_score`), not a switch of the feature
metrics."""

from __future__ import annotations

from lightning_prd.functional.engine.families import register_family

register_family(
    "inception_score",
    outputs={"inception_score": "higher"},
    meaning="exp of the mean class-posterior KL",
    docs="protocols.md",
    switchable=False,
    order=120,
    _builtin=True,
)
