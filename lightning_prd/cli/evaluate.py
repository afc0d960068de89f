"""``lightning-prd evaluate`` and ``compare``: load the sets, score each generated set against the real
set with one ``GenerativeMetrics`` pass, print the table, write ``--json`` and ``--plot``.

``--only frechet`` scores the Fréchet distance alone, and is what a ``--real`` of statistics (a mean
and a covariance, :mod:`lightning_prd.cli.reference`) serves: the metric is then given those
statistics in place of real features (``GenerativeMetrics.set_real_statistics``).

Each score family is switched by its flags (:mod:`lightning_prd.cli.families`: one loop over the family
registry gives the metric every family's switch); the families that score against a held-out set need ``--test``,
given to the metric as its ``"test"`` role. ``evaluate --real-labels/--fake-labels`` switch on its
``per_class`` scores, printed as a second table (:mod:`lightning_prd.cli.columns`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from lightning_prd import __version__
from lightning_prd.cli.checks import check_outputs, write_output
from lightning_prd.cli.columns import (
    best,
    better,
    cell,
    lowest_coverage_line,
    per_class_payload,
    per_class_rows,
    scalar,
)
from lightning_prd.cli.evaluate_checks import (
    check_held_out,
    check_only,
    check_pair,
    check_sizes,
    check_test,
    core_error,
    given_label_paths,
    set_labels,
)
from lightning_prd.cli.families import flag_families, no_flag, resolve_switches
from lightning_prd.cli.inputs import CLIError, _check_path, _Source
from lightning_prd.cli.labels import read_labels
from lightning_prd.cli.parser import SCORES
from lightning_prd.cli.plot import plot_format, write_plot
from lightning_prd.cli.protocol import (
    UsageError,
    apply_protocol,
    build_extractor,
    describe,
    ordered,
    pass_scores,
    run_fingerprint,
    use_count,
    warn_if_short,
)
from lightning_prd.cli.reference import BY_CONTENT, load_set
from lightning_prd.features.registry import UnknownExtractorError
from lightning_prd.functional.engine.families import Family, families, get_family, switch_families
from lightning_prd.functional.engine.family_scores import FamilyError
from lightning_prd.protocols import Protocol, get_protocol

#: one generated set's results: its scalar scores, its curves, and its per-class scores (None without labels)
Result = Tuple[Dict[str, Any], Dict[str, np.ndarray], Optional[Dict[str, Any]]]


# ---------------------------------------------------------------------------- scores
class _Scorer:
    """Scores of generated sets against one real set, from one ``GenerativeMetrics`` pass per set;
    the real side's k-NN radii are computed once."""

    def __init__(
        self,
        real: _Source,
        args: argparse.Namespace,
        device: torch.device,
        *,
        switches: Sequence[Tuple[Family, Any, Optional[Dict[str, Any]]]],
        test: Optional[_Source] = None,
        real_labels: Optional[Tensor] = None,
    ) -> None:
        from lightning_prd import GenerativeMetrics

        self.args, self.device = args, device
        self.per_class = real_labels is not None
        self.only_frechet = args.only == "frechet"
        #: each switchable family's checked options, None when off (:func:`resolve_switches`)
        self.on: Dict[str, Optional[Dict[str, Any]]] = {family.name: options for family, _, options in switches}
        try:  # the families' options were checked before: an error here is a usage error too
            self.metric = GenerativeMetrics(
                **{family.keyword: value for family, value, _ in switches},
                ball=args.ball,
                reset_real_features=False,
                per_class=self.per_class,
            ).to(device)
        except ValueError as err:
            raise UsageError(str(err)) from None
        if real.statistics is not None:
            mean, cov = real.statistics
            self.metric.set_real_statistics(
                mean.to(device), cov.to(device), num_samples=real.total or None, source=f"--real {real.path}"
            )
        else:
            labels = real_labels.to(device) if real_labels is not None else None
            self.metric.update(real.features.to(device), real=True, labels=labels)
        if test is not None:
            self.metric.update(test.features.to(device), role="test")

    def __call__(self, fake: Tensor, fake_labels: Optional[Tensor] = None) -> Result:
        from tqdm.auto import tqdm

        from lightning_prd.functional.knn import tile_progress

        labels = fake_labels.to(self.device) if fake_labels is not None else None
        self.metric.update(fake.to(self.device), real=False, labels=labels)
        bar = tqdm(desc="k-NN distance tiles", unit="tile", disable=self.args.quiet or not sys.stderr.isatty())
        try:
            with tile_progress(bar.update):
                result = self.metric.compute()
        except FamilyError as err:  # a registry family's compute: named by its flag
            raise FamilyError(err.family, f"{get_family(err.family).flag}: {err}") from err
        finally:
            bar.close()
            self.metric.reset()
        scores = {k: scalar(result[k]) for k in SCORES if k in result}
        per_class = per_class_payload(result) if self.per_class else None
        curves = {
            k: _np(v) for k, v in result.items() if v.ndim == 1 and k != "classes" and not k.endswith("_per_class")
        }
        return scores, curves, per_class


