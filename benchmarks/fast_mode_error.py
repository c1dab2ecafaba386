"""Measured error of fast mode's normal law for a block of K iteration factors.

For each (G, sigma) and K this draws ``n`` exact K-sums of the slowest-rank
factor ``M`` (inverse-CDF, as exact mode does) and measures the Wasserstein-1
distance between their empirical law and N(K E[M], K Var[M]), as a share of
the block's mean ``K E[M]``. It prints the measurement beside the first-order
Edgeworth prediction ``0.161 |skew| std / (K mean)`` that
``mcsim.model.stragglers.FactorLaw.fast_min_block`` uses, and the sampling-noise
floor of the measurement (the same estimator applied to a normal sample of the
same size). Usage: ``.venv/bin/python benchmarks/fast_mode_error.py [--samples N]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import special, stats

from mcsim.model.stragglers import EDGEWORTH_W1, FAST_W1_TOLERANCE, factor_law


def w1_to_normal(sample: np.ndarray, mean: float, std: float) -> float:
    """W1 between a sample's empirical law and N(mean, std^2), via sorted quantiles."""
    n = len(sample)
    q = stats.norm.ppf((np.arange(n) + 0.5) / n, loc=mean, scale=std)
    return float(np.mean(np.abs(np.sort(sample) - q)))


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
            u = rng.random((args.samples, k))
            m = np.exp(sigma * -special.ndtri(-np.expm1(np.log(u) / n_ranks)))
            sums = m.sum(axis=1)
            mean, std = k * law.mean, np.sqrt(k) * law.std
            measured = w1_to_normal(sums, mean, std) / mean
            floor = w1_to_normal(rng.normal(mean, std, args.samples), mean, std) / mean
            predicted = EDGEWORTH_W1 * abs(law.skew) * law.std / (k * law.mean)
            print(
                f"{n_ranks:>7} {sigma:>6} {k:>4} {measured:>17.3e} {predicted:>10.3e} {floor:>11.3e} "
                f"{law.fast_min_block():>6}"
            )


if __name__ == "__main__":
    main()
