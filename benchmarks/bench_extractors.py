"""Time per 100 images of each feature extractor beside its reference implementation, on this CPU.

Run with the reference packages installed (torch-fidelity, pytorch-fid, clean-fid need torchvision), e.g.
``/tmp/tvenv/bin/python benchmarks/bench_extractors.py``. Every network gets random weights saved in the
reference's own file layout in a temporary folder: nothing is downloaded, and the timings do not depend
on the weights' values.

``CASES`` is the table: a name -> :class:`Case` with two factories, ``ours(setup)`` and
``reference(setup)``, each returning a callable that maps a uint8 batch ``[B, 3, H, W]`` to features.
A reference that takes another input form converts inside its callable, as its own pipeline would
(that conversion is part of its time). To add an extractor, add a row; :class:`Setup` makes shared
weights files and objects once (``setup.file(key, make)``, ``setup.shared(key, make)``).

The Inception rows:

* ``fid-inception/tf1``: ``FIDInceptionFeatures(resize="tf1")`` against torch-fidelity's
  ``FeatureExtractorInceptionV3`` (TF1 bilinear resize inside both);
* ``fid-inception/pytorch-fid``: ``resize="pytorch-fid"`` against pytorch-fid's ``InceptionV3([3])``,
  fed ``x / 255`` as its ``ToTensor`` does;
* ``fid-inception/clean``: ``resize="clean"`` against clean-fid's pipeline: ``make_resizer("PIL", False,
  "bicubic", (299, 299))`` image by image on the HWC array (what its ``ResizeDataset`` does, here without
  DataLoader workers), then ``InceptionV3W(resize_inside=False)``. clean-fid's network is NVlabs'
  TorchScript ``inception-2015-12-05.pt``; a TorchScript trace of the same random network stands in
  for it, so the network part costs the same as ours and the difference is the resize.

The other rows (``bench_extractors_rows.py``):

* ``vgg16/tf1``: ``VGG16Features(resize="tf1")`` against torch-fidelity's ``FeatureExtractorVGG16``,
  both given one random torchvision-layout ``vgg16-397923af.pth`` (torch-fidelity's download disabled);
* ``dinov2/edm2``: ``DINOv2Features(arch="vitl14", resize="edm2", random_init=True)`` against EDM2's
  ``DINOv2Detector`` steps (torch resize mode) on the same seeded ViT-L/14 from the local DINOv2 hub
  repository (``--dinov2-repo``; EDM2 is not installable);
* ``clip/cmmd`` and ``clip/open_clip``: ``CLIPFeatures(arch="ViT-L-14-336-quickgelu", random_init=True)``
  with ``resize="cmmd"`` / ``"open_clip"`` against the CMMD code's steps (PIL crop and resize, ``/ 255``,
  its torch bicubic pass, CLIP normalisation, unit norm) and against open_clip's own model and
  evaluation transform on PIL images; the reference network is ``open_clip.create_model_and_transforms``
  under the same seed.

Each row reports seconds per 100 images (the fastest of ``--repeats`` timed runs of ``--images`` images
in batches of ``--batch``, after one warm-up batch) for ours and for the reference, and their ratio,
at each ``--sizes`` input side, with the largest feature difference seen (relative to the reference's
range) as a check that both compute the same thing. The timed runs alternate, ours then the
reference, so a change of load in between slows both sides alike. The ViT-L rows cost seconds per
image on a CPU: they run ``--vit-images`` images (default: each row's own count, ``Case.images``) in
one batch, fastest of ``--vit-repeats``, and warm up once per row on one image (the network's input
size does not depend on the image size); the output says so on each such row. The header gives the
CPU model, whether it has AVX512-BF16, torch's version and thread count and the load average, and
each row ends with the load average after it: other processes on the machine make the numbers noisy.

Usage::

    /tmp/tvenv/bin/python benchmarks/bench_extractors.py                         # 32, 299 and 512 px
    /tmp/tvenv/bin/python benchmarks/bench_extractors.py --sizes 64 --images 50 --cases fid-inception/tf1
    /tmp/tvenv/bin/python benchmarks/bench_extractors.py --cases dinov2/edm2 --vit-images 4 --dinov2-repo DIR
"""

import argparse
import os
import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import bench_extractors_rows as rows
import torch

Features = Callable[[torch.Tensor], torch.Tensor]


def header() -> str:
    """CPU model, AVX512-BF16 / AMX flags, torch version and threads, load average."""
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model in ("unknown CPU", platform.processor()):
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    bf16 = "yes" if "avx512_bf16" in flags else ("no" if flags else "?")
    amx = "yes" if "amx_bf16" in flags else ("no" if flags else "?")
    load = _load()
    return (
        f"{model}; {os.cpu_count()} logical CPUs; AVX512-BF16 {bf16}, AMX {amx}; torch {torch.__version__} "
        f"(CPU capability {torch.backends.cpu.get_cpu_capability()}), {torch.get_num_threads()} threads; "
        f"load average {load}"
    )


