"""Sanity checks of fidelity and diversity scores, after Räisä et al., ICML 2025.

O. Räisä, B. van Breugel, M. van der Schaar, "Position: All Current Generative Fidelity and Diversity
Metrics are Flawed" (ICML 2025); code ``vanderschaarlab/position-fidelity-diversity-metrics-flawed``.
Each *setting* is a seeded synthetic pair of distributions whose difference is swept by one parameter
(the paper's ``sanity_checks/*.py``); each *check* applies a criterion to the measured responses of a
setting, per kind of score (the paper's ``check_pass_fails.py`` with the thresholds of its
``sanity_check_criteria.py``), and is labelled with the paper's desideratum (``aggregate_pass_fail_tables.py``:
D1b purpose, D2 hyperparameters, D3 data, D4 bounds, D5 invariance). A setting is measured once and
every score is read off the same :func:`lightning_prd.functional.generative_metrics` call.

This module only measures: ``tests/test_sanity_checks.py`` runs it, ``docs/scripts/sanity_checks.py``
writes ``docs/sanity-checks.md`` from it. Scores are registered in :data:`KINDS` (one line per score);
a scalar key of ``generative_metrics`` that is not listed gets a kind from its name, and a score computed
outside ``generative_metrics`` goes in :data:`EXTRA`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.functional import generative_metrics
from lightning_prd.functional.engine.families import directions, switch_families
from lightning_prd.functional.engine.vocabulary import plain

FIDELITY, DIVERSITY, BOTH, DISTANCE, SELF, PRIVACY, RARITY, UNKNOWN = (
    "fidelity",
    "diversity",
    "fidelity and diversity",
    "distance",
    "diversity of the generated set alone",
    "authenticity",
    "uncommonness of generated samples",
    "unknown",
)

#: the kind of each score, which says which criterion of a check applies to it (one line per score)
KINDS: Dict[str, str] = {
    "precision": FIDELITY,
    "density": FIDELITY,
    "realism_share": FIDELITY,
    "p_precision": FIDELITY,
    "precision_cover": FIDELITY,
    "alpha_precision": FIDELITY,
    "f_inv_beta": FIDELITY,
    "top_precision": FIDELITY,
    "clipped_density": FIDELITY,
    "sym_precision": FIDELITY,
    "recall": DIVERSITY,
    "coverage": DIVERSITY,
    "p_recall": DIVERSITY,
    "recall_cover": DIVERSITY,
    "beta_recall": DIVERSITY,
    "f_beta": DIVERSITY,
    "top_recall": DIVERSITY,
    "clipped_coverage": DIVERSITY,
    "sym_recall": DIVERSITY,
    "top_f1": BOTH,
    "frechet_distance": DISTANCE,
    "kid": DISTANCE,
    "frechet_distance_infinity": DISTANCE,
    "cmmd": DISTANCE,
    "vendi_ratio": SELF,
    "authenticity": PRIVACY,
    "rarity_mean": RARITY,
}

#: scalar keys of ``generative_metrics`` that are not a score of the model: the spread of an estimate,
#: the real set's own value, or a value that a score of :data:`DERIVED` reads
COMPANIONS = {"kid_std", "vendi", "vendi_real"}

#: scores read from ``generative_metrics``'s output that are not one of its scalar keys
DERIVED: Dict[str, Callable[[Mapping[str, Tensor]], float]] = {
    # realism is one value per generated sample; >= 1 means inside a kept real ball
    "realism_share": lambda out: float((out["realism"] >= 1).to(torch.float64).mean()),
    # the generated set's Vendi score over the real set's: 1 when they are equally diverse
    "vendi_ratio": lambda out: float(out["vendi"] / out["vendi_real"]),
}

#: scores computed outside ``generative_metrics``: name -> (callable(real, fake) -> float, kind), for example
#: ``"fd_infinity": (lambda real, fake: float(fd_infinity(real, fake)), DISTANCE)``
EXTRA: Dict[str, Tuple[Callable[[Tensor, Tensor], float], str]] = {}

#: options of the families that are off by default, for small sets and a fast suite; every other switch
#: of ``generative_metrics`` whose default is False is turned on with True
PRD_RUNS, KID_SUBSETS, KID_SUBSET_SIZE = 2, 20, 200
FAMILY_OPTIONS: Dict[str, Callable[[int, int], object]] = {
    "prd": lambda n, m: {"num_runs": PRD_RUNS},
    "kid": lambda n, m: {"subset_size": min(n, m, KID_SUBSET_SIZE), "subsets": KID_SUBSETS},
}

_WORDS = (  # name fragments -> kind, for a scalar key not in KINDS
    (("distance", "fd", "kid", "mmd", "fld"), DISTANCE),
    (("authentic", "copy", "copying"), PRIVACY),
    (("recall", "coverage", "diversity"), DIVERSITY),
    (("precision", "density", "fidelity", "realism"), FIDELITY),
)


def kind_of(name: str) -> str:
    """The kind of a score: :data:`KINDS`, :data:`EXTRA`, a distance where its family says lower is better,
    else guessed from its name."""
    if name in KINDS:
        return KINDS[name]
    if name in EXTRA:
        return EXTRA[name][1]
    if directions().get(name) == "lower":
        return DISTANCE
    low = name.lower()
    for words, kind in _WORDS:
        if any(w in low for w in words):
            return kind
    return UNKNOWN


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread: the suite's small matrices gain nothing from more, and the outcomes
    must not depend on how many threads a machine has."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _switches() -> List[str]:
    """The families of ``generative_metrics`` that are off by default (its keywords, then the package's families
    of the registry that have no keyword of their own)."""
    params = inspect.signature(generative_metrics).parameters
    return [
        f.keyword
        for f in switch_families()
        if f.builtin and (f.keyword not in params or plain(params[f.keyword].default) is False)
    ]


def _default_on() -> List[str]:
    """The families of ``generative_metrics`` that are on by default."""
    params = inspect.signature(generative_metrics).parameters.values()
    return [p.name for p in params if plain(p.default) is True]


@functools.cache
def _usable_switches() -> Tuple[str, ...]:
    """The family switches that run on a plain (real, fake) pair (a family that needs more input is left out)."""
    g = torch.Generator().manual_seed(0)
    real, fake = torch.randn(200, 4, generator=g, dtype=torch.float64), torch.randn(200, 4, generator=g).double()
    with one_thread():
        try:
            generative_metrics(real, fake, **{name: _family_value(name, 200, 200) for name in _switches()})
            return tuple(_switches())
        except (TypeError, ValueError, RuntimeError):
            pass
        usable = []
        for name in _switches():
            try:
                generative_metrics(real, fake, **{name: _family_value(name, 200, 200)})
            except (TypeError, ValueError, RuntimeError):
                continue
            usable.append(name)
    return tuple(usable)


def _family_value(name: str, n: int, m: int) -> object:
    return FAMILY_OPTIONS[name](n, m) if name in FAMILY_OPTIONS else True


def _scalars(out: Mapping[str, Tensor]) -> Dict[str, float]:
    values = {k: float(v) for k, v in out.items() if v.ndim == 0 and k not in COMPANIONS and not k.endswith("_std")}
    for name, read in DERIVED.items():
        try:
            values[name] = read(out)
        except KeyError:
            continue
    return values


def measure(real: Tensor, fake: Tensor) -> Dict[str, float]:
    """Every score of the package on one pair, from one ``generative_metrics`` call with every family on.

    When that call raises (a family refuses the data), the families are computed one by one and the
    scores of a family that raises are NaN.
    """
    n, m = len(real), len(fake)
    options = {name: _family_value(name, n, m) for name in _usable_switches()}
    try:
        values = _scalars(generative_metrics(real, fake, **options))
    except (ValueError, RuntimeError):
        values = {}
        off = {"k_precision_recall": None, "k_density_coverage": None, **dict.fromkeys(_default_on(), False)}
        groups = [{**off, name: value} for name, value in options.items()]
        try:  # the families that are on by default, together
            values.update(_scalars(generative_metrics(real, fake)))
        except (ValueError, RuntimeError):
            groups += [{**off, name: True} for name in _default_on()]
        for group in groups:
            try:
                values.update(_scalars(generative_metrics(real, fake, **group)))
            except (ValueError, RuntimeError):
                continue
    for name, (fn, _) in EXTRA.items():
        try:
            values[name] = float(fn(real, fake))
        except (ValueError, RuntimeError):
            values[name] = math.nan
    return values


@functools.cache
def score_names() -> Tuple[str, ...]:
    """The scores the suite measures, in table order (kind, then name)."""
    g = torch.Generator().manual_seed(1)
    real, fake = torch.randn(200, 4, generator=g, dtype=torch.float64), torch.randn(200, 4, generator=g).double()
    with one_thread():
        names = measure(real, fake)
    order = [FIDELITY, DIVERSITY, BOTH, DISTANCE, SELF, PRIVACY, RARITY, UNKNOWN]
    known = list(KINDS)
    return tuple(sorted(names, key=lambda s: (order.index(kind_of(s)), known.index(s) if s in known else 99, s)))


# ---------------------------------------------------------------- settings: seeded pairs of distributions

N = 500  #: samples per set unless a setting sweeps it
D = 8  #: dimension unless a setting sweeps it


def _gauss(n: int, d: int, g: torch.Generator, mean: float = 0.0, std: float = 1.0) -> Tensor:
    return mean + std * torch.randn(n, d, generator=g, dtype=torch.float64)


def _mixture(means: Tensor, std: float, probs: Tensor, n: int, g: torch.Generator) -> Tensor:
    comp = torch.multinomial(probs.double(), n, replacement=True, generator=g)
    return means[comp] + std * torch.randn(n, means.shape[1], generator=g, dtype=torch.float64)


def _ladder(modes: int, d: int) -> Tensor:
    """``modes`` means evenly spaced on the diagonal, 2.5 apart in each coordinate."""
    return 2.5 * torch.arange(modes, dtype=torch.float64)[:, None].expand(modes, d)


def _circle(count: int) -> Tensor:
    angle = 2 * math.pi * torch.arange(count, dtype=torch.float64) / count
    return 10 * torch.stack([angle.cos(), angle.sin()], 1)


def _sphere_surface(n: int, d: int, radius: float, g: torch.Generator) -> Tensor:
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return radius * x / x.norm(dim=1, keepdim=True)


def _ball3(n: int, radius: float, g: torch.Generator) -> Tensor:
    """Uniform in the solid 3-D ball."""
    direction = _sphere_surface(n, 3, 1.0, g)
    return radius * torch.rand(n, 1, generator=g, dtype=torch.float64) ** (1 / 3) * direction


def _torus(n: int, g: torch.Generator) -> Tensor:
    """Uniform in the disc of radius 0.1 around (1, 0) in the x-z plane, turned about the z axis."""
    rho = 0.1 * torch.rand(n, generator=g, dtype=torch.float64).sqrt()
    phi = 2 * math.pi * torch.rand(n, generator=g, dtype=torch.float64)
    turn = 2 * math.pi * torch.rand(n, generator=g, dtype=torch.float64)
    radial, z = 1 + rho * phi.cos(), rho * phi.sin()
    return torch.stack([radial * turn.cos(), radial * turn.sin(), z], 1)


def _pareto(n: int, g: torch.Generator, b: float = 1.01) -> Tensor:
    return (1 - torch.rand(n, generator=g, dtype=torch.float64)) ** (-1 / b)


Draw = Callable[[str, float, torch.Generator, torch.Generator], Tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class Setting:
    """A pair of distributions swept by ``param`` over ``values``, once per series.

    ``draw(series, value, g_real, g_fake) -> (real, fake)``; ``g_real`` is seeded per series only, so the
    real set stays the same along a sweep unless the sweep changes it, as in the paper's code.
    """

    code: str
    title: str
    source: str
    param: str
    values: Tuple[float, ...]
    draw: Draw
    series: Tuple[str, ...] = ("",)
    what: str = ""
    same_draws: bool = False  #: the same random draws at every step: only the swept transformation changes


def _shift(series, mu, gr, gf):
    return _gauss(N, D, gr), _gauss(N, D, gf, mean=mu)


def _real_outlier(series, mu, gr, gf):
    return torch.cat([_gauss(N, D, gr), torch.full((1, D), 3.0, dtype=torch.float64)]), _gauss(N, D, gf, mean=mu)


def _fake_outlier(series, mu, gr, gf):
    return _gauss(N, D, gr), torch.cat([_gauss(N, D, gf, mean=mu), torch.full((1, D), -3.0, dtype=torch.float64)])


def _std(series, s, gr, gf):
    return _gauss(N, D, gr), _gauss(N, D, gf, std=s)


def _sequential(series, dropped, gr, gf):
    probs = torch.ones(5, dtype=torch.float64)
    real = _mixture(_ladder(5, D), 1 / 3, probs, N, gr)
    probs[5 - int(dropped) :] = 0
    return real, _mixture(_ladder(5, D), 1 / 3, probs, N, gf)


def _simultaneous(series, fraction, gr, gf):
    probs = torch.ones(5, dtype=torch.float64)
    real = _mixture(_ladder(5, D), 1 / 3, probs, N, gr)
    probs[1:] *= 1 - fraction
    return real, _mixture(_ladder(5, D), 1 / 3, probs, N, gf)


def _invention(series, count, gr, gf):
    means = _circle(10)
    real = _mixture(means[:5], 0.25, torch.ones(5), N, gr)
    return real, _mixture(means[: int(count)], 0.25, torch.ones(int(count)), N, gf)


def _hypersphere(series, radius, gr, gf):
    return _sphere_surface(N, 16, 1.0, gr), _sphere_surface(N, 16, radius, gf)


_CUBE_START = 1 - 0.2 ** (1 / D)  # the fake cube [s, s + 1]^D overlaps the real unit cube in volume 0.2


def _cube_both(series, n, gr, gf):
    return torch.rand(int(n), D, generator=gr, dtype=torch.float64), _CUBE_START + torch.rand(
        int(n), D, generator=gf, dtype=torch.float64
    )


def _cube_fake(series, m, gr, gf):
    return torch.rand(N, D, generator=gr, dtype=torch.float64), _CUBE_START + torch.rand(
        int(m), D, generator=gf, dtype=torch.float64
    )


def _sphere_torus(series, m, gr, gf):
    if series == "real ball":
        return _ball3(N, 0.8, gr), _torus(int(m), gf)
    return _torus(N, gr), _ball3(int(m), 0.8, gf)


def _collapse(series, mu, gr, gf):
    direction = torch.ones(D, dtype=torch.float64)
    signs = torch.randint(0, 2, (N, 1), generator=gr).double() * 2 - 1
    real = _gauss(N, D, gr) + signs * (mu / 2) * direction
    # one Gaussian with the real mixture's mean and covariance, I + (mu/2)^2 11^T
    fake = _gauss(N, D, gf) + (mu / 2) * torch.randn(N, 1, generator=gf, dtype=torch.float64) * direction
    return real, fake


def _scale_one_dim(series, s, gr, gf):
    real, fake = _gauss(N, 2, gr), _gauss(N, 2, gf)
    fake[:, 0] += 6
    real[:, 1] *= s
    fake[:, 1] *= s
    return real, fake


def _pareto_pair(series, mu, gr, gf):
    real = torch.stack([torch.randn(N, generator=gr, dtype=torch.float64), _pareto(N, gr)], 1)
    fake = torch.stack([mu + torch.randn(N, generator=gf, dtype=torch.float64), _pareto(N, gf)], 1)
    return real, fake


def _disjoint_dim(series, extra, gr, gf):
    real, fake = _gauss(N, 1 + int(extra), gr), _gauss(N, 1 + int(extra), gf)
    fake[:, 0] += 6
    return real, fake


def _discrete(series, scale, gr, gf):
    real, fake = scale * _gauss(N, 1, gr), scale * _gauss(N, 1, gf)
    return (real.round(), fake) if series == "real discrete" else (real, fake.round())


def _translate(series, t, gr, gf):
    return _gauss(N, D, gr) + t, _gauss(N, D, gf, mean=0.5, std=1.2) + t


def _matched_dims(series, d, gr, gf):
    return _gauss(N, int(d), gr), _gauss(N, int(d), gf)


def _copies(series, share, gr, gf):
    real = _gauss(N, D, gr)
    fake = _gauss(N, D, gf)
    count = int(round(share * N))
    fake[:count] = real[torch.randperm(N, generator=gf)[:count]]
    return real, fake


PAPER = "vanderschaarlab/position-fidelity-diversity-metrics-flawed"
_G, _GM = "sanity_checks/gaussian.py", "sanity_checks/gaussian_mixture.py"
_NOT_PAPER = "not in the paper's suite"


def _setting(code: str, title: str, source: str, sweep: Tuple[str, Tuple[float, ...]], draw: Draw, what: str, **kw):
    return Setting(code, title, source, sweep[0], tuple(map(float, sweep[1])), draw, what=what, **kw)


SETTINGS: Dict[str, Setting] = {
    s.code: s
    for s in (
        _setting(
            "MS", "Gaussian mean difference", f"{_G}: run_gaussian_mean_difference",
            ("μ", (0, 0.5, 1, 2, 3)), _shift, f"real N(0, I), fake N(μ·1, I), D = {D}",
        ),
        _setting(
            "RO", "Mean difference + outlier in real", f"{_G}: run_gaussian_mean_difference_with_outlier",
            ("μ", (0, 1.5, 3)), _real_outlier, "as MS, with one real sample added at 3·1",
        ),
        _setting(
            "FO", "Mean difference + outlier in fake", f"{_G}: run_gaussian_mean_difference_with_outlier",
            ("μ", (0, 1.5, 3)), _fake_outlier,
            "as MS, with one generated sample added at −3·1 (the paper's outlier, mirrored onto the swept side)",
        ),
        _setting(
            "SD", "Gaussian std difference", f"{_G}: run_gaussian_std_difference",
            ("s", (0.1, 0.3, 1, 1.7, 10)), _std, f"real N(0, I), fake N(0, s² I), D = {D}",
        ),
        _setting(
            "SQ", "Sequential mode dropping", f"{_GM}: run_gaussian_mode_dropping_sequential",
            ("dropped", (0, 1, 2, 3, 4)), _sequential,
            f"5 modes of std 1/3 on the diagonal, 2.5 apart per coordinate, D = {D}; the fake drops the last j",
        ),
        _setting(
            "SI", "Simultaneous mode dropping", f"{_GM}: run_gaussian_mode_dropping_simultaneous",
            ("f", (0, 0.5, 0.9, 1)), _simultaneous, "the same 5 modes; the fake's weights of modes 2–5 times 1 − f",
        ),
        _setting(
            "MI", "Mode dropping + invention", f"{_GM}: run_gaussian_mode_dropping_invention",
            ("modes", (1, 3, 5, 10)), _invention,
            "10 means on a circle of radius 10 in 2-D, std 0.25; real: the first 5, fake: the first c",
        ),
        _setting(
            "HS", "Hypersphere surface", "sanity_checks/hypersphere_surface.py: run_uniform_hypersphere_surface",
            ("radius", (0.1, 0.55, 1, 1.45, 1.9)), _hypersphere,
            "uniform on the sphere of radius 1 (real) and of radius r (fake) in 16-D",
        ),
        _setting(
            "HN", "Hypercube, varying sample size", "sanity_checks/hypercube.py: run_uniform_hypercube_varying_size",
            ("n", (200, 350, 500, 700)), _cube_both,
            f"real U[0, 1]^{D}, fake a unit cube overlapping it in volume 0.2, n samples each",
        ),
        _setting(
            "HM", "Hypercube, varying fake size", "sanity_checks/hypercube.py: run_uniform_hypercube_varying_syn_size",
            ("m", (200, 350, 500, 700)), _cube_fake, f"as HN with {N} real samples and m generated ones",
        ),
        _setting(
            "ST", "Sphere vs. torus", "sanity_checks/torus.py: run_sphere_torus",
            ("m", (200, 450, 700)), _sphere_torus,
            "a solid 3-D ball of radius 0.8 and a torus (radii 1 and 0.1) around it: disjoint supports",
            series=("real ball", "real torus"),
        ),
        _setting(
            "MC", "Mode collapse (one vs. two modes)", f"{_GM}: run_one_vs_two_modes",
            ("μ", (0, 1, 2.5, 5)), _collapse,
            f"real ½N(−μ/2·1, I) + ½N(μ/2·1, I), fake the Gaussian of the same mean and covariance, D = {D}",
        ),
        _setting(
            "SC", "Scaling one dimension", f"{_G}: run_gaussian_scaling_one_dimension",
            ("scale", (1e-3, 1, 1e3)), _scale_one_dim,
            "real N(0, I₂), fake N((6, 0), I₂), the second coordinate of both scaled", same_draws=True,
        ),
        _setting(
            "PA", "Mean difference + Pareto", f"{_G}: run_gaussian_mean_difference_with_pareto",
            ("μ", (0, 2, 4, 6)), _pareto_pair, "first coordinate N(0, 1) vs N(μ, 1), second Pareto(b = 1.01) in both",
        ),
        _setting(
            "DD", "One disjoint dim. + many identical", f"{_G}: run_high_dim_gaussian_one_disjoint_dim",
            ("extra dims", (1, 16, 64, 256)), _disjoint_dim,
            "N(0, I) against the same shifted by 6 in the first coordinate, plus identical extra dimensions",
        ),
        _setting(
            "DC", "Discrete vs. continuous numerical",
            "sanity_checks/discrete.py: run_discrete_numerical_vs_continuous_numerical",
            ("scale", (1, 30, 1000)), _discrete, "scale·N(0, 1) in 1-D, one of the two sets rounded to integers",
            series=("real discrete", "real continuous"), same_draws=True,
        ),
        _setting(
            "TR", "Translation of both sets", f"{_NOT_PAPER}: the invariance of D5, for a shift",
            ("t", (0, 10, 1000)), _translate, f"real N(0, I), fake N(0.5·1, 1.2² I), D = {D}, both moved by t·1",
            same_draws=True,
        ),
        _setting(
            "DM", "Matched, growing dimension", f"{_NOT_PAPER}: its D4 'identical' case, swept over D",
            ("D", (2, 16, 128)), _matched_dims, "real and fake N(0, I_D)",
        ),
        _setting(
            "CP", "Copies of the real set", f"{_NOT_PAPER}: authenticity (Alaa et al. 2022)",
            ("copied", (0, 0.5, 1)), _copies,
            f"real N(0, I), fake N(0, I) of which a share is exact copies of real samples, D = {D}",
        ),
    )
}  # fmt: skip


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode())


@functools.cache
def run_setting(code: str) -> Dict[str, List[Dict[str, float]]]:
    """Series -> the scores at each value of the sweep (cached: each setting is measured once)."""
    setting = SETTINGS[code]
    runs: Dict[str, List[Dict[str, float]]] = {}
    for series in setting.series:
        runs[series] = []
        for i, value in enumerate(setting.values):
            g_real = torch.Generator().manual_seed(_seed(code, series))
            g_fake = torch.Generator().manual_seed(_seed(code, series, 0 if setting.same_draws else i))
            real, fake = setting.draw(series, value, g_real, g_fake)
            runs[series].append(measure(real, fake))
    return runs


def run_all() -> Dict[str, Dict[str, List[Dict[str, float]]]]:
    """Every setting, measured once (on one thread)."""
    with one_thread():
        return {code: run_setting(code) for code in SETTINGS}


# ---------------------------------------------------------------- criteria: pass/fail from a measured sweep

ONE, ZERO, TOL = 1.0, 0.0, 0.05  # the paper's "close to one / zero": within 0.05
EPS = 1e-9  # thresholds are inclusive: 0.95 = 475/500 is within 0.05 of 1 although 1 - 0.95 > 0.05 in floats
FIRST, LAST = "first", "last"  # the ends of a sweep, wherever it starts and stops
Point = Union[float, str]


@dataclass(frozen=True)
class Sweep:
    """One series of one score: ``ys`` is what the criteria read, ``raw`` what was measured.

    For a distance (lower is better, no fixed scale) ``ys = 1 - raw / max|raw|``: 1 at a zero distance,
    0 at the sweep's largest, so the shape criteria of the bounded scores apply to it unchanged.
    """

    param: str
    xs: Tuple[float, ...]
    ys: Tuple[float, ...]
    raw: Tuple[float, ...]
    distance: bool = False

    def i(self, x: Point) -> int:
        """The index of a point: a swept value, or :data:`FIRST` / :data:`LAST`."""
        return 0 if x == FIRST else len(self.xs) - 1 if x == LAST else self.xs.index(float(x))

    def y(self, x: Point) -> float:
        return self.ys[self.i(x)]

    def label(self, x: Point) -> str:
        return f"{self.param}={self.xs[self.i(x)]:g}"


Result = Tuple[bool, str]
Criterion = Callable[[Sweep], Result]


def fmt(v: float, distance: bool = False) -> str:
    if math.isnan(v):
        return "nan"
    return f"{v:.3g}" if distance else f"{v:.2f}"


def curve(s: Sweep) -> str:
    """The measured response along the sweep, ``a → b → c``."""
    return " → ".join(fmt(v, s.distance) for v in s.raw)


def _nan(s: Sweep, *points: Point) -> Optional[str]:
    bad = [x for x in (points or s.xs) if math.isnan(s.y(x))]
    return f"not computed at {', '.join(s.label(x) for x in bad)}" if bad else None


def at(x: Point, target: float) -> Criterion:
    """The value at ``x`` is within 0.05 of ``target`` (a distance: at most 5% of its largest at target 1)."""

    def crit(s: Sweep) -> Result:
        if _nan(s, x):
            return False, str(_nan(s, x))
        ok = abs(s.y(x) - target) <= TOL + EPS
        if ok:
            return True, ""
        want = "≤ 5% of the sweep's largest" if s.distance else f"≈ {target:g}"
        return False, f"{fmt(s.raw[s.i(x)], s.distance)} at {s.label(x)}, want {want}"

    return crit


def either(x: Point) -> Criterion:
    """≈ 1 or ≈ 0 at ``x`` (a wide generated set: the paper accepts a 'high' or a 'low' diversity score)."""

    def crit(s: Sweep) -> Result:
        return any(c(s)[0] for c in (at(x, ONE), at(x, ZERO))), f"{fmt(s.y(x))} at {s.label(x)}, want ≈ 1 or ≈ 0"

    return crit


def _ends(s: Sweep) -> Tuple[float, float, float, float]:
    return s.ys[0], s.ys[-1], max(s.ys), min(s.ys)


def high_to_low(min_drop: float = 0.2, slack: float = 0.1) -> Criterion:
    """High at the start and low at the end: start − end ≥ 0.2, start ≥ max − 0.1, end ≤ min + 0.1."""

    def crit(s: Sweep) -> Result:
        if _nan(s):
            return False, str(_nan(s))
        first, last, hi, lo = _ends(s)
        ok = first - last >= min_drop - EPS and hi - first <= slack + EPS and last - lo <= slack + EPS
        return ok, "" if ok else "not high-to-low"

    return crit


def low_to_high(min_rise: float = 0.2, slack: float = 0.1) -> Criterion:
    """Low at the start and high at the end (the mirror of :func:`high_to_low`)."""

    def crit(s: Sweep) -> Result:
        if _nan(s):
            return False, str(_nan(s))
        first, last, hi, lo = _ends(s)
        ok = last - first >= min_rise - EPS and first - lo <= slack + EPS and hi - last <= slack + EPS
        return ok, "" if ok else "not low-to-high"

    return crit


def _valley(s: Sweep, mid: Point) -> bool:
    """A distance's valley at ``mid``: on each side, read against that side's own largest value (a sweep may grow
    far faster on one side than on the other), ``mid`` is ≥ 0.2 below the end and within 0.1 of the side's
    smallest value."""
    i = s.i(mid)
    for side in (s.raw[: i + 1][::-1], s.raw[i:]):
        if len(side) < 2:
            continue
        top = max(abs(v) for v in side) or 1.0
        g = [1 - v / top for v in side]  # g[0] is mid, g[-1] the end
        if g[0] - g[-1] < 0.2 - EPS or max(g) - g[0] > 0.1 + EPS:
            return False
    return True


def bell(mid: Point) -> Criterion:
    """Peaked at ``mid``: ≥ 0.2 above both ends, within 0.1 of the maximum, one end within 0.1 of the minimum
    (a distance: :func:`_valley`)."""

    def crit(s: Sweep) -> Result:
        if _nan(s):
            return False, str(_nan(s))
        if s.distance:
            ok = _valley(s, mid)
            return ok, "" if ok else f"no valley at {s.label(mid)}"
        first, last, hi, lo = _ends(s)
        peak = s.y(mid)
        ok = (
            min(peak - first, peak - last) >= 0.2 - EPS
            and hi - peak <= 0.1 + EPS
            and min(first, last) - lo <= 0.1 + EPS
        )
        return ok, "" if ok else f"not peaked at {s.label(mid)}"

    return crit


def flat(tol: float = TOL) -> Criterion:
    """Max − min ≤ 0.05 over the sweep (a distance: ≤ 5% of its largest value)."""

    def crit(s: Sweep) -> Result:
        if _nan(s):
            return False, str(_nan(s))
        ok = max(s.ys) - min(s.ys) <= tol + EPS
        return ok, "" if ok else "not flat"

    return crit


def converges(quantile: float = 0.5, tol: float = TOL) -> Criterion:
    """Flat (range ≤ 0.05) from the sweep's median parameter on: the score has converged by then."""

    def crit(s: Sweep) -> Result:
        cut = sorted(s.xs)[0] + quantile * (max(s.xs) - min(s.xs))
        tail = [y for x, y in zip(s.xs, s.ys) if x >= cut]
        if any(math.isnan(y) for y in tail):
            return False, str(_nan(s))
        ok = max(tail) - min(tail) <= tol + EPS
        return ok, "" if ok else f"still moving past {s.param}={cut:g}"

    return crit


