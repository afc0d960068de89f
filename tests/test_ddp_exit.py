"""2-process gloo DDP runs end cleanly on a busy machine: every rank exits with status 0 and no
``terminate called`` (std::terminate at exit), each repetition in new processes (the abort this
guards against happens at process exit), with a process spinning on a core beside them.

The repetitions run through ``benchmarks/stress_ddp_exit.py`` (each rank: GenerativeMetrics with
the k-NN pass in 2 worker threads, its scores written, the process group destroyed, the script
returns). ``LIGHTNING_PRD_EXIT_REPEATS`` sets their number (the script itself runs hundreds).
"""

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPEATS = int(os.environ.get("LIGHTNING_PRD_EXIT_REPEATS", "4"))


def _stress_module():
    spec = importlib.util.spec_from_file_location(
        "stress_ddp_exit", os.path.join(ROOT, "benchmarks", "stress_ddp_exit.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.filterwarnings("ignore")
def test_every_rank_exits_cleanly_in_repeated_runs_beside_a_spinning_process():
    outcomes = _stress_module().stress(REPEATS, spin=1, world=2, threads=2)
    assert len(outcomes) == REPEATS
    for i, o in enumerate(outcomes):
        detail = f"repetition {i}: exit statuses {o.codes}\n" + "\n".join(e[-800:] for e in o.stderr)
        assert o.codes == [0, 0], detail
        assert not any("terminate called" in e for e in o.stderr), detail
        assert o.wrote == [True, True], detail
