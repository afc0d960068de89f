"""Bad input at every public entry point: one matrix of inputs against every function and Metric.

Each bad input raises ``ValueError`` or ``TypeError`` whose message names the argument and the
value that was given; a Metric that rejects a batch keeps everything accumulated before it;
float16/bfloat16 features are upcast and give the float32 result; non-contiguous inputs give
the contiguous result. Other files test each function's own options in depth; this file checks
that no entry point is missed.
"""

import re

import numpy as np
import pytest
import torch

import lightning_prd.functional as F
from lightning_prd import (
    AlphaPrecisionBetaRecall,
    DensityCoverage,
    FrechetDistance,
    GenerativeMetrics,
    PRDCurve,
    PrecisionRecall,
)
from lightning_prd.functional.uncertainty import score_spread

_PRD = dict(num_clusters=3, num_runs=2, num_angles=11)

# every public function taking (real, fake); small options so the matrix stays fast
FUNCTIONS = {
    "precision_recall": lambda r, f, **kw: F.precision_recall(r, f, **kw),
    "density_coverage": lambda r, f, **kw: F.density_coverage(r, f, **kw),
    "realism_score": lambda r, f, **kw: F.realism_score(r, f, **kw),
    "prd_curve": lambda r, f, **kw: F.prd_curve(r, f, **{**_PRD, **kw}),
    "alpha_precision_beta_recall": lambda r, f, **kw: F.alpha_precision_beta_recall(r, f, **kw),
    "authenticity": lambda r, f, **kw: F.authenticity(r, f, **kw),
    "frechet_distance": lambda r, f, **kw: F.frechet_distance(r, f, **kw),
    "audit_samples": lambda r, f, **kw: F.audit_samples(r, f, **kw),
    "score_spread": lambda r, f, **kw: score_spread(r, f, num_splits=2, **kw),
}

# every Metric class, built small
METRICS = {
    "PrecisionRecall": lambda: PrecisionRecall(),
    "DensityCoverage": lambda: DensityCoverage(),
    "FrechetDistance": lambda: FrechetDistance(),
    "PRDCurve": lambda: PRDCurve(**_PRD),
    "AlphaPrecisionBetaRecall": lambda: AlphaPrecisionBetaRecall(num_alphas=5),
    "GenerativeMetrics": lambda: GenerativeMetrics(prd=dict(_PRD), alpha_beta=dict(num_alphas=5), realism=True),
}


def _data(n=40, m=40, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), 1.1 * torch.randn(m, d, generator=g) + 0.2


def _with(x, row, col, value):
    x = x.clone()
    x[row, col] = value
    return x


def _bad_features():
    real, fake = _data()
    # (id, real, fake, exception, regex that names the argument and the value)
    return [
        ("nan-real", _with(real, 3, 1, float("nan")), fake, ValueError, r"`real` to be finite, but 1 of its 40 rows"),
        ("inf-fake", real, _with(fake, 0, 0, float("-inf")), ValueError, r"`fake` to be finite, but 1 of its 40 rows"),
        ("1d-real", real[:, 0], fake, ValueError, r"`real` to be a 2-D tensor.*\(40,\)"),
        ("3d-fake", real, fake[None], ValueError, r"`fake` to be a 2-D tensor.*\(1, 40, 4\)"),
        (
            "widths",
            real,
            fake[:, :3],
            ValueError,
            r"`real` and `fake` to have the same number of features, but got 4 and 3",
        ),
        (
            "int-real",
            real.long(),
            fake,
            TypeError,
            r"`real` to hold floating-point features, but got dtype torch.int64",
        ),
        ("bool-fake", real, fake > 0, TypeError, r"`fake` to hold floating-point features, but got dtype torch.bool"),
        ("complex-real", real.to(torch.complex64), fake, TypeError, r"`real` .*torch.complex64"),
        ("empty-fake", real, fake[:0], ValueError, r"`fake` to hold at least one sample, but got shape \(0, 4\)"),
        (
            "no-features",
            real[:, :0],
            fake[:, :0],
            ValueError,
            r"`real` to have at least one feature, but got shape \(40, 0\)",
        ),
        ("string", "features.npy", fake, TypeError, r"`real` to be a tensor or array of features, but got str"),
        ("none", real, None, TypeError, r"`fake` to be a tensor or array of features, but got NoneType"),
        (
            "meta",
            torch.empty(40, 4, device="meta"),
            fake,
            ValueError,
            r"`real` to hold data, but got a tensor on the meta device",
        ),
    ]


BAD = _bad_features()


@pytest.mark.parametrize("name", list(FUNCTIONS))
@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_functions_reject_bad_features(name, case):
    _, real, fake, exc, match = case
    with pytest.raises(exc, match=match):
        FUNCTIONS[name](real, fake)


_K_FUNCTIONS = ["precision_recall", "density_coverage", "realism_score", "alpha_precision_beta_recall"]


@pytest.mark.parametrize("name", _K_FUNCTIONS)
def test_functions_need_k_plus_one_samples(name):
    real, fake = _data(n=3)
    with pytest.raises(ValueError, match=r"`real` to hold at least k \+ 1 = \d samples for k-NN radii, but got 3"):
        FUNCTIONS[name](real, fake)