def mid_drop(mid: Point, min_drop: float = 0.1) -> Criterion:
    """High-to-low, and already ≥ 0.1 below the start at ``mid``: the score sees a partial loss."""

    def crit(s: Sweep) -> Result:
        ok, why = high_to_low()(s)
        if not ok:
            return ok, why
        ok = s.ys[0] - s.y(mid) >= min_drop - EPS
        return ok, "" if ok else f"drops by < {min_drop:g} up to {s.label(mid)}"

    return crit


def drop_between(x_from: Point, x_to: Point, by: float = 0.2) -> Criterion:
    """The value at ``x_to`` is at least ``by`` below the value at ``x_from``."""

    def crit(s: Sweep) -> Result:
        if _nan(s, x_from, x_to):
            return False, str(_nan(s, x_from, x_to))
        ok = s.y(x_from) - s.y(x_to) >= by - EPS
        return ok, "" if ok else f"drops by < {by:g} from {s.label(x_from)} to {s.label(x_to)}"

    return crit


def unchanged(rel: float = 1e-6) -> Criterion:
    """Every measured value equals the first to ``rel`` (relative to max(1, |first|))."""

    def crit(s: Sweep) -> Result:
        if _nan(s):
            return False, str(_nan(s))
        worst = max(abs(v - s.raw[0]) for v in s.raw) / max(1.0, abs(s.raw[0]))
        return worst <= rel, f"largest change {worst:.1e}" + ("" if worst <= rel else f" > {rel:g}")

    return crit


