"""``lightning-prd evaluate --protocol NAME``: the protocol's extractor, k, ball, scores and sample counts at once;
the FID table (FID, sFID, IS, precision, recall) from one network pass; contradicting flags are usage errors
(exit status 2); the fingerprint in ``--json``.

The network is a seeded stand-in registered as ``fid-inception`` (the real one runs at 299 px, about 0.1 s an
image on this CPU), whose outputs the test recomputes from the image files and scores with float64 NumPy
oracles; one test runs the real FID Inception (random weights) on two small folders."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from lightning_prd.cli import main
from lightning_prd.features import register_extractor
from lightning_prd.features import registry as registry_module
from lightning_prd.features.base import FeatureExtractor
from lightning_prd.protocols import get_protocol, register_protocol

import oracle


class StandInFID(FeatureExtractor):
    """The FID Inception's interface (``logits=True``: pool, logits, spatial) on a tiny seeded network."""

    num_features = 6
    input_dtype = torch.uint8

    def __init__(self, weights=None, *, resize="tf1", logits=False, random_init=False, seed=0, quantisation="floor"):
        super().__init__()
        self.logits, self.name = logits, "fid-inception"
        self.preprocessing = {"resize": resize, "quantisation": quantisation, "input_size": [12, 12]}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.conv = nn.Conv2d(3, 4, 3, stride=2)
            self.pool, self.fc = nn.Linear(4, 6), nn.Linear(6, 10)

    def forward(self, x):
        h = torch.relu(self.conv(x.float() / 127.5 - 1))
        pool = self.pool(h.mean((2, 3)))
        if not self.logits:
            return pool
        return {"pool": pool, "logits": 3 * self.fc(pool), "spatial": h[:, :, :2, :2].flatten(1)}


@pytest.fixture
def stand_ins(tmp_path):
    """``fid-inception`` and ``dinov2`` replaced by stand-ins, and the ``fid`` protocol made to accept a weights
    file of theirs by its SHA-256 (all restored afterwards)."""
    weights = tmp_path / "stand-in-inception.pth"
    torch.save(StandInFID().state_dict(), weights)
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    before = {name: registry_module._REGISTRY[name] for name in ("fid-inception", "dinov2")}
    fid = get_protocol("fid")
    register_extractor("fid-inception", StandInFID, overwrite=True)
    register_extractor("dinov2", lambda weights=None, **options: StandInFID(), overwrite=True)
    register_protocol(dataclasses.replace(fid, weights_sha256=(digest,)), overwrite=True)
    yield weights, digest
    register_protocol(fid, overwrite=True)
    for name, factory in before.items():
        register_extractor(name, factory, overwrite=True)


def _folder(path, n, seed, size=12):
    path.mkdir()
    g = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(g.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path / f"{i:03d}.png")
    return path


@pytest.fixture
def folders(tmp_path):
    return _folder(tmp_path / "real", 14, 0), _folder(tmp_path / "fake", 12, 1)


def _outputs(folder):
    """The stand-in's outputs on a folder's images, read here with PIL (sorted names), as float64 NumPy."""
    images = [np.asarray(Image.open(p).convert("RGB")) for p in sorted(folder.glob("*.png"))]
    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()
    with torch.no_grad():
        out = StandInFID(logits=True)(x)
    return {k: v.double().numpy() for k, v in out.items()}


