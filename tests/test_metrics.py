"""Metric classes: accumulation, validation that keeps state, real-side cache, collections."""

import copy
import pickle

import pytest
import torch
from torchmetrics import MetricCollection

import lightning_prd.functional.knn as knn
from lightning_prd import DensityCoverage, FrechetDistance, GenerativeMetrics, PrecisionRecall
from lightning_prd.functional import density_coverage, frechet_distance, precision_recall, realism_score


@pytest.fixture
def data(rng):
    return torch.randn(130, 6, generator=rng), 1.2 * torch.randn(110, 6, generator=rng)


def _feed(metric, real, fake, batch):
    for s in range(0, len(real), batch):
        metric.update(real[s : s + batch], real=True)
    for s in range(0, len(fake), batch):
        metric.update(fake[s : s + batch], real=False)


@pytest.mark.parametrize("batch", [7, 50, 1000])
def test_batches_equal_functional(batch, data):
    real, fake = data
    m = GenerativeMetrics(realism=True)
    _feed(m, real, fake, batch)
    out = m.compute()
    p, r = precision_recall(real, fake, k=3)
    d, c = density_coverage(real, fake, k=5)
    assert [float(out[n]) for n in ("precision", "recall", "density", "coverage")] == [
        float(p),
        float(r),
        float(d),
        float(c),
    ]
    assert float(out["frechet_distance"]) == pytest.approx(float(frechet_distance(real, fake)), rel=1e-12)
    torch.testing.assert_close(out["realism"], realism_score(real, fake, k=3))


def test_single_metrics_and_collection(data):
    real, fake = data
    coll = MetricCollection([PrecisionRecall(), DensityCoverage(), FrechetDistance()])
    _feed(coll, real, fake, 40)
    out = coll.compute()
    assert set(out) == {"precision", "recall", "density", "coverage", "frechet_distance"}
    assert float(out["precision"]) == float(precision_recall(real, fake)[0])
    assert float(out["coverage"]) == float(density_coverage(real, fake)[1])


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        (torch.randn(5, 7), ValueError, "6 features"),
        (torch.randn(5), ValueError, "2-D"),
        (torch.full((3, 6), float("nan")), ValueError, "finite"),
        (torch.ones(3, 6, dtype=torch.long), TypeError, "floating-point"),
    ],
)
def test_rejected_update_keeps_state(bad, exc, match, data):
    real, fake = data
    m = PrecisionRecall()
    _feed(m, real, fake, 1000)
    with pytest.raises(exc, match=match):
        m.update(bad, real=False)
    out = m.compute()
    assert float(out["precision"]) == float(precision_recall(real, fake)[0])


def test_real_flag_must_be_bool(data):
    m = PrecisionRecall()
    with pytest.raises(TypeError, match="`real`"):
        m.update(data[0], real=torch.tensor(1))


def test_compute_with_nothing_raises():
    m = DensityCoverage()
    m.update(torch.randn(10, 3), real=True)
    with pytest.raises(ValueError, match="No fake features"):
        m.compute()


def test_too_few_samples_for_k():
    m = PrecisionRecall(k=3)
    m.update(torch.randn(3, 2), real=True)
    m.update(torch.randn(10, 2), real=False)
    with pytest.raises(ValueError, match="at least k \\+ 1 = 4"):
        m.compute()


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3"])
def test_invalid_k(k):
    with pytest.raises(ValueError, match="`k` to be a positive integer"):
        PrecisionRecall(k=k)
    with pytest.raises(ValueError, match="`k` to be a positive integer"):
        precision_recall(torch.randn(10, 2), torch.randn(10, 2), k=k)


def test_half_precision_is_upcast(data):
    real, fake = data
    m = PrecisionRecall()
    _feed(m, real.half(), fake.bfloat16(), 1000)
    out = m.compute()
    assert float(out["precision"]) == float(precision_recall(real.half().float(), fake.bfloat16().float())[0])


