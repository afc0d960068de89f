"""Clipped density/coverage and symmetric precision/recall on every surface: GenerativeMetrics,
PRDCallback, the CLI tables and ``--json``."""

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

KEYS = ("clipped_density", "clipped_coverage", "sym_precision", "sym_recall")
REAL = torch.randn(120, 3, generator=torch.Generator().manual_seed(0))
FAKE = 1.3 * torch.randn(90, 3, generator=torch.Generator().manual_seed(1)) + 0.2


def _want(**kw):
    clip = F.clipped_density_coverage(REAL, FAKE, k=kw.get("k_clip", 5))
    sym = F.symmetric_precision_recall(REAL, FAKE, k=kw.get("k_sym", 5))
    return [float(v) for v in (*clip, *sym)]


def test_metric_class_switches_and_equal_to_functions():
    m = GenerativeMetrics(prd=False, alpha_beta=False, clipped=True, symmetric=True)
    for part in (REAL[:50], REAL[50:]):
        m.update(part, real=True)
    for part in (FAKE[:31], FAKE[31:]):
        m.update(part, real=False)
    out = m.compute()
    assert [float(out[k]) for k in KEYS] == _want()
    m.reset()  # the real radii and neighbours are kept (reset_real_features=False) or rebuilt: same values
    m.update(REAL, real=True)
    m.update(FAKE, real=False)
    assert [float(m.compute()[k]) for k in KEYS] == _want()
    kept = GenerativeMetrics(
        prd=False, alpha_beta=False, clipped=dict(k=3), symmetric=dict(k=2), reset_real_features=False
    )
    kept.update(REAL, real=True)
    for _ in range(2):  # the second compute reuses the cached real side
        kept.update(FAKE, real=False)
        assert [float(kept.compute()[k]) for k in KEYS] == _want(k_clip=3, k_sym=2)
        kept.reset()
    off = GenerativeMetrics(prd=False, alpha_beta=False)  # off by default
    off.update(REAL, real=True)
    off.update(FAKE, real=False)
    assert not set(KEYS) & set(off.compute())
    with pytest.raises(ValueError, match="`clipped`"):
        GenerativeMetrics(clipped="yes")
    with pytest.raises(ValueError, match="symmetric\\['k'\\]"):
        GenerativeMetrics(symmetric=dict(k=0))


class _Gen(GaussianSampler):
    dim, scale = 3, 1.3


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_callback_logs_the_keys(tmp_path):
    cb = PRDCallback(REAL, num_samples=90, metric=dict(prd=False, alpha_beta=False, clipped=True, symmetric=True))
    trainer = quiet_trainer(tmp_path, [cb])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(_Gen())
    assert {f"prd/{k}" for k in KEYS} <= set(trainer.callback_metrics)
    assert all(0.0 <= cb.history[-1][k] <= 1.0 for k in KEYS)


@pytest.fixture
def feature_files(tmp_path):
    np.save(tmp_path / "real.npy", REAL.numpy())
    np.save(tmp_path / "fake.npy", FAKE.numpy())
    np.save(tmp_path / "fake2.npy", (0.5 * FAKE).numpy())
    return tmp_path


def test_cli_evaluate_and_compare(feature_files, capfd):
    base = ["evaluate", "--real", str(feature_files / "real.npy"), "--fake", str(feature_files / "fake.npy")]
    base += ["--no-prd", "--no-alpha-beta", "-q"]
    out = feature_files / "s.json"
    assert main([*base, "--clipped", "--symmetric", "--json", str(out)]) == 0
    table = capfd.readouterr().out
    got = json.loads(out.read_text())
    for key, value in zip(KEYS, _want()):
        assert got["scores"][key] == pytest.approx(value, abs=1e-7)
        assert key in table and direction_label(key) == "higher"
    assert got["settings"]["clipped"] == {"k": 5} and got["settings"]["symmetric"] == {"k": 5}
    assert main([*base, "--json", str(out)]) == 0  # off by default
    assert not set(KEYS) & set(json.loads(out.read_text())["scores"])
    argv = ["compare", "--real", str(feature_files / "real.npy"), "--fake", str(feature_files / "fake.npy")]
    argv += [str(feature_files / "fake2.npy"), "--no-prd", "--no-alpha-beta", "--clipped", "--symmetric", "-q"]
    assert main(argv) == 0
    table = capfd.readouterr().out
    assert all(key in table for key in KEYS)
    only = ["evaluate", "--real", str(feature_files / "real.npy"), "--fake", str(feature_files / "fake.npy")]
    assert main([*only, "--only", "frechet", "--clipped", "--symmetric"]) == 1
    assert "--clipped, --symmetric asks for more" in capfd.readouterr().err
