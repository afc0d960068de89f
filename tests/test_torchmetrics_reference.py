"""FIDInceptionFeatures and our FID / Inception Score against torchmetrics' own FID and IS, on shared random weights.

Needs torchmetrics' image metrics, so torch-fidelity and torchvision: run in the reference venv,
``/tmp/tvenv/bin/python -m pytest tests/test_torchmetrics_reference.py -q -s``. Elsewhere the module is
skipped with the reason printed by ``pytest -rs``.

The weights: our ``FIDInceptionNet`` with seeded random convolutions, batch-norm scales and shifts drawn at
random and the batch-norm running statistics set by one pass in training mode (``momentum=None``: the
statistics of that batch) over smooth random images normalised as ``(x - 128) / 128``, so every layer sees
O(1) activations; ``fc`` drawn with a spread that makes the softmax far from uniform, and a nonzero bias
(which the Inception Score's ``logits_unbiased`` leaves out). Saved as torch-fidelity's converted file,
``weights-inception-2015-12-05-6726825d.pth`` (the state dict without the ``num_batches_tracked`` counters),
and given to torchmetrics by ``feature_extractor_weights_path``; nothing is downloaded.

Compared:

1. torchmetrics' ``NoTrainInceptionV3("inception-v3-compat", ["2048"], path, antialias=False)`` (torch-fidelity's
   network and its TF1 bilinear resize) against ``FIDInceptionFeatures(path, resize="tf1")`` on the same uint8
   images at 32, 299 and 512 px: max |difference| <= 1e-4 x the features' range. Its default
   ``antialias=True`` resizes with torch's antialiased bilinear instead (half-pixel grid, a filter when
   shrinking): equal to ours at 299 px only, where both resizes are the identity; at other sizes it is our
   network on ``(interpolate(x, 299, "bilinear", antialias=True) - 128) / 128``, which is not TF FID.
2. ``FrechetInceptionDistance(feature=2048, feature_extractor_weights_path=path, antialias=False,
   normalize=True)`` on two sets of float images in [0, 1] (it quantises with ``(x * 255).byte()``, our
   ``"floor"``) against ``frechet_distance`` of our features of the same images, and, on full-rank features,
   the two formulas alone (module ``torch.nn.Identity``), both against a float64 nuclear-norm oracle
   (:func:`exact_frechet`); tolerances in :func:`null_eigenvalue_tolerance`.
3. ``InceptionScore(feature=NoTrainInceptionV3(..., ["logits_unbiased"], path, antialias=False), splits=5,
   normalize=True)`` on 10 images against ``inception_score`` of our ``logits``. It permutes with
   ``torch.randperm`` on the global generator, splits with ``torch.chunk`` and returns the ddof-1 standard
   deviation; we seed the global generator, draw that permutation ourselves, reseed, and compare with
   ``inception_score(logits[order], splits=5, shuffle=False)``: 10 rows in 5 chunks are our 5 parts
   ``[2 i, 2 i + 2)``, so the means agree and its std is ours x sqrt(5 / 4). With ``splits=3`` its chunks
   are 4, 4 and 2 rows, not our 3, 3 and 4: compared with the mean and ddof-1 std of
   ``inception_score(chunk, splits=1)`` over those chunks.
"""

import math

import numpy as np
import pytest
import torch

pytest.importorskip("torchvision", reason="needs torchvision (reference venv /tmp/tvenv)")
pytest.importorskip("torch_fidelity", reason="needs torch-fidelity for torchmetrics' FID / IS (reference venv)")

from smooth_images import smooth_floats, smooth_images  # noqa: E402
from torchmetrics.image.fid import FrechetInceptionDistance, NoTrainInceptionV3  # noqa: E402
from torchmetrics.image.inception import InceptionScore  # noqa: E402

from lightning_prd.features.fid_inception import FIDInceptionFeatures  # noqa: E402
from lightning_prd.functional import frechet_distance, inception_score  # noqa: E402

import oracle  # noqa: E402

SIZES = (32, 299, 512)
N = 5  # images per set: the CPU cost is one 299-px Inception pass per image per network
FEATURE_TOL = 1e-4
SET_SIZE = 64  # size of the float image sets of the FID and IS tests (upsampled to 299 by the TF1 resize)
U64, U32 = 2.0**-53, 2.0**-24  # unit roundoff of float64 and float32
FILENAME = "weights-inception-2015-12-05-6726825d.pth"


