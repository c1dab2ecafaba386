"""From a failure-log fit to a prior: the ``[uncertain]`` entry of a fitted class (``fit-failures --uncertain``).

The maximum likelihood fit (:func:`mcsim.fitting.weibull.fit_weibull`) gives the estimate
``theta = (log k, log λ)`` and its asymptotic covariance ``C`` (inverse observed
information). The simulator takes the class's ``mtbf_hours`` and ``shape``, so the
prior is stated on ``y = (log MTBF, log k)`` with ``log MTBF = log λ + log Γ(1 + 1/k)``:
by the delta method ``y`` is approximately normal with mean ``g(theta)`` and
covariance ``J C Jᵀ``, ``J = [[-ψ(1 + 1/k)/k, 1], [1, 0]]`` (``ψ`` the digamma
function). That is a bivariate lognormal of (MTBF, k): one ``mvlognormal`` entry
(:func:`mcsim.uncertain.parse_joint`) with medians ``exp(y)``, log-scale sigmas
``sqrt(diag)`` and the correlation of ``y`` — the joint uncertainty of the two,
not two independent guesses (the MTBF and shape estimates are in general correlated:
``log MTBF`` depends on ``k`` through ``log Γ(1 + 1/k)``, and censoring couples
``k`` and ``λ``; on the censored synthetic log of ``tests/test_fitting.py`` it is -0.70).
"""

from __future__ import annotations

import json
import math

import numpy as np
from scipy import special

from mcsim.fitting.weibull import WeibullFit
from mcsim.scenario.schema import format_number


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
        f"# covariance (observed information, delta method; mcsim/priors.py), drawn by a Gaussian copula.\n"
        f'# The scenario needs run.draws > 0 (e.g. 64) and run.design = "sobol" or "lhs".\n'
        f"[uncertain.{name}]\n"
        f'dist = "mvlognormal"\n'
        f"keys = [{', '.join(json.dumps(k) for k in keys)}]\n"
        f"median = [{_number(fit.mtbf_hours)}, {_number(fit.shape)}]\n"
        f"sigma = [{_number(sigma[0])}, {_number(sigma[1])}]\n"
        f"correlation = [[1, {r}], [{r}, 1]]\n"
    )


__all__ = ["mtbf_shape_log_covariance", "uncertain_table_toml"]
