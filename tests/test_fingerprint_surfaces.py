"""Where the fingerprint goes besides the loggers: the real-feature cache key, ``lightning-prd runs`` (shown per run,
a warning naming the fields when the runs compared differ, none when they agree), and the real count under DDP.

Runs are logged by the callback itself (TensorBoard and CSV); the expected values come from the arguments of each
fit and from the weights files' bytes.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger
from test_callback_protocol import REAL, StandIn, save_weights, standin  # noqa: F401 - `standin` is a fixture
from torch.utils.tensorboard import SummaryWriter

from lightning_prd import PRDCallback
from lightning_prd.cli import main
from lightning_prd.features.cache import RealFeatureCache, cache_provenance

from ddp_utils import run_ddp
from tiny_modules import QUIET, GaussianSampler

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)


# ------------------------------------------------------------------------------------------- the cache key
def _key(extractor):
    return cache_provenance(extractor)["key"]


def test_the_cache_key_follows_resize_quantisation_and_weights_and_nothing_else(tmp_path):
    a = save_weights(tmp_path / "a.pt", 1)
    b = save_weights(tmp_path / "b.pt", 2)
    base = _key(StandIn(a))
    assert _key(StandIn(a)) == base  # another instance, the same file and settings: the same key
    assert _key(StandIn(str(a), resize="area", quantisation="round")) == base
    copy = tmp_path / "copy.pt"
    copy.write_bytes(a.read_bytes())
    assert _key(StandIn(copy)) == base  # the same weights under another name
    changed = {
        "resize": StandIn(a, resize="bicubic"),  # kept in a private attribute: only the fingerprint shows it
        "quantisation": StandIn(a, quantisation="none"),
        "weights": StandIn(b),
    }
    keys = {name: _key(net) for name, net in changed.items()}
    assert base not in keys.values() and len(set(keys.values())) == 3, keys
    declared = StandIn(a)
    # a declared file digest is provenance, not computation: the same tensors from another file (pytorch-fid's and
    # torch-fidelity's FID Inception files hold the same weights) or built another way share the key
    declared.weights_sha256 = hashlib.sha256(b.read_bytes()).hexdigest()
    assert _key(declared) == base


def test_the_disk_cache_misses_when_the_preprocessing_changes(tmp_path):
    weights = save_weights(tmp_path / "w.pt", 1)
    cache = RealFeatureCache(tmp_path / "cache")
    calls = []

    def run(net):
        def extract(x):
            calls.append(x.shape[0])
            return net(x)

        return torch.cat(list(cache.real_features(net, lambda: iter(REAL.split(16)), extract)))

    first = run(StandIn(weights))
    assert cache.last_status == "miss" and sum(calls) == REAL.shape[0]
    again = run(StandIn(weights))
    assert cache.last_status == "hit" and sum(calls) == REAL.shape[0] and torch.equal(first, again)
    run(StandIn(weights, resize="bicubic"))
    assert cache.last_status == "miss" and sum(calls) == 2 * REAL.shape[0]


# ------------------------------------------------------------------------------------------- lightning-prd runs
def _log_run(root, name, **cb_kwargs):
    """One fit of 2 epochs logged to ``root/tb/<name>`` and ``root/csv/<name>``; the callback's fingerprint."""
    cb = PRDCallback(REAL, **cb_kwargs)
    loggers = [TensorBoardLogger(root, name="tb", version=name), CSVLogger(root, name="csv", version=name)]
    pl.Trainer(**{**QUIET, "logger": loggers, "max_epochs": 2, "callbacks": [cb]}).fit(GaussianSampler())
    return cb.fingerprint


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    weights = save_weights(tmp_path_factory.mktemp("w") / "w.pt", 1)
    from lightning_prd.features import register_extractor

    register_extractor("standin-net", lambda weights=None, **o: StandIn(weights, **o), overwrite=True)
    prints = {
        "a": _log_run(root, "a", feature_extractor="standin-net", weights=weights, num_samples=64),
        "b": _log_run(root, "b", feature_extractor="standin-net", weights=weights, num_samples=64),
        "c": _log_run(root, "c", feature_extractor={"name": "standin-net", "resize": "bicubic"}, num_samples=32),
    }
    with SummaryWriter(str(root / "plain")) as writer:  # a run logged without the callback: no fingerprint
        for epoch in range(2):
            writer.add_scalar("prd/precision", 0.5, global_step=epoch)
    return root, prints, hashlib.sha256(weights.read_bytes()).hexdigest()


