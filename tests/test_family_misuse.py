"""``register_family`` used as a hostile user would: every misuse is refused in one line naming the argument
(names, output keys, argument types), a family's failing or misbehaving ``compute`` is named with the family and
the key or option (on the command line, with its flag), and an entry point that fails in any way, ``SystemExit``
included, is a warning while the command line goes on."""

import inspect
import json

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics, register_family, unregister_family
from lightning_prd.callback.core import PRDCallbackCore
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics
from lightning_prd.functional.engine import families as engine_families
from lightning_prd.metrics.base import FeatureMetric

REAL = torch.randn(60, 3, generator=torch.Generator().manual_seed(0))
FAKE = 0.8 * torch.randn(50, 3, generator=torch.Generator().manual_seed(1)) + 0.4
OFF = dict(k_precision_recall=None, k_density_coverage=None, realism=False, authenticity=False, prd=False)
OFF.update(alpha_beta=False, probabilistic=False, pr_cover=False, frechet=False)


def gap(real, fake, *, power=1.0):
    return {"gap_score": (real.double().mean(0) - fake.double().mean(0)).norm() ** power}


def _refused(match, name="fam_x", compute=gap, **kwargs):
    kwargs.setdefault("outputs", {"gap_score": "lower"})
    with pytest.raises(ValueError, match=match) as info:
        register_family(name, compute, **kwargs)
    assert "\n" not in str(info.value).replace("\\n", "")
    assert "fam_x" not in engine_families._REGISTRY
    return str(info.value)


@pytest.fixture
def family():
    """``fam_x`` registered from user code with the compute the test sets in ``returns``."""
    returns = {}

    def compute(real, fake, *, power=1.0):
        if "raise" in returns:
            return real.mean() ** power
        return returns["value"]

    register_family("fam_x", compute, outputs={"fam_score": "lower"}, defaults={"power": 1.0})
    yield returns
    unregister_family("fam_x")


def test_a_valid_family_is_registered_and_computed():
    register_family("fam_x", gap, outputs={"gap_score": "lower"}, defaults={"power": 1.0}, per_sample=[])
    try:
        out = generative_metrics(REAL, FAKE, fam_x={"power": 2.0}, **OFF)
        assert float(out["gap_score"]) == pytest.approx(float(gap(REAL, FAKE, power=2.0)["gap_score"]), rel=1e-12)
    finally:
        unregister_family("fam_x")


@pytest.mark.parametrize("name", ["mean_gap\n", "Mean", "9gap", "gap-x", "", " gap", "gap ", "gäp", 3, None])
def test_a_name_must_be_the_whole_pattern(name):
    message = _refused(r"Expected argument `name` of register_family to be lower case letters", name=name)
    assert repr(name) in message


def _surface_keywords():
    """An independent reading of the surfaces' keywords: their signatures and torchmetrics' documented ones."""
    names = set()
    for fn in (generative_metrics, GenerativeMetrics.__init__, FeatureMetric.__init__, PRDCallbackCore.__init__):
        names |= {p.name for p in inspect.signature(fn).parameters.values() if p.kind is not p.VAR_KEYWORD}
    names |= {"compute_on_cpu", "dist_sync_on_step", "process_group", "dist_sync_fn", "sync_on_compute"}
    names |= {"compute_with_cache", "distributed_available_fn"}
    return sorted(names - {"self"} - {family.name for family in engine_families.families()})


@pytest.mark.parametrize("name", _surface_keywords())
def test_a_name_that_is_a_keyword_of_a_surface_is_refused(name):
    message = _refused(r"Expected argument `name` of register_family to be a new keyword", name=name)
    assert repr(name) in message and "option of every surface" in message


def test_a_metric_keyword_keeps_its_meaning():
    with pytest.raises(ValueError, match="`name`"):
        register_family("compute_on_cpu", gap, outputs={"gap_score": "lower"})
    assert GenerativeMetrics(compute_on_cpu=True, **OFF, kid=True).compute_on_cpu is True


@pytest.mark.parametrize(
    "key",
    ["", "a b", "precision ", " x", "ｐｒｅｃｉｓｉｏｎ", "x\n", "x\t", "a\x00b", "a\u200bb", "ﬁ", "per_class/x", 3],
)
@pytest.mark.parametrize("argument", ["outputs", "per_sample"])
def test_an_output_key_must_be_a_score_name(key, argument):
    kwargs = {"outputs": {key: "lower"}} if argument == "outputs" else {"per_sample": [key]}
    says = "hold score names" if isinstance(key, str) or argument == "outputs" else "be a list or tuple of keys"
    message = _refused(rf"Expected argument `{argument}` of register_family to {says}", **kwargs)
    assert repr(key) in message


