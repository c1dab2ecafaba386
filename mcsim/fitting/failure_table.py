"""``mcsim.fit_failures``: from a log of unit lifetimes to the TOML a scenario takes.

The function behind ``mcsim fit-failures`` (the command adds only the printed table and
the files): check the options (:class:`FitOptions`), read the log
(:mod:`mcsim.fitting.failure_log`), fit a Weibull law by maximum likelihood
(:func:`mcsim.fitting.weibull.fit_weibull`), write its ``[[failures]]`` table
(:func:`failures_table_toml`) and, when asked (``fit-failures --uncertain``), the ``[uncertain]``
entry of its MTBF and shape (:func:`uncertain_table_toml`). docs/fitting.md describes the log and
the fit.

How the simulator uses the law
------------------------------
By default (``initial_age = "stationary"``) the simulator starts each unit at its
renewal process's equilibrium, so a job of ``T`` hours sees ``T / MTBF`` failures per
unit on average for any shape. With ``initial_age = "new"`` every unit is new at job
start and renewed at each failure, so its expected failures are the renewal function
``M(T)`` (:func:`mcsim.model.reliability.renewal_function`): :func:`failure_ratio` gives ``M(T) · MTBF / T``;
:func:`failures_table_toml` states both in the table's comment.

From a fit to a prior
---------------------
The maximum likelihood fit (:func:`mcsim.fitting.weibull.fit_weibull`) gives the estimate
``theta = (log k, log λ)`` and its asymptotic covariance ``C`` (inverse observed
information). The simulator takes the class's ``mtbf_hours`` and ``shape``, so the
prior is stated on ``y = (log MTBF, log k)`` with ``log MTBF = log λ + log Γ(1 + 1/k)``:
by the delta method ``y`` is approximately normal with mean ``g(theta)`` and
covariance ``J C Jᵀ``, ``J = [[-ψ(1 + 1/k)/k, 1], [1, 0]]`` (``ψ`` the digamma
function). That is a bivariate lognormal of (MTBF, k): one ``mvlognormal`` entry
(:func:`mcsim.scenario.uncertain_table.parse_joint`) with medians ``exp(y)``, log-scale sigmas
``sqrt(diag)`` and the correlation of ``y`` — the joint uncertainty of the two,
not two independent guesses (the MTBF and shape estimates are in general correlated:
``log MTBF`` depends on ``k`` through ``log Γ(1 + 1/k)``, and censoring couples
``k`` and ``λ``; on the censored synthetic log of ``tests/test_fitting.py`` it is -0.70).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import special

from mcsim.errors import ScenarioError
from mcsim.fitting.failure_log import FailureLog, read_failure_log
from mcsim.fitting.sacct_log import FAILURE_STATES, is_sacct_log, read_sacct_log
from mcsim.fitting.weibull import WeibullFit, fit_weibull
from mcsim.model.reliability import renewal_function
from mcsim.scenario.consistency import FAILURE_NAME
from mcsim.scenario.schema import field_meta
from mcsim.scenario.toml import format_number
from mcsim.scenario.validation import coerce_value, param

# the command-line option of each argument that names a [[failures]] key, named in error messages
_OPTION_OF_KEY = {"name": "--name", "recovery_minutes": "--recovery-minutes", "scope": "--scope"}


def _failure_key(name: str) -> dict:
    """The schema metadata of the ``[[failures]]`` key ``name``, which a fit fills in."""
    meta = field_meta("failures", name)
    assert meta is not None, name
    return meta


@dataclass(frozen=True)
class FitOptions:
    """The options of ``mcsim fit-failures``, declared like a scenario's keys
    (:func:`~mcsim.scenario.validation.param`).

    ``scope`` and ``recovery_minutes`` are the ``[[failures]]`` keys of the same names (their
    declarations are those of :class:`~mcsim.scenario.interruptions.FailureClass`).
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
class FailureFit:
    """A failure log, its Weibull fit and the TOML a scenario takes (:func:`fit_failures`).

    Attributes
    ----------
    source : str
        The log's path.
    name : str
        The failure class name of the table.
    scope : str
        ``gpu``, ``node`` or ``cluster``: what one unit of the log is.
    recovery_minutes : float
        Recovery time per failure written into the table [min].
    confidence : float
        Level of the fit's two-sided confidence intervals (0 to 1).
    log : FailureLog
        The lifetimes read (durations [h], failure flags, entry ages [h]).
    fit : WeibullFit
        Shape, scale [h], MTBF [h] and their intervals.
    table : str
        The ``[[failures]]`` table (and the ``[uncertain]`` entry when asked) as TOML text.
    """

    source: str
    name: str
    scope: str
    recovery_minutes: float
    confidence: float
    log: FailureLog
    fit: WeibullFit
    table: str

    def __repr__(self) -> str:
        fit = self.fit
        return (
            f"<FailureFit {self.name!r} from {self.source}: Weibull shape {fit.shape:.4g} "
            f"[{fit.shape_low:.4g}, {fit.shape_high:.4g}], MTBF {fit.mtbf_hours:,.4g} h "
            f"[{fit.mtbf_low:,.4g}, {fit.mtbf_high:,.4g}] ({100 * self.confidence:g} % CI), "
            f"{fit.n_units} lifetimes, {fit.n_failures} failures>"
        )


