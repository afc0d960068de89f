"""The session's pool of 2 gloo workers (``tests/ddp_utils.py``): calls reuse the workers and their group, see the
caller's environment, leave no state behind, install NCCL's rules only when asked, and a rank's failure is
raised naming the rank without hanging (the next call gets a new pool)."""

import os

import pytest
import torch
import torch.distributed as dist

import ddp_utils
from ddp_utils import RankError, run_ddp


def _identity(rank, world):
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    return rank, world, os.getpid(), float(total)


def test_calls_reuse_the_two_workers_and_their_group():
    first = run_ddp(_identity)
    again = run_ddp(_identity)
    assert [r[:2] for r in first] == [(0, 2), (1, 2)]
    assert [r[3] for r in first] == [3.0, 3.0]  # 1 + 2 over the group
    assert [r[2] for r in first] == [r[2] for r in again]  # the same processes
    assert len({r[2] for r in first} | {os.getpid()}) == 3


def _change_everything(rank, world):
    from lightning_prd import register_family
    from lightning_prd.functional.knn import cross

    torch.set_default_dtype(torch.float64)
    torch.manual_seed(rank + 99)
    torch.set_float32_matmul_precision("medium")
    torch.set_grad_enabled(False)
    os.environ["LIGHTNING_PRD_POOL_LEAK"] = "1"
    cross.sync_free = lambda device: True
    register_family("pool_leak", lambda real, fake: {"pool_leak": torch.tensor(0.0)}, outputs={"pool_leak": "lower"})
    return _seen(rank, world)


def _seen(rank, world):
    from lightning_prd.functional.engine.families import families
    from lightning_prd.functional.knn import cross

    return dict(
        dtype=str(torch.get_default_dtype()),
        draw=float(torch.rand(())),
        matmul=torch.get_float32_matmul_precision(),
        grad=torch.is_grad_enabled(),
        env=os.environ.get("LIGHTNING_PRD_POOL_LEAK"),
        caller=os.environ.get("LIGHTNING_PRD_POOL_CALLER"),
        sync_free=cross.sync_free.__name__,
        families=sorted(f.name for f in families()),
    )


def test_a_call_leaves_no_state_behind_and_sees_the_callers_environment(monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_POOL_CALLER", "asked")
    before = run_ddp(_seen)
    changed = run_ddp(_change_everything)
    after = run_ddp(_seen)
    assert after == before
    assert before[0]["caller"] == before[1]["caller"] == "asked"
    assert before[0]["dtype"] == "torch.float32" and before[0]["grad"] and before[0]["env"] is None
    assert before[0]["sync_free"] == "sync_free" and changed[0]["sync_free"] == "<lambda>"
    assert "pool_leak" not in before[0]["families"]
    assert changed[0]["dtype"] == "torch.float64" and "pool_leak" in changed[0]["families"]  # the change was made
    monkeypatch.delenv("LIGHTNING_PRD_POOL_CALLER")
    assert run_ddp(_seen)[0]["caller"] is None


def _plain_collective(rank, world):
    try:
        dist.all_reduce(torch.ones(1))  # a CPU tensor never placed on the group's device
    except Exception as err:  # noqa: BLE001 - the refusal is the result
        return type(err).__name__
    return "accepted"


def test_nccl_rules_hold_only_in_a_strict_call():
    assert run_ddp(_plain_collective, strict=True) == ["StrictCollectiveError"] * 2
    assert run_ddp(_plain_collective) == ["accepted"] * 2


def _fail_on_rank_one(rank, world):
    if rank == 1:
        raise ValueError("rank one refuses")
    dist.all_reduce(torch.ones(1))  # rank 0 waits for a collective rank 1 never joins
    return rank


def test_a_failing_rank_is_named_and_the_next_call_gets_a_new_pool():
    pids = [r[2] for r in run_ddp(_identity)]
    with pytest.raises(RankError, match=r"(?s)rank 1 of 2 failed.*ValueError: rank one refuses") as info:
        run_ddp(_fail_on_rank_one)
    assert isinstance(info.value.__cause__, ValueError)
    assert ddp_utils._POOL is None
    again = run_ddp(_identity)
    assert [r[3] for r in again] == [3.0, 3.0]
    assert not set(pids) & {r[2] for r in again}
