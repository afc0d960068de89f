"""Sanity checks of every score (Räisä et al., ICML 2025; ``tests/sanity_suite.py``).

Two kinds of test. The outcome of every check on every score equals the committed table of
``docs/sanity-checks.md`` (written by ``docs/scripts/sanity_checks.py`` from the same runs), so a change in a
score's behaviour, or a table left stale, fails here. Independently of that table, the measured responses show
the behaviours the package's documents promise (matched sets score near the ideal, coverage falls as modes are
dropped, a translation of both sets leaves k-NN decisions unchanged, a copy has zero authenticity, ...), and the
criteria themselves tell a passing response from a failing one.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import sanity_suite as suite

PAGE = Path(__file__).resolve().parents[1] / "docs" / "sanity-checks.md"
RERUN = "rerun `python docs/scripts/sanity_checks.py` and commit docs/sanity-checks.md"


@pytest.fixture(scope="module")
def results():
    return suite.outcomes()


@pytest.fixture(scope="module")
def committed():
    return suite.parse_matrix(PAGE.read_text(encoding="utf-8"))


def _steps(code, series=""):
    """The scores at each step of a setting's sweep, keyed by the swept value."""
    setting = suite.SETTINGS[code]
    with suite.one_thread():
        runs = suite.run_setting(code)[series]
    return dict(zip(setting.values, runs))


# ---------------------------------------------------------------- the committed table


def test_every_score_has_a_registered_kind():
    unknown = [name for name in suite.score_names() if suite.kind_of(name) == suite.UNKNOWN]
    assert not unknown, f"add a line to sanity_suite.KINDS for {unknown}"


def test_the_page_lists_every_check_and_every_score(committed):
    assert {code for code, _ in committed} == set(suite.CHECKS), RERUN
    assert {name for _, name in committed} == set(suite.score_names()), RERUN


@pytest.mark.parametrize("code", list(suite.CHECKS))
def test_outcomes_equal_the_committed_table(code, results, committed):
    changed = {
        name: f"page {committed.get((code, name))}, run {results[code, name][0]} ({results[code, name][1]})"
        for name in suite.score_names()
        if committed.get((code, name)) != results[code, name][0]
    }
    assert not changed, f"{code}: {changed}; {RERUN}"


# ---------------------------------------------------------------- what the documents promise, measured


def test_matched_distributions_score_near_the_ideal():
    # docs/metrics/index.md: density is 1 when Q = P; coverage of matched sets is about 1 - 2^-k (Naeem et al.)
    matched = _steps("MS")[0.0]
    assert matched["precision"] >= 0.8 and matched["recall"] >= 0.8
    assert abs(matched["density"] - 1) <= 0.1
    assert matched["coverage"] >= 0.9
    assert matched["frechet_distance"] <= 0.05 * _steps("MS")[3.0]["frechet_distance"]


def test_coverage_falls_as_modes_are_dropped_and_precision_stays():
    # the seed note: a collapsed model keeps precision and loses recall and coverage
    steps = _steps("SQ")
    coverage = [steps[j]["coverage"] for j in sorted(steps)]
    recall = [steps[j]["recall"] for j in sorted(steps)]
    precision = [steps[j]["precision"] for j in sorted(steps)]
    assert all(b < a for a, b in zip(coverage, coverage[1:])), coverage
    assert all(b < a for a, b in zip(recall, recall[1:])), recall
    assert 0.1 <= coverage[-1] <= 0.3, coverage  # one of five modes left: a fifth of the real balls
    assert max(precision) - min(precision) <= 0.1, precision


def test_translating_both_sets_leaves_knn_decisions_unchanged():
    # docs/guarantees.md: scores do not depend on a rigid motion of both sets (decisions)
    steps = list(_steps("TR").values())
    exact = ["precision", "recall", "density", "coverage", "realism_share", "authenticity"]
    exact += ["precision_cover", "recall_cover", "alpha_precision", "beta_recall"]
    for name in exact:
        assert len({step[name] for step in steps}) == 1, (name, [step[name] for step in steps])
    for name in ("frechet_distance", "p_precision", "p_recall", "cmmd"):
        first = steps[0][name]
        assert all(abs(step[name] - first) <= 1e-9 * max(1.0, abs(first)) for step in steps), name


def test_roles_narrow_and_wide_models():
    # the roles guard of DESIGN.md: a collapsed model has high precision and low recall, a spread-out one the reverse
    steps = _steps("SD")
    assert steps[0.1]["precision"] >= 0.9 and steps[0.1]["recall"] <= 0.1
    assert steps[10.0]["precision"] <= 0.1 and steps[10.0]["recall"] >= 0.9


