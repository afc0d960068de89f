"""FD∞, the memorization panel (C_T, FLD, authenticity percentage) and per-class scores through
``generative_metrics`` and ``GenerativeMetrics``: equal to their own functions (each tested against its
float64 oracle in its own module), a held-out ``test`` set and class labels taken as a third role and a
label argument, bad input refused naming the argument, and DDP (2 gloo processes) equal to one process."""

import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import authenticity, generative_metrics
from lightning_prd.functional.data_copying import data_copying
from lightning_prd.functional.fld import feature_likelihood_divergence
from lightning_prd.functional.frechet_infinity import frechet_distance_infinity
from lightning_prd.functional.per_class import per_class_metrics

from ddp_utils import run_ddp

G = torch.Generator().manual_seed(21)
REAL = torch.randn(240, 6, generator=G, dtype=torch.float64)
TEST = torch.randn(150, 6, generator=G, dtype=torch.float64)
FAKE = torch.cat(
    [
        REAL[:90] + 1e-3 * torch.randn(90, 6, generator=G, dtype=torch.float64),
        1.2 * torch.randn(80, 6, generator=G, dtype=torch.float64),
    ]
)  # some copies, some fresh
CT = dict(cell_threshold=5, num_cells=3)
FLD = dict(num_epochs=3, batch_size=64)
FDI = dict(num_points=4, min_size=40)
OFF = dict(k_precision_recall=3, k_density_coverage=5, probabilistic=False, pr_cover=False)


def _close(a, b):
    return torch.allclose(a.double(), b.double(), rtol=1e-12, atol=1e-12, equal_nan=True)


def test_generative_metrics_equals_the_separate_functions():
    out = generative_metrics(REAL, FAKE, test=TEST, fd_infinity=FDI, data_copying=CT, fld=FLD, **OFF)
    fdi = frechet_distance_infinity(REAL, FAKE, **FDI)
    assert _close(out["frechet_distance_infinity"], fdi["frechet_distance_infinity"])
    ct = data_copying(REAL, FAKE, TEST, **CT)
    assert _close(out["ct"], ct["ct"]) and int(out["ct_cells"]) == int(ct["ct_cells"])
    fld = feature_likelihood_divergence(REAL, FAKE, TEST, **FLD)
    for key in ("fld", "fld_train", "fld_gap", "fld_nll_test", "fld_nll_train", "fld_nll_baseline"):
        assert _close(out[key], fld[key]), key
    # dgm-eval's percentage is 100 x the share of authentic samples
    assert _close(out["authenticity_percentage"], 100 * authenticity(REAL, FAKE).double())
    assert float(out["ct"]) < -3  # the copies show


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(data_copying=True), r"`test`.*`data_copying`.*got None"),
        (dict(fld=True), r"`test`.*`fld`.*got None"),
        (dict(test=TEST), r"no argument `test`.*`data_copying`, `fld`"),
        (dict(fd_infinity=dict(num_points=1), test=None), r"`num_points`.*an option of `fd_infinity`"),
        (dict(data_copying=dict(num_cells=0), test=TEST), r"`num_cells`.*an option of `data_copying`"),
        (dict(fld=dict(lr=-1.0), test=TEST), r"`lr`.*an option of `fld`"),
        (dict(fld=dict(epochs=3), test=TEST), r"`fld` to hold only"),
        (dict(data_copying=True, test=TEST[:, :4]), r"`test` to have the 6 features"),
    ],
)
def test_bad_options_and_test_sets_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        generative_metrics(REAL, FAKE, **OFF, **kwargs)


