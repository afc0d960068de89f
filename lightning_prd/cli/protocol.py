"""``lightning-prd evaluate --protocol NAME``: a named protocol (:mod:`lightning_prd.protocols`) as flags.

A protocol sets, at once, ``--extractor`` (built from ``--weights`` or torch's hub cache, the protocol's own
file only), the preprocessing and quantisation (the extractor's options), ``--k-precision-recall``,
``--k-density-coverage``, ``--ball``,
which families run (``--no-prd``, ``--no-alpha-beta``, ``--no-probabilistic``, ``--no-pr-cover``, ``--cmmd``,
``--only frechet`` for a Fréchet-only protocol; ``--only frechet`` may also be given with any protocol that
reports the Fréchet distance, to score it alone, e.g. against a statistics file) and the sample counts (the
real set subsampled to its ``num_real``, each generated set to its ``num_fake``, seeded by ``--seed``; a set
with fewer samples is used whole, with a warning that the scores are not comparable with published ones).

**Explicit flags.** A flag counts as given when it is on the command line (whatever its value): the parser
records them (:class:`~lightning_prd.cli.recorded.Recorded`). The families' flags are checked in one loop over the
registry (:func:`~lightning_prd.protocols.metric_arguments` names the families a protocol switches). A given
flag that contradicts the protocol is a usage error (exit status 2,
:class:`UsageError`) naming the flag, its value, the protocol and the protocol's value; one that agrees is
accepted. ``--num-samples`` agrees only with a protocol that takes the same count of both sets. Flags the
protocol does not name (``--kid``, ``--vendi``, ``--device``, ...) stay free. A protocol without a network
(``"prdc"``) takes the features as given, or any ``--extractor``.

**One network pass** (``"fid"``, ``"pytorch-fid"``, ``"clean-fid"``): the FID Inception runs with
``logits=True`` (its state dict; NVlabs' TorchScript file gives the pool features only), so the table adds
``sfid`` (:func:`~lightning_prd.functional.spatial_frechet_distance` of the spatial features) and
``inception_score``, ``inception_score_std`` (:func:`~lightning_prd.functional.inception_score`,
torch-fidelity's 10 splits, of the generated set's logits) to the FID and precision/recall of the pool features.

Example:
    >>> import argparse
    >>> args = argparse.Namespace(protocol="pr50k3", given_flags={"--k-precision-recall": 5}, k_precision_recall=5)
    >>> try:
    ...     apply_protocol(args)
    ... except UsageError as err:
    ...     print(str(err).split(";")[0])
    --k-precision-recall 5: contradicts protocol 'pr50k3', which sets it to 3
"""

from __future__ import annotations

import argparse
import textwrap
import warnings
from typing import Any, Dict, List, Optional

import torch
from torch import Tensor

from lightning_prd.cli.families import no_flag, parse_options
from lightning_prd.cli.inputs import CLIError, _Source
from lightning_prd.cli.precision import precision_of
from lightning_prd.features.base import _module_device
from lightning_prd.features.precision import describe_precision
from lightning_prd.features.registry import canonical_name, get_extractor
from lightning_prd.functional.engine.families import Family, switch_families
from lightning_prd.protocols import (
    Protocol,
    available_protocols,
    check_weights_file,
    find_weights,
    fingerprint,
    get_protocol,
    metric_arguments,
    same_value,
)
from lightning_prd.protocols.pass_scores import PASS_SCORES


class UsageError(CLIError):
    """A command line that contradicts itself (a flag against ``--protocol``): exit status 2."""


def add_protocol_argument(p: argparse.ArgumentParser) -> None:
    """``--protocol NAME`` (evaluate and compare)."""
    p.add_argument(
        "--protocol",
        metavar="NAME",
        help="a named protocol: sets the extractor, its preprocessing, k, balls, the scores and the sample "
        f"counts at once ({', '.join(available_protocols())}; see 'protocols' below)",
    )


