"""The package's score-family records: one module per family, each registering its record through
:func:`~lightning_prd.functional.engine.families.register_family` when imported.

The registry imports every module of this package (:func:`load`) the first time it is read, so a new family is
one file here: no list of family names to extend elsewhere.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import List


def load() -> List[str]:
    """Import every family module of this package (each registers its family once); returns their names."""
    names = sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return names
