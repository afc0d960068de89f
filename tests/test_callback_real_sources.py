"""PRDCallback(real=...) beyond tensors and DataLoaders: features files (ours and other tools'), image folders,
statistics files and the trainer's datamodule, each through a real Trainer fit, and their bad-input lines."""

from __future__ import annotations

import json
import pickle
import sys
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch import nn

from lightning_prd.callback import PRDCallback
from lightning_prd.features import get_extractor, registry
from lightning_prd.functional import frechet_distance

from tiny_modules import GaussianSampler, PointsData, TinyGenerator, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*LeafSpec.*",
    "ignore:.*the trainer has no logger.*",
    "ignore:.*no `validation_step`.*",
)

METRIC = dict(prd=False, alpha_beta=False, pr_cover=False)
FD_ONLY = dict(
    k_precision_recall=None, k_density_coverage=None, prd=False, alpha_beta=False, probabilistic=False, pr_cover=False
)
FEATS = np.random.default_rng(0).normal(size=(60, 2)).astype(np.float32)


class Doubler(nn.Module):
    """An extractor that doubles its input: it shows which rows went through it."""

    def forward(self, x):
        return 2.0 * x.reshape(x.shape[0], -1)


def _fit(tmp_path, callback, module=None, datamodule=None, max_epochs=1):
    trainer = quiet_trainer(tmp_path, [callback], max_epochs=max_epochs)
    trainer.fit(module if module is not None else GaussianSampler(), datamodule=datamodule)
    return trainer


def _scores(callback):
    return {k: v for k, v in callback.history[-1].items() if k != "epoch"}


def _ours(path, feats, extractor):
    provenance = {"format": "lightning-prd/features", "extractor": extractor, "num_samples": len(feats)}
    np.savez(path, features=feats, provenance=np.array(json.dumps(provenance)))


# -- features files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["npy", "clean-fid", "lightning-prd"])
def test_a_features_file_is_used_as_its_features_never_through_the_extractor(tmp_path, layout):
    """The file's rows go to the metric as they are; the extractor embeds only the generated samples. So
    file(FEATS) with Doubler equals the tensor FEATS / 2 with Doubler (real features FEATS either way)."""
    path = tmp_path / "real.bin"  # any name: read_reference tells the layout by content
    if layout == "npy":
        with open(path, "wb") as handle:
            np.save(handle, FEATS)
    elif layout == "clean-fid":  # make_custom_stats' KID features: np.savez_compressed(..., feats=np_feats)
        with open(path, "wb") as handle:
            np.savez_compressed(handle, feats=FEATS)
    else:
        with open(path, "wb") as handle:
            _ours(handle, FEATS, "lightning_prd.features:Identity")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from_file = PRDCallback(str(path), feature_extractor=Doubler(), num_samples=50, metric=METRIC, num_real=50)
    said = [str(w.message) for w in caught if "argument `real`" in str(w.message)]
    assert len(said) == 1 and "\n" not in said[0]  # the file cannot settle the network: one warning, named
    assert ("do not say which network" in said[0]) == (layout != "lightning-prd")
    tensor = PRDCallback(
        torch.from_numpy(FEATS) / 2, feature_extractor=Doubler(), num_samples=50, metric=METRIC, num_real=50
    )
    _fit(tmp_path / "file", from_file)
    _fit(tmp_path / "tensor", tensor)
    assert _scores(from_file) == _scores(tensor)


def test_features_file_equals_its_tensor_with_the_identity_extractor(tmp_path):
    np.save(tmp_path / "real.npy", FEATS)
    _ours(tmp_path / "ours.npz", FEATS, "identity")
    with pytest.warns(UserWarning, match="do not say which network"):
        npy = PRDCallback(tmp_path / "real.npy", num_samples=40, metric=METRIC)  # os.PathLike
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file names the extractor: nothing to warn about
        ours = PRDCallback(str(tmp_path / "ours.npz"), feature_extractor="identity", num_samples=40, metric=METRIC)
    tensor = PRDCallback(
        torch.from_numpy(FEATS), feature_extractor=get_extractor("identity"), num_samples=40, metric=METRIC
    )
    for name, cb in (("npy", npy), ("ours", ours), ("tensor", tensor)):
        _fit(tmp_path / name, cb)
    assert _scores(npy) == _scores(tensor) == _scores(ours)