def within(lo: float, hi: float) -> Criterion:
    """Every measured value lies in ``[lo, hi]`` (to 1e-12)."""

    def crit(s: Sweep) -> Result:
        vals = [v for v in s.raw if not math.isnan(v)]
        ok = all(lo - 1e-12 <= v <= hi + 1e-12 for v in vals)
        text = f"{fmt(min(vals), s.distance)} … {fmt(max(vals), s.distance)}"
        return ok, text if ok else f"{text}, outside [{lo:g}, {hi:g}]"

    return crit


def every(target: float) -> Criterion:
    """Within 0.05 of ``target`` at every point of the sweep."""

    def crit(s: Sweep) -> Result:
        return all_of(*(at(x, target) for x in s.xs))(s)

    return crit


def all_of(*criteria: Criterion) -> Criterion:
    def crit(s: Sweep) -> Result:
        results = [c(s) for c in criteria]
        return all(ok for ok, _ in results), "; ".join(why for ok, why in results if not ok and why)

    return crit


def any_of(*criteria: Criterion) -> Criterion:
    def crit(s: Sweep) -> Result:
        results = [c(s) for c in criteria]
        return any(ok for ok, _ in results), " and ".join(why for _, why in results if why)

    return crit


@dataclass(frozen=True)
class Check:
    """A criterion per kind of score on one setting (a kind without one: not applicable)."""

    code: str
    setting: str  #: a code of :data:`SETTINGS`, or "*" for every measured value of every setting
    desideratum: str
    what: str
    criteria: Mapping[str, Criterion]
    per_series: Optional[Mapping[str, Mapping[str, Criterion]]] = None  #: series -> kind -> criterion


