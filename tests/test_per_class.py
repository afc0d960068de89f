"""``per_class_metrics`` on a conditional toy whose model drops one class.

Four classes around far-apart centres in 6-D (labels 0, 2, 5, 7, uneven sizes); the model draws
classes 0, 2 and 5 and never class 7, and draws one class (9) that the data lack. Each class's
scores are checked against ``generative_metrics`` called on that class's rows and against the
float64 NumPy oracles of ``tests/oracle.py``; the means against means of those oracle values.
"""

import math

import numpy as np
import pytest
import torch

from lightning_prd.functional import density_coverage, frechet_distance, generative_metrics
from lightning_prd.functional.per_class import per_class_metrics, per_class_scalars

import oracle

SCORES = ("precision", "recall", "density", "coverage", "frechet_distance")
REAL_SIZES = {0: 50, 2: 40, 5: 60, 7: 45}
FAKE_SIZES = {0: 55, 2: 35, 5: 60, 9: 20}  # class 7 dropped, class 9 invented


def _toy(sizes, seed, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    centres = {c: torch.full((6,), 12.0 * i) for i, c in enumerate(sorted(set(REAL_SIZES) | set(FAKE_SIZES)))}
    feats = torch.cat(
        [centres[c] + shift + torch.randn(n, 6, generator=g, dtype=torch.float64) for c, n in sizes.items()]
    )
    labels = torch.cat([torch.full((n,), c, dtype=torch.long) for c, n in sizes.items()])
    perm = torch.randperm(len(labels), generator=g)  # classes interleaved, not in blocks
    return feats[perm], labels[perm]


@pytest.fixture(scope="module")
def toy():
    real, real_labels = _toy(REAL_SIZES, 0)
    fake, fake_labels = _toy(FAKE_SIZES, 1, shift=0.2)
    return real, real_labels, fake, fake_labels


@pytest.fixture(scope="module")
def out(toy):
    real, real_labels, fake, fake_labels = toy
    return per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels)


def test_dropped_class_has_zero_coverage_and_is_named(out):
    classes = out["classes"].tolist()
    assert classes == [0, 2, 5, 7, 9]
    c7 = classes.index(7)
    assert out["coverage_per_class"][c7] == 0 and out["recall_per_class"][c7] == 0
    assert math.isnan(out["precision_per_class"][c7]) and math.isnan(out["density_per_class"][c7])
    assert math.isnan(out["frechet_distance_per_class"][c7])
    assert int(out["lowest_coverage_class"]) == 7 and float(out["coverage_min"]) == 0
    assert out["lowest_coverage_class"].dtype == torch.int64
    for c in (0, 2, 5):  # the drawn classes are well covered
        assert out["coverage_per_class"][classes.index(c)] > 0.7
    assert out["num_real_per_class"].tolist() == [50, 40, 60, 45, 0]
    assert out["num_fake_per_class"].tolist() == [55, 35, 60, 0, 20]


def test_class_missing_from_the_data(out):
    c9 = out["classes"].tolist().index(9)
    assert out["precision_per_class"][c9] == 0 and out["density_per_class"][c9] == 0
    for name in ("recall", "coverage", "frechet_distance"):
        assert math.isnan(out[f"{name}_per_class"][c9])


def test_other_classes_equal_generative_metrics_and_the_oracle(toy, out):
    real, real_labels, fake, fake_labels = toy
    classes = out["classes"].tolist()
    for c in (0, 2, 5):
        r, f = real[real_labels == c], fake[fake_labels == c]
        want = generative_metrics(r, f)
        for name in SCORES:
            assert out[f"{name}_per_class"][classes.index(c)] == float(want[name]), (c, name)
        p, rc = oracle.precision_recall(r.numpy(), f.numpy(), k=3)
        d, cv = oracle.density_coverage(r.numpy(), f.numpy(), k=5)
        got = [float(out[f"{n}_per_class"][classes.index(c)]) for n in SCORES]
        assert got == pytest.approx([p, rc, d, cv, oracle.frechet(r.numpy(), f.numpy())], rel=1e-9, abs=1e-9)