def _inception_score(logits, splits=10, seed=2020):
    """IS from the formula (Salimans et al. 2016), torch-fidelity's splits: a seeded permutation, parts
    [i N // splits, (i + 1) N // splits), mean and population standard deviation."""
    logits = logits[np.random.RandomState(seed).permutation(len(logits))]
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n, scores = len(p), []
    for i in range(splits):
        part = p[i * n // splits : (i + 1) * n // splits]
        kl = (part * (np.log(part) - np.log(part.mean(0, keepdims=True)))).sum(1).mean()
        scores.append(np.exp(kl))
    return float(np.mean(scores)), float(np.std(scores))


def _run(argv, tmp_path, capsys):
    out = tmp_path / "out.json"
    code = main(["evaluate", *argv, "--json", str(out), "-q", "--device", "cpu"])
    captured = capsys.readouterr()
    return code, (json.loads(out.read_text()) if out.exists() else None), captured


def test_fid_protocol_on_image_folders_gives_the_one_pass_table(stand_ins, folders, tmp_path, capsys):
    weights, digest = stand_ins
    real, fake = folders
    argv = ["--protocol", "fid", "--real", str(real), "--fake", str(fake), "--weights", str(weights)]
    code, payload, captured = _run(argv, tmp_path, capsys)
    assert code == 0, captured.err
    scores = payload["scores"]
    assert list(scores) == ["precision", "recall", "frechet_distance", "sfid", "inception_score", "inception_score_std"]
    r, f = _outputs(real), _outputs(fake)
    precision, recall = oracle.precision_recall(r["pool"], f["pool"], k=3)
    assert scores["precision"] == pytest.approx(precision) and scores["recall"] == pytest.approx(recall)
    assert scores["frechet_distance"] == pytest.approx(oracle.frechet(r["pool"], f["pool"]), rel=1e-4, abs=1e-6)
    assert scores["sfid"] == pytest.approx(oracle.frechet(r["spatial"], f["spatial"]), rel=1e-4, abs=1e-6)
    mean, std = _inception_score(f["logits"])
    assert scores["inception_score"] == pytest.approx(mean, rel=1e-5)
    assert scores["inception_score_std"] == pytest.approx(std, rel=1e-4, abs=1e-9)
    fp = payload["fingerprint"]
    assert (fp["protocol"], fp["extractor"], fp["weights_sha256"], fp["resize"]) == (
        "fid",
        "fid-inception",
        digest,
        "tf1",
    )
    assert (fp["num_real"], fp["num_fake"], fp["k_precision_recall"], fp["ball"]) == (14, 12, 3, "closed")
    assert payload["protocol"]["name"] == "fid" and payload["settings"]["protocol"] == "fid"
    assert "fewer than the 50,000" in captured.err  # the protocol's count, not reached
    table = {line.split()[0] for line in captured.out.splitlines() if line.split()}
    assert {"sfid", "inception_score", "inception_score_std", "protocol"} <= table


def test_compare_with_a_protocol_gives_a_fingerprint_per_set(stand_ins, folders, tmp_path, capsys):
    weights, _ = stand_ins
    real, fake = folders
    other = _folder(tmp_path / "other", 10, 2)
    out = tmp_path / "cmp.json"
    argv = ["compare", "--protocol", "fid", "--real", str(real), "--fake", str(fake), str(other)]
    assert main([*argv, "--weights", str(weights), "--json", str(out), "-q"]) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["fingerprint"]["num_fake"] for r in results] == [12, 10]
    assert all("sfid" in r["scores"] and "inception_score" in r["scores"] for r in results)


@pytest.mark.parametrize(
    "flags, value",
    [
        (["--k-precision-recall", "5"], "3"),
        (["--ball", "open"], "'closed'"),
        (["--extractor", "vgg16"], "'fid-inception'"),
        (["--k-density-coverage", "5"], "None"),
        (["--probabilistic"], "False"),
        (["--num-samples", "50000"], "all real"),
    ],
)
def test_a_flag_against_the_protocol_is_a_usage_error(stand_ins, folders, tmp_path, capsys, flags, value):
    weights, _ = stand_ins
    real, fake = folders
    argv = ["--protocol", "fid", "--real", str(real), "--fake", str(fake), "--weights", str(weights), *flags]
    code, payload, captured = _run(argv, tmp_path, capsys)
    assert code == 2 and payload is None
    assert flags[0] in captured.err and "'fid'" in captured.err and value in captured.err, captured.err
    assert captured.err.count("\n") == 1


def test_only_frechet_scores_the_protocols_frechet_distance_alone(stand_ins, folders, tmp_path, capsys):
    weights, _ = stand_ins
    real, fake = folders
    argv = [
        "--protocol",
        "fid",
        "--real",
        str(real),
        "--fake",
        str(fake),
        "--weights",
        str(weights),
        "--only",
        "frechet",
    ]
    code, payload, captured = _run(argv, tmp_path, capsys)
    assert code == 0, captured.err
    assert list(payload["scores"]) == ["frechet_distance"]
    np.save(tmp_path / "a.npy", np.zeros((5, 2), np.float32))
    argv = ["--protocol", "prdc", "--real", str(tmp_path / "a.npy"), "--fake", str(tmp_path / "a.npy")]
    code, _, captured = _run([*argv, "--only", "frechet"], tmp_path, capsys)
    assert code == 2 and "--only frechet" in captured.err and "'prdc'" in captured.err


def test_flags_that_agree_with_the_protocol_are_accepted(stand_ins, folders, tmp_path, capsys):
    weights, _ = stand_ins
    real, fake = folders
    agree = [
        "--k-precision-recall",
        "3",
        "--ball",
        "closed",
        "--extractor",
        "fid-inception",
        "--no-prd",
        "--no-probabilistic",
    ]
    argv = ["--protocol", "fid", "--real", str(real), "--fake", str(fake), "--weights", str(weights), *agree, "--kid"]
    code, payload, captured = _run(argv, tmp_path, capsys)
    assert code == 0, captured.err
    assert "kid" in payload["scores"]  # a score the protocol does not name stays free


def test_a_weights_file_that_is_not_the_protocols_is_refused(stand_ins, folders, tmp_path, capsys):
    real, fake = folders
    other = tmp_path / "inception_v3_google-0cc3c7bd.pth"
    other.write_bytes(b"torchvision's ImageNet Inception")
    code, _, captured = _run(
        ["--protocol", "fid", "--real", str(real), "--fake", str(fake), "--weights", str(other)], tmp_path, capsys
    )
    assert code == 1
    assert "pt_inception-2015-12-05-6726825d.pth" in captured.err and "inception_v3_google" in captured.err