def test_too_few_samples_for_the_other_functions():
    real, fake = _data()
    with pytest.raises(ValueError, match=r"`real` to hold at least 2 samples for a covariance, but got 1"):
        F.frechet_distance(real[:1], fake)
    with pytest.raises(ValueError, match=r"`real` to hold at least k \+ 1 = 2 samples.*got 1"):
        F.authenticity(real[:1], fake)
    with pytest.raises(ValueError, match=r"`num_clusters` to be at most the number of samples \(6\), but got 7"):
        F.prd_curve(real[:3], fake[:3], num_clusters=7)
    with pytest.raises(ValueError, match=r"`fake` to hold at least num_splits \* \(k_precision_recall \+ 1\) = 8"):
        score_spread(real, fake[:7], num_splits=2)


# (function, option, bad value, regex naming the option); the value's repr must appear too
BAD_OPTIONS = [(fn, "k", v, "`k`") for fn in _K_FUNCTIONS for v in (0, -2, 2.5, True, "3", None)] + [
    ("prd_curve", "num_clusters", 0, "`num_clusters`"),
    ("prd_curve", "num_clusters", 2.0, "`num_clusters`"),
    ("prd_curve", "num_angles", 2, "`num_angles`"),
    ("prd_curve", "num_angles", 10**7, "`num_angles`"),
    ("prd_curve", "num_runs", 0, "`num_runs`"),
    ("prd_curve", "num_runs", 10**9, "`num_runs`"),
    ("prd_curve", "seed", -1, "`seed`"),
    ("prd_curve", "seed", 0.5, "`seed`"),
    ("prd_curve", "enforce_balance", "yes", "`enforce_balance`"),
    ("alpha_precision_beta_recall", "num_alphas", 1, "`num_alphas`"),
    ("alpha_precision_beta_recall", "num_alphas", 10**9, "`num_alphas`"),  # used to allocate 10^9 alphas
    ("alpha_precision_beta_recall", "num_alphas", "30", "`num_alphas`"),
    ("alpha_precision_beta_recall", "embedding", "svdd", "`embedding`"),
    ("precision_recall", "block_bytes", 0, "`block_bytes`"),
    ("density_coverage", "block_bytes", 1.5, "`block_bytes`"),
    ("precision_recall", "dtype", torch.float16, "`dtype`"),
    ("density_coverage", "dtype", "float64", "`dtype`"),
    ("audit_samples", "k_precision", 0, "`k_precision`"),
    ("audit_samples", "k_coverage", -1, "`k_coverage`"),
    ("audit_samples", "num_alphas", 0, "`num_alphas`"),
    ("score_spread", "k_density_coverage", 0, "`k_density_coverage`"),
]


