"""The ± from disjoint generated subsamples."""

import pytest
import torch

from lightning_prd.functional import density_coverage, precision_recall
from lightning_prd.functional.uncertainty import score_spread


def test_full_value_and_split_statistics(rng):
    real = torch.randn(500, 4, generator=rng, dtype=torch.float64)
    fake = 1.2 * torch.randn(600, 4, generator=rng, dtype=torch.float64)
    out = score_spread(real, fake, num_splits=3, seed=1)
    assert float(out["precision"]["value"]) == float(precision_recall(real, fake)[0])
    assert float(out["coverage"]["value"]) == float(density_coverage(real, fake)[1])
    perm = torch.randperm(600, generator=torch.Generator().manual_seed(1))
    parts = [precision_recall(real, fake[perm[s * 200 : (s + 1) * 200]])[0] for s in range(3)]
    expected = torch.stack(parts)
    assert float(out["precision"]["mean"]) == pytest.approx(float(expected.mean()), abs=1e-12)
    assert float(out["precision"]["std"]) == pytest.approx(float(expected.std()), abs=1e-12)
    assert int(out["precision"]["split_size"]) == 200


def test_spread_shrinks_with_more_samples(rng):
    real = torch.randn(800, 3, generator=rng)
    small = score_spread(real, torch.randn(200, 3, generator=rng), num_splits=5)
    large = score_spread(real, torch.randn(2000, 3, generator=rng), num_splits=5)
    assert float(large["precision"]["std"]) < float(small["precision"]["std"]) + 1e-9


@pytest.mark.parametrize("bad", [1, 0, 2.5])
def test_invalid_num_splits(bad, rng):
    with pytest.raises(ValueError, match="num_splits"):
        score_spread(torch.randn(50, 2, generator=rng), torch.randn(50, 2, generator=rng), num_splits=bad)
