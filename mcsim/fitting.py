"""Fit a Weibull failure law to a log of unit lifetimes (``mcsim fit-failures``).

Log format
----------
A CSV file (UTF-8) with a header row and exactly these four columns, in this order::

    unit,start_hours,end_hours,failed
    gpu-0017,0,1830.5,1
    gpu-0017,1830.5,4380,0
    node-3,120,4380,0

One row per unit lifetime:

``unit``
    Any string id of the unit (a GPU, a node, the cluster). It is not used by the fit;
    a unit that failed and was replaced or repaired has one row per lifetime.
``start_hours``
    When observation of this lifetime started [h], e.g. when the unit entered service.
``end_hours``
    When it ended [h]: the failure time if ``failed`` is true, otherwise the end of
    observation (the lifetime is right-censored: it lasted *at least* this long).
``failed``
    ``1``/``true`` (the lifetime ended in a failure) or ``0``/``false`` (censored),
    case-insensitive.

The lifetime is ``end_hours - start_hours`` and must be > 0. Blank lines and lines
whose first non-blank character is ``#`` are ignored. Any other deviation (missing
file, wrong header, wrong number of fields, a number that is not a finite number,
``end_hours <= start_hours``, a bad ``failed`` flag, no data rows, no failure at all)
raises :class:`mcsim.schema.ScenarioError` naming the file and the line.

Method
------
Maximum likelihood for the Weibull law with survival ``S(t) = exp(-(t/λ)^k)`` under
right censoring. With lifetimes ``t_i`` and failure indicators ``δ_i``::

    log L(k, λ) = Σ_{δ_i=1} [log k − log λ + (k − 1) log(t_i/λ)] − Σ_i (t_i/λ)^k

is maximised over ``(log k, log λ)`` with :func:`scipy.optimize.minimize` (BFGS with
the analytic gradient, then Newton steps), starting from the exponential MLE ``λ0 = Σ t_i / Σ δ_i``,
``k0 = 1``. Confidence intervals come from the observed information: the numerical
Hessian of ``−log L`` at the optimum in the log-parameters, inverted, gives the
asymptotic covariance; intervals are ``exp(estimate ± z·se)`` on the log scale, so
they stay positive. The mean time between failures ``MTBF = λ Γ(1 + 1/k)`` gets its
interval from the delta method on ``log MTBF``.

Assumptions: lifetimes are independent and identically distributed (units fail
independently; a replaced or repaired unit is as good as new, the renewal model the
simulator uses); censoring is non-informative (observation does not stop *because* a
unit is about to fail); each lifetime starts fresh at ``start_hours`` (no left
truncation of units that were already old when observation began). The intervals are
asymptotic (large-sample) intervals and can be too narrow with few failures.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, special, stats

from .schema import ScenarioError, field_meta

HEADER = ("unit", "start_hours", "end_hours", "failed")
_FLAGS = {"1": True, "true": True, "0": False, "false": False}
_HESSIAN_STEP = 1e-4  # central-difference step in (log k, log λ); relative, so unitless


@dataclass(frozen=True)
class WeibullFit:
    """A right-censored maximum likelihood Weibull fit.

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
        Sum of all lifetimes, failed and censored [unit-hours].
    log_likelihood : float
        ``log L`` at the optimum (lifetimes in hours) [-].
    confidence : float
        Level of the intervals, e.g. 0.95 [-].
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


