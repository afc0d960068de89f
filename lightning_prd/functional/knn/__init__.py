"""Exact blocked Euclidean k-NN: the only place in the package that forms distances.

Every k-NN metric (precision/recall, density/coverage, realism, authenticity, beta-recall)
is a small reduction over three families of tiles of squared distances:

* real x real  -> ``NND_k`` radii of the real samples (diagonal masked, duplicates count at 0),
* fake x fake  -> ``NND_k`` radii of the generated samples,
* real x fake  -> one pass that reduces every tile in both directions (ball membership,
  counts, realism ratios, nearest neighbours, soft ball products).

Distances come from one GEMM per tile, ``||a||^2 + ||b||^2 - 2 a.b``, on data centred by
the real mean and clamped at 0; no ``N x M`` matrix ever exists, the tile size follows a
memory budget (:data:`DEFAULT_BLOCK_BYTES`).

Exactness. The GEMM identity loses accuracy when two points are close compared with their
norms. Every *decision* the metrics take (a k-th neighbour, ``d <= r``, a nearest neighbour,
a realism maximum) is therefore taken on the tile value only when it is farther from the
threshold than a rounding margin (:mod:`.bounds`); pairs inside the margin are recomputed in
float64 from the original (uncentred) rows as ``sum((a - b)^2)``. Radii and nearest distances
are always float64 values of that exact form. The decisions equal those of a float64 oracle,
and an exact copy sits at distance 0. Exact ties (integer-valued features, duplicates) are
decided the same way; a nearest neighbour tied with others is the one of lowest index
(``numpy.argmin``'s rule), so no result depends on the tile layout. float32 features whose
range would leave float32's (squared distances past its maximum, or so small that products
underflow) are tiled in float64 instead (``engine.inputs.fits_range``, decided once per
pass from each column's min and max).

bfloat16 screen. On CPUs that multiply bfloat16 natively, large float32 sets are tiled by one
bfloat16 GEMM per tile (about 4x the float32 rate) with a rigorous, wider rounding interval
(:mod:`.screen`); the candidates it leaves are recomputed in float32 from their differences
before float64 settles the rest. Decisions, radii and nearest neighbours are the same as with
float32 tiles; a cross tile with too many ambiguous pairs is recomputed in float32.

Stages, each a module that calls only those listed before it:

1. :mod:`.lists` - sorted candidate lists: top-k merge, padding, ties by index;
   :mod:`.collectives` - the device a collective on a process group must use (NCCL: this process's GPU).
2. :mod:`.bounds` - rounding intervals of tile values (:class:`.bounds.Bound`) and of blocked sums.
3. :mod:`.screen` - the bfloat16 screen rows and tile; :mod:`.shard` - DDP tile split.
4. :mod:`.points` - point sets (centre, norms, screen rows), their bounds, the pass offset.
5. :mod:`.shapes`, :mod:`.tiling` - tile shapes from the machine's GEMM, and the tile GEMM.
6. :mod:`.exact` - float64 pairs and the rigorous per-row fallback.
7. :mod:`.refine` - exact k-th neighbours from running lists (certain, uncertain, unsafe).
8. :mod:`.self_pass` - ``NND_k`` radii from the tiles on and above the diagonal.
9. :mod:`.members` - the members of a tile's balls; :mod:`.reduction` - the one interface of a
   reduction of the cross tiles (:class:`.reduction.TileReduction`), and the reductions: :mod:`.balls`
   (membership, counts, recall, per-ball minima), :mod:`.realism`, :mod:`.soft` (soft ball products),
   :mod:`.cover` and :mod:`.nearest` (the nearest lists: nearest neighbours, PR-cover), :mod:`.kernel`
   (Gaussian kernel sums), :mod:`.clipped`, :mod:`.smallest`.
10. :mod:`.listing`, :mod:`.deferred` - a cross tile's decisions, its ambiguous pairs listed
    and decided per tile (CPU) or logged on the device and decided after the loop (CUDA: no
    host synchronisation per tile), by every reduction of the pass in turn.
11. :mod:`.cross` - the real x fake pass over a list of reductions.

Beside them, :mod:`.kde` (imports only torch and :mod:`.tiling`'s budget) sums kernel density
estimates over plain float64 tiles for TopP&R, in a low-dimensional projection where no
rounding interval is needed.

Conventions (``DESIGN.md``): ``NND_k(x)`` excludes ``x`` itself but counts exact duplicates;
balls are closed (``d <= r``), or open (``d < r``, as ``prdc``) for the membership of
precision, recall, density and coverage when the cross pass is asked for ``strict``.

Imports: nothing of the package outside ``functional/knn/``.

Example:
    >>> import torch
    >>> x = torch.tensor([[0.0], [1.0], [3.0]])
    >>> self_knn(prepare(x, x.double().mean(0), torch.float32), [2])[2].tolist()
    [9.0, 4.0, 9.0]
"""

from lightning_prd.functional.knn.cross import CrossResult, cross_pass
from lightning_prd.functional.knn.exact import exact_sq_dist
from lightning_prd.functional.knn.points import PointSet, prepare, with_centred
from lightning_prd.functional.knn.self_pass import self_knn, self_radii
from lightning_prd.functional.knn.shard import Shard, current_shard
from lightning_prd.functional.knn.tiling import DEFAULT_BLOCK_BYTES, ieee_float32, tile_progress

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "CrossResult",
    "PointSet",
    "Shard",
    "cross_pass",
    "current_shard",
    "exact_sq_dist",
    "ieee_float32",
    "prepare",
    "self_knn",
    "self_radii",
    "tile_progress",
    "with_centred",
]
