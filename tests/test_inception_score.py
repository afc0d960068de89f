"""The Inception Score and sFID: a float64 NumPy oracle of Salimans et al.'s score, torch-fidelity's own
``isc_featuresdict_to_metric`` on the same logits (reference venv), torchmetrics' ``InceptionScore`` and how it
differs, a SciPy oracle of the Fréchet distance on 2,023-D spatial features, bad input, and the
``InceptionScore`` Metric alone and under 2-process gloo DDP."""

import pickle

import numpy as np
import pytest
import scipy.linalg
import torch
from torchmetrics.image.inception import InceptionScore as TorchmetricsInceptionScore

from lightning_prd.functional import frechet_distance, inception_score, spatial_frechet_distance
from lightning_prd.metrics import InceptionScore
from lightning_prd.runs.scores import direction

import oracle
from ddp_utils import run_ddp

G = torch.Generator().manual_seed(23)
LOGITS = {n: 3 * torch.randn(n, 1008, generator=G) for n in (1000, 1337)}
CASES = [(1000, 10), (1337, 10), (1337, 3), (1000, 3)]


def oracle_inception_score(logits, splits, shuffle=True, seed=2020):
    """IS from the formula in float64 NumPy: exp(mean_x KL(p(y|x) || p(y))) per part, the parts
    ``[i N // splits, (i + 1) N // splits)`` of the rows permuted by ``RandomState(seed)``; mean, ddof-0 std."""
    x = np.asarray(logits, dtype=np.float64)
    n = x.shape[0]
    if shuffle:
        x = x[np.random.RandomState(seed).permutation(n)]
    z = x - x.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    scores = []
    for i in range(splits):
        part, log_part = p[i * n // splits : (i + 1) * n // splits], log_p[i * n // splits : (i + 1) * n // splits]
        marginal = part.mean(axis=0)
        kl = (part * (log_part - np.log(marginal))).sum(axis=1)
        scores.append(np.exp(kl.mean()))
    return np.mean(scores), np.std(scores)


def _rel(a, b):
    return abs(float(a) / float(b) - 1)


# ------------------------------------------------------------------------- the score itself
@pytest.mark.parametrize("n, splits", CASES)
@pytest.mark.parametrize("shuffle", [True, False])
def test_inception_score_equals_a_numpy_oracle(n, splits, shuffle):
    mean, std = inception_score(LOGITS[n], splits=splits, shuffle=shuffle)
    want_mean, want_std = oracle_inception_score(LOGITS[n].numpy(), splits, shuffle=shuffle)
    assert mean.dtype == std.dtype == torch.float64 and mean.ndim == std.ndim == 0
    assert _rel(mean, want_mean) <= 1e-12 and _rel(std, want_std) <= 1e-10


def test_the_seed_picks_the_permutation():
    x = LOGITS[1337]
    assert float(inception_score(x, seed=7)[0]) == pytest.approx(oracle_inception_score(x.numpy(), 10, seed=7)[0])
    assert float(inception_score(x, seed=7)[0]) != float(inception_score(x, seed=8)[0])


@pytest.mark.parametrize("n, splits", CASES)
def test_inception_score_equals_torch_fidelity_on_the_same_logits(n, splits):
    pytest.importorskip("torch_fidelity", reason="torch-fidelity is a reference-venv test dependency")
    from torch_fidelity.metric_isc import isc_featuresdict_to_metric

    for shuffle, seed in ((True, 2020), (True, 5), (False, 2020)):
        want = isc_featuresdict_to_metric(
            {"logits_unbiased": LOGITS[n]},
            "logits_unbiased",
            isc_splits=splits,
            samples_shuffle=shuffle,
            rng_seed=seed,
            verbose=False,
        )
        mean, std = inception_score(LOGITS[n], splits=splits, shuffle=shuffle, seed=seed)
        assert _rel(mean, want["inception_score_mean"]) <= 1e-12
        assert _rel(std, want["inception_score_std"]) <= 1e-12
    if (n, splits) == (1000, 10):  # its defaults are ours
        want = isc_featuresdict_to_metric({"logits_unbiased": LOGITS[n]}, "logits_unbiased", verbose=False)
        assert _rel(inception_score(LOGITS[n])[0], want["inception_score_mean"]) <= 1e-12


@pytest.mark.filterwarnings("ignore:Metric `InceptionScore` will save all extracted features")
def test_torchmetrics_differs_only_by_its_permutation_chunks_and_std():
    """On logits it permutes with torch's global generator, splits with ``torch.chunk`` and reports the ddof-1
    std: given that permutation, 10 equal parts and float64 logits, its mean is ours and its std ours x sqrt(10/9)."""
    x = LOGITS[1000].double()
    torchmetrics_is = TorchmetricsInceptionScore(feature=torch.nn.Identity(), splits=10)
    torchmetrics_is.update(x)
    torch.manual_seed(4)
    order = torch.randperm(1000)  # the permutation its compute() draws next
    torch.manual_seed(4)
    tm_mean, tm_std = torchmetrics_is.compute()
    mean, std = inception_score(x[order], splits=10, shuffle=False)
    assert _rel(tm_mean, mean) <= 1e-12 and _rel(tm_std, std * (10 / 9) ** 0.5) <= 1e-10


def test_known_values_and_invariances():
    confident = 40 * torch.eye(8).repeat(25, 1)  # 200 samples, each sure of its class, 5 of each class a part
    assert float(inception_score(confident, splits=5, shuffle=False)[0]) == pytest.approx(8.0, rel=1e-12)
    assert float(inception_score(torch.zeros(50, 8), splits=5)[0]) == pytest.approx(1.0, abs=1e-15)
    x = LOGITS[1000].double()
    # a per-row constant leaves the softmax as it is
    shifted = x + 100 * torch.randn(1000, 1, generator=G, dtype=torch.float64)
    assert _rel(inception_score(shifted)[0], inception_score(x)[0]) <= 1e-9
    assert float(inception_score(x.half())[0]) == float(inception_score(x.half().float())[0])


def test_a_class_that_underflows_everywhere_adds_nothing():
    """Its probabilities are 0 in float64 in every row (torch-fidelity: NaN); the score is that without it."""
    x = LOGITS[1000].double()
    with_dead = torch.cat([x, torch.full((1000, 1), -2000.0, dtype=torch.float64)], dim=1)
    mean, std = inception_score(with_dead, splits=4)
    want = inception_score(x, splits=4)
    assert torch.isfinite(mean) and _rel(mean, want[0]) <= 1e-14 and _rel(std, want[1]) <= 1e-12


@pytest.mark.parametrize(
    "logits, options, error, match",
    [
        (torch.randn(20), {}, ValueError, "2-D"),
        (torch.randn(4, 5, 6), {}, ValueError, "2-D"),
        (torch.randn(9, 5), {}, ValueError, r"at least `splits` = 10 samples.*got 9"),
        (torch.randn(2, 5), {"splits": 3}, ValueError, "splits"),
        (torch.tensor([[0.0, float("nan")]] * 12), {}, ValueError, "finite"),
        (torch.tensor([[0.0, float("inf")]] * 12), {}, ValueError, "finite"),
        (torch.ones(12, 5, dtype=torch.long), {}, TypeError, "floating-point"),
        (torch.randn(12, 5), {"splits": 0}, ValueError, "`splits` to be a positive integer, but got 0"),
        (torch.randn(12, 5), {"splits": 2.0}, ValueError, "`splits`"),
        (torch.randn(12, 5), {"shuffle": 1}, ValueError, "`shuffle` to be a bool"),
        (torch.randn(12, 5), {"seed": -1}, ValueError, "`seed`"),
        (torch.randn(12, 5), {"seed": 2**32}, ValueError, "`seed`"),
    ],
)
def test_bad_input_raises(logits, options, error, match):
    with pytest.raises(error, match=match):
        inception_score(logits, **options)


# ------------------------------------------------------------------------- sFID
SPATIAL = 17 * 17 * 7


def oracle_frechet(real, fake):
    """The FID formula in float64 NumPy/SciPy as guided-diffusion's evaluator writes it (``scipy.linalg.sqrtm`` of
    the product, its real part), with float64 means (its means are float32)."""
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    mu1, mu2 = real.mean(0), fake.mean(0)
    s1, s2 = np.cov(real, rowvar=False), np.cov(fake, rowvar=False)
    covmean = scipy.linalg.sqrtm(s1 @ s2)
    assert np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3)
    diff = mu1 - mu2
    return diff @ diff + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean.real)


