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

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> image_files(Path(tempfile.mkdtemp()))
    []
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def image_files(folder: Path) -> List[Path]:
    """The image files below ``folder``, in sorted path order."""
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


def read_image(path: Path, unreadable: Callable[[Path, Exception], Exception]) -> Tensor:
    """One image as uint8 ``[3, H, W]``; raises ``unreadable(path, error)`` when Pillow cannot read it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            array = np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError) as err:
        raise unreadable(path, err) from err
    return torch.from_numpy(array.copy()).permute(2, 0, 1)


def image_batches(
    files: Sequence[Path],
    batch_size: int,
    size: Optional[Tuple[int, int]],
    *,
    unreadable: Callable[[Path, Exception], Exception],
    mixed: Callable[[str], Exception],
) -> Iterator[Tensor]:
    """The images of ``files`` in batches of at most ``batch_size`` consecutive images of one size (module
    docstring). ``size`` is the extractor's ``input_size``; when it is None, ``mixed(sizes)`` is raised at the
    first image whose size differs from the first one's (``sizes``: e.g. ``"32x32 and 64x64"``)."""
    run: List[Tensor] = []
    first: Optional[Tuple[int, ...]] = None
    for path in files:
        image = read_image(path, unreadable)
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
