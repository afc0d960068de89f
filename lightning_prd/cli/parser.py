"""The ``lightning-prd`` argument parser: subcommands ``evaluate``, ``compare``, ``features`` (here; run by
:mod:`lightning_prd.cli.evaluate` and :mod:`lightning_prd.cli.features`) and ``runs``
(:mod:`lightning_prd.cli.runs`), their flags, help and epilogs."""

from __future__ import annotations

import argparse
from typing import Any, Optional

from lightning_prd import __version__
from lightning_prd.cli.columns import COLUMNS
from lightning_prd.cli.families import add_family_flags, held_out_flags, load_entry_points, scores_epilog
from lightning_prd.cli.precision import add_precision_argument
from lightning_prd.cli.protocol import add_protocol_argument, protocols_epilog
from lightning_prd.cli.recorded import Recorded
from lightning_prd.cli.runs import add_runs_parser
from lightning_prd.functional.engine.families import switch_families
from lightning_prd.functional.engine.inputs import MAX_SEED

PROG = "lightning-prd"
#: the scores of the table, in its order, and which way each is better (the package's table, then the
#: held-out scores: :mod:`lightning_prd.cli.columns`)
SCORES = COLUMNS

EPILOG = f"""\
inputs:
  PATH is a feature file or an image folder:
    .npy          a 2-D array [N, D] of features
    .npz          the array named by --key (--real-key, --fake-key), else the first array
    .pt / .pth    a tensor, or the tensor named by --key (else the first one) of a dict
    folder/       PNG/JPEG images, searched recursively; needs --extractor
  With --extractor, files may also hold images [N, C, H, W] (uint8 0..255 or float 0..1).
  --real takes every form below, told apart by content (any file name):
    form                             serves          detected by
    features .npy/.npz/.pt (and      every score     one unnamed array or entry; --real-key picks one
      torch-fidelity features cache)
    image folder                     every score +   a directory of PNG/JPEG files
    lightning-prd features file      every score     entries features + provenance
    dgm-eval representations         every score     entry reps
    clean-fid KID features           every score     entry feats (*_custom_na_kid.npz)
    NVlabs FeatureStats pickle       every score *   pickled fields (* with capture_all)
    guided-diffusion VIRTUAL_*.npz   every score +   arr_0 uint8 [N,H,W,3]
    FID statistics (pytorch-fid      Frechet only    mu + sigma
      --save-stats, clean-fid stats)
    torch-fidelity statistics cache  Frechet only    mu + sigma in a torch.save dict
    EDM2 reference .pkl              Frechet only    {{name: {{mu, sigma}}}}; --detector picks one
    (+ once embedded with --extractor)
  A file of statistics (mean, covariance) serves the Frechet distance alone: pass --only frechet;
  the k-NN scores, PRD, alpha/beta and the rest need per-sample features ('lightning-prd features'
  writes them once). The extractor a file names must be --extractor, which then embeds --fake only.
  --test PATH is a held-out real set the model never saw, for --data-copying and --fld (--real is
  then the training set): any form above that holds per-sample features or images, never
  statistics; --test-key picks its entry. Either flag without --test is an error, and so is
  --test without either flag (it would be read and used by no score); both are checked before
  any file is read. --test may not hold the same samples as --real.
  --real-labels / --fake-labels PATH (evaluate): the class of each sample, integers, one per
  sample in the order the set is read (a folder: its sorted paths; --num-samples keeps the
  labels of the rows it keeps): .npy, .npz (the array 'labels', else the only one), .pt/.pth
  (a tensor, or the dict's tensor 'labels'), .txt (integers separated by white space, '#'
  starts a comment line). Float, bool and string labels are refused: map them to integers.
  Pickles and torch.save files are read as data; one that asks to run code is refused.
  Features are floating point: float16/bfloat16 are read as float32 (the same scores as
  float32 files); integer and bool arrays are refused unless --extractor embeds them.
  --json and --plot are checked before any work; missing folders are created. They never
  overwrite an input: the same file under another name, a hard link or a symbolic link of
  an input, or an image of an input folder, is refused, and so is a new image file inside an
  input folder (it would be read as a sample next time). Bad input: exit status 1 and one
  line on stderr; usage errors (an unknown flag is named): status 2.

{{scores}}
  per class (evaluate, with --real-labels and --fake-labels): a second table, one row per
  class, with the precision, recall, density, coverage and frechet_distance of that class's
  samples, their means (over the classes where each is defined) and the class of lowest
  coverage; a class the model never generates has coverage and recall 0 (its other scores NaN).
  The 'better' column: higher, lower (frechet_distance), 1 is ideal (density: below 1
  means samples in empty regions, above 1 samples piled in dense regions), 0 is ideal (ct,
  fld_gap) or - (counts and diagnostics, not ranked).
  The PRD clustering subsamples the larger set to the smaller one's size (seeded by --seed).

{{protocols}}

extractors (--extractor): {{extractors}}, or 'module:callable'
  Pretrained networks never download: pass --weights FILE, or put the file in torch's
  hub cache ($TORCH_HOME/hub/checkpoints, default ~/.cache/torch/hub/checkpoints):
    inception  inception_v3_google-0cc3c7bd.pth
               https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth
    vgg16      vgg16-397923af.pth
               https://download.pytorch.org/models/vgg16-397923af.pth
  'inception' needs torchvision, the release built for the installed torch (torch 2.m.p:
  torchvision 0.(m+15).p); without it the error gives the pip command that keeps your torch.
  'random-cnn' is a seeded random network for smoke tests, not for reporting.

examples:
  {PROG} evaluate --real real.npy --fake fake.npy
  {PROG} evaluate --protocol fid --real data/train_images --fake samples/ \\
      --weights ~/weights/pt_inception-2015-12-05-6726825d.pth --json fid.json
  {PROG} evaluate --real feats.npz --real-key real --fake feats.npz --fake-key fake --json out.json
  {PROG} evaluate --real data/train_images --fake samples/ --extractor inception \\
      --weights ~/weights/inception_v3_google-0cc3c7bd.pth --device cuda --plot prd.png
  {PROG} evaluate --real real.pt --fake fake.pt --num-samples 10000 --seed 1
  {PROG} compare --real real.npy --fake ep10.npy ep20.npy ep30.npy --labels 10 20 30 --plot curves.png
  {PROG} features --real data/train_images --extractor inception --weights inception.pth --out real.npz
  {PROG} evaluate --real real.npz --fake samples/ --extractor inception --weights inception.pth
  {PROG} evaluate --real fid_stats.npz --fake samples.npy --only frechet
  {PROG} evaluate --real train.npy --fake fake.npy --test heldout.npy --data-copying --fld --fd-infinity
  {PROG} evaluate --real real.npy --fake fake.npy --real-labels real_y.npy --fake-labels fake_y.txt
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
#: the package's seed range (lightning_prd.functional.engine.inputs.MAX_SEED)
_seed = _int_in(0, MAX_SEED)


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
    p.add_argument(
        "--detector",
        metavar="NAME",
        help="which statistics of an EDM2 reference .pkl --real holds (fid, fd_dinov2); only for such a file",
    )
    p.add_argument(
        "--only",
        choices=("frechet",),
        action=Recorded,
        help="score the Frechet distance alone (what a --real of statistics, a mean and covariance, serves)",
    )
    p.add_argument("--fake-key", metavar="KEY", help="--key for the --fake file(s) only")
    p.add_argument("--json", metavar="OUT", help="write every scalar score and the settings to this JSON file")
    p.add_argument("--plot", metavar="OUT.png", help="write a PNG with the PRD and alpha/beta curves (when available)")
    add_protocol_argument(p)
    p.add_argument(
        "--ball",
        choices=("closed", "open"),
        default="closed",
        action=Recorded,
        help="k-NN balls of precision, recall, density and coverage: closed (d <= r, default) or open "
        "(d < r, as the prdc package: use it to compare with numbers published with prdc)",
    )
    p.add_argument(
        "--extractor",
        metavar="NAME",
        action=Recorded,
        help="feature extractor for images: a registered name or module:callable",
    )
    p.add_argument("--weights", metavar="FILE", help="local weights file of the extractor (never downloaded)")
    p.add_argument(
        "--device", default="auto", metavar="DEV", help="cpu, cuda, cuda:N or auto (default: cuda when available)"
    )
    add_precision_argument(p)
    p.add_argument(
        "--batch-size", type=_positive_int, default=64, metavar="B", help="images per extractor batch (default: 64)"
    )
    p.add_argument(
        "--num-samples",
        type=_positive_int,
        metavar="N",
        action=Recorded,
        help="subsample each set (--real, --fake, --test; labels alike) to at most N samples, without replacement",
    )
    p.add_argument(
        "--seed",
        type=_seed,
        default=0,
        metavar="S",
        help=f"seed of subsampling and of {', '.join(f.flag for f in switch_families() if f.cli.seeded)}, "
        "0 to 2**63 - 1 (default: 0)",
    )
    p.add_argument(
        "--test",
        metavar="PATH",
        help=f"held-out real samples the model never saw, for {' and '.join(held_out_flags())} (--real is then "
        "the training set): a features file or image folder, read as --real is",
    )
    p.add_argument("--test-key", metavar="KEY", help="--key for the --test file only")
    add_family_flags(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.add_argument("--debug", action="store_true", help="show the full traceback of errors")


def _add_per_class(p: argparse.ArgumentParser) -> None:
    """``evaluate``'s per-class scores: the class of each real and generated sample."""
    p.add_argument(
        "--real-labels",
        metavar="PATH",
        help="the class of each --real sample (integers; .npy, .npz, .pt or .txt): adds a table of precision, "
        "recall, density, coverage and Frechet distance per class and names the class of lowest coverage; "
        "needs --fake-labels",
    )
    p.add_argument(
        "--fake-labels",
        metavar="PATH",
        help="the class each --fake sample was generated for (the same forms); needs --real-labels",
    )


