"""``mcsim.fit_failures``: from a log of unit lifetimes to the TOML a scenario takes.

The function behind ``mcsim fit-failures`` (the command adds only the printed table and
the files): read the log (:mod:`mcsim.fitting.failure_log`), fit a Weibull law by
maximum likelihood (:func:`mcsim.fitting.weibull.fit_weibull`), write its
``[[failures]]`` table (:func:`mcsim.fitting.weibull.failures_table_toml`) and, when
asked, the ``[uncertain]`` entry of its MTBF and shape (:mod:`mcsim.fitting.priors`).
docs/fitting.md describes the log and the fit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mcsim.errors import ScenarioError
from mcsim.fitting.failure_log import FailureLog, read_failure_log
from mcsim.fitting.weibull import WeibullFit, failures_table_toml, fit_options, fit_weibull

# the command-line option of each argument that names a [[failures]] key, named in error messages
_OPTION_OF_KEY = {"name": "--name", "recovery_minutes": "--recovery-minutes", "scope": "--scope"}


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
) -> FailureFit:
    """Fit a Weibull failure law to a CSV log of unit lifetimes and write its ``[[failures]]`` table.

    Parameters
    ----------
    log : str or Path
        CSV with columns ``unit,start_hours,end_hours,failed[,entry_hours]`` (docs/fitting.md).
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
    lifetimes = read_failure_log(source)
    try:
        fit = fit_weibull(*lifetimes, confidence=options.confidence)
    except ValueError as err:
        raise ScenarioError(source, "fit", str(err)) from None
    try:
        table = failures_table_toml(fit, class_name, options.scope, options.recovery_minutes)
    except ValueError as err:  # "name: ...", "shape: ...": an option or a fitted value a scenario rejects
        key, _, message = str(err).partition(": ")
        raise ScenarioError(source, _OPTION_OF_KEY.get(key, key), message) from None
    if uncertain:
        from mcsim.fitting.priors import uncertain_table_toml

        try:
            table += "\n" + uncertain_table_toml(fit, class_name)
        except ValueError as err:
            raise ScenarioError(source, "--uncertain", str(err)) from None
    return FailureFit(
        source, class_name, options.scope, options.recovery_minutes, options.confidence, lifetimes, fit, table
    )