def protocols_epilog() -> str:
    """The ``protocols`` section of ``--help``: one line per protocol."""
    lines = ["protocols (--protocol NAME; a flag that contradicts it is a usage error, exit status 2):"]
    for name in available_protocols():
        p = get_protocol(name)
        counts = f"N = {p.num_real or 'all'}, M = {p.num_fake or 'all'}"
        k = f"k = {p.k_precision_recall}, {p.ball} balls" if p.k_precision_recall is not None else "no k-NN"
        files = f"weights {' or '.join(p.weights_files)}" if p.weights_files else "no weights"
        text = f"{p.extractor or 'features as given'}; {k}; {counts}; {files}; matches {p.matches}"
        lines += textwrap.wrap(text, 110, initial_indent=f"  {name:<12} ", subsequent_indent=" " * 15)
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the protocol's flags
def _contradiction(flag: str, value: Any, p: Protocol, protocol_value: Any) -> UsageError:
    shown = "" if value is True else f" {value}"
    return UsageError(
        f"{flag}{shown}: contradicts protocol {p.name!r}, which sets it to {protocol_value!r}; "
        f"leave {flag} out (the protocol sets it), or drop --protocol"
    )


def _is_on(value: Any) -> bool:
    return value is not False and value is not None


def _apply_family(args: argparse.Namespace, family: Family, value: Any, p: Protocol, given: Dict[str, Any]) -> None:
    """Set the switch of ``family`` to the protocol's ``value``; a flag of the family given that contradicts it
    raises :class:`UsageError`."""
    if family.value_option is not None:
        if family.flag in given and not same_value(getattr(args, family.keyword), value):
            raise _contradiction(family.flag, getattr(args, family.keyword), p, value)
        if no_flag(family) in given and value is not None:
            raise _contradiction(no_flag(family), True, p, value)
        setattr(args, family.keyword, value)
        return
    if family.flag in given:
        words = given[family.flag]
        asked = parse_options(family.flag, words)
        kept = value if isinstance(value, dict) else {}
        if not _is_on(value) or any(not same_value(v, kept.get(k, family.defaults.get(k))) for k, v in asked.items()):
            raise _contradiction(" ".join([family.flag, *words]), True, p, value)
    if no_flag(family) in given and _is_on(value):
        raise _contradiction(no_flag(family), True, p, value)
    setattr(args, family.keyword, dict(value) if isinstance(value, dict) else [] if _is_on(value) else False)


def apply_protocol(args: argparse.Namespace) -> Optional[Protocol]:
    """Set the flags of ``args.protocol`` on ``args`` (module docstring); None without ``--protocol``."""
    name = getattr(args, "protocol", None)
    if name is None:
        return None
    try:
        p = get_protocol(name)
    except ValueError:
        raise UsageError(f"--protocol {name}: expected one of {', '.join(available_protocols())}") from None
    given = getattr(args, "given_flags", None) or {}
    only_frechet = given.get("--only") == "frechet" and "frechet_distance" in p.scores
    m = metric_arguments(p)
    only = "frechet" if tuple(p.scores) == ("frechet_distance",) else None
    if "--only" in given and not only_frechet and not same_value(args.only, only):
        raise _contradiction("--only", args.only, p, only)
    args.only = "frechet" if only_frechet else only
    if "ball" in m:
        if "--ball" in given and not same_value(args.ball, m["ball"]):
            raise _contradiction("--ball", args.ball, p, m["ball"])
        args.ball = m["ball"]
    for family in switch_families():
        if family.keyword in m:  # the families the protocol does not name stay free
            _apply_family(args, family, m[family.keyword], p, given)
    if "--extractor" in given and p.extractor is not None:
        if canonical_name(str(args.extractor)) != canonical_name(p.extractor):
            raise _contradiction("--extractor", args.extractor, p, p.extractor)
    if p.extractor is not None:
        args.extractor = p.extractor
    if "--num-samples" in given and not (p.num_real == p.num_fake == args.num_samples):
        counts = f"{p.num_real or 'all'} real and {p.num_fake or 'all'} generated samples"
        raise _contradiction("--num-samples", args.num_samples, p, counts)
    args.protocol_counts = {"--real": p.num_real, "--test": p.num_real, "--fake": p.num_fake}
    return p


def use_count(args: argparse.Namespace, flag: str) -> None:
    """Point ``args.num_samples`` at the protocol's count of the set ``flag`` reads next (no-op without one)."""
    counts = getattr(args, "protocol_counts", None)
    if counts is not None:
        args.num_samples = counts[flag]


