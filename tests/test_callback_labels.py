"""PRDCallback with a per-class metric: labels from ``sample_fn``, ``real_labels`` and ``(x, y)`` batches, the
per-class scores logged one chart per score, and bad labels refused naming where they came from.

The toy is conditional: three well-separated classes in 2-D, and a generator that never draws class 2.
Its logged per-class scores are checked against the float64 NumPy oracle on each class's rows.
"""

from __future__ import annotations

import csv
import glob
import math
import os
import re
import sys
import types
import warnings

import numpy as np
import pytest
import torch
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback
from lightning_prd.metrics.generative import GenerativeMetrics

import oracle
from tiny_modules import TinyTrainable, quiet_trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers.*", "ignore:.*smaller than the logging interval.*", "ignore:.*LeafSpec.*"
)

CENTRES = torch.tensor([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
N_PER_CLASS, N_FAKE = 30, 60
REAL_LABELS = torch.arange(3).repeat_interleave(N_PER_CLASS)
REAL = CENTRES[REAL_LABELS] + torch.randn(3 * N_PER_CLASS, 2, generator=torch.Generator().manual_seed(0))
#: a fast per-class metric: the k-NN scores and the Fréchet distance, overall and per class
PER_CLASS = dict(per_class=True, prd=False, alpha_beta=False, probabilistic=False, pr_cover=False)


class Recorder:
    """A ``sample_fn`` that draws classes 0 and 1 only (class 2 is dropped) and keeps what it returned."""

    def __init__(self, bad=None):
        self.calls, self.bad = [], bad

    def __call__(self, pl_module, n):
        labels = torch.arange(n) % 2
        x = CENTRES[labels] + torch.randn(n, 2)
        self.calls.append((x, labels))
        if self.bad is not None and pl_module.trainer.current_epoch >= 1:
            return x, self.bad(labels)
        return x, labels


class Tiny(TinyTrainable):
    pass


def _fit(tmp_path, cb, epochs=1, **kwargs):
    trainer = quiet_trainer(tmp_path, [cb], max_epochs=epochs, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer.fit(Tiny())
    return trainer


def _oracle_per_class(real, real_labels, fake, fake_labels):
    """Per class: precision, recall (k=3), density, coverage (k=5) from the NumPy oracle; dropped-class rules."""
    out = {}
    for c in range(3):
        r, f = real[real_labels == c].numpy(), fake[fake_labels == c].numpy()
        if len(f) == 0:
            out[c] = {"precision": math.nan, "recall": 0.0, "density": math.nan, "coverage": 0.0}
            continue
        p, rec = oracle.precision_recall(r, f, 3)
        d, cov = oracle.density_coverage(r, f, 5)
        out[c] = {"precision": p, "recall": rec, "density": d, "coverage": cov}
    return out


# ---------------------------------------------------------------------------------- values
def test_per_class_scores_equal_the_oracle_and_name_the_dropped_class(tmp_path):
    gen = Recorder()
    logger = TensorBoardLogger(tmp_path, name="tb")
    cb = PRDCallback(
        REAL, real_labels=REAL_LABELS, sample_fn=gen, num_samples=N_FAKE, batch_size=N_FAKE, metric=PER_CLASS
    )
    trainer = _fit(tmp_path, cb, epochs=2, logger=logger)
    fake, fake_labels = gen.calls[-1]
    want = _oracle_per_class(REAL, REAL_LABELS, fake, fake_labels)
    got = trainer.callback_metrics
    for c in range(3):
        for score, value in want[c].items():
            logged = float(got[f"prd/per_class/{score}/{c}"])
            assert logged == pytest.approx(value, abs=1e-6, nan_ok=True), (c, score)
    assert float(got["prd/per_class/coverage/2"]) == 0.0 and want[0]["coverage"] > 0.8
    assert int(got["prd/lowest_coverage_class"]) == 2 and float(got["prd/coverage_min"]) == 0.0
    assert float(got["prd/coverage_mean"]) == pytest.approx(np.mean([want[c]["coverage"] for c in range(3)]))
    # the overall scores are those of a plain metric on the same features (the keys users monitor are unchanged)
    plain = GenerativeMetrics(preset="training", **{k: v for k, v in PER_CLASS.items() if k != "per_class"})
    plain.update(REAL, real=True)
    plain.update(fake, real=False)
    for name, value in plain.compute().items():
        assert float(got[f"prd/{name}"]) == pytest.approx(float(value), rel=1e-6), name
    assert cb.history[-1]["per_class/coverage/2"] == 0.0

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (path,) = glob.glob(os.path.join(logger.log_dir, "events.out.tfevents.*"))
    acc = EventAccumulator(path)
    acc.Reload()
    events = acc.Scalars("prd/per_class/coverage/0")
    evaluations = [(e.step, e.value) for e in acc.Scalars("prd/epoch")]  # the evaluations' steps and epochs
    assert [v for _, v in evaluations] == [0, 1]
    assert [e.step for e in events] == [s for s, _ in evaluations]
    assert events[-1].value == pytest.approx(want[0]["coverage"], abs=1e-6)
    layouts = _layouts(logger.log_dir)
    charts = layouts[-1]["prd/per_class"]  # one chart per score, one line per class
    assert charts["coverage per class (higher is better)"] == ["^prd/per_class/coverage/"]
    assert set(charts) == {
        f"{n} per class ({how})"
        for n, how in [
            ("precision", "higher is better"),
            ("recall", "higher is better"),
            ("density", "1 is ideal"),
            ("coverage", "higher is better"),
            ("frechet_distance", "lower is better"),
        ]
    }
    assert not any(t.startswith("^prd/per_class") for t in sum(layouts[-1]["prd/"].values(), []))


def _layouts(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.util import tensor_util

    (path,) = glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    acc = EventAccumulator(path, size_guidance={TENSORS: 0})
    acc.Reload()
    out = []
    for event in acc.Tensors("custom_scalars__config__"):
        layout = layout_pb2.Layout()
        layout.ParseFromString(tensor_util.make_ndarray(event.tensor_proto).item())
        out.append({cat.title: {c.title: list(c.multiline.tag) for c in cat.chart} for cat in layout.category})
    return out


def test_class_names_name_the_per_class_charts(tmp_path):
    names = {0: "disc", 2: "ring"}  # class 1 keeps its number
    cb = PRDCallback(
        REAL,
        real_labels=REAL_LABELS,
        sample_fn=Recorder(),
        num_samples=N_FAKE,
        batch_size=N_FAKE,
        metric=PER_CLASS,
        class_names=names,
    )
    trainer = _fit(tmp_path, cb)
    plain = PRDCallback(
        REAL, real_labels=REAL_LABELS, sample_fn=Recorder(), num_samples=N_FAKE, batch_size=N_FAKE, metric=PER_CLASS
    )
    _fit(tmp_path / "plain", plain)
    got, want = cb.history[-1], plain.history[-1]
    renamed = {
        k.replace("/0", "/disc").replace("/2", "/ring") if k.startswith("per_class/") else k: v for k, v in want.items()
    }
    assert got == pytest.approx(renamed, nan_ok=True)  # the same draws (the callback's fixed noise), renamed
    assert got["per_class/coverage/ring"] == 0.0 and "per_class/coverage/1" in got
    assert float(trainer.callback_metrics["prd/lowest_coverage_class"]) == 2  # the label stays a number
    assert PRDCallback(REAL, real_labels=REAL_LABELS, metric=PER_CLASS, class_names=["a", "b", "c"]).class_names == {
        0: "a",
        1: "b",
        2: "c",
    }


@pytest.mark.parametrize(
    "bad, kind, match",
    [
        ("abc", TypeError, "a list of names or a mapping"),
        ({"0": "a"}, TypeError, "integer class labels, but got '0'"),
        (["a", ""], ValueError, "non-empty names without '/', but got '' for class 1"),
        (["a/b"], ValueError, "but got 'a/b' for class 0"),
        (["a", "a"], ValueError, "distinct names"),
    ],
)
def test_bad_class_names_name_the_argument(bad, kind, match):
    with pytest.raises(kind, match=r"`class_names`.*" + re.escape(match)):
        PRDCallback(REAL, real_labels=REAL_LABELS, metric=PER_CLASS, class_names=bad)
    with pytest.raises(ValueError, match=r"`class_names` only with a per-class metric"):
        PRDCallback(REAL, class_names=["a"], metric=dict(prd=False))


def test_labelled_loader_batches_give_the_same_scores_as_real_labels_and_csv_has_one_column_per_class(tmp_path):
    gen = Recorder()
    tensor_cb = PRDCallback(
        REAL, real_labels=REAL_LABELS, sample_fn=gen, num_samples=N_FAKE, batch_size=N_FAKE, metric=PER_CLASS
    )
    single = _fit(tmp_path / "a", tensor_cb)
    loader = DataLoader(TensorDataset(REAL, REAL_LABELS), batch_size=7, shuffle=False)
    loader_cb = PRDCallback(loader, sample_fn=Recorder(), num_samples=N_FAKE, batch_size=N_FAKE, metric=PER_CLASS)
    logger = CSVLogger(tmp_path, name="csv")
    _fit(tmp_path / "b", loader_cb, logger=logger)
    assert tensor_cb.history[-1].keys() == loader_cb.history[-1].keys()
    for key, value in tensor_cb.history[-1].items():
        assert loader_cb.history[-1][key] == pytest.approx(value, nan_ok=True), key
    with open(os.path.join(logger.log_dir, "metrics.csv")) as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("prd/coverage")]
    assert float(rows[-1]["prd/per_class/coverage/1"]) == pytest.approx(
        float(single.callback_metrics["prd/per_class/coverage/1"])
    )
    assert float(rows[-1]["prd/per_class/coverage/2"]) == 0.0


def test_real_labels_follow_the_rows_of_an_image_folder(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    g = torch.Generator().manual_seed(3)
    labels = torch.tensor([0, 1] * 10)
    images = (labels[:, None, None, None] * 150 + torch.randint(0, 60, (20, 3, 4, 4), generator=g)).to(torch.uint8)
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i, img in enumerate(images):
        Image.fromarray(img.permute(1, 2, 0).numpy()).save(folder / f"{i:03d}.png")

    def sample(pl_module, n):
        y = torch.zeros(n, dtype=torch.long)  # class 0 only
        return torch.randint(0, 60, (n, 3, 4, 4)).to(torch.uint8), y

    def embed(x):
        return x.float().flatten(1)

    metric = dict(PER_CLASS, frechet=False)
    by_folder = PRDCallback(
        str(folder), real_labels=labels, feature_extractor=embed, sample_fn=sample, num_samples=20, metric=metric
    )
    by_tensor = PRDCallback(
        images, real_labels=labels, feature_extractor=embed, sample_fn=sample, num_samples=20, metric=metric
    )
    _fit(tmp_path / "a", by_folder)
    _fit(tmp_path / "b", by_tensor)
    assert by_folder.history[-1] == pytest.approx(by_tensor.history[-1], nan_ok=True)
    assert by_folder.history[-1]["per_class/coverage/1"] == 0.0 and by_folder.history[-1]["lowest_coverage_class"] == 1


def test_wandb_gets_one_line_series_per_score(tmp_path, monkeypatch):
    module = types.ModuleType("wandb")
    module.Table = lambda columns, data: ("table", columns, data)
    module.Image = lambda array, caption=None: ("image", array.shape, caption)
    module.plot = types.SimpleNamespace(
        line=lambda *a, **k: ("line", a, k),
        line_series=lambda xs, ys, keys, title, xname: {"xs": xs, "ys": ys, "keys": keys, "title": title, "x": xname},
    )
    monkeypatch.setitem(sys.modules, "wandb", module)

    class Run:
        def __init__(self):
            self.defined, self.logged, self.summary = {}, [], {}

        def define_metric(self, name, **kwargs):
            self.defined[name] = kwargs

        def log(self, data):
            self.logged.append(data)

    from pytorch_lightning.loggers.logger import DummyLogger

    run = Run()
    logger = type("WandbLogger", (DummyLogger,), {"experiment": property(lambda self: run)})()
    cb = PRDCallback(REAL, real_labels=REAL_LABELS, sample_fn=Recorder(), num_samples=N_FAKE, metric=PER_CLASS)
    _fit(tmp_path, cb, epochs=2, logger=logger)
    last = run.logged[-1]
    chart = last["prd/per_class/coverage"]
    assert chart["keys"] == ["0", "1", "2"] and chart["xs"] == [0, 1] and chart["x"] == "epoch"
    assert chart["ys"][2] == [0.0, 0.0]  # the dropped class
    assert chart["ys"][0] == [h["per_class/coverage/0"] for h in cb.history]
    assert run.defined["prd/per_class/coverage/0"] == {"step_metric": "prd/epoch", "summary": "max"}
    assert run.defined["prd/per_class/frechet_distance/0"]["summary"] == "min"
    assert run.defined["prd/per_class/density/0"]["summary"] == "none"  # 1 is ideal: the adapter writes it
    assert run.defined["prd/lowest_coverage_class"]["summary"] == "last"  # a label, not a score
    densities = [h["per_class/density/1"] for h in cb.history]
    assert run.summary["prd/per_class/density/1"] == pytest.approx(min(densities, key=lambda d: abs(d - 1)))


# ---------------------------------------------------------------------------------- without per-class
def test_without_per_class_a_tuple_from_sample_fn_is_refused_as_before(tmp_path):
    cb = PRDCallback(REAL, sample_fn=lambda m, n: (torch.randn(n, 2), torch.zeros(n)), num_samples=20)
    with pytest.raises(
        TypeError, match=r"Expected `sample_fn\(…, 2\)` to return a tensor of 2 samples, but got tuple .*dry run"
    ):  # refused by the dry run before training, on its 2 samples
        _fit(tmp_path, cb)
    assert cb.history == []
    plain = PRDCallback(
        REAL, sample_fn=lambda m, n: torch.randn(n, 2), num_samples=20, metric=PER_CLASS | {"per_class": False}
    )
    _fit(tmp_path, plain)
    assert not any(k.startswith("per_class") or k.endswith("_mean") for k in plain.history[-1])
    assert {"precision", "recall", "density", "coverage"} <= set(plain.history[-1])


def test_real_labels_need_a_per_class_metric():
    with pytest.raises(ValueError, match=r"no argument `real_labels` for a metric without per-class scores"):
        PRDCallback(REAL, real_labels=REAL_LABELS)


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "labels, error, match",
    [
        (
            REAL_LABELS[:-1],
            ValueError,
            r"`real_labels` to hold one class label per row of `real` \(90\), but got shape \(89,\)",
        ),
        (REAL_LABELS.float(), TypeError, r"`real_labels` to hold integer class labels, but got dtype torch.float32"),
        (REAL_LABELS[None], ValueError, r"`real_labels` to be 1-D .* but got shape \(1, 90\)"),
        (["a"] * 90, TypeError, r"`real_labels` to hold integer class labels|`real_labels` to be a 1-D tensor"),
    ],
)
def test_bad_real_labels_are_refused_at_construction(labels, error, match):
    with pytest.raises(error, match=match):
        PRDCallback(REAL, real_labels=labels, metric=PER_CLASS)


def test_a_tensor_real_set_without_labels_is_refused_in_setup(tmp_path):
    cb = PRDCallback(REAL, sample_fn=Recorder(), num_samples=N_FAKE, metric=PER_CLASS)
    with pytest.raises(
        ValueError, match=r"Expected argument `real_labels` .* as `real` is a tensor of 90 rows, but got None"
    ):
        _fit(tmp_path, cb)
    loader = DataLoader(TensorDataset(REAL, REAL_LABELS), batch_size=10)
    with pytest.raises(ValueError, match=r"no argument `real_labels` when `real` is a DataLoader"):
        PRDCallback(loader, real_labels=REAL_LABELS, metric=PER_CLASS)


def test_loader_batches_without_labels_are_refused_and_leave_no_half_read_real_set(tmp_path):
    loader = DataLoader(TensorDataset(REAL), batch_size=10)
    cb = PRDCallback(loader, sample_fn=Recorder(), num_samples=N_FAKE, metric=PER_CLASS)
    with pytest.raises(
        TypeError, match=r"batches of argument `real` to be \(samples, labels, \.\.\.\) .* batch 0 is a list of 1"
    ):
        _fit(tmp_path, cb)
    float_labels = DataLoader(TensorDataset(REAL, REAL_LABELS.float()), batch_size=10)
    cb = PRDCallback(float_labels, sample_fn=Recorder(), num_samples=N_FAKE, metric=PER_CLASS)
    with pytest.raises(
        TypeError,
        match=r"labels of batch 0 of argument `real` to hold integer class labels, but got dtype torch.float32",
    ):
        _fit(tmp_path, cb)
    assert not cb.metric.real_features and not cb._real_ready  # nothing half-read survives


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (
            lambda y: y[:-1],
            ValueError,
            r"labels of `sample_fn\(…, 60\)` to be 1-D with one class label per sample \(60\), but got shape \(59,\)",
        ),
        (
            lambda y: y.float(),
            TypeError,
            r"labels of `sample_fn\(…, 60\)` to hold integer class labels, but got dtype torch.float32",
        ),
    ],
)
def test_bad_generated_labels_name_sample_fn_and_keep_what_was_accumulated(tmp_path, bad, error, match):
    gen = Recorder(bad=bad)  # good labels at epoch 0, bad ones from epoch 1
    cb = PRDCallback(
        REAL, real_labels=REAL_LABELS, sample_fn=gen, num_samples=N_FAKE, batch_size=N_FAKE, metric=PER_CLASS
    )
    with pytest.raises(error, match=match):
        _fit(tmp_path, cb, epochs=2)
    assert [h["epoch"] for h in cb.history] == [0]  # the scores of epoch 0 are kept
    assert cb._real_ready and sum(t.shape[0] for t in cb.metric.real_features) == 90  # and the real set
    assert sum(t.shape[0] for t in cb.metric.real_labels) == 90


def test_a_plain_tensor_from_sample_fn_is_refused_for_a_per_class_metric(tmp_path):
    cb = PRDCallback(
        REAL, real_labels=REAL_LABELS, sample_fn=lambda m, n: torch.randn(n, 2), num_samples=20, metric=PER_CLASS
    )
    with pytest.raises(
        TypeError,
        match=r"`sample_fn\(…, 2\)` to return \(samples, labels\) .*\(per_class=True\), but got Tensor .*dry run",
    ):  # refused by the dry run before training, on its 2 samples
        _fit(tmp_path, cb)


class Double(torch.nn.Module):
    def forward(self, x):
        return 2 * x


def test_labels_stay_with_their_rows_through_the_disk_cache(tmp_path):
    shuffled = torch.randperm(90, generator=torch.Generator().manual_seed(4))  # labels not in blocks
    real, labels = REAL[shuffled], REAL_LABELS[shuffled]
    runs = []
    for name in ("miss", "hit"):
        cb = PRDCallback(
            real,
            real_labels=labels,
            feature_extractor=Double(),
            sample_fn=Recorder(),
            num_samples=N_FAKE,
            metric=PER_CLASS,
            cache_dir=tmp_path / "cache",
        )
        _fit(tmp_path / name, cb)
        runs.append((cb.cache.last_status, cb.history[-1]))
    assert [status for status, _ in runs] == ["miss", "hit"]
    assert runs[1][1] == pytest.approx(runs[0][1], nan_ok=True)
    plain = PRDCallback(
        REAL,
        real_labels=REAL_LABELS,
        feature_extractor=Double(),
        sample_fn=Recorder(),
        num_samples=N_FAKE,
        metric=PER_CLASS,
    )
    _fit(tmp_path / "plain", plain)
    assert runs[1][1] == pytest.approx(plain.history[-1], nan_ok=True)  # the order of the rows does not matter