@pytest.mark.parametrize(("name", "option", "value", "match"), BAD_OPTIONS)
def test_functions_reject_bad_options(name, option, value, match):
    real, fake = _data()
    with pytest.raises((ValueError, TypeError), match=match) as info:
        FUNCTIONS[name](real, fake, **{option: value})
    assert str(value) in str(info.value)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: F.prd_from_histograms([0.5, 0.5], [1.0, 0.0], num_angles=1), "`num_angles`.*1"),
        (lambda: F.prd_from_histograms([0.5, 0.5], [1.0, 0.0], epsilon=float("nan")), "`epsilon`.*nan"),
        (lambda: F.prd_from_histograms([0.5, 0.7], [1.0, 0.0]), "`real_hist`.*sums to 1.2"),
        (lambda: F.prd_from_histograms([0.5, 0.5], [float("inf"), 0.0]), "`fake_hist`.*inf"),
        (lambda: F.prd_f_beta([0.5], [0.5], beta=0), "`beta`.*0"),
        (lambda: F.prd_f_beta([0.5], [0.5], beta=float("inf")), "`beta`.*inf"),
        (lambda: F.prd_f_beta([1.5], [0.5]), r"`precision`.*\[0, 1\].*1.5"),
        (lambda: F.prd_f_beta([], []), "`precision`.*empty"),
        (lambda: F.alpha_beta_masks({}, alpha=0.5), "`result`"),
        (lambda: F.train_oneclass(torch.randn(20, 3), lr=0.0), "`lr`.*0.0"),
        (lambda: F.train_oneclass(torch.randn(20, 3), weight_decay=float("nan")), "`weight_decay`.*nan"),
        (lambda: F.train_oneclass(torch.randn(20, 3), epochs=np.float64(2)), "`epochs`"),
        (lambda: F.train_oneclass(torch.full((20, 3), float("nan"))), "`real` to be finite"),
    ],
)
def test_other_functions_reject_bad_arguments(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_filter_fake_rejects_bad_thresholds():
    real, fake = _data()
    audit = F.audit_samples(real, fake)
    for kwargs, match in [
        (dict(copy_ratio=-1.0), "`copy_ratio`.*-1.0"),
        (dict(copy_ratio=float("nan")), "`copy_ratio`.*nan"),
        (dict(fidelity="realism", min_realism=float("nan")), "`min_realism`.*nan"),  # used to keep nothing silently
        (dict(max_alpha=2), "`max_alpha`.*2"),
        (dict(fidelity="fid"), "`fidelity`.*fid"),
    ]:
        with pytest.raises(ValueError, match=match):
            F.filter_fake(fake, audit, **kwargs)
    with pytest.raises(ValueError, match="`fake` to hold 40 samples like the audit, but got 5"):
        F.filter_fake(fake[:5], audit)


def test_filter_fake_rejects_an_audit_that_is_not_one():
    real, fake = _data()
    audit = F.audit_samples(real, fake)
    for bad, kwargs, match in [
        ({}, {}, r"`audit` to be the dict returned by `audit_samples`.*`audit\['copy_ratio'\]`.*no such key"),
        ([1, 2], {}, "`audit` to be the dict returned by `audit_samples`, but got list"),
        ({**audit, "realism": None}, dict(fidelity="realism"), r"`audit\['realism'\]` of 40 entries.*NoneType"),
        ({**audit, "inside_precision": audit["inside_precision"][:3]}, {}, r"of 40 entries, but got Tensor \(3,\)"),
        ({k: v for k, v in audit.items() if k != "alpha_typicality"}, dict(max_alpha=0.5), "alpha_typicality"),
    ]:
        with pytest.raises(ValueError, match=match):
            F.filter_fake(fake, bad, **kwargs)
    kept, mask = F.filter_fake(fake, audit, fidelity="realism", max_alpha=0.9)  # a valid audit still works
    assert torch.equal(kept, fake[mask])


# every function whose inputs are feature sets, for the gradient and dtype checks below
ALL_FUNCTIONS = {
    **FUNCTIONS,
    "generative_metrics": lambda r, f: F.generative_metrics(r, f, prd=dict(_PRD)),
    "kernel_inception_distance": lambda r, f: F.kernel_inception_distance(r, f, subsets=3, subset_size=20),
    "cmmd": lambda r, f: F.cmmd(r, f),
    "top_precision_recall": lambda r, f: F.top_precision_recall(r, f, num_bootstrap=2, k=5),
    "precision_recall_cover": lambda r, f: F.precision_recall_cover(r, f),
    "probabilistic_precision_recall": lambda r, f: F.probabilistic_precision_recall(r, f),
    "vendi_score": lambda r, f: F.vendi_score(f),
}


@pytest.mark.parametrize("name", list(ALL_FUNCTIONS))
def test_inputs_that_require_grad_give_the_detached_result(name):
    """Features straight out of a network carry ``requires_grad``; the k-NN tiles write into
    preallocated buffers (``out=``), which autograd refuses, so the inputs are detached."""
    real, fake = _data()
    got = ALL_FUNCTIONS[name](real.clone().requires_grad_(), fake.clone().requires_grad_())
    _assert_same(got, ALL_FUNCTIONS[name](real, fake))


@pytest.mark.parametrize("name", ["precision_recall", "frechet_distance", "generative_metrics"])
def test_float8_is_upcast_to_the_float32_result(name):
    real, fake = _data()
    kinds = [getattr(torch, k) for k in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, k)]
    if not kinds:
        pytest.skip("this torch has no float8 dtypes")
    for kind in kinds:
        r8, f8 = real.to(kind), fake.to(kind)
        _assert_same(ALL_FUNCTIONS[name](r8, f8), ALL_FUNCTIONS[name](r8.float(), f8.float()))


def test_sparse_tensors_and_dtypes_torch_lacks_raise_naming_the_argument():
    real, fake = _data()
    for bad, match in [
        (real.to_sparse(), "`real` to be a dense tensor, but got layout torch.sparse_coo.*to_dense"),
        (real.to_sparse_csr(), "`real` to be a dense tensor, but got layout torch.sparse_csr"),
    ]:
        with pytest.raises(TypeError, match=match):
            F.precision_recall(bad, fake)
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(
        TypeError, match=r"`real` to be a dense tensor or array, but got a SciPy sparse csr_matrix.*toarray"
    ):
        F.precision_recall(sparse.csr_matrix(real.numpy()), fake)
    if np.dtype(np.longdouble).itemsize > 8:  # a true extended type (x86 Linux): torch has no such dtype
        with pytest.raises(TypeError, match=r"`real` to be a tensor or array.*dtype float(96|128), which torch"):
            F.precision_recall(real.numpy().astype(np.longdouble), fake)


def test_option_dict_errors_say_which_dict_held_the_option():
    real, fake = _data()
    for kwargs, match in [
        (dict(prd=dict(num_clusters=0)), r"`num_clusters` to be a positive integer, but got 0 \(an option of `prd`\)"),
        (dict(kid=dict(degree=0)), r"`degree`.*0 \(an option of `kid`\)"),
        (dict(vendi=dict(q=-1)), r"`q`.*-1 \(an option of `vendi`\)"),
        (dict(probabilistic=dict(k=0)), r"`k`.*0 \(an option of `probabilistic`\)"),
        (dict(pr_cover=dict(C=0)), r"`C`.*0 \(an option of `pr_cover`\)"),
        (dict(cmmd=dict(sigma=-1)), r"`sigma`.*-1.0 \(an option of `cmmd`\)"),
        (dict(alpha_beta=dict(num_alphas=0)), r"`num_alphas`.*0 \(an option of `alpha_beta`\)"),
    ]:
        with pytest.raises(ValueError, match=match):
            F.generative_metrics(real, fake, **kwargs)


