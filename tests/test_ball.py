"""The ``ball`` option of the k-NN metrics: ``"open"`` equals the ``prdc`` package exactly.

``prdc.compute_prdc`` (Naeem et al.'s code) tests membership with a strict ``d < r`` and uses
one ``nearest_k`` for all four scores; ``ball="open"`` must give the same counts on every tile
path, on tied data (integer grids, copies, partial copies, duplicates, identical points) as well
as on tie-free data, with N != M. The tied sets are small integers or multiples of 2^-8 of
moderate size, so every float64 distance prdc forms (by sklearn's GEMM) is exact and its ties
are the true ties: equality is then exact, not up to rounding. Scores are compared as counts
(precision * M, recall * N, density * k * M, coverage * N), rounded to integers.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import prdc
import prdc.prdc as prdc_module
import pytest
import torch

from lightning_prd import DensityCoverage, GenerativeMetrics, PrecisionRecall
from lightning_prd.cli import main
from lightning_prd.functional import density_coverage, generative_metrics, precision_recall
from lightning_prd.functional.uncertainty import score_spread

from ddp_utils import run_ddp

NAMES = ("precision", "recall", "density", "coverage")


def _dyadic(rng, n, d, scale=1.0, offset=0.0):
    """Gaussian-like values rounded to multiples of 2^-8: exact in float32 and in float64 GEMMs."""
    return offset + np.round(rng.normal(size=(n, d)) * scale * 256) / 256


def make_case(name):
    rng = np.random.default_rng(CASES.index(name))
    if name == "grid":  # integer grid: many ties at every radius
        return rng.integers(-3, 4, (130, 3)), rng.integers(-3, 4, (95, 3))
    if name == "copy":
        x = _dyadic(rng, 110, 8)
        return x, x.copy()
    if name == "copy far from the origin":
        x = _dyadic(rng, 90, 6, offset=1000.0)
        return x, x[::-1].copy()
    if name == "partial copy":
        x = _dyadic(rng, 120, 8)
        return x, np.concatenate([x[:70], _dyadic(rng, 30, 8)])
    if name == "duplicates":  # repeated rows within each set, some shared across sets
        base = rng.integers(-4, 5, (50, 4))
        real = np.repeat(base, rng.integers(1, 4, 50), axis=0)
        fake = np.concatenate([np.repeat(base[:20], 2, axis=0), rng.integers(-4, 5, (25, 4))])
        return real, fake
    if name == "identical":
        return np.full((40, 5), 3.0), np.full((27, 5), 3.0)
    if name == "tie-free":
        return rng.normal(size=(150, 16)), 1.2 * rng.normal(size=(105, 16))
    raise KeyError(name)


CASES = ("grid", "copy", "copy far from the origin", "partial copy", "duplicates", "identical", "tie-free")
#: tile paths: (LIGHTNING_PRD_SCREEN, dtype, block_bytes)
PATHS = {
    "bf16-screen": ("1", None, None),
    "float32-tiles": ("0", None, None),
    "float64": ("0", torch.float64, None),
    "small-blocks-screen": ("1", None, 4096),
    "small-blocks-float32": ("0", None, 4096),
}


@pytest.fixture(params=sorted(PATHS))
def path(request, monkeypatch):
    screen, dtype, block = PATHS[request.param]
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", screen)
    kw = {}
    if dtype is not None:
        kw["dtype"] = dtype
    if block is not None:
        kw["block_bytes"] = block
    return kw


def prdc_scores(real, fake, k):
    with contextlib.redirect_stdout(io.StringIO()):  # prdc prints the set sizes
        out = prdc.compute_prdc(np.asarray(real, np.float64), np.asarray(fake, np.float64), nearest_k=k)
    return {n: float(out[n]) for n in NAMES}


def counts(scores, n, m, k):
    """The integer counts behind the four scores."""
    scale = {"precision": m, "recall": n, "density": k * m, "coverage": n}
    return {name: round(float(scores[name]) * scale[name]) for name in NAMES if name in scores}


def _t(x):
    return torch.as_tensor(np.asarray(x, np.float32))


@pytest.mark.parametrize("case", CASES)
def test_open_equals_prdc_on_every_path(case, path):
    real, fake = make_case(case)
    n, m = len(real), len(fake)
    for k in (1, 3, 5):
        want = prdc_scores(real, fake, k)
        got = generative_metrics(
            _t(real), _t(fake), k_precision_recall=k, k_density_coverage=k, ball="open", frechet=False, **path
        )
        assert counts(got, n, m, k) == counts(want, n, m, k), (case, k)
        if "dtype" in path:  # float64 scores: the same value as prdc's up to its own rounding
            for name in NAMES:
                assert float(got[name]) == pytest.approx(want[name], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("case", ["grid", "partial copy", "duplicates", "tie-free"])
def test_functions_and_metric_classes_equal_prdc(case, path):
    real, fake = make_case(case)
    n, m, k = len(real), len(fake), 3
    want = counts(prdc_scores(real, fake, k), n, m, k)
    p, r = precision_recall(_t(real), _t(fake), k=k, ball="open", **path)
    d, c = density_coverage(_t(real), _t(fake), k=k, ball="open", **path)
    assert counts(dict(zip(NAMES, (p, r, d, c))), n, m, k) == want
    metric_kw = path  # the Metric classes take the same dtype and block_bytes
    for cls in (PrecisionRecall, DensityCoverage):
        metric = cls(k=k, ball="open", **metric_kw)
        metric.update(_t(real)[:50], real=True)
        metric.update(_t(real)[50:], real=True)
        metric.update(_t(fake), real=False)
        out = metric.compute()
        assert counts(out, n, m, k) == {key: want[key] for key in out}
    metric = GenerativeMetrics(k, k, prd=False, alpha_beta=False, frechet=False, ball="open", **metric_kw)
    metric.update(_t(real), real=True)
    metric.update(_t(fake), real=False)
    assert counts(metric.compute(), n, m, k) == want


@pytest.mark.parametrize("case", ["grid", "duplicates", "identical"])
def test_radii_equal_prdc(case):
    """The radii are convention-free: NND_k (the point excluded, duplicates at 0) equals prdc's
    (k + 1)-th smallest distance of a row that includes the point itself."""
    from lightning_prd.functional.engine.one_pass import knn_pass

    real, fake = make_case(case)
    for k in (1, 3, 5):
        res = knn_pass(_t(real), _t(fake), member_ks=[k], recall_ks=[k], ball="open")
        # the square root taken as prdc takes it (NumPy's, correctly rounded): torch's vectorised float64
        # sqrt on some CPUs is within 1 ulp, not correctly rounded, and the radii compared are the squared ones
        got_real, got_fake = np.sqrt(res.real.sq_radii[k].numpy()), np.sqrt(res.fake_sq_radii[k].numpy())
        assert np.array_equal(got_real, prdc_module.compute_nearest_neighbour_distances(real.astype(np.float64), k))
        assert np.array_equal(got_fake, prdc_module.compute_nearest_neighbour_distances(fake.astype(np.float64), k))


def test_copy_and_identical_anchors():
    """Hand-derived: a copy of tie-free data gives density 1 (open) vs (k + 1) / k (closed) at
    every k; identical points give 0 (open) vs precision = recall = coverage = 1 and density = N / k
    (every fake in all N balls)."""
    real, _ = make_case("tie-free")
    x = _t(real)
    for k in (1, 3, 5):
        assert [float(v) for v in density_coverage(x, x, k=k, ball="open")] == [1.0, 1.0]
        assert float(density_coverage(x, x, k=k)[0]) == pytest.approx((k + 1) / k, rel=1e-6)
    real, fake = make_case("identical")
    opened = generative_metrics(_t(real), _t(fake), k_precision_recall=5, k_density_coverage=5, ball="open")
    closed = generative_metrics(_t(real), _t(fake), k_precision_recall=5, k_density_coverage=5, ball="closed")
    assert [float(opened[n]) for n in NAMES] == [0.0, 0.0, 0.0, 0.0]
    assert [float(closed[n]) for n in NAMES] == [1.0, 1.0, 40 / 5, 1.0]


@pytest.mark.parametrize("case", ["copy", "grid", "duplicates"])
def test_other_scores_do_not_depend_on_ball(case, both_tile_paths):
    """Realism, authenticity, alpha-precision and beta-recall (whose k = 5 balls are shared with
    density's in the pass) are the same with open balls; closed is the default."""
    real, fake = (_t(a) for a in make_case(case))
    kw = dict(k_precision_recall=5, k_density_coverage=5, alpha_beta=True, frechet=False)
    default = generative_metrics(real, fake, **kw)
    closed, opened = (generative_metrics(real, fake, **kw, ball=b) for b in ("closed", "open"))
    for name in default:
        torch.testing.assert_close(default[name], closed[name], rtol=0, atol=0)
    for name in ("realism", "authenticity", "alpha_precision", "beta_recall", "alpha_precision_curve"):
        torch.testing.assert_close(opened[name], closed[name], rtol=0, atol=0)
    torch.testing.assert_close(opened["beta_recall_curve"], closed["beta_recall_curve"], rtol=0, atol=0)


def test_per_sample_and_error_bars_follow_ball():
    real, fake = (_t(a) for a in make_case("partial copy"))
    n, m, k = len(real), len(fake), 3
    want = counts(prdc_scores(real.double().numpy(), fake.double().numpy(), k), n, m, k)
    out = generative_metrics(
        real, fake, k_precision_recall=k, k_density_coverage=k, ball="open", per_sample=True, error_bars=2
    )
    assert int(out["inside_precision"].sum()) == want["precision"]
    assert int(out["covered"].sum()) == want["coverage"]
    spread = score_spread(real, fake, k_precision_recall=k, k_density_coverage=k, num_splits=2, ball="open")
    assert counts({name: spread[name]["value"] for name in NAMES}, n, m, k) == want
    for name in NAMES:
        assert float(out[f"{name}_std"]) == pytest.approx(float(spread[name]["std"]), rel=1e-6)
    closed = score_spread(real, fake, k_precision_recall=k, k_density_coverage=k, num_splits=2)
    assert float(closed["density"]["value"]) > float(spread["density"]["value"])


@pytest.mark.parametrize("bad", ["Open", "strict", "", None, True, 1])
def test_bad_ball_names_the_argument(bad):
    x = torch.randn(10, 2)
    calls = [
        lambda: precision_recall(x, x, ball=bad),
        lambda: density_coverage(x, x, ball=bad),
        lambda: generative_metrics(x, x, ball=bad),
        lambda: PrecisionRecall(ball=bad),
        lambda: DensityCoverage(ball=bad),
        lambda: GenerativeMetrics(ball=bad),
        lambda: score_spread(x, x, num_splits=2, k_precision_recall=1, k_density_coverage=1, ball=bad),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"`ball`.*'closed' or 'open'.*" + repr(bad)[:3]):
            call()


@pytest.mark.parametrize("command", ["evaluate", "compare"])
def test_cli_ball_open_changes_density_on_a_copy(tmp_path, command):
    real, _ = make_case("tie-free")
    np.save(tmp_path / "real.npy", real.astype(np.float32))
    np.save(tmp_path / "fake.npy", real.astype(np.float32))
    density = {}
    for ball in ("closed", "open"):
        out = tmp_path / f"{ball}.json"
        args = [command, "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy")]
        args += ["--no-prd", "--no-alpha-beta", "-q", "--json", str(out), "--ball", ball]
        assert main(args) == 0
        payload = json.loads(out.read_text())
        runs = payload["results"] if command == "compare" else [payload]
        assert payload["settings"]["ball"] == ball
        density[ball] = runs[0]["scores"]["density"]
    assert density["open"] == 1.0 and density["closed"] == pytest.approx(6 / 5, rel=1e-6)


