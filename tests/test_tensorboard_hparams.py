"""The fingerprint in TensorBoard's *HParams* tab and in ``hparams.yaml``, with either ``default_hp_metric``, and in the
CSV logger's and W&B's files.

A real ``Trainer`` writes the runs; TensorBoard's own reader (``plugin_event_multiplexer``, the source of the hparams
plugin's data) reads the hparams plugin data (``plugin_data_pb2``) of each run back, and ``hparams.yaml`` is read with
``yaml``. The expected values come from the callback's :attr:`fingerprint` and the module's hyperparameters.
"""

from __future__ import annotations

import glob
import json
import os
import warnings

import pytest
import pytorch_lightning as pl
import torch
import yaml
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger
from test_loggers import _wait_for_exit_record, offline_wandb_env

from lightning_prd.callback import PRDCallback

from tiny_modules import GaussianSampling, TinyTraining, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)

REAL = torch.randn(64, 2, generator=torch.Generator().manual_seed(0))
EPOCHS = 2


class Module(TinyTraining, GaussianSampling, pl.LightningModule):
    def __init__(self, lr=0.1, width=8):
        super().__init__()
        self.save_hyperparameters()

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.log("train_loss", loss)
        return loss


def fit(loggers, **cb_kwargs):
    cb = PRDCallback(REAL, num_samples=64, metric=dict(prd=False, alpha_beta=False), **cb_kwargs)
    quiet_trainer(loggers[0].save_dir, [cb], EPOCHS, logger=loggers, log_every_n_steps=1).fit(Module())
    return cb


def hparams_plugin_data(root):
    """Per run: the hparams plugin data of each of its tags, as TensorBoard's multiplexer gives it to the plugin."""
    from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer
    from tensorboard.plugins.hparams import metadata, plugin_data_pb2

    mux = EventMultiplexer()
    mux.AddRunsFromDirectory(str(root))
    mux.Reload()
    return {
        run: {tag: plugin_data_pb2.HParamsPluginData.FromString(content) for tag, content in tags.items()}
        for run, tags in mux.PluginRunToTagToContent(metadata.PLUGIN_NAME).items()
    }


def plain(value):
    """An hparams ``Value`` as a Python value."""
    return getattr(value, value.WhichOneof("kind"))


def as_shown(value):
    """How the HParams tab holds a hyperparameter: numbers as floats, bools as bools, anything else as text."""
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return str(value)


@pytest.mark.parametrize("default_hp_metric", [True, False])
def test_fingerprint_in_the_hparams_tab_and_hparams_yaml(tmp_path, default_hp_metric):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = TensorBoardLogger(str(tmp_path), name="tb", default_hp_metric=default_hp_metric)
    csv = CSVLogger(str(tmp_path), name="csv")
    cb = fit([tb, csv])
    fingerprint = cb.fingerprint
    assert fingerprint and {"extractor", "num_real", "k_precision_recall"} <= set(fingerprint)

    data = hparams_plugin_data(tmp_path)
    assert list(data) == ["tb/version_0"]  # one session, in the run itself
    tags = data["tb/version_0"]
    shown = {k: plain(v) for k, v in tags["_hparams_/session_start_info"].session_start_info.hparams.items()}
    expected = {"lr": 0.1, "width": 8.0, **{f"prd/fingerprint/{k}": as_shown(v) for k, v in fingerprint.items()}}
    assert shown == expected
    experiment = tags["_hparams_/experiment"].experiment
    assert {info.name for info in experiment.hparam_infos} == set(expected)
    metrics = {info.name.tag for info in experiment.metric_infos}
    scores = {f"prd/{name}" for name in cb.history[0] if name != "epoch"}
    assert metrics == scores | ({"hp_metric"} if default_hp_metric else set())

    acc = EventAccumulator(tb.log_dir, size_guidance={"scalars": 0})
    acc.Reload()
    assert "hp_metric" not in acc.Tags()["scalars"]  # no placeholder -1 among the user's scalars
    assert scores <= set(acc.Tags()["scalars"])  # the session's metrics have values
    assert tb._default_hp_metric is default_hp_metric  # the logger's setting is back after the fit

    for path in (os.path.join(tb.log_dir, "hparams.yaml"), os.path.join(csv.log_dir, "hparams.yaml")):
        with open(path) as fh:
            assert yaml.safe_load(fh) == {"lr": 0.1, "width": 8, "prd/fingerprint": fingerprint}, path
    with open(os.path.join(csv.log_dir, "fingerprint.json")) as fh:
        assert json.load(fh) == fingerprint


def test_a_fit_that_scores_nothing_keeps_the_loggers_own_session(tmp_path):
    tb = TensorBoardLogger(str(tmp_path), name="tb", default_hp_metric=True)
    fit([tb], every_n_epochs=EPOCHS + 1, evaluate_on_train_end=False)
    start = hparams_plugin_data(tmp_path)["tb/version_0"]["_hparams_/session_start_info"].session_start_info
    assert {k: plain(v) for k, v in start.hparams.items()} == {"lr": 0.1, "width": 8.0}
    experiment = hparams_plugin_data(tmp_path)["tb/version_0"]["_hparams_/experiment"].experiment
    assert [info.name.tag for info in experiment.metric_infos] == ["hp_metric"]


