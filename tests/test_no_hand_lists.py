"""No hand-made list wires two or more score families outside their records and the registry.

A family is wired by its record (``lightning_prd/functional/families/<name>.py``) and read through the registry
(``functional/engine/famil*.py``); everywhere else the package loops over the records. This test scans the AST of
every other module for a tuple, list, set or dict literal, a call's keywords, or an ``if``/``elif`` chain that
names two or more families (by name or switch keyword, as strings or attribute names). Named selections that are
data may name families: they are listed in :data:`DATA`, each with why.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

from lightning_prd.functional.engine.families import families

PACKAGE = Path(__file__).resolve().parents[1] / "lightning_prd"

#: the records and the registry: the one place that wires families
RECORDS = ("functional/families/", "functional/engine/family.py", "functional/engine/families.py",
           "functional/engine/family_rules.py", "functional/engine/family_short_form.py")  # fmt: skip

#: (module, top-level name) -> why this selection of families is data, not wiring
DATA: Dict[Tuple[str, str], str] = {
    ("functional/engine/vocabulary.py", "PRESETS"): "a preset: a named set of defaults",
    ("functional/engine/vocabulary.py", "RENAMED"): "the old spellings of two keywords (one name per option)",
    ("protocols/table.py", "FID_SCORES"): "the scores a protocol reports",
    ("protocols/table.py", "Protocol"): "a protocol row's fields: the k of its k-NN scores (a published table)",
    ("protocols/table.py", "_TABLE"): "the protocols' rows",
    ("protocols/fingerprint.py", "FINGERPRINT_KEYS"): "the fingerprint's fields (a schema runs compare)",
    ("protocols/fingerprint.py", "fingerprint"): "the fingerprint's fields (a schema runs compare)",
    ("protocols/pass_scores.py", "PASS_SCORES"): "the keys the extractor's other outputs give",
    ("callback/protocol.py", "run_fingerprint"): "the fingerprint's fields (a schema runs compare)",
    ("cli/protocol.py", "run_fingerprint"): "the fingerprint's fields (a schema runs compare)",
    ("functional/uncertainty.py", "score_spread"): "the error bars of precision, recall, density and coverage: "
    "one public function of both families' scores",
}


def _names() -> Dict[str, str]:
    """Every family's name and switch keyword -> its name."""
    out = {}
    for family in families():
        out[family.name] = family.name
        out[family.keyword] = family.name
    return out


def _family(node: ast.AST, names: Dict[str, str]) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return names.get(node.value)
    return None


def _chain_names(node: ast.If, names: Dict[str, str]) -> Set[str]:
    found: Set[str] = set()
    while True:
        for sub in ast.walk(node.test):
            if _family(sub, names):
                found.add(names[sub.value])  # type: ignore[attr-defined]
            if isinstance(sub, ast.Attribute) and sub.attr in names:
                found.add(names[sub.attr])
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
        else:
            return found


def _wired(node: ast.AST, names: Dict[str, str]) -> Set[str]:
    """The families ``node`` names together (a literal, a call's keywords, an if/elif chain)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {f for f in (_family(e, names) for e in node.elts) if f}
    if isinstance(node, ast.Dict):
        return {f for f in (_family(k, names) for k in node.keys if k is not None) if f}
    if isinstance(node, ast.Call):
        return {names[k.arg] for k in node.keywords if k.arg in names}
    if isinstance(node, ast.If):
        return _chain_names(node, names)
    return set()


def _top_name(statement: ast.stmt) -> str:
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return statement.name
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return next((t.id for t in targets if isinstance(t, ast.Name)), "")
    return ""


def hand_lists(source: str, module: str, names: Dict[str, str]) -> Iterator[str]:
    """``module:line what families`` for each place of ``source`` that wires two or more families."""
    for statement in ast.parse(source).body:
        top = _top_name(statement)
        if top == "__all__" or (module, top) in DATA:
            continue
        for node in ast.walk(statement):
            wired = _wired(node, names)
            if len(wired) >= 2:
                yield f"{module}:{node.lineno} {type(node).__name__} {sorted(wired)}"


def _modules() -> List[Tuple[str, str]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if not module.startswith(RECORDS):
            out.append((module, path.read_text(encoding="utf-8")))
    return out


def test_no_module_wires_families_by_hand():
    names = _names()
    found = [hit for module, source in _modules() for hit in hand_lists(source, module, names)]
    assert found == [], "families wired by hand (loop over the registry instead):\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_hand_list():
    names = _names()
    planted = {
        "a tuple": "SCORES = ('kid', 'vendi')",
        "a dict": "def f():\n    return {'prd': 1, 'k_precision_recall': 3}",
        "a call": "def f(m):\n    return m(kid=True, top_pr=False)",
        "an if chain": "def f(plan):\n    if plan.kid:\n        return 1\n    elif plan.vendi:\n        return 2",
    }
    for what, source in planted.items():
        assert list(hand_lists(source, "x.py", names)), what
    assert not list(hand_lists("SCORES = ('kid', 'precision')", "x.py", names))  # one family, one output key


def test_every_data_entry_is_still_there():
    """A stale entry of :data:`DATA` would let a new hand list of that name pass unseen."""
    tops = {(module, _top_name(s)) for module, source in _modules() for s in ast.parse(source).body}
    assert set(DATA) <= tops, sorted(set(DATA) - tops)