F, Dv, B, L, S, A = FIDELITY, DIVERSITY, BOTH, DISTANCE, SELF, PRIVACY
D1, D2, D3, D4, D5 = "D1b purpose", "D2 hyperparameters", "D3 data", "D4 bounds", "D5 invariance"


def _bounds(ideal: float, worst: float) -> Dict[str, Criterion]:
    """≈ 1 where the sets match, ≈ 0 where they are disjoint; a distance: small where they match."""
    both = all_of(at(ideal, ONE), at(worst, ZERO))
    return {F: both, Dv: both, B: both, L: at(ideal, ONE), S: at(ideal, ONE)}


def _same(criterion: Criterion, *kinds: str) -> Dict[str, Criterion]:
    return dict.fromkeys(kinds, criterion)


_DROP_BOUNDS = {F: all_of(at(0, ONE), at(4, ONE)), **_same(at(0, ONE), Dv, B, L, S)}
_DC_BOUNDS = {
    "real discrete": {
        F: all_of(at(FIRST, ZERO), at(LAST, ZERO)),
        Dv: all_of(either(FIRST), either(LAST)),
        B: all_of(at(FIRST, ZERO), at(LAST, ZERO)),
    },
    "real continuous": {
        F: all_of(at(FIRST, ONE), at(LAST, ONE)),
        **_same(all_of(at(FIRST, ZERO), at(LAST, ZERO)), Dv, B),
    },
}

