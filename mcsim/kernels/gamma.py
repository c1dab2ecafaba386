"""Regularized incomplete gamma functions and the inverse of Q, in log space, for Numba.

``P(a, x) = γ(a, x) / Γ(a)`` and ``Q(a, x) = Γ(a, x) / Γ(a) = 1 - P(a, x)``.
They serve the stationary start of a Weibull(k, λ) failure class
(docs/model.md §4 "Failure processes"): the forward-recurrence (residual life)
law of its renewal process has survival ``Q(1/k, (t/λ)^k)``, so a residual
life with cumulative hazard ``h`` is ``t = λ x^(1/k)`` with ``Q(1/k, x) = e^-h``.
Numba has no ``gammainccinv``; these kernels provide it.

Everything is computed as a function of ``y = log x`` and returns logarithms,
so that neither ``x`` (which underflows for small ``a`` near ``P = 0``) nor
``Q`` (down to ``e^-h`` with ``h`` in the hundreds) leaves the double range:

* :func:`log_gamma_pq` gives ``(log P, log Q)``: the power series of ``P``
  for ``x < a + 1`` and the Legendre continued fraction of ``Q`` (modified
  Lentz) otherwise (Press et al., *Numerical Recipes*, 3rd ed., §6.2); the
  other one by ``log1p(-exp(.))``. In these regions the directly computed
  function is at least about 0.01 for ``a >= 0.05``, so the complement loses at
  most two digits.
* :func:`log_gammaincc_inv` solves ``log Q(a, e^y) = -h`` (or, for
  ``h < log 2``, ``log P(a, e^y) = log(-expm1(-h))``, which keeps the
  precision of ``1 - Q`` near ``Q = 1``) by Newton's method in ``y`` inside a
  bracket that falls back to bisection. ``log P(a, e^y)`` is concave and
  ``-log Q(a, e^y)`` convex in ``y`` (the log-gamma law has a log-concave
  density), so Newton converges monotonically after at most one overshoot.
  The start is ``P ≈ x^a / Γ(a + 1)`` for small ``P`` and the asymptotic
  ``Q ≈ x^(a-1) e^-x / Γ(a)`` for small ``Q``.

Accuracy against SciPy (``tests/kernels/test_gamma.py``, which asks for 1e-12): 2e-13 relative or better for
``0.05 <= a <= 20`` and ``e^-h`` down to 1e-300.
"""

from __future__ import annotations

import ctypes
import math

from numba import _helperlib

from .accelerate import JIT_DISABLED, jit_inline, jit_unmanaged

_EPS = 1e-17  # series / continued-fraction stopping ratio
_TINY = 1e-300  # Lentz's guard against division by zero
_MAX_TERMS = 10_000
_LOG_HALF = -math.log(2.0)
_MAX_LOG_X = 50.0  # x = 5e21: Q = e^-x is far below any double, so the root is left of it


def _c_lgamma():
    """``log |Γ(x)|`` as the compiled kernels compute it: the C library's ``lgamma``, which Numba compiles
    ``math.lgamma`` into. CPython's ``math.lgamma`` is an implementation of its own that differs from it
    in the last bits, so the kernels run as plain Python (``NUMBA_DISABLE_JIT=1``) call the C function,
    through Numba's helper library (private: where it lacks the function, Python's is the fall-back)."""
    address = getattr(_helperlib, "c_helpers", {}).get("lgamma")
    if not JIT_DISABLED or address is None:
        return math.lgamma
    return ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(address)


_lgamma = _c_lgamma()


@jit_unmanaged
def _log_p_series(a, y, x):
    """log P(a, x) by the power series ``x^a e^-x / Γ(a+1) · Σ x^n / ((a+1)…(a+n))``."""
    term = 1.0
    total = 1.0
    ap = a
    for _ in range(_MAX_TERMS):
        ap += 1.0
        term *= x / ap
        total += term
        if term < total * _EPS:
            break
    # The small terms first, x last: one rounding at the magnitude of the result.
    return (a * y - _lgamma(a + 1.0) + math.log(total)) - x


@jit_unmanaged
def _log_q_fraction(a, y, x):
    """log Q(a, x) by the continued fraction ``x^a e^-x / Γ(a) · 1/(x+1-a- 1(1-a)/(x+3-a- ...))``."""
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_TERMS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < _TINY:
            d = _TINY
        c = b + an / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return (a * y - _lgamma(a) + math.log(h)) - x


@jit_unmanaged
def _log1m_exp(v):
    """log(1 - e^v) for v <= 0 (Mächler 2012: expm1 or log1p by the size of v)."""
    if v > _LOG_HALF:
        return math.log(-math.expm1(v))
    return math.log1p(-math.exp(v))


