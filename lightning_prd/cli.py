"""``lightning-prd``: evaluate saved features or image folders from the command line.

Three subcommands:

* ``lightning-prd evaluate --real PATH --fake PATH``: every score of one generated set against
  the real set, as a table (and ``--json``, ``--plot``).
* ``lightning-prd compare --real PATH --fake PATH [PATH ...]``: one row per generated set,
  curves overlaid.
* ``lightning-prd runs DIR [DIR ...]``: the scores ``PRDCallback`` logged for several runs, one
  row per run (:mod:`lightning_prd._cli_runs`).

``PATH`` is a feature file (``.npy``; ``.npz``: ``--key`` or the first array; ``.pt``/``.pth``:
a tensor, or ``--key``/the first tensor of a dict) holding ``[N, D]`` features, or a folder of
PNG/JPEG images (read with Pillow, searched recursively), which needs ``--extractor``.
With ``--extractor`` a file may also hold images ``[N, C, H, W]``. Bad input exits with
status 1 and one line on stderr; usage errors exit with status 2. Run with ``--help``.

Example:
    >>> import numpy as np, tempfile, os
    >>> from lightning_prd.cli import main
    >>> tmp = tempfile.mkdtemp()
    >>> rng = np.random.default_rng(0)
    >>> np.save(os.path.join(tmp, "real.npy"), rng.normal(size=(40, 3)))
    >>> np.save(os.path.join(tmp, "fake.npy"), rng.normal(size=(40, 3)))
    >>> code = main(["evaluate", "--real", os.path.join(tmp, "real.npy"), "--fake", os.path.join(tmp, "fake.npy"),
    ...              "--no-prd", "--no-alpha-beta", "--quiet"])  # doctest: +ELLIPSIS
    real ...
    >>> code
    0
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd._cli_checks import check_outputs, reject_unknown_flags, write_output
from lightning_prd._cli_inputs import CLIError, _check_path, _Source, load_set
from lightning_prd._cli_runs import add_runs_parser
from lightning_prd.functional._validation import MAX_SEED
from lightning_prd.scores import DIRECTIONS, best_index, direction_label, format_score

PROG = "lightning-prd"
#: the scores of the table, in its order, and which way each is better (one table for the package)
SCORES = DIRECTIONS

EPILOG = f"""\
inputs:
  PATH is a feature file or an image folder:
    .npy          a 2-D array [N, D] of features
    .npz          the array named by --key (--real-key, --fake-key), else the first array
    .pt / .pth    a tensor, or the tensor named by --key (else the first one) of a dict
    folder/       PNG/JPEG images, searched recursively; needs --extractor
  With --extractor, files may also hold images [N, C, H, W] (uint8 0..255 or float 0..1).
  Features are floating point: float16/bfloat16 are read as float32 (the same scores as
  float32 files); integer and bool arrays are refused unless --extractor embeds them.
  --json and --plot are checked before any work; missing folders are created. They never
  overwrite an input: the same file under another name, a hard link or a symbolic link of
  an input, or an image of an input folder, is refused, and so is a new image file inside an
  input folder (it would be read as a sample next time). Bad input: exit status 1 and one
  line on stderr; usage errors (an unknown flag is named): status 2.

scores (the table, and --json):
  precision, recall (k = --k-pr)  Kynkäänniemi et al. 2019
  density, coverage (k = --k-dc)  Naeem et al. 2020
  f_beta, f_inv_beta              max F_8 / F_1/8 of the PRD curve, Sajjadi et al. 2018
  alpha_precision, beta_recall,   integrated alpha/beta curves and authenticity,
  authenticity                    Alaa et al. 2022 (k = --k-dc, so beta = 1 is coverage)
  frechet_distance                the FID formula on these features
  The 'better' column: higher, lower (frechet_distance), or 1 is ideal (density: below 1
  means samples in empty regions, above 1 samples piled in dense regions).
  PRD and alpha/beta appear when lightning_prd provides them and are skipped with
  --no-prd / --no-alpha-beta. The PRD clustering subsamples the larger set to the
  smaller one's size (seeded by --seed).