def _np(x: Any) -> np.ndarray:
    return x.detach().cpu().double().numpy() if isinstance(x, Tensor) else np.asarray(x, dtype=float)


# ---------------------------------------------------------------------------- output
def _fmt(value: Union[int, float]) -> str:
    return cell(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned."""
    table = [list(map(str, header)), *[list(map(str, r)) for r in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(table[0]), "  ".join("-" * w for w in widths), *map(line, table[1:])])


def _direction_rows(names: Sequence[str], results: Sequence[Tuple[str, Result]]) -> List[List[str]]:
    """``compare``'s last rows: which way each score is better, and which set is best by it."""
    ways = ["(better)", "", *[better(k) for k in names]]
    picks = [best(k, [scores.get(k, float("nan")) for _, (scores, _, _) in results]) for k in names]
    bests = ["(best)", "", *[results[i][0] if i is not None else "-" for i in picks]]
    return [ways, bests]


def _settings(args: argparse.Namespace, scorer: _Scorer, device: torch.device) -> Dict[str, Any]:
    return {
        "protocol": getattr(args, "protocol", None),
        # the valued families' values (None: off)
        **{family.keyword: getattr(args, family.keyword) for family in flag_families() if family.value_option},
        "ball": args.ball,
        "extractor": args.extractor,
        "weights": args.weights,
        "device": str(device),
        "num_samples": args.num_samples,
        "seed": args.seed,
        "only": args.only,
        "detector": args.detector,
        "real_key": args.real_key or args.key,
        "fake_key": args.fake_key or args.key,
        # every family with options but a valued one (its value is above): its options, None when off
        **{
            family.name: scorer.metric.plan.options_of(family.name)
            for family in families()
            if family.defaults and family.value_option is None
        },
        # every family of the table without options: whether it is on
        **{
            family.keyword: scorer.metric.plan.on(family.name)
            for family in flag_families()
            if not family.defaults and family.value_option is None
        },
        "test_key": (args.test_key or args.key) if args.test is not None else None,
        "per_class": scorer.per_class,
    }


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _count(src: _Source, letter: str) -> str:
    if src.statistics is not None:
        held = f"{letter} = {src.total}" if src.total else f"{letter} not recorded"
        return f"mean and covariance only ({held})"
    return f"{letter} = {src.num}" + (f" (of {src.total})" if src.total != src.num else "")


def _entry(src: _Source) -> str:
    layout = f" ({src.layout})" if src.layout is not None else ""
    return (f" [{src.key}]" if src.key is not None else "") + layout


def _header(
    real: _Source,
    fake: Optional[_Source],
    dim: int,
    args: argparse.Namespace,
    scorer: _Scorer,
    test: Optional[_Source] = None,
) -> str:
    lines = [f"real      {real.path}{_entry(real)}  {_count(real, 'N')}"]
    if fake is not None:
        lines.append(f"fake      {fake.path}{_entry(fake)}  {_count(fake, 'M')}")
    if test is not None:
        lines.append(f"test      {test.path}{_entry(test)}  {_count(test, 'T')}  (held out)")
    made_with = f"  (--real made with {real.made_with})" if real.made_with and args.extractor is None else ""
    lines.append(f"features  D = {dim}  extractor = {args.extractor or 'none (features as given)'}{made_with}")
    if getattr(args, "protocol", None) is not None:
        lines.append(f"protocol  {describe(get_protocol(args.protocol))}")
    if scorer.only_frechet:
        lines.append("scores    the Fréchet distance only (--only frechet)")
        return "\n".join(lines)
    ks = [  # the valued families' k (their name with a slash: precision/recall)
        f"{family.name.replace('_', '/')} = {_or_dash(getattr(args, family.keyword))}"
        for family in flag_families()
        if family.value_option
    ]
    lines.append(f"k         {'  '.join(ks)}  balls = {args.ball}")
    skipped = [
        f"{family.name} ({no_flag(family)})"
        for family in switch_families()
        if family.cli.on and family.value_option is None and scorer.on[family.name] is None
    ]
    if skipped:
        lines.append(f"skipped   {', '.join(skipped)}")
    return "\n".join(lines)


def _write_json(path: str, payload: Dict[str, Any]) -> None:
    write_output("--json", path, lambda out: out.write_text(json.dumps(payload, indent=2, allow_nan=True) + "\n"))


def _check_outputs(args: argparse.Namespace, inputs: Sequence[Tuple[str, str]]) -> None:
    """Fail before any work when ``--json`` / ``--plot`` cannot be written or would overwrite an input
    (see :func:`lightning_prd.cli.checks.check_outputs`; missing folders are created)."""
    check_outputs(args, inputs, plot_format)


def _check_inputs(paths: Sequence[Tuple[str, str]], has_extractor: bool) -> None:
    """Cheap checks of every ``--real``/``--test``/``--fake`` PATH before the (possibly long) work starts
    (``--real`` and ``--test`` may be reference files of another tool, of any name)."""
    for flag, text in paths:
        _check_path(text, flag, has_extractor, by_content=flag in BY_CONTENT)


# ---------------------------------------------------------------------------- commands
def _device(text: str) -> torch.device:
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise CLIError(f"--device {text}: not a device (use cpu, cuda, cuda:N or auto)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise CLIError(f"--device {text}: CUDA is not available on this machine (use --device cpu)")
    return device


def _unknown_extractor(err: UnknownExtractorError) -> CLIError:
    return CLIError(f"--extractor {err.name}: not an extractor (use one of {', '.join(err.known)}, or module:callable)")


def _extractor(args: argparse.Namespace, device: torch.device, protocol: Optional[Protocol] = None) -> Any:
    if protocol is not None:
        try:
            return build_extractor(protocol, args, device)
        except UnknownExtractorError as err:  # --extractor beside a protocol that uses the features as given
            raise _unknown_extractor(err) from err
        except (ValueError, TypeError, FileNotFoundError, ImportError, AttributeError) as err:
            raise CLIError(f"--protocol {protocol.name}: {' '.join(str(err).split())}") from err
    if args.extractor is None:
        if args.weights is not None:
            raise CLIError("--weights needs --extractor NAME (the network the weights belong to)")
        return None
    from lightning_prd.features import get_extractor

    try:
        return get_extractor(args.extractor, weights=args.weights, device=device)
    except UnknownExtractorError as err:
        raise _unknown_extractor(err) from err
    except (ValueError, TypeError, FileNotFoundError, ImportError, AttributeError) as err:
        raise CLIError(f"--extractor {args.extractor}: {' '.join(str(err).split())}") from err


def run_evaluate(args: argparse.Namespace) -> int:
    """Run ``evaluate`` or ``compare`` on parsed arguments; returns the exit status."""
    device = _device(args.device)
    fakes = args.fake if isinstance(args.fake, list) else [args.fake]
    names = getattr(args, "labels", None) or [Path(p).stem or p for p in fakes]
    if len(names) != len(fakes):
        raise CLIError(f"--labels: got {len(names)} labels for {len(fakes)} --fake sets")
    protocol = apply_protocol(args)
    check_only(args)
    try:  # every family flag's value, checked by its record (the parser checked the valued ones)
        switches = resolve_switches(args)
    except ValueError as err:
        raise UsageError(str(err)) from None
    on = {family.name: options for family, _, options in switches}
    check_held_out(args, on)
    label_paths = given_label_paths(args)
    sets = [("--real", args.real), *([("--test", args.test)] if args.test is not None else [])]
    sets += [("--fake", p) for p in fakes]
    _check_inputs(sets, args.extractor is not None)
    _check_outputs(args, [*sets, *label_paths])
    real_labels, fake_labels = (read_labels(text, flag) for flag, text in label_paths) if label_paths else (None, None)
    extractor = _extractor(args, device, protocol)
    use_count(args, "--real")
    real = load_set(args.real, "--real", args, extractor, device)
    warn_if_short(protocol, real, "--real", args)
    real.extras.pop("logits", None)  # the Inception Score is the generated set's
    only = args.only == "frechet"
    need = "a covariance" if only else "k-NN radii"
    if real.statistics is None:
        check_sizes(real, "--real", switches, args, need=need)
    real_rows = set_labels(real_labels, "--real-labels", real, "--real", args)
    use_count(args, "--test")
    test = load_set(args.test, "--test", args, extractor, device) if args.test is not None else None
    if test is not None:
        check_test(test, real, args, on)
    dim = real.dim
    scorer = _Scorer(real, args, device, switches=switches, test=test, real_labels=real_rows)
    if test is not None:
        test.features = test.features[:, :0].cpu()  # the metric holds them; keep the count
    results: List[Tuple[str, Result]] = []
    sources, fingerprints = [], []
    use_count(args, "--fake")
    for path, name in zip(fakes, names):
        fake = load_set(path, "--fake", args, extractor, device)
        warn_if_short(protocol, fake, "--fake", args)
        if (fake.picked or real.picked) and fake.key == real.key and Path(path).resolve() == Path(args.real).resolve():
            raise CLIError(
                f"--fake {path}: the same entry {fake.key!r} as --real, taken as the first of several in the file; "
                "name the entries with --real-key and --fake-key"
            )
        if fake.features.shape[1] != dim:
            raise CLIError(
                f"--fake {path}: {fake.features.shape[1]} features per sample, but --real has {dim} ({args.real})"
            )
        check_sizes(fake, "--fake", switches, args, need=need)
        check_pair(real, fake, switches, args)
        fake_rows = set_labels(fake_labels, "--fake-labels", fake, "--fake", args)
        try:
            result = scorer(fake.features, fake_rows)
        except ValueError as err:
            raise CLIError(f"cannot score --fake {path}: {core_error(err)}") from err
        if not only:
            result[0].update(pass_scores(real, fake))  # sFID, Inception Score: the same network pass
        fake.features = fake.features[:, :0].cpu()  # keep the count, free the memory
        results.append((name, (ordered(result[0], list(SCORES)), result[1], result[2])))
        sources.append(fake)
        fingerprints.append(run_fingerprint(extractor, protocol, real, fake, args))
    real.extras = {}

    evaluate = args.command == "evaluate"
    print(_header(real, sources[0] if evaluate else None, dim, args, scorer, test))
    print()
    if evaluate:
        scores, _, per_class = results[0][1]
        print(_table(["score", "value", "better"], [[k, _fmt(v), better(k)] for k, v in scores.items()]))
        if per_class is not None:
            print()
            given = ", ".join(f"{flag} {text}" for flag, text in label_paths)
            print(f"per class  {len(per_class['classes'])} classes  ({given})")
            print()
            rows = per_class_rows(per_class)
            print(_table(rows[0], rows[1:]))
            print(lowest_coverage_line(per_class))
    else:
        columns = [k for k in SCORES if any(k in scores for _, (scores, _, _) in results)]
        rows = [
            [name, str(src.num), *[_fmt(scores[k]) if k in scores else "-" for k in columns]]
            for (name, (scores, _, _)), src in zip(results, sources)
        ]
        print(_table(["fake", "M", *columns], [*rows, *_direction_rows(columns, results)]))
    if args.json:
        payload: Dict[str, Any] = {
            "command": args.command,
            "version": __version__,
            "real": real.describe(),
            "test": test.describe() if test is not None else None,
            "num_features": dim,
            "settings": _settings(args, scorer, device),
            "protocol": protocol.describe() if protocol is not None else None,
        }
        if evaluate:
            scores, _, per_class = results[0][1]
            payload.update(fake=sources[0].describe(), scores=scores, fingerprint=fingerprints[0])
            if per_class is not None and real_labels is not None and fake_labels is not None:
                labels = {"real_labels": real_labels.describe(), "fake_labels": fake_labels.describe()}
                payload["per_class"] = {**labels, **per_class}
        else:
            payload["results"] = [
                {"label": name, **src.describe(), "scores": scores, "fingerprint": fp}
                for (name, (scores, _, _)), src, fp in zip(results, sources, fingerprints)
            ]
        _write_json(args.json, payload)
    if args.plot:
        write_plot(args.plot, results)
    return 0
