"""The rarity score (Han et al., ICLR 2023) against a float64 port of the official ``MANIFOLD.rarity``, on the
function, ``generative_metrics``, ``GenerativeMetrics`` (batched updates) and the command line."""

import json

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.cli import main
from lightning_prd.functional import generative_metrics, rarity_score


def official_rarity(real, fake, k):
    """``hichoe95/Rarity-Score``'s ``MANIFOLD.rarity(k)`` in float64: the radii are the k-th entries of the
    sorted real-to-real distance rows (the sample itself at index 0), a ball holds a sample where
    ``r - d > 0``, each sample scores the smallest radius among the balls holding it, 0 when none does."""
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    real_real = np.sqrt(np.maximum(((real[:, None, :] - real[None, :, :]) ** 2).sum(-1), 0.0))
    r = np.sort(real_real, axis=1)[:, k]
    real_fake = np.sqrt(np.maximum(((real[:, None, :] - fake[None, :, :]) ** 2).sum(-1), 0.0))
    valid = (r[:, None] - real_fake) > 0
    scores = np.zeros(fake.shape[0])
    for i in range(fake.shape[0]):
        if valid[:, i].any():
            scores[i] = r[valid[:, i]].min()
    return scores, valid.any(0)


def _gauss(n, m, d, seed, shift=0.3):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), 1.2 * torch.randn(m, d, generator=g) + shift


def _check(real, fake, k, **kw):
    want, inside = official_rarity(real.double().numpy(), fake.double().numpy(), k)
    scores, mean = rarity_score(real, fake, k=k, **kw)
    assert scores.dtype == torch.float64 and scores.shape == (fake.shape[0],)
    assert np.array_equal(scores.numpy() > 0, inside)  # the same samples inside a ball
    np.testing.assert_allclose(scores.numpy(), want, rtol=1e-12, atol=0)
    if inside.any():
        assert float(mean) == pytest.approx(want[inside].mean(), rel=1e-12)
    else:
        assert torch.isnan(mean)
    return scores, mean


@pytest.mark.parametrize("k", [3, 1, 7])
@pytest.mark.parametrize("n,m,d", [(400, 300, 8), (120, 170, 3)])
def test_equals_the_official_code(k, n, m, d):
    real, fake = _gauss(n, m, d, seed=k + d)
    scores, _ = _check(real, fake, k)
    assert (scores == 0).any() and (scores > 0).any()  # both kinds of sample are in the data


def test_float64_inputs_and_the_float32_pass_agree_exactly():
    real, fake = _gauss(300, 200, 16, seed=3)
    a, _ = _check(real, fake, 3)
    b, _ = _check(real.double(), fake.double(), 3)
    assert torch.equal(a, b)


def test_ties_and_duplicates():
    g = torch.Generator().manual_seed(5)
    real = torch.randint(0, 4, (300, 3), generator=g).float()  # many exact ties and duplicate reals
    fake = torch.randint(0, 5, (250, 3), generator=g).float()  # some on a radius exactly: open balls leave them
    scores, _ = _check(real, fake, 3)
    _check(real, fake, 12)
    far = torch.full((4, 3), 50.0)  # outside every ball
    out, mean = _check(real, torch.cat([fake, far]), 3)
    assert torch.equal(out[-4:], torch.zeros(4, dtype=torch.float64))
    assert torch.equal(out[:-4], scores)


def test_no_sample_inside_a_ball_gives_zeros_and_a_nan_mean():
    real, _ = _gauss(50, 1, 4, seed=0)
    scores, mean = _check(real, real[:10] + 100.0, 3)
    assert torch.equal(scores, torch.zeros(10, dtype=torch.float64)) and torch.isnan(mean)


def test_worked_example():
    real = torch.tensor([[0.0], [1.0], [3.0], [7.0]])  # NND_1: 1, 1, 2, 4
    fake = torch.tensor([[0.5], [2.0], [2.5], [6.0], [20.0]])  # 2.0 is on the radius of 1, inside 3's ball
    scores, mean = rarity_score(real, fake, k=1)
    assert scores.tolist() == [1.0, 2.0, 2.0, 4.0, 0.0] and float(mean) == pytest.approx(9 / 4)


