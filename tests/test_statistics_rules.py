"""Statistics files (a mean and a covariance) are checked when read, and the Fréchet distance never reports a
clamped defect (lightning_prd/functional/frechet.py, features/reference_files.py, metrics/generative.py).

Rules: numbers that are no covariance beyond rounding (a negative eigenvalue, asymmetry) are refused when the
file is read, naming it, on every layout that holds statistics; float32 rounding of genuine statistics is
accepted; a width mismatch between a statistics file and the generated features names both widths, the file
and the generator.
"""

from __future__ import annotations

import inspect
import pickle
import warnings

import numpy as np
import pytest
import torch

import lightning_prd.functional.frechet as frechet_module
from lightning_prd import GenerativeMetrics
from lightning_prd.callback import PRDCallback
from lightning_prd.features.reference_files import read_reference
from lightning_prd.functional import frechet_distance
from lightning_prd.functional.engine.families import switch_families
from lightning_prd.functional.frechet import check_statistics, frechet_distance_from_moments, frechet_to_statistics

from tiny_modules import GaussianSampler, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*LeafSpec.*",
    "ignore:.*the trainer has no logger.*",
    "ignore:.*no `validation_step`.*",
    "ignore:.*do not say which network.*",
)

FD_ONLY = dict(
    k_precision_recall=None, k_density_coverage=None, prd=False, alpha_beta=False, probabilistic=False, pr_cover=False
)
NEGATIVE = np.diag([1.0, 1.0, -3.0])  # symmetric, finite, no covariance
#: the same for GenerativeMetrics itself (the callback switches realism and authenticity off for statistics)
METRIC_FD_ONLY = dict(FD_ONLY, realism=False, authenticity=False)
ASYMMETRIC = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def _write(path, layout, mu, sigma):
    """``mu``/``sigma`` in the layout each tool writes (see tests/test_reference_files.py for the sources)."""
    if layout == "fid-stats":  # pytorch-fid --save-stats / clean-fid: np.savez_compressed(mu=, sigma=)
        with open(path, "wb") as f:
            np.savez_compressed(f, mu=mu, sigma=sigma)
    elif layout == "torch-fidelity":  # torch.save({"mu": ..., "sigma": ...}) of numpy arrays
        torch.save({"mu": mu, "sigma": sigma}, path)
    elif layout == "edm2":  # EDM2 reference pickle: {detector: {mu, sigma}, num_images}
        with open(path, "wb") as f:
            pickle.dump({"fid": {"mu": mu, "sigma": sigma}, "num_images": 10}, f)
    else:  # NVlabs FeatureStats fields: get_mean_cov gives raw_cov / N - mean mean^T
        n = 10
        with open(path, "wb") as f:
            raw = (np.asarray(sigma) + np.outer(mu, mu)) * n
            fields = dict(
                capture_all=False, capture_mean_cov=True, num_items=n, raw_mean=np.asarray(mu) * n, raw_cov=raw
            )
            pickle.dump(fields, f)
    return str(path)


# -- rule: statistics that are no covariance are refused when read, naming the file --------------------------


@pytest.mark.parametrize("layout", ["fid-stats", "torch-fidelity", "edm2", "nvlabs"])
@pytest.mark.parametrize("sigma", [NEGATIVE, ASYMMETRIC], ids=["negative-eigenvalue", "asymmetric"])
def test_no_covariance_is_refused_when_the_file_is_read(tmp_path, layout, sigma):
    path = _write(tmp_path / "stats.bin", layout, np.zeros(3), sigma)
    with pytest.raises(ValueError) as info:
        read_reference(path, name="real")
    text = str(info.value)
    assert "\n" not in text and path in text and "`real`" in text
    assert ("eigenvalue -3" in text) if sigma is NEGATIVE else ("not symmetric" in text)


@pytest.mark.parametrize("sigma", [NEGATIVE, ASYMMETRIC], ids=["negative-eigenvalue", "asymmetric"])
def test_the_callback_refuses_such_a_file_at_construction(tmp_path, sigma):
    path = _write(tmp_path / "stats.npz", "fid-stats", np.zeros(3), sigma)
    with pytest.raises(ValueError) as info:
        PRDCallback(path, sample_fn=lambda m, n: torch.randn(n, 3), num_samples=20, metric=FD_ONLY)
    assert path in str(info.value) and "`real`" in str(info.value)


def test_a_negative_eigenvalue_never_scores_on_any_surface():
    cov = torch.from_numpy(NEGATIVE)
    with pytest.raises(ValueError, match="eigenvalue -3"):
        check_statistics(torch.zeros(3), cov, "real")
    metric = GenerativeMetrics(**METRIC_FD_ONLY)
    with pytest.raises(ValueError, match="eigenvalue -3"):
        metric.set_real_statistics(torch.zeros(3), cov, source="stats.npz")
    eye = torch.eye(3, dtype=torch.float64)
    for args, name in (((cov, eye), "cov_r"), ((eye, cov), "cov_f")):
        with pytest.raises(ValueError, match=f"`{name}`.*eigenvalue -3"):
            frechet_distance_from_moments(torch.zeros(3), args[0], torch.zeros(3), args[1])