def warn_if_short(p: Optional[Protocol], src: _Source, flag: str, args: argparse.Namespace) -> None:
    """A warning when a set holds fewer samples than the protocol takes (the scores then are not the papers')."""
    if p is None:
        return
    wanted = p.num_real if flag in ("--real", "--test") else p.num_fake
    if wanted is not None and src.statistics is None and src.total < wanted:
        warnings.warn(
            f"{flag} {src.path}: {src.total:,} samples, fewer than the {wanted:,} protocol {p.name!r} takes; "
            "scores from fewer samples are not comparable with published ones (the Fréchet distance is biased "
            "upwards, precision and recall move)",
            UserWarning,
            stacklevel=2,
        )


def build_extractor(p: Protocol, args: argparse.Namespace, device: torch.device) -> Any:
    """The protocol's extractor on ``device``: its own weights file only, with the logits and spatial features
    of the FID Inception where the protocol reports the Inception Score and sFID."""
    if p.extractor is None:
        if args.extractor is None:
            if args.weights is not None:
                raise CLIError(f"--weights needs --extractor NAME: protocol {p.name!r} uses the features as given")
            return None
        return get_extractor(args.extractor, weights=args.weights, device=device)
    path = check_weights_file(p, args.weights) if args.weights is not None else find_weights(p)
    options: Dict[str, Any] = {}
    if set(PASS_SCORES) & set(p.scores) and canonical_name(p.extractor) == "fid-inception":
        from lightning_prd.features.vgg_nvlabs import is_torchscript_file

        options["logits"] = not is_torchscript_file(path)  # NVlabs' TorchScript file returns the pool only
    return p.build_extractor(path, **options).to(device)


# ---------------------------------------------------------------------------- the pass's other scores
def pass_scores(real: _Source, fake: _Source) -> Dict[str, float]:
    """sFID and the Inception Score from the extra outputs of one network pass
    (:func:`lightning_prd.protocols.pass_scores.pass_scores`), with a warning for each one left out."""
    from lightning_prd.protocols.pass_scores import pass_scores as scores_of

    out = {k: float(v) for k, v in scores_of(real.extras, fake.extras).items()}
    if "spatial" in fake.extras and "sfid" not in out:
        warnings.warn(
            f"--real {real.path}: holds no spatial Inception features (it is not a set of images), so sfid is "
            "left out; pass the real images to get it",
            UserWarning,
            stacklevel=2,
        )
    if "logits" in fake.extras and "inception_score" not in out:
        warnings.warn(
            f"--fake {fake.path}: {fake.extras['logits'].shape[0]} samples, too few for the Inception Score's "
            "10 splits; inception_score is left out",
            UserWarning,
            stacklevel=2,
        )
    fake.extras = {}
    return out


def ordered(scores: Dict[str, Any], columns: List[str]) -> Dict[str, Any]:
    """``scores`` in table order: ``columns`` first (each ``<name>_std`` after its score), the rest after."""
    out: Dict[str, Any] = {}
    for name in [*columns, *scores]:
        for key in (name, f"{name}_std"):
            if key in scores and key not in out:
                out[key] = scores[key]
    return out


def describe(p: Protocol) -> str:
    """The header line of a protocol."""
    options = ", ".join(f"{k} {v}" for k, v in p.extractor_options.items())
    net = f"{p.extractor}" + (f" ({options})" if options else "") if p.extractor else "features as given"
    k = f"k = {p.k_precision_recall}, {p.ball} balls" if p.k_precision_recall is not None else "no k-NN scores"
    return f"{p.name}: {net}; {k}; N = {p.num_real or 'all'}, M = {p.num_fake or 'all'} ({p.matches})"


def run_fingerprint(
    extractor: Any, p: Optional[Protocol], real: _Source, fake: _Source, args: argparse.Namespace
) -> Dict[str, Any]:
    """The fingerprint of one scored pair of sets (:func:`lightning_prd.protocols.fingerprint`)."""
    knn = args.only != "frechet" and args.k_precision_recall is not None
    dtype: Optional[torch.dtype] = real.features.dtype if isinstance(real.features, Tensor) else None
    out = fingerprint(
        extractor,
        protocol=p,
        num_real=real.num,
        num_fake=fake.num,
        k_precision_recall=args.k_precision_recall if knn else None,
        ball=args.ball if knn else None,
        dtype=dtype,
        k_density_coverage=getattr(args, "k_density_coverage", None) if knn else None,
    )
    if extractor is not None:  # the precision it ran in (features read from files: none)
        out["extractor_precision"] = describe_precision(precision_of(args), _module_device(extractor))
    return out
