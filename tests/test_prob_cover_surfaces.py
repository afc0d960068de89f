"""Probabilistic P&R and PR-cover on every surface: GenerativeMetrics, PRDCallback, the CLI tables."""

import json
import warnings

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics, PRDCallback
from lightning_prd import functional as F
from lightning_prd.cli import main
from lightning_prd.scores import direction_label

from tiny_modules import GaussianSampler, quiet_trainer

NEW_KEYS = ("p_precision", "p_recall", "precision_cover", "recall_cover")
REAL = torch.randn(120, 3, generator=torch.Generator().manual_seed(0))
FAKE = 1.2 * torch.randn(90, 3, generator=torch.Generator().manual_seed(1))


def test_metric_class_switches_and_equal_to_functions():
    m = GenerativeMetrics(prd=False, alpha_beta=False, probabilistic=True, pr_cover=True)
    m.update(REAL[:70], real=True)
    m.update(REAL[70:], real=True)
    m.update(FAKE, real=False)
    out = m.compute()
    pp, pr = F.probabilistic_precision_recall(REAL, FAKE)
    pc, rc = F.precision_recall_cover(REAL, FAKE)
    assert [float(out[k]) for k in NEW_KEYS] == [float(v) for v in (pp, pr, pc, rc)]
    default = GenerativeMetrics(prd=False, alpha_beta=False)  # on by default
    default.update(REAL, real=True)
    default.update(FAKE, real=False)
    assert [float(default.compute()[k]) for k in NEW_KEYS] == [float(out[k]) for k in NEW_KEYS]
    off = GenerativeMetrics(prd=False, alpha_beta=False, probabilistic=False, pr_cover=False)
    off.update(REAL, real=True)
    off.update(FAKE, real=False)
    assert not set(NEW_KEYS) & set(off.compute())


def test_metric_class_options_and_errors():
    m = GenerativeMetrics(prd=False, alpha_beta=False, probabilistic=dict(k=2, a=1.5), pr_cover=dict(k=2, C=2))
    m.update(REAL, real=True)
    m.update(FAKE, real=False)
    out = m.compute()
    assert float(out["p_precision"]) == float(F.probabilistic_precision_recall(REAL, FAKE, k=2, a=1.5)[0])
    assert float(out["recall_cover"]) == float(F.precision_recall_cover(REAL, FAKE, k=2, C=2)[1])
    with pytest.raises(ValueError, match="probabilistic"):
        GenerativeMetrics(probabilistic=dict(kk=3))
    with pytest.raises(ValueError, match="`a`"):
        GenerativeMetrics(probabilistic=dict(a=-1.0))
    with pytest.raises(ValueError, match="`C`"):
        GenerativeMetrics(pr_cover=dict(C=0))
    with pytest.raises(ValueError, match="pr_cover"):
        GenerativeMetrics(pr_cover="yes")


class _Gen(GaussianSampler):
    dim, scale = 3, 1.2


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_callback_logs_the_new_keys(tmp_path):
    cb = PRDCallback(
        REAL,
        num_samples=90,
        metric=dict(prd=False, alpha_beta=False, probabilistic=dict(k=3), pr_cover=dict(k=2)),
    )
    trainer = quiet_trainer(tmp_path, [cb])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(_Gen())
    logged = set(trainer.callback_metrics)
    assert {f"prd/{k}" for k in NEW_KEYS} <= logged
    assert 0.0 <= cb.history[-1]["p_precision"] <= 1.0 and 0.0 <= cb.history[-1]["recall_cover"] <= 1.0


@pytest.fixture
def feature_files(tmp_path):
    np.save(tmp_path / "real.npy", REAL.numpy())
    np.save(tmp_path / "fake.npy", FAKE.numpy())
    np.save(tmp_path / "fake2.npy", (0.5 * FAKE).numpy())
    return tmp_path


def test_cli_evaluate_columns_and_flags(feature_files, capfd):
    base = ["evaluate", "--real", str(feature_files / "real.npy"), "--fake", str(feature_files / "fake.npy")]
    out = feature_files / "s.json"
    assert main([*base, "--no-prd", "--no-alpha-beta", "--probabilistic", "--pr-cover", "--json", str(out), "-q"]) == 0
    table = capfd.readouterr().out
    got = json.loads(out.read_text())
    for key, value in zip(
        NEW_KEYS, (*F.probabilistic_precision_recall(REAL, FAKE), *F.precision_recall_cover(REAL, FAKE))
    ):
        assert got["scores"][key] == pytest.approx(float(value), abs=1e-7)
        assert key in table and direction_label(key) == "higher"
    assert got["settings"]["probabilistic"] == dict(k=4, a=1.2, terms="all") and got["settings"]["pr_cover"]["C"] == 3
    assert main([*base, "--no-prd", "--no-alpha-beta", "--no-probabilistic", "--json", str(out), "-q"]) == 0
    scores = json.loads(out.read_text())["scores"]
    assert "p_precision" not in scores and "precision_cover" in scores
    assert main([*base, "--no-prd", "--no-alpha-beta", "--no-pr-cover", "--json", str(out), "-q"]) == 0
    scores = json.loads(out.read_text())["scores"]
    assert "p_precision" in scores and "precision_cover" not in scores
    assert main([*base, "--no-prd", "--no-alpha-beta", "--json", str(out), "-q"]) == 0  # both on by default
    assert set(NEW_KEYS) <= set(json.loads(out.read_text())["scores"])
    argv = [*base, "--no-prd", "--no-alpha-beta", "--no-probabilistic", "--no-pr-cover", "--json", str(out), "-q"]
    assert main(argv) == 0
    scores = json.loads(out.read_text())["scores"]
    assert "p_precision" not in scores and "precision_cover" not in scores


def test_cli_compare_columns(feature_files, capfd):
    argv = ["compare", "--real", str(feature_files / "real.npy"), "--fake"]
    argv += [str(feature_files / "fake.npy"), str(feature_files / "fake2.npy"), "--no-prd", "--no-alpha-beta"]
    argv += ["--probabilistic", "--pr-cover", "-q"]
    assert main(argv) == 0
    table = capfd.readouterr().out
    for key in NEW_KEYS:
        assert key in table