extractors (--extractor): {{extractors}}, or 'module:callable'
  Pretrained networks never download: pass --weights FILE, or put the file in torch's
  hub cache ($TORCH_HOME/hub/checkpoints, default ~/.cache/torch/hub/checkpoints):
    inception  inception_v3_google-0cc3c7bd.pth
               https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth
    vgg16      vgg16-397923af.pth
               https://download.pytorch.org/models/vgg16-397923af.pth
  They need torchvision: pip install 'lightning-prd[images]'.
  'random-cnn' is a seeded random network for smoke tests, not for reporting.

examples:
  {PROG} evaluate --real real.npy --fake fake.npy
  {PROG} evaluate --real feats.npz --real-key real --fake feats.npz --fake-key fake --json out.json
  {PROG} evaluate --real data/train_images --fake samples/ --extractor inception \\
      --weights ~/weights/inception_v3_google-0cc3c7bd.pth --device cuda --plot prd.png
  {PROG} evaluate --real real.pt --fake fake.pt --num-samples 10000 --seed 1
  {PROG} compare --real real.npy --fake ep10.npy ep20.npy ep30.npy --labels 10 20 30 --plot curves.png
"""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors reported as one line (no usage block)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# ---------------------------------------------------------------------------- arguments
def _int_in(minimum: int, maximum: Optional[int] = None):
    """An argparse ``type`` accepting integers in ``[minimum, maximum]`` (the bounds the core checks)."""
    if maximum is not None:
        what = f"an integer in [{minimum}, {maximum}]"
    else:
        what = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer of at least {minimum}")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            shown = text if len(text) <= 40 else text[:37] + "..."
            raise argparse.ArgumentTypeError(f"expected {what}, but got {shown!r}")
        return value

    return parse


_positive_int = _int_in(1)
#: the package's seed range (lightning_prd.functional._validation.MAX_SEED)
_seed = _int_in(0, MAX_SEED)
#: the bounds of lightning_prd.functional.prd.check_prd_options / alpha_beta.check_num_alphas
_prd_runs = _int_in(1, 10_000)
_num_alphas = _int_in(2, 1_000_000)


def _add_common(p: argparse.ArgumentParser, *, many_fakes: bool) -> None:
    p.add_argument(
        "--real", required=True, metavar="PATH", help="real samples: feature file or image folder (the reference P)"
    )
    if many_fakes:
        p.add_argument("--fake", required=True, nargs="+", metavar="PATH", help="one or more generated sets")
        p.add_argument("--labels", nargs="+", metavar="LABEL", help="a name per --fake set (default: the file names)")
    else:
        p.add_argument(
            "--fake",
            required=True,
            metavar="PATH",
            help="generated samples: feature file or image folder (the model Q)",
        )
    p.add_argument(
        "--key", metavar="KEY", help="array name inside .npz files / tensor name inside .pt dicts (both sets)"
    )
    p.add_argument("--real-key", metavar="KEY", help="--key for the --real file only")
    p.add_argument("--fake-key", metavar="KEY", help="--key for the --fake file(s) only")
    p.add_argument("--json", metavar="OUT", help="write every scalar score and the settings to this JSON file")
    p.add_argument("--plot", metavar="OUT.png", help="write a PNG with the PRD and alpha/beta curves (when available)")
    p.add_argument("--k-pr", type=_positive_int, default=3, metavar="K", help="k of precision/recall (default: 3)")
    p.add_argument(
        "--k-dc", type=_positive_int, default=5, metavar="K", help="k of density/coverage and beta-recall (default: 5)"
    )
    p.add_argument(
        "--ball",
        choices=("closed", "open"),
        default="closed",
        help="k-NN balls of precision, recall, density and coverage: closed (d <= r, default) or open "
        "(d < r, as the prdc package: use it to compare with numbers published with prdc)",
    )
    p.add_argument(
        "--extractor", metavar="NAME", help="feature extractor for images: a registered name or module:callable"
    )
    p.add_argument("--weights", metavar="FILE", help="local weights file of the extractor (never downloaded)")
    p.add_argument(
        "--device", default="auto", metavar="DEV", help="cpu, cuda, cuda:N or auto (default: cuda when available)"
    )
    p.add_argument(
        "--batch-size", type=_positive_int, default=64, metavar="B", help="images per extractor batch (default: 64)"
    )
    p.add_argument(
        "--num-samples",
        type=_positive_int,
        metavar="N",
        help="subsample each set to at most N samples, without replacement",
    )
    p.add_argument(
        "--seed",
        type=_seed,
        default=0,
        metavar="S",
        help="seed of subsampling and PRD clustering, 0 to 2**63 - 1 (default: 0)",
    )
    p.add_argument("--no-prd", action="store_true", help="skip the PRD curve and F_8 / F_1/8")
    p.add_argument("--no-alpha-beta", action="store_true", help="skip alpha-precision, beta-recall and authenticity")
    p.add_argument(
        "--probabilistic",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="probabilistic precision and recall (p_precision, p_recall; default: on)",
    )
    p.add_argument(
        "--pr-cover",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="precision cover and recall cover (precision_cover, recall_cover; default: on)",
    )
    p.add_argument(
        "--kid",
        action="store_true",
        help="add the Kernel Inception Distance (100 subsets of min(1000, N, M) samples, seeded by --seed)",
    )
    p.add_argument("--vendi", action="store_true", help="add the Vendi score of the generated and of the real set")
    p.add_argument(
        "--top-pr",
        action="store_true",
        help="add TopP&R (top_precision, top_recall, top_f1; its own pass; more than 160 samples per set)",
    )
    p.add_argument(
        "--cmmd",
        action="store_true",
        help="add CMMD (Gaussian-kernel MMD; its sigma = 10 is calibrated for unit-norm CLIP embeddings)",
    )
    p.add_argument(
        "--prd-clusters", type=_positive_int, default=20, metavar="C", help="k-means clusters of PRD (default: 20)"
    )
    p.add_argument(
        "--prd-runs",
        type=_prd_runs,
        default=10,
        metavar="R",
        help="clusterings averaged by PRD, at most 10000 (default: 10)",
    )
    p.add_argument(
        "--num-alphas",
        type=_num_alphas,
        default=30,
        metavar="A",
        help="points of the alpha/beta curves, at least 2 (default: 30)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.add_argument("--debug", action="store_true", help="show the full traceback of errors")


def build_parser() -> argparse.ArgumentParser:
    """The ``lightning-prd`` argument parser (subcommands ``evaluate``, ``compare`` and ``runs``)."""
    from lightning_prd.features import available_extractors

    epilog = EPILOG.replace("{extractors}", ", ".join(available_extractors()))
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog=PROG,
        formatter_class=fmt,
        epilog=epilog,
        description="Fidelity and diversity of generated samples: precision, recall, density, coverage, "
        "PRD, alpha-precision/beta-recall, authenticity and the Frechet distance, "
        "from saved features or image folders.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="{evaluate,compare,runs}")
    ev = sub.add_parser(
        "evaluate",
        help="score one generated set against the real set",
        formatter_class=fmt,
        epilog=epilog,
        description="Score the generated set --fake against the real set --real and print a table.",
    )
    _add_common(ev, many_fakes=False)
    cmp = sub.add_parser(
        "compare",
        help="score several generated sets against one real set",
        formatter_class=fmt,
        epilog=epilog,
        description="Score each --fake set against --real: one table row per set, curves overlaid in --plot.",
    )
    _add_common(cmp, many_fakes=True)
    add_runs_parser(sub, fmt)
    return parser


def _version() -> str:
    from lightning_prd import __version__

    return __version__


# ---------------------------------------------------------------------------- scores
class _Scorer:
    """Scores of generated sets against one real set, from one ``GenerativeMetrics`` pass per set;
    the real side's k-NN radii are computed once."""

    def __init__(self, real: Tensor, args: argparse.Namespace, device: torch.device) -> None:
        from lightning_prd import GenerativeMetrics

        self.real, self.args, self.device = real.to(device), args, device
        self.prd = not args.no_prd
        self.alpha_beta = not args.no_alpha_beta
        prd = dict(num_clusters=args.prd_clusters, num_runs=args.prd_runs, seed=args.seed, enforce_balance="subsample")
        self.metric = GenerativeMetrics(
            k_precision_recall=args.k_pr,
            k_density_coverage=args.k_dc,
            frechet=True,
            reset_real_features=False,
            prd=prd if self.prd else False,
            alpha_beta=dict(num_alphas=args.num_alphas, k=args.k_dc) if self.alpha_beta else False,
            kid=dict(seed=args.seed) if args.kid else False,
            vendi=args.vendi,
            top_pr=bool(args.top_pr),
            ball=args.ball,
            probabilistic=args.probabilistic,
            pr_cover=args.pr_cover,
            cmmd=args.cmmd,
        ).to(device)
        self.metric.update(self.real, real=True)

    def __call__(self, fake: Tensor) -> Tuple[Dict[str, float], Dict[str, np.ndarray]]:
        from tqdm.auto import tqdm

        from lightning_prd.functional.knn import tile_progress

        self.metric.update(fake.to(self.device), real=False)
        bar = tqdm(desc="k-NN distance tiles", unit="tile", disable=self.args.quiet or not sys.stderr.isatty())
        try:
            with tile_progress(bar.update):
                result = self.metric.compute()
        finally:
            bar.close()
            self.metric.reset()
        scores = {k: float(result[k]) for k in SCORES if k in result}
        curves = {k: _np(v) for k, v in result.items() if v.ndim == 1}
        return scores, curves