@pytest.mark.parametrize(
    "key, owner",
    [
        ("kid_std", "family 'kid'"),
        ("realism", "family 'realism'"),
        ("prd_precision", "family 'prd'"),
        ("alphas", "family 'alpha_beta'"),
        ("authentic", "family 'alpha_beta'"),
        ("frechet_distance_infinity_values", "family 'fd_infinity'"),
        ("precision_std", "family 'precision_recall'"),
        ("coverage_per_class", "family 'density_coverage'"),
        ("recall_mean", "family 'precision_recall'"),
        ("num_real_per_class", "option `per_class`"),
        ("classes", "option `per_class`"),
        ("closest_ratio", "option `closest_pairs`"),
        ("covered", "family 'density_coverage'"),
        ("inside_precision", "family 'precision_recall'"),
        ("epoch", "the callback's record"),
        ("final", "the callback's record"),
    ],
)
@pytest.mark.parametrize("argument", ["outputs", "per_sample"])
def test_an_output_key_the_package_uses_is_refused(key, owner, argument):
    kwargs = {"outputs": {key: "lower"}} if argument == "outputs" else {"per_sample": [key]}
    message = _refused(rf"Expected argument `{argument}` of register_family to name new scores", **kwargs)
    assert f"{key!r} is a key of {owner}" in message


def test_a_key_read_as_per_class_is_refused():
    _refused(r"`outputs` of register_family to name new scores, but 'mine_per_class' ends in '_per_class'",
             outputs={"mine_per_class": "lower"})  # fmt: skip


@pytest.mark.parametrize(
    "argument, value",
    [
        ("min_real", 10),
        ("min_real", 10.5),
        ("min_fake", "5"),
        ("check", "nope"),
        ("pass_asks", 3),
        ("from_pass", [1]),
        ("compute", "gap"),
        ("per_class", "no"),
        ("per_class", 1),
        ("replace", "yes"),
        ("needs_test", "no"),
        ("statistics", 1),
        ("switchable", "yes"),
        ("fit", "nope"),
        ("link", 3),
        ("ask", [1]),
        ("read", "gap"),
        ("shrink", 2),
        ("cli", {"on": True}),
        ("order", "first"),
        ("empty_class", [0.0]),
        ("keyword", "other_name"),
        ("value_option", "power_of_two"),
        ("per_sample", "abc"),
        ("per_sample", [1]),
        ("defaults", {1: 2}),
        ("defaults", {"a b": 2}),
        ("defaults", [("power", 1)]),
        ("meaning", 3),
        ("docs", 5),
    ],
)
def test_an_argument_of_the_wrong_type_is_refused(argument, value):
    kwargs = {"compute": value} if argument == "compute" else {argument: value}
    if argument != "compute":
        kwargs["compute"] = gap
    message = _refused(rf"Expected argument `{argument}` of register_family to be .*, but got", **kwargs)
    assert message.endswith(repr(value))


@pytest.mark.parametrize(
    "value, says",
    [
        ("text", "to return a dict"),
        (None, "to return a dict"),
        (object(), "to return a dict"),
        ({"fam_score": "abc"}, "output `fam_score` of family 'fam_x' to be a real 0-dim tensor or number, but got str"),
        ({"fam_score": None}, "output `fam_score` of family 'fam_x' to be a real 0-dim tensor or number, but got None"),
        ({"fam_score": 1 + 2j}, "output `fam_score` of family 'fam_x' to be a real 0-dim tensor or number"),
        ({"fam_score": torch.tensor(1 + 1j)}, "`fam_score` of family 'fam_x' .* but got dtype torch.complex64"),
        ({"fam_score": torch.tensor(True)}, "`fam_score` of family 'fam_x' .* but got dtype torch.bool"),
        ({"fam_score": torch.ones(3)}, "`fam_score` of family 'fam_x' .* but got shape \\(3,\\)"),
        ({}, r"family 'fam_x' to return exactly its outputs .*\['fam_score'\] missing"),
        ({"fam_score": 1.0, "extra": 2.0}, r"family 'fam_x' to return exactly .*\['extra'\] not declared"),
    ],
)
def test_a_bad_result_of_compute_names_the_family_and_the_key(family, value, says):
    family["value"] = value
    with pytest.raises(ValueError, match=says) as info:
        generative_metrics(REAL, FAKE, fam_x=True, **OFF)
    assert "'fam_x'" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("power", ["abc", None, [1]])
