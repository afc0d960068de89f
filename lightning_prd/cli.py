"""``lightning-prd``: evaluate saved features or image folders from the command line.

Two subcommands:

* ``lightning-prd evaluate --real PATH --fake PATH``: every score of one generated set against
  the real set, as a table (and ``--json``, ``--plot``).
* ``lightning-prd compare --real PATH --fake PATH [PATH ...]``: one row per generated set,
  curves overlaid.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

PROG = "lightning-prd"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
FEATURE_SUFFIXES = (".npy", ".npz", ".pt", ".pth")
#: score name -> "higher" / "lower" is better; the order of the printed table
SCORES = {
    "precision": "higher",
    "recall": "higher",
    "density": "higher",
    "coverage": "higher",
    "f_beta": "higher",
    "f_inv_beta": "higher",
    "alpha_precision": "higher",
    "beta_recall": "higher",
    "authenticity": "higher",
    "frechet_distance": "lower",
}

EPILOG = f"""\
inputs:
  PATH is a feature file or an image folder:
    .npy          a 2-D array [N, D] of features
    .npz          the array named by --key (--real-key, --fake-key), else the first array
    .pt / .pth    a tensor, or the tensor named by --key (else the first one) of a dict
    folder/       PNG/JPEG images, searched recursively; needs --extractor
  With --extractor, files may also hold images [N, C, H, W] (uint8 0..255 or float 0..1).

scores (the table, and --json):
  precision, recall (k = --k-pr)  Kynkäänniemi et al. 2019
  density, coverage (k = --k-dc)  Naeem et al. 2020
  f_beta, f_inv_beta              max F_8 / F_1/8 of the PRD curve, Sajjadi et al. 2018
  alpha_precision, beta_recall,   integrated alpha/beta curves and authenticity,
  authenticity                    Alaa et al. 2022 (k = --k-dc, so beta = 1 is coverage)
  frechet_distance                the FID formula on these features (lower is better)
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


class CLIError(Exception):
    """A problem with the user's input: reported as one line, exit status 1."""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors reported as one line (no usage block)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# ---------------------------------------------------------------------------- arguments