def test_a_file_of_another_network_is_refused(tmp_path):
    _ours(tmp_path / "ours.npz", FEATS, "random-cnn")
    with pytest.raises(ValueError, match=r"^Expected argument `feature_extractor` to be the network .*'random-cnn'"):
        PRDCallback(str(tmp_path / "ours.npz"), feature_extractor="identity")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PRDCallback(str(tmp_path / "ours.npz"), feature_extractor={"name": "random", "num_features": 2})  # an alias


@pytest.mark.parametrize(
    ("model", "extractor", "outcome"),
    [
        ("inception", "identity", "error"),  # dgm-eval's inception is the FID Inception, not the identity
        ("inception", "fid-inception", "warn"),  # the same network, but dgm-eval resizes its own way
        ("dinov2", "dinov2", "warn"),  # dgm-eval's DINOv2 is ViT-L/14; ours defaults to ViT-B/14
        ("dinov2", "module", "warn"),  # an extractor given as a module has no name to compare
        ("my-own-net", "identity", "warn"),  # a name of no known network
    ],
)
def test_a_foreign_file_names_its_network(tmp_path, monkeypatch, model, extractor, outcome):
    # dgm-eval --save: np.savez(path, reps=reps, model=model_name, hparams=...)
    np.savez(tmp_path / "reps.npz", reps=FEATS, model=np.array(model))
    for name in ("fid-inception", "dinov2"):  # stand-ins: no weights here
        monkeypatch.setitem(registry._REGISTRY, name, lambda weights=None, **options: Doubler())
    given = Doubler() if extractor == "module" else extractor
    if outcome == "error":
        with pytest.raises(
            ValueError, match=f"`feature_extractor` to be the network .*'{model}'.*but got '{extractor}'"
        ):
            PRDCallback(str(tmp_path / "reps.npz"), feature_extractor=given)
        return
    with pytest.warns(UserWarning, match=f"were made with '{model}'") as record:
        PRDCallback(str(tmp_path / "reps.npz"), feature_extractor=given)
    assert len([w for w in record if "argument `real`" in str(w.message)]) == 1


# -- image folders and image files ----------------------------------------------------------------------