class Crashing(Module):
    def training_step(self, batch, batch_idx):
        if self.current_epoch == 1:
            raise RuntimeError("the user's own bug")
        return super().training_step(batch, batch_idx)


@pytest.mark.parametrize("default_hp_metric", [True, False])
def test_a_fit_that_crashes_gives_the_logger_its_setting_back(tmp_path, default_hp_metric):
    """Lightning calls no ``teardown`` after an exception: the setting comes back in ``on_exception``."""
    tb = TensorBoardLogger(str(tmp_path), name="tb", default_hp_metric=default_hp_metric)
    cb = PRDCallback(REAL, num_samples=64, metric=dict(prd=False, alpha_beta=False), verbose=False)
    with pytest.raises(RuntimeError, match="the user's own bug"):
        quiet_trainer(tmp_path, [cb], EPOCHS, logger=tb).fit(Crashing())
    assert tb._default_hp_metric is default_hp_metric


class Huge(Module):
    """Hyperparameters beyond float64 (``big``) and text that is no UTF-8 (``odd``, a lone surrogate)."""

    def __init__(self, lr=0.1, big=10**400, odd="\ud800"):
        super(Module, self).__init__()
        self.save_hyperparameters()


def _hparams_warnings(seen):
    return [str(w.message) for w in seen if "HParams" in str(w.message)]


def test_a_hyperparameter_the_tab_cannot_hold_is_written_as_text_or_left_out_and_the_fit_goes_on(tmp_path):
    tb = TensorBoardLogger(str(tmp_path), name="tb")
    cb = PRDCallback(REAL, num_samples=64, metric=dict(prd=False, alpha_beta=False))
    trainer = quiet_trainer(str(tmp_path), [cb], EPOCHS, logger=tb, log_every_n_steps=1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer.fit(Huge())
    assert trainer.current_epoch == EPOCHS and [r["epoch"] for r in cb.history] == list(range(EPOCHS))
    assert _hparams_warnings(seen) == [
        "TensorBoard's HParams tab cannot hold hyperparameter `big` (int of 401 digits): written as text; "
        "`odd` (str): left out (the others are written)"
    ]
    start = hparams_plugin_data(tmp_path)["tb/version_0"]["_hparams_/session_start_info"].session_start_info
    shown = {k: plain(v) for k, v in start.hparams.items()}
    fingerprint = {f"prd/fingerprint/{k}": as_shown(v) for k, v in cb.fingerprint.items()}
    assert shown == {"lr": 0.1, "big": "1" + "0" * 400, **fingerprint}


def test_values_the_tab_cannot_hold_as_they_are():
    from lightning_prd.loggers.tensorboard_hparams import session_values, writable_values

    class Unprintable:
        def __str__(self):
            raise RuntimeError("no text")

    params = {"lr": 0.1, "n": -(10**309), "digits": 10**5000, "object": Unprintable(), "nan": float("nan")}
    kept, notes = writable_values(session_values(params))
    assert kept == {"lr": 0.1, "n": "-1" + "0" * 309, "nan": pytest.approx(float("nan"), nan_ok=True)}
    assert notes == [
        "`n` (int of 310 digits): written as text",
        "`digits` (int of more digits than Python writes): left out",
        "`object` (Unprintable): left out",
    ]


def test_a_fit_that_scores_nothing_with_such_a_hyperparameter_ends_with_a_warning(tmp_path):
    """The logger's own placeholder session, written when the fit scored nothing, cannot hold ``10**400``."""
    tb = TensorBoardLogger(str(tmp_path), name="tb", default_hp_metric=True)
    cb = PRDCallback(REAL, num_samples=64, every_n_epochs=EPOCHS + 1, evaluate_on_train_end=False)
    trainer = quiet_trainer(str(tmp_path), [cb], EPOCHS, logger=tb)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer.fit(Huge())
    assert trainer.current_epoch == EPOCHS and cb.history == []
    assert _hparams_warnings(seen) == [
        "TensorBoard's HParams session was not written: OverflowError: int too large to convert to float"
    ]


def test_fingerprint_in_the_wandb_config_of_an_offline_run(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from pytorch_lightning.loggers import WandbLogger

    offline_wandb_env(monkeypatch, tmp_path)
    logger = WandbLogger(save_dir=str(tmp_path), offline=True, project="prd-hparams")
    try:
        cb = fit([logger])
        config = dict(logger.experiment.config)
    finally:
        wandb.finish()
    assert config["prd/fingerprint"] == cb.fingerprint
    (log_file,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "*.wandb"))
    try:
        records = _wait_for_exit_record(log_file)
    except Exception as err:  # noqa: BLE001 - the .wandb format is private to wandb
        pytest.skip(f"cannot parse this wandb version's .wandb file: {err}")
    written = {
        item.key: json.loads(item.value_json)
        for r in records
        if r.WhichOneof("record_type") == "config"
        for item in r.config.update
    }
    assert written["prd/fingerprint"] == cb.fingerprint  # in the run's file, which `wandb sync` uploads