def _ratio(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return float((ours - ref).abs().max()) / float(ref.max() - ref.min())


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    net = FIDInceptionFeatures(random_init=True, seed=2015).net
    g = torch.Generator().manual_seed(2015)
    with torch.no_grad():
        for bn in (m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)):
            bn.weight.copy_(0.5 + torch.rand(bn.weight.shape, generator=g))
            bn.bias.copy_(0.2 * torch.randn(bn.bias.shape, generator=g))
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average: one batch gives that batch's statistics
        net.train()
        net((smooth_images(6, 299, seed=7).float() - 128) / 128)
        net.eval()
        net.fc.weight.copy_(0.2 * torch.randn(net.fc.weight.shape, generator=g))  # logits spread of a few units
        net.fc.bias.copy_(torch.randn(net.fc.bias.shape, generator=g))
    path = tmp_path_factory.mktemp("torchmetrics_weights") / FILENAME
    torch.save({k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}, path)
    return path


@pytest.fixture(scope="module")
def ours(weights):
    return FIDInceptionFeatures(weights, resize="tf1", logits=True)


@pytest.fixture(scope="module")
def float_sets(ours):
    """Two sets of float images and our pool features and logits of each."""
    sets = [smooth_floats(N, SET_SIZE, seed=100 + i) for i in range(2)]
    with torch.no_grad():
        return [(x, ours(x)) for x in sets]


@pytest.mark.parametrize("size", SIZES)
def test_no_train_inception_equals_ours(weights, ours, size):
    x = smooth_images(N, size, seed=size)
    tm = NoTrainInceptionV3(
        "inception-v3-compat", ["2048"], feature_extractor_weights_path=str(weights), antialias=False
    )
    with torch.no_grad():
        mine, theirs = ours(x)["pool"], tm(x)
    ratio = _ratio(mine, theirs)
    print(f"\nNoTrainInceptionV3(antialias=False) vs ours tf1 @ {size}px: max|diff|/range = {ratio:.3g}")
    assert theirs.shape == mine.shape == (N, 2048)
    assert ratio <= FEATURE_TOL, (size, ratio)


@pytest.mark.parametrize("size", SIZES)
def test_default_antialias_is_torch_antialiased_bilinear_not_tf1(weights, ours, size):
    """torchmetrics' default ``antialias=True``: our network on torch's antialiased bilinear resize of 0..255."""
    x = smooth_images(2, size, seed=size)
    tm = NoTrainInceptionV3("inception-v3-compat", ["2048"], feature_extractor_weights_path=str(weights))
    assert tm.use_antialias  # the default
    resized = torch.nn.functional.interpolate(
        x.float(), size=(299, 299), mode="bilinear", align_corners=False, antialias=True
    )
    with torch.no_grad():
        theirs, tf1 = tm(x), ours(x)["pool"]
        torch_resize = ours.net((resized - 128) / 128)
    vs_torch, vs_tf1 = _ratio(torch_resize, theirs), _ratio(tf1, theirs)
    print(
        f"\nNoTrainInceptionV3(antialias=True) @ {size}px: max|diff|/range vs our network on torch's antialiased "
        f"resize = {vs_torch:.3g}, vs ours tf1 = {vs_tf1:.3g}"
    )
    assert vs_torch <= FEATURE_TOL, (size, vs_torch)
    if size == 299:
        assert vs_tf1 <= FEATURE_TOL, vs_tf1  # both resizes are the identity at 299 px
    else:
        assert vs_tf1 > 100 * FEATURE_TOL, vs_tf1  # not TF FID at other sizes


