import os
import sys

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
sys.path.insert(0, os.path.dirname(__file__))
torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


@pytest.fixture
def rng():
    return torch.Generator().manual_seed(1234)
