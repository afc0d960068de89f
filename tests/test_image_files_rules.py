"""Image files read at their true value or refused naming the file (``lightning_prd.features.image_folder``): 16-bit
grayscale PNGs, PNGs declaring more pixels than Pillow's decompression-bomb limit, and files that are no image or
are damaged past their header, in the command line and the callback. Every file is made with Pillow (or is a PNG
header written byte by byte) in ``tmp_path``."""

import struct
import warnings
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from lightning_prd.callback import PRDCallback
from lightning_prd.cli import main
from lightning_prd.features.image_folder import image_batches, image_files, read_image


def _never(*args):
    raise AssertionError(args)


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_header(path, width, height):
    """A PNG of a signature, an IHDR declaring ``width`` x ``height`` 8-bit RGB pixels and an empty IEND: the
    few bytes of a decompression bomb, enough for Pillow to read the size."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IEND", b""))
    return path


def _rgb_images(folder, count, seed=0, size=8):
    folder.mkdir(parents=True, exist_ok=True)
    gen = np.random.default_rng(seed)
    for i in range(count):
        Image.fromarray(gen.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(folder / f"img_{i:03d}.png")
    return folder


def _gray16(path, value, size=6):
    Image.fromarray(np.full((size, size), value, np.uint16)).save(path)
    with Image.open(path) as image:
        assert image.mode in ("I;16", "I")  # what Pillow makes of it: a 16-bit grayscale PNG
    return path


@pytest.mark.parametrize("value", [0, 257, 32768, 40000, 65535])
def test_a_16_bit_grayscale_png_is_read_at_its_true_value(tmp_path, value):
    path = _gray16(tmp_path / "g.png", value)
    seen = []
    image = read_image(path, _never, seen.append)
    expected = int(np.rint(value / 257))  # 0..65535 onto 0..255: 65535 white, 32768 mid grey 128
    assert image.dtype == torch.uint8 and tuple(image.shape) == (3, 6, 6)
    assert torch.equal(image, torch.full((3, 6, 6), expected, dtype=torch.uint8))
    assert seen == [path]
    with Image.open(path) as raw:  # what the reference tools read: every value above 255 saturated
        saturated = int(np.asarray(raw.convert("RGB"))[0, 0, 0])
    assert saturated == min(value, 255)


def test_16_bit_images_warn_once_per_folder_read_and_equal_their_8_bit_copies(tmp_path):
    wide, narrow = tmp_path / "wide", tmp_path / "narrow"
    wide.mkdir()
    narrow.mkdir()
    for i, value in enumerate([32768, 1000, 65535]):
        _gray16(wide / f"{i}.png", value)
        Image.fromarray(np.full((6, 6), int(np.rint(value / 257)), np.uint8)).save(narrow / f"{i}.png")
    with pytest.warns(UserWarning) as record:
        got = torch.cat(list(image_batches(image_files(wide), 2, None, unreadable=_never, mixed=_never)))
    messages = [str(w.message) for w in record if "16-bit" in str(w.message)]
    assert len(messages) == 1, messages
    assert str(wide / "0.png") in messages[0] and "torch-fidelity and clean-fid" in messages[0]
    assert "saturated" in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 8-bit files warn nothing
        want = torch.cat(list(image_batches(image_files(narrow), 2, None, unreadable=_never, mixed=_never)))
    assert torch.equal(got, want)
    assert int(got[0, 0, 0, 0]) == 128  # the mid grey is grey, not white


@pytest.mark.parametrize("flag", ["--real", "--fake"])
@pytest.mark.parametrize("size", [(60000, 60000), (10000, 9000)])  # Pillow's error, and its warning
def test_the_cli_names_flag_and_file_of_a_decompression_bomb(tmp_path, capfd, flag, size):
    good = _rgb_images(tmp_path / "good", 6)
    bad = _rgb_images(tmp_path / "bad", 6, seed=1)
    bomb = _png_header(bad / "zz_bomb.png", *size)
    assert bomb.stat().st_size < 100
    paths = {"--real": str(good), "--fake": str(good), flag: str(bad)}
    argv = ["evaluate", "--real", paths["--real"], "--fake", paths["--fake"], "--extractor", "random-cnn"]
    assert main([*argv, "--no-prd", "--no-alpha-beta", "-q"]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"lightning-prd evaluate: error: {flag}: cannot read image {bomb}: "), err
    assert f"declares {size[0]}x{size[1]} pixels" in err and "decompression-bomb limit" in err, err
    assert "PIL.Image.MAX_IMAGE_PIXELS" in err


@pytest.mark.parametrize("role", ["real", "test"])
@pytest.mark.parametrize("case", ["bomb", "bomb warning", "no image", "empty"])
def test_the_callback_checks_every_header_when_built(tmp_path, role, case):
    folder = _rgb_images(tmp_path / role, 5)
    bad = folder / "sub" / "c.png"  # anywhere in the folder, in sorted path order after good images
    bad.parent.mkdir()
    if case == "bomb":
        _png_header(bad, 60000, 60000)
    elif case == "bomb warning":
        _png_header(bad, 10000, 9000)
    else:
        bad.write_bytes(b"" if case == "empty" else b"these are notes, not a picture")
    kwargs = {"metric": dict(data_copying=True)} if role == "test" else {}
    real = str(folder) if role == "real" else torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8)
    test = str(folder) if role == "test" else None
    with pytest.raises(ValueError) as info:
        PRDCallback(real, test=test, feature_extractor="random-cnn", sample_fn=_never, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"Expected argument `{role}` to be a folder of readable images, but {bad}: "), message
    fragment = "decompression-bomb limit" if case.startswith("bomb") else "cannot identify image file"
    assert fragment in message, message


def test_a_file_damaged_past_its_header_is_named_when_read(tmp_path):
    folder = _rgb_images(tmp_path / "real", 4, size=32)
    whole = (folder / "img_003.png").read_bytes()
    (folder / "img_003.png").write_bytes(whole[: len(whole) // 2])  # the header intact, the pixels cut
    cb = PRDCallback(str(folder), feature_extractor="random-cnn", sample_fn=_never)  # headers read: accepted
    with pytest.raises(ValueError) as info:
        list(cb._real_chunks(0, 1))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"Expected argument `real` to be a folder of readable images, but {folder}/img_003.png")
