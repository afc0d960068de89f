"""Peak memory per image of each built-in extractor, from 256 px uint8 images, on this CPU.

Each row runs in a fresh process: the extractor is built (random weights: nothing is downloaded), run
once at ``--small`` images (the warm-up: weights, lazy buffers, the convolution primitives), then at
``--large`` images, both under ``torch.no_grad()`` in eval mode. The peak resident set (``ru_maxrss``)
after each run gives the memory per image as the slope ``(peak(large) − peak(small)) / (large − small)``
in MiB. Activations dominate it; a GPU holds about the same tensors (plus its convolution workspaces),
so the slope sizes the default extraction batch (``default_batch_size``) of each extractor class.

Rows:

* ``fid-inception``: ``FIDInceptionFeatures(random_init=True)`` (299 px, ``resize="tf1"``);
* ``vgg16``: ``VGG16Features(random_init=True)`` (224 px); NVlabs' TorchScript ``vgg16.pt``
  (``vgg16-nvlabs``) runs the same network at the same size;
* ``dinov2``: ``DINOv2Features(arch="vitl14", random_init=True)`` from a stand-in hub repository written to a
  temporary folder whose ``dinov2_vitl14`` is a plain-torch ViT of DINOv2 ViT-L/14's shape (24 blocks, width
  1,024, 16 heads, MLP 4,096, 224 px in 14 px patches);
* ``clip``: ``CLIPFeatures(random_init=True)`` (ViT-L-14-336-quickgelu) when open_clip is installed, else
  :func:`~lightning_prd.features.clip.clip_preprocess` and a plain-torch ViT of that tower's shape
  (24 blocks, width 1,024, 16 heads, 336 px in 14 px patches); the row says which.

Usage::

    PYTHONPATH=. python benchmarks/bench_extractor_memory.py            # every row
    PYTHONPATH=. python benchmarks/bench_extractor_memory.py vgg16 --small 2 --large 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable, Dict

import torch
from torch import nn

ROWS = ("fid-inception", "vgg16", "dinov2", "clip")
#: images per run: (small, large) per row (the ViTs need fewer for a clear slope at their cost per image)
SIZES = {"fid-inception": (2, 16), "vgg16": (2, 12), "dinov2": (2, 10), "clip": (1, 5)}

VIT = textwrap.dedent(
    '''
    import torch
    from torch import nn


    class ViT(nn.Module):
        """A plain ViT: patch embedding, class token, ``depth`` pre-norm blocks, the normalised class token."""

        def __init__(self, size=224, patch=14, dim=1024, depth=24, heads=16, mlp=4096):
            super().__init__()
            self.embed_dim = dim
            self.patch_embed = nn.Conv2d(3, dim, patch, patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, (size // patch) ** 2 + 1, dim))
            layer = dict(dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
            self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(dim, heads, mlp, **layer) for _ in range(depth))
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            tokens = self.patch_embed(x).flatten(2).transpose(1, 2)
            tokens = torch.cat([self.cls_token.expand(len(tokens), -1, -1), tokens], 1) + self.pos_embed
            for block in self.blocks:
                tokens = block(tokens)
            return self.norm(tokens)[:, 0]


    def dinov2_vitl14(*, pretrained=True, **kwargs):
        return ViT()
    '''
)


def _dinov2() -> Callable[[torch.Tensor], Any]:
    from lightning_prd.features.dinov2 import DINOv2Features

    hub = Path(tempfile.mkdtemp(prefix="dinov2_hub"))
    (hub / "hubconf.py").write_text(VIT)
    return DINOv2Features(arch="vitl14", repo_dir=str(hub), random_init=True, seed=0)


def _clip() -> Callable[[torch.Tensor], Any]:
    if importlib.util.find_spec("open_clip") is not None:
        from lightning_prd.features.clip import CLIPFeatures

        return CLIPFeatures(random_init=True, seed=0)
    from lightning_prd.features.clip import clip_preprocess

    namespace: Dict[str, Any] = {}
    exec(VIT, namespace)  # the same ViT as the DINOv2 row, at CLIP's 336 px
    tower: nn.Module = namespace["ViT"](size=336).eval()
    return lambda x: tower(clip_preprocess(x, (336, 336)))


def _build(name: str) -> Callable[[torch.Tensor], Any]:
    if name == "fid-inception":
        from lightning_prd.features.fid_inception import FIDInceptionFeatures

        return FIDInceptionFeatures(random_init=True)
    if name == "vgg16":
        from lightning_prd.features.vgg import VGG16Features

        return VGG16Features(random_init=True)
    if name == "dinov2":
        return _dinov2()
    if name == "clip":
        return _clip()
    raise ValueError(f"Expected a row among {ROWS}, but got {name!r}")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure(name: str, small: int, large: int) -> Dict[str, Any]:
    """One row, in this process (run each row in a fresh one: ``ru_maxrss`` never goes down)."""
    torch.manual_seed(0)
    net = _build(name)
    if isinstance(net, nn.Module):
        net.eval()
    images = {n: torch.randint(0, 256, (n, 3, 256, 256), dtype=torch.uint8) for n in (small, large)}
    peaks = {}
    with torch.no_grad():
        for n in (small, large):
            net(images[n])
            peaks[n] = _peak_mib()
    per_image = (peaks[large] - peaks[small]) / (large - small)
    stand_in = name == "clip" and importlib.util.find_spec("open_clip") is None
    return {
        "extractor": name + (" (stand-in ViT-L/14-336)" if stand_in else ""),
        "small": small,
        "large": large,
        "peak_small_mib": round(peaks[small], 1),
        "peak_large_mib": round(peaks[large], 1),
        "mib_per_image": round(per_image, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", default=list(ROWS), help=f"rows to run, of {ROWS}")
    parser.add_argument("--small", type=int, default=None, help="images in the warm-up run")
    parser.add_argument("--large", type=int, default=None, help="images in the measured run")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a row in this process
    args = parser.parse_args()
    for name in args.rows:
        small, large = SIZES.get(name, (2, 10))
        small, large = args.small or small, args.large or large
        if args.one:
            print(json.dumps(measure(name, small, large)))
            continue
        cmd = [sys.executable, __file__, name, "--one", "--small", str(small), "--large", str(large)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        row = json.loads(out)
        print(
            f"{row['extractor']:<34} {row['mib_per_image']:8.2f} MiB/image  "
            f"(peak {row['peak_small_mib']:.0f} MiB at {small}, {row['peak_large_mib']:.0f} MiB at {large})",
            flush=True,
        )


if __name__ == "__main__":
    main()