def test_bad_options_name_the_argument():
    real, fake = _gauss(10, 5, 2, seed=0)
    with pytest.raises(ValueError, match="`k`"):
        rarity_score(real, fake, k=0)
    with pytest.raises(ValueError, match="`real` to hold at least"):
        rarity_score(real, fake, k=10)
    with pytest.raises(ValueError, match=r"`rarity` to hold only \['k'\]"):
        generative_metrics(real, fake, rarity={"kk": 3})
    with pytest.raises(ValueError, match="an option of `rarity`"):
        generative_metrics(real, fake, rarity={"k": -1})
    with pytest.raises(ValueError, match="at least 6 samples for `rarity`"):
        generative_metrics(real[:5], fake, rarity={"k": 5}, k_precision_recall=2, k_density_coverage=2)


def test_generative_metrics_and_the_metric_equal_the_function():
    real, fake = _gauss(260, 190, 6, seed=9)
    want, want_mean = rarity_score(real, fake, k=4)
    out = generative_metrics(real, fake, rarity={"k": 4})
    assert torch.equal(out["rarity"], want) and torch.equal(out["rarity_mean"], want_mean)
    assert "rarity_mean" not in generative_metrics(real, fake)  # off unless asked for
    joined = generative_metrics(real, fake, rarity=True, clipped=True, symmetric=True, per_sample=True)
    alone = generative_metrics(real, fake, clipped=True, symmetric=True, per_sample=True)
    assert torch.equal(joined["rarity"], rarity_score(real, fake)[0])
    assert all(torch.equal(joined[key], value) for key, value in alone.items())  # joining changes no other score
    metric = GenerativeMetrics(rarity={"k": 4})
    for part in (real[:100], real[100:]):
        metric.update(part, real=True)
    for part in (fake[:37], fake[37:]):
        metric.update(part, real=False)
    res = metric.compute()
    assert torch.equal(res["rarity"], want) and torch.equal(res["rarity_mean"], want_mean)


def test_command_line_flag_and_json(tmp_path, capsys):
    real, fake = _gauss(200, 150, 5, seed=2)
    np.save(tmp_path / "real.npy", real.numpy())
    np.save(tmp_path / "fake.npy", fake.numpy())
    out = tmp_path / "out.json"
    argv = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy"), "-q"]
    assert main([*argv, "--rarity", "k=5", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    payload = json.loads(out.read_text())
    assert payload["scores"]["rarity_mean"] == pytest.approx(float(rarity_score(real, fake, k=5)[1]), rel=1e-6)
    assert payload["settings"]["rarity"] == {"k": 5}
    assert any(line.split()[:1] == ["rarity_mean"] and line.split()[-1] == "-" for line in table.splitlines())
    assert main([*argv, "--rarity", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["settings"]["rarity"] == {"k": 3}
    assert main([*argv, "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["settings"]["rarity"] is None and "rarity_mean" not in payload["scores"]
    assert main([*argv, "--rarity", "k"]) == 2
    assert "--rarity: expected KEY=VALUE, but got 'k'" in capsys.readouterr().err


def test_per_class_equals_the_function_on_each_class():
    from lightning_prd.functional import per_class_metrics

    real, fake = _gauss(240, 160, 4, seed=11)
    real_labels, fake_labels = torch.arange(240) % 3, torch.arange(160) % 3
    fake_labels[fake_labels == 2] = 1  # class 2 generates nothing
    real_labels[:236][real_labels[:236] == 0] = 1
    real_labels[236:] = 0  # class 0: 4 real rows, too few for k = 4
    out = per_class_metrics(
        real, fake, real_labels=real_labels, fake_labels=fake_labels, frechet=False, families={"rarity": {"k": 4}}
    )
    assert out["classes"].tolist() == [0, 1, 2]
    got = out["rarity_mean_per_class"]
    assert torch.isnan(got[0]) and torch.isnan(got[2])
    want = rarity_score(real[real_labels == 1], fake[fake_labels == 1], k=4)[1]
    assert float(got[1]) == float(want) and float(out["rarity_mean_mean"]) == float(want)
    metric = GenerativeMetrics(per_class=True, rarity={"k": 4}, frechet=False)
    metric.update(real, real=True, labels=real_labels)
    metric.update(fake, real=False, labels=fake_labels)
    res = metric.compute()
    assert torch.equal(res["rarity_mean_per_class"].nan_to_num(-1.0), got.nan_to_num(-1.0))
    assert torch.equal(res["rarity"], rarity_score(real, fake, k=4)[0])  # the overall scores as before