def _images(n, seed):
    return torch.randint(0, 256, (n, 3, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


class ImageSampler(GaussianSampler):
    def sample(self, n):
        return torch.randint(0, 256, (n, 3, 16, 16), dtype=torch.uint8)


def test_image_folder_equals_a_tensor_of_its_images(tmp_path):
    from PIL import Image

    images = _images(30, 1)
    folder = tmp_path / "real"
    (folder / "b").mkdir(parents=True)
    for i, im in enumerate(images):  # sorted path order: a/…, then b/… (recursive)
        Image.fromarray(im.permute(1, 2, 0).numpy()).save(folder / (f"a{i:02d}.png" if i < 20 else f"b/{i:02d}.png"))
    options = {"name": "random-cnn", "num_features": 8, "size": 16}
    kwargs = dict(num_samples=30, batch_size=7, metric=METRIC)
    from_folder = PRDCallback(str(folder), feature_extractor=options, **kwargs)
    tensor = PRDCallback(images, feature_extractor=get_extractor("random-cnn", num_features=8, size=16), **kwargs)
    _fit(tmp_path / "folder", from_folder, ImageSampler())
    _fit(tmp_path / "tensor", tensor, ImageSampler())
    assert _scores(from_folder) == _scores(tensor)
    assert torch.equal(torch.cat(list(from_folder._real_chunks(1, 2))), images[15:])  # rank 1 decodes its block


def test_guided_diffusion_images_are_embedded(tmp_path):
    images = _images(24, 2)
    np.savez(tmp_path / "VIRTUAL_tiny.npz", arr_0=images.permute(0, 2, 3, 1).numpy())
    extractor = get_extractor("random-cnn", num_features=8, size=16)
    kwargs = dict(feature_extractor=extractor, num_samples=24, metric=METRIC)
    from_file, tensor = PRDCallback(str(tmp_path / "VIRTUAL_tiny.npz"), **kwargs), PRDCallback(images, **kwargs)
    _fit(tmp_path / "file", from_file, ImageSampler())
    _fit(tmp_path / "tensor", tensor, ImageSampler())
    assert _scores(from_file) == _scores(tensor)


# -- the trainer's datamodule -------------------------------------------------------------------------------


def test_datamodule_train_equals_its_dataset_as_a_tensor(tmp_path):
    """The shuffling train loader is read as its dataset in index order: the first num_real rows, the same
    rows on every rank count."""
    data = PointsData(num_points=48, batch_size=10)
    kwargs = dict(num_samples=40, num_real=45, metric=METRIC)
    from_dm, tensor = PRDCallback("datamodule:train", **kwargs), PRDCallback(data.points, **kwargs)
    _fit(tmp_path / "dm", from_dm, TinyGenerator(), datamodule=data, max_epochs=2)
    _fit(tmp_path / "tensor", tensor, TinyGenerator(), datamodule=PointsData(num_points=48, batch_size=10))
    assert _scores(from_dm) == _scores(tensor) and len(from_dm.history) == 2
    for world in (1, 2, 3):
        rows = torch.cat([torch.cat(list(from_dm._real_chunks(r, world))) for r in range(world)])
        assert torch.equal(rows, data.points[:45])


class WithVal(PointsData):
    def val_dataloader(self):
        return [torch.utils.data.DataLoader(torch.utils.data.TensorDataset(2 * self.points), batch_size=5)]


def test_datamodule_val_reads_the_validation_loader(tmp_path):
    kwargs = dict(num_samples=40, metric=METRIC)
    data = WithVal(num_points=30)
    from_dm, tensor = PRDCallback("datamodule:val", **kwargs), PRDCallback(2 * data.points, **kwargs)
    _fit(tmp_path / "dm", from_dm, TinyGenerator(), datamodule=data)
    _fit(tmp_path / "tensor", tensor, TinyGenerator(), datamodule=WithVal(num_points=30))
    assert _scores(from_dm) == _scores(tensor)


# -- statistics files -------------------------------------------------------------------------------------------


def test_statistics_file_gives_the_frechet_distance_of_its_moments(tmp_path):
    real = torch.from_numpy(FEATS).double() + 0.5
    fake = torch.randn(40, 2, generator=torch.Generator().manual_seed(3))
    # pytorch-fid --save-stats: np.savez_compressed(path, mu=np.mean(act, axis=0), sigma=np.cov(act, rowvar=False))
    np.savez_compressed(tmp_path / "stats.npz", mu=real.numpy().mean(0), sigma=np.cov(real.numpy(), rowvar=False))
    with pytest.warns(UserWarning, match="do not say which network"):
        cb = PRDCallback(str(tmp_path / "stats.npz"), sample_fn=lambda m, n: fake[:n], num_samples=40, metric=FD_ONLY)
    trainer = _fit(tmp_path / "fit", cb, max_epochs=2)
    assert [sorted(h) for h in cb.history] == [["epoch", "frechet_distance"]] * 2
    logged = float(trainer.callback_metrics["prd/frechet_distance"])
    assert logged == pytest.approx(float(frechet_distance(real, fake)), rel=1e-6)
    assert not any(k.startswith("prd/precision") for k in trainer.callback_metrics)


# -- bad input: one line naming the argument and the value -----------------------------------------------------


def _stats_file(folder):
    np.savez(folder / "stats.npz", mu=np.zeros(2), sigma=np.eye(2))
    return str(folder / "stats.npz")


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda p: dict(real=str(p / "missing.npy")), FileNotFoundError, r"`real` .*missing\.npy does not exist"),
        (lambda p: dict(real=p / "missing"), FileNotFoundError, r"`real` .*missing does not exist"),
        (
            lambda p: dict(real=_stats_file(p)),
            ValueError,
            r"`real` .*stats\.npz \(fid-stats\) holds only the mean and covariance of 2 features.*"
            r"metric=dict\(k_precision_recall=None, k_density_coverage=None, probabilistic=False, pr_cover=False, "
            r"prd=False",
        ),
        (
            lambda p: dict(real="datamodule:xyz"),
            ValueError,
            r"`real` to be one of 'datamodule:train'.*'datamodule:xyz'",
        ),
        (lambda p: dict(sample_fn="nowhere.module:sample"), TypeError, r"`sample_fn` .*'nowhere.module:sample'"),
        (lambda p: dict(sample_fn="tiny_modules:QUIET"), TypeError, r"`sample_fn` .*'tiny_modules:QUIET' is a dict"),
        (lambda p: dict(feature_extractor="no-such-net"), TypeError, r"`feature_extractor` .*'no-such-net'"),
        (lambda p: dict(real=str(p)), ValueError, r"`real` to be a folder of PNG/JPEG images, but .* holds none"),
    ],
    ids=[
        "missing",
        "missing-pathlike",
        "stats-default-metric",
        "datamodule-xyz",
        "sample-fn",
        "not-callable",
        "ext",
        "empty",
    ],
)
def test_bad_real_sources_raise_one_line_at_construction(tmp_path, make, error, match):
    kwargs = {"real": torch.randn(8, 2), **make(tmp_path)}
    with pytest.raises(error, match=match) as info:
        PRDCallback(kwargs.pop("real"), **kwargs)
    assert "\n" not in str(info.value)


