"""``PRDCallback(protocol=..., weights=...)``: the protocol sets the extractor, k, ball and sample counts; an explicit
argument that contradicts it raises; the fingerprint is logged once per fit (TensorBoard, CSV, W&B) and kept in the
checkpoint state.

A stand-in network (a seeded ``Linear(2, 4)`` whose weights live in a file) and a stand-in protocol keep the tests
fast and free of downloads; the values checked come from the file itself (its bytes' SHA-256, its state dict) and
from the arguments given, never from the code under test.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import warnings

import pytest
import pytorch_lightning as pl
import torch
import yaml
from pytorch_lightning.loggers import CSVLogger, Logger, TensorBoardLogger
from torch import nn

from lightning_prd import GenerativeMetrics, PRDCallback
from lightning_prd.features import register_extractor
from lightning_prd.protocols import Protocol, get_protocol, register_protocol, unregister_protocol

from tiny_modules import QUIET, GaussianSampler

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)

REAL = torch.randn(50, 2, generator=torch.Generator().manual_seed(0))
WEIGHTS_NAME = "standin-weights.pt"


class StandIn(nn.Module):
    """A seeded ``Linear(2, 4)``; resize and quantisation kept private, shown only through ``preprocessing``."""

    name = "standin-net"
    num_features = 4
    input_dtype = input_range = input_size = None
    weights_sha256 = None

    def __init__(self, weights=None, resize="area", quantisation="round", random_init=False):
        super().__init__()
        self.linear = nn.Linear(2, 4)
        self._resize, self._quantisation = resize, quantisation
        if weights is not None:
            self.linear.load_state_dict(torch.load(weights, weights_only=True))

    @property
    def preprocessing(self):
        return {"resize": self._resize, "quantisation": self._quantisation, "input_size": None}

    def forward(self, x):
        return self.linear(x.float())


def save_weights(path, seed):
    torch.manual_seed(seed)
    torch.save(nn.Linear(2, 4).state_dict(), path)
    return path


@pytest.fixture
def standin(tmp_path):
    """The registered stand-in network and protocol ``standin`` (k=3, closed, 40 real, 60 generated), and its file."""
    register_extractor("standin-net", lambda weights=None, **o: StandIn(weights, **o), overwrite=True)
    protocol = Protocol(
        name="standin",
        extractor="standin-net",
        extractor_options={"resize": "area"},
        weights_files=(WEIGHTS_NAME,),
        weights_sha256=(),
        weights_url=None,
        k_precision_recall=3,
        ball="closed",
        num_real=40,
        num_fake=60,
        scores=("precision", "recall"),
        matches="a test stand-in",
        quantisation="round",
    )
    register_protocol(protocol, overwrite=True)
    folder = tmp_path / "weights"
    folder.mkdir()
    yield protocol, save_weights(folder / WEIGHTS_NAME, 1)
    unregister_protocol("standin")


def test_the_protocol_sets_extractor_k_ball_and_counts(standin):
    protocol, path = standin
    cb = PRDCallback(REAL, protocol="standin", weights=str(path))
    assert cb.protocol is protocol
    assert isinstance(cb.feature_extractor, StandIn) and cb.feature_extractor.preprocessing["resize"] == "area"
    for name, value in torch.load(path, weights_only=True).items():  # the protocol's file, loaded
        assert torch.equal(cb.feature_extractor.linear.state_dict()[name], value)
    assert (cb.num_samples, cb.num_real) == (60, 40)
    assert (cb.metric.k_precision_recall, cb.metric.ball) == (3, "closed")
    # agreeing explicit values are accepted
    same = PRDCallback(
        REAL, protocol="standin", weights=path, num_samples=60, num_real=40, feature_extractor="standin-net"
    )
    assert (same.num_samples, same.metric.k_precision_recall) == (60, 3)
    PRDCallback(REAL, protocol="standin", weights=path, metric={"k_precision_recall": 3, "ball": "closed"})
    PRDCallback(REAL, protocol="standin", weights=path, feature_extractor={"resize": "area"})


def test_a_protocol_without_a_network_sets_k_ball_and_counts():
    prdc = get_protocol("prdc")  # clovaai prdc: nearest_k = 5, strict <, 10,000 and 10,000
    cb = PRDCallback(REAL, protocol="prdc")
    assert (
        cb.num_samples,
        cb.num_real,
        cb.metric.k_precision_recall,
        cb.metric.k_density_coverage,
        cb.metric.ball,
    ) == (10000, 10000, 5, 5, "open")
    assert cb.feature_extractor is None or cb.feature_extractor(REAL[:3]).shape == (3, 2)
    own = nn.Linear(2, 3)  # features as given: any extractor may feed them
    assert PRDCallback(REAL, protocol=prdc, feature_extractor=own).feature_extractor is own


def test_without_a_protocol_nothing_changes():
    cb = PRDCallback(REAL)
    assert cb.protocol is None and (cb.num_samples, cb.num_real) == (2048, None)
    assert (cb.metric.k_precision_recall, cb.metric.k_density_coverage, cb.metric.ball) == (3, 5, "closed")


@pytest.mark.parametrize(
    "kwargs, argument, given, fixed",
    [
        (dict(num_samples=2048), "num_samples", "2048", "60"),
        (dict(num_real=10), "num_real", "10", "40"),
        (dict(feature_extractor="identity"), "feature_extractor", "'identity'", "'standin-net'"),
        (dict(feature_extractor={"name": "identity"}), "feature_extractor", "'identity'", "'standin-net'"),
        (dict(feature_extractor={"resize": "bicubic"}), "resize", "'bicubic'", "'area'"),
        (dict(metric={"k_precision_recall": 5}), "k_precision_recall", "5", "3"),
        (dict(metric={"ball": "open"}), "ball", "'open'", "'closed'"),
        (dict(metric=GenerativeMetrics(k_precision_recall=5)), "metric.k_precision_recall", "5", "3"),
        (dict(metric=GenerativeMetrics(ball="open")), "metric.ball", "'open'", "'closed'"),
    ],
)
def test_an_explicit_argument_that_contradicts_the_protocol_raises(standin, kwargs, argument, given, fixed):
    _, path = standin
    with pytest.raises(ValueError) as info:
        PRDCallback(REAL, protocol="standin", weights=path, **kwargs)
    text = str(info.value)
    assert f"`{argument}`" in text and "'standin'" in text and f"sets it to {fixed}" in text and f"got {given}" in text


def test_a_module_extractor_with_a_networked_protocol_is_refused(standin):
    _, path = standin
    with pytest.raises(
        ValueError, match="Expected argument `feature_extractor` to be left out with protocol 'standin'"
    ):
        PRDCallback(REAL, protocol="standin", weights=path, feature_extractor=StandIn(path))


def test_weights_that_are_not_the_protocols_file_raise(standin, tmp_path):
    _, path = standin
    other = save_weights(tmp_path / "other.pt", 2)
    with pytest.raises(ValueError) as info:
        PRDCallback(REAL, protocol="standin", weights=other)
    assert WEIGHTS_NAME in str(info.value) and "other.pt" in str(info.value)
    with pytest.raises(TypeError) as info:  # a missing file: the callback's rule for extractors that cannot build
        PRDCallback(REAL, protocol="standin", weights=tmp_path / "weights" / "missing" / WEIGHTS_NAME)
    assert "`protocol`='standin'" in str(info.value) and "does not exist" in str(info.value)
    with pytest.raises(ValueError, match="weights once"):
        PRDCallback(REAL, protocol="standin", weights=path, feature_extractor={"weights": str(path)})
    with pytest.raises(ValueError, match="`protocol`"):
        PRDCallback(REAL, protocol="no-such-protocol")


def test_weights_without_a_protocol_go_to_the_named_extractor(standin):
    _, path = standin
    cb = PRDCallback(REAL, feature_extractor="standin-net", weights=path)
    assert torch.equal(cb.feature_extractor.linear.weight, torch.load(path, weights_only=True)["weight"])
    with pytest.raises(ValueError, match="Expected argument `weights` only with a protocol"):
        PRDCallback(REAL, feature_extractor=StandIn(), weights=path)


class WithLogits(StandIn):
    """:class:`StandIn` returning a dict of outputs, as ``FIDInceptionFeatures(logits=True)`` does."""

    def forward(self, x):
        pool = super().forward(x)
        return {"pool": pool, "logits": pool[:, :2] * 10, "spatial": pool[:, 1:]}


def test_a_dict_output_feeds_its_pool_entry_to_the_metric(standin):
    _, path = standin
    histories = []
    for net in (StandIn(path), WithLogits(path)):
        cb = PRDCallback(REAL, feature_extractor=net, num_samples=40, log_curves=False)
        _fit(cb, False, epochs=1)
        histories.append(cb.history)
    assert histories[0] == histories[1] and "precision" in histories[0][0]


# ------------------------------------------------------------------------------------------- the fingerprint
class Recording(CSVLogger):
    """A CSVLogger that records every ``log_hyperparams`` call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def log_hyperparams(self, params, *args, **kwargs):
        self.calls.append(dict(params))
        super().log_hyperparams(params, *args, **kwargs)