FEATURES_EPILOG = f"""\
output:
  A .npz, which --real of evaluate and compare reads back (any file name):
    features       float32 [N, D], the embedded samples in the order read (a folder: sorted paths)
    provenance     JSON: format "lightning-prd/features", extractor, num_samples, num_features,
                   weights_sha256 (of --weights), preprocessing (input size, normalisation, resize)
                   and version (of lightning-prd), where known; cache (the extractor's cache key)
    sample_sha256  uint8 [N, 32]: the SHA-256 of each row's sample
  PRDCallback(real=...) reads it too; placed in PRDCallback(cache_dir=...), it serves the cache when
  the callback's extractor, its weights and settings, the device type and the torch version are
  those of this run and it holds every real sample the callback reads.
  evaluate --extractor must then name the same network (aliases resolved), which embeds --fake.
  The file is written under a temporary name and renamed over --out, so a reader never sees a part
  of it; --out may not be an input (another name for it, a hard or symbolic link, included).
  Progress bar on stderr unless --quiet or stderr is not a terminal. Bad input: exit status 1.

inputs (--real):
  folder/            PNG/JPEG images, searched recursively
  .npy / .npz / .pt  images [N, C, H, W] (uint8 0..255 or float 0..1); --key names the entry
                     or vectors [N, D] with --extractor identity (or your own module:callable)
  VIRTUAL_*.npz      a guided-diffusion reference batch (arr_0 uint8 [N, H, W, 3]), by content
  A plain .npy of features needs no features run: --real of evaluate and compare and
  PRDCallback(real=...) read it as it is.

examples:
  {PROG} features --real data/train_images --extractor inception --weights inception.pth --out real.npz
  {PROG} features --real VIRTUAL_imagenet64_labeled.npz --extractor dinov2 --out ref.npz --num-samples 5000
"""


