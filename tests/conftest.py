import os
import sys
import types

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
sys.path.insert(0, os.path.dirname(__file__))
torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


@pytest.fixture
def rng():
    return torch.Generator().manual_seed(1234)


@pytest.fixture(params=["bf16-screen", "float32-tiles"])
def both_tile_paths(request, monkeypatch):
    """Run a test with the bfloat16 screen of the k-NN tiles forced on and off
    (``LIGHTNING_PRD_SCREEN``; spawned DDP workers inherit it), whatever this CPU has."""
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1" if request.param == "bf16-screen" else "0")
    return request.param


@pytest.fixture
def torchvision_importable(monkeypatch):
    """``import torchvision`` succeeds: the installed one, else an empty stand-in module, for the checks an
    extractor makes after finding torchvision and before building its network (its weights)."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "torchvision", types.ModuleType("torchvision"))


@pytest.fixture
def open_clip_importable(monkeypatch):
    """``import open_clip`` succeeds: the installed one, else an empty stand-in (the checks before the network)."""
    try:
        import open_clip  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "open_clip", types.ModuleType("open_clip"))


@pytest.fixture
def torchvision_missing(monkeypatch):
    """``import torchvision`` raises ImportError, whether or not it is installed."""
    monkeypatch.setitem(sys.modules, "torchvision", None)


@pytest.fixture
def paths_that_are_no_file(tmp_path):
    """``(path, the error expected, what the message says it is)`` for weights paths that are no file."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "link.pth").symlink_to(tmp_path / "gone.pth")
    return (
        (tmp_path / "folder", ValueError, "is a directory"),
        (tmp_path / "link.pth", FileNotFoundError, "is a broken symbolic link"),
        (tmp_path / "missing.pth", FileNotFoundError, "does not exist"),
    )


def pytest_sessionfinish(session, exitstatus):
    """End the session's pool of 2 DDP workers (``tests/ddp_utils.py``), if a test started it."""
    ddp_utils = sys.modules.get("ddp_utils")
    if ddp_utils is not None:
        ddp_utils.close_pool()
