"""One table of which way each score is better serves the CLI, the run comparison, the loggers and
early stopping, including the held-out scores (0 is ideal for C_T and the FLD gap; diagnostics rank nothing)."""

import pytest

from lightning_prd.callback.early_stopping import mode_for
from lightning_prd.cli.columns import best, better
from lightning_prd.runs.plotting import how_to_read
from lightning_prd.scores import DIRECTIONS, best_index, direction, direction_label


def test_held_out_scores_have_their_directions():
    assert direction("prd/ct") == "zero" and direction("fld_gap") == "zero"
    assert direction("ct_cells") == "none" and direction("fld_nll_baseline") == "none"
    assert direction("frechet_distance_infinity") == "lower" and direction("authenticity_percentage") == "higher"
    assert direction_label("ct") == "0 is ideal" and direction_label("fld_train") == "-"
    assert how_to_read("prd/ct") == "0 is ideal" and how_to_read("ct_cells") == "a diagnostic"


def test_best_is_closest_to_zero_or_none():
    assert best_index("ct", [-4.2, 0.3, 1.1]) == 1
    assert best_index("fld_gap", [2.0, -0.5, float("nan")]) == 1
    assert best_index("ct_cells", [3, 2, 1]) is None
    assert best_index("density", [0.5, 1.2, 0.95]) == 2


def test_the_cli_columns_follow_the_same_table():
    for name in DIRECTIONS:
        assert better(name) == direction_label(name)
        assert best(name, [0.2, -0.1, 1.3]) == best_index(name, [0.2, -0.1, 1.3])


@pytest.mark.parametrize("name, why", [("prd/ct", "best at 0"), ("prd/ct_cells", "diagnostic")])
def test_early_stopping_needs_a_mode_for_scores_without_a_side(name, why):
    with pytest.raises(ValueError, match=why):
        mode_for(name)
    assert mode_for("prd/fld") == "min" and mode_for("prd/frechet_distance_infinity") == "min"
