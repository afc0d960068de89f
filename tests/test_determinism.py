"""Determinism: seeds, batch sizes, block sizes, and the callback's sampling.

* Same seed -> bit-identical results (PRD k-means, the one-class embedding, and everything
  built on them); different seeds -> different results; the global RNGs are never touched.
* ``Metric.update`` in one batch or in many uneven batches -> every key of ``compute()``
  bit-identical (the metrics concatenate the batches before any arithmetic).
* ``block_bytes`` from 4,096 bytes (tiles of one row) to 1 GiB -> every k-NN score
  bit-identical: each decision is taken in exact float64 near its threshold and ties go to
  the lowest index, so the tile layout cannot change a decision. Two documented exceptions:
  ``realism`` (a continuous score from the float32 GEMM values, equal only to rounding; see
  ``test_knn.py``) and PRD, whose k-means does not use ``block_bytes`` at all but has its own
  row-block budget (``_kmeans.BLOCK_BYTES``): see
  :func:`test_prd_and_kmeans_row_blocks`.
* Two short Lightning runs with the same callback seed log identical scores.
"""

from __future__ import annotations

import csv
import glob
import os
import random
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger

from lightning_prd import (
    AlphaPrecisionBetaRecall,
    DensityCoverage,
    GenerativeMetrics,
    PRDCallback,
    PRDCurve,
    PrecisionRecall,
)
from lightning_prd.functional import alpha_precision_beta_recall, prd_curve
from lightning_prd.functional.engine import kmeans as _kmeans
from lightning_prd.functional.engine.oneclass import train_oneclass

from tiny_modules import TinyTrainable

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*smaller than the logging interval.*",
    "ignore:.*LeafSpec.*",
)

G = torch.Generator().manual_seed(2024)
REAL = torch.randn(150, 6, generator=G)
FAKE = 1.2 * torch.randn(130, 6, generator=G) + 0.1
# small PRD settings (the defaults, 20 clusters x 10 runs x 1001 angles, only cost time)
PRD = dict(num_clusters=8, num_runs=3, num_angles=101)


def _rng_states():
    return torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()


def _assert_rng_unchanged(before):
    after = _rng_states()
    assert torch.equal(before[0], after[0]) and np.array_equal(before[1], after[1]) and before[2] == after[2]