def _np(x: Any) -> np.ndarray:
    return x.detach().cpu().double().numpy() if isinstance(x, Tensor) else np.asarray(x, dtype=float)


# ---------------------------------------------------------------------------- output
def _fmt(value: float) -> str:
    return format_score(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned."""
    table = [list(map(str, header)), *[list(map(str, r)) for r in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(table[0]), "  ".join("-" * w for w in widths), *map(line, table[1:])])


def _direction_rows(
    names: Sequence[str], results: Sequence[Tuple[str, Dict[str, float], Dict[str, np.ndarray]]]
) -> List[List[str]]:
    """``compare``'s last rows: which way each score is better, and which set is best by it."""
    better = ["(better)", "", *[direction_label(k) for k in names]]
    picks = [best_index(k, [scores.get(k, float("nan")) for _, scores, _ in results]) for k in names]
    best = ["(best)", "", *[results[i][0] if i is not None else "-" for i in picks]]
    return [better, best]


def _settings(args: argparse.Namespace, scorer: _Scorer, device: torch.device) -> Dict[str, Any]:
    return {
        "k_precision_recall": args.k_pr,
        "k_density_coverage": args.k_dc,
        "ball": args.ball,
        "extractor": args.extractor,
        "weights": args.weights,
        "device": str(device),
        "num_samples": args.num_samples,
        "seed": args.seed,
        "real_key": args.real_key or args.key,
        "fake_key": args.fake_key or args.key,
        "prd": (
            {"num_clusters": args.prd_clusters, "num_runs": args.prd_runs, "enforce_balance": "subsample"}
            if scorer.prd
            else None
        ),
        "alpha_beta": {"num_alphas": args.num_alphas, "k": args.k_dc, "embedding": None} if scorer.alpha_beta else None,
        "kid": scorer.metric.kid,
        "vendi": scorer.metric.vendi,
        "top_pr": scorer.metric.top_pr,
        "probabilistic": scorer.metric.probabilistic,
        "pr_cover": scorer.metric.pr_cover,
        "cmmd": scorer.metric.cmmd,
    }


def _count(src: _Source, letter: str) -> str:
    return f"{letter} = {src.num}" + (f" (of {src.total})" if src.total != src.num else "")


def _entry(src: _Source) -> str:
    return f" [{src.key}]" if src.key is not None else ""


def _header(real: _Source, fake: Optional[_Source], dim: int, args: argparse.Namespace, scorer: _Scorer) -> str:
    lines = [f"real      {real.path}{_entry(real)}  {_count(real, 'N')}"]
    if fake is not None:
        lines.append(f"fake      {fake.path}{_entry(fake)}  {_count(fake, 'M')}")
    lines += [
        f"features  D = {dim}  extractor = {args.extractor or 'none (features as given)'}",
        f"k         precision/recall = {args.k_pr}  density/coverage = {args.k_dc}  balls = {args.ball}",
    ]
    parts = (
        ("PRD", "prd", args.no_prd, scorer.prd),
        ("alpha/beta", "alpha-beta", args.no_alpha_beta, scorer.alpha_beta),
    )
    skipped = [
        f"{name} ({'--no-' + flag if off else 'not available in this installation'})"
        for name, flag, off, on in parts
        if not on
    ]
    if skipped:
        lines.append(f"skipped   {', '.join(skipped)}")
    return "\n".join(lines)


def _write_json(path: str, payload: Dict[str, Any]) -> None:
    write_output("--json", path, lambda out: out.write_text(json.dumps(payload, indent=2, allow_nan=True) + "\n"))


def _write_plot(path: str, results: Sequence[Tuple[str, Dict[str, float], Dict[str, np.ndarray]]]) -> None:
    """One PNG: PRD curves and alpha/beta curves when computed, and the (recall, precision) points."""
    from matplotlib.figure import Figure

    marker = {"prd": "prd_precision", "alpha_beta": "alphas"}
    panels = [p for p in ("prd", "alpha_beta") if any(marker[p] in curves for _, _, curves in results)]
    fig = Figure(figsize=(4.6 * (len(panels) + 1), 4.2), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(panels) + 1, squeeze=False)[0]
    colours = [f"C{i % 10}" for i in range(len(results))]
    for ax, panel in zip(axes, panels):
        for (label, _, c), colour in zip(results, colours):
            if panel == "prd" and "prd_precision" in c:
                ax.plot(c["prd_recall"], c["prd_precision"], color=colour, label=label)
            elif panel == "alpha_beta" and "alphas" in c:
                ax.plot(c["alphas"], c["alpha_precision_curve"], color=colour, label=f"{label} α-precision")
                ax.plot(c["alphas"], c["beta_recall_curve"], color=colour, linestyle="--", label=f"{label} β-recall")
        if panel == "prd":
            ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall", ylabel="precision", title="PRD curve")
        else:
            ax.plot([0, 1], [0, 1], color="0.6", linewidth=1, linestyle=":")
            ax.set(
                xlim=(0, 1),
                ylim=(0, 1.02),
                xlabel="α, β",
                ylabel="score",
                title="α-precision (solid), β-recall (dashed)",
            )
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="lower left" if panel == "prd" else "upper left")
    ax = axes[-1]
    for (label, scores, _), colour in zip(results, colours):
        if "precision" in scores and "recall" in scores:
            ax.scatter([scores["recall"]], [scores["precision"]], color=colour, zorder=2)
            ax.annotate(
                label, (scores["recall"], scores["precision"]), textcoords="offset points", xytext=(4, 4), fontsize=7
            )
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall", ylabel="precision", title="k-NN precision / recall")
    ax.grid(alpha=0.3)
    write_output("--plot", path, lambda out: fig.savefig(out, format=_plot_format(out)))