def test_reset_real_features_false_keeps_features_and_radii(data, monkeypatch):
    real, fake = data
    m = GenerativeMetrics(reset_real_features=False)
    _feed(m, real, fake, 1000)
    first = m.compute()
    calls = []
    orig = knn.self_radii
    monkeypatch.setattr(knn, "self_radii", lambda *a, **kw: calls.append(a[0]) or orig(*a, **kw))
    m.reset()
    m.update(fake, real=False)
    second = m.compute()
    assert float(second["coverage"]) == float(first["coverage"])
    assert len(calls) == 1  # only the fake radii: real radii came from the cache
    fake2 = fake + 0.5
    m.reset()
    m.update(fake2, real=False)
    assert float(m.compute()["coverage"]) == float(density_coverage(real, fake2)[1])


def test_reset_real_features_true_clears(data):
    real, fake = data
    m = PrecisionRecall()
    _feed(m, real, fake, 1000)
    m.compute()
    m.reset()
    assert m.real_features == [] and m._real_cache is None
    m.update(fake, real=False)
    with pytest.raises(ValueError, match="No real features"):
        m.compute()


def test_cache_is_invalidated_when_real_set_changes(data):
    real, fake = data
    m = DensityCoverage(reset_real_features=False)
    _feed(m, real, fake, 1000)
    m.compute()
    m.update(real[:20] + 3.0, real=True)  # the real set grows: cached radii no longer apply
    expected = density_coverage(torch.cat([real, real[:20] + 3.0]), fake)
    out = m.compute()
    assert float(out["density"]) == float(expected[0]) and float(out["coverage"]) == float(expected[1])


def test_pickle_deepcopy_and_merge_state(data):
    real, fake = data
    a = PrecisionRecall()
    a.update(real[:60], real=True)
    a.update(fake[:50], real=False)
    b = pickle.loads(pickle.dumps(a))
    c = copy.deepcopy(a)
    c.reset()
    c.update(real[60:], real=True)
    c.update(fake[50:], real=False)
    b.merge_state(c)
    assert float(b.compute()["recall"]) == float(precision_recall(real, fake)[1])


def test_feature_extractor_is_applied(data):
    real, fake = data
    m = DensityCoverage(feature_extractor=lambda x: x[:, :3] * 2)
    _feed(m, real, fake, 1000)
    assert float(m.compute()["coverage"]) == float(density_coverage(real[:, :3] * 2, fake[:, :3] * 2)[1])
    assert isinstance(m.feature_extractor, torch.nn.Module)  # FeatureShare expects a module


def test_plot(data):
    real, fake = data
    m = PrecisionRecall()
    _feed(m, real, fake, 1000)
    fig, ax = m.plot()
    assert fig is not None
    fig, ax = m.plot([m.compute(), m.compute()])  # a history
    assert fig is not None


def test_generative_error_bars_and_per_sample(data):
    from lightning_prd.functional.uncertainty import score_spread

    real, fake = data
    m = GenerativeMetrics(error_bars=3, per_sample=True, prd=False)
    _feed(m, real, fake, 1000)
    out = m.compute()
    ref = score_spread(real, fake, num_splits=3)
    for name in ("precision", "recall", "density", "coverage"):
        assert float(out[f"{name}_std"]) == pytest.approx(float(ref[name]["std"]), abs=1e-7)
    assert out["realism"].shape == (110,) and out["inside_precision"].shape == (110,) and out["covered"].shape == (130,)
    assert float(out["inside_precision"].float().mean()) == float(out["precision"])  # float32 scores
    assert float(out["covered"].float().mean()) == float(out["coverage"])
    with pytest.raises(ValueError, match="error_bars"):
        GenerativeMetrics(error_bars=1)


def test_feature_share_runs_the_extractor_once_per_batch(data):
    from torchmetrics.wrappers import FeatureShare

    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x[:, :4] * 2

    real, fake = data
    net = Counting()
    shared = FeatureShare([PrecisionRecall(feature_extractor=net), DensityCoverage(feature_extractor=net)])
    shared.update(real, real=True)
    shared.update(fake, real=False)
    out = shared.compute()
    assert net.calls == 2  # one forward per batch, shared by both metrics
    assert float(out["precision"]) == float(precision_recall(real[:, :4] * 2, fake[:, :4] * 2)[0])
    assert float(out["coverage"]) == float(density_coverage(real[:, :4] * 2, fake[:, :4] * 2)[1])