def _spatial_sets(n, m, dim, seed):
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((dim, dim)) / np.sqrt(dim)  # correlated features, like a conv layer's
    real = np.maximum(rng.standard_normal((n, dim)) @ mix, 0)
    fake = np.maximum((1.1 * rng.standard_normal((m, dim)) + 0.05) @ mix, 0)
    return real, fake


def test_sfid_on_2023_d_spatial_features_equals_a_numpy_oracle():
    """Full-rank covariances, as with guided-diffusion's 50,000 samples; the oracle takes the trace of the root as
    the sum of the square roots of the eigenvalues of the (non-symmetric) product Sr Sf (LAPACK's geev)."""
    real, fake = _spatial_sets(2400, 2100, SPATIAL, seed=0)  # unequal sizes, N and M above D
    got = spatial_frechet_distance(torch.from_numpy(real), torch.from_numpy(fake))
    s1, s2 = np.cov(real, rowvar=False), np.cov(fake, rowvar=False)
    tr_root = np.sqrt(np.linalg.eigvals(s1 @ s2).astype(complex)).real.sum()
    diff = real.mean(0) - fake.mean(0)
    want = diff @ diff + np.trace(s1) + np.trace(s2) - 2 * tr_root
    assert got.dtype == torch.float64 and want > 10
    assert _rel(got, want) <= 1e-9


