"""A folder of images as the package reads it (``lightning-prd evaluate --real DIR``, ``lightning-prd features``,
``PRDCallback(real=DIR)``).

**Rule.** The images are the ``.png``, ``.jpg`` and ``.jpeg`` files below the folder (recursively), in
sorted path order, each converted to RGB and given as uint8 ``[3, H, W]`` at its own size. A batch is
the next run of at most ``batch_size`` consecutive images of one size, stacked to uint8 ``[B, 3, H, W]``:
a change of size starts a new batch. So the extractor resizes every image from its own size with its
own resize (a protocol's: TF1 bilinear, torch bilinear, Pillow bicubic), and the features, and every
score, are the same at every batch size. Images of different sizes are refused when the extractor
declares no ``input_size`` (the size its network runs at). Reading needs Pillow (``pip install
pillow``). Each caller words the errors for its own argument: it passes ``unreadable(path, error)`` and
``mixed(sizes)``, which return the exception to raise.

**16-bit grayscale** PNGs (Pillow modes ``I;16`` and ``I``) are read at their true value: ``v`` in
0..65535 becomes ``round(v / 257)`` in 0..255 (65535 is white, 32768 mid grey 128), with one warning per
folder read: torch-fidelity and clean-fid read such a file through Pillow's ``convert("RGB")``, which
saturates it (every value above 255 reads as white), so their scores of that folder differ.

**Pillow's decompression-bomb limit** holds: a file declaring more pixels than
``PIL.Image.MAX_IMAGE_PIXELS`` (Pillow's ``DecompressionBombWarning``, and its ``DecompressionBombError`` at
twice that) is refused through ``unreadable``, naming the file and its declared size; raise
``PIL.Image.MAX_IMAGE_PIXELS`` (None: no limit) to read such images on purpose. :func:`check_headers` reads
every file's header only (no pixel is decoded), so a file that is no image, or a bomb, is refused before
any is decoded; a file damaged past its header is named when it is read.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> image_files(Path(tempfile.mkdtemp()))
    []
"""

from __future__ import annotations

import re
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
#: Pillow's modes of a 16-bit grayscale PNG (``I`` in older Pillow versions)
WIDE_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I")
Unreadable = Callable[[Path, Exception], Exception]


def image_files(folder: Path) -> List[Path]:
    """The image files below ``folder``, in sorted path order."""
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


@contextmanager
def _bomb_limit() -> Iterator[Any]:
    """Pillow inside, with its ``DecompressionBombWarning`` raised as an error (yields ``PIL.Image``)."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        yield Image


def _reason(err: Exception, path: Path) -> Exception:
    """Pillow's decompression-bomb refusals reworded: the declared size and how to lift the limit."""
    from PIL import Image

    if not isinstance(err, (Image.DecompressionBombError, Image.DecompressionBombWarning)):
        return err
    count = re.search(r"\((\d+) pixels\)", str(err))  # Pillow's "Image size (N pixels) exceeds limit of ..."
    declared = f"{int(count.group(1)):,} pixels" if count else "more pixels"
    try:
        with open(path, "rb") as handle:
            head = handle.read(24)
        if head[:8] == b"\x89PNG\r\n\x1a\n":
            declared = f"{int.from_bytes(head[16:20], 'big')}x{int.from_bytes(head[20:24], 'big')} pixels"
    except OSError:
        pass
    return ValueError(
        f"the file declares {declared}, past Pillow's decompression-bomb limit (PIL.Image.MAX_IMAGE_PIXELS = "
        f"{Image.MAX_IMAGE_PIXELS:,} pixels; raise it, or set it to None, to read such images on purpose)"
    )


def check_headers(files: Sequence[Path], unreadable: Unreadable) -> None:
    """Open every file's header with Pillow, decoding no pixel; raises ``unreadable(path, error)`` at the first
    file that is no image Pillow reads or that declares more pixels than its decompression-bomb limit."""
    with _bomb_limit() as Image:
        for path in files:
            try:
                with Image.open(path):
                    pass
            except Exception as err:  # noqa: BLE001 - any refusal names the file
                raise unreadable(path, _reason(err, path)) from err


def read_image(path: Path, unreadable: Unreadable, wide: Optional[Callable[[Path], None]] = None) -> Tensor:
    """One image as uint8 ``[3, H, W]``; raises ``unreadable(path, error)`` when Pillow cannot read it or it
    passes the decompression-bomb limit. A 16-bit grayscale image is scaled to 0..255 (``round(v / 257)``)
    and reported to ``wide(path)``."""
    with _bomb_limit() as Image:
        try:
            with Image.open(path) as image:
                if image.mode in WIDE_MODES:
                    values = np.asarray(image).astype(np.float64)
                    array = np.rint(np.clip(values, 0, 65535) / 257).astype(np.uint8)
                    array = np.repeat(array[:, :, None], 3, axis=2)
                    if wide is not None:
                        wide(path)
                else:
                    array = np.asarray(image.convert("RGB"))
        except Exception as err:  # noqa: BLE001 - any refusal names the file
            raise unreadable(path, _reason(err, path)) from err
    return torch.from_numpy(array.copy()).permute(2, 0, 1)


def _warn_wide(path: Path) -> None:
    warnings.warn(
        f"{path} is a 16-bit grayscale PNG: read at its true value (0..65535 scaled to 0..255); torch-fidelity and "
        "clean-fid read such images saturated (every value above 255 as white), so their scores of this folder "
        "differ (warned once per folder read)",
        UserWarning,
        stacklevel=4,
    )


def image_batches(
    files: Sequence[Path],
    batch_size: int,
    size: Optional[Tuple[int, int]],
    *,
    unreadable: Unreadable,
    mixed: Callable[[str], Exception],
) -> Iterator[Tensor]:
    """The images of ``files`` in batches of at most ``batch_size`` consecutive images of one size (module
    docstring). ``size`` is the extractor's ``input_size``; when it is None, ``mixed(sizes)`` is raised at the
    first image whose size differs from the first one's (``sizes``: e.g. ``"32x32 and 64x64"``). The first
    16-bit grayscale image warns (module docstring)."""
    run: List[Tensor] = []
    first: Optional[Tuple[int, ...]] = None
    warned: List[Path] = []

    def wide(path: Path) -> None:
        if not warned:
            warned.append(path)
            _warn_wide(path)

    for path in files:
        image = read_image(path, unreadable, wide)
        shape = tuple(image.shape[1:])
        first = shape if first is None else first
        if size is None and shape != first:
            raise mixed(" and ".join(f"{h}x{w}" for h, w in (first, shape)))
        if run and (shape != tuple(run[0].shape[1:]) or len(run) == batch_size):
            yield torch.stack(run)
            run = []
        run.append(image)
    if run:
        yield torch.stack(run)