def default_class_name(log: str | Path) -> str:
    """The failure class name made from a log's file name (``gpu-log.csv`` -> ``gpu-log``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", Path(log).stem) or "fitted"


def fit_failures(
    log: str | Path,
    *,
    name: str | None = None,
    scope: str = "gpu",
    recovery_minutes: float = 20.0,
    confidence: float = 0.95,
    uncertain: bool = False,
    failure_states: tuple[str, ...] = FAILURE_STATES,
) -> FailureFit:
    """Fit a Weibull failure law to a CSV log of unit lifetimes and write its ``[[failures]]`` table.

    Parameters
    ----------
    log : str or Path
        CSV with columns ``unit,start_hours,end_hours,failed[,entry_hours]`` (docs/fitting.md), or
        Slurm's job records, ``sacct --parsable2`` output (:mod:`mcsim.fitting.sacct_log`: one unit
        per node, its operating hours between failures; use ``scope="node"``).
    name : str, optional
        Failure class name (default: the log's file name, made TOML-safe).
    scope : {"gpu", "node", "cluster"}
        What one unit of the log is.
    recovery_minutes : float
        Recovery time per failure written into the table [min].
    confidence : float
        Level of the two-sided confidence intervals, in (0, 1).
    uncertain : bool
        Also write the ``[uncertain]`` entry of the class's MTBF and shape: their joint
        uncertainty from the fit (a bivariate lognormal, ``dist = "mvlognormal"``).
    failure_states : tuple of str
        For an ``sacct`` log: the job states that end in a node failure (default ``NODE_FAIL``;
        add ``REQUEUED`` or ``TIMEOUT`` where a site's requeues or time-outs come from node faults).

    Returns
    -------
    FailureFit
        The log, the fit and the TOML text (``.table``).

    Raises
    ------
    ScenarioError
        An unreadable or malformed log, an option out of range (named as the command's
        option, e.g. ``--confidence``), or a log the fit cannot use; one line.
    """
    source = str(log)
    options = fit_options(source, scope=scope, recovery_minutes=recovery_minutes, confidence=confidence)
    class_name = default_class_name(source) if name is None else name
    lifetimes = read_sacct_log(source, failure_states) if is_sacct_log(source) else read_failure_log(source)
    try:
        fit = fit_weibull(*lifetimes, confidence=options.confidence)
    except ValueError as err:
        raise ScenarioError(source, "fit", str(err)) from None
    table = _tables_toml(source, fit, class_name, options, uncertain)
    return FailureFit(
        source, class_name, options.scope, options.recovery_minutes, options.confidence, lifetimes, fit, table
    )


def _tables_toml(source: str, fit: WeibullFit, class_name: str, options: FitOptions, uncertain: bool) -> str:
    """The fit's ``[[failures]]`` table, and its ``[uncertain]`` entry when asked; an error names the
    option, or the fitted value, that a scenario would refuse."""
    try:
        table = failures_table_toml(fit, class_name, options.scope, options.recovery_minutes)
    except ValueError as err:  # "name: ...", "shape: ...": an option or a fitted value a scenario rejects
        key, _, message = str(err).partition(": ")
        raise ScenarioError(source, _OPTION_OF_KEY.get(key, key), message) from None
    if not uncertain:
        return table
    try:
        return table + "\n" + uncertain_table_toml(fit, class_name)
    except ValueError as err:
        raise ScenarioError(source, "--uncertain", str(err)) from None


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
        If a value lies outside what a scenario accepts (see :mod:`mcsim.scenario.schema`).
    """
    if not FAILURE_NAME.fullmatch(name):  # the scenario's rule (`_` alone is a name, as in a [[failures]] table)
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


def mtbf_shape_log_covariance(fit: WeibullFit) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of ``(log MTBF [log h], log k)`` from the fit (delta method).

    Parameters
    ----------
    fit : WeibullFit
        A fit with its covariance of ``(log k, log λ)``.

    Returns
    -------
    mean : np.ndarray, shape (2,)
        ``(log mtbf_hours, log shape)``.
    covariance : np.ndarray, shape (2, 2)
        Their asymptotic covariance [-].
    """
    k = fit.shape
    jacobian = np.array(
        [
            [-float(special.digamma(1.0 + 1.0 / k)) / k, 1.0],  # d log MTBF / d(log k, log λ)
            [1.0, 0.0],
        ]
    )  # d log k / d(log k, log λ)
    cov = jacobian @ np.array(fit.covariance, dtype=float) @ jacobian.T
    return np.array([math.log(fit.mtbf_hours), math.log(k)]), 0.5 * (cov + cov.T)


def _number(value: float) -> str:
    return format_number(float(f"{value:.6g}"))


def uncertain_table_toml(fit: WeibullFit, name: str) -> str:
    """The ``[uncertain.NAME]`` table of the class ``name``'s MTBF and shape, from the fit.

    Parameters
    ----------
    fit : WeibullFit
        The fitted law.
    name : str
        The failure class name (as in its ``[[failures]]`` table); also the group's name.

    Returns
    -------
    str
        Comment lines, then the table (6 significant digits), ending in a newline. A
        scenario using it needs ``run.draws`` > 0.

    Raises
    ------
    ValueError
        The fit has no finite covariance, or the two estimates are perfectly correlated.
    """
    mean, cov = mtbf_shape_log_covariance(fit)
    sigma = np.sqrt(np.diag(cov))
    if not (np.all(np.isfinite(cov)) and np.all(sigma > 0)):
        raise ValueError("the fit has no finite, positive variance of its estimates; no prior can be written")
    rho = float(cov[0, 1] / (sigma[0] * sigma[1]))
    if not abs(rho) < 1.0 - 1e-9:
        raise ValueError(f"the MTBF and shape estimates are perfectly correlated ({rho:.6g}); no prior can be written")
    keys = [f"failures.{name}.mtbf_hours", f"failures.{name}.shape"]
    r = _number(rho)
    return (
        f"# Joint uncertainty of the fit of {name!r}: (log MTBF, log k) ~ normal with the fit's asymptotic\n"
        f"# covariance (observed information, delta method; docs/fitting.md), drawn by a Gaussian copula.\n"
        f'# The scenario needs run.draws > 0 (e.g. 64) and run.design = "sobol" or "lhs".\n'
        f"[uncertain.{name}]\n"
        f'dist = "mvlognormal"\n'
        f"keys = [{', '.join(json.dumps(k) for k in keys)}]\n"
        f"median = [{_number(fit.mtbf_hours)}, {_number(fit.shape)}]\n"
        f"sigma = [{_number(sigma[0])}, {_number(sigma[1])}]\n"
        f"correlation = [[1, {r}], [{r}, 1]]\n"
    )
