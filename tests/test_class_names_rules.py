"""Every class keeps its own logged key (lightning_prd/functional/engine/inputs.py: distinct_class_keys): a class
name that is another class's number, or two names that read the same, are refused naming both classes, by the
callback's ``class_names`` and by ``per_class_scalars(names=...)``, the two surfaces that take class names."""

from __future__ import annotations

import pytest
import torch

from lightning_prd.callback import PRDCallback
from lightning_prd.functional.per_class import per_class_metrics, per_class_scalars

G = torch.Generator().manual_seed(0)
LABELS = torch.tensor([0, 2, 5]).repeat_interleave(12)
REAL = torch.randn(36, 2, generator=G) + 4 * LABELS[:, None].float()
PER_CLASS = dict(per_class=True, prd=False, alpha_beta=False, probabilistic=False, pr_cover=False)
COLLIDING = [
    ({2: "0"}, r"class 2's name '0' is the number of class 0"),  # class 2 would be logged over class 0
    (["5", "x", "y"], r"class 0's name '5' is the number of class 5"),
    ({0: "cat", 2: "cat"}, r"classes 0 and 2 are named 'cat' and 'cat'"),
    ({0: "cat", 5: " cat"}, r"classes 0 and 5 are named 'cat' and ' cat'"),
    ({0: "cat", 5: "ｃａｔ"}, r"classes 0 and 5"),  # full-width letters: the same name once NFKC-normalised
    ({5: "０"}, r"class 5's name '０' is the number of class 0"),
]


@pytest.mark.parametrize(("names", "match"), COLLIDING)
def test_the_callback_refuses_names_that_share_a_key(names, match):
    with pytest.raises(ValueError, match=r"`class_names` to hold distinct names.*" + match):
        PRDCallback(REAL, real_labels=LABELS, metric=PER_CLASS, class_names=names)


@pytest.mark.parametrize(("names", "match"), COLLIDING)
def test_per_class_scalars_refuses_names_that_share_a_key(names, match):
    res = per_class_metrics(REAL, REAL.flip(0), real_labels=LABELS, fake_labels=LABELS.flip(0))
    mapping = dict(enumerate(names)) if isinstance(names, list) else names
    with pytest.raises(ValueError, match=r"`names` to hold distinct names.*" + match):
        per_class_scalars(res, names=mapping)


def test_each_class_keeps_its_own_key_and_value():
    fake_labels = torch.tensor([0, 5]).repeat_interleave(18)  # class 2 never drawn: its coverage is 0
    fake = torch.randn(36, 2, generator=G) + 4 * fake_labels[:, None].float()
    res = per_class_metrics(REAL, fake, real_labels=LABELS, fake_labels=fake_labels)
    out = per_class_scalars(res, names={2: "two", 5: "5"})  # a class may carry its own number
    coverage = {k: v for k, v in out.items() if k.startswith("coverage/")}
    assert set(coverage) == {"coverage/0", "coverage/two", "coverage/5"}
    assert coverage["coverage/two"] == 0.0 and coverage["coverage/0"] > 0.5 and coverage["coverage/5"] > 0.5
    cb = PRDCallback(REAL, real_labels=LABELS, metric=PER_CLASS, class_names={2: "two", 5: "5"})
    assert cb.class_names == {2: "two", 5: "5"}
