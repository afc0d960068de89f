"""The argument checks of ``lightning-prd evaluate`` that run before any heavy work: ``--only``, the
held-out set (``--test`` with ``--data-copying`` / ``--fld``), the labels files of the per-class scores,
and the set sizes each k-NN radius needs; each failure is one line naming the flag and its value.
"""

from __future__ import annotations

import argparse
from typing import Any, List, Optional, Sequence, Tuple

import torch

from lightning_prd.cli.inputs import CLIError, _Source, _subsample_rows
from lightning_prd.cli.labels import Labels, check_labels_path, labels_for

#: the held-out flags of ``evaluate`` and their Namespace attributes
HELD_OUT_FLAGS = (("--data-copying", "data_copying"), ("--fld", "fld"))
#: the per-class flags of ``evaluate`` and their Namespace attributes
LABEL_FLAGS = (("--real-labels", "real_labels"), ("--fake-labels", "fake_labels"))


def check_only(args: argparse.Namespace) -> None:
    """``--only frechet`` leaves out every other score: the flags that add one, and ``--plot``, are refused."""
    if args.only != "frechet":
        return
    names = ("kid", "vendi", "top_pr", "cmmd", "clipped", "symmetric", "fd_infinity", "data_copying", "fld")
    added = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name)]
    added += [flag for flag, name in LABEL_FLAGS if getattr(args, name, None) is not None]
    if added:
        raise CLIError(f"--only frechet: scores the Fréchet distance alone, but {', '.join(added)} asks for more")
    if args.plot:
        raise CLIError(f"--plot {args.plot}: --only frechet gives no curve and no precision/recall to draw")


def check_held_out(args: argparse.Namespace) -> None:
    """``--data-copying`` and ``--fld`` need ``--test``, and ``--test`` needs one of them (checked before any
    file is read: a held-out set no score uses would be read and silently ignored)."""
    uses = [flag for flag, name in HELD_OUT_FLAGS if getattr(args, name)]
    if uses and args.test is None:
        raise CLIError(
            f"{' and '.join(uses)} {'needs' if len(uses) == 1 else 'need'} --test PATH: a held-out set of real "
            "samples the model never saw (--real is then its training set)"
        )
    if args.test is not None and not uses:
        raise CLIError(
            f"--test {args.test}: no score asked for uses a held-out set; add --data-copying and/or --fld, "
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


def check_test(test: _Source, real: _Source, args: argparse.Namespace) -> None:
    """The held-out set against the training set ``--real``: its width, not the same samples, enough for FLD."""
    if test.dim != real.dim:
        raise CLIError(f"--test {args.test}: {test.dim} features per sample, but --real has {real.dim} ({args.real})")
    if test.features.shape == real.features.shape and torch.equal(test.features, real.features):
        raise CLIError(
            f"--test {args.test}: the same samples as --real {args.real}; the held-out set must be real samples "
            "the model was not trained on"
        )
    if args.fld:
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
    src: _Source, flag: str, options: Sequence[Tuple[str, int]], args: argparse.Namespace, *, need: str = "k-NN radii"
) -> None:
    """A k-NN radius of ``k`` needs ``k + 1`` samples in its set (the core's rule), named by option and file;
    a covariance (``need``) needs 2."""
    held = f"{flag} {src.path} holds {src.num} samples" + (
        f" (--num-samples {args.num_samples})" if src.num != src.total else ""
    )
    if src.num < 2:
        raise CLIError(f"{flag} {src.path}: expected at least 2 samples for {need}, but got {src.num}")
    for option, k in options:
        if src.num < k + 1:
            raise CLIError(
                f"{option}: expected at most {src.num - 1}, but got {k} ({held}; a k-NN radius needs at least k + 1)"
            )
