"""Fit a Weibull failure law to a log of unit lifetimes (``mcsim fit-failures``).

Log format
----------
A CSV file (UTF-8) with a header row and these four columns, in this order, optionally
followed by a fifth, ``entry_hours``::

    unit,start_hours,end_hours,failed,entry_hours
    gpu-0017,0,1830.5,1,2200
    gpu-0017,1830.5,4380,0,0
    node-3,120,4380,0,0

One row per unit lifetime:

``unit``
    Any string id of the unit (a GPU, a node, the cluster). It is not used by the fit;
    a unit that failed and was replaced or repaired has one row per lifetime.
``start_hours``
    When observation of this lifetime started [h] (a clock time: when the log opened,
    or when the unit entered service if that was later).
``end_hours``
    When it ended [h]: the failure time if ``failed`` is true, otherwise the end of
    observation (the lifetime is right-censored: it lasted *at least* this long).
``failed``
    ``1``/``true`` (the lifetime ended in a failure) or ``0``/``false`` (censored),
    case-insensitive.
``entry_hours`` (optional column; 0 when absent)
    Age of the unit at ``start_hours`` [h], >= 0: how long it had already been in
    service when observation began (left truncation). A new or replaced unit has 0.

The unit's age at the end of the row is ``entry_hours + end_hours - start_hours``;
``end_hours - start_hours`` must be > 0. Blank lines and lines whose first non-blank
character is ``#`` are ignored. Any other deviation (missing file, wrong header, wrong
number of fields, a line over 1 MiB, a device or pipe instead of a file, a number that
is not a finite number or whose sum overflows,
``end_hours <= start_hours``, a negative ``entry_hours``, a bad ``failed`` flag, no data
rows, more than :data:`MAX_ROWS` rows, no failure at all) raises
:class:`mcsim.errors.ScenarioError` naming the file, the line and the column.

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

How the simulator uses the law
------------------------------
By default (``initial_age = "stationary"``) the simulator starts each unit at its
renewal process's equilibrium, so a job of ``T`` hours sees ``T / MTBF`` failures per
unit on average for any shape. With ``initial_age = "new"`` every unit is new at job
start and renewed at each failure, so its expected failures are the renewal function
``M(T)`` (:func:`mcsim.model.reliability.renewal_function`): :func:`failure_ratio` gives ``M(T) · MTBF / T``;
:func:`failures_table_toml` states both in the table's comment.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

from mcsim.errors import ScenarioError
from mcsim.fitting.failure_log import ENTRY_COLUMN, HEADER, MAX_ROWS, FailureLog, read_failure_log
from mcsim.model.reliability import renewal_function
from mcsim.scenario.schema import coerce_value, field_meta, param

_HESSIAN_STEP = 1e-4  # central-difference step in (log k, log λ); relative, so unitless


_LOG_MAX = math.log(np.finfo(float).max)  # ~709.8: exp() of more overflows


def _failure_key(name: str) -> dict:
    """The schema metadata of the ``[[failures]]`` key ``name``, which a fit fills in."""
    meta = field_meta("failures", name)
    assert meta is not None, name
    return meta


@dataclass(frozen=True)
class FitOptions:
    """The options of ``mcsim fit-failures``, declared like a scenario's keys (:func:`~mcsim.scenario.schema.param`).

    ``scope`` and ``recovery_minutes`` are the ``[[failures]]`` keys of the same names (their
    declarations are those of :class:`~mcsim.scenario.schema.FailureClass`).
    """

    scope: str = field(default="gpu", metadata=_failure_key("scope"))
    recovery_minutes: float = field(default=20.0, metadata=_failure_key("recovery_minutes"))
    confidence: float = param(0.95, gt=0, lt=1, doc="level of the two-sided confidence intervals")


# the command-line option of each FitOptions field, named in error messages
FIT_OPTION_NAMES = {"scope": "--scope", "recovery_minutes": "--recovery-minutes", "confidence": "--confidence"}


def fit_options(source: str, **values: object) -> FitOptions:
    """The checked options of ``mcsim fit-failures`` (given by field name; errors name the option).

    Raises
    ------
    ScenarioError
        ``source: --confidence: expected a value > 0 and < 1, got 1.5``.
    """
    checked = {
        fld.name: coerce_value(dict(fld.metadata), values[fld.name], source, FIT_OPTION_NAMES[fld.name])
        for fld in dataclasses.fields(FitOptions)
        if fld.name in values
    }
    return FitOptions(**checked)


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
        r = int(np.count_nonzero(delta))
        if r == 0:
            raise ValueError("no failures: a failure law cannot be fitted")
        # Work in units of the exponential MLE λ0 = Σ t / r (the starting point, log λ = 0),
        # computed through the largest age so that neither the sum nor the ratios overflow.
        big = float(np.max(e + t))
        lam0 = float(np.sum(t / big)) / r  # in units of `big`, finite
        a, entry = (e + t) / big / lam0, e[e > 0] / big / lam0
        if not (np.all(a > 0) and np.all(np.isfinite(a)) and np.all(entry > 0)):
            raise ValueError("the lifetimes span too many orders of magnitude to be represented together")
        theta, nll, grad, hess = _maximise((a, delta, entry), r)
        if (
            not np.all(np.isfinite(theta))
            or abs(theta[0]) > math.log(1e3)
            or not np.all(np.isfinite(grad))
            or np.max(np.abs(grad)) > 1e-6 * r
            or not np.all(np.isfinite(hess))
            or np.any(np.linalg.eigvalsh(hess) <= 0)
        ):
            raise ValueError(
                "the likelihood has no finite maximum (the shape diverges): the failure times "
                "are too few or too alike to determine a Weibull law"
            )
        cov = np.linalg.inv(hess)
        return _fit_result(theta, cov, math.log(big) + math.log(lam0), nll, t, delta, e, confidence)


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


def failure_ratio(shape: float, mtbf_hours: float, job_hours: float) -> float:
    """Failures a job sees with ``initial_age = "new"``, over those of an exponential law.

    Every unit starts new at job start (``t = 0``) and is renewed at each failure, so
    its expected failures in ``job_hours`` are ``M(T)``; an exponential law with the
    same MTBF gives ``T / MTBF``. The ratio does not depend on the number of units.

    Parameters
    ----------
    shape : float
        Weibull shape ``k`` [-].
    mtbf_hours : float
        Mean lifetime ``λ Γ(1 + 1/k)`` [h].
    job_hours : float
        Length of the job ``T`` [h], > 0.

    Returns
    -------
    float
        ``M(T) · MTBF / T`` [-]: above 1 for ``k < 1``, below 1 for ``k > 1`` when
        ``T`` is short against the MTBF, tending to 1 as ``T/MTBF`` grows.
    """
    scale = mtbf_hours / math.gamma(1.0 + 1.0 / shape)
    if not math.isfinite(job_hours / scale):
        return math.nan  # an MTBF of ~1e-300 h: no meaningful ratio
    return renewal_function(job_hours / scale, shape) * mtbf_hours / job_hours


_JOB_DAYS = (1, 30, 365)  # job lengths for which the table's comment states the ratio


def start_state_note(shape: float, mtbf_hours: float) -> str:
    """Comment lines saying how the simulator will use a fitted law (each starts with ``#``)."""
    ratios = {days: failure_ratio(shape, mtbf_hours, 24.0 * days) for days in _JOB_DAYS}
    others = ", ".join(f"{d} day{'s' if d > 1 else ''}: {ratios[d]:.3g}x" for d in _JOB_DAYS if d != 30)
    head = (
        "# The simulator starts each unit at its renewal process's equilibrium by default\n"
        '# (initial_age = "stationary"): a job of T hours on N units then sees N * T / MTBF failures\n'
        "# on average whatever the shape; the shape changes how they cluster. A unit that fails is\n"
        "# renewed (new)."
    )
    if shape == 1.0:
        effect = "shape 1 (exponential): no start state changes the failure rate"
    else:
        direction = "< 1 the early hazard is above 1/MTBF" if shape < 1 else "> 1 new units fail less at first"
        effect = (
            f'With initial_age = "new" (a freshly installed cluster) and shape k = {shape:g} {direction},\n'
            f"# so a 30-day job on any number of units sees about {ratios[30]:.3g} times the failures of an\n"
            f"# exponential law with the same MTBF ({others}; renewal function M(T) * MTBF / T)"
        )
    return f"{head}\n# {effect}.\n"


def _rounded(value: float, digits: int = 4) -> str:
    """A TOML float with ``digits`` significant digits (always a float literal)."""
    return repr(float(f"{value:.{digits}g}"))


def failures_table_toml(fit: WeibullFit, name: str, scope: str = "gpu", recovery_minutes: float = 20.0) -> str:
    """A ``[[failures]]`` TOML table for a scenario, from a fit.

    Parameters
    ----------
    fit : WeibullFit
        The fitted law.
    name : str
        Failure class name: letters, digits, ``_`` or ``-``.
    scope : str
        ``gpu``, ``node`` or ``cluster``: what one row of the log was.
    recovery_minutes : float
        Detection + replacement + restart time per failure [min] (not in the log).

    Returns
    -------
    str
        Comment lines (the intervals and counts; how the simulator will use the shape,
        :func:`start_state_note`), then the table (shape and MTBF to 4 significant
        digits), ending in a newline.

    Raises
    ------
    ValueError
        If a value lies outside what a scenario accepts (see :mod:`mcsim.schema`).
    """
    if not name or not name.replace("_", "").replace("-", "").isalnum() or not name.isascii():
        raise ValueError(f"name: expected letters, digits, _ or -, got {name[:100]!r}")
    for key, value in (
        ("scope", scope),
        ("shape", fit.shape),
        ("mtbf_hours", fit.mtbf_hours),
        ("recovery_minutes", recovery_minutes),
    ):
        try:  # what a scenario's [[failures]] table accepts
            coerce_value(_failure_key(key), value, "", key)
        except ScenarioError as err:
            raise ValueError(f"{key}: {err.message}") from None
    level = f"{100 * fit.confidence:g} %"
    truncated = f", {fit.n_truncated} left-truncated" if fit.n_truncated else ""
    shape, mtbf = float(_rounded(fit.shape)), float(_rounded(fit.mtbf_hours))
    return (
        f"# Weibull MLE fit: shape {fit.shape:.3g} [{fit.shape_low:.3g}, {fit.shape_high:.3g}], "
        f"MTBF {fit.mtbf_hours:.4g} h [{fit.mtbf_low:.4g}, {fit.mtbf_high:.4g}] ({level} CI); "
        f"n = {fit.n_units} lifetimes{truncated}, {fit.n_failures} failures, "
        f"{fit.total_hours:.4g} unit-hours\n"
        f"{start_state_note(shape, mtbf)}"
        f"[[failures]]\n"
        f'name = "{name}"\n'
        f'scope = "{scope}"\n'
        f"shape = {shape!r}\n"
        f"mtbf_hours = {mtbf!r}\n"
        f"recovery_minutes = {_rounded(recovery_minutes)}\n"
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


__all__ = [
    "HEADER",
    "ENTRY_COLUMN",
    "MAX_ROWS",
    "FailureLog",
    "WeibullFit",
    "read_failure_log",
    "fit_weibull",
    "failure_ratio",
    "start_state_note",
    "failures_table_toml",
    "product_limit",
]