def test_an_exception_of_compute_names_the_family_and_its_options(family, power):
    family["raise"] = True
    with pytest.raises(ValueError, match=r"The `compute` of family 'fam_x' failed with options \{'power': ") as info:
        metric = GenerativeMetrics(fam_x={"power": power}, **OFF)
        metric.update(REAL, real=True)
        metric.update(FAKE, real=False)
        metric.compute()
    assert repr(power) in str(info.value) and "TypeError" in str(info.value)
    assert isinstance(info.value.__cause__, TypeError)


def _files(tmp_path):
    np.save(tmp_path / "real.npy", REAL.numpy())
    np.save(tmp_path / "fake.npy", FAKE.numpy())
    return ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), "-q"]


@pytest.mark.parametrize("words, says", [(["power=abc"], "failed with options {'power': 'abc'}"),
                                         (["power=[1]"], "failed with options {'power': [1]}")])  # fmt: skip
def test_the_command_line_names_the_flag_of_a_failing_family(family, tmp_path, capsys, words, says):
    family["raise"] = True
    assert main([*_files(tmp_path), "--fam-x", *words]) == 1
    err = capsys.readouterr().err
    assert ": --fam-x: The `compute` of family 'fam_x'" in err and "'fam_x'" in err and says in err
    assert len(err.strip().splitlines()) == 1


def test_the_command_line_names_the_flag_of_a_bad_result(family, tmp_path, capsys):
    family["value"] = {"fam_score": "abc"}
    assert main([*_files(tmp_path), "--fam-x"]) == 1
    err = capsys.readouterr().err
    assert ": --fam-x: Expected output `fam_score` of family 'fam_x'" in err


BROKEN = {
    "exits_at_import": "import sys\nsys.exit(3)\n",
    "exits_in_register": "import sys\n\ndef register():\n    sys.exit('bye')\n",
    "raises_base": "def register():\n    raise GeneratorExit('odd')\n",
    "registers_badly": (
        "from lightning_prd import register_family\n\n"
        "def register():\n    register_family('epoch_x', None, outputs={'epoch': 'lower'})\n"
    ),
}


@pytest.mark.parametrize("module", sorted(BROKEN))
def test_an_entry_point_that_fails_in_any_way_is_a_warning_and_the_command_line_goes_on(
    module, tmp_path, monkeypatch, capsys
):
    site = tmp_path / "site"
    info = site / f"lpfam_{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (site / f"lpfam_{module}.py").write_text(BROKEN[module])
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: lpfam-{module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[lightning_prd.families]\n{module} = lpfam_{module}:register\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(engine_families, "_loaded", {})
    out = tmp_path / "out.json"
    with pytest.warns(UserWarning, match=rf"'{module}=lpfam_{module}:register'.*failed and is skipped"):
        assert main([*_files(tmp_path), "--json", str(out)]) == 0
    assert "precision" in json.loads(out.read_text())["scores"]


def _check_power(options):
    return {"power": options["power"] + 0.0}  # a TypeError for a power that is no number


@pytest.mark.parametrize("power", ["abc", None, [2]])
def test_an_error_of_check_names_the_family_and_its_options(power):
    register_family("fam_x", gap, outputs={"gap_score": "lower"}, defaults={"power": 1.0}, check=_check_power)
    try:
        with pytest.raises(ValueError, match=r"The `check` of family 'fam_x' failed with options \{'power': ") as info:
            generative_metrics(REAL, FAKE, fam_x={"power": power}, **OFF)
        assert repr(power) in str(info.value) and "TypeError" in str(info.value)
    finally:
        unregister_family("fam_x")


@pytest.mark.parametrize("words, says", [(["power=abc"], "'abc'"), (["powr=2"], "to hold only ['power']")])
def test_the_command_line_names_the_flag_of_a_refused_option(tmp_path, capsys, words, says):
    register_family("fam_x", gap, outputs={"gap_score": "lower"}, defaults={"power": 1.0}, check=_check_power)
    try:
        assert main([*_files(tmp_path), "--fam-x", *words]) == 2
        err = capsys.readouterr().err
        assert "error: --fam-x: " in err and "fam_x" in err and says in err
        assert len(err.strip().splitlines()) == 1
    finally:
        unregister_family("fam_x")
