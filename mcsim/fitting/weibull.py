"""The Weibull failure law of a log of unit lifetimes, by maximum likelihood (``mcsim fit-failures``).

The log and its format: :mod:`mcsim.fitting.failure_log`; the table a scenario takes:
:mod:`mcsim.fitting.failure_table`.

Method
------
Maximum likelihood for the Weibull law with survival ``S(t) = exp(-(t/λ)^k)`` under
right censoring and left truncation. With ages at the end ``a_i``, ages at entry
``e_i`` and failure indicators ``δ_i``, each lifetime contributes its density (failed)
or survival (censored) at ``a_i``, conditioned on having survived to ``e_i``::

    log L(k, λ) = Σ_{δ_i=1} [log k − log λ + (k − 1) log(a_i/λ)] − Σ_i (a_i/λ)^k + Σ_i (e_i/λ)^k

is maximised over ``(log k, log λ)`` with :func:`scipy.optimize.minimize` (BFGS with
the analytic gradient, then Newton steps), starting from the exponential MLE
``λ0 = Σ (a_i − e_i) / Σ δ_i``, ``k0 = 1``. Confidence intervals come from the observed
information: the numerical Hessian of ``−log L`` at the optimum in the log-parameters,
inverted, gives the asymptotic covariance; intervals are ``exp(estimate ± z·se)`` on
the log scale, so they stay positive. The mean time between failures
``MTBF = λ Γ(1 + 1/k)`` gets its interval from the delta method on ``log MTBF``.

Assumptions: lifetimes are independent and identically distributed (units fail
independently; a replaced or repaired unit is as good as new, the renewal model the
simulator uses); censoring and entry are non-informative (observation does not stop
*because* a unit is about to fail, nor start because it survived). The intervals are
asymptotic (large-sample) intervals and can be too narrow with few failures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from mcsim.fitting.failure_log import FailureLog

_HESSIAN_STEP = 1e-4  # central-difference step in (log k, log λ); relative, so unitless


_LOG_MAX = math.log(np.finfo(float).max)  # ~709.8: exp() of more overflows


@dataclass(frozen=True)
class WeibullFit:
    """A maximum likelihood Weibull fit (right-censored, left-truncated lifetimes).

    Attributes
    ----------
    shape, shape_low, shape_high : float
        Weibull shape ``k`` [-] and its confidence interval.
    scale_hours : float
        Weibull scale ``λ`` [h].
    mtbf_hours, mtbf_low, mtbf_high : float
        Mean lifetime ``λ Γ(1 + 1/k)`` [h] and its confidence interval.
    n_units : int
        Number of observed lifetimes (rows of the log) [-].
    n_failures : int
        Number of lifetimes that ended in a failure [-].
    total_hours : float
        Sum of all observed times, failed and censored [unit-hours].
    log_likelihood : float
        ``log L`` at the optimum (lifetimes in hours) [-].
    confidence : float
        Level of the intervals, e.g. 0.95 [-].
    n_truncated : int
        Number of lifetimes observed from an age > 0 (left-truncated) [-].
    covariance : tuple of tuple of float
        Asymptotic covariance of ``(log k, log λ)`` (inverse observed information) [-].
    """

    shape: float
    shape_low: float
    shape_high: float
    scale_hours: float
    mtbf_hours: float
    mtbf_low: float
    mtbf_high: float
    n_units: int
    n_failures: int
    total_hours: float
    log_likelihood: float
    confidence: float = 0.95
    n_truncated: int = 0
    covariance: tuple[tuple[float, float], tuple[float, float]] = ((math.nan, math.nan), (math.nan, math.nan))


def _neg_log_lik(theta: np.ndarray, a: np.ndarray, failed: np.ndarray, entry: np.ndarray) -> tuple[float, np.ndarray]:
    """``-log L`` and its gradient in ``theta = (log k, log λ)``.

    ``a`` are the ages at the end and ``entry`` the ages > 0 at entry (only those; an
    entry at age 0 adds nothing), in the units of λ.
    """
    log_k, log_lam = theta
    k = math.exp(min(log_k, 700.0))  # a diverging shape gives inf/nan, rejected by the caller
    w = np.log(a) - log_lam  # log(a/λ)
    z = np.exp(np.minimum(k * w, 700.0))  # (a/λ)^k, capped against overflow
    we = np.log(entry) - log_lam  # log(e/λ)
    ze = np.exp(np.minimum(k * we, 700.0))  # (e/λ)^k
    r = float(np.count_nonzero(failed))
    wf_sum = float(w[failed].sum())
    log_lik = r * (log_k - log_lam) + (k - 1.0) * wf_sum - float(z.sum()) + float(ze.sum())
    d_log_k = r + k * wf_sum - k * float((z * w).sum()) + k * float((ze * we).sum())
    d_log_lam = -k * r + k * float(z.sum()) - k * float(ze.sum())
    return -log_lik, -np.array([d_log_k, d_log_lam])


def _hessian(theta: np.ndarray, *data: np.ndarray) -> np.ndarray:
    """Numerical Hessian of ``-log L`` (central differences of the analytic gradient)."""
    h = _HESSIAN_STEP
    hess = np.empty((2, 2))
    for j in range(2):
        step = np.zeros(2)
        step[j] = h
        hess[:, j] = (_neg_log_lik(theta + step, *data)[1] - _neg_log_lik(theta - step, *data)[1]) / (2 * h)
    return 0.5 * (hess + hess.T)


def _maximise(data: tuple[np.ndarray, ...], r: int) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """BFGS then Newton polish from (0, 0); returns theta, -log L, gradient and Hessian there."""
    result = optimize.minimize(
        _neg_log_lik, np.zeros(2), args=data, jac=True, method="BFGS", options={"gtol": 1e-9 * r, "maxiter": 1000}
    )
    theta = result.x
    # Polish with Newton steps on the numerical Hessian (BFGS stops on a loose gradient).
    for _ in range(20):
        grad = _neg_log_lik(theta, *data)[1]
        if not np.all(np.isfinite(grad)) or np.max(np.abs(grad)) < 1e-10 * r:
            break
        try:
            theta = theta - np.linalg.solve(_hessian(theta, *data), grad)
        except np.linalg.LinAlgError:
            break
    nll, grad = _neg_log_lik(theta, *data)
    return theta, nll, grad, _hessian(theta, *data)


def fit_weibull(
    durations_h: np.ndarray, failed: np.ndarray, entry_h: np.ndarray | None = None, confidence: float = 0.95
) -> WeibullFit:
    """Maximum likelihood Weibull fit of right-censored, optionally left-truncated lifetimes.

    Parameters
    ----------
    durations_h : array of float
        Observed time of each lifetime [h], all finite and > 0.
    failed : array of bool
        True for a lifetime that ended in a failure, False for a right-censored one.
    entry_h : array of float, optional
        Age of each unit when its observation began [h], finite and >= 0; None or 0
        means observed from new. The likelihood conditions on survival to this age.
    confidence : float
        Level of the two-sided asymptotic confidence intervals, in (0, 1) [-].

    Returns
    -------
    WeibullFit
        Estimates, intervals and counts; see the module docstring for the method.

    Raises
    ------
    ValueError
        If the inputs are invalid, hold no failure, or the likelihood has no finite
        maximum (e.g. every lifetime failed at the same time, so ``k`` diverges), or
        the estimates overflow a float.
    """
    with np.errstate(all="ignore"):
        t, delta, e = _checked_lifetimes(durations_h, failed, entry_h, confidence)
        r = int(np.count_nonzero(delta))
        # Work in units of the exponential MLE λ0 = Σ t / r (the starting point, log λ = 0),
        # computed through the largest age so that neither the sum nor the ratios overflow.
        big = float(np.max(e + t))
        lam0 = float(np.sum(t / big)) / r  # in units of `big`, finite
        a, entry = (e + t) / big / lam0, e[e > 0] / big / lam0
        if not (np.all(a > 0) and np.all(np.isfinite(a)) and np.all(entry > 0)):
            raise ValueError("the lifetimes span too many orders of magnitude to be represented together")
        theta, nll, grad, hess = _maximise((a, delta, entry), r)
        if not _is_finite_maximum(theta, grad, hess, r):
            raise ValueError(
                "the likelihood has no finite maximum (the shape diverges): the failure times "
                "are too few or too alike to determine a Weibull law"
            )
        cov = np.linalg.inv(hess)
        return _fit_result(theta, cov, math.log(big) + math.log(lam0), nll, t, delta, e, confidence)


def _checked_lifetimes(
    durations_h: np.ndarray, failed: np.ndarray, entry_h: np.ndarray | None, confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arguments of :func:`fit_weibull` as arrays (durations, failure flags, entry ages), checked."""
    t = np.asarray(durations_h, dtype=float)
    delta = np.asarray(failed, dtype=bool)
    e = np.zeros_like(t) if entry_h is None else np.asarray(entry_h, dtype=float)
    if t.ndim != 1 or t.shape != delta.shape or t.shape != e.shape or t.size == 0:
        raise ValueError("durations_h, failed and entry_h must be non-empty 1-D arrays of the same length")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("durations_h must be finite and > 0")
    if not np.all(np.isfinite(e)) or np.any(e < 0) or not np.all(np.isfinite(e + t)):
        raise ValueError("entry_h must be finite and >= 0, and entry_h + durations_h finite")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not delta.any():
        raise ValueError("no failures: a failure law cannot be fitted")
    return t, delta, e


