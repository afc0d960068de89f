"""``sweep_knob`` / ``plot_sweep`` on a 2-D Gaussian toy generator: ``generate(scale, n) = scale * randn``
against real N(0, I). Shrinking the scale trades recall for precision."""

import pytest
import torch
from torch import nn

from lightning_prd import GenerativeMetrics, PrecisionRecall
from lightning_prd.functional import density_coverage, precision_recall
from lightning_prd.sweep import SweepResult, plot_sweep, sweep_knob

SCALES = [0.25, 0.5, 1.0, 2.0, 3.0]


def toy_generate(scale, n):
    return scale * torch.randn(n, 2)


@pytest.fixture(scope="module")
def real():
    return torch.randn(400, 2, generator=torch.Generator().manual_seed(1234))


@pytest.fixture(scope="module")
def result(real):
    return sweep_knob(toy_generate, real, SCALES, num_samples=400, seed=0)


def test_precision_rises_and_recall_falls_as_scale_shrinks(result):
    precision, recall = result["precision"], result["recall"]
    assert result.values == SCALES and len(precision) == len(recall) == len(SCALES)
    for i in range(len(SCALES) - 1):  # monotone up to sampling noise
        assert precision[i] >= precision[i + 1] - 0.03
        assert recall[i] <= recall[i + 1] + 0.03
    assert precision[0] - precision[-1] > 0.3
    assert recall[-1] - recall[0] > 0.4
    assert set(result.scores) >= {"precision", "recall", "density", "coverage", "frechet_distance"}


def test_scores_equal_functional_on_the_same_samples(real, result):
    torch.manual_seed(0)  # sweep_knob seeds the RNG with `seed` before each generate call
    fake = toy_generate(SCALES[1], 400)
    p, r = precision_recall(real, fake, k=3)
    d, c = density_coverage(real, fake, k=5)
    for name, want in (("precision", p), ("recall", r), ("density", d), ("coverage", c)):
        assert result[name][1] == pytest.approx(float(want), abs=1e-6)


def test_result_views(result):
    rows = result.rows()
    assert [row["value"] for row in rows] == SCALES and rows[0]["precision"] == result["precision"][0]
    as_dict = result.as_dict()
    assert as_dict["values"] == SCALES and as_dict["num_samples"] == 400 and as_dict["num_real"] == 400
    with pytest.raises(KeyError, match="available"):
        result["nope"]


def test_plot_returns_figure_with_annotated_points(result):
    fig = plot_sweep(result, knob="σ=")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "recall" and ax.get_ylabel() == "precision"
    assert [t.get_text() for t in ax.texts] == ["σ=0.25", "σ=0.5", "σ=1", "σ=2", "σ=3"]
    fig2 = plot_sweep(result.as_dict(), ax=ax, x="coverage", y="density", label="toy")
    assert fig2 is fig and len(ax.lines) == 2
    with pytest.raises(ValueError, match="score"):
        plot_sweep(SweepResult(values=[1], scores={"precision": [1.0]}))


def test_extractor_metric_factory_and_loader(real):
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(real), batch_size=64)
    double = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        double.weight.copy_(2 * torch.eye(2))
    res = sweep_knob(
        toy_generate,
        loader,
        [0.5, 1.0],
        num_samples=100,
        feature_extractor=double,
        metric_factory=lambda: PrecisionRecall(k=3),
        seed=1,
    )
    assert set(res.scores) == {"precision", "recall"}
    torch.manual_seed(1)
    fake = toy_generate(1.0, 100)
    p, r = precision_recall(2 * real, 2 * fake, k=3)  # the metric re-adds the real side after each reset
    assert res["precision"][1] == pytest.approx(float(p), abs=1e-6) and res["recall"][1] == pytest.approx(
        float(r), abs=1e-6
    )


def test_real_side_is_reused(real, monkeypatch):
    calls = []
    original = GenerativeMetrics.update

    def spy(self, features, real):
        calls.append(real)
        return original(self, features, real)

    monkeypatch.setattr(GenerativeMetrics, "update", spy)
    sweep_knob(toy_generate, real, [0.5, 1.0, 2.0], num_samples=50)
    assert calls == [True, False, False, False]


def test_bad_arguments(real):
    with pytest.raises(TypeError, match="generate"):
        sweep_knob(None, real, [1.0], num_samples=10)
    with pytest.raises(ValueError, match="values"):
        sweep_knob(toy_generate, real, [], num_samples=10)
    with pytest.raises(ValueError, match="num_samples"):
        sweep_knob(toy_generate, real, [1.0], num_samples=0)
    with pytest.raises(ValueError, match="return 10 samples"):
        sweep_knob(lambda v, n: torch.randn(n + 1, 2), real, [1.0], num_samples=10)
    with pytest.raises(TypeError, match="metric_factory"):
        sweep_knob(toy_generate, real, [1.0], num_samples=10, metric_factory=3)


# --- the Pareto front of a sweep -------------------------------------------------------------------


