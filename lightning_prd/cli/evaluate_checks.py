"""The argument checks of ``lightning-prd evaluate`` that run before any heavy work: ``--only``, the
held-out set (``--test`` with ``--data-copying`` / ``--fld``), the labels files of the per-class scores,
and the set sizes each k-NN radius needs; each failure is one line naming the flag and its value.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from lightning_prd.cli.families import given_family_flags, held_out_flags, no_flag
from lightning_prd.cli.inputs import CLIError, _Source, _subsample_rows
from lightning_prd.cli.labels import Labels, check_labels_path, labels_for
from lightning_prd.functional.engine.families import Family, switch_families

#: the per-class flags of ``evaluate`` and their Namespace attributes
LABEL_FLAGS = (("--real-labels", "real_labels"), ("--fake-labels", "fake_labels"))


def check_only(args: argparse.Namespace) -> None:
    """``--only frechet`` keeps the families a statistics file serves (:attr:`Family.statistics`): a flag that
    asks for another family's scores (its flag, its value or one of its options; not its ``--no-`` flag), the
    labels of the per-class scores and ``--plot`` are refused."""
    if args.only != "frechet":
        return
    added = [flag for family, flag, _ in given_family_flags(args) if not family.statistics and flag != no_flag(family)]
    added += [flag for flag, name in LABEL_FLAGS if getattr(args, name, None) is not None]
    if added:
        raise CLIError(f"--only frechet: scores the Fréchet distance alone, but {', '.join(added)} asks for more")
    if args.plot:
        raise CLIError(f"--plot {args.plot}: --only frechet gives no curve and no precision/recall to draw")


def check_held_out(args: argparse.Namespace, on: Mapping[str, Optional[Dict[str, Any]]]) -> None:
    """The families that score against a held-out set (:attr:`Family.needs_test`) need ``--test``, and
    ``--test`` needs one of them (checked before any file is read: a held-out set no score uses would be read
    and silently ignored). ``on``: each family's options, None when off."""
    uses = [family.flag for family in switch_families() if family.needs_test and on.get(family.name) is not None]
    if uses and args.test is None:
        raise CLIError(
            f"{' and '.join(uses)} {'needs' if len(uses) == 1 else 'need'} --test PATH: a held-out set of real "
            "samples the model never saw (--real is then its training set)"
        )
    if args.test is not None and not uses:
        raise CLIError(
            f"--test {args.test}: no score asked for uses a held-out set; add {' and/or '.join(held_out_flags())}, "
            "or leave --test out"
        )
    if args.test_key is not None and args.test is None:
        raise CLIError(f"--test-key {args.test_key}: needs --test PATH (the file whose entry it names)")


def given_label_paths(args: argparse.Namespace) -> List[Tuple[str, str]]:
    """``(flag, PATH)`` of the labels files given; both or neither (one line naming the missing one)."""
    given = [(flag, getattr(args, name, None)) for flag, name in LABEL_FLAGS]
    present = [(flag, text) for flag, text in given if text is not None]
    if len(present) == 1:
        flag, text = present[0]
        other = next(f for f, _ in LABEL_FLAGS if f != flag)
        raise CLIError(
            f"{flag} {text}: needs {other} PATH as well (per-class scores compare the real and the generated "
            "samples of each class)"
        )
    for flag, text in present:
        check_labels_path(text, flag)
    return present


def set_labels(labels: Optional[Labels], flag: str, src: _Source, set_flag: str, args: argparse.Namespace) -> Any:
    """The labels of the rows of ``src`` that were kept (``--num-samples`` keeps the labels of the rows it keeps)."""
    if labels is None:
        return None
    labels_for(labels, flag, set_flag, src.path, src.total)
    rows = _subsample_rows(src.total, args.num_samples, args.seed)
    return labels.labels if rows is None else labels.labels[rows]


