"""The short-block law of fast mode (mcsim.model.block_law) against exact K-sums of the factor.

Expected values come from outside the module: the factor's moments from the quadrature of
``mcsim.model.stragglers.factor_law`` (itself checked against closed forms in
tests/kernels/test_run_mechanisms.py), and samples of the exact sum ``F_1 + ... + F_K`` drawn here by
inverse CDF of the maximum of G normals (``M = Phi^{-1}(U^{1/G})``, numpy's generator).
The Wasserstein-1 distance between the exact sums and the polynomial law is estimated from
the sorted sample against the polynomial at the normal quantiles of the same ranks; its
sampling noise (the same estimator on a sample of the polynomial law itself) is added to
the bound the module claims. The normal law fails the same check at these K (so the test
can fail), which is why fast mode walked these blocks before.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from mcsim.model.block_law import CELLS, MAX_SUM_CELLS, short_block_law, short_block_sum
from mcsim.model.stragglers import FAST_W1_TOLERANCE, factor_law

SAMPLES = 200_000
# (G, sigma, K): the 1,024-GPU reference's law at its Daly interval; the 16,384-GPU law below its
# threshold of 5; a single lognormal rank; few ranks with a wide law.
CASES = [(1024.0, 0.05, 3), (16384.0, 0.01, 2), (1.0, 0.3, 3), (8.0, 0.5, 5), (131072.0, 0.03, 12)]


def _exact_sums(n_ranks: float, sigma: float, block: int, rng: np.random.Generator) -> np.ndarray:
    u = rng.random((SAMPLES, block))
    maxima = -special.ndtri(-np.expm1(np.log(u) / n_ranks))  # Phi^{-1}(u^{1/G}), accurate near 1
    return np.exp(sigma * maxima).sum(axis=1)


def _w1_to(sample: np.ndarray, quantile) -> float:
    """W1 between a sample's empirical law and the law with quantile function ``quantile(z)``."""
    n = len(sample)
    z = special.ndtri((np.arange(n) + 0.5) / n)
    return float(np.mean(np.abs(np.sort(sample) - quantile(z))))


def _polynomial(law):
    return lambda z: np.polynomial.polynomial.polyval(z, law.coefficients)


@pytest.mark.parametrize(("n_ranks", "sigma", "block"), CASES)
def test_law_has_the_sums_mean_and_variance(n_ranks, sigma, block):
    law, moments = short_block_law(n_ranks, sigma, block), factor_law(n_ranks, sigma)
    z, w = np.polynomial.hermite_e.hermegauss(60)
    values = np.polynomial.polynomial.polyval(z, law.coefficients)
    mean = float(np.sum(w * values) / np.sum(w))
    std = math.sqrt(float(np.sum(w * (values - mean) ** 2) / np.sum(w)))
    # The projection on He_0 is the mean: exact but for the grid and the quadrature (below 1e-7).
    assert mean == pytest.approx(block * moments.mean, rel=1e-7)
    # The projection drops the variance of the degrees above 6 and the grid adds a cell's
    # (h^2 / 12 per factor): both far below 1e-4 of the variance for these laws.
    assert std == pytest.approx(math.sqrt(block) * moments.std, rel=1e-4)


@pytest.mark.parametrize(("n_ranks", "sigma", "block"), CASES)
def test_law_is_within_its_w1_bound_of_exact_sums(n_ranks, sigma, block):
    rng = np.random.default_rng(int(block * 1000 + n_ranks) % 2**32)
    law, moments = short_block_law(n_ranks, sigma, block), factor_law(n_ranks, sigma)
    assert law.block == block and law.w1_share <= FAST_W1_TOLERANCE
    mean, std = block * moments.mean, math.sqrt(block) * moments.std
    exact = _exact_sums(n_ranks, sigma, block, rng)
    measured = _w1_to(exact, _polynomial(law)) / mean
    # The estimator's floor: a sample of the polynomial law itself against it.
    own = _polynomial(law)(rng.standard_normal(SAMPLES))
    noise = _w1_to(own, _polynomial(law)) / mean
    assert measured <= law.w1_share + 4.0 * noise, (measured, law.w1_share, noise)
    # The normal law the kernel used for longer blocks is measurably worse here.
    normal = _w1_to(exact, lambda z: mean + std * z) / mean
    assert normal > measured + 4.0 * noise


def test_kernel_evaluation_matches_the_polynomial():
    law = short_block_law(1024.0, 0.05, 3)
    for z in (-8.0, -1.5, 0.0, 0.3, 2.0, 8.0):
        assert short_block_sum(law, z) == pytest.approx(_polynomial(law)(z), rel=1e-14)


@pytest.mark.parametrize(
    ("n_ranks", "sigma", "block", "why"),
    [
        (1024.0, 0.05, 1, "one iteration is drawn exactly"),
        (1024.0, 0.0, 3, "no straggler noise"),
        (1024.0, 0.05, 25, "the normal law's threshold (K_min = 25)"),
        (1.0, 5.0, 3, "error bound above the tolerance"),
        (1.0, 1.0, MAX_SUM_CELLS // CELLS + 1, "convolution too large"),
    ],
)
def test_no_law_where_fast_mode_walks_or_uses_the_normal(n_ranks, sigma, block, why):
    assert short_block_law(n_ranks, sigma, block) is None, why


def test_prepared_fast_configuration_carries_the_law():
    # The 1,024-GPU reference at its Daly interval (3 iterations, below K_min = 25).
    import mcsim
    from mcsim.model.preparation import kernel_inputs
    from mcsim.scenario.config import load_scenario

    cfg = load_scenario(mcsim.reference_scenario_path(), ["parallelism.gpus=1024", "model.recompute=full"]).base
    fast, exact = kernel_inputs(cfg, "fast").params, kernel_inputs(cfg, "exact").params
    law = short_block_law(1024.0, cfg.stragglers.sigma, fast.checkpoint_every)
    assert fast.checkpoint_every < fast.fast_min_block and law is not None
    assert fast.short_block == fast.checkpoint_every
    assert (fast.short_block_c0, fast.short_block_c6) == (law.coefficients[0], law.coefficients[6])
    assert exact.short_block == 0