def test_cli_rejects_unknown_ball(tmp_path, capsys):
    assert main(["evaluate", "--real", "r.npy", "--fake", "f.npy", "--ball", "half"]) == 2
    assert "argument --ball: invalid choice: 'half'" in capsys.readouterr().err


@pytest.mark.parametrize("strict", [False, True])
def test_members_on_a_zero_width_bound(strict):
    """A pair exactly on the radius is never "surely inside" an open ball, even when the rounding
    bound has zero width (radius 0, tile value 0): closed counts it, open does not."""
    from lightning_prd.functional.knn.bounds import Bound
    from lightning_prd.functional.knn.members import Members, rows_inside

    sq = torch.tensor([[0.0, 0.0], [4.0, 1.0]])
    thr = torch.tensor([0.0, 1.0], dtype=torch.float64)
    bound = Bound(0.0, None, torch.zeros(2))

    def exact(r, c):
        return sq[r, c].double()

    members = Members(sq, thr, bound, exact, strict=strict)
    want = [0, 0] if strict else [1, 2]  # ball 0 (radius 0) holds both columns at distance 0
    assert members.count_per_col().tolist() == want
    inside = rows_inside(sq, thr, bound, exact, torch.zeros(2, dtype=torch.bool), None, strict=strict)
    assert inside.tolist() == ([True, False] if strict else [True, True])  # row 0: 0 < 1 in ball 1


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore:.*LeafSpec.*")
def test_callback_logs_open_ball_scores(tmp_path):
    """``PRDCallback(metric=dict(ball="open"))``: a generator that returns the real set logs
    density 1 (open) instead of 1.2 (closed, k = 5)."""

    from lightning_prd import PRDCallback

    from tiny_modules import TinyTrainable, quiet_trainer

    real = _t(make_case("tie-free")[0])
    logged = {}
    for ball in ("open", "closed"):
        cb = PRDCallback(
            real,
            sample_fn=lambda module, n: real[:n],
            num_samples=len(real),
            batch_size=len(real),
            metric=dict(ball=ball, prd=False, alpha_beta=False, frechet=False),
        )
        trainer = quiet_trainer(tmp_path, [cb])
        trainer.fit(TinyTrainable())
        logged[ball] = {n: float(trainer.callback_metrics[f"prd/{n}"]) for n in NAMES}
    assert logged["open"] == dict.fromkeys(NAMES, 1.0)
    assert logged["closed"]["density"] == pytest.approx(6 / 5, rel=1e-6)