def _add_features(sub: Any, fmt: Any) -> None:
    """The ``features`` subcommand: embed a set once, write a features file with provenance."""
    p = sub.add_parser(
        "features",
        help="embed a set once and write a features file with its provenance",
        formatter_class=fmt,
        epilog=FEATURES_EPILOG,
        description="Embed the samples of --real with --extractor (images with an image extractor, vectors with "
        "identity) and write their features, with the extractor, its weights' SHA-256 and the preprocessing, to --out.",
    )
    p.add_argument(
        "--real",
        required=True,
        metavar="PATH",
        help="the samples: an image folder or a file of images, or a file of vectors [N, D] (--extractor identity)",
    )
    p.add_argument(
        "--extractor", required=True, metavar="NAME", help="feature extractor: a registered name or module:callable"
    )
    p.add_argument("--weights", metavar="FILE", help="local weights file of the extractor (never downloaded)")
    p.add_argument("--out", required=True, metavar="FILE.npz", help="the features file to write (.npz)")
    p.add_argument("--key", metavar="KEY", help="array name inside a .npz / tensor name inside a .pt dict of images")
    p.add_argument(
        "--num-samples", type=_positive_int, metavar="N", help="embed a subsample of at most N, without replacement"
    )
    p.add_argument("--seed", type=_seed, default=0, metavar="S", help="seed of the subsample (default: 0)")
    p.add_argument(
        "--batch-size", type=_positive_int, default=64, metavar="B", help="images per extractor batch (default: 64)"
    )
    p.add_argument(
        "--device", default="auto", metavar="DEV", help="cpu, cuda, cuda:N or auto (default: cuda when available)"
    )
    add_precision_argument(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--debug", action="store_true", help="show the full traceback of errors")
    p.set_defaults(real_key=None, detector=None, only=None)  # read by the loader evaluate shares


def build_parser() -> argparse.ArgumentParser:
    """The ``lightning-prd`` argument parser (subcommands ``evaluate``, ``compare`` and ``runs``)."""
    from lightning_prd.features import available_extractors

    load_entry_points()

    epilog = (
        EPILOG.replace("{extractors}", ", ".join(available_extractors()))
        .replace("{protocols}", protocols_epilog())
        .replace("{scores}", scores_epilog())
    )
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog=PROG,
        formatter_class=fmt,
        epilog=epilog,
        description="Fidelity and diversity of generated samples: precision, recall, density, coverage, "
        "PRD, alpha-precision/beta-recall, authenticity and the Frechet distance, "
        "from saved features or image folders.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{evaluate,compare,features,runs}")
    ev = sub.add_parser(
        "evaluate",
        help="score one generated set against the real set",
        formatter_class=fmt,
        epilog=epilog,
        description="Score the generated set --fake against the real set --real and print a table.",
    )
    _add_common(ev, many_fakes=False)
    _add_per_class(ev)
    cmp = sub.add_parser(
        "compare",
        help="score several generated sets against one real set",
        formatter_class=fmt,
        epilog=epilog,
        description="Score each --fake set against --real: one table row per set, curves overlaid in --plot.",
    )
    _add_common(cmp, many_fakes=True)
    cmp.set_defaults(real_labels=None, fake_labels=None)  # per-class scores: evaluate only
    _add_features(sub, fmt)
    add_runs_parser(sub, fmt)
    return parser