@pytest.mark.parametrize("sigma", [1e-160, 1e-200, 1e200])
def test_cmmd_bandwidth_whose_kernel_coefficient_leaves_float64_raises(sigma):
    real, fake = _data()
    with pytest.raises(
        ValueError, match=r"`sigma` to be a positive number in \[1e-150, 1e\+150\].*" + re.escape(repr(sigma))
    ):
        F.cmmd(real, fake, sigma=sigma)
    assert torch.isfinite(F.cmmd(real, fake, sigma=1e-150)) and torch.isfinite(F.cmmd(real, fake, sigma=1e150))


def test_metric_flags_must_be_bools():
    for factory, name in [
        (lambda: GenerativeMetrics(per_sample="no"), "per_sample"),
        (lambda: GenerativeMetrics(frechet="no"), "frechet"),
        (lambda: GenerativeMetrics(realism=1), "realism"),
        (lambda: PrecisionRecall(split_work="no"), "split_work"),
    ]:
        with pytest.raises(ValueError, match=f"`{name}` to be a bool, but got"):
            factory()


def test_generative_metrics_kid_needs_two_samples_of_each_set():
    metric = GenerativeMetrics(
        k_precision_recall=None, k_density_coverage=None, frechet=False, prd=False, alpha_beta=False,
        probabilistic=False, pr_cover=False, kid=True,
    )  # fmt: skip
    metric.update(torch.randn(60, 4), real=True)
    metric.update(torch.randn(1, 4), real=False)
    with pytest.raises(ValueError, match="at least 2 real and 2 generated samples for KID.*M = 1 generated"):
        metric.compute()
    metric.update(torch.randn(5, 4), real=False)  # nothing lost: more samples make it computable
    with pytest.warns(UserWarning, match="subsets of 6 samples are used"):
        assert torch.isfinite(metric.compute()["kid"])


def test_nothing_switched_on_is_refused():
    off = dict(frechet=False, prd=False, alpha_beta=False, probabilistic=False, pr_cover=False)
    with pytest.raises(ValueError, match="at least one score to compute, but `k_precision_recall` and"):
        GenerativeMetrics(k_precision_recall=None, k_density_coverage=None, realism=False, authenticity=False, **off)
    real, fake = _data()
    with pytest.raises(
        ValueError, match="at least one score to compute, but `k_precision_recall` and `k_density_coverage` are None"
    ):
        F.generative_metrics(
            real, fake, k_precision_recall=None, k_density_coverage=None, realism=False, authenticity=False, **off
        )


def test_error_bars_too_many_for_the_generated_set_names_error_bars():
    real, fake = _data(n=30, m=30, d=3)
    with pytest.raises(
        ValueError, match=r"`fake` to hold at least error_bars \* \(k_precision_recall \+ 1\) = 32 samples, but got 30"
    ):
        F.generative_metrics(real, fake, error_bars=8)


def test_numpy_integer_options_equal_python_ints():
    """Options coming from NumPy (``np.int64`` from a sweep grid) used to be rejected."""
    real, fake = _data()
    assert F.precision_recall(real, fake, k=np.int64(4)) == F.precision_recall(real, fake, k=4)
    a = F.prd_curve(
        real, fake, num_clusters=np.int32(3), num_runs=np.int64(2), seed=np.int64(5), num_angles=np.int16(11)
    )
    b = F.prd_curve(real, fake, num_clusters=3, num_runs=2, seed=5, num_angles=11)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    ab = F.alpha_precision_beta_recall(real, fake, num_alphas=np.int64(7))
    assert ab["alphas"].shape == (7,)
    assert F.prd_f_beta(a[0], a[1], beta=np.float32(8)) == F.prd_f_beta(a[0], a[1], beta=8)


# -- dtypes and layouts that are accepted ------------------------------------------------------------

_EXACT = [
    "precision_recall",
    "density_coverage",
    "realism_score",
    "alpha_precision_beta_recall",
    "authenticity",
    "audit_samples",
]


def _assert_same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, (tuple, list)):
        for x, y in zip(a, b):
            _assert_same(x, y)
    else:
        assert a.dtype == b.dtype
        assert torch.equal(a, b), (a, b)


