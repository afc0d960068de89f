"""Reduced-precision float32 matmul settings do not reach the k-NN engine's tiles.

Lightning suggests ``torch.set_float32_matmul_precision("high" | "medium")`` on GPUs with tensor
cores (TF32 products); oneDNN can run float32 products as bfloat16 passes on CPUs. The tiles'
rounding bounds assume IEEE float32, so a pass runs its products in IEEE float32 whatever the
caller set (``knn.ieee_float32``) and restores the setting after.
"""

import pytest
import torch

from lightning_prd.functional import generative_metrics
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import ieee_float32, tiling
from lightning_prd.functional.knn.points import prepare


def _reset():
    torch.set_float32_matmul_precision("highest")  # sets both backends' to IEEE


@pytest.fixture(autouse=True)
def clean_precision():
    _reset()
    yield
    _reset()
    assert torch.get_float32_matmul_precision() == "highest"


def _legacy(value):
    def apply():
        torch.set_float32_matmul_precision(value)

    def read():
        return torch.get_float32_matmul_precision()

    return apply, read, value


def _backend(name, value):
    backend = torch.backends.cuda.matmul if name == "cuda" else torch.backends.mkldnn.matmul

    def apply():
        backend.fp32_precision = value

    def read():
        return backend.fp32_precision

    return apply, read, value


SETTINGS = {
    "legacy-medium": _legacy("medium"),
    "legacy-high": _legacy("high"),
    "onednn-bf16": _backend("mkldnn", "bf16"),
    "onednn-tf32": _backend("mkldnn", "tf32"),
    "cuda-tf32": _backend("cuda", "tf32"),
}


def _sets():
    g = torch.Generator().manual_seed(0)
    return torch.randn(400, 256, generator=g) * 3 + 5, torch.randn(350, 256, generator=g) * 3.3 + 5.2


def _key(*tensors):
    """A tile's identity: the bytes of the rows and norms it was computed from (the workers
    of a pass finish their tiles in scheduling order, so the order of the tiles is not fixed)."""
    return b"".join(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes() for t in tensors)


def _tiles_of_a_pass(monkeypatch):
    """The pass's tiles, sorted by the inputs each was computed from."""
    seen = []
    real_sq_tile = tiling.sq_tile

    def spy(buf, a_blk, a_sq, b_blk, b_sq, *rest, **kwargs):
        out = real_sq_tile(buf, a_blk, a_sq, b_blk, b_sq, *rest, **kwargs)
        seen.append((_key(a_blk, a_sq, b_blk, b_sq) + repr(rest).encode(), out.clone()))
        return out

    monkeypatch.setattr(tiling, "sq_tile", spy)
    real, fake = _sets()
    knn_pass(real, fake, member_ks=[3], recall_ks=[3], realism_k=3, nearest=True, block_bytes=1 << 16)
    monkeypatch.setattr(tiling, "sq_tile", real_sq_tile)
    seen.sort(key=lambda pair: pair[0])
    return [tile for _, tile in seen]


@pytest.mark.parametrize("name", list(SETTINGS))
def test_tiles_are_ieee_float32_and_the_setting_is_restored(monkeypatch, name):
    want = _tiles_of_a_pass(monkeypatch)
    apply, read, value = SETTINGS[name]
    apply()
    got = _tiles_of_a_pass(monkeypatch)
    assert read() == value  # the caller's setting, back after the pass
    assert len(got) == len(want) > 1
    for a, b in zip(got, want):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_scores_under_reduced_precision_settings_equal_the_default(name):
    real, fake = _sets()
    want = generative_metrics(real, fake, block_bytes=1 << 16)
    SETTINGS[name][0]()
    got = generative_metrics(real, fake, block_bytes=1 << 16)
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(got[key], value), key


def test_the_setting_changes_bare_products_on_this_cpu():
    """The check can fail where the setting matters: on CPUs whose oneDNN runs float32
    products as bfloat16 passes, the bare tile GEMM differs under ``medium``; the engine's does
    not (above). Skipped where the setting changes nothing."""
    x = prepare(_sets()[0], torch.zeros(256, dtype=torch.float64), torch.float32)
    buf = (torch.empty(400 * 400), None)

    def tile():
        return tiling.sq_tile(buf, x.left(slice(0, 400)), x.sq_norms[:, None], x.right(slice(0, 400)), x.sq_norms)

    ieee = tile().clone()
    torch.set_float32_matmul_precision("medium")
    reduced = tile().clone()
    with ieee_float32():
        assert torch.get_float32_matmul_precision() == "highest"
        guarded = tile().clone()
    assert torch.get_float32_matmul_precision() == "medium"
    assert torch.equal(guarded, ieee)
    if torch.equal(reduced, ieee):
        pytest.skip("float32_matmul_precision('medium') does not change float32 products on this CPU")