def _plot_format(out: Path) -> str:
    """The image format of ``--plot``: its extension, PNG when it has none (written at exactly that path)."""
    return out.suffix[1:].lower() or "png"


def _check_outputs(args: argparse.Namespace, inputs: Sequence[Tuple[str, str]]) -> None:
    """Fail before any work when ``--json`` / ``--plot`` cannot be written or would overwrite an input
    (see :func:`lightning_prd._cli_checks.check_outputs`; missing folders are created)."""
    check_outputs(args, inputs, _plot_format)


def _check_inputs(paths: Sequence[Tuple[str, str]], has_extractor: bool) -> None:
    """Cheap checks of every ``--real``/``--fake`` PATH before the (possibly long) work starts."""
    for flag, text in paths:
        _check_path(text, flag, has_extractor)


def _check_sizes(src: _Source, flag: str, options: Sequence[Tuple[str, int]], args: argparse.Namespace) -> None:
    """A k-NN radius of ``k`` needs ``k + 1`` samples in its set (the core's rule), named by option and file."""
    held = f"{flag} {src.path} holds {src.num} samples" + (
        f" (--num-samples {args.num_samples})" if src.num != src.total else ""
    )
    if src.num < 2:
        raise CLIError(f"{flag} {src.path}: expected at least 2 samples for k-NN radii, but got {src.num}")
    for option, k in options:
        if src.num < k + 1:
            raise CLIError(
                f"{option}: expected at most {src.num - 1}, but got {k} ({held}; a k-NN radius needs at least k + 1)"
            )


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