@pytest.mark.parametrize("name", list(FUNCTIONS))
@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_half_precision_is_upcast_to_the_float32_result(name, half):
    real, fake = _data()
    real_h, fake_h = real.to(half), fake.to(half)
    _assert_same(FUNCTIONS[name](real_h, fake_h), FUNCTIONS[name](real_h.float(), fake_h.float()))


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_non_contiguous_inputs_give_the_contiguous_result(name):
    real, fake = _data(d=8)
    real_view = torch.cat([real, real], 1)[:, ::2]  # every other column: strided
    fake_view = fake.T.contiguous().T  # column-major
    assert not real_view.is_contiguous() and not fake_view.is_contiguous()
    _assert_same(FUNCTIONS[name](real_view, fake_view), FUNCTIONS[name](real_view.contiguous(), fake_view.contiguous()))


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_numpy_and_list_inputs_equal_tensor_inputs(name):
    real, fake = _data()
    _assert_same(FUNCTIONS[name](real.numpy(), fake.tolist()), FUNCTIONS[name](real, fake))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_sets_on_different_devices_raise(name):
    real, fake = _data()
    with pytest.raises(ValueError, match="same device, but got cpu and cuda"):
        FUNCTIONS[name](real, fake.cuda())


# -- Metric classes --------------------------------------------------------------------------------


def _feed(metric, real, fake, batch=15):
    for s in range(0, len(real), batch):
        metric.update(real[s : s + batch], real=True)
    for s in range(0, len(fake), batch):
        metric.update(fake[s : s + batch], real=False)


def _bad_batches():
    _, fake = _data(m=10, seed=1)
    return [
        ("nan", _with(fake, 2, 2, float("nan")), ValueError, r"`features` to be finite, but 1 of its 10 rows"),
        ("inf", _with(fake, 0, 0, float("inf")), ValueError, r"`features` to be finite"),
        ("1d", fake[:, 0], ValueError, r"`features` to be a 2-D tensor.*\(10,\)"),
        ("3d", fake[None], ValueError, r"`features` to be a 2-D tensor.*\(1, 10, 4\)"),
        (
            "width",
            fake[:, :3],
            ValueError,
            r"`features` to have 4 features like the samples accumulated so far, but got shape \(10, 3\)",
        ),
        ("int", fake.long(), TypeError, r"`features` to hold floating-point features, but got dtype torch.int64"),
        ("no-features", fake[:, :0], ValueError, r"`features` to have at least one feature"),
        ("string", "batch", TypeError, r"`features` to be a tensor or array of features, but got str"),
        ("meta", torch.empty(10, 4, device="meta"), ValueError, r"`features` to hold data.*meta"),
    ]


@pytest.mark.parametrize("name", list(METRICS))
@pytest.mark.parametrize("case", _bad_batches(), ids=[c[0] for c in _bad_batches()])
@pytest.mark.parametrize("role", [True, False])
def test_metric_rejects_bad_batch_and_keeps_state(name, case, role):
    _, bad, exc, match = case
    real, fake = _data()
    clean = METRICS[name]()
    _feed(clean, real, fake)
    metric = METRICS[name]()
    _feed(metric, real, fake)
    with pytest.raises(exc, match=match):
        metric.update(bad, real=role)
    _assert_same(metric.compute(), clean.compute())


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
@pytest.mark.parametrize("name", list(METRICS))
def test_metric_empty_batches_do_not_fix_the_width(name):
    metric = METRICS[name]()
    metric.update(torch.empty(0, 3), real=True)
    metric.update(torch.empty(0, 3), real=False)
    real, fake = _data()
    _feed(metric, real, fake)  # 4 features: accepted
    reference = METRICS[name]()
    _feed(reference, real, fake)
    _assert_same(metric.compute(), reference.compute())
    with pytest.raises(ValueError, match="to have 4 features like the samples accumulated so far"):
        metric.update(torch.zeros(2, 3), real=False)


@pytest.mark.filterwarnings("ignore:The ``compute`` method of metric")  # torchmetrics: compute before update
@pytest.mark.parametrize("name", list(METRICS))
def test_metric_compute_with_nothing_accumulated(name):
    metric = METRICS[name]()
    with pytest.raises(ValueError, match=r"No real features accumulated: call `update\(features, real=True\)`"):
        metric.compute()
    metric.update(_data()[0], real=True)
    with pytest.raises(ValueError, match=r"No fake features accumulated: call `update\(features, real=False\)`"):
        metric.compute()
    metric.update(torch.empty(0, 4), real=False)  # an empty batch (a rank with nothing) is not data either
    with pytest.raises(ValueError, match="No fake features"):
        metric.compute()


@pytest.mark.parametrize(
    "name", ["PrecisionRecall", "DensityCoverage", "AlphaPrecisionBetaRecall", "GenerativeMetrics"]
)
def test_metric_too_few_samples_keeps_state(name):
    real, fake = _data()
    metric = METRICS[name]()
    metric.update(real[:3], real=True)
    metric.update(fake, real=False)
    with pytest.raises(ValueError, match=r"`real` to hold at least (k|k_precision_recall) \+ 1 = \d samples"):
        metric.compute()
    metric.update(real[3:], real=True)  # nothing was lost: adding the rest gives the full result
    clean = METRICS[name]()
    _feed(clean, real, fake)
    _assert_same(metric.compute(), clean.compute())