def test_the_frechet_distance_blind_spot():
    # the seed note's two-Gaussians table: N(0, 0.3² I) and N(0, 1.7² I) share a Fréchet distance (2(1 - s)² per
    # dimension in the limit) while precision and recall tell them apart
    steps = _steps("SD")
    narrow, wide = steps[0.3], steps[1.7]
    fd = narrow["frechet_distance"], wide["frechet_distance"]
    assert abs(fd[0] - fd[1]) <= 0.15 * (fd[0] + fd[1]) / 2, fd
    assert abs(fd[0] - suite.D * 0.49) <= 0.15 * suite.D * 0.49, fd
    assert narrow["precision"] - wide["precision"] >= 0.3
    assert wide["recall"] - narrow["recall"] >= 0.3


def test_a_copy_of_the_real_set_has_zero_authenticity():
    # DESIGN.md: a copy of the training set scores 0
    steps = _steps("CP")
    assert steps[1.0]["authenticity"] == 0.0
    assert steps[0.0]["authenticity"] >= 0.3


def test_shares_stay_in_the_unit_interval():
    shares = ["precision", "recall", "coverage", "p_precision", "p_recall", "precision_cover", "recall_cover"]
    shares += ["realism_share", "authenticity"]
    with suite.one_thread():
        values = [
            (code, name, step[name])
            for code in suite.SETTINGS
            for series in suite.SETTINGS[code].series
            for step in suite.run_setting(code)[series]
            for name in shares
        ]
    outside = [v for v in values if not (0 <= v[2] <= 1)]
    assert not outside, outside
    assert all(step["frechet_distance"] >= 0 for step in _steps("MS").values())


# ---------------------------------------------------------------- the criteria tell pass from fail


def _sweep(ys, xs=None, distance=False):
    xs = tuple(float(x) for x in (xs or range(len(ys))))
    raw = tuple(float(y) for y in ys)
    if distance:
        top = max(abs(v) for v in raw)
        return suite.Sweep("x", xs, tuple(1 - v / top for v in raw), raw, True)
    return suite.Sweep("x", xs, raw, raw)


@pytest.mark.parametrize(
    "criterion, passing, failing",
    [
        (suite.at(0, 1.0), [0.96, 0.5], [0.94, 0.5]),
        (suite.at(0, 1.0), [0.95, 0.5], [1.051, 0.5]),  # inclusive: 0.95 is within 0.05 of 1
        (suite.at(suite.LAST, 0.2), [0.9, 0.22], [0.9, 0.3]),
        (suite.either(0), [0.02, 0.5], [0.5, 0.5]),
        (suite.high_to_low(), [1.0, 0.8, 0.5, 0.0], [1.0, 1.0, 0.9, 0.85]),
        (suite.high_to_low(), [1.0, 0.8, 0.5, 0.0], [0.5, 1.0, 0.5, 0.0]),  # the start is not near the maximum
        (suite.low_to_high(), [0.0, 0.5, 1.0], [1.0, 0.5, 0.0]),
        (suite.bell(2), [0.0, 0.5, 1.0, 0.5, 0.0], [0.0, 0.5, 0.8, 1.0, 1.0]),
        (suite.flat(), [0.5, 0.52, 0.49], [0.5, 0.6, 0.5]),
        (suite.converges(), [0.9, 0.6, 0.5, 0.52], [0.9, 0.6, 0.5, 0.4]),
        (suite.mid_drop(2), [1.0, 0.9, 0.7, 0.2, 0.0], [1.0, 1.0, 0.95, 0.9, 0.0]),
        (suite.drop_between(1, 0), [0.5, 1.0], [0.9, 1.0]),
        (suite.unchanged(), [0.3, 0.3, 0.3], [0.3, 0.3, 0.301]),
        (suite.within(0, 1), [0.0, 1.0], [0.0, 1.2]),
        (suite.every(1.0), [1.0, 0.97, 1.02], [1.0, 0.9, 1.0]),
    ],
)
def test_a_criterion_passes_and_fails(criterion, passing, failing):
    assert criterion(_sweep(passing))[0]
    assert not criterion(_sweep(failing))[0]


def test_a_distance_is_read_against_its_own_scale():
    # a valley at the matched point passes even when one side grows far faster than the other
    assert suite.bell(2)(_sweep([7.0, 4.0, 0.1, 4.0, 700.0], distance=True))[0]
    assert not suite.bell(2)(_sweep([7.0, 4.0, 5.0, 4.0, 700.0], distance=True))[0]
    assert suite.at(0, 1.0)(_sweep([0.1, 50.0], distance=True))[0]  # 0.2% of the largest
    assert not suite.at(0, 1.0)(_sweep([10.0, 50.0], distance=True))[0]


def test_a_missing_value_fails_with_a_reason():
    ok, why = suite.high_to_low()(_sweep([1.0, math.nan, 0.0]))
    assert not ok and "not computed" in why
