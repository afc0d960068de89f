"""MIND (Berthet et al. 2026): against a float64 NumPy oracle written from the paper's formula (the same seeded
directions and subsample, drawn with torch's generator in torch-fidelity's order), a worked example, its options,
and the function, the Metric and the command line giving one value. DDP equal to one process is checked by
``tests/test_family_harness.py`` with every registered family.
"""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics
from lightning_prd.functional.engine.families import get_family
from lightning_prd.functional.families.mind import mind_distance

#: only the k-NN scores that are on by default switched off: the function's MIND alone
ONLY_MIND = {
    "k_precision_recall": None,
    "k_density_coverage": None,
    "realism": False,
    "authenticity": False,
    "frechet": False,
    "probabilistic": False,
    "pr_cover": False,
}


def oracle(real, fake, num_projections=1000, seed=2020):
    """float64 MIND from the formula: alpha / M * sum_i mean_j (sort(X u_i)_j - sort(Y u_i)_j)^2, alpha = 3 d,
    the larger set subsampled to the smaller by ``randperm(size)[:n]`` and then the Gaussian directions, both from
    one CPU generator seeded with ``seed``."""
    real, fake = np.asarray(real, dtype=np.float64), np.asarray(fake, dtype=np.float64)
    generator = torch.Generator().manual_seed(seed)
    n, d = min(len(real), len(fake)), real.shape[1]
    if len(real) > n:
        real = real[torch.randperm(len(real), generator=generator)[:n].numpy()]
    if len(fake) > n:
        fake = fake[torch.randperm(len(fake), generator=generator)[:n].numpy()]
    u = torch.randn(num_projections, d, generator=generator, dtype=torch.float32).numpy().astype(np.float64)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    gaps = np.sort(real @ u.T, axis=0) - np.sort(fake @ u.T, axis=0)
    return 3.0 * d * np.mean(np.mean(gaps**2, axis=0))


