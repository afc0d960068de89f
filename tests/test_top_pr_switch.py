"""The TopP&R family switch: ``generative_metrics(top_pr=...)``, ``GenerativeMetrics(top_pr=...)``,
the CLI's ``--top-pr`` column and the callback's logged keys."""

import inspect
import json
import warnings

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.callback import PRDCallback
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics, top_precision_recall
from lightning_prd.functional.top_pr import TOP_PR_DEFAULTS
from lightning_prd.scores import direction

from tiny_modules import GaussianSampler, quiet_trainer

KEYS = ("top_precision", "top_recall", "top_f1")
G = torch.Generator().manual_seed(3)
REAL = torch.randn(260, 6, generator=G)
FAKE = 1.3 * torch.randn(230, 6, generator=G)


def test_switch_defaults_are_the_function_defaults():
    params = inspect.signature(top_precision_recall).parameters
    assert TOP_PR_DEFAULTS == {name: params[name].default for name in TOP_PR_DEFAULTS}
    assert set(params) - set(TOP_PR_DEFAULTS) == {"real", "fake", "block_bytes"}


def test_functional_switch_equals_the_function():
    opts = dict(num_bootstrap=12, seed=4)
    out = generative_metrics(REAL, FAKE, top_pr=opts, realism=False)
    want = top_precision_recall(REAL, FAKE, **opts)
    for key in KEYS:
        assert torch.equal(out[key], want[key]), key
    assert 0 < float(out["top_precision"]) < 1  # an informative case
    assert not set(KEYS) & set(generative_metrics(REAL, FAKE, realism=False))  # off by default
    assert all(direction(k) == "higher" for k in KEYS)


def test_metric_switch_equals_the_function_and_is_off_by_default():
    metric = GenerativeMetrics(top_pr=True, prd=False, alpha_beta=False)
    for s in range(0, 260, 100):
        metric.update(REAL[s : s + 100], real=True)
    metric.update(FAKE, real=False)
    out = metric.compute()
    want = top_precision_recall(REAL, FAKE)
    for key in KEYS:
        assert torch.equal(out[key], want[key]), key
    assert "precision" in out  # the k-NN scores are still there
    default = GenerativeMetrics(prd=False, alpha_beta=False)
    default.update(REAL, real=True)
    default.update(FAKE, real=False)
    assert not set(KEYS) & set(default.compute())


@pytest.mark.parametrize(
    "value, match",
    [
        (dict(k=0), r"`top_pr\['k'\]` to be a positive integer"),
        (dict(alpha=1.0), r"`top_pr\['alpha'\]`"),
        (dict(bandwidth="scott"), r"`top_pr\['bandwidth'\]`.*'scott'"),
        (dict(kernel="cosine"), r"`top_pr` to hold only .*unknown keys \['kernel'\]"),
        ("yes", r"`top_pr` to be a bool or a dict"),
    ],
)
def test_bad_switch_values_name_the_option(value, match):
    with pytest.raises(ValueError, match=match):
        GenerativeMetrics(top_pr=value)
    with pytest.raises(ValueError, match=match):
        generative_metrics(REAL, FAKE, top_pr=value)


def test_cli_top_pr_column(tmp_path, capsys):
    np.save(tmp_path / "real.npy", REAL.numpy())
    np.save(tmp_path / "fake.npy", FAKE.numpy())
    args = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy")]
    args += ["--no-prd", "--no-alpha-beta", "--quiet"]
    assert main([*args, "--top-pr", "--json", str(tmp_path / "out.json")]) == 0
    printed = capsys.readouterr().out
    assert all(key in printed for key in KEYS)
    saved = json.loads((tmp_path / "out.json").read_text())
    want = top_precision_recall(REAL, FAKE)
    for key in KEYS:
        assert saved["scores"][key] == pytest.approx(float(want[key]), abs=1e-12), key
    assert saved["settings"]["top_pr"]["bandwidth"] == "half_row"
    assert main(args) == 0  # off without the flag
    assert "top_precision" not in capsys.readouterr().out


class _Gen(GaussianSampler):
    dim, scale = 6, 1.3


def test_callback_logs_top_pr(tmp_path):
    cb = PRDCallback(REAL, metric=dict(top_pr=dict(k=20), prd=False, alpha_beta=False), num_samples=200)
    trainer = quiet_trainer(tmp_path, [cb])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(_Gen())
    logged = set(trainer.callback_metrics)
    assert {f"prd/{k}" for k in KEYS} <= logged
    assert 0 <= float(trainer.callback_metrics["prd/top_recall"]) <= 1