@pytest.mark.parametrize("name", list(METRICS))
@pytest.mark.parametrize("flag", [1, None, "real", torch.tensor(True)])
def test_metric_real_flag_must_be_bool(name, flag):
    with pytest.raises(TypeError, match=r"`real` to be a bool .*but got"):
        METRICS[name]().update(_data()[0], real=flag)


@pytest.mark.parametrize("name", list(METRICS))
@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_metric_half_precision_is_upcast(name, half):
    real, fake = (x.to(half) for x in _data())
    metric, reference = METRICS[name](), METRICS[name]()
    _feed(metric, real, fake)
    _feed(reference, real.float(), fake.float())
    assert all(t.dtype == torch.float32 for t in metric.real_features + metric.fake_features)
    _assert_same(metric.compute(), reference.compute())


@pytest.mark.parametrize("name", list(METRICS))
def test_metric_keeps_its_own_copy_of_a_reused_buffer(name):
    """Refilling one buffer between updates used to change every batch accumulated from it."""
    real, fake = _data()
    reference = METRICS[name]()
    _feed(reference, real, fake)
    metric = METRICS[name]()
    buffer = torch.empty(20, 4)
    for which, data in ((True, real), (False, fake)):
        for s in range(0, 40, 20):
            buffer.copy_(data[s : s + 20])
            metric.update(buffer, real=which)
            metric.update(buffer.numpy()[:0], real=which)  # a zero-row view of it is harmless
    _assert_same(metric.compute(), reference.compute())


def test_metric_keeps_its_own_copy_of_a_numpy_buffer():
    real, fake = _data()
    metric = PrecisionRecall()
    buffer = np.empty((20, 4), dtype=np.float32)
    for which, data in ((True, real), (False, fake)):
        for s in range(0, 40, 20):
            buffer[:] = data[s : s + 20].numpy()
            metric.update(buffer, real=which)
    assert metric.compute()["precision"] == F.precision_recall(real, fake)[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_metric_rejects_a_batch_on_another_device():
    real, fake = _data()
    metric = PrecisionRecall()
    metric.update(real, real=True)
    with pytest.raises(ValueError, match="`features` on cpu like the samples accumulated so far, but got cuda"):
        metric.update(fake.cuda(), real=False)
    metric.update(fake, real=False)
    assert metric.compute()["precision"] == F.precision_recall(real, fake)[0]


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda: PrecisionRecall(k=0), "`k`.*0"),
        (lambda: DensityCoverage(k="5"), "`k`.*'5'"),
        (lambda: PRDCurve(num_clusters=-1), "`num_clusters`.*-1"),
        (lambda: PRDCurve(num_angles=2), "`num_angles`.*2"),
        (lambda: PRDCurve(beta=float("nan")), "`beta`.*nan"),
        (lambda: PRDCurve(enforce_balance="no"), "`enforce_balance`.*'no'"),
        (lambda: AlphaPrecisionBetaRecall(num_alphas=1), "`num_alphas`.*1"),
        (lambda: AlphaPrecisionBetaRecall(embedding=3), "`embedding`"),
        (lambda: GenerativeMetrics(k_precision_recall=0), "`k_precision_recall`.*0"),
        (lambda: GenerativeMetrics(prd=dict(beta=-1)), "`beta`.*-1"),  # used to be accepted unchecked
        (lambda: GenerativeMetrics(prd=dict(num_cluster=3)), r"`prd`.*unknown keys \['num_cluster'\]"),
        (lambda: GenerativeMetrics(alpha_beta=dict(k=0)), r"`alpha_beta\['k'\]`.*0"),
        (lambda: GenerativeMetrics(error_bars=1), "`error_bars`.*1"),
        (lambda: GenerativeMetrics(prd="yes"), "`prd`.*'yes'"),
        (lambda: FrechetDistance(reset_real_features="no"), "`reset_real_features`.*'no'"),
        (lambda: FrechetDistance(dtype=torch.float16), "`dtype`.*float16"),
        (lambda: FrechetDistance(feature_extractor="inception"), "`feature_extractor`.*str"),
        (lambda: FrechetDistance(block_bytes=0), "`block_bytes`.*0"),
    ],
)
def test_metric_constructors_reject_bad_options(factory, match):
    with pytest.raises((ValueError, TypeError), match=match):
        factory()


def test_metric_numpy_integer_options_are_plain_ints():
    metric = GenerativeMetrics(k_precision_recall=np.int64(3), prd=dict(num_clusters=np.int64(3), seed=np.int32(1)))
    assert (
        type(metric.k_precision_recall) is int
        and type(metric.prd["num_clusters"]) is int
        and type(metric.prd["seed"]) is int
    )


@pytest.mark.parametrize("name", list(METRICS))
def test_metric_call_accumulates_and_loses_nothing(name):
    """``metric(x, real=...)`` (torchmetrics' forward, what ``self.metric(x)`` in a LightningModule
    does) used to raise on the one-role batch and, in doing so, drop the features accumulated."""
    real, fake = _data()
    reference = METRICS[name]()
    _feed(reference, real, fake)
    metric = METRICS[name]()
    for which, data in ((True, real), (False, fake)):
        for s in range(0, 40, 15):
            assert metric(data[s : s + 15], real=which) is None
    _assert_same(metric.compute(), reference.compute())