def sets(num_real, num_fake, d, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    real = torch.randn(num_real, d, generator=g, dtype=torch.float64)
    fake = 1.2 * torch.randn(num_fake, d, generator=g, dtype=torch.float64) + 0.3
    return real.to(dtype), fake.to(dtype)


@pytest.mark.parametrize("num_real,num_fake", [(400, 400), (500, 260), (230, 610)], ids=["equal", "real", "fake"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_equals_the_float64_oracle_at_float32_rounding(num_real, num_fake, dtype):
    real, fake = sets(num_real, num_fake, 24, seed=num_real + num_fake, dtype=dtype)
    for options in ({}, {"num_projections": 300, "seed": 11}):
        want = oracle(real, fake, **options)
        got = generative_metrics(real, fake, mind=options or True, **ONLY_MIND)["mind"]
        assert got.dtype == torch.float64 and got.dim() == 0
        assert float(got) == pytest.approx(want, rel=1e-6), options
        assert float(mind_distance(real, fake, **options)) == float(got)


def test_a_worked_example_in_one_dimension():
    # d = 1: every direction is +1 or -1, so each sorted gap is 1 and MIND = 3 * 1 * 1
    real = torch.tensor([[0.0], [1.0], [2.0], [5.0]])
    assert float(mind_distance(real, real + 1.0)) == 3.0
    # the larger set is subsampled: from a constant set every subsample is the same
    assert float(mind_distance(torch.full((7, 1), 2.0), torch.zeros(3, 1))) == 3.0 * 4.0


def test_identical_sets_and_permutations_score_zero():
    real, _ = sets(300, 1, 16)
    assert float(mind_distance(real, real)) == 0.0
    assert float(mind_distance(real, real[torch.randperm(300, generator=torch.Generator().manual_seed(3))])) == 0.0


def test_the_value_does_not_depend_on_which_set_is_real():
    real, fake = sets(350, 200, 8)
    assert float(mind_distance(real, fake)) == float(mind_distance(fake, real))


def test_the_seed_and_the_number_of_projections_change_the_value():
    real, fake = sets(300, 300, 16)
    default = float(mind_distance(real, fake))
    assert default == float(mind_distance(real, fake, num_projections=1000, seed=2020))
    assert float(mind_distance(real, fake, seed=2021)) != default
    assert float(mind_distance(real, fake, num_projections=999)) != default
    assert float(mind_distance(real, fake, seed=2021)) == pytest.approx(oracle(real, fake, seed=2021), rel=1e-6)


def test_the_record_declares_its_score_options_and_flag():
    family = get_family("mind")
    assert family.outputs == {"mind": "lower"}
    assert family.defaults == {"num_projections": 1000, "seed": 2020}
    assert family.flag == "--mind" and family.docs == "metrics/mind.md"


@pytest.mark.parametrize(
    "options,message",
    [
        ({"num_projections": 0}, "Expected argument `num_projections` to be a positive integer, but got 0"),
        ({"num_projections": 2.5}, "Expected argument `num_projections` to be a positive integer, but got 2.5"),
        ({"num_projections": True}, "Expected argument `num_projections` to be a positive integer, but got True"),
        ({"seed": -1}, r"Expected argument `seed` to be an integer in \[0, .*\], but got -1"),
        ({"seed": "abc"}, r"Expected argument `seed` to be an integer in \[0, .*\], but got 'abc'"),
        ({"projections": 10}, r"Expected argument `mind` to hold only \['num_projections', 'seed'\]"),
    ],
)
def test_bad_options_are_refused_naming_the_option(options, message):
    real, fake = sets(50, 50, 4)
    with pytest.raises(ValueError, match=message):
        generative_metrics(real, fake, mind=options)
    with pytest.raises(ValueError, match=message):
        GenerativeMetrics(mind=options)
    if "projections" not in options:
        with pytest.raises(ValueError, match=message):
            mind_distance(real, fake, **options)


def test_the_metric_with_batched_updates_equals_the_function():
    real, fake = sets(410, 290, 12)
    want = float(generative_metrics(real, fake, mind=True)["mind"])
    metric = GenerativeMetrics(mind=True, k_precision_recall=None, k_density_coverage=None)
    for part in torch.split(real, 97):
        metric.update(part, real=True)
    for part in torch.split(fake, 64):
        metric.update(part, real=False)
    assert float(metric.compute()["mind"]) == want == float(mind_distance(real, fake))


def test_reduced_precision_settings_do_not_move_the_value():
    # the CPU's stand-ins for a GPU's TF32 and bf16-mixed: products stay IEEE float32
    real, fake = sets(300, 200, 64)
    want = float(mind_distance(real, fake))
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = float(generative_metrics(real, fake, mind=True, **ONLY_MIND)["mind"])
    finally:
        torch.set_float32_matmul_precision(before)
    assert got == want


@pytest.mark.parametrize("words", [[], ["num_projections=200", "seed=5"]], ids=["defaults", "options"])
def test_the_command_line_gives_the_function_s_value(words, tmp_path):
    real, fake = sets(260, 180, 6)
    np.save(tmp_path / "real.npy", real.numpy())
    np.save(tmp_path / "fake.npy", fake.numpy())
    out = tmp_path / "out.json"
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), "-q"]
    assert main([*argv, "--mind", *words, "--json", str(out)]) == 0
    options = {"num_projections": 200, "seed": 5} if words else True
    want = float(generative_metrics(real, fake, mind=options)["mind"])
    assert json.loads(out.read_text())["scores"]["mind"] == want


def test_the_command_line_names_the_flag_and_the_option(tmp_path, capsys):
    real, fake = sets(40, 40, 3)
    np.save(tmp_path / "real.npy", real.numpy())
    np.save(tmp_path / "fake.npy", fake.numpy())
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), "-q"]
    assert main([*argv, "--mind", "num_projections=-3"]) != 0
    err = capsys.readouterr().err
    assert "--mind" in err and "`num_projections`" in err and "-3" in err


def test_equals_torch_fidelity_when_it_has_mind():
    try:
        reference = importlib.import_module("torch_fidelity.metric_mind")
    except Exception as err:  # noqa: BLE001 - torch-fidelity absent, or a release without MIND
        pytest.skip(f"torch_fidelity.metric_mind is not importable here ({type(err).__name__}: {err})")
    for num_real, num_fake in ((300, 300), (420, 250), (180, 330)):
        real, fake = sets(num_real, num_fake, 32, seed=num_real)
        for seed in (2020, 4):
            want = reference.mind_features_to_metric(
                fake, real, mind_num_projections=500, rng_seed=seed, cuda=False, verbose=False
            )[reference.KEY_METRIC_MIND]
            assert float(mind_distance(real, fake, num_projections=500, seed=seed)) == pytest.approx(want, rel=1e-6)