def test_means_over_the_classes_where_defined(out):
    for name in SCORES:
        per = out[f"{name}_per_class"].numpy()
        kept = per[~np.isnan(per)]
        assert len(kept) < len(per) or name not in ("precision", "frechet_distance")
        assert float(out[f"{name}_mean"]) == pytest.approx(kept.sum() / len(kept), rel=1e-12)
    # the dropped class's coverage 0 pulls the mean down: 4 defined classes (0, 2, 5, 7)
    cov = out["coverage_per_class"].tolist()
    assert float(out["coverage_mean"]) == pytest.approx((cov[0] + cov[1] + cov[2] + 0.0) / 4)


def test_options_pass_through(toy):
    real, real_labels, fake, fake_labels = toy
    res = per_class_metrics(
        real,
        fake,
        real_labels=real_labels,
        fake_labels=fake_labels,
        k_precision_recall=2,
        k_density_coverage=3,
        ball="open",
        frechet=False,
    )
    assert "frechet_distance_per_class" not in res
    for i, c in enumerate(res["classes"].tolist()[:3]):
        r, f = real[real_labels == c], fake[fake_labels == c]
        want = generative_metrics(r, f, k_precision_recall=2, k_density_coverage=3, ball="open", frechet=False)
        for name in ("precision", "recall", "density", "coverage"):
            assert res[f"{name}_per_class"][i] == float(want[name])
    only_dc = per_class_metrics(
        real, fake, real_labels=real_labels, fake_labels=fake_labels, k_precision_recall=None, frechet=False
    )
    assert set(only_dc) == {
        "classes",
        "density_per_class",
        "coverage_per_class",
        "density_mean",
        "coverage_mean",
        "num_real_per_class",
        "num_fake_per_class",
        "coverage_min",
        "lowest_coverage_class",
    }
    no_dc = per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels, k_density_coverage=None)
    assert "lowest_coverage_class" not in no_dc and "coverage_mean" not in no_dc


def test_small_classes():
    g = torch.Generator().manual_seed(3)
    real = torch.randn(6 + 3 + 8, 2, generator=g, dtype=torch.float64)
    fake = torch.randn(2 + 3 + 1, 2, generator=g, dtype=torch.float64)
    real_labels = torch.tensor([0] * 6 + [1] * 3 + [2] * 8)
    fake_labels = torch.tensor([0] * 2 + [1] * 3 + [2] * 1)
    res = per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels)
    # class 0: 6 real (= k_density_coverage + 1), 2 fake: density/coverage and Fréchet,
    # not precision/recall (k_precision_recall + 1 = 4)
    d, c = density_coverage(real[:6], fake[:2], k=5)
    assert res["density_per_class"][0] == float(d) and res["coverage_per_class"][0] == float(c)
    assert res["frechet_distance_per_class"][0] == float(frechet_distance(real[:6], fake[:2]))
    assert math.isnan(res["precision_per_class"][0]) and math.isnan(res["recall_per_class"][0])
    # class 1: 3 and 3: only the Fréchet distance
    assert res["frechet_distance_per_class"][1] == float(frechet_distance(real[6:9], fake[2:5]))
    for name in ("precision", "recall", "density", "coverage"):
        assert math.isnan(res[f"{name}_per_class"][1])
    # class 2: one fake sample: coverage yes, Fréchet no
    d, c = density_coverage(real[9:], fake[5:], k=5)
    assert res["coverage_per_class"][2] == float(c) and math.isnan(res["frechet_distance_per_class"][2])
    # lowest coverage among classes 0 and 2 (class 1 has none)
    want = 0 if res["coverage_per_class"][0] <= res["coverage_per_class"][2] else 2
    assert int(res["lowest_coverage_class"]) == want