def test_an_image_folder_without_pillow_asks_for_pillow_alone(tmp_path, monkeypatch):
    """Pillow alone: the ``images`` extra would also install the newest torchvision, and with it the newest torch."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.png").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "PIL", None)
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(ImportError) as info:
        PRDCallback(str(tmp_path / "real"), feature_extractor="random-cnn")
    message = str(info.value)
    assert "argument `real`" in message and message.endswith("needs Pillow: pip install pillow")


def test_unreadable_file_and_image_folder_without_extractor(tmp_path):
    (tmp_path / "junk.bin").write_bytes(b"\x00not a reference file")
    with pytest.raises(ValueError, match=r"^Expected argument `real` .*junk\.bin"):
        PRDCallback(str(tmp_path / "junk.bin"))
    from PIL import Image

    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "one.png")
    with pytest.raises(ValueError, match=r"^Expected argument `feature_extractor` to embed the images .*image folder"):
        PRDCallback(str(tmp_path))


class NoVal(pl.LightningDataModule):
    def train_dataloader(self):
        return PointsData().train_dataloader()


@pytest.mark.parametrize(
    ("real", "datamodule", "match"),
    [
        (
            "datamodule:val",
            NoVal(),
            r"^Expected argument `real`='datamodule:val' .*NoVal defines no val_dataloader\(\)$",
        ),
        ("datamodule:train", None, r"^Expected argument `real`='datamodule:train' .*the trainer has no datamodule"),
    ],
)
def test_datamodule_without_the_loader_raises_in_setup(tmp_path, real, datamodule, match):
    cb = PRDCallback(real, num_samples=16, metric=METRIC)
    with pytest.raises(ValueError, match=match) as info:
        _fit(tmp_path, cb, TinyGenerator(), datamodule=datamodule)
    assert "\n" not in str(info.value) and cb.history == []


def test_a_missing_path_is_a_file_not_found_error_only(tmp_path):
    for value in (str(tmp_path / "missing.npz"), tmp_path / "missing"):
        with pytest.raises(FileNotFoundError) as info:
            PRDCallback(value)
        assert not isinstance(info.value, TypeError)  # a TypeError is a value of none of the forms
    with pytest.raises(TypeError, match=r"`real` to be a tensor or a DataLoader .*but got int") as info:
        PRDCallback(3)
    assert not isinstance(info.value, FileNotFoundError)


def test_a_bad_value_loses_nothing_accumulated(tmp_path):
    """A refused ``real`` leaves the callback as it was (its ``real``, its history); a fit whose datamodule lacks
    the loader stops in setup with the scores of the fits before it kept."""
    data = WithVal(num_points=30)
    cb = PRDCallback("datamodule:val", num_samples=40, metric=METRIC)
    _fit(tmp_path / "one", cb, TinyGenerator(), datamodule=data)
    before = [dict(h) for h in cb.history]
    assert len(before) == 1
    for bad, error in ((str(tmp_path / "missing.npz"), FileNotFoundError), (_stats_file(tmp_path), ValueError)):
        with pytest.raises(error):
            cb.real = bad
        assert cb.real == "datamodule:val" and cb.history == before
    with pytest.raises(ValueError, match=r"NoVal defines no val_dataloader"):
        _fit(tmp_path / "two", cb, TinyGenerator(), datamodule=NoVal())
    assert cb.history == before
    _fit(tmp_path / "three", cb, TinyGenerator(), datamodule=WithVal(num_points=30))  # and it still works
    assert cb.history == before  # a fresh fit of the same data: the same scores


def test_an_edm2_reference_is_read_for_the_network_of_the_extractor(tmp_path, monkeypatch):
    # NVlabs/edm2 calculate_metrics.py: pickle.dump(dict(fid=dict(mu=, sigma=), fd_dinov2=dict(mu=, sigma=)), f)
    real2, real3 = (
        torch.from_numpy(FEATS).double() + 0.5,
        torch.randn(50, 3, generator=torch.Generator().manual_seed(5)),
    )
    stats = {
        "fid": {"mu": real2.numpy().mean(0), "sigma": np.cov(real2.numpy(), rowvar=False)},
        "fd_dinov2": {"mu": real3.numpy().mean(0), "sigma": np.cov(real3.numpy(), rowvar=False)},
    }
    path = tmp_path / "img512.pkl"
    path.write_bytes(pickle.dumps(stats))
    for name in ("fid-inception", "dinov2"):  # stand-ins: no weights here
        monkeypatch.setitem(registry._REGISTRY, name, lambda weights=None, **options: nn.Identity())
    fake = torch.randn(40, 2, generator=torch.Generator().manual_seed(3))
    cb = PRDCallback(
        str(path), feature_extractor="fid-inception", sample_fn=lambda m, n: fake[:n], num_samples=40, metric=FD_ONLY
    )
    assert cb._source.reference.entry == "fid"
    _fit(tmp_path / "fit", cb)
    assert cb.history[0]["frechet_distance"] == pytest.approx(float(frechet_distance(real2, fake)), rel=1e-6)
    with pytest.warns(UserWarning, match="were made with 'dinov2-vit-l14'"):  # ViT-L/14: a warning, not an error
        assert PRDCallback(str(path), feature_extractor={"name": "dinov2"}, metric=FD_ONLY)._source.reference.entry == (
            "fd_dinov2"
        )
    with pytest.raises(ValueError, match=r"`feature_extractor` to name the network .*img512\.pkl.*got 'identity'") as e:
        PRDCallback(str(path), feature_extractor="identity", metric=FD_ONLY)
    assert "\n" not in str(e.value) and "feature_extractor='fid-inception' for 'fid'" in str(e.value)


class _Hostile:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


def test_a_hostile_pickle_as_real_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "stats.pkl"
    path.write_bytes(pickle.dumps({"fid": {"mu": _Hostile(marker), "sigma": np.eye(2)}}))
    with pytest.raises(ValueError, match=r"`real` .*stats\.pkl.*exec") as info:
        PRDCallback(str(path), metric=FD_ONLY)
    assert "\n" not in str(info.value) and not marker.exists()


def test_a_file_that_cannot_be_opened_is_one_line_naming_real(tmp_path, monkeypatch):
    """An unreadable file (as a permission the test's user may lack would make it): opening it fails."""
    path = tmp_path / "stats.pkl"
    path.write_bytes(pickle.dumps({"fid": {"mu": np.zeros(2), "sigma": np.eye(2)}}))
    opener = type(path).open

    def refuse(self, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return opener(self, *args, **kwargs)

    monkeypatch.setattr(type(path), "open", refuse)
    with pytest.raises(ValueError, match=r"^Expected argument `real` .*stats\.pkl.*Permission denied") as info:
        PRDCallback(str(path), metric=FD_ONLY)
    assert "\n" not in str(info.value)
