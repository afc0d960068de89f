"""The callback's dry run before training and ``image_range`` (``lightning_prd.callback.dry_run``): what would
fail at the first evaluation (range, width, dtype) is refused in one line before the first training step of a
real ``Trainer`` fit, and the dry run changes nothing the training sees."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback
from lightning_prd.callback.dry_run import dry_run
from lightning_prd.features import FIDInceptionFeatures, RandomConvNet

from tiny_modules import TanhImages, TinyTrainable, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*",
    "ignore:.*LeafSpec.*",
    "ignore:.*the trainer has no logger.*",
    "ignore:.*module\\(s\\) in eval mode.*",
)
METRIC = dict(prd=False, alpha_beta=False, pr_cover=False, probabilistic=False)
REAL = torch.randint(0, 256, (16, 3, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


def _callback(**kwargs):
    options = dict(feature_extractor=RandomConvNet(num_features=8, size=8), num_samples=16, metric=METRIC)
    return PRDCallback(kwargs.pop("real", REAL), **{**options, **kwargs})


def _refused(tmp_path, cb, module, error=ValueError):
    trainer = quiet_trainer(tmp_path, [cb])
    with pytest.raises(error) as info:
        trainer.fit(module)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.endswith("(PRDCallback's dry run on 2 samples, before the first training step)"), message
    assert module.steps == 0 and trainer.global_step == 0  # not one training step was taken
    assert cb.history == []
    return message


@pytest.mark.parametrize("extractor", ["random-cnn", "fid-inception"])
@pytest.mark.parametrize("given", [True, False])
def test_tanh_images_are_refused_before_the_first_training_step(tmp_path, extractor, given):
    net = RandomConvNet(num_features=8, size=8) if extractor == "random-cnn" else FIDInceptionFeatures(random_init=True)
    sample_fn = (lambda module, n: module.sample(n)) if given else None
    cb = _callback(feature_extractor=net, sample_fn=sample_fn)
    message = _refused(tmp_path, cb, TanhImages())
    name = "sample_fn" if given else "TanhImages.sample"
    assert message.startswith(f"Expected the generated samples of `{name}` to hold floating images in [0, 1]"), message
    assert f"`feature_extractor` ({type(net).__name__}) takes" in message
    assert "pass image_range=(-1, 1)" in message


def test_with_image_range_the_fit_runs_and_scores_the_images_mapped_to_0_1(tmp_path):
    cb = _callback(image_range=(-1, 1))
    module = TanhImages()
    quiet_trainer(tmp_path / "a", [cb]).fit(module)
    assert module.steps == 2 and len(cb.history) == 1
    mapped = _callback(sample_fn=lambda m, n: (m.sample(n) + 1) / 2)  # the same images given in [0, 1]
    quiet_trainer(tmp_path / "b", [mapped]).fit(TanhImages())
    assert cb.history == mapped.history
    assert 0 < cb.history[0]["precision"] <= 1


def test_images_outside_image_range_are_refused(tmp_path):
    cb = _callback(image_range=(0, 1))
    message = _refused(tmp_path, cb, TanhImages())
    assert message.startswith("Expected the generated samples of `TanhImages.sample` to lie in image_range=(0, 1)")


def test_a_width_other_than_the_features_file_is_refused_before_the_first_step(tmp_path):
    path = tmp_path / "real.npy"
    np.save(path, np.random.default_rng(0).normal(size=(20, 5)).astype(np.float32))
    with pytest.warns(UserWarning, match="do not say which network made them"):
        cb = _callback(real=str(path), image_range=(-1, 1))
    message = _refused(tmp_path, cb, TanhImages())
    assert "`TanhImages.sample`" in message and "the 5 features" in message and "but got 8" in message
    assert str(path) in message


def test_a_width_other_than_the_real_samples_features_is_refused(tmp_path):
    class Flat(TanhImages):
        def sample(self, n):  # features of width 3: the identity extractor on [n, 3]
            return torch.randn(n, 3)

    cb = PRDCallback(torch.randn(16, 4), num_samples=16, metric=METRIC)
    message = _refused(tmp_path, cb, Flat())
    assert message.startswith("Expected the features of the generated samples of `Flat.sample` to have the 4 ")
    assert "but got 3" in message


@pytest.mark.parametrize("form", ["tensor", "loader"])
def test_real_images_outside_0_1_are_refused_naming_real(tmp_path, form):
    images = torch.rand(16, 3, 8, 8) * 2 - 1  # a dataset normalised to [-1, 1]
    real = images if form == "tensor" else DataLoader(TensorDataset(images, torch.zeros(16)), batch_size=8)
    cb = _callback(real=real, image_range=(-1, 1))
    message = _refused(tmp_path, cb, TanhImages())
    assert message.startswith("Expected the real samples of argument `real` to hold floating images in [0, 1]")
    assert "give real images as uint8 0..255 or floats in [0, 1]" in message


def test_a_dtype_the_extractor_does_not_take_is_refused(tmp_path):
    cb = _callback(sample_fn=lambda m, n: torch.randint(0, 256, (n, 3, 8, 8)))  # int64, not uint8
    message = _refused(tmp_path, cb, TanhImages(), TypeError)
    assert "`feature_extractor` failed on the generated samples of `sample_fn`" in message
    assert "torch.int64" in message


@pytest.mark.parametrize("value", [(1, -1), (0, float("inf")), "(-1, 1)", (0, 1, 2), (True, 2)])
def test_a_bad_image_range_is_refused_at_construction(value):
    with pytest.raises(ValueError, match=r"^Expected argument `image_range` to be None or a pair .* but got "):
        _callback(image_range=value)


class RandomSteps(TanhImages):
    """Training that draws from every global generator: the weights show any change of the RNG states."""

    def training_step(self, batch, batch_idx):
        self.steps += 1
        noise = torch.rand(1) + float(np.random.rand()) + __import__("random").random()
        return (self.w - noise).pow(2).sum() + 0 * batch[0].sum()


def test_the_dry_run_changes_nothing_the_training_sees(tmp_path):
    torch.manual_seed(1)
    np.random.seed(1)
    __import__("random").seed(1)
    alone = RandomSteps()
    quiet_trainer(tmp_path / "a", []).fit(alone)
    torch.manual_seed(1)
    np.random.seed(1)
    __import__("random").seed(1)
    watched = RandomSteps()
    cb = _callback(image_range=(-1, 1), every_n_epochs=5, evaluate_on_train_end=False)  # the dry run only
    quiet_trainer(tmp_path / "b", [cb]).fit(watched)
    assert cb.history == [] and watched.steps == alone.steps == 2
    assert torch.equal(watched.w, alone.w)


def test_the_dry_run_restores_every_training_flag_and_draws_the_first_evaluations_noise(tmp_path):
    seen = []

    def sample_fn(module, n):
        seen.append((module.training, module.head.training, torch.rand(1)))  # the first draw
        return torch.rand(n, 3, 8, 8)

    module = TinyTrainable()
    module.head = torch.nn.Dropout()
    module.train()
    module.head.eval()  # a submodule's own flag
    cb = _callback(sample_fn=sample_fn, num_samples=8)
    trainer = quiet_trainer(tmp_path, [cb])
    trainer.fit(module)  # the dry run, then one evaluation
    dry, first = seen[0], seen[1]
    assert dry[:2] == (False, False) and first[:2] == (False, False)  # sampled in eval mode
    assert torch.equal(dry[2], first[2])  # the same fixed noise
    state = torch.get_rng_state()
    module.train()
    module.head.eval()
    dry_run(cb, trainer, module)
    assert module.training and not module.head.training
    assert torch.equal(torch.get_rng_state(), state)
