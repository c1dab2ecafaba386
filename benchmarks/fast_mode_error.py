"""Measured error of fast mode's normal law for a block of K iteration factors.

For each (G, sigma) and K this draws ``n`` exact K-sums of the slowest-rank
factor ``M`` (inverse-CDF, as exact mode does) and measures the Wasserstein-1
distance between their empirical law and N(K E[M], K Var[M]), as a share of
the block's mean ``K E[M]``. It prints the measurement beside the first-order
Edgeworth prediction ``0.161 |skew| std / (K mean)`` that
``mcsim.model.stragglers.FactorLaw.fast_min_block`` uses, and the sampling-noise
floor of the measurement (the same estimator applied to a normal sample of the
same size). A second table does the same for the short-block law
(``mcsim.model.block_law``: the polynomial of one normal deviate that fast mode draws for
a checkpoint interval below ``K_min``), beside the bound the module computes, and the
normal law's error at the same K. Usage:
``.venv/bin/python benchmarks/fast_mode_error.py [--samples N]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import special, stats

from mcsim.model.block_law import short_block_law
from mcsim.model.stragglers import EDGEWORTH_W1, FAST_W1_TOLERANCE, factor_law


def w1_to_normal(sample: np.ndarray, mean: float, std: float) -> float:
    """W1 between a sample's empirical law and N(mean, std^2), via sorted quantiles."""
    n = len(sample)
    q = stats.norm.ppf((np.arange(n) + 0.5) / n, loc=mean, scale=std)
    return float(np.mean(np.abs(np.sort(sample) - q)))


def w1_to_quantile(sample: np.ndarray, quantile) -> float:
    """W1 between a sample's empirical law and the law ``quantile(z)``, z a standard normal deviate."""
    n = len(sample)
    return float(np.mean(np.abs(np.sort(sample) - quantile(special.ndtri((np.arange(n) + 0.5) / n)))))


def exact_sums(rng: np.random.Generator, samples: int, n_ranks: float, sigma: float, k: int) -> np.ndarray:
    """``samples`` exact sums of ``k`` slowest-rank factors (inverse CDF of the maximum)."""
    u = rng.random((samples, k))
    return np.exp(sigma * -special.ndtri(-np.expm1(np.log(u) / n_ranks))).sum(axis=1)


def short_block_table(rng: np.random.Generator, samples: int) -> None:
    """The short-block law's measured W1 share beside its bound and the normal law's."""
    print(f"\nshort blocks (K < K_min): the polynomial law; samples {samples}")
    print(f"{'G':>7} {'sigma':>6} {'K':>4} {'measured W1/mean':>17} {'bound':>10} {'noise floor':>11} {'normal':>10}")
    for n_ranks, sigma, k in [(1024, 0.05, 3), (1024, 0.05, 12), (16384, 0.01, 2), (131072, 0.03, 4), (1, 0.3, 3)]:
        law, moments = short_block_law(float(n_ranks), sigma, k), factor_law(n_ranks, sigma)
        poly = lambda z, c=law.coefficients: np.polynomial.polynomial.polyval(z, c)  # noqa: E731
        mean, std = k * moments.mean, np.sqrt(k) * moments.std
        sums = exact_sums(rng, samples, n_ranks, sigma, k)
        measured = w1_to_quantile(sums, poly) / mean
        floor = w1_to_quantile(poly(rng.standard_normal(samples)), poly) / mean
        normal = w1_to_quantile(sums, lambda z, m=mean, s=std: m + s * z) / mean
        print(f"{n_ranks:>7} {sigma:>6} {k:>4} {measured:>17.3e} {law.w1_share:>10.3e} {floor:>11.3e} {normal:>10.3e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=200_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"tolerance {FAST_W1_TOLERANCE:g} of the block mean; samples {args.samples}")
    print(f"{'G':>7} {'sigma':>6} {'K':>4} {'measured W1/mean':>17} {'Edgeworth':>10} {'noise floor':>11} {'K_min':>6}")
    for n_ranks, sigma in [(1, 0.1), (1, 0.3), (1024, 0.05), (16384, 0.01), (131072, 0.03)]:
        law = factor_law(n_ranks, sigma)
        for k in (1, 2, 4, 8, 16, 32, 64):
            sums = exact_sums(rng, args.samples, n_ranks, sigma, k)
            mean, std = k * law.mean, np.sqrt(k) * law.std
            measured = w1_to_normal(sums, mean, std) / mean
            floor = w1_to_normal(rng.normal(mean, std, args.samples), mean, std) / mean
            predicted = EDGEWORTH_W1 * abs(law.skew) * law.std / (k * law.mean)
            print(
                f"{n_ranks:>7} {sigma:>6} {k:>4} {measured:>17.3e} {predicted:>10.3e} {floor:>11.3e} "
                f"{law.fast_min_block():>6}"
            )
    short_block_table(rng, args.samples)


if __name__ == "__main__":
    main()