def _is_finite_maximum(theta: np.ndarray, grad: np.ndarray, hess: np.ndarray, r: int) -> bool:
    """Whether the optimiser ended at a finite maximum: a shape within 1e±3, a gradient near 0 (relative
    to the ``r`` failures) and a positive definite Hessian of ``−log L``."""
    return bool(
        np.all(np.isfinite(theta))
        and abs(theta[0]) <= math.log(1e3)
        and np.all(np.isfinite(grad))
        and np.max(np.abs(grad)) <= 1e-6 * r
        and np.all(np.isfinite(hess))
        and np.all(np.linalg.eigvalsh(hess) > 0)
    )


def _fit_result(
    theta: np.ndarray,
    cov: np.ndarray,
    log_unit: float,
    nll: float,
    t: np.ndarray,
    delta: np.ndarray,
    e: np.ndarray,
    confidence: float,
) -> WeibullFit:
    """Estimates and intervals in hours from the optimum in units of ``exp(log_unit)`` hours."""
    r = int(np.count_nonzero(delta))
    log_k, log_lam = float(theta[0]), float(theta[1]) + log_unit  # the Hessian is unchanged by the shift
    k = math.exp(log_k)
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    se_log_k = math.sqrt(cov[0, 0])
    log_mtbf = log_lam + float(special.gammaln(1.0 + 1.0 / k))
    grad_log_mtbf = np.array([-float(special.digamma(1.0 + 1.0 / k)) / k, 1.0])  # d/d(log k), d/d(log λ)
    se_log_mtbf = math.sqrt(float(grad_log_mtbf @ cov @ grad_log_mtbf))
    if (
        not all(math.isfinite(v) for v in (se_log_k, se_log_mtbf))
        or max(abs(log_lam), abs(log_mtbf) + z * se_log_mtbf, abs(log_k) + z * se_log_k) >= _LOG_MAX
    ):
        raise ValueError(
            f"the fitted scale or MTBF (about 10^{log_mtbf / math.log(10):.0f} h) or its interval overflows a float"
        )
    # log L in hours: rescaling t by the unit shifts it by r·log_unit (the density's Jacobian)
    log_lik = -nll - r * log_unit
    total = float(np.sum(t))
    return WeibullFit(
        shape=k,
        shape_low=math.exp(log_k - z * se_log_k),
        shape_high=math.exp(log_k + z * se_log_k),
        scale_hours=math.exp(log_lam),
        mtbf_hours=math.exp(log_mtbf),
        mtbf_low=math.exp(log_mtbf - z * se_log_mtbf),
        mtbf_high=math.exp(log_mtbf + z * se_log_mtbf),
        n_units=int(t.size),
        n_failures=r,
        total_hours=total,
        log_likelihood=float(log_lik),
        confidence=confidence,
        n_truncated=int(np.count_nonzero(e > 0)),
        covariance=((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1]))),
    )


