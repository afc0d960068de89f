"""CMMD outside the functions: the ``--cmmd`` column of ``lightning-prd evaluate`` / ``compare``
and ``PRDCallback`` logging ``cmmd`` with ``metric=dict(cmmd=...)``."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from lightning_prd.callback import PRDCallback
from lightning_prd.cli import main
from lightning_prd.functional import cmmd
from lightning_prd.scores import direction

from tiny_modules import GaussianSampler, quiet_trainer

NO_EXTRAS = ["--no-prd", "--no-alpha-beta", "-q"]


@pytest.fixture
def files(tmp_path):
    gen = np.random.default_rng(0)
    real = gen.normal(size=(60, 5)).astype(np.float32)
    fakes = [(0.7 * gen.normal(size=(50, 5)) + 0.2).astype(np.float32), gen.normal(size=(45, 5)).astype(np.float32)]
    np.save(tmp_path / "real.npy", real)
    for i, fake in enumerate(fakes):
        np.save(tmp_path / f"fake{i}.npy", fake)
    return tmp_path, real, fakes


def test_evaluate_cmmd_column(files, capsys):
    path, real, fakes = files
    out = path / "scores.json"
    argv = ["evaluate", "--real", str(path / "real.npy"), "--fake", str(path / "fake0.npy"), *NO_EXTRAS]
    want = float(cmmd(torch.from_numpy(real), torch.from_numpy(fakes[0])))
    assert main([*argv, "--json", str(out), "--cmmd"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["cmmd"]]
    assert len(rows) == 1 and float(rows[0][1]) == pytest.approx(want, abs=6e-5) and rows[0][2] == "lower"
    payload = json.loads(out.read_text())
    assert payload["scores"]["cmmd"] == pytest.approx(want, rel=1e-9)
    assert payload["settings"]["cmmd"] == dict(sigma=10.0, scale=1000.0, unbiased=False)
    assert main([*argv, "--json", str(out)]) == 0  # off by default
    assert json.loads(out.read_text())["settings"]["cmmd"] is None
    assert not [line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["cmmd"]]
    assert "cmmd" not in json.loads(out.read_text())["scores"]


def test_compare_cmmd_column_lower_is_better(files, capsys):
    path, real, fakes = files
    fake_args = [str(path / "fake0.npy"), str(path / "fake1.npy")]
    assert main(["compare", "--real", str(path / "real.npy"), "--fake", *fake_args, "--cmmd", *NO_EXTRAS]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "cmmd" in line.split())
    end = header.index(" cmmd") + len(" cmmd")  # columns are right-aligned
    cells = {line.split()[0]: line[:end].split()[-1] for line in lines if line.split()}
    values = [float(cmmd(torch.from_numpy(real), torch.from_numpy(f))) for f in fakes]
    assert float(cells["fake0"]) == pytest.approx(values[0], abs=6e-5)  # printed with 4 decimals
    assert float(cells["fake1"]) == pytest.approx(values[1], abs=6e-5)
    assert direction("cmmd") == "lower" and cells["(better)"] == "lower"
    assert cells["(best)"] == ("fake0" if values[0] < values[1] else "fake1")


class Sampler(GaussianSampler):
    dim, scale, shift = 3, 1.2, 0.1


def test_callback_logs_cmmd(tmp_path):
    real = torch.randn(128, 3, generator=torch.Generator().manual_seed(0))
    cb = PRDCallback(real, num_samples=96, metric=dict(cmmd=dict(sigma=1.0), prd=False, alpha_beta=False))
    trainer = quiet_trainer(tmp_path, [cb])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Sampler())
    assert "prd/cmmd" in trainer.callback_metrics
    value = float(trainer.callback_metrics["prd/cmmd"])
    assert value == pytest.approx(cb.history[-1]["cmmd"]) and value > 0
