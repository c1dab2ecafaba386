"""Moments of the slowest-rank factor M = max over G ranks of exp(sigma Z).

Fast mode draws the sum of K iteration factors from N(K E[M], K Var[M]);
these moments come from one quadrature per configuration over the density of
the maximum of G standard normals, ``f(z) = G phi(z) Phi(z)^(G-1)``,
evaluated in log space (``log_ndtr``) so it stays finite for any G.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate, special


def max_normal_median(n_ranks: float) -> float:
    """Median of the maximum of ``n_ranks`` iid standard normals."""
    return float(-special.ndtri(-math.expm1(math.log(0.5) / n_ranks)))


def _max_density(z: float, n_ranks: float) -> float:
    log_f = math.log(n_ranks) - 0.5 * z * z - 0.5 * math.log(2 * math.pi) + (n_ranks - 1) * special.log_ndtr(z)
    return math.exp(log_f)


def max_lognormal_moments(n_ranks: float, sigma: float) -> tuple[float, float]:
    """Mean and variance of ``M = max_i exp(sigma Z_i)`` over ``n_ranks`` ranks.

    Parameters
    ----------
    n_ranks : float
        Number of ranks G >= 1.
    sigma : float
        Lognormal shape of each rank's factor (median 1).

    Returns
    -------
    mean, variance : float
        E[M] and Var[M] (dimensionless).
    """
    if sigma == 0.0:
        return 1.0, 0.0
    center = max_normal_median(n_ranks)
    # The maximum's spread shrinks with G; +-12 standard units around the median
    # hold all mass to double precision for G >= 1.
    lo, hi = center - 12.0, center + 12.0
    opts = dict(points=[center], limit=400, epsabs=0.0, epsrel=1e-13)
    mean = integrate.quad(lambda z: math.exp(sigma * z) * _max_density(z, n_ranks), lo, hi, **opts)[0]
    var = integrate.quad(lambda z: (math.exp(sigma * z) - mean) ** 2 * _max_density(z, n_ranks),
                         lo, hi, **opts)[0]
    return float(mean), float(np.maximum(var, 0.0))
