"""The device of a collective (``functional/knn/collectives.py``): NCCL's rules, forced on a CPU-only machine."""

import contextlib

import pytest
import torch

from lightning_prd.functional.knn import collectives

CPU = torch.device("cpu")


@pytest.fixture
def nccl(monkeypatch):
    """A process group whose backend is NCCL, on a machine with 4 CUDA devices and current device 0."""
    monkeypatch.setattr(collectives, "_backend", lambda group: "nccl")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    return monkeypatch


def test_without_process_group_tensors_stay_where_they_are():
    assert collectives.group_device(None, CPU) == CPU
    assert collectives.group_device(None, torch.device("cuda", 1)) == torch.device("cuda", 1)
    assert collectives.group_device() == CPU
    assert isinstance(collectives.object_device_context(), contextlib.nullcontext)


def test_gloo_takes_tensors_where_they_are(monkeypatch):
    monkeypatch.setattr(collectives, "_backend", lambda group: "gloo")
    assert collectives.group_device(None, torch.device("cuda", 2)) == torch.device("cuda", 2)
    assert collectives.group_device(None, CPU) == CPU


def test_nccl_moves_cpu_states_to_this_process_gpu(nccl):
    assert collectives.group_device(None, CPU) == torch.device("cuda", 0)
    assert collectives.group_device(None, torch.device("cuda", 1)) == torch.device("cuda", 1)  # already there
    nccl.setattr(torch.cuda, "current_device", lambda: 2)  # set_device(2) by the script
    assert collectives.group_device(None, CPU) == torch.device("cuda", 2)


def test_nccl_without_set_device_uses_local_rank(nccl):
    nccl.setenv("LOCAL_RANK", "3")
    assert collectives.group_device(None, CPU) == torch.device("cuda", 3)
    nccl.setenv("LOCAL_RANK", "5")  # more local ranks than visible devices: modulo
    assert collectives.group_device() == torch.device("cuda", 1)
    ctx = collectives.object_device_context()
    assert isinstance(ctx, torch.cuda.device) and ctx.idx == 1
