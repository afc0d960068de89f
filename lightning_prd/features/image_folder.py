"""A folder of images as the package reads it (``lightning-prd evaluate --real DIR``, ``PRDCallback(real=DIR)``).

**Rule.** The images are the ``.png``, ``.jpg`` and ``.jpeg`` files below the folder (recursively), in
sorted path order, each converted to RGB and given as uint8 ``[3, H, W]``. A batch whose images share
one size is stacked to uint8 ``[B, 3, H, W]``; a batch of mixed sizes is resized to the extractor's
``input_size`` (float in [0, 1], bilinear, antialiased), and without an ``input_size`` it is refused.
Reading needs Pillow (the ``images`` extra). Each caller words the errors for its own argument: it
passes ``unreadable(path, error)`` and ``mixed(sizes)``, which return the exception to raise.

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
    """The images of ``files`` in batches of ``batch_size`` (module docstring); ``mixed(sizes)`` is raised
    for a batch of mixed sizes when ``size`` is None (``sizes``: e.g. ``"32x32 and 64x64"``)."""
    import torch.nn.functional as F

    for start in range(0, len(files), batch_size):
        images = [read_image(p, unreadable) for p in files[start : start + batch_size]]
        shapes = sorted({tuple(im.shape[1:]) for im in images})
        if len(shapes) == 1:
            yield torch.stack(images)
            continue
        if size is None:
            raise mixed(" and ".join(f"{h}x{w}" for h, w in shapes[:2]))
        resized = [
            F.interpolate(im[None].float() / 255, size=size, mode="bilinear", align_corners=False, antialias=True)
            for im in images
        ]
        yield torch.cat(resized).clamp(0.0, 1.0)