def product_limit(log: FailureLog) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kaplan–Meier estimate of survival by age, with left truncation and right censoring.

    At each distinct failure age ``u_j`` the risk set holds the lifetimes with entry age
    ``e_i < u_j <= a_i`` (entered before, still observed); ``Ŝ(u_j) = Π_{l<=j} (1 − d_l/n_l)``
    with ``d_l`` failures among ``n_l`` at risk (Lawless, *Statistical Models and Methods
    for Lifetime Data*, 2nd ed., 2003, §3.5). When no unit is observed from age 0 the
    estimate is of ``S(t)/S(s0)``, ``s0`` the smallest entry age.

    Parameters
    ----------
    log : FailureLog
        The lifetimes.

    Returns
    -------
    ages_h : np.ndarray
        Distinct failure ages ``u_j`` [h].
    survival : np.ndarray
        ``Ŝ(u_j)`` [-].
    greenwood : np.ndarray
        Greenwood's ``Σ_{l<=j} d_l / (n_l (n_l − d_l))`` [-] (``Var Ŝ ≈ Ŝ² ·`` this).
    """
    entry = np.asarray(log.entry_h, dtype=float)
    ages = entry + np.asarray(log.durations_h, dtype=float)
    failed = np.asarray(log.failed, dtype=bool)
    u, d = np.unique(ages[failed], return_counts=True)
    # n_j = #{a_i >= u_j} − #{e_i >= u_j}
    at_risk = (
        ages.size
        - np.searchsorted(np.sort(ages), u, side="left")
        - (entry.size - np.searchsorted(np.sort(entry), u, side="left"))
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        survival = np.cumprod(1.0 - d / at_risk)
        greenwood = np.cumsum(d / (at_risk * (at_risk - d)))
    return u, survival, greenwood
