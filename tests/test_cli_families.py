"""The command line's family flags are the family registry's: ``--help``'s score list and docs/cli.md's flags table
name every family, ``--only frechet`` refuses every family a statistics file cannot serve, a family's check and
compute errors name its flag, and the switches ``evaluate`` gives the metric are today's hand-written call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from lightning_prd.cli.families import family_flags, family_switches, flag_families, flags_table, no_flag
from lightning_prd.cli.main import main
from lightning_prd.cli.parser import build_parser
from lightning_prd.functional.engine.families import families, register_family, switch_families, unregister_family

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    path = tmp_path_factory.mktemp("families")
    g = np.random.default_rng(0)
    real = g.normal(size=(40, 6)).astype(np.float32)
    np.save(path / "real.npy", real)
    np.save(path / "fake.npy", (0.8 * g.normal(size=(36, 6)) + 0.1).astype(np.float32))
    np.savez(
        path / "stats.npz", mu=real.astype(np.float64).mean(0), sigma=np.cov(real.astype(np.float64), rowvar=False)
    )
    return path


@pytest.fixture
def mean_gap():
    def compute(real, fake, *, power=1.0):
        return {"mean_gap": (real.mean(0) - fake.mean(0)).norm() ** power}

    register_family("mean_gap", compute, outputs={"mean_gap": "lower"}, defaults={"power": 1.0})
    yield
    unregister_family("mean_gap")


def _help_scores() -> str:
    text = build_parser()._subparsers._group_actions[0].choices["evaluate"].format_help()
    start = text.index("\nscores (")
    return text[start : text.index("\n  per class", start)]


def test_help_lists_every_scalar_score_of_every_family():
    section = _help_scores()
    listed = set(re.findall(r"[a-z][a-z0-9_]*", section))
    wanted = {key for family in families() for key in family.outputs}
    assert {"p_precision", "p_recall", "precision_cover", "recall_cover", "rarity_mean"} <= wanted
    assert wanted - listed == set()
    for family in flag_families():  # and how each is asked for
        assert family.flag in section or no_flag(family) in section


def test_help_lists_a_registered_family_and_its_flag(mean_gap):
    section = _help_scores()
    assert "mean_gap" in section and "with --mean-gap" in section
    assert "--mean-gap" in build_parser()._subparsers._group_actions[0].choices["evaluate"].format_help()


def test_every_family_flag_is_an_option_of_evaluate_and_compare():
    sub = build_parser()._subparsers._group_actions[0].choices
    for command in ("evaluate", "compare"):
        options = {s for action in sub[command]._actions for s in action.option_strings}
        for family in flag_families():
            assert set(family_flags(family)) <= options, (command, family.name)


def test_docs_cli_md_holds_the_generated_flags_table():
    text = DOCS.read_text()
    assert flags_table() in text, (
        "docs/cli.md's flags table is not the registry's: paste the output of "
        "`python -c 'from lightning_prd.cli.families import flags_table; print(flags_table())'`"
    )
    for family in flag_families():
        for flag in family_flags(family):
            assert f"`{flag}" in text, flag
    assert "`--rarity`" in text


def test_the_default_switches_are_the_hand_written_call(files):
    """The switches of a plain ``evaluate`` are those the command wrote out one by one."""
    args = build_parser().parse_args(["evaluate", "--real", "r.npy", "--fake", "f.npy", "--seed", "7"])
    got = family_switches(args)
    prd = dict(num_clusters=20, num_runs=10, seed=7)
    want = dict(
        k_precision_recall=3, k_density_coverage=5, probabilistic=True, pr_cover=True, clipped=False,
        symmetric=False, prd=prd, alpha_beta=dict(num_alphas=30, k=5), authenticity=False, frechet=True, kid=False,
        vendi=False, top_pr=False, cmmd=False, fd_infinity=False, data_copying=False, fld=False, realism=False,
        rarity=False,
    )  # fmt: skip
    assert {k: got[k] for k in want} == want
    argv = ["evaluate", "--real", "r.npy", "--fake", "f.npy", "--seed", "7", "--kid", "--fd-infinity", "--no-prd"]
    argv += ["--num-alphas", "9", "--k-density-coverage", "4", "--no-probabilistic", "--clipped", "k=4"]
    got = family_switches(build_parser().parse_args(argv))
    assert got["kid"] == {"seed": 7} and got["fd_infinity"] == {"seed": 7} and got["prd"] is False
    assert got["alpha_beta"] == {"num_alphas": 9, "k": 4} and got["probabilistic"] is False
    assert got["clipped"] == {"k": 4} and got["k_density_coverage"] == 4


@pytest.mark.parametrize("family", [f for f in flag_families() if not f.statistics], ids=lambda f: f.name)
def test_only_frechet_refuses_every_family_it_would_drop(files, capfd, family):
    """With a statistics file, ``--only frechet`` and any other family's flag is one line naming that flag."""
    argv = ["evaluate", "--real", str(files / "stats.npz"), "--fake", str(files / "fake.npy"), "--only", "frechet"]
    assert main([*argv, *family.cli_args()]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "--only frechet" in err and f"{family.flag} asks for more" in err


def test_only_frechet_with_rarity_keeps_no_score_silently(files, capfd):
    argv = ["evaluate", "--real", str(files / "stats.npz"), "--fake", str(files / "fake.npy"), "--only", "frechet"]
    assert main([*argv, "--rarity", "k=2"]) == 1
    assert "--rarity asks for more" in capfd.readouterr().err
    assert main([*argv, "--prd-runs", "3"]) == 1  # an option of a family it drops
    assert "--prd-runs asks for more" in capfd.readouterr().err
    out = files / "only.json"
    assert main([*argv, "--no-prd", "--no-alpha-beta", "--json", str(out), "-q"]) == 0  # skipping one is fine
    assert list(json.loads(out.read_text())["scores"]) == ["frechet_distance"]


def test_a_family_is_switched_off_by_its_no_flag(files):
    out = files / "no.json"
    argv = ["evaluate", "--real", str(files / "real.npy"), "--fake", str(files / "fake.npy"), "-q", "--json", str(out)]
    assert main([*argv, "--no-frechet", "--no-prd", "--no-precision-recall"]) == 0
    scores = json.loads(out.read_text())["scores"]
    assert "frechet_distance" not in scores and "f_beta" not in scores and "precision" not in scores
    assert {"density", "coverage", "alpha_precision"} <= set(scores)


def test_a_user_family_error_names_its_flag(files, capfd, mean_gap):
    argv = ["evaluate", "--real", str(files / "real.npy"), "--fake", str(files / "fake.npy"), "-q", "--no-prd"]
    assert main([*argv, "--mean-gap", "power=abc"]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "--mean-gap" in err and "power" in err
    assert main([*argv, "--mean-gap", "size=2"]) == 2  # an unknown option: the record refuses it
    err = capfd.readouterr().err
    assert "--mean-gap" in err and "size" in err
    out = files / "gap.json"
    assert main([*argv, "--mean-gap", "power=2", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["scores"]["mean_gap"] > 0


@pytest.mark.parametrize(
    ("words", "flag", "option"),
    [(["--kid", "subsets=0"], "--kid", "subsets"), (["--rarity", "k=0"], "--rarity", "`k`")],
)
def test_a_family_option_the_record_refuses_is_a_usage_error(files, capfd, words, flag, option):
    argv = ["evaluate", "--real", str(files / "real.npy"), "--fake", str(files / "fake.npy")]
    assert main([*argv, *words]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and f"error: {flag}: " in err and option in err


def test_a_family_too_large_for_the_sets_is_named_by_its_flag(files, capfd):
    argv = ["evaluate", "--real", str(files / "real.npy"), "--fake", str(files / "fake.npy"), "--no-prd"]
    assert main([*argv, "--clipped", "k=45"]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "error: --clipped: " in err and "k" in err


@pytest.mark.parametrize(
    ("words", "ok"),
    [(["--no-prd"], True), (["--prd"], False), (["--no-frechet"], True), (["--frechet"], False)],
)
def test_a_family_flag_against_a_protocol(files, capfd, words, ok):
    """``prdc`` switches PRD and the Fréchet distance off: their ``--no-`` flags agree, their flags contradict."""
    argv = ["evaluate", "--protocol", "prdc", "--real", str(files / "real.npy"), "--fake", str(files / "fake.npy")]
    code = main([*argv, "-q", *words])
    err = capfd.readouterr().err
    if ok:
        assert code == 0, err
    else:
        assert code == 2 and f"{words[0]}: contradicts protocol 'prdc', which sets it to False" in err


def test_every_switchable_family_with_a_score_has_a_flag():
    names = {family.name for family in flag_families()}
    assert names == {family.name for family in switch_families() if family.outputs}
    assert {"rarity", "prd", "alpha_beta", "frechet", "authenticity"} <= names
