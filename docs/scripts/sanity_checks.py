"""The sanity-check page, ``docs/sanity-checks.md``, from a run of the suite in ``tests/sanity_suite.py``.

Runs every setting of the suite once, applies every check to every score the package computes and writes
the whole page: the pass/fail matrix (score x check), the measured response of each score along each
sweep, and which scores fail which checks. ``tests/test_sanity_checks.py`` reruns the suite and fails when
an outcome differs from the page, so rerun this script whenever a score or a check changes.

Run from the repository root::

    python docs/scripts/sanity_checks.py           # writes docs/sanity-checks.md
    python docs/scripts/sanity_checks.py --check   # exit 1 when the page is not what a run writes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import sanity_suite as suite  # noqa: E402

PAGE = ROOT / "docs" / "sanity-checks.md"
COMMAND = "python docs/scripts/sanity_checks.py"
SYMBOL, START, END = suite.SYMBOL, suite.MATRIX_START, suite.MATRIX_END

DESIDERATA = {
    suite.D1: "the score responds to the property it claims to measure, in the expected direction "
    "(fidelity to samples off the real support, diversity to lost modes or spread), and only to it",
    suite.D2: "its value does not hinge on a free choice of the evaluation, here the number of generated samples",
    suite.D3: "its value does not hinge on the amount of data: it has converged at realistic sample sizes",
    suite.D4: "its values are interpretable: the ideal value (1, or a distance of 0) when the distributions "
    "match, the worst (0) when their supports are disjoint, and nothing outside its range",
    suite.D5: "it does not change under transformations that leave the comparison unchanged "
    "(rescaling one coordinate of both sets, translating both)",
    "authenticity": "authenticity (Alaa et al. 2022) is 0 for a copy of the training set",
}

KIND_RULES = {
    suite.FIDELITY: "1 when matched, 0 when disjoint; stays high when modes are dropped, falls as the fake "
    "spreads or invents modes",
    suite.DIVERSITY: "1 when matched, 0 when disjoint; falls as modes are dropped or thinned, stays high or rises "
    "as the fake spreads",
    suite.BOTH: "1 when matched, 0 when disjoint, falls under either kind of defect",
    suite.DISTANCE: "lower is better, no fixed scale: read as 1 − value / (largest value in the sweep), so "
    "'≈ 1 when matched' means the matched value is at most 5% of the largest; bounds at 0 do not apply",
    suite.SELF: "a reference-free diversity (the generated set's Vendi score over the real set's): 1 when "
    "matched, falls as modes are dropped",
    suite.PRIVACY: "checked only for copies and for invariance",
    suite.RARITY: "a distance scale of the real k-NN balls (the rarity score's mean over the generated samples "
    "inside one), with no ideal value: only invariance to translation is checked",
    suite.UNKNOWN: "a score whose kind is not registered: only invariance to translation is checked",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _matrix(names, results) -> List[str]:
    codes = list(suite.CHECKS)
    lines = [
        "| score | " + " | ".join(codes) + " | passed |",
        "|---|" + "---|" * len(codes) + "---|",
    ]
    for name in names:
        cells = [SYMBOL[results[code, name][0]] for code in codes]
        applied = [results[code, name][0] for code in codes if results[code, name][0] != "n/a"]
        lines.append(
            f"| `{name}` | " + " | ".join(cells) + f" | {applied.count('pass')}/{len(applied)} |",
        )
    return lines


def _setting_section(code: str, names, results) -> List[str]:
    setting = suite.SETTINGS[code]
    checks = [c for c in suite.CHECKS.values() if c.setting == code]
    values = ", ".join(f"{v:g}" for v in setting.values)
    lines = [
        f"### {code}: {setting.title}",
        "",
        f"{setting.what[0].upper()}{setting.what[1:]}; {setting.param} ∈ {{{values}}}. Source: `{setting.source}`.",
        "",
    ]
    for check in checks:
        lines.append(f"- **{check.code}** ({check.desideratum}): {check.what}.")
    lines += ["", "| score | response along the sweep | " + " | ".join(c.code for c in checks) + " |"]
    lines.append("|---|---|" + "---|" * len(checks))
    for name in names:
        cells = []
        for check in checks:
            outcome, why = results[check.code, name]
            cells.append(SYMBOL[outcome] + (f" {_cell(why)}" if why and outcome == "fail" else ""))
        lines.append(f"| `{name}` | {_cell(suite.response(code, name))} | " + " | ".join(cells) + " |")
    return lines + [""]


def _range_section(names, results) -> List[str]:
    check = suite.CHECKS["RG4"]
    lines = [
        f"### RG4: range over the whole suite ({check.desideratum})",
        "",
        f"{check.what[0].upper()}{check.what[1:]}.",
        "",
        "| score | outcome | smallest … largest value measured |",
        "|---|---|---|",
    ]
    for name in names:
        outcome, why = results["RG4", name]
        lines.append(f"| `{name}` | {SYMBOL[outcome]} | {_cell(why)} |")
    return lines + [""]


def _failures(names, results) -> List[str]:
    lines = ["| score | kind | fails |", "|---|---|---|"]
    for name in names:
        failed = [code for code in suite.CHECKS if results[code, name][0] == "fail"]
        lines.append(f"| `{name}` | {suite.kind_of(name)} | {', '.join(failed) or '—'} |")
    return lines


def page() -> str:
    """The page, from one run of the suite."""
    results = suite.outcomes()
    names = suite.score_names()
    by_kind: Dict[str, List[str]] = {}
    for name in names:
        by_kind.setdefault(suite.kind_of(name), []).append(f"`{name}`")
    out: List[str] = [
        "# Sanity checks: which score is sound",
        "",
        f"Generated by `{COMMAND}` from a run of `tests/sanity_suite.py`: do not edit by hand. "
        "`tests/test_sanity_checks.py` reruns every check and fails when an outcome differs from this page.",
        "",
        'The desiderata and sanity checks of O. Räisä, B. van Breugel, M. van der Schaar, "Position: All Current '
        'Generative Fidelity and Diversity Metrics are Flawed", ICML 2025 (code: '
        f"`{suite.PAPER}`), applied to every score of the package ([the scores](metrics/index.md)). "
        "Each setting is a pair of synthetic "
        "distributions whose difference is swept by one parameter; each check applies a criterion to the "
        "measured responses, with the paper's thresholds (`sanity_check_criteria.py`, `check_pass_fails.py`): "
        "≈ 1 and ≈ 0 mean within 0.05; *high-to-low* means the start is at least 0.2 above the end, within 0.1 "
        "of the maximum, and the end within 0.1 of the minimum; *peaked* means at least 0.2 above both ends; "
        "*flat* and *converged* mean a range of at most 0.05 (from the middle of the sweep on, for converged).",
        "",
        "**How to read:** ✓ the score meets the check's criterion on this run, ✗ it does not, · the criterion "
        "does not apply to this kind of score; a check's code is its setting and the number of its desideratum "
        "(MS4: mean shift, D4 bounds).",
        "",
        "Every score is read off one `generative_metrics` call with every family switched on, on "
        f"{suite.N} samples per set in {suite.D} dimensions unless the setting sweeps them, float64, seeded, one "
        f"run per step (the paper averages 10 runs of 1,000 samples over finer sweeps). PRD uses "
        f"{suite.PRD_RUNS} clusterings, KID {suite.KID_SUBSETS} subsets of at most {suite.KID_SUBSET_SIZE}; "
        "`realism_share` is the share of generated samples with realism ≥ 1, `vendi_ratio` the generated "
        "set's Vendi score over the real set's.",
        "",
        "## Kinds of score",
        "",
        "| kind | scores | what the criteria expect |",
        "|---|---|---|",
    ]
    out += [f"| {kind} | {', '.join(items)} | {KIND_RULES[kind]} |" for kind, items in by_kind.items()]
    out += ["", "## The desiderata", ""]
    out += [f"- **{name}**: {text}." for name, text in DESIDERATA.items()]
    out += [
        "",
        "The labels are the paper's (its Tables 3 and 4, `aggregate_pass_fail_tables.py`). TR, DM and CP are "
        "not in the paper's suite: TR and DM apply its D5 and D4 to a translation of both sets and to matched "
        "distributions in growing dimension, CP checks authenticity on copies.",
        "",
        "## Outcomes",
        "",
        START,
    ]
    out += _matrix(names, results)
    out += [
        END,
        "",
        "*passed* counts the checks that apply to the score: a distance, the Vendi ratio and authenticity are "
        "held to fewer criteria than the bounded scores, so their counts do not compare with those of the others.",
        "",
        "## Which scores fail which checks",
        "",
    ]
    out += _failures(names, results)
    out += ["", "## The checks, with the measured responses", ""]
    for code in suite.SETTINGS:
        out += _setting_section(code, names, results)
    out += _range_section(names, results)
    return "\n".join(out).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(PAGE))
    parser.add_argument("--check", action="store_true", help="compare with the page instead of writing it")
    args = parser.parse_args()
    text = page()
    if args.check:
        same = Path(args.out).read_text(encoding="utf-8") == text
        print("up to date" if same else f"{args.out} differs from a run: run {COMMAND}")
        raise SystemExit(0 if same else 1)
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
