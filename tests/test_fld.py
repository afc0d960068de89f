"""FLD against a float64 NumPy oracle that follows the official ``marcojira/fld`` code (``fld/MoG.py``: ``MoG.fit``
with its initialisation, origin component, Adam at 0.5, clamping and early stopping, ``get_dim_adjusted_nlls``;
``fld/metrics/FLD.py``: normalisation by the test set, the baseline, the test / train / gap scores), compared case
by case on the draws our function documents; the official package is not installable here (it pins a CLIP
build from GitHub)."""

import math

import pytest
import torch

from lightning_prd.functional.fld import feature_likelihood_divergence, fld_baseline_nll

import oracle_memorization as om

KEYS = ("fld", "fld_train", "fld_gap", "fld_nll_test", "fld_nll_train", "fld_nll_baseline")


def _documented_draws(num_train, num_fake, gen_size, seed):
    """The generated subset and fit order (one generator), the baseline split and its fit order (another)."""
    g = torch.Generator().manual_seed(seed)
    sub = torch.randperm(num_fake, generator=g)[:gen_size] if num_fake > gen_size else torch.arange(num_fake)
    order = torch.randperm(num_train, generator=g)
    g2 = torch.Generator().manual_seed(seed)
    perm = torch.randperm(num_train, generator=g2)
    split = min(len(sub), num_train // 2)
    border = torch.randperm(num_train - split, generator=g2)
    return sub, order, perm, border


def _sets(rng, n=120, n_test=70, m=90, dim=4):
    train = torch.randn(n, dim, generator=rng, dtype=torch.float64) * 2 + 1
    test = torch.randn(n_test, dim, generator=rng, dtype=torch.float64) * 2 + 1
    fake = torch.randn(m, dim, generator=rng, dtype=torch.float64) * 1.7 + 1.2
    return train, test, fake


@pytest.mark.parametrize(
    "options",
    [dict(seed=0), dict(seed=3, batch_size=50), dict(seed=1, gen_size=60), dict(seed=2, num_epochs=4)],
    ids=["one-batch", "batches", "gen-subset", "few-epochs"],
)
def test_equals_official_oracle(rng, options):
    train, test, fake = _sets(rng)
    ours = feature_likelihood_divergence(train, fake, test, **options)
    sub, order, perm, border = _documented_draws(
        len(train), len(fake), options.get("gen_size", 10_000), options["seed"]
    )
    ref = om.fld(
        train.numpy(),
        test.numpy(),
        fake[sub].numpy(),
        fit_order=order.numpy(),
        baseline_perm=perm.numpy(),
        baseline_order=border.numpy(),
        num_epochs=options.get("num_epochs", 50),
        batch_size=options.get("batch_size", 10_000),
    )
    for key in KEYS:
        assert ours[key].ndim == 0 and ours[key].dtype == torch.float64
        assert float(ours[key]) == pytest.approx(ref[key], rel=1e-8, abs=1e-9), key


def test_float32_features_and_a_copy_in_the_training_set(rng):
    train, test, fake = (x.float() for x in _sets(rng))
    fake[:5] = train[:5]  # distance 0: the bandwidth starts at 1e-3 / D
    ours = feature_likelihood_divergence(train, fake, test, seed=0)
    sub, order, perm, border = _documented_draws(len(train), len(fake), 10_000, 0)
    ref = om.fld(
        *(x.double().numpy() for x in (train, test, fake)),
        fit_order=order.numpy(),
        baseline_perm=perm.numpy(),
        baseline_order=border.numpy(),
    )
    assert float(ours["fld"]) == pytest.approx(ref["fld"], rel=1e-7)
    assert float(ours["fld_gap"]) == pytest.approx(ref["fld_gap"], rel=1e-7)


def test_baseline_can_be_computed_once_and_passed(rng):
    train, test, fake = _sets(rng)
    full = feature_likelihood_divergence(train, fake, test, seed=5)
    base = fld_baseline_nll(train, test, size=len(fake), seed=5)
    assert float(base) == pytest.approx(float(full["fld_nll_baseline"]), rel=1e-12)
    again = feature_likelihood_divergence(train, fake, test, seed=5, baseline_nll=float(base))
    for key in KEYS:
        assert float(again[key]) == pytest.approx(float(full[key]), rel=1e-12, abs=1e-12)
    assert float(feature_likelihood_divergence(train, fake, test, seed=5, baseline_nll=0.0)["fld"]) == pytest.approx(
        100 * float(full["fld_nll_test"])
    )


def test_seeded(rng):
    train, test, fake = _sets(rng)
    a = feature_likelihood_divergence(train, fake, test, seed=9, gen_size=50)
    b = feature_likelihood_divergence(train, fake, test, seed=9, gen_size=50)
    c = feature_likelihood_divergence(train, fake, test, seed=10, gen_size=50)
    assert all(torch.equal(a[k], b[k]) for k in KEYS)
    assert not torch.equal(a["fld"], c["fld"])


def test_lower_for_a_closer_model_and_memorization_shows_in_the_gap():
    g = torch.Generator().manual_seed(0)
    dim = 6
    train, test = torch.randn(150, dim, generator=g), torch.randn(100, dim, generator=g)
    good = torch.randn(120, dim, generator=g)
    worse = torch.randn(120, dim, generator=g) * 0.6 + 0.8
    copies = train[:120] + 0.05 * torch.randn(120, dim, generator=g)
    s_good, s_worse, s_copy = (feature_likelihood_divergence(train, f, test) for f in (good, worse, copies))
    assert float(s_good["fld"]) < float(s_worse["fld"])
    assert abs(float(s_good["fld_gap"])) < 10
    assert float(s_copy["fld_gap"]) < -50  # the training set is far likelier than held-out data
    assert float(s_copy["fld_train"]) < float(s_copy["fld"])
    assert float(s_copy["fld"]) > float(s_good["fld"])


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(gen_size=0), "`gen_size`.*positive integer.*0"),
        (dict(num_epochs=0), "`num_epochs`.*positive integer.*0"),
        (dict(lr=0.0), "`lr`.*positive.*0.0"),
        (dict(batch_size=-1), "`batch_size`.*positive integer.*-1"),
        (dict(baseline_nll=float("nan")), "`baseline_nll`.*finite.*nan"),
        (dict(seed=-1), "`seed`.*-1"),
    ],
)
def test_bad_options(options, match):
    with pytest.raises(ValueError, match=match):
        feature_likelihood_divergence(torch.randn(20, 2), torch.randn(20, 2), torch.randn(20, 2), **options)


def test_bad_sets():
    with pytest.raises(ValueError, match="`test` to vary in every feature.*feature 1"):
        test = torch.randn(20, 3)
        test[:, 1] = 2.0
        feature_likelihood_divergence(torch.randn(20, 3), torch.randn(20, 3), test)
    with pytest.raises(ValueError, match="`test`.*at least 2 samples.*1"):
        feature_likelihood_divergence(torch.randn(20, 3), torch.randn(20, 3), torch.randn(1, 3))
    with pytest.raises(ValueError, match="`real`.*at least 2 samples.*1"):
        feature_likelihood_divergence(torch.randn(1, 3), torch.randn(20, 3), torch.randn(20, 3))
    with pytest.raises(ValueError, match="`test` to have the 3 features of `real`, but got 2"):
        feature_likelihood_divergence(torch.randn(20, 3), torch.randn(20, 3), torch.randn(20, 2))
    with pytest.raises(ValueError, match="`size`.*positive integer.*0"):
        fld_baseline_nll(torch.randn(20, 3), torch.randn(20, 3), size=0)
    assert not math.isnan(float(fld_baseline_nll(torch.randn(20, 3), torch.randn(20, 3), size=5)))
