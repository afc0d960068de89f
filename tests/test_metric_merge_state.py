"""``merge_state`` on the package's metrics: a metric merged after ``compute()`` scores the merged sets.

torchmetrics keeps the result of ``compute()`` until the next ``update``; a merge is no ``update``, so without
forgetting that result the merged metric would return the scores of its own sets. The reference is one metric
fed both sets, in the order ``merge_state`` concatenates them (the incoming rows first).
"""

from __future__ import annotations

import pytest
import torch

from lightning_prd import GenerativeMetrics

REAL = torch.randn(60, 3, generator=torch.Generator().manual_seed(0))
FAKE_A = 0.3 * torch.randn(40, 3, generator=torch.Generator().manual_seed(1))  # collapsed: low recall, coverage
FAKE_B = 2.0 * torch.randn(40, 3, generator=torch.Generator().manual_seed(2)) + 1.0  # spread out and shifted


def _metric(*batches):
    metric = GenerativeMetrics()
    for features, real in batches:
        metric.update(features, real=real)
    return metric


def _floats(scores):
    return {name: value.tolist() for name, value in scores.items()}


@pytest.mark.parametrize("incoming", ["metric", "dict"])
def test_merge_after_compute_scores_the_merged_sets(incoming):
    first = _metric((REAL, True), (FAKE_A, False))
    other = _metric((FAKE_B, False))
    alone = _floats(first.compute())
    first.merge_state(other if incoming == "metric" else other.metric_state)
    merged = _floats(first.compute())
    assert merged == _floats(_metric((REAL, True), (FAKE_B, False), (FAKE_A, False)).compute())
    both = _floats(_metric((REAL, True), (FAKE_A, False), (FAKE_B, False)).compute())
    assert merged.keys() == both.keys()
    for name in merged:  # the order of the generated rows changes no scalar score beyond rounding
        if not isinstance(merged[name], list):  # (per-sample scores follow the rows' order)
            assert merged[name] == pytest.approx(both[name], rel=1e-5, abs=1e-6), name
    assert merged["coverage"] != alone["coverage"] and merged["frechet_distance"] != alone["frechet_distance"]


def test_a_fresh_metric_merged_with_a_filled_one_counts_its_updates():
    filled = _metric((REAL, True), (FAKE_A, False))
    fresh = GenerativeMetrics()
    fresh.merge_state(filled)
    assert fresh.update_count == filled.update_count == 2
    assert _floats(fresh.compute()) == _floats(filled.compute())
