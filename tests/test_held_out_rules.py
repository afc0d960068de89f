"""PRDCallback(test=...) refuses the training set ``real`` itself as the held-out set, in every form both take
(lightning_prd/callback/real_sources.py: check_held_out): ``real`` as its own held-out set scores as "no
memorisation" (``fld_gap`` 0), whatever the model does. ``lightning-prd evaluate --test`` refuses it the same way.
"""

from __future__ import annotations

import os
import shutil
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_prd.callback import PRDCallback

METRIC = dict(fld=dict(num_epochs=2), prd=False, alpha_beta=False, probabilistic=False, pr_cover=False)
FEATS = np.random.default_rng(3).normal(size=(40, 2)).astype(np.float32)
OTHER = np.random.default_rng(4).normal(size=(30, 2)).astype(np.float32)


def _callback(real, test):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "do not say which network"
        return PRDCallback(real, test=test, sample_fn=lambda m, n: torch.randn(n, 2), num_samples=20, metric=METRIC)


def _npy(path, feats):
    with open(path, "wb") as handle:
        np.save(handle, feats)
    return str(path)


def _refused(real, test, *needles):
    with pytest.raises(ValueError) as info:
        _callback(real, test)
    text = str(info.value)
    assert "\n" not in text and "`test`" in text and "`real`" in text and "held-out" in text
    assert all(n in text for n in needles), text


def test_the_same_file_by_name_link_or_content_is_refused(tmp_path):
    path = _npy(tmp_path / "real.npy", FEATS)
    _refused(path, path, "the same file", path)
    os.mkdir(tmp_path / "sub")
    _refused(path, str(tmp_path / "sub" / ".." / "real.npy"), "the same file")  # another spelling of the path
    os.symlink(path, tmp_path / "link.npy")
    _refused(path, str(tmp_path / "link.npy"), "the same file")
    shutil.copy(path, tmp_path / "copy.bin")
    _refused(path, str(tmp_path / "copy.bin"), "the same content")


def test_the_same_features_in_another_layout_are_refused(tmp_path):
    path = _npy(tmp_path / "real.npy", FEATS)
    with open(tmp_path / "feats.npz", "wb") as handle:  # clean-fid's KID features layout, same rows
        np.savez_compressed(handle, feats=FEATS)
    _refused(path, str(tmp_path / "feats.npz"), "the same features")


def test_a_tensor_of_the_features_in_a_file_is_refused_without_an_extractor(tmp_path):
    path = _npy(tmp_path / "real.npy", FEATS)
    _refused(path, torch.from_numpy(FEATS), "the same")  # no extractor: the samples are the features


def test_the_same_tensor_loader_or_split_is_refused():
    real = torch.from_numpy(FEATS)
    _refused(real, real, "the same object")
    _refused(real, real.clone(), "the same samples")
    loader = DataLoader(TensorDataset(real), batch_size=8)
    _refused(loader, loader, "the same object")
    _refused(loader, DataLoader(loader.dataset, batch_size=4), "the same dataset")
    _refused("datamodule:train", "datamodule:train", "the same datamodule loader")


def test_setting_real_to_the_test_set_later_is_refused_too(tmp_path):
    real, test = _npy(tmp_path / "real.npy", FEATS), _npy(tmp_path / "test.npy", OTHER)
    cb = _callback(real, test)
    with pytest.raises(ValueError, match="held-out"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "do not say which network"
        cb.real = test
    assert cb.real == real  # the refused value is not kept


def test_a_genuine_held_out_set_is_accepted(tmp_path):
    real, test = _npy(tmp_path / "real.npy", FEATS), _npy(tmp_path / "test.npy", OTHER)
    assert _callback(real, test).test == test
    assert _callback(torch.from_numpy(FEATS), torch.from_numpy(OTHER)).test is not None
    assert _callback("datamodule:train", "datamodule:val").test == "datamodule:val"
