"""Inputs are checked once: each public entry point converts and validates its two sets one time and hands
the checked form (``FeatureSets``) down; nothing below validates them again.

A profiler hook (``sys.setprofile``) counts the calls of the validation functions of
``lightning_prd.functional.engine.inputs`` during one call, and who made them.
"""

from __future__ import annotations

import collections
import sys
from typing import Callable, Counter, Dict

import pytest
import torch

import lightning_prd.functional.engine.inputs as inputs
from lightning_prd import GenerativeMetrics
from lightning_prd.functional import (
    alpha_precision_beta_recall,
    authenticity,
    density_coverage,
    frechet_distance,
    generative_metrics,
    prd_curve,
    precision_recall,
)

#: conversion and validation of a whole set (as_features, check_pair) and the one pass over a set's values
#: that the range checks need (column_bounds)
WATCHED = ("as_features", "check_pair", "column_bounds", "value_range", "non_finite_rows")


def _on_inputs(frame) -> bool:
    """Whether a call's arguments hold one of the input sets ``REAL``/``FAKE`` (their memory, not a copy)."""
    inputs_at = {REAL.untyped_storage().data_ptr(), FAKE.untyped_storage().data_ptr()}
    args = list(frame.f_locals.values())
    while args:
        value = args.pop()
        if isinstance(value, (tuple, list)):
            args.extend(value)
        elif isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in inputs_at:
            return True
    return False


def _count(fn: Callable[[], object], only_inputs: bool = False) -> Dict[str, Counter[str]]:
    """Calls of each watched function during ``fn()``, by calling module and function; with ``only_inputs``
    only the calls on the input sets themselves (not on data derived from them, e.g. TopP&R's projection)."""
    calls: Dict[str, Counter[str]] = {name: collections.Counter() for name in WATCHED}

    def hook(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename == inputs.__file__ and code.co_name in calls:
            if only_inputs and not _on_inputs(frame):
                return
            caller = frame.f_back.f_code
            calls[code.co_name][f"{caller.co_filename.rsplit('lightning_prd', 1)[-1]}:{caller.co_name}"] += 1

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(previous)
    return calls


def _totals(calls: Dict[str, Counter[str]]) -> Dict[str, int]:
    return {name: sum(c.values()) for name, c in calls.items()}


g = torch.Generator().manual_seed(3)
REAL, FAKE = torch.randn(300, 12, generator=g), torch.randn(240, 12, generator=g) + 0.3


def test_the_counter_sees_the_calls():
    # the hook itself: a direct call is counted, with its caller; a call on other data only without only_inputs
    calls = _count(lambda: inputs.as_features(REAL, "real"))
    assert _totals(calls)["as_features"] == 1 and _totals(calls)["non_finite_rows"] == 1
    assert _totals(_count(lambda: inputs.value_range(REAL[:3]), only_inputs=True))["value_range"] == 1  # a view
    assert _totals(_count(lambda: inputs.value_range(REAL * 2), only_inputs=True))["value_range"] == 0


def test_generative_metrics_checks_each_set_once():
    """The issue's call: the k-NN pass, PRD (with its subsampling of the larger set), α/β and Fréchet."""
    calls = _count(lambda: generative_metrics(REAL, FAKE, prd=True, alpha_beta=True, frechet=True))
    totals = _totals(calls)
    assert totals["as_features"] == 2, calls["as_features"]  # one per set
    assert totals["non_finite_rows"] == 2, calls["non_finite_rows"]
    assert totals["check_pair"] == 1, calls["check_pair"]
    assert totals["column_bounds"] == 2, calls["column_bounds"]  # one range pass per set
    assert totals["value_range"] == 0, calls["value_range"]


@pytest.mark.parametrize(
    "call",
    [
        lambda: precision_recall(REAL, FAKE),
        lambda: density_coverage(REAL, FAKE),
        lambda: authenticity(REAL, FAKE),
        lambda: frechet_distance(REAL, FAKE),
        lambda: prd_curve(REAL, FAKE, num_runs=2, enforce_balance="subsample"),
        lambda: alpha_precision_beta_recall(REAL, FAKE),
        lambda: generative_metrics(REAL, FAKE, kid=dict(subset_size=100, subsets=5), vendi=True, top_pr=True),
    ],
    ids=["precision_recall", "density_coverage", "authenticity", "frechet", "prd", "alpha_beta", "kid_vendi_top_pr"],
)
def test_each_family_checks_each_set_once(call):
    totals = _totals(_count(call, only_inputs=True))
    assert totals["as_features"] == 2 and totals["check_pair"] == 1, totals
    assert totals["column_bounds"] <= 2 and totals["value_range"] == 0, totals


def test_metric_compute_does_not_check_again():
    """``update`` checks each batch; ``compute`` hands the accumulated sets to the core as they are."""
    metric = GenerativeMetrics(prd=True, alpha_beta=True)
    for part in (REAL[:150], REAL[150:]):
        metric.update(part, real=True)
    metric.update(FAKE, real=False)
    totals = _totals(_count(metric.compute))
    assert totals["as_features"] == 0 and totals["check_pair"] == 0, totals
    assert totals["column_bounds"] == 2 and totals["value_range"] == 0, totals