def _int_at_least(minimum: int, what: str):
    """An argparse ``type`` accepting integers ``>= minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1, "positive")
_nonnegative_int = _int_at_least(0, "non-negative")


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
        type=_nonnegative_int,
        default=0,
        metavar="S",
        help="seed of subsampling and PRD clustering (default: 0)",
    )
    p.add_argument("--no-prd", action="store_true", help="skip the PRD curve and F_8 / F_1/8")
    p.add_argument("--no-alpha-beta", action="store_true", help="skip alpha-precision, beta-recall and authenticity")
    p.add_argument(
        "--prd-clusters", type=_positive_int, default=20, metavar="C", help="k-means clusters of PRD (default: 20)"
    )
    p.add_argument(
        "--prd-runs", type=_positive_int, default=10, metavar="R", help="clusterings averaged by PRD (default: 10)"
    )
    p.add_argument(
        "--num-alphas",
        type=_positive_int,
        default=30,
        metavar="A",
        help="points of the alpha/beta curves (default: 30)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.add_argument("--debug", action="store_true", help="show the full traceback of errors")


def build_parser() -> argparse.ArgumentParser:
    """The ``lightning-prd`` argument parser (subcommands ``evaluate`` and ``compare``)."""
    from lightning_prd.features import available_extractors

    epilog = EPILOG.replace("{extractors}", ", ".join(available_extractors()))
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog=PROG,
        formatter_class=fmt,
        epilog=epilog,
        description="Fidelity and diversity of generated samples: precision, recall, density, coverage, "
        "PRD, alpha-precision/beta-recall, authenticity and the Frechet distance, from saved features or image folders.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="{evaluate,compare}")
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
    return parser


def _version() -> str:
    from lightning_prd import __version__

    return __version__


# ---------------------------------------------------------------------------- inputs
def _subsample_rows(n: int, num_samples: Optional[int], seed: int) -> Optional[Tensor]:
    """Sorted indices of a seeded subsample without replacement, or None to keep every row."""
    if num_samples is None or n <= num_samples:
        return None
    gen = torch.Generator().manual_seed(seed)
    return torch.randperm(n, generator=gen)[:num_samples].sort().values


def _read_array(path: Path, key: Optional[str], flag: str) -> Tensor:
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return torch.from_numpy(np.load(path, allow_pickle=False))
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            if not names:
                raise CLIError(f"{flag} {path}: the .npz file holds no arrays")
            if key is not None and key not in names:
                raise CLIError(f"{flag} {path}: no array named {key!r} (arrays: {', '.join(names)})")
            return torch.from_numpy(data[key if key is not None else names[0]])
    obj = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(obj, dict):
        tensors = [k for k, v in obj.items() if isinstance(v, Tensor)]
        if key is not None and key not in tensors:
            raise CLIError(
                f"{flag} {path}: no tensor named {key!r} (tensors: {', '.join(map(str, tensors)) or 'none'})"
            )
        if not tensors:
            raise CLIError(f"{flag} {path}: the dict holds no tensor")
        obj = obj[key if key is not None else tensors[0]]
    if isinstance(obj, np.ndarray):
        obj = torch.from_numpy(obj)
    if not isinstance(obj, Tensor):
        raise CLIError(
            f"{flag} {path}: expected a tensor (or a dict of tensors), but the file holds a {type(obj).__name__}"
        )
    return obj


def _image_files(folder: Path) -> List[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


def _read_image(path: Path) -> Tensor:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            array = np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError) as err:
        raise CLIError(f"cannot read image {path}: {err}") from err
    return torch.from_numpy(array.copy()).permute(2, 0, 1)


def _image_batches(
    files: Sequence[Path], batch_size: int, size: Optional[Tuple[int, int]], folder: Path
) -> Iterator[Tensor]:
    """uint8 ``[B, 3, H, W]`` batches; a batch of mixed sizes is resized to ``size`` (float [0, 1])."""
    import torch.nn.functional as F

    for start in range(0, len(files), batch_size):
        images = [_read_image(p) for p in files[start : start + batch_size]]
        shapes = sorted({tuple(im.shape[1:]) for im in images})
        if len(shapes) == 1:
            yield torch.stack(images)
            continue
        if size is None:
            sizes = " and ".join(f"{h}x{w}" for h, w in shapes[:2])
            raise CLIError(
                f"images in {folder} have different sizes ({sizes}) and the extractor declares no "
                f"input_size to resize them to"
            )
        resized = [
            F.interpolate(im[None].float() / 255, size=size, mode="bilinear", align_corners=False, antialias=True)
            for im in images
        ]
        yield torch.cat(resized).clamp(0.0, 1.0)


@dataclass
class _Source:
    """What was loaded from one PATH: its features and a description for the table and the JSON."""

    features: Tensor
    path: str
    kind: str  # "features" or "images"
    total: int  # samples available before --num-samples

    @property
    def num(self) -> int:
        return int(self.features.shape[0])

    def describe(self) -> Dict[str, Any]:
        return {"path": self.path, "source": self.kind, "num_samples": self.num, "num_available": self.total}


def load_set(path_text: str, flag: str, args: argparse.Namespace, extractor: Any, device: torch.device) -> _Source:
    """Features ``[n, D]`` of one ``--real``/``--fake`` PATH (subsampled, extracted, checked)."""
    path = Path(path_text).expanduser()
    progress = not args.quiet and sys.stderr.isatty()
    if not path.exists():
        raise CLIError(f"{flag} {path_text}: no such file or directory")
    if path.is_dir():
        files = _image_files(path)
        if not files:
            raise CLIError(f"{flag} {path_text}: no PNG/JPEG images found in this folder")
        if extractor is None:
            raise CLIError(
                f"{flag} {path_text} is an image folder: pass --extractor NAME "
                f"(e.g. --extractor inception --weights FILE) to embed the images"
            )
        rows = _subsample_rows(len(files), args.num_samples, args.seed)
        kept = files if rows is None else [files[i] for i in rows.tolist()]
        batches = _Counted(
            _image_batches(kept, args.batch_size, getattr(extractor, "input_size", None), path), len(kept)
        )
        feats = _extract(
            extractor, batches, flag, path_text, device=device, progress=progress, desc=f"{flag[2:]} images"
        )
        return _Source(
            features=_as_float_features(feats, flag, path_text), path=str(path), kind="images", total=len(files)
        )
    if path.suffix.lower() not in FEATURE_SUFFIXES:
        raise CLIError(
            f"{flag} {path_text}: unsupported file type {path.suffix or '(none)'!r}; expected "
            f"{', '.join(FEATURE_SUFFIXES)} or a folder of PNG/JPEG images"
        )
    try:
        key = getattr(args, f"{flag[2:]}_key") or args.key
        data = _read_array(path, key, flag)
    except CLIError:
        raise
    except Exception as err:  # noqa: BLE001 - unreadable file: one line naming it
        raise CLIError(f"{flag} {path_text}: cannot read the file: {' '.join(str(err).split())[:300]}") from err
    total = int(data.shape[0]) if data.ndim else 0
    if data.ndim == 0 or total == 0:
        raise CLIError(f"{flag} {path_text}: expected at least one sample, but got shape {tuple(data.shape)}")
    rows = _subsample_rows(total, args.num_samples, args.seed)
    if rows is not None:
        data = data[rows]
    if extractor is not None:
        feats = _extract(
            extractor,
            data,
            flag,
            path_text,
            batch_size=args.batch_size,
            device=device,
            progress=progress,
            desc=flag[2:],
        )
    else:
        if data.ndim != 2:
            raise CLIError(
                f"{flag} {path_text}: expected a 2-D [N, D] feature array, but got shape {tuple(data.shape)}; "
                f"pass --extractor to embed image arrays"
            )
        feats = data
    return _Source(features=_as_float_features(feats, flag, path_text), path=str(path), kind="features", total=total)


def _extract(extractor: Any, data: Any, flag: str, path: str, **kwargs: Any) -> Tensor:
    """:func:`~lightning_prd.features.extract_features`, with errors naming the input."""
    from lightning_prd.features import extract_features

    try:
        return extract_features(extractor, data, **kwargs)
    except CLIError:
        raise
    except (ValueError, TypeError, RuntimeError) as err:
        raise CLIError(
            f"{flag} {path}: the extractor failed on these samples: {' '.join(str(err).split())[:400]}"
        ) from err


def _as_float_features(feats: Tensor, flag: str, path: str) -> Tensor:
    if feats.is_complex():
        raise CLIError(f"{flag} {path}: expected real-valued features, but got dtype {feats.dtype}")
    if not feats.is_floating_point() or feats.dtype in (torch.float16, torch.bfloat16):
        feats = feats.to(torch.float32)  # integer/bool tabular columns, half-precision features
    bad = int((~torch.isfinite(feats)).any(1).sum())
    if bad:
        raise CLIError(f"{flag} {path}: {bad} of {feats.shape[0]} samples hold NaN or Inf features")
    return feats


class _Counted:
    """An iterable of batches that knows its number of samples (for the progress bar)."""

    def __init__(self, batches: Iterator[Tensor], total: int) -> None:
        self.batches, self.dataset = batches, range(total)

    def __iter__(self) -> Iterator[Tensor]:
        return self.batches


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
            k_precision_recall=args.k_pr, k_density_coverage=args.k_dc, frechet=True, reset_real_features=False,
            prd=prd if self.prd else False,
            alpha_beta=dict(num_alphas=args.num_alphas, k=args.k_dc) if self.alpha_beta else False,
        ).to(device)
        self.metric.update(self.real, real=True)

    def __call__(self, fake: Tensor) -> Tuple[Dict[str, float], Dict[str, np.ndarray]]:
        from tqdm.auto import tqdm

        from lightning_prd.functional._knn import tile_progress

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
    return f"{round(value, 4) + 0.0:.4f}" if abs(value) < 1e5 else f"{value:.4g}"  # + 0.0: no "-0.0000"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned."""
    table = [list(map(str, header)), *[list(map(str, r)) for r in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(table[0]), "  ".join("-" * w for w in widths), *map(line, table[1:])])