# -- the callback's arguments (more in test_callback.py::test_bad_arguments_raise) -----------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(real=torch.empty(0, 4)), ValueError, r"`real` to hold at least one sample, but got shape \(0, 4\)"),
        (dict(real={"x": 1}), TypeError, "`real` to be a tensor or a DataLoader .*dict"),
        (dict(real=3), TypeError, "`real` to be a tensor or a DataLoader .*int"),
        (dict(num_samples=1.5), ValueError, "`num_samples`.*1.5"),
        (dict(num_samples=True), ValueError, "`num_samples`.*True"),
        (dict(every_n_epochs=0), ValueError, "`every_n_epochs`.*0"),
        (dict(batch_size=0), ValueError, "`batch_size`.*0"),
        (dict(num_images=-3), ValueError, "`num_images`.*-3"),
        (dict(log_images="yes"), TypeError, "`log_images`.*'yes'"),
        (dict(seed="0"), ValueError, "`seed`.*'0'"),
        (dict(metric=dict(k_precision_recall=0)), ValueError, "`k_precision_recall`.*0"),
        (dict(metric=dict(knn=3)), ValueError, "knn"),
        (
            dict(metric=PrecisionRecall),
            TypeError,
            "`metric` to be a Metric instance, but got the class PrecisionRecall",
        ),
    ],
)
def test_callback_rejects_bad_arguments(kwargs, error, match):
    from lightning_prd import PRDCallback

    kwargs = {"real": torch.randn(10, 4), "sample_fn": lambda module, n: torch.randn(n, 4), **kwargs}
    with pytest.raises(error, match=match):
        PRDCallback(kwargs.pop("real"), **kwargs)


def test_callback_numpy_integer_options_are_plain_ints():
    from lightning_prd import PRDCallback

    cb = PRDCallback(
        torch.randn(10, 4), num_samples=np.int64(8), num_real=np.int32(5), seed=np.int64(2), every_n_epochs=np.int8(1)
    )
    assert [type(v) for v in (cb.num_samples, cb.num_real, cb.seed, cb.every_n_epochs)] == [int] * 4


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, "0", None])
def test_every_seed_is_checked(seed):
    """Seeds beyond 2**63 - 1 used to fail inside a generator with a message not naming them;
    ``score_spread`` truncated a float seed silently."""
    real, fake = _data()
    calls = [
        lambda: F.prd_curve(real, fake, seed=seed, **{k: v for k, v in _PRD.items()}),
        lambda: F.train_oneclass(real, seed=seed, epochs=1),
        lambda: score_spread(real, fake, num_splits=2, seed=seed),
        lambda: PRDCurve(seed=seed),
        lambda: GenerativeMetrics(prd=dict(seed=seed)),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"`seed` to be an integer in \[0, 9,223,372,036,854,775,807\], but got"):
            call()


def test_generative_metrics_names_the_k_that_is_too_large():
    real, fake = _data()
    for kwargs, match in [
        (dict(k_density_coverage=40), r"`real` to hold at least k_density_coverage \+ 1 = 41 samples.*got 40"),
        (dict(k_precision_recall=45), r"`real` to hold at least k_precision_recall \+ 1 = 46"),
        (dict(alpha_beta=dict(k=50)), r"`real` to hold at least alpha_beta\['k'\] \+ 1 = 51"),
    ]:
        metric = GenerativeMetrics(prd=False, **kwargs)
        metric.update(real, real=True)
        metric.update(fake, real=False)
        with pytest.raises(ValueError, match=match):
            metric.compute()
    metric = GenerativeMetrics(prd=False, k_precision_recall=12)
    metric.update(real, real=True)
    metric.update(fake[:12], real=False)
    with pytest.raises(
        ValueError, match=r"`fake` to hold at least k_precision_recall \+ 1 = 13 samples for k-NN radii, but got 12"
    ):
        metric.compute()


def test_collection_forward_counts_each_batch_once():
    """Members of a MetricCollection compute group share their list states; each member's forward
    used to append the batch to the shared list, so fake features were stored twice (recall wrong)."""
    from torchmetrics import MetricCollection

    real, fake = _data()
    coll = MetricCollection([PrecisionRecall(reset_real_features=False), DensityCoverage(reset_real_features=False)])
    coll.update(real, real=True)
    coll.update(fake, real=False)
    first = {k: float(v) for k, v in coll.compute().items()}
    coll.reset()
    for s in range(0, 40, 15):
        coll(fake[s : s + 15], real=False)  # the natural pattern: real once, generated batches through forward
    second = {k: float(v) for k, v in coll.compute().items()}
    expected = dict(zip(("precision", "recall"), map(float, F.precision_recall(real, fake))))
    expected.update(zip(("density", "coverage"), map(float, F.density_coverage(real, fake))))
    assert first == second == expected
    for metric in coll.values():
        assert sum(t.shape[0] for t in metric.fake_features) == 40