def test_classes_argument_and_tie_rule():
    g = torch.Generator().manual_seed(4)
    real = torch.randn(30, 2, generator=g)
    fake = torch.randn(10, 2, generator=g)
    real_labels, fake_labels = torch.arange(30) % 3, torch.zeros(10, dtype=torch.long)
    res = per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels, classes=[4, 2, 1, 0])
    assert res["classes"].tolist() == [4, 2, 1, 0]
    assert all(math.isnan(res[f"{n}_per_class"][0]) for n in SCORES)  # class 4: in neither set
    assert res["num_real_per_class"][0] == 0 and res["num_fake_per_class"][0] == 0
    # classes 2 and 1 are both dropped (coverage 0): the first in `classes` order is named
    assert res["coverage_per_class"][1] == res["coverage_per_class"][2] == 0
    assert int(res["lowest_coverage_class"]) == 2
    with pytest.raises(ValueError, match=r"`classes` to hold every label .* \[2\] is missing"):
        per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels, classes=[0, 1])
    with pytest.raises(ValueError, match="distinct integers"):
        per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels, classes=[0, 1, 1, 2])
    with pytest.raises(ValueError, match="distinct integers"):
        per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels, classes=["a", "b"])


def test_label_types(toy, out):
    real, real_labels, fake, fake_labels = toy
    for rl, fl in (
        (real_labels.numpy().astype(np.int32), fake_labels.tolist()),
        (real_labels.to(torch.int16), fake_labels.to(torch.uint8)),
    ):
        res = per_class_metrics(real, fake, real_labels=rl, fake_labels=fl)
        assert res["classes"].tolist() == out["classes"].tolist()
        torch.testing.assert_close(res["coverage_per_class"], out["coverage_per_class"], equal_nan=True)


def test_bad_input(toy):
    real, real_labels, fake, fake_labels = toy
    ok = dict(real_labels=real_labels, fake_labels=fake_labels)
    with pytest.raises(
        ValueError, match=r"`real_labels` to be 1-D with one label per row of `real` \(195\), .*\(194,\)"
    ):
        per_class_metrics(real, fake, real_labels=real_labels[:-1], fake_labels=fake_labels)
    with pytest.raises(ValueError, match=r"`fake_labels` .* shape \(170, 1\)"):
        per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels[:, None])
    with pytest.raises(TypeError, match="`real_labels` to hold integer class labels, but got dtype torch.float32"):
        per_class_metrics(real, fake, real_labels=real_labels.float(), fake_labels=fake_labels)
    with pytest.raises(TypeError, match="`fake_labels` to hold integer class labels, but got dtype torch.bool"):
        per_class_metrics(real, fake, real_labels=real_labels, fake_labels=fake_labels > 0)
    with pytest.raises(TypeError, match="`fake_labels`"):
        per_class_metrics(real, fake, real_labels=real_labels, fake_labels=["cat"] * len(fake_labels))
    with pytest.raises(ValueError, match="`k_precision_recall` to be a positive integer, but got 0"):
        per_class_metrics(real, fake, k_precision_recall=0, **ok)
    with pytest.raises(ValueError, match="`frechet` to be a bool"):
        per_class_metrics(real, fake, frechet="yes", **ok)
    with pytest.raises(ValueError, match="at least one score"):
        per_class_metrics(real, fake, k_precision_recall=None, k_density_coverage=None, frechet=False, **ok)
    with pytest.raises(ValueError, match="ball"):
        per_class_metrics(real, fake, ball="round", **ok)
    with pytest.raises(ValueError, match="same number of features"):
        per_class_metrics(real, fake[:, :3], **ok)


def test_scalars_for_logging(out):
    flat = per_class_scalars(out, names={7: "seven"})
    classes = out["classes"].tolist()
    assert flat["coverage/seven"] == 0.0 and flat["lowest_coverage_class"] == 7
    assert flat["precision/0"] == float(out["precision_per_class"][classes.index(0)])
    assert math.isnan(flat["precision/seven"])
    assert flat["recall_mean"] == float(out["recall_mean"]) and flat["coverage_min"] == 0.0
    assert len([k for k in flat if k.startswith("density/")]) == 5
    assert all(isinstance(v, float) for k, v in flat.items() if k != "lowest_coverage_class")
    assert "coverage_0" in per_class_scalars(out, sep="_")
    with pytest.raises(ValueError, match="`result`"):
        per_class_scalars({"coverage_per_class": torch.zeros(2)})
