"""lightning_prd: fidelity and diversity of generative models, measured apart, during training.

Public API: the Metric classes and the Lightning callback below, :func:`register_family` (a score of your own
on every surface), :mod:`lightning_prd.functional` (pure functions), :mod:`lightning_prd.features`
(extractors) and the ``lightning-prd`` command. The package's layers, and which folder may import which, are
in ``docs/architecture.md``; this module imports only ``callback``, ``metrics`` and the family registry.

Loading is lazy (PEP 562): ``import lightning_prd`` loads neither Lightning nor torchmetrics (nor the
matplotlib and SciPy that torchmetrics loads); ``lightning_prd.PRDCallback`` loads the callback and Lightning
on first use, ``lightning_prd.GenerativeMetrics`` and the other Metric classes load torchmetrics, and
``import lightning_prd.functional`` or ``lightning-prd --version`` load neither.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any, Dict, List

from lightning_prd.functional.engine.families import register_family, unregister_family

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time ``__getattr__`` below loads each on first use
    from lightning_prd.callback import PRDCallback, PRDEarlyStopping
    from lightning_prd.metrics import (
        AlphaPrecisionBetaRecall,
        DensityCoverage,
        FrechetDistance,
        GenerativeMetrics,
        InceptionScore,
        PRDCurve,
        PrecisionRecall,
    )

__version__ = "0.1.0"

__all__ = [
    "AlphaPrecisionBetaRecall",
    "DensityCoverage",
    "FrechetDistance",
    "GenerativeMetrics",
    "InceptionScore",
    "PRDCallback",
    "PRDEarlyStopping",
    "PRDCurve",
    "PrecisionRecall",
    "__version__",
    "register_family",
    "unregister_family",
]

# public name -> the module that defines it, imported the first time the name is read
_LAZY: Dict[str, str] = {
    "AlphaPrecisionBetaRecall": "lightning_prd.metrics",
    "DensityCoverage": "lightning_prd.metrics",
    "FrechetDistance": "lightning_prd.metrics",
    "GenerativeMetrics": "lightning_prd.metrics",
    "InceptionScore": "lightning_prd.metrics",
    "PRDCurve": "lightning_prd.metrics",
    "PrecisionRecall": "lightning_prd.metrics",
    "PRDCallback": "lightning_prd.callback",
    "PRDEarlyStopping": "lightning_prd.callback",
}


def __getattr__(name: str) -> Any:
    """Import a public class of :data:`__all__` on first use and keep it as a module attribute (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lightning_prd' has no attribute '{name}'")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    """The module's attributes with the lazy public names, so ``dir()`` and completion list them."""
    return sorted(set(globals()) | set(__all__))
