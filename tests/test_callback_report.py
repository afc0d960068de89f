"""``PRDCallback(verbose=True)``: one line of scores per evaluation, through the progress bar when one is enabled,
else through Lightning's rank-zero logging.

The values in the line are checked against what TensorBoard's own reader reads back from the event files
(the n-th line against the n-th logged value), the epochs against the schedule written out here, the time
against a generator that sleeps a known time. A subprocess checks the terminal: the line shows with and
without the progress bar (with it, on a line of its own, not after the bar), and once per evaluation under
2-process DDP.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ProgressBar
from pytorch_lightning.loggers import TensorBoardLogger

from lightning_prd.callback import PRDCallback

from tiny_modules import TinyTrainable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = torch.randn(120, 2, generator=torch.Generator().manual_seed(0))
LINE = re.compile(r"lightning_prd: epoch (\d+)( \(final\))?((?: · [a-z_]+ \S+)+) · (\d+\.\d) s$")
SLEEP = 0.2


class Sleepy(TinyTrainable):
    """``sample(n)`` sleeps :data:`SLEEP` seconds, then draws N(0, s^2 I) with s growing over epochs."""

    def sample(self, n):
        time.sleep(SLEEP)
        return (0.5 + 0.4 * self.trainer.current_epoch) * torch.randn(n, 2)


def _fit(root, progress_bar, **callback_kwargs):
    cb = PRDCallback(REAL, num_samples=120, batch_size=120, every_n_epochs=2, **callback_kwargs)
    trainer = pl.Trainer(
        max_epochs=5,
        logger=TensorBoardLogger(str(root), name="tb", version=0),
        callbacks=[cb],
        enable_checkpointing=False,
        enable_progress_bar=progress_bar,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Sleepy())
    return cb, os.path.join(str(root), "tb", "version_0")


def _logged(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    return [e.value for e in sorted(acc.Scalars(tag), key=lambda e: e.step)]


def _shown(caplog, capsys):
    """The lines of the callback: ``(logged at INFO, printed to standard output)``."""
    logged = [r.getMessage() for r in caplog.records if "lightning_prd" in r.getMessage()]
    printed = [line for line in re.split(r"[\r\n]", capsys.readouterr().out) if line.startswith("lightning_prd")]
    return logged, printed


@pytest.mark.parametrize("progress_bar", [False, True])
def test_one_line_per_evaluation_with_the_logged_scores_and_the_time(tmp_path, caplog, capsys, progress_bar):
    with caplog.at_level(logging.INFO):
        cb, run_dir = _fit(tmp_path, progress_bar)
    logged, printed = _shown(caplog, capsys)
    lines = printed if progress_bar else logged  # with a bar, printed through it; else logged
    assert (logged if progress_bar else printed) == []
    # every_n_epochs=2 over 5 epochs: epochs 1 and 3, then the final weights of epoch 4
    assert len(lines) == 3, lines
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [int(m.group(1)) for m in parsed] == [1, 3, 4]
    assert [bool(m.group(2)) for m in parsed] == [False, False, True]
    for i, m in enumerate(parsed):
        cells = dict(cell.split(" ") for cell in m.group(3).strip(" ·").split(" · "))
        assert list(cells) == ["precision", "recall", "density", "coverage", "frechet_distance"]
        for name, text in cells.items():
            value = _logged(run_dir, f"prd/{name}")[i]
            assert float(text) == pytest.approx(value, abs=5.1e-4 if abs(value) < 10 else 0.051), (name, i)
        assert SLEEP <= float(m.group(4)) < 60  # the evaluation's wall time, the generator's sleep included
    assert len({m.group(3) for m in parsed}) == 3  # the scores move, so a stale line would fail


class Recording(ProgressBar):
    """A progress bar of the user's own that keeps what it is asked to print."""

    def __init__(self):
        super().__init__()
        self.printed = []

    def disable(self):
        pass

    def print(self, *args, **kwargs):
        self.printed.append(" ".join(map(str, args)))


def test_another_progress_bar_prints_the_line_with_its_own_print(tmp_path, caplog, capsys):
    bar = Recording()
    cb = PRDCallback(REAL, num_samples=120, batch_size=120, every_n_epochs=2)
    trainer = pl.Trainer(
        max_epochs=3, logger=False, callbacks=[cb, bar], enable_checkpointing=False, enable_model_summary=False
    )
    with caplog.at_level(logging.INFO), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Sleepy())
    assert trainer.progress_bar_callback is bar
    assert [LINE.match(line).group(1) for line in bar.printed] == ["1", "2"]  # epoch 1, then the final weights
    assert _shown(caplog, capsys) == ([], [])


@pytest.mark.parametrize("progress_bar", [False, True])
def test_verbose_false_prints_nothing(tmp_path, caplog, capsys, progress_bar):
    with caplog.at_level(logging.INFO):
        cb, _ = _fit(tmp_path, progress_bar, verbose=False)
    assert len(cb.history) == 3
    assert _shown(caplog, capsys) == ([], [])


def test_verbose_is_checked():
    with pytest.raises(TypeError, match=r"`verbose` to be a bool, but got 'no'"):
        PRDCallback(REAL, verbose="no")


SCRIPT = """\
import sys, warnings
import pytorch_lightning as pl
import torch
from lightning_prd.callback import PRDCallback
from tiny_modules import TinyTrainable

REAL = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))


class Tiny(TinyTrainable):
    def sample(self, n):
        return torch.randn(n, 2)


class EndGroup(pl.Callback):
    # destroys the gloo group at teardown, as test_callback_ddp.Dump does: a worker left with one may abort at exit

    def teardown(self, trainer, pl_module, stage):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def fit(**kwargs):
    cb = PRDCallback(REAL, num_samples=60, every_n_epochs=1, evaluate_on_train_end=False)
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", callbacks=[cb, EndGroup()], logger=False,
                         enable_checkpointing=False, enable_model_summary=False, **kwargs)
    trainer.fit(Tiny())


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    mode = sys.argv[1]
    if mode == "ddp":
        fit(enable_progress_bar=False, devices=2, strategy="ddp_spawn")
    else:
        fit(enable_progress_bar=mode == "bar", devices=1)
"""


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("mode", ["bar", "plain", "ddp"])
def test_the_terminal_shows_one_line_per_evaluation(tmp_path, mode):
    """Without pytest's capture. With the bar, standard output and error go to one stream, as in a terminal:
    the bar (on standard output) is cleared and the line starts a line of its own, never after the bar. Without
    it, Lightning's own handler writes the line to stderr; under 2-process DDP rank 1 prints nothing."""
    script = tmp_path / "fit.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    done = subprocess.run(
        [sys.executable, str(script), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if mode == "bar" else subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    shown = done.stdout if mode == "bar" else done.stderr
    assert done.returncode == 0, shown[-3000:]
    found = list(re.finditer(r"lightning_prd: epoch (\d+) · precision \d\.\d{3} ·[^\r\n]* s\n", shown))
    assert [m.group(1) for m in found] == ["0", "1"], shown[-3000:]
    assert {shown[m.start() - 1 : m.start()] for m in found} <= {"", "\n", "\r"}, shown[-3000:]  # first on its line
