"""Given means given, on every surface: an option written out at its default value that contradicts a named
protocol is refused (lightning_prd/protocols/options.py: resolve_arguments), never replaced by the protocol's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.callback import PRDCallback
from lightning_prd.cli import main

REAL = torch.randn(30, 3, generator=torch.Generator().manual_seed(2))
AT_DEFAULTS = {"k_precision_recall": 3, "ball": "closed"}  # both the signature's defaults; "prdc" sets 5 and "open"


def test_the_callbacks_metric_dict_at_the_defaults_contradicting_prdc_is_refused():
    with pytest.raises(ValueError, match=r"`k_precision_recall` to agree with protocol 'prdc'.*but got 3"):
        PRDCallback(REAL, protocol="prdc", metric=dict(AT_DEFAULTS))


def test_the_metric_at_the_defaults_contradicting_prdc_is_refused():
    with pytest.raises(ValueError, match=r"`k_precision_recall` to agree with protocol 'prdc'.*but got 3"):
        GenerativeMetrics(protocol="prdc", **AT_DEFAULTS)
    with pytest.raises(ValueError, match=r"`ball` to agree with protocol 'prdc'.*but got 'closed'"):
        GenerativeMetrics(protocol="prdc", ball="closed")
    left_out = GenerativeMetrics(protocol="prdc")
    assert (left_out.k_precision_recall, left_out.ball) == (5, "open")


def test_the_cli_ball_at_its_default_contradicting_prdc_is_refused(tmp_path, capsys):
    np.save(tmp_path / "real.npy", REAL.numpy())
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "real.npy"), "-q"]
    assert main([*argv, "--protocol", "prdc", "--ball", "closed"]) == 2
    assert "--ball closed: contradicts protocol 'prdc'" in capsys.readouterr().err
