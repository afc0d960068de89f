"""The machinery below the metric families: checked inputs (:mod:`~lightning_prd.functional.engine.inputs`),
the one shared k-NN pass (:mod:`~lightning_prd.functional.engine.one_pass`) and its request
(:mod:`~lightning_prd.functional.engine.request`), the score-family registry
(:mod:`~lightning_prd.functional.engine.families`), the plan of a ``generative_metrics`` call
(:mod:`~lightning_prd.functional.engine.plan`), float64 statistics
(:mod:`~lightning_prd.functional.engine.stats`), k-means (:mod:`~lightning_prd.functional.engine.kmeans`)
and the one-class embedding (:mod:`~lightning_prd.functional.engine.oneclass`).

Nothing here is public API: the families at the top of :mod:`lightning_prd.functional` are.
Imports: :mod:`lightning_prd.functional.knn` (the only place that forms distances) and, for the registry
only, the families' records (:mod:`lightning_prd.functional.families`, on first use); never ``metrics``,
``callback``, ``loggers``, ``features`` or ``cli``.
"""
