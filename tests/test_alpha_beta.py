"""alpha-Precision, beta-Recall, Authenticity and the one-class embedding.

The oracle below is written from the definitions (Alaa et al. 2022 as stated in DESIGN.md),
in float64 NumPy with brute-force distance matrices, independently of the package code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from lightning_prd.functional.alpha_beta import (
    NEVER,
    _integrated,
    alpha_beta_masks,
    alpha_precision_beta_recall,
    authenticity,
)
from lightning_prd.functional.density_coverage import density_coverage
from lightning_prd.functional.engine.oneclass import train_oneclass
from lightning_prd.metrics.alpha_beta import AlphaPrecisionBetaRecall

KEYS = ("alphas", "alpha_precision_curve", "beta_recall_curve", "alpha_precision", "beta_recall", "authenticity")


# --------------------------------------------------------------------------------------
# Independent float64 NumPy oracle
# --------------------------------------------------------------------------------------


def _trapezoid(y, x):
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0)


def oracle(real, fake, *, num_alphas=30, k=5, real_center=None):
    real = np.asarray(real, dtype=np.float64)
    fake = np.asarray(fake, dtype=np.float64)
    alphas = np.linspace(0.0, 1.0, num_alphas)
    c_r = real.mean(0) if real_center is None else np.asarray(real_center, dtype=np.float64)
    c_g = fake.mean(0)
    d_real_cr = np.sqrt(((real - c_r) ** 2).sum(1))
    d_fake_cr = np.sqrt(((fake - c_r) ** 2).sum(1))
    d_fake_cg = np.sqrt(((fake - c_g) ** 2).sum(1))

    rr = ((real[:, None, :] - real[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(rr, np.inf)
    nnd = np.sqrt(np.sort(rr, axis=1))  # column k-1: NND_k, self excluded
    rf = np.sqrt(((real[:, None, :] - fake[None, :, :]) ** 2).sum(-1))  # [N, M]

    r_alpha = np.quantile(d_real_cr, alphas)
    alpha_curve = np.array([np.mean(d_fake_cr <= r) for r in r_alpha])

    r_beta = np.quantile(d_fake_cg, alphas)
    beta_curve = []
    for r in r_beta:
        inside = d_fake_cg <= r  # the generated samples in B(c_g, r_beta)
        recalled = []
        for i in range(real.shape[0]):
            if not inside.any():
                recalled.append(False)
                continue
            nearest = rf[i, inside].min()  # nearest generated sample inside the ball
            recalled.append(nearest <= nnd[i, k - 1])
        beta_curve.append(np.mean(recalled))
    beta_curve = np.array(beta_curve)

    i_star = rf.argmin(0)
    authentic = rf[i_star, np.arange(fake.shape[0])] > nnd[i_star, 0]
    return {
        "alphas": alphas,
        "alpha_precision_curve": alpha_curve,
        "beta_recall_curve": beta_curve,
        "alpha_precision": 1 - 2 * _trapezoid(np.abs(alpha_curve - alphas), alphas),
        "beta_recall": 1 - 2 * _trapezoid(np.abs(beta_curve - alphas), alphas),
        "authenticity": authentic.mean(),
        "authentic": authentic,
        "i_star": i_star,
    }


def _data(n, m, d, seed, shift=0.3, scale=1.2, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    real = torch.randn(n, d, generator=g, dtype=torch.float64)
    fake = torch.randn(m, d, generator=g, dtype=torch.float64) * scale + shift
    return real.to(dtype), fake.to(dtype)


def _assert_matches(out, ref):
    for key in ("alpha_precision_curve", "beta_recall_curve", "authenticity"):
        expected = torch.as_tensor(ref[key], dtype=torch.float64).to(out[key].dtype)  # exact shares, rounded once
        assert torch.equal(out[key], expected), (key, out[key], expected)
    np.testing.assert_allclose(out["alphas"].double().numpy(), ref["alphas"], rtol=0, atol=1e-7)
    for key in ("alpha_precision", "beta_recall"):
        atol = 1e-12 if out[key].dtype == torch.float64 else 1e-6
        np.testing.assert_allclose(float(out[key]), ref[key], rtol=0, atol=atol)


# --------------------------------------------------------------------------------------
# Against the oracle
# --------------------------------------------------------------------------------------


# N - 1 and M - 1 are chosen so no alpha-grid quantile falls exactly on a sample (the
# numpy and torch interpolation formulas may round differently there).
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(
    ("n", "m", "d", "k", "num_alphas"), [(80, 61, 5, 5, 30), (47, 90, 3, 1, 11), (60, 40, 16, 3, 7)]
)
def test_matches_oracle(dtype, n, m, d, k, num_alphas):
    real, fake = _data(n, m, d, seed=n + m, dtype=dtype)
    out = alpha_precision_beta_recall(real, fake, num_alphas=num_alphas, k=k)
    assert set(out) == set(KEYS)
    assert all(out[key].dtype == dtype for key in KEYS)
    assert out["alpha_precision_curve"].shape == (num_alphas,)
    _assert_matches(out, oracle(real.double().numpy(), fake.double().numpy(), num_alphas=num_alphas, k=k))


def test_small_blocks_change_nothing():
    real, fake = _data(70, 55, 6, seed=3)
    a = alpha_precision_beta_recall(real, fake, k=4)
    b = alpha_precision_beta_recall(real, fake, k=4, block_bytes=4096)
    for key in KEYS:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("d", [2, 8])
def test_identical_distributions(d):
    real, fake = _data(1000, 900, d, seed=11, shift=0.0, scale=1.0)
    out = alpha_precision_beta_recall(real, fake)
    assert float(out["alpha_precision"]) > 0.95
    assert float(out["beta_recall_curve"][-1]) > 0.9  # coverage, 1 - 2^-5 in expectation
    assert 0.2 < float(out["authenticity"]) < 1.0
    if d == 2:  # in higher dimension the k-NN balls are wide compared with the spread of
        # ||y - c_g||, so the beta curve rises above the diagonal and the integral drops
        assert float(out["beta_recall"]) > 0.9


def test_copy_of_real_set():
    real, _ = _data(150, 1, 12, seed=5, dtype=torch.float32)
    fake = real.clone()
    out = alpha_precision_beta_recall(real, fake, return_per_sample=True)
    assert float(out["authenticity"]) == 0.0
    assert float(authenticity(real, fake)) == 0.0
    assert not bool(out["authentic"].any())
    assert torch.equal(out["fake_nearest_real"], torch.arange(150))
    assert float(out["alpha_precision"]) > 0.99
    assert float(out["beta_recall_curve"][-1]) == 1.0  # every real ball holds its copy
    assert float(out["alpha_precision_curve"][-1]) == 1.0


def test_half_copied_set():
    real, fresh = _data(80, 40, 5, seed=21, shift=0.0, scale=1.0)
    fake = torch.cat([real[::2], fresh])  # 40 copies of real rows, 40 new samples
    ref = oracle(real.numpy(), fake.numpy())
    out = alpha_precision_beta_recall(real, fake, return_per_sample=True)
    _assert_matches(out, ref)
    assert float(authenticity(real, fake)) == ref["authenticity"]
    assert not bool(out["authentic"][:40].any())
    np.testing.assert_array_equal(out["authentic"].numpy(), ref["authentic"])
    np.testing.assert_array_equal(out["fake_nearest_real"].numpy(), ref["i_star"])
    assert 0.0 < ref["authenticity"] <= 0.5


@pytest.mark.parametrize("k", [1, 3, 5])
def test_beta_one_is_coverage(k):
    real, fake = _data(90, 70, 4, seed=k)
    out = alpha_precision_beta_recall(real, fake, k=k)
    _, coverage = density_coverage(real, fake, k=k)
    assert float(out["beta_recall_curve"][-1]) == float(coverage)


def test_mode_collapse_roles():
    g = torch.Generator().manual_seed(42)
    fake = 0.1 * torch.randn(200, 16, generator=g)
    real = 3.0 * torch.randn(200, 16, generator=g)
    out = alpha_precision_beta_recall(real, fake)
    # every collapsed sample is typical: precision 1 at every alpha (so the curve is far from
    # the diagonal and the integrated score is 0), while only part of the real set is covered
    assert bool((out["alpha_precision_curve"] == 1).all())
    assert float(out["alpha_precision"]) < 0.01
    assert float(out["beta_recall_curve"][-1]) < 0.6
    swapped = alpha_precision_beta_recall(fake, real)
    assert float(swapped["alpha_precision_curve"][-1]) == 0.0


def test_unequal_sizes_and_one_fake():
    real, fake = _data(20, 1, 3, seed=2)
    out = alpha_precision_beta_recall(real, fake, k=2)
    _assert_matches(out, oracle(real.numpy(), fake.numpy(), k=2))


# --------------------------------------------------------------------------------------
# Integration rule
# --------------------------------------------------------------------------------------


def test_trapezoid_integration_on_hand_curves():
    alphas = torch.linspace(0, 1, 30, dtype=torch.float64)
    assert float(_integrated(alphas, alphas.clone())) == 1.0
    assert float(_integrated(alphas, torch.ones_like(alphas))) == pytest.approx(0.0, abs=1e-12)
    assert float(_integrated(alphas, torch.zeros_like(alphas))) == pytest.approx(0.0, abs=1e-12)
    grid = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    # |curve - alpha| = [0.5, 0, 0]: integral 0.125 by the trapezoid rule -> 1 - 0.25
    assert float(_integrated(grid, torch.tensor([0.5, 0.5, 1.0], dtype=torch.float64))) == 0.75
    # the authors' Riemann sum 1 - 2 * sum|.| * d_alpha counts the end point fully: 0.5 here
    riemann = 1 - 2 * float((torch.tensor([0.5, 0.5, 1.0]) - grid.float()).abs().sum()) * 0.5
    assert riemann == 0.5


# --------------------------------------------------------------------------------------
# Sample-level outputs
# --------------------------------------------------------------------------------------


def test_per_sample_outputs_consistent():
    real, fake = _data(80, 61, 5, seed=8)
    out = alpha_precision_beta_recall(real, fake, k=3, return_per_sample=True)
    n, m = real.shape[0], fake.shape[0]
    assert out["authentic"].dtype == torch.bool and out["authentic"].shape == (m,)
    assert out["alpha_typicality"].shape == (m,) and out["recalled_at_beta"].shape == (n,)
    for key in ("alpha_typicality", "recalled_at_beta"):
        v = out[key]
        assert bool(torch.isfinite(v).all())
        assert bool(((v >= 0) & (v <= 1) | (v == NEVER)).all())
    assert float(out["authentic"].double().mean()) == float(out["authenticity"])
    _, coverage = density_coverage(real, fake, k=3)
    assert float((out["recalled_at_beta"] <= 1).double().mean()) == float(coverage)
    for t, level in enumerate(torch.linspace(0, 1, 30, dtype=torch.float64).tolist()):
        masks = alpha_beta_masks(out, alpha=level, beta=level)
        assert float(masks["precise"].double().mean()) == float(out["alpha_precision_curve"][t])
        assert float(masks["recalled"].double().mean()) == float(out["beta_recall_curve"][t])
        assert torch.equal(masks["precise"], out["alpha_typicality"] <= level)
        assert torch.equal(masks["recalled"], out["recalled_at_beta"] <= level)
        assert torch.equal(masks["authentic"], out["authentic"])
    # off-grid levels too
    for level in (0.013, 0.37, 0.999):
        masks = alpha_beta_masks(out, alpha=level, beta=level)
        assert torch.equal(masks["precise"], out["alpha_typicality"] <= level)
        assert torch.equal(masks["recalled"], out["recalled_at_beta"] <= level)
    # outside the whole real support <=> alpha_typicality == NEVER
    r_max = out["real_distance_to_real_center"].max()
    assert torch.equal(out["alpha_typicality"] == NEVER, out["fake_distance_to_real_center"] > r_max)


# --------------------------------------------------------------------------------------
# Embeddings
# --------------------------------------------------------------------------------------


def test_oneclass_deterministic_and_rng_untouched():
    real, _ = _data(300, 1, 16, seed=4, dtype=torch.float32)
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()
    a = train_oneclass(real, rep_dim=8, hidden=32, epochs=3, seed=7)
    b = train_oneclass(real, rep_dim=8, hidden=32, epochs=3, seed=7)
    c = train_oneclass(real, rep_dim=8, hidden=32, epochs=3, seed=8)
    assert torch.equal(torch.random.get_rng_state(), state)
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a(real), c(real))
    assert not a.training and a.center.shape == (8,)
    assert all(not p.requires_grad for p in a.parameters())
    assert all(not (isinstance(m, nn.Linear) and m.bias is not None) for m in a.modules())
    with torch.inference_mode():  # e.g. inside a Lightning validation loop
        d = train_oneclass(real, rep_dim=8, hidden=32, epochs=3, seed=7)
    assert torch.equal(d(real), a(real))


def test_oneclass_pulls_real_towards_center():
    real, _ = _data(400, 1, 16, seed=9, dtype=torch.float32)
    untrained = train_oneclass(real, rep_dim=8, hidden=32, epochs=1, lr=1e-12, seed=0)
    trained = train_oneclass(real, rep_dim=8, hidden=32, epochs=30, seed=0)
    assert torch.equal(untrained.center, trained.center)  # same init, same data-driven centre
    loss = lambda model: float((model(real) - model.center).pow(2).sum(1).mean())  # noqa: E731
    assert loss(trained) < 0.5 * loss(untrained)
    fixed = train_oneclass(real, rep_dim=8, hidden=32, epochs=1, center=10.0)
    assert torch.equal(fixed.center, torch.full((8,), 10.0))


def test_oneclass_embedding_option():
    real, fake = _data(200, 150, 10, seed=13, dtype=torch.float32)
    out = alpha_precision_beta_recall(real, fake, embedding="oneclass")
    for key in ("alpha_precision", "beta_recall", "authenticity"):
        assert 0.0 <= float(out[key]) <= 1.0, key
    for key in ("alpha_precision_curve", "beta_recall_curve"):
        assert bool(((out[key] >= 0) & (out[key] <= 1)).all()), key
    # the same thing, done by hand: train, embed, use the model's centre
    model = train_oneclass(real)
    ref = oracle(model(real).double().numpy(), model(fake).double().numpy(), real_center=model.center.double().numpy())
    _assert_matches(out, ref)


def test_callable_embedding_and_center_attribute():
    real, fake = _data(60, 50, 4, seed=17)
    naive = alpha_precision_beta_recall(real, fake, k=2)
    scaled = alpha_precision_beta_recall(real, fake, k=2, embedding=lambda x: 3.0 * x)
    for key in ("alpha_precision_curve", "beta_recall_curve", "authenticity"):
        assert torch.equal(naive[key], scaled[key]), key
    module = nn.Identity()
    module.center = torch.full((4,), 0.5, dtype=torch.float64)
    out = alpha_precision_beta_recall(real, fake, k=2, embedding=module)
    _assert_matches(out, oracle(real.numpy(), fake.numpy(), k=2, real_center=np.full(4, 0.5)))


# --------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"num_alphas": 1}, ValueError, "`num_alphas`"),
        ({"num_alphas": 2.5}, ValueError, "`num_alphas`"),
        ({"num_alphas": True}, ValueError, "`num_alphas`"),
        ({"k": 0}, ValueError, "`k`"),
        ({"k": 2.0}, ValueError, "`k`"),
        ({"embedding": "svdd"}, ValueError, "`embedding`"),
        ({"embedding": 3}, TypeError, "`embedding`"),
        ({"embedding": lambda x: x[:, 0]}, ValueError, "`embedding`"),
        ({"return_per_sample": 1}, ValueError, "`return_per_sample`"),
        ({"block_bytes": 0}, ValueError, "`block_bytes`"),
        ({"dtype": torch.int32}, ValueError, "`dtype`"),
    ],
)
def test_invalid_arguments(kwargs, err, match):
    real, fake = _data(10, 8, 3, seed=0)
    with pytest.raises(err, match=match):
        alpha_precision_beta_recall(real, fake, **kwargs)


def test_invalid_inputs():
    real, fake = _data(10, 8, 3, seed=0)
    with pytest.raises(ValueError, match="`real`.*k \\+ 1 = 6"):
        alpha_precision_beta_recall(real[:5], fake, k=5)
    alpha_precision_beta_recall(real[:6], fake, k=5)  # k + 1 real samples are enough
    with pytest.raises(ValueError, match="same number of features"):
        alpha_precision_beta_recall(real, fake[:, :2])
    bad = fake.clone()
    bad[0, 0] = math.nan
    with pytest.raises(ValueError, match="`fake`"):
        alpha_precision_beta_recall(real, bad)
    with pytest.raises(ValueError, match="`real`"):
        authenticity(real[:1], fake)
    with pytest.raises(TypeError, match="`fake`"):
        authenticity(real, torch.ones(3, 3, dtype=torch.long))
    out = alpha_precision_beta_recall(real, fake, k=2)
    with pytest.raises(ValueError, match="`result`"):
        alpha_beta_masks(out, alpha=0.5)
    per_sample = alpha_precision_beta_recall(real, fake, k=2, return_per_sample=True)
    with pytest.raises(ValueError, match="`alpha`"):
        alpha_beta_masks(per_sample, alpha=1.5)
    with pytest.raises(ValueError, match="`beta`"):
        alpha_beta_masks(per_sample, beta=-0.1)
    bad_oneclass = [
        ({"rep_dim": 0}, "`rep_dim`"),
        ({"lr": -1.0}, "`lr`"),
        ({"seed": 1.5}, "`seed`"),
        ({"center": "x"}, "`center`"),
    ]
    for kwargs, match in bad_oneclass:
        with pytest.raises(ValueError, match=match):
            train_oneclass(real, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"num_alphas": 0}, ValueError, "`num_alphas`"),
        ({"k": -1}, ValueError, "`k`"),
        ({"embedding": "ones"}, ValueError, "`embedding`"),
        ({"embedding": 1.0}, TypeError, "`embedding`"),
    ],
)
def test_metric_invalid_arguments(kwargs, err, match):
    with pytest.raises(err, match=match):
        AlphaPrecisionBetaRecall(**kwargs)


# --------------------------------------------------------------------------------------
# Metric class
# --------------------------------------------------------------------------------------


def test_metric_batches_equal_functional():
    real, fake = _data(90, 75, 6, seed=30, dtype=torch.float32)
    metric = AlphaPrecisionBetaRecall(num_alphas=20, k=4)
    for chunk in real.split(32):
        metric.update(chunk, real=True)
    for chunk in fake.split(25):
        metric.update(chunk, real=False)
    out = metric.compute()
    ref = alpha_precision_beta_recall(real, fake, num_alphas=20, k=4)
    assert set(out) == set(KEYS)
    for key in KEYS:
        assert torch.equal(out[key], ref[key]), key
    assert metric._real_cache is not None
    # keep the real side, evaluate a second generated set
    metric2 = AlphaPrecisionBetaRecall(num_alphas=20, k=4, reset_real_features=False)
    metric2.update(real, real=True)
    metric2.update(fake, real=False)
    metric2.compute()
    cache = metric2._real_cache
    metric2.reset()
    fake2 = fake[:50] * 0.5
    metric2.update(fake2, real=False)
    out2 = metric2.compute()
    assert metric2._real_cache is cache
    ref2 = alpha_precision_beta_recall(real, fake2, num_alphas=20, k=4)
    for key in KEYS:
        assert torch.equal(out2[key], ref2[key]), key


def test_metric_oneclass_equals_functional():
    real, fake = _data(120, 100, 8, seed=31, dtype=torch.float32)
    metric = AlphaPrecisionBetaRecall(embedding="oneclass")
    metric.update(real[:60], real=True)
    metric.update(real[60:], real=True)
    metric.update(fake, real=False)
    out = metric.compute()
    model = metric._oneclass_cache[1]
    assert metric.compute()["alpha_precision"] == out["alpha_precision"]
    assert metric._oneclass_cache[1] is model  # not retrained for the same real set
    ref = alpha_precision_beta_recall(real, fake, embedding="oneclass")
    for key in KEYS:
        assert torch.equal(out[key], ref[key]), key
    metric.reset()
    assert metric._oneclass_cache is None


def test_metric_plot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    real, fake = _data(40, 30, 3, seed=32, dtype=torch.float32)
    metric = AlphaPrecisionBetaRecall(num_alphas=10, k=3)
    metric.update(real, real=True)
    metric.update(fake, real=False)
    fig, ax = metric.plot()
    assert isinstance(fig, Figure)
    assert len(ax.get_lines()) == 3  # diagonal + two curves
    assert ax.get_xlim() == (0.0, 1.0) and ax.get_ylim() == (0.0, 1.0)
    out = metric.compute()
    fig2, ax2 = metric.plot([out, out])
    assert len(ax2.get_lines()) == 5
    with pytest.raises(ValueError, match="`val`"):
        metric.plot({"alpha_precision": out["alpha_precision"]})
    plt.close("all")