def _assert_same(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for key in a:
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


# --------------------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------------------


def test_prd_curve_seeded_and_global_rng_untouched():
    torch.manual_seed(0)
    before = _rng_states()
    a = prd_curve(REAL, FAKE, seed=3, enforce_balance="subsample", **PRD)
    _assert_rng_unchanged(before)
    torch.manual_seed(99)  # the global RNG state plays no part
    b = prd_curve(REAL, FAKE, seed=3, enforce_balance="subsample", **PRD)
    c = prd_curve(REAL, FAKE, seed=4, enforce_balance="subsample", **PRD)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not (torch.equal(a[0], c[0]) and torch.equal(a[1], c[1]))


def test_prd_metrics_seeded():
    def run(cls, seed, **kw):
        m = cls(**kw, seed=seed) if cls is PRDCurve else cls(**kw, prd=dict(PRD, seed=seed))
        m.update(REAL, real=True)
        m.update(FAKE, real=False)
        before = _rng_states()
        out = m.compute()
        _assert_rng_unchanged(before)
        return out

    for cls, kw in ((PRDCurve, dict(PRD, enforce_balance="subsample")), (GenerativeMetrics, {})):
        a, b, c = run(cls, 5, **kw), run(cls, 5, **kw), run(cls, 6, **kw)
        _assert_same(a, b)
        assert not torch.equal(a["prd_precision"], c["prd_precision"]), cls.__name__
    # the Metric and the functional agree (GenerativeMetrics subsamples unequal sets by default)
    p, r = prd_curve(REAL, FAKE, seed=5, enforce_balance="subsample", **PRD)
    out = run(PRDCurve, 5, **dict(PRD, enforce_balance="subsample"))
    assert torch.equal(out["prd_precision"], p) and torch.equal(out["prd_recall"], r)


def test_train_oneclass_seeded_and_independent_of_global_rng():
    torch.manual_seed(1)
    before = _rng_states()
    a = train_oneclass(REAL, rep_dim=4, hidden=16, epochs=3, batch_size=32, seed=11)
    _assert_rng_unchanged(before)
    torch.manual_seed(2)
    b = train_oneclass(REAL, rep_dim=4, hidden=16, epochs=3, batch_size=32, seed=11)
    c = train_oneclass(REAL, rep_dim=4, hidden=16, epochs=3, batch_size=32, seed=12)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert list(sa) == list(sb) == list(sc)
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name
    assert not all(torch.equal(sa[name], sc[name]) for name in sa)


def test_alpha_beta_oneclass_deterministic():
    torch.manual_seed(3)
    before = _rng_states()
    a = alpha_precision_beta_recall(REAL, FAKE, embedding="oneclass", num_alphas=11)
    _assert_rng_unchanged(before)
    torch.manual_seed(4)
    b = alpha_precision_beta_recall(REAL, FAKE, embedding="oneclass", num_alphas=11)
    _assert_same(a, b)
    # a different seed of the embedding gives a different embedding and different curves
    c = alpha_precision_beta_recall(REAL, FAKE, embedding=train_oneclass(REAL, seed=1), num_alphas=11)
    assert not torch.equal(a["alpha_precision_curve"], c["alpha_precision_curve"])


# --------------------------------------------------------------------------------------
# Batch size
# --------------------------------------------------------------------------------------


def _uneven(x: torch.Tensor, seed: int):
    """Split ``x`` into uneven batches (sizes 1 to 40, a random partition)."""
    g = torch.Generator().manual_seed(seed)
    sizes, left = [], len(x)
    while left:
        sizes.append(min(left, int(torch.randint(1, 41, (1,), generator=g))))
        left -= sizes[-1]
    return list(x.split(sizes))


METRICS = {
    "PrecisionRecall": lambda **kw: PrecisionRecall(**kw),
    "DensityCoverage": lambda **kw: DensityCoverage(**kw),
    "PRDCurve": lambda **kw: PRDCurve(**PRD, enforce_balance="subsample", **kw),
    "AlphaPrecisionBetaRecall": lambda **kw: AlphaPrecisionBetaRecall(num_alphas=11, **kw),
    "AlphaPrecisionBetaRecall-oneclass": lambda **kw: AlphaPrecisionBetaRecall(
        num_alphas=11, embedding="oneclass", **kw
    ),
    "GenerativeMetrics": lambda **kw: GenerativeMetrics(prd=PRD, realism=True, per_sample=True, error_bars=3, **kw),
}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_independent_of_batch_size(name):
    one = METRICS[name]()
    one.update(REAL, real=True)
    one.update(FAKE, real=False)
    many = METRICS[name]()
    real_parts, fake_parts = _uneven(REAL, 0), _uneven(FAKE, 1)
    assert len(real_parts) > 5 and len(set(map(len, real_parts))) > 3
    for i in range(max(len(real_parts), len(fake_parts))):  # real and generated batches interleaved
        if i < len(fake_parts):
            many.update(fake_parts[i], real=False)
        if i < len(real_parts):
            many.update(real_parts[i], real=True)
    _assert_same(one.compute(), many.compute())


# --------------------------------------------------------------------------------------
# Block size
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_independent_of_block_size(name):
    outs = []
    for block_bytes in (4096, 50_000, 2**30):
        m = METRICS[name](block_bytes=block_bytes)
        m.update(REAL, real=True)
        m.update(FAKE, real=False)
        outs.append(m.compute())
    for out in outs[1:]:
        if "realism" in out:  # float32 GEMM values: equal up to rounding only (module docstring)
            torch.testing.assert_close(out.pop("realism"), outs[0]["realism"], rtol=1e-5, atol=0)
        _assert_same({k: v for k, v in outs[0].items() if k != "realism"}, out)


def test_knn_scores_independent_of_block_size_on_hard_data():
    """Offset clusters (float32 rounding dominates the GEMM values), exact copies, duplicates and
    integer-grid ties at once; block sizes from one-row tiles to one tile."""
    g = torch.Generator().manual_seed(8)
    centres = torch.tensor([[1e4] * 8, [-1e4] * 8])
    real = (centres[torch.arange(90) % 2] + 0.02 * torch.randn(90, 8, generator=g)).float()
    real[80:] = real[:10]  # duplicates
    grid = torch.randint(-2, 3, (30, 8), generator=g).float() + 1e3
    real = torch.cat([real, grid])
    fake = torch.cat(
        [
            real[::3].clone(),
            (centres[torch.arange(40) % 2] + 0.02 * torch.randn(40, 8, generator=g)).float(),
            torch.randint(-2, 3, (20, 8), generator=g).float() + 1e3,
        ]
    )
    outs = []
    for block_bytes in (4096, 20_000, 300_000, 2**30):
        m = GenerativeMetrics(prd=False, per_sample=True, error_bars=2, block_bytes=block_bytes)
        m.update(real, real=True)
        m.update(fake, real=False)
        out = m.compute()
        out.pop("realism")
        out["fake_nearest_real"] = alpha_precision_beta_recall(
            real, fake, block_bytes=block_bytes, return_per_sample=True
        )["fake_nearest_real"]
        outs.append(out)
    for out in outs[1:]:
        _assert_same(outs[0], out)


def test_prd_and_kmeans_row_blocks(monkeypatch):
    """PRD and block sizes. ``block_bytes`` of the Metric classes only sizes the k-NN tiles, so PRD
    results are trivially identical across it (asserted in the block-size tests above). k-means has
    its own row-block budget, ``_kmeans.BLOCK_BYTES``: the per-row distances do not depend on it,
    but the centre sums are accumulated block by block, so the float32 centres may differ in the
    last bits between budgets (|diff| <= a few ulp, checked below). The PRD curve depends only on
    the cluster labels (histograms, then float64 arithmetic), so it is bit-identical whenever the
    labels are, i.e. unless a point is equidistant from two centres to within that rounding and the
    runs diverge. That is not guaranteed in general; on this data the labels and curves agree
    exactly for every budget."""
    ref_curve = prd_curve(REAL, FAKE, seed=0, enforce_balance="subsample", **PRD)
    x = torch.cat([REAL, FAKE])
    ref = _kmeans.kmeans(x, 8, seed=0)
    for budget in (4096, 50_000, 2**40):
        monkeypatch.setattr(_kmeans, "BLOCK_BYTES", budget)
        out = _kmeans.kmeans(x, 8, seed=0)
        assert torch.equal(out.labels, ref.labels), budget
        torch.testing.assert_close(out.centers, ref.centers, rtol=1e-5, atol=1e-6)
        curve = prd_curve(REAL, FAKE, seed=0, enforce_balance="subsample", **PRD)
        assert torch.equal(curve[0], ref_curve[0]) and torch.equal(curve[1], ref_curve[1]), budget


# --------------------------------------------------------------------------------------
# The callback's sampling
# --------------------------------------------------------------------------------------

CB_REAL = torch.randn(128, 2, generator=torch.Generator().manual_seed(0))


class Sampler(TinyTrainable):
    def sample(self, n):  # global-RNG noise: the callback's fixed seed makes it reproducible
        return 1.3 * torch.randn(n, 2)


def _run(tmp_path, name, seed):
    cb = PRDCallback(CB_REAL, num_samples=96, batch_size=40, seed=seed, metric=dict(prd=PRD))
    logger = CSVLogger(tmp_path, name=name)
    trainer = pl.Trainer(
        max_epochs=2,
        logger=logger,
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        log_every_n_steps=1,
    )
    torch.manual_seed(seed + 100)  # a different global state in each run: it must not matter
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer.fit(Sampler())
    with open(os.path.join(logger.log_dir, "metrics.csv")) as fh:
        rows = [{k: v for k, v in r.items() if k.startswith("prd/") and v} for r in csv.DictReader(fh)]
    curves = {}
    for path in sorted(glob.glob(os.path.join(logger.log_dir, "*_curves", "*.csv"))):
        with open(path) as fh:
            curves[os.path.relpath(path, logger.log_dir)] = fh.read()
    return cb.history, [r for r in rows if r], curves


def test_callback_same_seed_logs_identical_scores(tmp_path):
    hist_a, rows_a, curves_a = _run(tmp_path, "a", seed=0)
    hist_b, rows_b, curves_b = _run(tmp_path, "b", seed=0)
    assert [h["epoch"] for h in hist_a] == [0, 1] and {"precision", "f_beta", "authenticity"} <= set(hist_a[0])
    assert hist_a == hist_b  # every score, bit for bit (Python floats)
    assert rows_a == rows_b and len(rows_a) == 2  # what the logger wrote
    assert curves_a == curves_b and len(curves_a) == 4  # PRD and alpha/beta curves of both epochs
    hist_c, _, _ = _run(tmp_path, "c", seed=1)
    assert hist_c != hist_a