def test_an_unknown_protocol_is_a_usage_error(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.zeros((5, 2), np.float32))
    code, _, captured = _run(
        ["--protocol", "fid50k", "--real", str(tmp_path / "a.npy"), "--fake", str(tmp_path / "a.npy")], tmp_path, capsys
    )
    assert code == 2 and "fid50k" in captured.err and "pr50k3" in captured.err


def test_prdc_protocol_on_features_equals_the_prdc_package(tmp_path, capsys):
    prdc = pytest.importorskip("prdc", reason="the prdc package is the reference of the 'prdc' protocol")
    g = np.random.default_rng(3)
    real, fake = g.normal(size=(60, 5)).astype(np.float32), (g.normal(size=(50, 5)) + 0.4).astype(np.float32)
    np.save(tmp_path / "real.npy", real)
    np.save(tmp_path / "fake.npy", fake)
    code, payload, captured = _run(
        ["--protocol", "prdc", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy")],
        tmp_path,
        capsys,
    )
    assert code == 0, captured.err
    want = prdc.compute_prdc(real, fake, nearest_k=5)
    assert sorted(payload["scores"]) == sorted(want)
    for key, value in want.items():
        assert payload["scores"][key] == pytest.approx(float(value), abs=1e-6), key
    fp = payload["fingerprint"]
    assert (fp["extractor"], fp["k_precision_recall"], fp["ball"], fp["num_real"], fp["num_fake"]) == (
        "identity",
        5,
        "open",
        60,
        50,
    )


def test_the_protocols_sample_counts_subsample_each_set(tmp_path, capsys):
    small = dataclasses.replace(get_protocol("prdc"), name="prdc-small", num_real=30, num_fake=25)
    register_protocol(small, overwrite=True)
    try:
        g = np.random.default_rng(4)
        np.save(tmp_path / "real.npy", g.normal(size=(50, 3)).astype(np.float32))
        np.save(tmp_path / "fake.npy", g.normal(size=(40, 3)).astype(np.float32))
        code, payload, captured = _run(
            ["--protocol", "prdc-small", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy")],
            tmp_path,
            capsys,
        )
    finally:
        from lightning_prd.protocols import unregister_protocol

        unregister_protocol("prdc-small")
    assert code == 0, captured.err
    assert (payload["fingerprint"]["num_real"], payload["fingerprint"]["num_fake"]) == (30, 25)
    assert (payload["real"]["num_samples"], payload["real"]["num_available"]) == (30, 50)
    assert "fewer than" not in captured.err


def test_a_frechet_only_protocol(stand_ins, folders, tmp_path, capsys):
    real, fake = folders
    weights = tmp_path / "dinov2_vitl14_pretrain.pth"  # no published digest: accepted by its name
    weights.write_bytes(b"stand-in")
    argv = ["--protocol", "fd-dinov2", "--real", str(real), "--fake", str(fake), "--weights", str(weights)]
    code, payload, captured = _run(argv, tmp_path, capsys)
    assert code == 0, captured.err
    r, f = _outputs(real), _outputs(fake)
    assert list(payload["scores"]) == ["frechet_distance"]
    assert payload["scores"]["frechet_distance"] == pytest.approx(oracle.frechet(r["pool"], f["pool"]), rel=1e-4)
    assert payload["fingerprint"]["k_precision_recall"] is None
    code, _, captured = _run([*argv, "--k-precision-recall", "3"], tmp_path, capsys)
    assert code == 2 and "--k-precision-recall" in captured.err


def test_help_lists_the_protocols(capsys):
    assert main(["evaluate", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--protocol" in text and "pr50k3" in text and "vgg16.pt" in text


def test_the_fid_network_itself_on_image_folders(tmp_path, capsys):
    """``evaluate --protocol fid --real DIR --fake DIR --weights FILE`` with the real FID Inception (random
    weights in pytorch-fid's layout; the protocol is told their SHA-256, as it knows the published file's)."""
    from lightning_prd.features.fid_inception import FIDInceptionFeatures

    weights = tmp_path / "random-fid-inception.pth"
    torch.save(FIDInceptionFeatures(random_init=True, seed=3).net.state_dict(), weights)
    fid = get_protocol("fid")
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    register_protocol(dataclasses.replace(fid, weights_sha256=(digest,)), overwrite=True)
    try:
        real, fake = _folder(tmp_path / "real", 4, 5, size=16), _folder(tmp_path / "fake", 4, 6, size=16)
        argv = ["--protocol", "fid", "--real", str(real), "--fake", str(fake), "--weights", str(weights)]
        code, payload, captured = _run(argv, tmp_path, capsys)
    finally:
        register_protocol(fid, overwrite=True)
    assert code == 0, captured.err
    # 4 generated images: too few for the Inception Score's 10 splits (its values: the stand-in test above)
    assert set(payload["scores"]) == {"precision", "recall", "frechet_distance", "sfid"}
    assert "too few for the Inception Score" in captured.err
    assert all(np.isfinite(v) for v in payload["scores"].values())
    assert payload["fingerprint"]["weights_sha256"] == digest and payload["fingerprint"]["input_size"] == [299, 299]