def read_failure_log(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a failure log (format in the module docstring).

    Parameters
    ----------
    path : str or Path
        The CSV file.

    Returns
    -------
    durations_h : np.ndarray of float
        Lifetimes ``end_hours - start_hours`` [h], all > 0.
    failed : np.ndarray of bool
        True where the lifetime ended in a failure, False where it is right-censored.

    Raises
    ------
    ScenarioError
        If the file is missing, unreadable or malformed, or holds no failure.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ScenarioError(source, "file", "no such file") from None
    except IsADirectoryError:
        raise ScenarioError(source, "file", "is a directory; expected a CSV file") from None
    except UnicodeDecodeError:
        raise ScenarioError(source, "file", "not a UTF-8 text file") from None
    except OSError as err:
        raise ScenarioError(source, "file", f"cannot read: {err.strerror or err}") from None
    header_seen = False
    durations: list[float] = []
    flags: list[bool] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key = f"line {n}"
        try:
            fields = [f.strip() for f in next(csv.reader([line], strict=True))]
        except csv.Error as err:
            raise ScenarioError(source, key, f"not a CSV row ({err})") from None
        if not header_seen:
            if tuple(f.lower() for f in fields) != HEADER:
                raise ScenarioError(source, key, f"expected the header {','.join(HEADER)!r}, got {line.strip()!r}")
            header_seen = True
            continue
        if len(fields) != len(HEADER):
            raise ScenarioError(source, key, f"expected {len(HEADER)} fields ({','.join(HEADER)}), "
                                             f"got {len(fields)}")
        start, end = (_number(source, key, name, value) for name, value in zip(HEADER[1:3], fields[1:3]))
        if not end > start:
            raise ScenarioError(source, key, f"end_hours must be > start_hours, got {fields[2]} <= {fields[1]}")
        flag = _FLAGS.get(fields[3].lower())
        if flag is None:
            raise ScenarioError(source, key, f"failed: expected 1, 0, true or false, got {fields[3]!r}")
        durations.append(end - start)
        flags.append(flag)
    if not header_seen:
        raise ScenarioError(source, "line 1", f"empty file; expected the header {','.join(HEADER)!r}")
    if not durations:
        raise ScenarioError(source, "rows", "no data rows after the header")
    if not any(flags):
        raise ScenarioError(source, "failed", f"no row has failed = 1 among {len(flags)} rows; "
                                              "a failure law cannot be fitted without failures")
    return np.asarray(durations, dtype=float), np.asarray(flags, dtype=bool)


def _number(source: str, key: str, column: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ScenarioError(source, key, f"{column}: expected a number of hours, got {value!r}") from None
    if not math.isfinite(number):
        raise ScenarioError(source, key, f"{column}: expected a finite number of hours, got {value!r}")
    return number


def _neg_log_lik(theta: np.ndarray, t: np.ndarray, failed: np.ndarray) -> tuple[float, np.ndarray]:
    """``-log L`` and its gradient in ``theta = (log k, log λ)`` (``t`` in the units of λ)."""
    log_k, log_lam = theta
    k = math.exp(min(log_k, 700.0))           # a diverging shape gives inf/nan, rejected by the caller
    w = np.log(t) - log_lam                      # log(t/λ)
    z = np.exp(np.minimum(k * w, 700.0))         # (t/λ)^k, capped against overflow
    r = float(np.count_nonzero(failed))
    wf_sum = float(w[failed].sum())
    log_lik = r * (log_k - log_lam) + (k - 1.0) * wf_sum - float(z.sum())
    d_log_k = r + k * wf_sum - k * float((z * w).sum())
    d_log_lam = -k * r + k * float(z.sum())
    return -log_lik, -np.array([d_log_k, d_log_lam])


def _hessian(theta: np.ndarray, t: np.ndarray, failed: np.ndarray) -> np.ndarray:
    """Numerical Hessian of ``-log L`` (central differences of the analytic gradient)."""
    h = _HESSIAN_STEP
    hess = np.empty((2, 2))
    for j in range(2):
        step = np.zeros(2)
        step[j] = h
        hess[:, j] = (_neg_log_lik(theta + step, t, failed)[1] - _neg_log_lik(theta - step, t, failed)[1]) / (2 * h)
    return 0.5 * (hess + hess.T)


def fit_weibull(durations_h: np.ndarray, failed: np.ndarray, confidence: float = 0.95) -> WeibullFit:
    """Maximum likelihood Weibull fit of right-censored lifetimes.

    Parameters
    ----------
    durations_h : array of float
        Lifetimes [h], all finite and > 0.
    failed : array of bool
        True for a lifetime that ended in a failure, False for a right-censored one.
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
        maximum (e.g. every lifetime failed at the same time, so ``k`` diverges).
    """
    t = np.asarray(durations_h, dtype=float)
    delta = np.asarray(failed, dtype=bool)
    if t.ndim != 1 or t.shape != delta.shape or t.size == 0:
        raise ValueError("durations_h and failed must be non-empty 1-D arrays of the same length")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("durations_h must be finite and > 0")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    r = int(np.count_nonzero(delta))
    if r == 0:
        raise ValueError("no failures: a failure law cannot be fitted")
    total = float(t.sum())
    lam0 = total / r                              # exponential MLE: the starting point
    ts = t / lam0                                 # work in units of λ0, so log λ starts at 0
    with np.errstate(all="ignore"):
        result = optimize.minimize(_neg_log_lik, np.zeros(2), args=(ts, delta), jac=True, method="BFGS",
                                   options={"gtol": 1e-9 * r, "maxiter": 1000})
        theta = result.x
        # Polish with Newton steps on the numerical Hessian (BFGS stops on a loose gradient).
        for _ in range(20):
            grad = _neg_log_lik(theta, ts, delta)[1]
            if not np.all(np.isfinite(grad)) or np.max(np.abs(grad)) < 1e-10 * r:
                break
            try:
                theta = theta - np.linalg.solve(_hessian(theta, ts, delta), grad)
            except np.linalg.LinAlgError:
                break
        nll, grad = _neg_log_lik(theta, ts, delta)
        hess = _hessian(theta, ts, delta)
    if (not np.all(np.isfinite(theta)) or abs(theta[0]) > math.log(1e3) or not np.all(np.isfinite(grad))
            or np.max(np.abs(grad)) > 1e-6 * r or not np.all(np.isfinite(hess))
            or np.any(np.linalg.eigvalsh(hess) <= 0)):
        raise ValueError("the likelihood has no finite maximum (the shape diverges): the failure times "
                         "are too few or too alike to determine a Weibull law")
    cov = np.linalg.inv(hess)
    log_k, log_lam = theta[0], theta[1] + math.log(lam0)   # the Hessian is unchanged by the shift
    k = math.exp(log_k)
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    se_log_k = math.sqrt(cov[0, 0])
    log_mtbf = log_lam + float(special.gammaln(1.0 + 1.0 / k))
    grad_log_mtbf = np.array([-float(special.digamma(1.0 + 1.0 / k)) / k, 1.0])  # d/d(log k), d/d(log λ)
    se_log_mtbf = math.sqrt(float(grad_log_mtbf @ cov @ grad_log_mtbf))
    # log L in hours: rescaling t by λ0 shifts it by r·log λ0 (the density's Jacobian)
    log_lik = -nll - r * math.log(lam0)
    return WeibullFit(shape=k, shape_low=math.exp(log_k - z * se_log_k), shape_high=math.exp(log_k + z * se_log_k),
                      scale_hours=math.exp(log_lam), mtbf_hours=math.exp(log_mtbf),
                      mtbf_low=math.exp(log_mtbf - z * se_log_mtbf), mtbf_high=math.exp(log_mtbf + z * se_log_mtbf),
                      n_units=int(t.size), n_failures=r, total_hours=total, log_likelihood=float(log_lik),
                      confidence=confidence)


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
        A comment line with the intervals and counts, then the table (shape and MTBF
        to 4 significant digits), ending in a newline.

    Raises
    ------
    ValueError
        If a value lies outside what a scenario accepts (see :mod:`mcsim.schema`).
    """
    if not name or not name.replace("_", "").replace("-", "").isalnum() or not name.isascii():
        raise ValueError(f"name: expected letters, digits, _ or -, got {name!r}")
    meta = field_meta("failures", "scope") or {}
    if scope not in meta.get("choices", (scope,)):
        raise ValueError(f"scope: expected one of {', '.join(meta['choices'])}, got {scope!r}")
    for key, value in (("shape", fit.shape), ("mtbf_hours", fit.mtbf_hours), ("recovery_minutes", recovery_minutes)):
        meta = field_meta("failures", key) or {}
        strict = meta.get("gt") is not None
        low, high = meta.get("gt") if strict else meta.get("ge"), meta.get("le")
        too_low = low is not None and (value <= low if strict else value < low)
        if not math.isfinite(value) or too_low or (high is not None and value > high):
            lower = f"{'>' if strict else '>='} {low:g}" if low is not None else ""
            upper = f"<= {high:g}" if high is not None else ""
            raise ValueError(f"{key}: a scenario accepts {' and '.join(x for x in (lower, upper) if x)}, "
                             f"got {value:.4g}")
    level = f"{100 * fit.confidence:g} %"
    return (f"# Weibull MLE fit: shape {fit.shape:.3g} [{fit.shape_low:.3g}, {fit.shape_high:.3g}], "
            f"MTBF {fit.mtbf_hours:.4g} h [{fit.mtbf_low:.4g}, {fit.mtbf_high:.4g}] ({level} CI); "
            f"n = {fit.n_units} lifetimes, {fit.n_failures} failures, {fit.total_hours:.4g} unit-hours\n"
            f"[[failures]]\n"
            f"name = \"{name}\"\n"
            f"scope = \"{scope}\"\n"
            f"shape = {_rounded(fit.shape)}\n"
            f"mtbf_hours = {_rounded(fit.mtbf_hours)}\n"
            f"recovery_minutes = {_rounded(recovery_minutes)}\n")


__all__ = ["HEADER", "WeibullFit", "read_failure_log", "fit_weibull", "failures_table_toml"]
