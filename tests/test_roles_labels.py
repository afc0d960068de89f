"""A held-out ``test`` set and per-sample class labels in the Metric classes' states.

``update(features, role="test")`` and ``update(features, real=..., labels=...)`` on the shared
base class: accepted only once the metric asks for them, checked before anything is stored,
kept or cleared by ``reset()`` like the real set, and gathered under DDP (2 gloo processes) in
the order of their features.
"""

import pytest
import torch

from lightning_prd.metrics.base import FeatureMetric

from ddp_utils import run_ddp


class Sets(FeatureMetric):
    """Returns what it accumulated: the sets and, where kept, their labels."""

    def __init__(self, roles=(), labels=False, **kwargs):
        super().__init__(**kwargs)
        for role in roles:
            self.enable_role(role)
        if labels:
            self.enable_labels()

    def compute(self):
        out = {role: self._features(role) for role in self._roles}
        if self._labels_on:
            out.update({f"{role}_labels": self._labels(role) for role in self._roles})
        return out


G = torch.Generator().manual_seed(3)
REAL, FAKE, TEST = torch.randn(9, 4, generator=G), torch.randn(7, 4, generator=G), torch.randn(5, 4, generator=G)
REAL_Y, FAKE_Y, TEST_Y = torch.arange(9) % 3, torch.arange(7) % 2, torch.tensor([2, 0, 1, 1, 0])


def test_test_role_is_a_third_set():
    m = Sets(roles=["test"])
    m.update(REAL[:4], real=True)
    m.update(REAL[4:], role="real")
    m.update(FAKE, role="fake")
    m.update(TEST[:2], role="test")
    m.update(TEST[2:], role="test")
    out = m.compute()
    assert torch.equal(out["real"], REAL) and torch.equal(out["fake"], FAKE) and torch.equal(out["test"], TEST)


def test_role_not_enabled_or_unknown_is_refused_and_nothing_is_lost():
    m = Sets()
    m.update(REAL, real=True)
    with pytest.raises(ValueError, match=r"`role`.*'test'"):
        m.update(TEST, role="test")
    with pytest.raises(ValueError, match=r"`role`.*'train'"):
        m.update(TEST, role="train")
    with pytest.raises(ValueError, match=r"either `real` or `role`.*real=True.*role='fake'"):
        m.update(FAKE, real=True, role="fake")
    with pytest.raises(TypeError, match="`real`"):
        m.update(FAKE)
    with pytest.raises(ValueError, match="`role`"):
        Sets(roles=["holdout"])
    m.update(FAKE, real=False)
    out = m.compute()
    assert torch.equal(out["real"], REAL) and torch.equal(out["fake"], FAKE)


def test_labels_are_kept_beside_their_features():
    m = Sets(roles=["test"], labels=True)
    m.update(REAL[:5], real=True, labels=REAL_Y[:5])
    m.update(REAL[5:], real=True, labels=REAL_Y[5:].tolist())  # a list of ints is accepted
    m.update(FAKE, real=False, labels=FAKE_Y.int())
    m.update(TEST, role="test", labels=TEST_Y)
    out = m.compute()
    assert torch.equal(out["real_labels"], REAL_Y) and out["real_labels"].dtype == torch.int64
    assert torch.equal(out["fake_labels"], FAKE_Y) and torch.equal(out["test_labels"], TEST_Y)


@pytest.mark.parametrize(
    "labels, error, match",
    [
        (None, ValueError, r"`labels`.*got None"),
        (torch.zeros(3, dtype=torch.long), ValueError, r"`labels` of shape \(7,\).*\(3,\)"),
        (torch.zeros(7, 1, dtype=torch.long), ValueError, r"shape \(7,\).*\(7, 1\)"),
        (torch.zeros(7), TypeError, r"`labels` to hold integers.*float32"),
        (torch.zeros(7, dtype=torch.bool), TypeError, r"`labels` to hold integers.*bool"),
    ],
)
def test_bad_labels_are_refused_and_nothing_is_lost(labels, error, match):
    m = Sets(labels=True)
    m.update(REAL, real=True, labels=REAL_Y)
    m.update(FAKE[:2], real=False, labels=FAKE_Y[:2])
    with pytest.raises(error, match=match):
        m.update(FAKE, real=False, labels=labels)
    out = m.compute()
    assert torch.equal(out["fake"], FAKE[:2]) and torch.equal(out["fake_labels"], FAKE_Y[:2])
    assert torch.equal(out["real_labels"], REAL_Y)


def test_labels_without_per_class_scores_are_refused():
    m = Sets()
    with pytest.raises(ValueError, match="no argument `labels`"):
        m.update(REAL, real=True, labels=REAL_Y)
    with pytest.raises(ValueError, match="No real features"):
        m.compute()


@pytest.mark.parametrize("keep", [True, False])
def test_reset_keeps_the_real_data_sets_when_asked(keep):
    m = Sets(roles=["test"], labels=True, reset_real_features=not keep)
    m.update(REAL, real=True, labels=REAL_Y)
    m.update(TEST, role="test", labels=TEST_Y)
    m.update(FAKE, real=False, labels=FAKE_Y)
    m.reset()
    m.update(FAKE[:3], real=False, labels=FAKE_Y[:3])
    if not keep:
        with pytest.raises(ValueError, match="No real features"):
            m.compute()
        return
    out = m.compute()
    assert torch.equal(out["real"], REAL) and torch.equal(out["test"], TEST)
    assert torch.equal(out["real_labels"], REAL_Y) and torch.equal(out["test_labels"], TEST_Y)
    assert torch.equal(out["fake"], FAKE[:3]) and torch.equal(out["fake_labels"], FAKE_Y[:3])


def _rank(rank, world):
    m = Sets(roles=["test"], labels=True)
    real_rows = [(0, 6), (6, 9)][rank]
    fake_rows = [(0, 7), (7, 7)][rank]  # rank 1 holds no generated sample
    m.update(REAL[slice(*real_rows)], real=True, labels=REAL_Y[slice(*real_rows)] + 1000 * rank)
    if fake_rows[1] > fake_rows[0]:
        m.update(FAKE[slice(*fake_rows)], real=False, labels=FAKE_Y[slice(*fake_rows)])
    m.update(TEST[rank::2], role="test", labels=TEST_Y[rank::2])
    return m.compute()


def test_ddp_gathers_labels_in_the_order_of_their_features():
    for out in run_ddp(_rank):
        assert torch.equal(out["real"], REAL)
        assert torch.equal(out["real_labels"], torch.cat([REAL_Y[:6], REAL_Y[6:] + 1000]))
        assert out["real_labels"].dtype == torch.int64
        assert torch.equal(out["fake"], FAKE) and torch.equal(out["fake_labels"], FAKE_Y)
        assert torch.equal(out["test"], torch.cat([TEST[0::2], TEST[1::2]]))
        assert torch.equal(out["test_labels"], torch.cat([TEST_Y[0::2], TEST_Y[1::2]]))