CHECKS: Dict[str, Check] = {
    c.code: c
    for c in (
        Check("MS4", "MS", D4, "≈ 1 when the sets match (μ = 0), ≈ 0 when they are far apart (μ = 3)", _bounds(0, 3)),
        Check("MS1", "MS", D1, "falls from high to low as the mean moves away", _same(high_to_low(), F, Dv, B, L)),
        Check("RO4", "RO", D4, "MS4's bounds with one real outlier", _bounds(0, 3)),
        Check("RO1", "RO", D1, "MS1's shape with one real outlier", _same(high_to_low(), F, Dv, B, L)),
        Check("FO4", "FO", D4, "MS4's bounds with one generated outlier", _bounds(0, 3)),
        Check("FO1", "FO", D1, "MS1's shape with one generated outlier", _same(high_to_low(), F, Dv, B, L)),
        Check("SD4", "SD", D4,
              "≈ 1 when matched; a narrow fake: fidelity ≈ 1, diversity ≈ 0; a wide fake: fidelity ≈ 0, "
              "diversity ≈ 1 or ≈ 0",
              {F: all_of(at(1, ONE), at(0.1, ONE), at(10, ZERO)), Dv: all_of(at(1, ONE), at(0.1, ZERO), either(10)),
               B: all_of(at(1, ONE), at(0.1, ZERO), at(10, ZERO)), L: at(1, ONE), S: at(1, ONE)}),
        Check("SD1", "SD", D1,
              "fidelity falls as the fake widens; diversity peaks at s = 1 or rises; a distance is smallest at "
              "s = 1; the Vendi ratio falls for a narrow fake",
              {F: high_to_low(), Dv: any_of(bell(1), low_to_high()), B: bell(1), L: bell(1),
               S: drop_between(1, 0.1)}),
        Check("SQ4", "SQ", D4, "≈ 1 with no mode dropped; fidelity still ≈ 1 with 4 of 5 dropped", _DROP_BOUNDS),
        Check("SQ1", "SQ", D1, "fidelity stays flat; diversity falls, already by 0.1 with 2 of 5 modes dropped",
              {F: flat(), **_same(mid_drop(2), Dv, B, L, S)}),
        Check("SI4", "SI", D4, "≈ 1 with no mode thinned; fidelity still ≈ 1 with 4 of 5 modes gone",
              {F: all_of(at(0, ONE), at(1, ONE)), **_same(at(0, ONE), Dv, B, L, S)}),
        Check("SI1", "SI", D1, "fidelity stays flat; diversity falls, already by 0.1 when 4 modes keep 10% weight",
              {F: flat(), **_same(mid_drop(0.9), Dv, B, L, S)}),
        Check("MI4", "MI", D4, "≈ 1 at the real 5 modes; fidelity ≈ 1 with 1 mode; diversity ≈ 1 with all 10",
              {F: all_of(at(5, ONE), at(1, ONE)), Dv: all_of(at(5, ONE), at(10, ONE)), **_same(at(5, ONE), B, L, S)}),
        Check("MI1", "MI", D1, "fidelity falls as modes are invented; diversity rises as modes are added",
              {F: high_to_low(), Dv: low_to_high(), B: bell(5), L: bell(5), S: low_to_high()}),
        Check("HS4", "HS", D4, "≈ 1 at radius 1, ≈ 0 at radii 0.1 and 1.9",
              {**_same(all_of(at(1, ONE), at(0.1, ZERO), at(1.9, ZERO)), F, Dv, B), **_same(at(1, ONE), L, S)}),
        Check("HS1", "HS", D1, "peaked at radius 1", _same(bell(1), F, Dv, B, L)),
        Check("HN3", "HN", D3, "converged (range ≤ 0.05) from the middle sample size on",
              _same(converges(), F, Dv, B, L, S)),
        Check("HN1", "HN", D1, "≈ 0.2, the overlap, at the largest sample size", _same(at(LAST, 0.2), F, Dv, B)),
        Check("HM2", "HM", D2, "converged from the middle generated-set size on", _same(converges(), F, Dv, B, L, S)),
        Check("HM1", "HM", D1, "≈ 0.2, the overlap, at the largest generated set", _same(at(LAST, 0.2), F, Dv, B)),
        Check("ST4", "ST", D4, "≈ 0 for disjoint supports at the largest generated set",
              _same(at(LAST, ZERO), F, Dv, B)),
        Check("ST1", "ST", D1, "converged over the generated-set size", _same(converges(), F, Dv, B, L)),
        Check("MC4", "MC", D4, "≈ 1 when the two modes coincide (μ = 0)", _same(at(0, ONE), F, Dv, B, L, S)),
        Check("MC1", "MC", D1,
              "fidelity falls as the modes part (the fake fills the gap); diversity falls or stays flat",
              {F: high_to_low(), Dv: any_of(high_to_low(), flat()), B: high_to_low(), L: high_to_low()}),
        Check("SC5", "SC", D5, "unchanged when one coordinate of both sets is rescaled",
              _same(flat(), F, Dv, B, L, S, A)),
        Check("SC4", "SC", D4, "≈ 0 at both ends of the scaling (the sets stay disjoint)",
              _same(all_of(at(1e-3, ZERO), at(1e3, ZERO)), F, Dv, B)),
        Check("PA4", "PA", D4, "MS4's bounds with a heavy-tailed coordinate", _bounds(0, 6)),
        Check("PA1", "PA", D1, "MS1's shape with a heavy-tailed coordinate", _same(high_to_low(), F, Dv, B, L)),
        Check("DD1", "DD", D1, "unchanged as identical dimensions are added", _same(flat(), F, Dv, B, L)),
        Check("DD4", "DD", D4, "≈ 0 with 1 and with 256 extra dimensions",
              _same(all_of(at(1, ZERO), at(256, ZERO)), F, Dv, B)),
        Check("DC4", "DC", D4,
              "continuous fake vs discrete real: fidelity ≈ 0; discrete fake vs continuous real: fidelity ≈ 1, "
              "diversity ≈ 0 (at both ends of the scale sweep)", {}, per_series=_DC_BOUNDS),
        Check("DC1", "DC", D1, "unchanged over the scale of the discretised data", _same(flat(), F, Dv, B)),
        Check("TR5", "TR", D5, "unchanged (to 1e-6 relative) when both sets are translated",
              _same(unchanged(), F, Dv, B, L, S, A, RARITY, UNKNOWN)),
        Check("DM4", "DM", D4, "≈ 1 for matched distributions at every dimension",
              _same(every(ONE), F, Dv, B, S)),
        Check("CP", "CP", "authenticity", "falls to ≈ 0 as the generated set becomes a copy of the real set",
              {A: all_of(high_to_low(), at(1, ZERO))}),
        Check("RG4", "*", D4, "every value measured in this suite lies in [0, 1] (a distance: is ≥ 0)",
              {**_same(within(0, 1), F, Dv, B, A), L: within(0, math.inf)}),
    )
}  # fmt: skip


