"""Reading and drawing runs: what ``PRDCallback`` logged, read back from TensorBoard event files and CSV
logs (:mod:`~lightning_prd.runs.reader`), the figures of scores, curves and runs
(:mod:`~lightning_prd.runs.plotting`), which way each score is better (:mod:`~lightning_prd.runs.scores`)
and the runs ranked per score (:mod:`~lightning_prd.runs.ranking`), shared by the logger adapters, the callback
and the command line.

Imports: nothing else of the package (matplotlib and tensorboard are imported when a function needs them).
"""

from lightning_prd.runs.finding import RunsError, find_runs
from lightning_prd.runs.reader import NoScoresError, Run, load_runs, read_run, score_order

__all__ = ["NoScoresError", "Run", "RunsError", "find_runs", "load_runs", "read_run", "score_order"]
