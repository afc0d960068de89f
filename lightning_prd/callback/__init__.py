"""``PRDCallback``: precision, recall, density, coverage (and PRD, α/β) of a generator while it trains.

The callback owns the metric (:class:`~lightning_prd.GenerativeMetrics` by default). Every N epochs it
samples the model with fixed, seeded noise, extracts features, computes the scores on every rank (the
metric all-gathers the features), puts the scalars into ``trainer.callback_metrics`` and hands scalars,
curves and figures to one adapter per attached logger (:mod:`lightning_prd.loggers`).

The folder, by file: :mod:`~lightning_prd.callback.pl_callback` (the class users attach, with its full
documentation), :mod:`~lightning_prd.callback.core` (the hooks, the evaluation, the checkpoint state),
:mod:`~lightning_prd.callback.schedule` (which epochs are scored), :mod:`~lightning_prd.callback.real_sources`
(what ``real`` names: samples, a path, the datamodule), :mod:`~lightning_prd.callback.real_side` (the real
set, and the held-out ``test`` set, read, embedded and handed to the metric),
:mod:`~lightning_prd.callback.image_folder` (a folder of real images), :mod:`~lightning_prd.callback.sharding`
(which real rows each rank embeds),
:mod:`~lightning_prd.callback.rng` (the fixed noise, the user's RNG left alone),
:mod:`~lightning_prd.callback.batches` (the generated samples' global batches and their seeds, the extraction
batch, batch sizes halved on out of memory),
:mod:`~lightning_prd.callback.sources` (the generated samples and features, checked, with errors naming
their source), :mod:`~lightning_prd.callback.labels` (class labels for a per-class metric),
:mod:`~lightning_prd.callback.closest_pairs` (the grid of generated samples beside their nearest real ones),
:mod:`~lightning_prd.callback.publish` (scalars, curves and image grids to the adapters),
:mod:`~lightning_prd.callback.report` (the line of scores printed per evaluation),
:mod:`~lightning_prd.callback.refusals` (a refused argument shown first and last when LightningCLI stops on it),
:mod:`~lightning_prd.callback.options` (the arguments, ``sample_fn`` and ``feature_extractor`` by name, the
``metric`` argument) and
:mod:`~lightning_prd.callback.early_stopping` (``PRDEarlyStopping``, whose patience counts evaluations).

Imports: it may use ``metrics``, ``features``, ``loggers``, ``runs``, ``functional`` and
``lightning_prd.samplers``; only the package root, ``lightning_prd.lightning`` and ``sweep`` import it.
"""

from lightning_prd.callback.core import PRDCallbackCore
from lightning_prd.callback.early_stopping import PRDEarlyStopping, PRDEarlyStoppingCore
from lightning_prd.callback.pl_callback import PRDCallback
from lightning_prd.callback.sharding import rank_shard

__all__ = ["PRDCallback", "PRDCallbackCore", "PRDEarlyStopping", "PRDEarlyStoppingCore", "rank_shard"]
