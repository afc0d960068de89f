"""A real set given as a mean and covariance (a statistics file) serves the Fréchet distance, and only it."""

import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import frechet_distance

from ddp_utils import run_ddp

G = torch.Generator().manual_seed(21)
REAL = torch.randn(300, 5, generator=G) * 1.5 + 0.5
FAKE = torch.randn(240, 5, generator=G)
FD_ONLY = dict(
    k_precision_recall=None,
    k_density_coverage=None,
    realism=False,
    authenticity=False,
    prd=False,
    alpha_beta=False,
    probabilistic=False,
    pr_cover=False,
)


def _stats(x):
    x = x.double()
    return x.mean(0), torch.cov(x.T)  # the unbiased covariance pytorch-fid and clean-fid write


def test_frechet_distance_from_statistics_equals_the_features():
    metric = GenerativeMetrics(**FD_ONLY)
    metric.set_real_statistics(*_stats(REAL), num_samples=300, source="stats.npz")
    metric.update(FAKE[:100], real=False)
    metric.update(FAKE[100:], real=False)
    out = metric.compute()
    assert sorted(out) == ["frechet_distance"]
    assert float(out["frechet_distance"]) == pytest.approx(float(frechet_distance(REAL, FAKE)), rel=1e-10)


def test_a_metric_asking_for_more_is_refused_naming_what_it_asks():
    with pytest.raises(
        ValueError,
        match=r"stats\.npz \(300 samples\).*k_precision_recall, k_density_coverage, probabilistic, pr_cover, prd",
    ):
        GenerativeMetrics(preset="training").set_real_statistics(*_stats(REAL), num_samples=300, source="stats.npz")
    with pytest.raises(ValueError, match="asks for vendi"):
        GenerativeMetrics(**FD_ONLY, frechet=False, vendi=True).set_real_statistics(*_stats(REAL))


@pytest.mark.parametrize(
    "mean, cov, match",
    [
        (torch.zeros(5), torch.zeros(4, 4), r"shapes \(5,\) and \(4, 4\)"),
        (torch.full((5,), float("nan")), torch.eye(5), "finite"),
        (torch.zeros(5), torch.triu(torch.ones(5, 5)), "symmetric"),
    ],
)
def test_bad_statistics_are_refused(mean, cov, match):
    metric = GenerativeMetrics(**FD_ONLY)
    with pytest.raises(ValueError, match=match):
        metric.set_real_statistics(mean, cov)


def test_statistics_follow_reset_real_features_and_exclude_real_features():
    kept = GenerativeMetrics(**FD_ONLY, reset_real_features=False)
    kept.set_real_statistics(*_stats(REAL))
    kept.update(FAKE, real=False)
    first = kept.compute()
    kept.reset()
    kept.update(FAKE, real=False)
    assert torch.equal(kept.compute()["frechet_distance"], first["frechet_distance"])

    fresh = GenerativeMetrics(**FD_ONLY)
    fresh.set_real_statistics(*_stats(REAL))
    fresh.reset()
    fresh.update(FAKE, real=False)
    with pytest.raises(ValueError, match="No real features accumulated"):
        fresh.compute()

    both = GenerativeMetrics(**FD_ONLY)
    both.set_real_statistics(*_stats(REAL))
    both.update(REAL, real=True)
    both.update(FAKE, real=False)
    with pytest.raises(ValueError, match="either real features or real statistics"):
        both.compute()


def test_width_mismatch_names_both():
    metric = GenerativeMetrics(**FD_ONLY)
    metric.set_real_statistics(*_stats(REAL))
    metric.update(FAKE[:, :3], real=False)
    with pytest.raises(ValueError, match="the 5 features of the real statistics, but got 3"):
        metric.compute()


def _ranks(rank, world):
    metric = GenerativeMetrics(**FD_ONLY)
    metric.set_real_statistics(*_stats(REAL))
    metric.update(FAKE[:70] if rank == 0 else FAKE[70:], real=False)
    return metric.compute()["frechet_distance"]


def test_ddp_equals_one_process():
    single = GenerativeMetrics(**FD_ONLY)
    single.set_real_statistics(*_stats(REAL))
    single.update(FAKE, real=False)
    want = single.compute()["frechet_distance"]
    assert [float(v) for v in run_ddp(_ranks)] == [float(want)] * 2