class HParamsModule(GaussianSampler):
    def __init__(self, lr: float = 0.25):
        super().__init__()
        self.save_hyperparameters()


def _fit(cb, loggers, epochs=3, module=None, ckpt_path=None, **trainer_kwargs):
    settings = {**QUIET, "logger": loggers, "max_epochs": epochs, "log_every_n_steps": 1, "callbacks": [cb]}
    trainer = pl.Trainer(**{**settings, **trainer_kwargs})
    trainer.fit(module or GaussianSampler(), ckpt_path=ckpt_path)
    return trainer


def _expected(path, **extra):
    """The stand-in protocol's fingerprint fields, from the file and the protocol's own numbers."""
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    out = dict(protocol="standin", extractor="standin-net", weights_sha256=sha, resize="area", quantisation="round")
    out.update(num_real=40, num_fake=60, k_precision_recall=3, ball="closed", dtype="float32")
    out.update(extra)
    return out


def _text_events(run_dir, tag):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    found = []
    for file in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        for event in EventFileLoader(file).Load():
            for value in event.summary.value:
                if value.tag == tag:
                    found.append(json.loads(value.tensor.string_val[0].decode()))
    return found


def _last_hparams(run_dir):
    """The hyperparameters of the run's last HParams session start (what TensorBoard's HParams tab shows)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2

    last = None
    for file in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        for event in EventFileLoader(file).Load():
            for value in event.summary.value:
                if value.tag == "_hparams_/session_start_info":
                    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                    hparams = data.session_start_info.hparams
                    last = {k: getattr(v, v.WhichOneof("kind")) for k, v in hparams.items()}
    return last


def test_the_fingerprint_is_logged_once_per_fit_to_tensorboard_and_csv(standin, tmp_path):
    _, path = standin
    tb = TensorBoardLogger(tmp_path, name="tb")
    csv_logger = Recording(tmp_path, name="csv")
    cb = PRDCallback(REAL, protocol="standin", weights=path)
    _fit(cb, [tb, csv_logger], module=HParamsModule())
    assert len(cb.history) == 3
    expected = _expected(path)
    assert {k: cb.fingerprint[k] for k in expected} == expected
    assert cb.fingerprint["version"] is not None
    # CSV: one log_hyperparams call with the fingerprint, fingerprint.json, hparams.yaml
    ours = [c for c in csv_logger.calls if "prd/fingerprint" in c]
    assert len(ours) == 1 and ours[0]["prd/fingerprint"] == cb.fingerprint
    with open(os.path.join(csv_logger.log_dir, "fingerprint.json")) as fh:
        assert json.load(fh) == cb.fingerprint
    with open(os.path.join(csv_logger.log_dir, "hparams.yaml")) as fh:
        assert yaml.safe_load(fh)["prd/fingerprint"] == cb.fingerprint
    # TensorBoard: one text event, and the HParams tab keeps the module's own hyperparameters beside it
    assert _text_events(tb.log_dir, "prd/fingerprint/text_summary") == [cb.fingerprint]
    shown = _last_hparams(tb.log_dir)
    assert (
        shown["lr"] == 0.25
        and shown["prd/fingerprint/k_precision_recall"] == 3
        and shown["prd/fingerprint/resize"] == "area"
    )
    assert cb.state_dict()["fingerprint"] == cb.fingerprint


class FakeConfig:
    def __init__(self):
        self.updates = []

    def update(self, data, allow_val_change=False):
        self.updates.append((dict(data), allow_val_change))


class FakeRun:
    def __init__(self):
        self.config, self.logged, self.summary = FakeConfig(), [], {}

    def define_metric(self, name, **kwargs):
        pass

    def log(self, data):
        self.logged.append(data)


class WandbLogger(Logger):
    """Named like Lightning's, so the callback picks the W&B adapter; its run records config updates."""

    def __init__(self):
        super().__init__()
        self.run = FakeRun()

    name = property(lambda self: "wandb")
    version = property(lambda self: 0)
    experiment = property(lambda self: self.run)

    def log_hyperparams(self, params, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        pass


def test_the_fingerprint_goes_into_the_wandb_config_once(standin):
    _, path = standin
    logger = WandbLogger()
    cb = PRDCallback(REAL, protocol="standin", weights=path, log_curves=False)
    _fit(cb, [logger])
    assert len(logger.run.logged) == 3  # three evaluations
    assert logger.run.config.updates == [({"prd/fingerprint": cb.fingerprint}, True)]


def test_the_fingerprint_is_in_a_real_wandb_offline_runs_config(standin, tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb", reason="the W&B offline run needs wandb")
    from pytorch_lightning.loggers import WandbLogger as LightningWandbLogger
    from test_loggers import _wait_for_exit_record

    _, path = standin
    quiet = dict(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true", WANDB_CONSOLE="off")
    for key, value in dict(quiet, WANDB_DISABLE_GIT="true", WANDB_DISABLE_CODE="true").items():
        monkeypatch.setenv(key, value)
    cb = PRDCallback(REAL, protocol="standin", weights=path, log_curves=False)
    try:
        _fit(cb, LightningWandbLogger(save_dir=str(tmp_path), offline=True, project="prd-test"), epochs=2)
    finally:
        wandb.finish()
    try:
        (log_file,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "*.wandb"))
        records = _wait_for_exit_record(log_file)
    except Exception as err:  # noqa: BLE001 - the .wandb format is private to wandb
        pytest.skip(f"cannot parse this wandb version's .wandb file: {err}")
    updates = [
        json.loads(item.value_json)
        for r in records
        if r.WhichOneof("record_type") == "config"
        for item in r.config.update
        if (item.key or "/".join(item.nested_key)) == "prd/fingerprint"
    ]
    assert updates == [cb.fingerprint]


def test_a_real_set_smaller_than_the_protocols_count_is_warned_about_once(standin):
    _, path = standin
    cb = PRDCallback(REAL[:30], protocol="standin", weights=path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit(cb, False, epochs=2)
    said = [str(w.message) for w in caught if "real samples" in str(w.message)]
    assert len(said) == 1 and "40" in said[0] and "30" in said[0], said
    assert cb.fingerprint["num_real"] == 30


def test_a_resume_with_another_fingerprint_warns(standin, tmp_path):
    _, path = standin
    first = PRDCallback(REAL, protocol="standin", weights=path)
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    _fit(first, False, epochs=1, enable_checkpointing=True, callbacks=[first, ckpt])
    saved = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=False)["callbacks"]
    assert [s["fingerprint"] for s in saved.values() if "fingerprint" in s] == [first.fingerprint]
    again = dataclasses.replace(get_protocol("standin"), name="standin", num_fake=70)
    register_protocol(again, overwrite=True)
    second = PRDCallback(REAL, protocol="standin", weights=path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit(second, False, epochs=2, ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"), callbacks=[second])
    said = [str(w.message) for w in caught if "another fingerprint" in str(w.message)]
    assert len(said) == 1 and "num_fake 60 -> 70" in said[0], said
    assert second.fingerprint["num_fake"] == 70


LIGHTNING_CLI_CONFIG = """\
trainer:
  max_epochs: 1
  accelerator: cpu
  devices: 1
  enable_progress_bar: false
  enable_model_summary: false
  enable_checkpointing: false
  logger: false
  default_root_dir: {root}
  callbacks:
    - class_path: lightning_prd.PRDCallback
      init_args:
        real: datamodule:train
        sample_fn: tiny_modules:sample_gaussian
        protocol: standin
        weights: {weights}
data:
  num_points: 48
  batch_size: 12
"""


def test_protocol_and_weights_in_a_lightning_cli_yaml(standin, tmp_path):
    pytest.importorskip("jsonargparse", reason="LightningCLI needs jsonargparse")
    from pytorch_lightning.cli import LightningCLI

    from tiny_modules import PointsData, TinyGenerator

    _, path = standin
    config = tmp_path / "config.yaml"
    config.write_text(LIGHTNING_CLI_CONFIG.format(weights=path.as_posix(), root=(tmp_path / "run").as_posix()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cli = LightningCLI(TinyGenerator, PointsData, args=["fit", "--config", str(config)], save_config_kwargs={})
    cb = next(c for c in cli.trainer.callbacks if isinstance(c, PRDCallback))
    assert cb.protocol.name == "standin" and isinstance(cb.feature_extractor, StandIn)
    assert (cb.num_samples, cb.num_real, cb.metric.k_precision_recall) == (60, 40, 3)
    assert cb.fingerprint["num_real"] == 40 and len(cb.history) == 1