def null_eigenvalue_tolerance(real: np.ndarray, fake: np.ndarray, fd: float) -> float:
    r"""Relative error, from rounding, of a Fréchet distance taken from a ``D x D`` eigenproblem.

    Both torchmetrics (``sum Re sqrt(eigvals(S_r S_f))`` of the non-symmetric product, covariances from raw
    float64 sums ``sum x x^T - n mu mu^T``) and ``frechet_distance`` (``sqrt`` of the eigenvalues, clamped
    at 0, of the symmetric ``S_r^{1/2} S_f S_r^{1/2}``) solve a ``D x D`` eigenproblem. With fewer samples
    than dimensions the product has ``D - r`` zero eigenvalues (``r = min(n_r, n_f) - 1`` its rank); a
    backward-stable eigen-solver returns them moved by up to a small multiple of ``u ||S_r|| ||S_f||``
    (``u = 2^-53``; we take 2), possibly off the real axis, and each adds up to ``|lambda|^{1/2}`` to the
    trace of the square root, which the distance counts twice:
    ``|FD_computed - FD| <= 2 (D - r) sqrt(2 u ||S_r|| ||S_f||)``. The other rounding is ``O(u)`` relative
    (``1e-9`` covers its condition-number growth). With ``r >= D`` there are no null eigenvalues.
    """
    d, r = real.shape[1], min(len(real), len(fake)) - 1
    if r >= d:
        return 1e-9
    norms = [np.linalg.norm(np.cov(x.astype(np.float64), rowvar=False), 2) for x in (real, fake)]
    return 1e-9 + 2 * (d - r) * math.sqrt(2 * U64 * norms[0] * norms[1]) / fd


def test_frechet_inception_distance_equals_ours(weights, float_sets):
    (real, real_out), (fake, fake_out) = float_sets
    fid = FrechetInceptionDistance(
        feature=2048, feature_extractor_weights_path=str(weights), antialias=False, normalize=True
    )
    fid.update(real, real=True)
    fid.update(fake, real=False)
    theirs = fid.compute()
    sums = torch.stack([fid.real_features_sum, fid.fake_features_sum])
    our_sums = torch.stack([real_out["pool"].double().sum(0), fake_out["pool"].double().sum(0)])
    sums_ratio = float((sums - our_sums).abs().max() / our_sums.abs().max())
    a, b = real_out["pool"].numpy(), fake_out["pool"].numpy()
    mine, exact = float(frechet_distance(a, b)), oracle.frechet_few_samples(a, b)
    tol = null_eigenvalue_tolerance(a, b, exact)
    rel_theirs, rel_mine, rel = abs(float(theirs) / exact - 1), abs(mine / exact - 1), abs(float(theirs) / mine - 1)
    print(
        f"\ntorchmetrics FID ({theirs.dtype}) vs frechet_distance(ours) ({N} + {N} float images at {SET_SIZE}px, "
        f"2048-D): {float(theirs):.8g} vs {mine:.10g}, relative difference {rel:.3g}; against the nuclear-norm "
        f"oracle {exact:.10g}: torchmetrics {rel_theirs:.3g}, ours {rel_mine:.3g}; null-eigenvalue tolerance "
        f"{tol:.3g} (+ 2^-24 for its float32 output); its feature sums vs ours: max|diff|/max = {sums_ratio:.3g}"
    )
    assert fid.real_features_num_samples == fid.fake_features_num_samples == N
    assert sums_ratio <= 1e-12, sums_ratio  # the same features (its network is ours: see the first test)
    assert rel_mine <= tol, (mine, exact, tol)
    assert rel_theirs <= tol + U32, (float(theirs), exact, tol)
    assert rel <= 2 * tol + U32, (float(theirs), mine, rel, tol)


def test_frechet_formula_alone_on_full_rank_features():
    """torchmetrics' FID on given features (``torch.nn.Identity``) and ours, with more samples than dimensions."""
    g = torch.Generator().manual_seed(5)
    mixing = torch.randn(48, 48, generator=g, dtype=torch.float64) / 7
    real = torch.relu(torch.randn(400, 48, generator=g, dtype=torch.float64) @ mixing + 0.3)
    fake = torch.relu(torch.randn(300, 48, generator=g, dtype=torch.float64) @ (1.1 * mixing) + 0.35)
    fid = FrechetInceptionDistance(feature=torch.nn.Identity(), input_img_size=(48,))
    fid.update(real, real=True)
    fid.update(fake, real=False)
    theirs, mine = float(fid.compute()), float(frechet_distance(real, fake))
    exact = oracle.frechet_few_samples(real.numpy(), fake.numpy())
    tol = null_eigenvalue_tolerance(real.numpy(), fake.numpy(), exact)
    print(
        f"\ntorchmetrics FID vs frechet_distance, full rank (400 + 300, 48-D, float64): "
        f"relative {theirs / mine - 1:.3g}; "
        f"vs the oracle: torchmetrics {theirs / exact - 1:.3g}, ours {mine / exact - 1:.3g} (tolerance {tol:.3g})"
    )
    assert fid.compute().dtype == torch.float64
    assert abs(theirs / exact - 1) <= tol and abs(mine / exact - 1) <= tol and abs(theirs / mine - 1) <= 2 * tol


