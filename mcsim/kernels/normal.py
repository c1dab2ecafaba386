"""Standard normal quantile and the exact max-of-G lognormal sampler.

``ndtri(p)`` is Wichura's algorithm AS 241 (PPND16: "The percentage points of
the normal distribution", Applied Statistics 37, 1988), rational functions
accurate to about 1e-16; measured against SciPy its relative error is below
1e-15 (the stated accuracy of the max-of-G sampler is 1e-9: docs/model.md §4).
Lower-tail arguments are handled directly, so ``-ndtri(q)`` is accurate for
upper-tail quantiles with ``q`` as small as the generator can produce.
``ndtri_acklam`` is Acklam's approximation ("An algorithm for computing the
inverse normal cumulative distribution function", 2003; relative error
< 1.2e-9), used where a normal deviate is only sampled.

``lognormal_mean_one`` draws a lognormal factor of mean 1, ``exp(sigma Z - sigma^2 / 2)``, from one uniform
(the recovery, repair, abandonment, queue, release and on-call laws all scale it).

``max_lognormal_factor`` draws ``M = max_i exp(sigma * Z_i)`` over ``G`` iid
standard normals from one uniform: ``M = exp(sigma * Phi^-1(U^(1/G)))``. With
``q = 1 - U^(1/G) = -expm1(log(U) / G)`` the quantile is taken as
``-ndtri(q)``, which stays accurate when ``U^(1/G)`` is within 1e-9 of 1 (as
it is for every U once G exceeds ~1e9 / log(1/U)).
"""

from __future__ import annotations

import math

from .accelerate import jit_inline, jit_unmanaged
from .rng import uniform

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


@jit_unmanaged
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
        x = (
            (((((_A0 * r + _A1) * r + _A2) * r + _A3) * r + _A4) * r + _A5)
            * q
            / (((((_B0 * r + _B1) * r + _B2) * r + _B3) * r + _B4) * r + 1.0)
        )
    else:
        q = math.sqrt(-2.0 * math.log1p(-p))
        x = -(((((_C0 * q + _C1) * q + _C2) * q + _C3) * q + _C4) * q + _C5) / (
            (((_D0 * q + _D1) * q + _D2) * q + _D3) * q + 1.0
        )
    return x


# Wichura's AS 241 PPND16 coefficients: central region |p - 0.5| <= 0.425, then the tail
# variable r = sqrt(-log(min(p, 1 - p))) below and above 5.
_A = (
    3.3871328727963666080e0,
    1.3314166789178437745e2,
    1.9715909503065514427e3,
    1.3731693765509461125e4,
    4.5921953931549871457e4,
    6.7265770927008700853e4,
    3.3430575583588128105e4,
    2.5090809287301226727e3,
)
_B = (
    4.2313330701600911252e1,
    6.8718700749205790830e2,
    5.3941960214247511077e3,
    2.1213794301586595867e4,
    3.9307895800092710610e4,
    2.8729085735721942674e4,
    5.2264952788528545610e3,
)
_C = (
    1.42343711074968357734e0,
    4.63033784615654529590e0,
    5.76949722146069140550e0,
    3.64784832476320460504e0,
    1.27045825245236838258e0,
    2.41780725177450611770e-1,
    2.27238449892691845833e-2,
    7.74545014278341407640e-4,
)
_D = (
    2.05319162663775882187e0,
    1.67638483018380384940e0,
    6.89767334985100004550e-1,
    1.48103976427480074590e-1,
    1.51986665636164571966e-2,
    5.47593808499534494600e-4,
    1.05075007164441684324e-9,
)
_E = (
    6.65790464350110377720e0,
    5.46378491116411436990e0,
    1.78482653991729133580e0,
    2.96560571828504891230e-1,
    2.65321895265761230930e-2,
    1.24266094738807843860e-3,
    2.71155556874348757815e-5,
    2.01033439929228813265e-7,
)
_F = (
    5.99832206555887937690e-1,
    1.36929880922735805310e-1,
    1.48753612908506148525e-2,
    7.86869131145613259100e-4,
    1.84631831751005468180e-5,
    1.42151175831644588870e-7,
    2.04426310338993978564e-15,
)


@jit_unmanaged
def _rational(r, num, den):
    """``num(r) / den(r)`` for degree-7 ``num`` and ``den`` given without its constant term 1 (Horner)."""
    n = ((((((num[7] * r + num[6]) * r + num[5]) * r + num[4]) * r + num[3]) * r + num[2]) * r + num[1]) * r + num[0]
    d = ((((((den[6] * r + den[5]) * r + den[4]) * r + den[3]) * r + den[2]) * r + den[1]) * r + den[0]) * r + 1.0
    return n / d


@jit_unmanaged
def ndtri(p):
    """Quantile of the standard normal for ``0 < p < 1``: Wichura's AS 241 (PPND16).

    Relative error below 1e-15 over (0, 1) (measured against SciPy's ``ndtri``,
    ``tests/kernels/test_rng_and_sampler.py``); no ``erfc`` or ``exp``, so it costs about
    0.6 of Acklam's approximation refined by a Halley step, the sampler it replaced.
    """
    q = p - 0.5
    if abs(q) <= 0.425:
        return q * _rational(0.180625 - q * q, _A, _B)
    r = math.sqrt(-math.log(p if q < 0.0 else 1.0 - p))
    x = _rational(r - 1.6, _C, _D) if r <= 5.0 else _rational(r - 5.0, _E, _F)
    return -x if q < 0.0 else x


@jit_unmanaged
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


@jit_unmanaged
def max_lognormal_factor(u, n_ranks, sigma):
    """Slowest-rank compute factor ``max_i exp(sigma * Z_i)`` from one uniform ``u``."""
    if sigma == 0.0:
        return 1.0
    return math.exp(sigma * max_normal_quantile(u, n_ranks))


@jit_inline
def lognormal_mean_one(stream, sigma):
    """A lognormal factor of mean 1 and log-sd ``sigma``: ``exp(sigma Z - sigma^2 / 2)``, one uniform of ``stream``."""
    return math.exp(sigma * ndtri_acklam(uniform(stream)) - 0.5 * sigma * sigma)
