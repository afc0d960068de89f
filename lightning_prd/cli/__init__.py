"""``lightning-prd``: evaluate saved features or image folders from the command line.

Four subcommands:

* ``lightning-prd evaluate --real PATH --fake PATH``: every score of one generated set against
  the real set, as a table (and ``--json``, ``--plot``).
* ``lightning-prd compare --real PATH --fake PATH [PATH ...]``: one row per generated set,
  curves overlaid.
* ``lightning-prd features --real PATH --extractor NAME --out FILE.npz``: embed a set once and write
  its features with their provenance (:mod:`lightning_prd.cli.features`).
* ``lightning-prd runs DIR [DIR ...]``: the scores ``PRDCallback`` logged for several runs, one
  row per run (:mod:`lightning_prd.cli.runs`).

``PATH`` is a feature file (``.npy``; ``.npz``: ``--key`` or the first array; ``.pt``/``.pth``:
a tensor, or ``--key``/the first tensor of a dict) holding ``[N, D]`` features, or a folder of
PNG/JPEG images (read with Pillow, searched recursively), which needs ``--extractor``.
With ``--extractor`` a file may also hold images ``[N, C, H, W]``. ``--real`` also takes the
reference files of other tools, told apart by content (:mod:`lightning_prd.cli.reference`); a file
of statistics serves ``--only frechet``. ``--protocol NAME`` (``fid``, ``pr50k3``, ``prdc``, ...) sets the
extractor, its preprocessing, k, balls, the scores and the sample counts of a named protocol at once
(:mod:`lightning_prd.cli.protocol`); ``--json`` carries a ``fingerprint`` of what made the scores. Bad input
exits with status 1 and one line on stderr; usage errors (a flag that contradicts ``--protocol`` included)
exit with status 2. Run with ``--help``.

The folder, by file: :mod:`~lightning_prd.cli.parser` (flags and help), :mod:`~lightning_prd.cli.main`
(the entry point), :mod:`~lightning_prd.cli.evaluate` (``evaluate`` and ``compare``),
:mod:`~lightning_prd.cli.features` (``features``), :mod:`~lightning_prd.cli.runs` (``runs``),
:mod:`~lightning_prd.cli.inputs` (reading ``PATH``), :mod:`~lightning_prd.cli.reference` (``--real`` files
of other tools and ``--test``), :mod:`~lightning_prd.cli.labels` (``--real-labels``/``--fake-labels``),
:mod:`~lightning_prd.cli.columns` (the table's columns, their directions, the per-class table),
:mod:`~lightning_prd.cli.protocol` (``--protocol``), :mod:`~lightning_prd.cli.plot` (``--plot``) and
:mod:`~lightning_prd.cli.checks` (output paths, unknown flags). It may import every
other folder of the package; nothing in the package imports it.

Example:
    >>> import numpy as np, tempfile, os
    >>> from lightning_prd.cli import main
    >>> tmp = tempfile.mkdtemp()
    >>> rng = np.random.default_rng(0)
    >>> np.save(os.path.join(tmp, "real.npy"), rng.normal(size=(40, 3)))
    >>> np.save(os.path.join(tmp, "fake.npy"), rng.normal(size=(40, 3)))
    >>> code = main(["evaluate", "--real", os.path.join(tmp, "real.npy"), "--fake", os.path.join(tmp, "fake.npy"),
    ...              "--no-prd", "--no-alpha-beta", "--quiet"])  # doctest: +ELLIPSIS
    real ...
    >>> code
    0
"""

from lightning_prd.cli.main import main
from lightning_prd.cli.parser import build_parser

__all__ = ["build_parser", "main"]