def _sweep(code: str, series: str, score: str) -> Sweep:
    setting = SETTINGS[code]
    raw = tuple(step.get(score, math.nan) for step in run_setting(code)[series])
    distance = kind_of(score) == DISTANCE
    ys = raw
    if distance:
        top = max((abs(v) for v in raw if not math.isnan(v)), default=0.0)
        ys = tuple(1 - v / top if top > 0 else 1.0 for v in raw)
    return Sweep(setting.param, tuple(float(x) for x in setting.values), ys, raw, distance)


def response(code: str, score: str) -> str:
    """The measured response of one score along a setting's sweep, ``a → b → c`` per series."""
    parts = [curve(_sweep(code, series, score)) for series in SETTINGS[code].series]
    if len(parts) == 1:
        return parts[0]
    return "; ".join(f"{series}: {part}" for series, part in zip(SETTINGS[code].series, parts))


def evaluate(check: Check, score: str) -> Tuple[str, str]:
    """``("pass" | "fail" | "n/a", why)`` of one score on one check: why it failed, or what a summary
    criterion (:func:`unchanged`, :func:`within`) measured."""
    kind = kind_of(score)
    if check.setting == "*":
        if kind not in check.criteria:
            return "n/a", ""
        raw = tuple(v for code in SETTINGS for series in SETTINGS[code].series for v in _sweep(code, series, score).raw)
        ok, why = check.criteria[kind](Sweep("", tuple(map(float, range(len(raw)))), raw, raw, kind == DISTANCE))
        return ("pass" if ok else "fail"), why
    setting = SETTINGS[check.setting]
    reasons, passed, applies = [], True, False
    for series in setting.series:
        table = check.per_series[series] if check.per_series else check.criteria
        if kind not in table:
            continue
        applies = True
        ok, why = table[kind](_sweep(check.setting, series, score))
        passed &= ok
        if why:
            reasons.append(f"{series}: {why}" if series else why)
    if not applies:
        return "n/a", ""
    return ("pass" if passed else "fail"), "; ".join(reasons)


def outcomes() -> Dict[Tuple[str, str], Tuple[str, str]]:
    """``(check, score) -> (outcome, why)`` for every check and every score."""
    run_all()
    return {(code, score): evaluate(check, score) for code, check in CHECKS.items() for score in score_names()}


#: the outcome symbols of the page's matrix, and the markers around it
SYMBOL = {"pass": "✓", "fail": "✗", "n/a": "·"}
MATRIX_START, MATRIX_END = "<!-- sanity-matrix:start -->", "<!-- sanity-matrix:end -->"


def parse_matrix(text: str) -> Dict[Tuple[str, str], str]:
    """``(check, score) -> "pass" | "fail" | "n/a"`` from a page's matrix (what the test compares)."""
    body = text.split(MATRIX_START, 1)[1].split(MATRIX_END, 1)[0].strip().splitlines()
    codes = [c.strip() for c in body[0].strip("|").split("|")][1:-1]
    back = {v: k for k, v in SYMBOL.items()}
    table = {}
    for row in body[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        name = cells[0].strip("`")
        for code, cell in zip(codes, cells[1:-1]):
            table[code, name] = back[cell]
    return table
