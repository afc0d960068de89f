"""An unknown extractor name is reported under the argument each surface takes it by: ``name`` of
``get_extractor``, ``--extractor`` of every command, ``feature_extractor`` of the callback."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_prd.callback import PRDCallback
from lightning_prd.cli import main
from lightning_prd.features import get_extractor
from lightning_prd.features.registry import UnknownExtractorError

TYPO = "identiy"


def test_get_extractor_names_its_own_argument():
    with pytest.raises(ValueError) as info:
        get_extractor(TYPO)
    assert isinstance(info.value, UnknownExtractorError)
    message = str(info.value)
    assert message.startswith("Expected argument `name` to be one of [") and f"but got '{TYPO}'" in message
    assert "'identity'" in message and "'fid-inception'" in message and "module:callable" in message


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(5)
    np.save(tmp_path / "real.npy", rng.normal(size=(30, 4)).astype(np.float32))
    np.save(tmp_path / "fake.npy", rng.normal(size=(25, 4)).astype(np.float32))
    return tmp_path


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "--real", "{real}", "--fake", "{fake}"],
        ["evaluate", "--protocol", "prdc", "--real", "{real}", "--fake", "{fake}"],  # a protocol of given features
        ["compare", "--real", "{real}", "--fake", "{fake}", "{fake}"],
        ["features", "--real", "{real}", "--out", "{out}"],
    ],
    ids=["evaluate", "evaluate-protocol", "compare", "features"],
)
def test_every_command_names_its_extractor_option(files, capfd, command):
    paths = {"real": str(files / "real.npy"), "fake": str(files / "fake.npy"), "out": str(files / "out.npz")}
    argv = [part.format(**paths) for part in command] + ["--extractor", TYPO, "-q"]
    capfd.readouterr()
    assert main(argv) == 1
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"lightning-prd {command[0]}: error: --extractor {TYPO}: not an extractor (use one of "), err
    assert "identity" in err and "module:callable" in err and "`name`" not in err and "Expected argument" not in err
    assert not (files / "out.npz").exists()


@pytest.mark.parametrize("value", [TYPO, {"name": TYPO}, {"name": TYPO, "num_features": 4}])
@pytest.mark.parametrize("protocol", [None, "prdc"])
def test_the_callback_names_feature_extractor(value, protocol):
    with pytest.raises(TypeError) as info:
        PRDCallback(torch.randn(20, 4), feature_extractor=value, protocol=protocol, num_samples=20)
    message = str(info.value)
    assert message.startswith("Expected argument `feature_extractor` to be one of [") and repr(value) in message
    assert "'identity'" in message and "`name`" not in message and "\n" not in message