def check_test(
    test: _Source, real: _Source, args: argparse.Namespace, on: Mapping[str, Optional[Dict[str, Any]]]
) -> None:
    """The held-out set against the training set ``--real``: its width, not the same samples, enough for FLD
    (when on: ``on`` holds each family's options, None when off)."""
    if test.dim != real.dim:
        raise CLIError(f"--test {args.test}: {test.dim} features per sample, but --real has {real.dim} ({args.real})")
    if test.features.shape == real.features.shape and torch.equal(test.features, real.features):
        raise CLIError(
            f"--test {args.test}: the same samples as --real {args.real}; the held-out set must be real samples "
            "the model was not trained on"
        )
    if on.get("fld") is not None:
        if test.num < 2:
            raise CLIError(f"--fld: expected at least 2 --test samples, but --test {args.test} holds {test.num}")
        flat = torch.nonzero(test.features.double().std(0) == 0).flatten()
        if flat.numel():
            raise CLIError(
                f"--fld: --test {args.test} has {flat.numel()} constant features (the first is feature "
                f"{int(flat[0])}); FLD divides every set by the held-out set's standard deviation"
            )


def core_error(err: Exception) -> str:
    """A message of the functional core in the command's words (its ``test`` argument is ``--test``)."""
    return " ".join(str(err).replace("argument `test`", "--test").replace("`test`", "--test").split())


def check_sizes(
    src: _Source,
    flag: str,
    switches: Sequence[Tuple[Family, Any, Optional[Dict[str, Any]]]],
    args: argparse.Namespace,
    *,
    need: str = "k-NN radii",
) -> None:
    """The fewest samples each family switched on needs in the set ``src`` (``flag``: ``--real`` or ``--fake``;
    its record's ``min_real`` / ``min_fake``), named by the flag that sets the size; every set needs 2 (``need``
    names what for)."""
    held = f"{flag} {src.path} holds {src.num} samples" + (
        f" (--num-samples {args.num_samples})" if src.num != src.total else ""
    )
    if src.num < 2:
        raise CLIError(f"{flag} {src.path}: expected at least 2 samples for {need}, but got {src.num}")
    for family, value, options in switches:
        if options is None:
            continue
        fewest = family.fewest(options)[0 if flag == "--real" else 1]
        if src.num >= fewest:
            continue
        if family.value_option is not None:
            extra = fewest - value
            raise CLIError(
                f"{family.flag}: expected at most {src.num - extra}, but got {value} ({held}; {family.flag} K needs "
                f"at least K + {extra})"
            )
        raise CLIError(f"{family.flag}: needs at least {fewest} samples in {flag}, but {held}")


def check_pair(
    real: _Source,
    fake: _Source,
    switches: Sequence[Tuple[Family, Any, Optional[Dict[str, Any]]]],
    args: argparse.Namespace,
) -> None:
    """The sizes of one generated set against the real set that the families' options need: PRD clusters
    ``2 x min(N, M)`` samples, FD-infinity fits a line through subsets of 2 to M samples, and each family's
    ``fit`` (as the metric runs it: lenient for a family switched on with its defaults), named by its flag."""
    on = {family.name: options for family, _, options in switches}
    prd = on.get("prd")
    clustered = 2 * min(real.num, fake.num)  # PRD subsamples the larger set to the smaller one's size
    if prd is not None and prd["num_clusters"] > clustered:
        raise CLIError(
            f"--prd-clusters: expected at most {clustered}, but got {prd['num_clusters']} (PRD clusters "
            f"2 x min(N, M) samples; N = {real.num}, M = {fake.num} for --fake {fake.path})"
        )
    if on.get("fd_infinity") is not None and fake.num < 3:
        raise CLIError(
            f"--fd-infinity: expected at least 3 generated samples (FD-infinity fits a line through subsets of "
            f"2 to M samples), but --fake {fake.path} holds {fake.num}"
        )
    if real.statistics is not None:
        return
    for family, value, options in switches:
        if options is None or family.fit is None:
            continue
        try:
            family.fit(dict(options), real.num, fake.num, value is True)
        except ValueError as err:
            raise CLIError(f"{family.flag}: {err} (--real {real.path}, --fake {fake.path})") from None
