"""Fréchet distance against scipy's sqrtm oracle and the closed form."""

import pytest
import torch

from lightning_prd.functional import frechet_distance

import oracle


def test_equals_scipy_oracle(rng):
    real = torch.randn(500, 12, generator=rng, dtype=torch.float64)
    fake = (
        torch.randn(400, 12, generator=rng, dtype=torch.float64)
        @ torch.randn(12, 12, generator=rng, dtype=torch.float64)
        * 0.3
        + 0.5
    )
    assert float(frechet_distance(real, fake)) == pytest.approx(oracle.frechet(real.numpy(), fake.numpy()), rel=1e-9)


def test_identical_is_zero_and_shift_is_squared_norm(rng):
    real = torch.randn(300, 4, generator=rng, dtype=torch.float64)
    assert float(frechet_distance(real, real)) == pytest.approx(0.0, abs=1e-9)
    shift = torch.tensor([1.0, 2.0, 0.0, -2.0], dtype=torch.float64)
    assert float(frechet_distance(real, real + shift)) == pytest.approx(9.0, abs=1e-9)


def test_float32_input_is_computed_in_float64(rng):
    real = torch.randn(300, 6, generator=rng)
    out = frechet_distance(real, real * 1.5)
    assert out.dtype == torch.float64
    assert float(out) == pytest.approx(oracle.frechet(real.double().numpy(), 1.5 * real.double().numpy()), rel=1e-6)


def test_needs_two_samples():
    with pytest.raises(ValueError, match="`real`.*at least 2"):
        frechet_distance(torch.zeros(1, 3), torch.zeros(4, 3))