def test_sfid_is_the_frechet_distance_and_ignores_the_flattening_order():
    """Channels-last (guided-diffusion) and channels-first flattening of [N, 7, 4, 4] maps give one distance."""
    real_maps = torch.randn(150, 7, 4, 4, generator=G, dtype=torch.float64).relu()
    fake_maps = 1.2 * torch.randn(120, 7, 4, 4, generator=G, dtype=torch.float64).relu()
    first = spatial_frechet_distance(real_maps.flatten(1), fake_maps.flatten(1))
    last = spatial_frechet_distance(real_maps.permute(0, 2, 3, 1).flatten(1), fake_maps.permute(0, 2, 3, 1).flatten(1))
    assert float(first) == float(frechet_distance(real_maps.flatten(1), fake_maps.flatten(1)))
    assert _rel(last, first) <= 1e-11
    assert _rel(first, oracle_frechet(real_maps.flatten(1).numpy(), fake_maps.flatten(1).numpy())) <= 1e-10


def test_sfid_with_fewer_samples_than_features():
    """Rank-deficient covariances (an evaluation during training): the trace of the root is the nuclear norm
    of the centred cross products, Xr Xf^T / sqrt((N - 1)(M - 1)) (same nonzero spectrum as Sr Sf)."""
    real, fake = _spatial_sets(90, 70, 175, seed=1)
    want = oracle.frechet_few_samples(real, fake)
    # the ~100 zero eigenvalues of the product come out as rounding noise of size eps * max, and each adds up to
    # sqrt(eps * max) to the trace of the root: ~1e-6 here, 2e-8 of the distance
    assert _rel(spatial_frechet_distance(torch.from_numpy(real), torch.from_numpy(fake)), want) <= 1e-7


def test_sfid_bad_input():
    with pytest.raises(ValueError, match="same number of features"):
        spatial_frechet_distance(torch.randn(10, SPATIAL), torch.randn(10, 2048))
    with pytest.raises(ValueError, match="at least 2 samples"):
        spatial_frechet_distance(torch.randn(1, 7), torch.randn(10, 7))
    with pytest.raises(ValueError, match="finite"):
        spatial_frechet_distance(torch.full((3, 7), float("nan")), torch.randn(10, 7))