@jit_unmanaged
def _log_pq(a, y, x):
    """``(log P, log Q)`` at ``x`` with ``y = log x`` (both given, so neither is rounded again)."""
    if x == 0.0 and y == -math.inf:
        return -math.inf, 0.0
    if y == math.inf:
        return 0.0, -math.inf
    if x < a + 1.0:
        log_p = _log_p_series(a, y, x)
        return log_p, _log1m_exp(log_p)
    log_q = _log_q_fraction(a, y, x)
    return _log1m_exp(log_q), log_q


@jit_unmanaged
def log_gamma_pq(a, y):
    """``(log P(a, x), log Q(a, x))`` at ``x = e^y``, for ``a > 0``.

    Parameters
    ----------
    a : float
        Shape, > 0.
    y : float
        ``log x``; ``-inf`` gives ``(-inf, 0)``, ``+inf`` gives ``(0, -inf)``.
    """
    return _log_pq(a, y, math.exp(y))


@jit_unmanaged
def log_gammaincc(a, x):
    """log Q(a, x) for ``a > 0``, ``x >= 0``."""
    return _log_pq(a, math.log(x), x)[1]


@jit_unmanaged
def gammaincc(a, x):
    """Q(a, x), the regularized upper incomplete gamma function (``scipy.special.gammaincc``)."""
    return math.exp(log_gammaincc(a, x))


@jit_unmanaged
def _initial_log_x(a, h, lower):
    """A starting ``y = log x`` for :func:`log_gammaincc_inv` (left of the root for the P branch)."""
    if lower:
        # P ≈ x^a / Γ(a+1) for small x (an upper bound of P: the start is left of the root).
        return min((_log1m_exp(-h) + _lgamma(a + 1.0)) / a, math.log(a + 1.0))
    # Q ≈ x^(a-1) e^-x / Γ(a) for large x: x = h - lgamma(a) + (a-1) log x, two fixed-point steps.
    x = max(h - _lgamma(a), a, 1.0)
    for _ in range(2):
        x = max(h - _lgamma(a) + (a - 1.0) * math.log(x), 0.5 * x, 1e-3)
    return math.log(x)


@jit_inline
def _inside_bracket(lo, hi):
    """A point of the bracket ``(lo, hi)`` when Newton's step leaves it: its middle, or a step of at least
    1 away from its one finite end."""
    if math.isfinite(lo) and math.isfinite(hi):
        return 0.5 * (lo + hi)
    if math.isfinite(lo):
        return lo + max(1.0, abs(lo))
    return hi - max(1.0, abs(hi))


@jit_unmanaged
def log_gammaincc_inv(a, h):
    """``y = log x`` with ``Q(a, x) = e^-h``: the inverse of Q in log space.

    Parameters
    ----------
    a : float
        Shape, > 0 (``1/k`` for a Weibull shape k).
    h : float
        ``-log Q``, >= 0 (a cumulative hazard); 0 gives ``-inf``, ``inf`` gives ``inf``.

    Returns
    -------
    float
        ``log x``; ``scipy.special.gammainccinv(a, exp(-h)) == exp(y)`` up to rounding.
    """
    if h <= 0.0:
        return -math.inf
    if h == math.inf:
        return math.inf
    lower = h < -_LOG_HALF  # Q > 1/2: solve on P = 1 - Q, known to full precision
    target = _log1m_exp(-h) if lower else -h
    lo = -math.inf  # f(lo) < 0 < f(hi), f increasing in y
    hi = math.inf
    y = _initial_log_x(a, h, lower)
    for _ in range(200):
        log_p, log_q = log_gamma_pq(a, y)
        x = math.exp(y)
        # f(y) = log P - target (increasing), or -(log Q - target) (increasing too).
        if lower:
            f = log_p - target
            slope = math.exp(a * y - x - _lgamma(a) - log_p)
        else:
            f = target - log_q
            slope = math.exp(a * y - x - _lgamma(a) - log_q)
        if f == 0.0:
            return y
        if f < 0.0:
            lo = y
        else:
            hi = y
        step = -f / slope
        if abs(step) <= 1e-15 * max(1.0, abs(y)):
            return y + step  # converged (a step this small may round onto a bracket end)
        y_new = min(y + step, _MAX_LOG_X)
        if not (lo < y_new < hi) or not math.isfinite(y_new):
            y_new = _inside_bracket(lo, hi)
            step = y_new - y
        y = y_new
        if abs(step) <= 1e-15 * max(1.0, abs(y)) or hi - lo <= 1e-15 * max(1.0, abs(y)):
            break
    return y


@jit_unmanaged
def gammaincc_inv(a, q):
    """x with Q(a, x) = q, for ``0 < q <= 1`` (``scipy.special.gammainccinv``)."""
    return math.exp(log_gammaincc_inv(a, -math.log(q)))