class Setup:
    """Shared state of the rows: a temporary folder and weights files made once."""

    def __init__(self, folder: Path, dinov2_repo: Path) -> None:
        self.folder, self.dinov2_repo = folder, dinov2_repo
        self._files: Dict[str, Path] = {}
        self._objects: Dict[str, Any] = {}

    def file(self, key: str, make: Callable[[Path], None]) -> Path:
        if key not in self._files:
            path = self.folder / key
            make(path)
            self._files[key] = path
        return self._files[key]

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._objects:
            self._objects[key] = make()
        return self._objects[key]


@dataclass(frozen=True)
class Case:
    ours: Callable[[Setup], Features]
    reference: Callable[[Setup], Features]
    note: str = ""
    images: Optional[int] = None  # a row's own image count (slow rows: one batch, one warm-up per row)


# ---------------------------------------------------------------------------- the Inception rows
def _fid_state(setup: Setup) -> Dict[str, torch.Tensor]:
    from lightning_prd.features.fid_inception import FIDInceptionFeatures

    path = setup.file("fid_state.pth", lambda p: torch.save(FIDInceptionFeatures(random_init=True).net.state_dict(), p))
    return torch.load(path)


def _pytorch_fid_file(setup: Setup) -> Path:
    return setup.file("pt_inception-2015-12-05-6726825d.pth", lambda p: torch.save(_fid_state(setup), p))


def _torch_fidelity_file(setup: Setup) -> Path:
    def make(path: Path) -> None:
        torch.save({k: v for k, v in _fid_state(setup).items() if not k.endswith("num_batches_tracked")}, path)

    return setup.file("weights-inception-2015-12-05-6726825d.pth", make)


def _ours(resize: str) -> Callable[[Setup], Features]:
    def factory(setup: Setup) -> Features:
        from lightning_prd.features.fid_inception import FIDInceptionFeatures

        return FIDInceptionFeatures(_pytorch_fid_file(setup), resize=resize)

    return factory


def _torch_fidelity(setup: Setup) -> Features:
    from torch_fidelity.feature_extractor_inceptionv3 import FeatureExtractorInceptionV3

    net = FeatureExtractorInceptionV3(
        "inception-v3-compat", ["2048"], feature_extractor_weights_path=str(_torch_fidelity_file(setup))
    )
    return lambda x: net(x)[0]


def _pytorch_fid(setup: Setup) -> Features:
    from pytorch_fid import inception

    original = inception.load_state_dict_from_url
    inception.load_state_dict_from_url = lambda *args, **kwargs: torch.load(_pytorch_fid_file(setup))
    try:
        net = inception.InceptionV3([3]).eval()
    finally:
        inception.load_state_dict_from_url = original
    return lambda x: net(x.float() / 255)[0].flatten(1)


def _clean_fid(setup: Setup) -> Features:
    from cleanfid.inception_torchscript import InceptionV3W
    from cleanfid.resize import make_resizer

    from lightning_prd.features.fid_inception import FIDInceptionFeatures

    class Layers(torch.nn.Module):
        def __init__(self, net: torch.nn.Module) -> None:
            super().__init__()
            self.net = net

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)[:, :, None, None]

    class StandIn(torch.nn.Module):
        def __init__(self, layers: torch.nn.Module) -> None:
            super().__init__()
            self.layers = layers

        def forward(self, img: torch.Tensor, return_features: bool = False) -> torch.Tensor:
            return self.layers(img)

    def make(path: Path) -> None:
        net = FIDInceptionFeatures(_pytorch_fid_file(setup)).net.eval()
        layers = torch.jit.trace(Layers(net), torch.zeros(1, 3, 299, 299))
        torch.jit.save(torch.jit.script(StandIn(layers)), str(path))

    path = setup.file("inception-2015-12-05.pt", make)
    model = InceptionV3W(str(path.parent), download=False, resize_inside=False).eval()
    resize = make_resizer("PIL", False, "bicubic", (299, 299))

    def features(x: torch.Tensor) -> torch.Tensor:
        batch = [torch.from_numpy(resize(img.permute(1, 2, 0).numpy())).permute(2, 0, 1) for img in x]
        return model(torch.stack(batch))

    return features


