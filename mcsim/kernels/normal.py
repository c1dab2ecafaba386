"""Standard normal quantile and the exact max-of-G lognormal sampler.

``ndtri(p)`` is Acklam's rational approximation (relative error < 1.2e-9),
refined by one Halley step on ``erfc`` (Acklam, "An algorithm for computing
the inverse normal cumulative distribution function", 2003), which brings it
to double precision. Lower-tail arguments are handled directly, so
``-ndtri(q)`` is accurate for upper-tail quantiles with ``q`` as small as the
generator can produce.

``max_lognormal_factor`` draws ``M = max_i exp(sigma * Z_i)`` over ``G`` iid
standard normals from one uniform: ``M = exp(sigma * Phi^-1(U^(1/G)))``. With
``q = 1 - U^(1/G) = -expm1(log(U) / G)`` the quantile is taken as
``-ndtri(q)``, which stays accurate when ``U^(1/G)`` is within 1e-9 of 1 (as
it is for every U once G exceeds ~1e9 / log(1/U)).
"""

from __future__ import annotations

import math

from .accelerate import jit

# Acklam's coefficients.
_A0, _A1, _A2 = -3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02
_A3, _A4, _A5 = 1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00
_B0, _B1, _B2 = -5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02
_B3, _B4 = 6.680131188771972e01, -1.328068155288572e01
_C0, _C1, _C2 = -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00
_C3, _C4, _C5 = -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00
_D0, _D1, _D2, _D3 = 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00
_P_LOW = 0.02425
_SQRT2 = math.sqrt(2.0)
_SQRT2PI = math.sqrt(2.0 * math.pi)


@jit
def ndtri_acklam(p):
    """Acklam's approximation of the standard normal quantile, relative error < 1.2e-9.

    Used where a normal deviate is only sampled (fast-mode block sums, the job
    factor): its error is far below any Monte Carlo error, and it is cheaper
    than :func:`ndtri`.
    """
    if p < _P_LOW:
        q = math.sqrt(-2.0 * math.log(p))
        x = (((((_C0 * q + _C1) * q + _C2) * q + _C3) * q + _C4) * q + _C5) / (
            (((_D0 * q + _D1) * q + _D2) * q + _D3) * q + 1.0
        )
    elif p <= 1.0 - _P_LOW:
        q = p - 0.5
        r = q * q
        x = (((((_A0 * r + _A1) * r + _A2) * r + _A3) * r + _A4) * r + _A5) * q / (
            ((((_B0 * r + _B1) * r + _B2) * r + _B3) * r + _B4) * r + 1.0
        )
    else:
        q = math.sqrt(-2.0 * math.log1p(-p))
        x = -(((((_C0 * q + _C1) * q + _C2) * q + _C3) * q + _C4) * q + _C5) / (
            (((_D0 * q + _D1) * q + _D2) * q + _D3) * q + 1.0
        )
    return x


@jit
def ndtri(p):
    """Quantile of the standard normal for ``0 < p < 1`` (double precision)."""
    x = ndtri_acklam(p)
    # One Halley step. In the lower half the residual is formed with erfc,
    # which keeps its relative accuracy deep in the tail.
    if p < 0.5:
        e = 0.5 * math.erfc(-x / _SQRT2) - p
    else:
        e = (1.0 - p) - 0.5 * math.erfc(x / _SQRT2)  # Phi(x) - p, with 1 - p exact
    u = e * _SQRT2PI * math.exp(0.5 * x * x)
    return x - u / (1.0 + 0.5 * x * u)


@jit
def max_normal_quantile(u, n_ranks):
    """``Phi^-1(u^(1/n_ranks))``: the maximum of ``n_ranks`` iid standard normals.

    Parameters
    ----------
    u : float
        A uniform draw in (0, 1).
    n_ranks : int or float
        Number of ranks G >= 1.
    """
    log_p = math.log(u) / n_ranks
    if log_p < -0.6931471805599453:  # u^(1/G) < 0.5: lower half, direct
        return ndtri(math.exp(log_p))
    return -ndtri(-math.expm1(log_p))


@jit
def max_lognormal_factor(u, n_ranks, sigma):
    """Slowest-rank compute factor ``max_i exp(sigma * Z_i)`` from one uniform ``u``."""
    if sigma == 0.0:
        return 1.0
    return math.exp(sigma * max_normal_quantile(u, n_ranks))