def _runs(argv, capsys):
    code = main(["runs", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert all(len(line) <= 100 for line in captured.err.splitlines() if "fingerprint" in line), captured.err
    return captured.out, _warnings(captured.err)


def _fingerprint_lines(out):
    """The fingerprint of each run below ``fingerprints:``, its wrapped lines joined; each printed line is at most
    100 columns."""
    lines = out.split("fingerprints:\n", 1)[1].splitlines()
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    runs = []
    for line in lines:
        if line.startswith("  ") and not line.startswith("   "):
            runs.append(line)
        elif line.startswith("   ") and runs:
            runs[-1] += " " + line.strip()
    return runs


def _warnings(err):
    """The warnings on stderr, each with its wrapped lines joined; each printed line is at most 100 columns."""
    out = []
    for line in err.splitlines():
        if "warning" in line:
            out.append(line)
        elif line.startswith("    ") and out:
            out[-1] += " " + line.strip()
    return out


def test_runs_show_the_fingerprints_and_do_not_warn_when_they_agree(logged, capsys, tmp_path):
    root, prints, sha = logged
    assert prints["a"]["weights_sha256"] == sha and prints["a"]["resize"] == "area"
    out, warned = _runs([str(root / "tb" / "a"), str(root / "tb" / "b"), str(root / "csv" / "a")], capsys)
    assert warned == []
    lines = _fingerprint_lines(out)
    assert len(lines) == 3
    for line, run in zip(lines, ("tb/a", "tb/b", "csv/a")):
        cells = line.split()
        assert cells[0] == run  # the parts of the runs' paths that tell them apart
        assert f"weights={sha[:12]}" in cells and "resize=area" in cells and "quantisation=round" in cells
        assert "N=50" in cells and "M=64" in cells and "k=3" in cells and "ball=closed" in cells
        assert "extractor=standin-net" in cells and "protocol=-" in cells
    report = tmp_path / "out.json"
    _runs([str(root / "tb" / "a"), str(root / "csv" / "b"), "--json", str(report)], capsys)
    data = json.loads(report.read_text())
    assert [r["fingerprint"] for r in data["runs"]] == [prints["a"], prints["b"]]
    assert data["fingerprint_differences"] == {}


def test_runs_warn_naming_the_fields_that_differ(logged, capsys, tmp_path):
    root, prints, _ = logged
    a, c = prints["a"], prints["c"]
    out, warned = _runs([str(root / "tb" / "a"), str(root / "csv" / "c")], capsys)
    assert len(warned) == 1, warned
    message = warned[0]
    differing = sorted(k for k in a if a[k] != c[k] and k != "version")
    assert set(differing) == {"resize", "num_fake", "weights_sha256"}
    shown = {"weights_sha256": (a["weights_sha256"][:12], "null")}  # the digest by its first 12 hex digits
    for key in differing:
        values = shown.get(key, (json.dumps(a[key]), json.dumps(c[key])))
        assert key in message and all(v in message for v in values), (key, message)
    assert a["weights_sha256"] not in message
    assert "not comparable" in message
    assert "resize=bicubic" in out and "M=32" in out
    report = tmp_path / "out.json"
    _runs([str(root / "tb" / "a"), str(root / "csv" / "c"), "--json", str(report)], capsys)
    table = json.loads(report.read_text())["fingerprint_differences"]
    assert sorted(table) == differing and table["num_fake"] == {"a": 64, "c": 32}


def test_runs_name_a_run_that_logged_no_fingerprint(logged, capsys):
    root, _, _ = logged
    out, warned = _runs([str(root / "tb" / "a"), str(root / "plain")], capsys)
    assert len(warned) == 1 and "plain logged no fingerprint" in warned[0], warned
    assert "no fingerprint logged" in out
    _, warned = _runs([str(root / "plain")], capsys)  # nothing to compare with: no warning
    assert warned == []


# ------------------------------------------------------------------------------------------- DDP
def _total(rank, world):
    from lightning_prd.callback.protocol import total_rows

    return total_rows(3 + rank, torch.device("cpu"))


def test_the_real_count_adds_every_ranks_rows():
    assert run_ddp(_total) == [7, 7]