# ---------------------------------------------------------------------------- DDP: open balls on tied data
DDP_G = torch.Generator().manual_seed(11)
DDP_REAL = torch.randint(-3, 4, (97, 4), generator=DDP_G).float()
DDP_FAKE = torch.cat([DDP_REAL[:40], DDP_REAL[:10], torch.randint(-3, 4, (23, 4), generator=DDP_G).float()])
#: (real rows, fake rows) of rank 0 and rank 1
DDP_SPLIT = [((0, 70), (0, 9)), ((70, 97), (9, 73))]
DDP_K = 3


def _ddp_metric(ball="open", alpha_beta=True):
    return GenerativeMetrics(
        DDP_K, DDP_K, prd=False, alpha_beta=alpha_beta, frechet=False, ball=ball, block_bytes=12000
    )


def _ddp_rank(rank, world):
    (r0, r1), (f0, f1) = DDP_SPLIT[rank]
    m = _ddp_metric()
    m.update(DDP_REAL[r0:r1], real=True)
    m.update(DDP_FAKE[f0:f1], real=False)
    return {k: v.clone() for k, v in m.compute().items()}


@pytest.mark.parametrize("screen", ["1", "0"], ids=["bf16-screen", "float32-tiles"])
def test_ddp_open_balls_equal_one_process_and_prdc(screen, monkeypatch):
    """Tied data (a partial copy of an integer-valued real set, with duplicates) split unevenly over 2 gloo
    processes, small tiles so each rank computes several."""
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", screen)
    single = _ddp_metric()
    single.update(DDP_REAL, real=True)
    single.update(DDP_FAKE, real=False)
    ref = single.compute()
    n, m = len(DDP_REAL), len(DDP_FAKE)
    want = counts(prdc_scores(DDP_REAL.double().numpy(), DDP_FAKE.double().numpy(), DDP_K), n, m, DDP_K)
    assert counts(ref, n, m, DDP_K) == want
    closed = _ddp_metric(ball="closed", alpha_beta=False)
    closed.update(DDP_REAL, real=True)
    closed.update(DDP_FAKE, real=False)
    assert float(ref["density"]) < float(closed.compute()["density"])  # the ties are on the radii
    for out in run_ddp(_ddp_rank):
        for name in (*NAMES, "alpha_precision", "beta_recall", "authenticity"):
            assert float(out[name]) == float(ref[name]), name