CASES: Dict[str, Case] = {
    "fid-inception/tf1": Case(_ours("tf1"), _torch_fidelity, "torch-fidelity FeatureExtractorInceptionV3"),
    "fid-inception/pytorch-fid": Case(_ours("pytorch-fid"), _pytorch_fid, "pytorch-fid InceptionV3([3])"),
    "fid-inception/clean": Case(_ours("clean"), _clean_fid, "clean-fid resize + InceptionV3W (traced stand-in)"),
    "vgg16/tf1": Case(rows.vgg_ours, rows.vgg_torch_fidelity, "torch-fidelity FeatureExtractorVGG16 (fc2_relu)"),
    "dinov2/edm2": Case(rows.dinov2_ours, rows.dinov2_edm2, "EDM2 DINOv2Detector torch-mode steps, ViT-L/14", 3),
    "clip/cmmd": Case(rows.clip_ours("cmmd"), rows.clip_cmmd, "CMMD code's steps, ViT-L/14-336 (open_clip net)", 2),
    "clip/open_clip": Case(
        rows.clip_ours("open_clip"), rows.clip_open_clip, "open_clip model + eval transform on PIL, ViT-L/14-336", 2
    ),
}


# ---------------------------------------------------------------------------- timing
def time_pair(
    fns: Tuple[Features, Features], images: torch.Tensor, batch: int, repeats: int, warmup: int
) -> List[Tuple[float, torch.Tensor]]:
    """Seconds per 100 images of each of ``fns`` (fastest of ``repeats`` runs over ``images``, the runs of the
    two alternating, after a warm-up call of each on the first ``warmup`` images when ``warmup > 0``) and the
    features of each one's last run."""
    best, out = [float("inf")] * len(fns), [torch.empty(0)] * len(fns)
    with torch.no_grad():
        for fn in fns if warmup else ():
            fn(images[:warmup])  # first-call allocations and kernel selection
        for _ in range(repeats):
            for k, fn in enumerate(fns):
                start = time.perf_counter()
                out[k] = torch.cat([fn(images[i : i + batch]) for i in range(0, len(images), batch)])
                best[k] = min(best[k], time.perf_counter() - start)
    return [(100 * t / len(images), f) for t, f in zip(best, out)]


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def run(names: List[str], sizes: List[int], n: int, batch: int, repeats: int, vit: Tuple[int, int], repo: Path) -> None:
    print(header())
    print(f"{n} images per run, batches of {batch}, fastest of {repeats} (unless a row says); s per 100 images\n")
    print(f"{'case':28s} {'size':>5s} {'ours':>9s} {'reference':>10s} {'ref/ours':>9s} {'max|diff|/range':>16s}")
    with tempfile.TemporaryDirectory() as folder:
        setup = Setup(Path(folder), repo)
        for name in names:
            case = CASES[name]
            slow = case.images is not None
            count = (vit[0] or case.images or 1) if slow else n
            size_batch, size_repeats = (count, vit[1]) if slow else (batch, repeats)
            try:
                ours, reference = case.ours(setup), case.reference(setup)
            except (ImportError, FileNotFoundError) as err:
                print(f"{name:28s} skipped: {err}")
                continue
            for i, size in enumerate(sizes):
                g = torch.Generator().manual_seed(size)
                images = torch.randint(0, 256, (count, 3, size, size), dtype=torch.uint8, generator=g)
                warmup = (1 if i == 0 else 0) if slow else size_batch
                (t_ours, f_ours), (t_ref, f_ref) = time_pair(
                    (ours, reference), images, size_batch, size_repeats, warmup
                )
                span = float(f_ref.max() - f_ref.min()) or 1.0
                diff = float((f_ours - f_ref).abs().max()) / span
                print(f"{name:28s} {size:5d} {t_ours:9.2f} {t_ref:10.2f} {t_ref / t_ours:9.2f} {diff:16.2e}")
            print(f"{'':28s} reference: {case.note}; load average after the row {_load()}")
            if slow:
                print(
                    f"{'':28s} {count} image(s) per size in one batch, fastest of {vit[1]}, one 1-image warm-up per row"
                )
            del ours, reference


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[32, 299, 512])
    parser.add_argument("--images", type=int, default=20, help="images per timed run")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--vit-images", type=int, default=0, help="images of the ViT-L rows (0: each row's own)")
    parser.add_argument("--vit-repeats", type=int, default=2, help="timed runs of the ViT-L rows")
    parser.add_argument(
        "--dinov2-repo",
        type=Path,
        default=Path(
            os.environ.get("LIGHTNING_PRD_DINOV2_REPO") or torch.hub.get_dir() + "/facebookresearch_dinov2_main"
        ),
        help="local clone of facebookresearch/dinov2 (default: $LIGHTNING_PRD_DINOV2_REPO, else torch's hub cache)",
    )
    args = parser.parse_args(argv)
    vit = (args.vit_images, args.vit_repeats)
    run(args.cases, args.sizes, args.images, args.batch, args.repeats, vit, args.dinov2_repo)


if __name__ == "__main__":
    main()
