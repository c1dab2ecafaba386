"""The probability plot of a failure log against its fitted Weibull law (``mcsim fit-failures --plot``)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from mcsim.fitting.failure_log import FailureLog
from mcsim.fitting.weibull import WeibullFit, product_limit
from mcsim.report import style


def probability_plot(log: FailureLog, fit: WeibullFit):
    """A Weibull probability plot of a log and its fit (needs matplotlib).

    x: age ``t`` [h] on a log axis; y: ``log(−log(1 − F))``, on which a Weibull law is
    the straight line ``k (log t − log λ)``. Points: the product-limit estimate
    (:func:`product_limit`) with pointwise Greenwood bands (on the ``log(−log Ŝ)``
    scale, ``se = sqrt(Σ d/(n(n−d))) / |log Ŝ|``); line: the fit, with its pointwise
    band from the delta method on the fit's covariance. With every unit left-truncated
    (smallest entry age ``s0 > 0``) both show the law conditioned on survival to ``s0``,
    ``F(t) = 1 − S(t)/S(s0)``, and the fitted curve bends near ``s0``.

    Parameters
    ----------
    log : FailureLog
        The lifetimes the fit was made from.
    fit : WeibullFit
        The fit.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    mcsim.errors.BackendUnavailable
        Without matplotlib.
    """
    plt = style.pyplot()
    z = float(stats.norm.ppf(0.5 + fit.confidence / 2))
    level = f"{100 * fit.confidence:g} %"
    u, y, se = _product_limit_points(log)
    grid, curve, fit_se = _fitted_curve(log, fit)
    fig, ax = plt.subplots(figsize=(7, 5), layout="constrained")
    _draw_fit(ax, grid, curve, z * fit_se, level, fit)
    ax.errorbar(
        u,
        y,
        yerr=z * se,
        fmt="o",
        ms=3,
        color="C1",
        ecolor="C1",
        elinewidth=0.6,
        alpha=0.8,
        label=f"product-limit (Kaplan–Meier) estimate, Greenwood {level}",
    )
    _probability_axes(ax, float(np.min(log.entry_h)))
    ax.set_title(
        f"Weibull probability plot: {fit.n_failures} failures, {fit.n_units} lifetimes"
        + (f", {fit.n_truncated} left-truncated" if fit.n_truncated else ""),
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def _draw_fit(ax, grid: np.ndarray, curve: np.ndarray, half_width: np.ndarray, level: str, fit: WeibullFit) -> None:
    """The fitted curve with its pointwise band (``curve`` ± ``half_width``)."""
    ax.fill_between(
        grid,
        curve - half_width,
        curve + half_width,
        color="C0",
        alpha=0.2,
        lw=0,
        label=f"fit, pointwise {level} band",
    )
    ax.plot(grid, curve, color="C0", label=f"Weibull fit: k = {fit.shape:.3g}, λ = {fit.scale_hours:.4g} h")


def _product_limit_points(log: FailureLog) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The product-limit estimate as (age [h], ``log(−log Ŝ)``, its Greenwood standard error on that scale),
    where 0 < Ŝ < 1."""
    u, survival, greenwood = product_limit(log)
    keep = (survival > 0) & (survival < 1) & np.isfinite(greenwood)
    u, survival, greenwood = u[keep], survival[keep], greenwood[keep]
    return u, np.log(-np.log(survival)), np.sqrt(greenwood) / np.abs(np.log(survival))


def _fitted_curve(log: FailureLog, fit: WeibullFit) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fitted law on a grid of ages [h]: (ages, ``log(−log(S(t)/S(s0)))``, its standard error by the delta
    method on the fit's covariance of (log k, log λ))."""
    s0 = float(np.min(log.entry_h))
    ages = np.asarray(log.entry_h) + np.asarray(log.durations_h)
    grid = np.geomspace(max(s0 * 1.0001, float(np.min(ages)) / 2), float(np.max(ages)) * 1.5, 200)
    k, lam = fit.shape, fit.scale_hours
    g = (grid / lam) ** k - (s0 / lam) ** k  # −log(S(t)/S(s0))
    dg = np.array(
        [
            k * ((grid / lam) ** k * np.log(grid / lam) - ((s0 / lam) ** k * math.log(s0 / lam) if s0 > 0 else 0.0)),
            -k * g,
        ]
    )  # d/d(log k, log λ)
    cov = np.array(fit.covariance)
    return grid, np.log(g), np.sqrt(np.einsum("in,ij,jn->n", dg, cov, dg)) / g


def _probability_axes(ax, s0: float) -> None:
    """Age on a log axis (conditioned on survival to ``s0`` > 0), ``log(−log(1 − F))`` on the left, F on the right."""
    ax.set_xscale("log")
    style.plain_log_axis(ax.xaxis)
    ax.set_xlabel("age t [h]" + (f" (conditioned on survival to {s0:.4g} h)" if s0 > 0 else ""))
    ax.set_ylabel("log(−log(1 − F(t)))")
    probabilities = np.array([0.001, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999])
    right = ax.secondary_yaxis("right", functions=(lambda v: v, lambda v: v))
    right.set_yticks(np.log(-np.log1p(-probabilities)), labels=[f"{p:g}" for p in probabilities])
    right.set_ylabel("F(t)")