def is_tolerance(num_classes: int) -> float:
    r"""Relative tolerance of a float32 Inception Score against our float64 one on the same logits.

    torchmetrics computes ``softmax`` and ``log_softmax`` in the logits' dtype (float32): each ``log p`` and
    ``log q`` is off by a few ``2^-24`` relative to ``log C`` (the size of a log-probability, ``C`` classes),
    so each row's KL term ``sum_y p (log p - log q)`` by at most ``~8 x 2^-24 log C``, and the score
    ``exp(mean KL)`` by that much relative; a factor 4 covers the accumulation of the sums.
    """
    return 32 * U32 * math.log(num_classes)


@pytest.mark.filterwarnings("ignore:Metric `InceptionScore` will save all extracted features")
def test_inception_score_equals_ours(weights, float_sets):
    images = torch.cat([x for x, _ in float_sets])
    logits = torch.cat([out["logits"] for _, out in float_sets])
    n, splits = len(images), 5
    module = NoTrainInceptionV3(
        "inception-v3-compat", ["logits_unbiased"], feature_extractor_weights_path=str(weights), antialias=False
    )
    metric = InceptionScore(feature=module, splits=splits, normalize=True)
    metric.update(images)
    with torch.random.fork_rng():
        torch.manual_seed(11)
        order = torch.randperm(n)  # the permutation its compute() draws next
        torch.manual_seed(11)
        tm_mean, tm_std = metric.compute()
    theirs_logits = torch.cat(metric.features) if isinstance(metric.features, list) else metric.features
    logits_ratio = _ratio(logits, theirs_logits)
    mean, std = inception_score(logits[order], splits=splits, shuffle=False)
    tol = is_tolerance(logits.shape[1])
    mean_rel = abs(float(tm_mean) / float(mean) - 1)
    std_diff = abs(float(tm_std) - float(std) * math.sqrt(splits / (splits - 1)))
    print(
        f"\ntorchmetrics IS vs inception_score(ours) ({n} float images at {SET_SIZE}px, splits={splits}, its "
        f"permutation): logits max|diff|/range = {logits_ratio:.3g}; mean {float(tm_mean):.7g} vs "
        f"{float(mean):.10g} (relative {mean_rel:.3g}), std {float(tm_std):.6g} vs ours x sqrt(5/4) "
        f"{float(std) * math.sqrt(splits / (splits - 1)):.6g} (|diff| / mean {std_diff / float(mean):.3g}); "
        f"tolerance {tol:.3g}"
    )
    assert logits_ratio <= FEATURE_TOL, logits_ratio
    assert float(mean) > 1.2  # the logits are far from uniform: the score is not the trivial 1
    assert mean_rel <= tol, (float(tm_mean), float(mean))
    # each score is off by <= tol x score, <= tol x splits x mean (the scores are positive); a std moves by at
    # most the ddof-1 std of those errors, <= sqrt(splits / (splits - 1)) x their maximum <= 2 x their maximum
    assert std_diff <= 2 * tol * splits * float(mean), (float(tm_std), float(std))

    # splits=3: torch.chunk gives rows 4, 4, 2 of its permutation; each chunk's score is ours with splits=1
    uneven = InceptionScore(feature=torch.nn.Identity(), splits=3)
    uneven.update(theirs_logits)
    with torch.random.fork_rng():
        torch.manual_seed(12)
        order = torch.randperm(n)
        torch.manual_seed(12)
        un_mean, un_std = uneven.compute()
    chunks = logits[order].chunk(3)
    assert [len(c) for c in chunks] == [4, 4, 2]
    scores = torch.stack([inception_score(c, splits=1, shuffle=False)[0] for c in chunks])
    rel = abs(float(un_mean) / float(scores.mean()) - 1)
    std_diff = abs(float(un_std) - float(scores.std(correction=1)))
    print(
        f"torchmetrics IS splits=3 (chunks 4, 4, 2) vs per-chunk inception_score(splits=1): mean relative {rel:.3g}, "
        f"ddof-1 std |diff| / mean {std_diff / float(scores.mean()):.3g}"
    )
    assert rel <= tol and std_diff <= 2 * tol * float(scores.max()), (rel, std_diff)