def test_directions():
    assert direction("inception_score") == "higher" and direction("prd/sfid") == "lower"


# ------------------------------------------------------------------------- the Metric
@pytest.mark.filterwarnings("ignore:The ``compute`` method of metric InceptionScore was called before")
def test_metric_accumulates_batches_and_equals_the_function():
    x = LOGITS[1337]
    metric = InceptionScore(splits=3)
    for start in range(0, 1337, 400):
        metric.update(x[start : start + 400])
    metric.update(torch.zeros(0, 1008))  # an empty batch adds nothing
    assert metric(x[:0]) is None
    out = metric.compute()
    mean, std = inception_score(x, splits=3)
    assert set(out) == {"inception_score", "inception_score_std"}
    assert float(out["inception_score"]) == float(mean) and float(out["inception_score_std"]) == float(std)
    metric.reset()
    with pytest.raises(ValueError, match="No generated logits accumulated"):
        metric.compute()


def test_metric_runs_an_extractor_and_takes_its_logits_entry():
    weight = torch.randn(16, 1008, generator=G)
    images = torch.randn(60, 16, generator=G)
    metric = InceptionScore(splits=3, feature_extractor=lambda b: {"pool": b, "logits": b @ weight, "spatial": b})
    metric.update(images)
    assert float(metric.compute()["inception_score"]) == float(inception_score(images @ weight, splits=3)[0])
    with pytest.raises(ValueError, match=r"hold 'logits'.*\['pool'\]"):
        InceptionScore(feature_extractor=lambda b: {"pool": b}).update(images)
    with pytest.raises(TypeError, match="`feature_extractor` to be callable"):
        InceptionScore(feature_extractor=3)


def test_metric_rejects_bad_batches_and_keeps_what_it_had():
    metric = InceptionScore(splits=2)
    metric.update(torch.randn(5, 8))
    with pytest.raises(ValueError, match="8 classes"):
        metric.update(torch.randn(5, 9))
    with pytest.raises(ValueError, match="`real` to be False"):
        metric.update(torch.randn(5, 8), real=True)
    with pytest.raises(ValueError, match="finite"):
        metric.update(torch.full((5, 8), float("nan")))
    with pytest.raises(ValueError, match="`splits`"):
        InceptionScore(splits=0)
    assert sum(t.shape[0] for t in metric.fake_logits) == 5
    buffer = torch.randn(5, 8, generator=G)
    metric.update(buffer)
    before = metric.compute()["inception_score"].clone()
    buffer.fill_(0.0)  # the metric keeps its own copy
    assert float(metric.compute()["inception_score"]) == float(before)
    short = InceptionScore(splits=20)
    short.update(torch.randn(10, 8))
    with pytest.raises(ValueError, match="at least `splits` = 20"):
        short.compute()


def test_metric_pickles_with_its_state():
    metric = InceptionScore(splits=3, seed=11)
    metric.update(LOGITS[1000][:300])
    copy = pickle.loads(pickle.dumps(metric))
    assert float(copy.compute()["inception_score"]) == float(inception_score(LOGITS[1000][:300], splits=3, seed=11)[0])


# rank 0 and rank 1 rows of the 1,337 logits: uneven, and one rank without samples
DDP_SPLITS = {"uneven": [(0, 1000), (1000, 1337)], "rank1_idle": [(0, 1337), (1337, 1337)]}


def _ddp_rank(rank, world):
    out = {}
    for name, parts in DDP_SPLITS.items():
        lo, hi = parts[rank]
        metric = InceptionScore(splits=3)
        for start in range(lo, hi, 300):  # several batches per rank
            metric.update(LOGITS[1337][start : min(start + 300, hi)])
        out[name] = {k: v.clone() for k, v in metric.compute().items()}
    return out


def test_ddp_equals_one_process():
    single = InceptionScore(splits=3)
    single.update(LOGITS[1337])
    want = single.compute()
    for per_rank in run_ddp(_ddp_rank):
        for name in DDP_SPLITS:
            for key, value in want.items():  # the gathered logits are one process's, in the same order
                assert float(per_rank[name][key]) == float(value), (name, key)
