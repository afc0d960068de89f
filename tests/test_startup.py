"""What ``import lightning_prd`` and its command line load: Lightning, matplotlib and SciPy only when used.

Each check runs in a fresh interpreter (``sys.modules`` of this one holds everything the other tests loaded)
with this checkout first on the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("pytorch_lightning", "lightning", "lightning_fabric", "matplotlib", "scipy")


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


@pytest.mark.parametrize("module", ["lightning_prd.cli", "lightning_prd.functional", "lightning_prd"])
def test_importing_loads_no_lightning_matplotlib_or_scipy(module):
    done = _python(f"""
        import sys
        import {module}
        print(sorted(name for name in {HEAVY!r} if name in sys.modules))
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout


def test_the_command_line_version_and_help_load_no_lightning():
    done = _python("""
        import contextlib, io, sys
        from lightning_prd.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            codes = [main(["--version"]), main(["--help"]), main(["runs", "--help"])]
        print(codes, out.getvalue().splitlines()[0])
        print(sorted(name for name in ("pytorch_lightning", "lightning", "matplotlib", "scipy") if name in sys.modules))
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    codes, loaded = done.stdout.strip().splitlines()
    from lightning_prd import __version__

    assert codes == f"[0, 0, 0] lightning-prd {__version__}"
    assert loaded == "[]"


def test_the_lazy_attributes_load_the_callback_and_the_metrics_on_first_use():
    done = _python("""
        import sys
        import lightning_prd
        from pytorch_lightning import Callback
        from torchmetrics import Metric
        from lightning_prd.callback.pl_callback import PRDCallback
        assert lightning_prd.PRDCallback is PRDCallback and issubclass(lightning_prd.PRDCallback, Callback)
        from lightning_prd import GenerativeMetrics, PRDEarlyStopping
        assert issubclass(GenerativeMetrics, Metric) and issubclass(PRDEarlyStopping, Callback)
        namespace = {}
        exec("from lightning_prd import *", namespace)
        assert set(lightning_prd.__all__) <= set(namespace) and set(lightning_prd.__all__) <= set(dir(lightning_prd))
        try:
            lightning_prd.PRDCalback
        except AttributeError as error:
            print(error)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "module 'lightning_prd' has no attribute 'PRDCalback'"


def test_the_console_script_prints_the_version():
    script = os.path.join(os.path.dirname(sys.executable), "lightning-prd")
    if not os.path.exists(script):
        pytest.skip("the package is not installed with its console script next to this interpreter")
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([script, "--version"], capture_output=True, text=True, env=env, timeout=300)
    from lightning_prd import __version__

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"lightning-prd {__version__}"
