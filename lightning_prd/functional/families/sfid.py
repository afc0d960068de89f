"""Family ``sfid`` (Nash et al. 2021): the Fréchet distance of Inception's spatial features (``mixed_6/conv``), a
score of the ``"fid"`` protocols computed from the extractor's spatial features by the callback and the command
line (:func:`~lightning_prd.functional.sfid.spatial_frechet_distance`), not a switch of the feature metrics."""

from __future__ import annotations

from lightning_prd.functional.engine.families import register_family

register_family(
    "sfid",
    outputs={"sfid": "lower"},
    meaning="Fréchet distance of Inception's spatial features",
    docs="protocols.md",
    switchable=False,
    order=110,
    _builtin=True,
)