def test_a_negative_result_beyond_rounding_raises_instead_of_reading_0(monkeypatch):
    """With the input check switched off, the formula's own guard still refuses to clamp a defect to 0."""
    monkeypatch.setattr(frechet_module, "covariance_defect", lambda cov: None, raising=False)
    eye, bad = torch.eye(3, dtype=torch.float64), torch.from_numpy(NEGATIVE)
    with pytest.raises(ValueError, match="at least 0 up to rounding"):
        frechet_distance_from_moments(torch.zeros(3), eye, torch.zeros(3), bad)


# -- what rounding does is accepted ---------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "dim"), [(40, 96), (500, 24)], ids=["rank-deficient", "full-rank"])
def test_float32_rounded_statistics_are_accepted_and_score(tmp_path, n, dim):
    """np.cov of float32 features stored as float32 (as TTUR's precomputed .npz), also with fewer samples
    than features: accepted, and the distance agrees with the one from features."""
    g = np.random.default_rng(5)
    real = np.maximum(g.normal(size=(n, dim)) @ g.normal(size=(dim, dim)) / dim**0.5 + 0.3, 0).astype(np.float32)
    fake = torch.from_numpy(real[: n // 2] * 1.1 + 0.05)
    np.savez(tmp_path / "stats.npz", mu=real.mean(0), sigma=np.cov(real, rowvar=False).astype(np.float32))
    ref = read_reference(tmp_path / "stats.npz")
    got = frechet_to_statistics(ref.mean, ref.cov, fake)
    assert float(got) == pytest.approx(float(frechet_distance(torch.from_numpy(real), fake)), rel=1e-4)


@pytest.mark.parametrize(("n", "dim"), [(30, 200), (300, 64)])
def test_equal_sets_give_0_not_an_error(n, dim):
    """Equal rank-deficient covariances come out slightly below 0 from rounding: that is 0, not a refusal."""
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(1)) + 2.0
    assert float(frechet_distance(x, x)) == pytest.approx(0.0, abs=1e-9 * dim)
    mean, cov = x.double().mean(0), torch.cov(x.double().T)
    assert float(frechet_to_statistics(mean, cov.float().double(), x)) == pytest.approx(0.0, abs=1e-5 * dim)


# -- rule: a width mismatch names both widths, the file and the generator ------------------------------------


def test_a_width_mismatch_names_both_widths_the_file_and_the_generator(tmp_path):
    path = _write(tmp_path / "stats.npz", "fid-stats", np.zeros(4), np.eye(4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cb = PRDCallback(path, sample_fn=lambda m, n: torch.randn(n, 3), num_samples=20, metric=FD_ONLY)
    with pytest.raises(ValueError) as info:
        quiet_trainer(tmp_path, [cb], max_epochs=1).fit(GaussianSampler())
    text = str(info.value)
    assert "\n" not in text and path in text and "`sample_fn`" in text
    assert "the 4 features" in text and "got 3" in text


def test_a_width_mismatch_against_a_features_file_names_both_widths_the_file_and_the_generator(tmp_path):
    path = str(tmp_path / "real_features.npy")
    np.save(path, np.random.default_rng(0).normal(size=(30, 4)).astype(np.float32))
    cb = PRDCallback(path, sample_fn=lambda m, n: torch.randn(n, 3), num_samples=20, log_curves=False)
    with pytest.raises(ValueError) as info:
        quiet_trainer(tmp_path, [cb], max_epochs=1).fit(GaussianSampler())
    text = str(info.value)
    assert "\n" not in text and path in text and "`sample_fn`" in text
    assert "the 4 features of the features" in text and "got 3" in text


def test_the_metrics_width_error_names_the_statistics_it_holds():
    metric = GenerativeMetrics(**METRIC_FD_ONLY)
    metric.set_real_statistics(torch.zeros(4), torch.eye(4), num_samples=50, source="ref.npz (fid-stats)")
    metric.update(torch.randn(10, 3), real=False)
    with pytest.raises(ValueError, match=r"the 4 features of the real statistics, but got 3 .*ref\.npz \(fid-stats\)"):
        metric.compute()


@pytest.mark.parametrize("family", [f for f in switch_families() if not f.statistics], ids=lambda f: f.name)
def test_every_family_a_statistics_file_cannot_serve_is_refused_by_name(family):
    """Each family whose record is not ``statistics`` (the rarity score, the package's and a user's alike) needs
    per-sample real features: asking for it beside real statistics names it, rather than dropping it."""
    mean, cov = torch.zeros(3, dtype=torch.float64), torch.eye(3, dtype=torch.float64)
    off = {
        f.keyword: f.switch_off
        for f in switch_families()
        if f.keyword in inspect.signature(GenerativeMetrics).parameters
    }
    metric = GenerativeMetrics(**{**off, "frechet": True, family.keyword: family.switch_on})
    with pytest.raises(ValueError, match=rf"asks for .*{family.keyword}"):
        metric.set_real_statistics(mean, cov)


def test_rarity_beside_a_statistics_file_is_refused_not_dropped():
    metric = GenerativeMetrics(**METRIC_FD_ONLY, rarity=True)
    with pytest.raises(ValueError, match=r"asks for rarity"):
        metric.set_real_statistics(torch.zeros(3, dtype=torch.float64), torch.eye(3, dtype=torch.float64))
