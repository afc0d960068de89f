"""MkDocs hook: ship MathJax with the site, so that formulas render offline.

MathJax 3 comes from the Python package ``django-static-mathjax`` (in the ``docs`` extra; it
installs a plain ``mathjax`` package holding MathJax's files under ``static/mathjax``, with no
dependency). This hook adds the browser build ``es5/tex-mml-chtml.js`` and the files it loads
at run time (CHTML fonts, TeX extensions loaded on demand, the menu and its accessibility
components) to the site under ``assets/mathjax/``; ``mkdocs.yml`` loads
``assets/mathjax/tex-mml-chtml.js``. Nothing is downloaded, at build time or in the browser.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

DEST = "assets/mathjax"
# What the combined component loads: itself, then on demand its fonts, TeX extensions
# (autoload, \require), the contextual menu and the accessibility/speech components.
SHIPPED = ("tex-mml-chtml.js", "input", "output/chtml", "ui", "a11y", "sre")


def _es5_dir() -> Path:
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise PluginError("MathJax not found: install the docs extra (pip install -e '.[docs]').")
    for location in spec.submodule_search_locations:
        es5 = Path(location) / "static" / "mathjax" / "es5"
        if (es5 / "tex-mml-chtml.js").is_file():
            return es5
    raise PluginError("the installed 'mathjax' package has no static/mathjax/es5/tex-mml-chtml.js")


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    es5 = _es5_dir()
    sources = [(es5.parent / "LICENSE", "LICENSE")] if (es5.parent / "LICENSE").is_file() else []
    for name in SHIPPED:
        path = es5 / name
        if path.is_file():
            sources.append((path, name))
            continue
        if not path.is_dir():
            raise PluginError(f"MathJax file missing: {path}")
        for root, _dirs, names in os.walk(path):
            for leaf in sorted(names):
                full = Path(root) / leaf
                sources.append((full, full.relative_to(es5).as_posix()))
    for full, rel in sources:
        files.append(File.generated(config, f"{DEST}/{rel}", abs_src_path=str(full)))
    return files