@pytest.mark.parametrize(
    "extractor, batch",
    [
        (lambda b: b[0], lambda buf: (buf, None)),  # the tensor inside a tuple batch
        (lambda b: b["x"], lambda buf: {"x": buf}),  # a dict batch
        (lambda b: b[:, :4], lambda buf: buf),  # a view of the batch
    ],
)
def test_metric_copies_batches_whatever_the_extractor_returns(extractor, batch):
    real, fake = _data()
    metric = PrecisionRecall(feature_extractor=extractor)
    buf = torch.empty(20, 4)
    for which, data in ((True, real), (False, fake)):
        for s in range(0, 40, 20):
            buf.copy_(data[s : s + 20])
            metric.update(batch(buf), real=which)
    buf.fill_(100.0)
    assert metric.compute()["precision"] == F.precision_recall(real, fake)[0]


def test_metric_copies_a_persistent_extractor_buffer():
    class Buffered(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("out", torch.empty(20, 4))

        def forward(self, x):
            self.out.copy_(x)
            return self.out

    real, fake = _data()
    metric = PrecisionRecall(feature_extractor=Buffered())
    for which, data in ((True, real), (False, fake)):
        for s in range(0, 40, 20):
            metric.update(data[s : s + 20], real=which)
    assert metric.compute()["precision"] == F.precision_recall(real, fake)[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_compute_on_cpu_accepts_gpu_batches():
    real, fake = _data()
    metric = PrecisionRecall(compute_on_cpu=True)
    for which, data in ((True, real), (False, fake)):
        for s in range(0, 40, 20):
            metric.update(data[s : s + 20].cuda(), real=which)
    assert float(metric.compute()["precision"]) == float(F.precision_recall(real, fake)[0])


def test_zero_dim_tensor_options_are_numbers():
    """A quantile or median of an audit is the natural threshold: 0-d tensors used to be refused."""
    real, fake = _data()
    audit = F.audit_samples(real, fake)
    q = audit["copy_ratio"].quantile(0.25)
    kept_t, mask_t = F.filter_fake(
        fake,
        audit,
        copy_ratio=q,
        fidelity="realism",
        min_realism=audit["realism"].median(),
        max_alpha=torch.tensor(0.9),
    )
    kept_f, mask_f = F.filter_fake(
        fake,
        audit,
        copy_ratio=float(q),
        fidelity="realism",
        min_realism=float(audit["realism"].median()),
        max_alpha=0.9,
    )
    assert torch.equal(mask_t, mask_f) and 0 < int(mask_t.sum()) < 40
    assert torch.equal(
        F.filter_fake(fake, audit, fidelity="realism", min_realism=float("inf"))[1], audit["realism"] == float("inf")
    )
    assert F.precision_recall(real, fake, k=torch.tensor(4)) == F.precision_recall(real, fake, k=4)
    assert F.precision_recall(real, fake, k=np.array(4)) == F.precision_recall(real, fake, k=4)
    with pytest.raises(ValueError, match="`k` to be a positive integer, but got 4.0"):
        F.precision_recall(real, fake, k=torch.tensor(4.0))


def test_huge_numbers_are_value_errors_with_a_short_message():
    """An int beyond the float range escaped as OverflowError without the argument's name."""
    with pytest.raises(ValueError, match=r"`beta` to be a positive finite number, but got 1000+\.\.\.$"):
        F.prd_f_beta([0.5], [0.5], beta=10**400)
    with pytest.raises(ValueError, match="`num_angles`"):
        F.prd_from_histograms([0.5, 0.5], [1.0, 0.0], num_angles=10**400)


def test_reversed_and_big_endian_arrays_are_features():
    real, fake = _data()
    a, b = real.numpy(), fake.numpy()
    assert F.precision_recall(a[::-1], b[:, ::-1]) == F.precision_recall(np.flip(a, 0).copy(), np.flip(b, 1).copy())
    assert F.density_coverage(a.astype(">f4"), b.astype(">f8")) == F.density_coverage(a, b.astype(np.float64))


def test_huge_finite_features_are_accepted_and_bad_values_still_found():
    """The finiteness check sums first (a finite sum proves every value finite); a sum that
    overflows must fall back to the elementwise test, not reject finite features."""
    from lightning_prd.functional.engine.inputs import as_features

    huge = torch.full((10, 3), 3e38)
    assert torch.equal(as_features(huge, "real"), huge)
    opposite = torch.randn(10, 3)
    opposite[0, 0], opposite[4, 2] = float("inf"), float("-inf")  # their sum is NaN, not a cancellation
    with pytest.raises(ValueError, match="2 of its 10 rows hold NaN or Inf"):
        as_features(opposite, "real")


def test_device_mismatch_message_without_a_gpu():
    """The device rule itself, checked on stand-ins (the CUDA variants above run where a GPU is)."""
    from types import SimpleNamespace

    from lightning_prd.functional.engine.inputs import check_pair

    real = SimpleNamespace(shape=(5, 4), device=torch.device("cpu"))
    fake = SimpleNamespace(shape=(6, 4), device=torch.device("cuda", 0))
    with pytest.raises(ValueError, match="`real` and `fake` on the same device, but got cpu and cuda:0"):
        check_pair(real, fake)