def test_metric_takes_the_test_set_as_a_third_role():
    m = GenerativeMetrics(data_copying=CT, fld=FLD, fd_infinity=FDI, prd=False, alpha_beta=False, **_metric_off())
    for x, role in (
        (REAL[:100], "real"),
        (REAL[100:], "real"),
        (FAKE, "fake"),
        (TEST[:70], "test"),
        (TEST[70:], "test"),
    ):
        m.update(x, role=role)
    out = m.compute()
    expected = generative_metrics(REAL, FAKE, test=TEST, fd_infinity=FDI, data_copying=CT, fld=FLD, **OFF)
    for key in ("ct", "fld", "fld_gap", "frechet_distance_infinity", "precision", "coverage"):
        assert _close(out[key], expected[key]), key
    with pytest.raises(ValueError, match="`role`"):
        GenerativeMetrics().update(TEST, role="test")  # no score asks for a test set
    with pytest.raises(ValueError, match="No test features"):
        bare = GenerativeMetrics(data_copying=True, prd=False, alpha_beta=False)
        bare.update(REAL, real=True)
        bare.update(FAKE, real=False)
        bare.compute()


def _metric_off():
    return dict(k_precision_recall=3, k_density_coverage=5, probabilistic=False, pr_cover=False)


CENTRES = 5.0 * torch.eye(6, dtype=torch.float64)[:3]
REAL_Y = torch.arange(3).repeat_interleave(60)
FAKE_Y = torch.tensor([0, 1]).repeat_interleave(50)  # class 2 is dropped by the model
REAL_C = CENTRES[REAL_Y] + torch.randn(180, 6, generator=G, dtype=torch.float64)
FAKE_C = CENTRES[FAKE_Y] + torch.randn(100, 6, generator=G, dtype=torch.float64)


def test_metric_per_class_names_the_dropped_class():
    m = GenerativeMetrics(per_class=True, prd=False, alpha_beta=False, **_metric_off())
    m.update(REAL_C[:100], real=True, labels=REAL_Y[:100])
    m.update(REAL_C[100:], real=True, labels=REAL_Y[100:])
    m.update(FAKE_C, real=False, labels=FAKE_Y)
    out = m.compute()
    assert int(out["lowest_coverage_class"]) == 2 and float(out["coverage_per_class"][2]) == 0.0
    expected = per_class_metrics(REAL_C, FAKE_C, real_labels=REAL_Y, fake_labels=FAKE_Y)
    for key, value in expected.items():
        assert torch.equal(out[key], value) or _close(out[key], value), key
    # the whole-set scores are still there, and equal generative_metrics on all rows
    assert _close(out["coverage"], generative_metrics(REAL_C, FAKE_C, **OFF)["coverage"])
    with pytest.raises(ValueError, match="`labels`.*got None"):
        m.update(FAKE_C, real=False)
    with pytest.raises(ValueError, match="no argument `labels`"):
        GenerativeMetrics().update(FAKE_C, real=False, labels=FAKE_Y)


def _rank(rank, world):
    m = GenerativeMetrics(per_class=True, data_copying=CT, prd=False, alpha_beta=False, **_metric_off())
    real_rows, fake_rows, test_rows = (
        [(0, 110), (110, 180)][rank],
        [(0, 37), (37, 100)][rank],
        [(0, 60), (60, 150)][rank],
    )
    m.update(REAL_C[slice(*real_rows)], real=True, labels=REAL_Y[slice(*real_rows)])
    m.update(FAKE_C[slice(*fake_rows)], real=False, labels=FAKE_Y[slice(*fake_rows)])
    m.update(TEST[slice(*test_rows)], role="test")
    return m.compute()


def test_ddp_equals_one_process():
    single = GenerativeMetrics(per_class=True, data_copying=CT, prd=False, alpha_beta=False, **_metric_off())
    single.update(REAL_C, real=True, labels=REAL_Y)
    single.update(FAKE_C, real=False, labels=FAKE_Y)
    single.update(TEST, role="test")
    expected = single.compute()
    for out in run_ddp(_rank):
        assert set(out) == set(expected)
        for key, value in expected.items():
            assert torch.equal(out[key], value) or _close(out[key], value), key