def _brute_front(xs, ys, maximize=(True, True)):
    """Indices no other point dominates (>= on both oriented scores, > on one), by increasing x: O(n^2)."""
    s = [1 if m else -1 for m in maximize]
    front = [
        i
        for i in range(len(xs))
        if not any(
            s[0] * xs[j] >= s[0] * xs[i]
            and s[1] * ys[j] >= s[1] * ys[i]
            and (s[0] * xs[j] > s[0] * xs[i] or s[1] * ys[j] > s[1] * ys[i])
            for j in range(len(xs))
        )
    ]
    return sorted(front, key=lambda i: (xs[i], i))


def _front_artists(ax):
    lines = [c for c in ax.collections if c.get_gid() == "pareto_front"]
    rings = [c for c in ax.collections if c.get_gid() == "pareto_front_points"]
    return lines, rings


def test_result_holds_the_precision_recall_front(result):
    assert result.front_axes == ("recall", "precision") and result.front_maximize == (True, True)
    assert result.front == _brute_front(result["recall"], result["precision"])
    assert result.pareto_front() == result.front
    # lower is better for the Fréchet distance
    want = _brute_front(result["coverage"], result["frechet_distance"], (True, False))
    assert result.pareto_front("coverage", "frechet_distance", maximize=(True, False)) == want
    as_dict = result.as_dict()
    assert as_dict["front"] == result.front and as_dict["front_axes"] == ["recall", "precision"]


def test_front_of_any_two_scores(real):
    res = sweep_knob(
        toy_generate,
        real,
        [0.5, 1.0, 2.0],
        num_samples=100,
        front=("coverage", "frechet_distance"),
        maximize=(True, False),
    )
    assert res.front_axes == ("coverage", "frechet_distance") and res.front_maximize == (True, False)
    assert res.front == _brute_front(res["coverage"], res["frechet_distance"], (True, False))


def test_front_on_a_sweep_with_a_dominated_value():
    scores = {"precision": [0.9, 0.6, 0.7, 0.7, 0.2], "recall": [0.3, 0.5, 0.6, 0.6, 0.6]}
    res = SweepResult(values=[0.5, 0.7, 1.0, 1.0, 2.0], scores=scores)
    # 0.7 is beaten by 1.0 on both; 2.0 ties 1.0 on recall and is worse on precision; the 1.0 duplicates stay
    assert res.pareto_front() == [0, 2, 3] == _brute_front(scores["recall"], scores["precision"])


def test_front_missing_scores(real):
    from lightning_prd import FrechetDistance

    calls = []

    def generate(scale, n):
        calls.append(scale)
        return toy_generate(scale, n)

    # the default front on a metric without recall/precision: no front
    res = sweep_knob(toy_generate, real, [0.5, 1.0], num_samples=50, metric_factory=FrechetDistance)
    assert res.front is None and set(res.scores) == {"frechet_distance"}
    # a front asked for by name fails after the first value, naming the argument
    with pytest.raises(ValueError, match=r"`front` to name two of the sweep's scores, but \['kid'\] is not among"):
        sweep_knob(generate, real, [0.5, 1.0, 2.0], num_samples=50, front=("kid", "recall"))
    assert calls == [0.5]
    for bad in ("recall", ("recall",), ("recall", 3)):
        with pytest.raises(ValueError, match="`front` to be a pair of score names"):
            sweep_knob(toy_generate, real, [1.0], num_samples=10, front=bad)
    with pytest.raises(ValueError, match="`maximize` to be a pair of bools"):
        sweep_knob(toy_generate, real, [1.0], num_samples=10, maximize=(1, 1))


def test_plot_marks_the_front():
    scores = {
        "precision": [0.9, 0.6, 0.7, 0.2],
        "recall": [0.3, 0.5, 0.6, 0.6],
        "frechet_distance": [5.0, 1.0, 3.0, 2.0],
    }
    res = SweepResult(values=[0.5, 0.7, 1.0, 2.0], scores=scores)
    fig = plot_sweep(res, knob="ψ=")
    ax = fig.axes[0]
    (line,), (rings,) = _front_artists(ax)
    want = _brute_front(scores["recall"], scores["precision"])  # [0, 2]
    points = [[scores["recall"][i], scores["precision"][i]] for i in want]
    assert line.get_segments()[0].tolist() == points and rings.get_offsets().tolist() == points
    assert line.get_label() == "Pareto front"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["Pareto front"]
    assert len(ax.lines) == 1 and len(ax.texts) == 4  # the path and its value labels are unchanged
    # lower is better on y: the directions change the front
    fig = plot_sweep(res, x="recall", y="frechet_distance", maximize=(True, False), label="toy")
    (line,), _ = _front_artists(fig.axes[0])
    want = _brute_front(scores["recall"], scores["frechet_distance"], (True, False))  # [1, 3]
    assert line.get_segments()[0].tolist() == [[scores["recall"][i], scores["frechet_distance"][i]] for i in want]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["toy", "toy: Pareto front"]
    # the stored directions are used for the stored axes, from the dict form too
    stored = SweepResult(values=res.values, scores=scores, front_axes=("recall", "frechet_distance"))
    stored.front_maximize = (True, False)
    (line,), _ = _front_artists(plot_sweep(stored.as_dict(), x="recall", y="frechet_distance").axes[0])
    assert len(line.get_segments()[0]) == len(want)
    assert _front_artists(plot_sweep(res, front=False).axes[0]) == ([], [])
    with pytest.raises(ValueError, match="`front` to be a bool"):
        plot_sweep(res, front="yes")
