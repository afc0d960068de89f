"""The package's shape: few modules at its root, small files, no import circle, folders that say what they are.

The import graph is read from the source with ``ast`` (nothing is imported): an edge ``A -> B`` for every
``import B`` / ``from B import name`` anywhere in module ``A`` (function-level imports included), where
``from P import name`` points at the submodule ``P.name`` when that is a module of the package and at ``P``
(its ``__init__``) otherwise. Relative imports are resolved against ``A``'s package.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "lightning_prd"


def _modules() -> Dict[str, Path]:
    mods: Dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _is_package(name: str, mods: Dict[str, Path]) -> bool:
    return mods[name].name == "__init__.py"


def _edges(mods: Dict[str, Path]) -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        package = name if _is_package(name, mods) else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    targets.append(sub if sub in mods else source)
            for target in targets:
                if target in mods and target != name:
                    graph[name].add(target)
    return graph


def _cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import circle as a list of modules (first == last), or [] when the graph has none."""
    state: Dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return []


#: which part of the package may import which (docs/architecture.md draws the same table); a part always
#: imports itself. ``root`` is ``lightning_prd/__init__.py``.
ALLOWED: Dict[str, Set[str]] = {
    "functional.knn": set(),
    "functional.engine": {"functional.knn", "functional"},  # the registry imports the records (functional/families/)
    "functional": {"functional.engine", "functional.knn"},
    "metrics": {"functional", "functional.engine", "functional.knn", "protocols"},
    "features": {"functional.engine", "functional.knn"},  # knn.collectives: the device of a collective
    # named protocols: extractor, preprocessing, k, ball, counts; the version is read from the loaded root module
    # (importing the root would close a circle: root -> callback -> protocols)
    "protocols": {"features", "functional", "functional.engine"},
    "samplers": {"functional.engine"},
    "runs": {"functional.engine"},  # the directions of the registered families
    "loggers": {"runs"},
    # knn.collectives: the device of a collective
    "callback": {
        "features",
        "functional.engine",
        "functional.knn",
        "loggers",
        "metrics",
        "protocols",
        "runs",
        "samplers",
    },
    "cli": {"root", "features", "functional.engine", "functional.knn", "protocols", "runs"},
    "sweep": {"features", "functional.engine", "metrics"},
    "root": {"callback", "metrics", "functional.engine"},  # register_family
    "lightning": {"callback"},
    "plotting": {"runs"},
    "scores": {"runs"},
}


def _part(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    if parts[1] == "functional" and len(parts) > 2 and parts[2] in ("knn", "engine"):
        return f"functional.{parts[2]}"
    return parts[1]


def test_each_part_imports_only_what_it_may():
    graph = _edges(_modules())
    parts = {_part(m) for m in graph}
    assert parts == set(ALLOWED), sorted(parts ^ set(ALLOWED))  # a new part needs its row in the table
    wrong = sorted(
        f"{a} -> {b}" for a, targets in graph.items() for b in targets if _part(b) not in ALLOWED[_part(a)] | {_part(a)}
    )
    assert not wrong, wrong


def test_cycle_finder_finds_a_circle():
    # the checker itself: a planted circle is found, a chain is not
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle():
    mods = _modules()
    graph = _edges(mods)
    assert sum(len(v) for v in graph.values()) > 50  # the walk sees the package's imports
    circle = _cycle(graph)
    assert not circle, "import circle: " + " -> ".join(circle)


def test_at_most_six_modules_at_the_root():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 6, root


@pytest.mark.parametrize("limit", [450])
def test_no_file_over_the_limit(limit):
    long = {
        str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > limit
    }
    assert not long, long


def test_every_folder_says_what_it_is_for():
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 8, f"{init.relative_to(PACKAGE.parent)} has no module docstring"
        assert "import" in doc.lower(), f"{init.relative_to(PACKAGE.parent)} does not say what it may import"