def _extractor(args: argparse.Namespace, device: torch.device) -> Any:
    if args.extractor is None:
        if args.weights is not None:
            raise CLIError("--weights needs --extractor NAME (the network the weights belong to)")
        return None
    from lightning_prd.features import get_extractor

    try:
        return get_extractor(args.extractor, weights=args.weights, device=device)
    except (ValueError, TypeError, FileNotFoundError, ImportError, AttributeError) as err:
        raise CLIError(f"--extractor {args.extractor}: {' '.join(str(err).split())}") from err


def _run(args: argparse.Namespace) -> int:
    device = _device(args.device)
    fakes = args.fake if isinstance(args.fake, list) else [args.fake]
    labels = getattr(args, "labels", None) or [Path(p).stem or p for p in fakes]
    if len(labels) != len(fakes):
        raise CLIError(f"--labels: got {len(labels)} labels for {len(fakes)} --fake sets")
    _check_inputs([("--real", args.real), *(("--fake", p) for p in fakes)], args.extractor is not None)
    _check_outputs(args, [("--real", args.real), *(("--fake", p) for p in fakes)])
    extractor = _extractor(args, device)
    real = load_set(args.real, "--real", args, extractor, device)
    _check_sizes(real, "--real", [("--k-pr", args.k_pr), ("--k-dc", args.k_dc)], args)
    dim = real.features.shape[1]
    scorer = _Scorer(real.features, args, device)
    results, sources = [], []
    for path, label in zip(fakes, labels):
        fake = load_set(path, "--fake", args, extractor, device)
        if (fake.picked or real.picked) and fake.key == real.key and Path(path).resolve() == Path(args.real).resolve():
            raise CLIError(
                f"--fake {path}: the same entry {fake.key!r} as --real, taken as the first of several in the file; "
                "name the entries with --real-key and --fake-key"
            )
        if fake.features.shape[1] != dim:
            raise CLIError(
                f"--fake {path}: {fake.features.shape[1]} features per sample, but --real has {dim} ({args.real})"
            )
        _check_sizes(fake, "--fake", [("--k-pr", args.k_pr)], args)
        clustered = 2 * min(real.num, fake.num)  # PRD subsamples the larger set to the smaller one's size
        if scorer.prd and args.prd_clusters > clustered:
            raise CLIError(
                f"--prd-clusters: expected at most {clustered}, but got {args.prd_clusters} (PRD clusters "
                f"2 x min(N, M) samples; N = {real.num}, M = {fake.num} for --fake {path})"
            )
        try:
            scores, curves = scorer(fake.features)
        except ValueError as err:
            raise CLIError(f"cannot score --fake {path}: {err}") from err
        fake.features = fake.features[:, :0].cpu()  # keep the count, free the memory
        results.append((label, scores, curves))
        sources.append(fake)

    print(_header(real, sources[0] if args.command == "evaluate" else None, dim, args, scorer))
    print()
    if args.command == "evaluate":
        rows = [[k, _fmt(v), direction_label(k)] for k, v in results[0][1].items()]
        print(_table(["score", "value", "better"], rows))
    else:
        names = [k for k in SCORES if any(k in scores for _, scores, _ in results)]
        rows = [
            [label, str(src.num), *[_fmt(scores[k]) if k in scores else "-" for k in names]]
            for (label, scores, _), src in zip(results, sources)
        ]
        print(_table(["fake", "M", *names], [*rows, *_direction_rows(names, results)]))
    if args.json:
        payload: Dict[str, Any] = {
            "command": args.command,
            "version": _version(),
            "real": real.describe(),
            "num_features": dim,
            "settings": _settings(args, scorer, device),
        }
        if args.command == "evaluate":
            payload.update(fake=sources[0].describe(), scores=results[0][1])
        else:
            payload["results"] = [
                {"label": label, **src.describe(), "scores": scores}
                for (label, scores, _), src in zip(results, sources)
            ]
        _write_json(args.json, payload)
    if args.plot:
        _write_plot(args.plot, results)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``lightning-prd``; returns the exit status (0 ok, 1 bad input, 2 usage error).

    Example:
        >>> main(["--version"])  # doctest: +ELLIPSIS
        lightning-prd ...
        0
    """
    parser = build_parser()
    try:
        reject_unknown_flags(build_parser, sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version and usage errors
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    show = warnings.showwarning

    def _one_line_warning(message: Any, category: Any, *rest: Any, **kw: Any) -> None:
        print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)

    warnings.showwarning = _one_line_warning
    try:
        return args.handler(args) if hasattr(args, "handler") else _run(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - bad input is reported as one line, not a traceback
        if args.debug:
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        if not isinstance(err, (CLIError, ValueError, TypeError, FileNotFoundError, ImportError)):
            message = f"{type(err).__name__}: {message} (rerun with --debug for the traceback)"
        print(f"{PROG} {args.command}: error: {message}", file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = show


if __name__ == "__main__":
    sys.exit(main())
