"""The renewal function of a Weibull law (mcsim.model.reliability): the one solver of the renewal
equation, for the planner's screen and the failure-log fit, against closed forms and an exact series.

References, independent of the solver's grid:

- shape 1 (exponential lifetimes, a Poisson process): ``M(t) = t/λ`` exactly;
- shapes 1/2, 2 and 3: the Smith–Leadbetter series (W. L. Smith and M. R. Leadbetter, "On the
  renewal function for the Weibull distribution", Technometrics 5(3), 1963, pp. 393–396),
  ``M(t) = Σ_{k>=1} (−1)^(k−1) A_k (t/λ)^(kβ) / Γ(kβ + 1)`` with ``γ_k = Γ(kβ + 1)/k!``,
  ``A_1 = γ_1``, ``A_k = γ_k − Σ_{j<k} γ_j A_(k−j)``: the Laplace transform of ``dM``,
  ``f*/(1 − f*)``, expanded in powers of ``s^−β``. Its terms alternate and grow large before they
  fall, so it is summed here in 80-digit decimal arithmetic (exact integers where β is one),
  until the terms fall below 1e-25: slow, and exact to far below the solver's error.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

from mcsim.model.reliability import _renewal_on_grid, expected_renewals, renewal_function

DIGITS = 80


def _pi() -> Decimal:
    """π to the context's precision (Machin's formula)."""

    def arctan_of_inverse(x: int) -> Decimal:
        total = term = Decimal(1) / x
        n, sign = 1, 1
        while True:
            term /= x * x
            n, sign = n + 2, -sign
            if term / n < Decimal(10) ** -(DIGITS + 5):
                return total
            total += sign * term / n

    return 4 * (4 * arctan_of_inverse(5) - arctan_of_inverse(239))


def _gamma_of_half_integer(twice: int, sqrt_pi: Decimal) -> Decimal:
    """Γ(twice / 2) for a positive integer ``twice``."""
    if twice % 2 == 0:
        return Decimal(math.factorial(twice // 2 - 1))
    n = (twice - 1) // 2  # Γ(n + 1/2) = (2n)! √π / (4^n n!)
    return Decimal(math.factorial(2 * n)) / (Decimal(4) ** n * math.factorial(n)) * sqrt_pi


def series_renewal(t_over_scale: float, shape: float) -> float:
    """The Smith–Leadbetter series of ``M(t)`` for shape 1/2 or a whole shape (module docstring)."""
    with localcontext() as context:
        context.prec = DIGITS
        t = Decimal(t_over_scale)
        if shape == 0.5:
            sqrt_pi = _pi().sqrt()
            gamma = lambda k: _gamma_of_half_integer(k + 2, sqrt_pi)  # noqa: E731  Γ(k/2 + 1)
            power = lambda k: t.sqrt() ** k  # noqa: E731
        else:
            whole = int(shape)
            assert whole == shape
            gamma = lambda k: Decimal(math.factorial(whole * k))  # noqa: E731
            power = lambda k: t ** (whole * k)  # noqa: E731
        gammas, coefficients = [Decimal(0)], [Decimal(0)]
        total, k, small = Decimal(0), 0, 0
        while small < 5:
            k += 1
            gamma_k = gamma(k)
            gammas.append(gamma_k / math.factorial(k))
            coefficients.append(gammas[k] - sum(gammas[j] * coefficients[k - j] for j in range(1, k)))
            term = (-1) ** (k - 1) * coefficients[k] * power(k) / gamma_k
            total += term
            small = small + 1 if abs(term) < Decimal(10) ** -25 else 0
        return float(total)


# (shape, t/λ) where the series is summed in a second or less at 80 digits.
SERIES_TIMES = {0.5: (0.01, 0.3, 1.0, 3.0, 10.0), 2.0: (0.01, 0.3, 1.0, 3.0, 7.0), 3.0: (0.01, 0.3, 1.0, 3.0)}
SERIES_POINTS = [(shape, t) for shape, times in SERIES_TIMES.items() for t in times]


def test_the_series_reference_at_shape_1_and_for_short_times():
    # β = 1: γ_k = 1, A_1 = 1 and A_k = 0 beyond: the series is t itself.
    assert series_renewal(2.5, 1.0) == 2.5
    # The first-failure part F(t) = 1 − exp(−t^k) dominates for t ≪ λ (F <= M <= F + F²/(1 − F)).
    first = -math.expm1(-(0.01**2))
    assert first <= series_renewal(0.01, 2.0) <= first + first**2 / (1 - first)


def test_exponential_lifetimes_renew_as_a_poisson_process():
    # Shape 1: M(t) = t/λ. The midpoint sums' error grows with t/λ up to where the step is λ/40
    # (t/λ >= 160): measured 1.3e-7 relative at 7, 2.6e-5 at 200 and at 500.
    for t in (1e-6, 0.3, 7.0, 200.0, 500.0):
        assert renewal_function(t, 1.0) == pytest.approx(t, rel=3e-5)


@pytest.mark.parametrize(("shape", "t"), SERIES_POINTS)
def test_renewal_function_matches_the_series(shape, t):
    # Measured: at most 3.4e-6 relative at shape 1/2 (t/λ = 10; the density is singular at 0),
    # 3.0e-8 at shapes 2 and 3.
    assert renewal_function(t, shape) == pytest.approx(series_renewal(t, shape), rel=5e-6 if shape < 1 else 1e-7)


@pytest.mark.parametrize(("shape", "t"), SERIES_POINTS)
def test_expected_renewals_of_a_new_unit_match_the_series(shape, t):
    # The screen's grids (spans of 0.5 and 20 mean lifetimes, 4,000 steps each, the same solver),
    # interpolated linearly: measured at most 9.1e-5 relative (shape 3 at t/λ = 0.01, where M grows
    # as t³ between grid points 1.1e-4 λ apart); the solver this replaced was 7.3e-4 off (shape 1/2).
    mtbf = math.gamma(1 + 1 / shape)  # scale 1
    value = expected_renewals(np.array([t]), shape, mtbf, "new")[0]
    assert value == pytest.approx(series_renewal(t, shape), rel=1e-4)


def test_a_delayed_renewal_of_an_exponential_unit_is_poisson():
    # Shape 1 through the delayed sums (the screen short-cuts shape 1 to t / MTBF, so the grid is
    # asked directly): lifetimes without memory, so a unit of any age renews as t/λ. Measured:
    # 1.0e-6 relative at most.
    grid, values = _renewal_on_grid(20.0, 1.0, 1.0, 3.0)
    np.testing.assert_allclose(values[1:], grid[1:], rtol=2e-6)


def test_heavy_tailed_lifetimes_renew_as_simulated():
    # Shape 0.05 (the schema's smallest), MTBF 1,000 h, units new at 0: hundreds of renewals per
    # hour early on. 2,000 units' renewals drawn here with NumPy; the counts by 1, 10 and 100 h
    # within 4 standard errors. (The screen's former solver, trapezoidal sums on 2,001 points, gave
    # 73 renewals by 10 h against the 609 simulated.)
    shape, mtbf_h = 0.05, 1000.0
    scale = mtbf_h / math.gamma(1 + 1 / shape)
    horizons = np.array([1.0, 10.0, 100.0])
    rng = np.random.default_rng(3)
    clock, counts, alive = np.zeros(2000), np.zeros((horizons.size, 2000)), np.ones(2000, bool)
    while alive.any():
        clock[alive] += scale * rng.exponential(size=int(alive.sum())) ** (1 / shape)
        counts += (clock <= horizons[:, None]) & alive
        alive &= clock <= horizons[-1]
    se = counts.std(axis=1) / math.sqrt(clock.size)
    expected = expected_renewals(horizons * 3600.0, shape, mtbf_h * 3600.0, "new")
    assert np.all(np.abs(expected - counts.mean(axis=1)) < 4 * se), (expected, counts.mean(axis=1), se)
