"""A folder of real images as the callback reads it: the files, in order, and this rank's block of them.

**Rule.** The images are the ``.png``, ``.jpg`` and ``.jpeg`` files below the folder (recursively), in
sorted path order; ``num_real`` keeps the first ones. Rank ``r`` of ``W`` decodes only its block
(:func:`~lightning_prd.callback.sharding.rank_shard`), in batches of ``batch_size``, each image
converted to RGB and given as uint8 ``[B, 3, H, W]``, a batch holding consecutive images of one size
(:mod:`~lightning_prd.features.image_folder`, as ``lightning-prd evaluate`` reads a folder): each image
is resized from its own size by the extractor, so the features do not depend on ``batch_size``; images
of different sizes raise when the extractor declares no ``input_size``. Reading needs Pillow
(``pip install pillow``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional, Sequence, Tuple

from torch import Tensor

from lightning_prd.callback.sharding import rank_shard
from lightning_prd.features.image_folder import image_batches


def require_pillow(folder: str, name: str = "real") -> None:
    try:
        import PIL.Image  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"Reading the image folder of argument `{name}` ({folder}) needs Pillow: pip install pillow"
        ) from err


def unreadable_image(path: Path, err: Exception, name: str = "real") -> ValueError:
    """The one-line error of an image file of argument ``name`` that cannot be read, naming the file."""
    reason = str(err).splitlines()[0] if str(err) else type(err).__name__
    return ValueError(f"Expected argument `{name}` to be a folder of readable images, but {path}: {reason}")


def image_chunks(
    files: Sequence[Path],
    num_real: Optional[int],
    batch_size: int,
    rank: int,
    world: int,
    size: Optional[Tuple[int, int]],
    folder: str,
    name: str = "real",
) -> Iterator[Tensor]:
    """This rank's images of ``files`` (the first ``num_real``), in batches (module docstring)."""
    mine = rank_shard(min(len(files), num_real or len(files)), rank, world)

    def mixed(sizes: str) -> ValueError:
        return ValueError(
            f"Expected the images of argument `{name}` ({folder}) to share one size, but they hold {sizes} and "
            "`feature_extractor` declares no input_size to resize them to"
        )

    yield from image_batches(
        files[mine.start : mine.stop],
        batch_size,
        size,
        unreadable=lambda path, err: unreadable_image(path, err, name),
        mixed=mixed,
    )