def _settings(args: argparse.Namespace, scorer: _Scorer, device: torch.device) -> Dict[str, Any]:
    return {
        "k_precision_recall": args.k_pr,
        "k_density_coverage": args.k_dc,
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
    }


def _count(src: _Source, letter: str) -> str:
    return f"{letter} = {src.num}" + (f" (of {src.total})" if src.total != src.num else "")


def _header(real: _Source, fake: Optional[_Source], dim: int, args: argparse.Namespace, scorer: _Scorer) -> str:
    lines = [f"real      {real.path}  {_count(real, 'N')}"]
    if fake is not None:
        lines.append(f"fake      {fake.path}  {_count(fake, 'M')}")
    lines += [
        f"features  D = {dim}  extractor = {args.extractor or 'none (features as given)'}",
        f"k         precision/recall = {args.k_pr}  density/coverage = {args.k_dc}",
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
    out = Path(path).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, allow_nan=True) + "\n")


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
    out = Path(path).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)


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

    return get_extractor(args.extractor, weights=args.weights, device=device)


def _run(args: argparse.Namespace) -> int:
    device = _device(args.device)
    fakes = args.fake if isinstance(args.fake, list) else [args.fake]
    labels = getattr(args, "labels", None) or [Path(p).stem or p for p in fakes]
    if len(labels) != len(fakes):
        raise CLIError(f"--labels: got {len(labels)} labels for {len(fakes)} --fake sets")
    extractor = _extractor(args, device)
    real = load_set(args.real, "--real", args, extractor, device)
    dim = real.features.shape[1]
    scorer = _Scorer(real.features, args, device)
    results, sources = [], []
    for path, label in zip(fakes, labels):
        fake = load_set(path, "--fake", args, extractor, device)
        if fake.features.shape[1] != dim:
            raise CLIError(f"--fake {path}: {fake.features.shape[1]} features per sample, but --real has {dim}")
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
        print(_table(["score", "value", "better"], [[k, _fmt(v), SCORES[k]] for k, v in results[0][1].items()]))
    else:
        names = [k for k in SCORES if any(k in scores for _, scores, _ in results)]
        rows = [
            [label, str(src.num), *[_fmt(scores[k]) if k in scores else "-" for k in names]]
            for (label, scores, _), src in zip(results, sources)
        ]
        print(_table(["fake", "M", *names], rows))
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
        return _run(args)
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
