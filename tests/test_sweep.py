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
