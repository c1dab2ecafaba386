"""Paired comparisons of two configurations of a result: which is better, and by how much.

Runs share their random streams across configurations (common random numbers): run r of every
configuration draws the same failures, so two configurations are compared run by run, and the
difference is due to the configuration alone. With parameter draws the pairs are (draw d, run r):
the same parameter values, the same streams. :func:`prob_better` estimates the probability that
one configuration beats the other, :func:`prob_better_by_draw` the same over draws (each draw's
mean over its runs), and :func:`paired_difference` the mean difference with its 95 % CI.

Both configurations must be eligible (:func:`mcsim.analysis.configurations.eligible`): one with
a run censored at ``max_wall_days`` has truncated values and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import xarray as xr

from mcsim.analysis.configurations import (
    check_point,
    mean_half_width,
    nanmean_rows,
    objective_sign,
    point_text,
    require_draws,
    sample_dims,
)
from mcsim.analysis.decisions import wilson_interval


class Probability(NamedTuple):
    """An estimated probability with its 95 % Wilson score interval."""

    probability: float
    ci95: tuple[float, float]
    runs: int


def _paired(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str) -> tuple[np.ndarray, np.ndarray]:
    """Values of ``objective`` at configurations ``a`` and ``b``, both fully completed, as
    (draws, runs) arrays paired element by element ((1, runs) without parameter draws)."""
    samples = sample_dims(ds)
    runs = []
    for name, point in (("a", a), ("b", b)):
        one = ds.sel(dict(check_point(ds, point, name)))
        values = one[objective]
        if set(values.dims) != set(samples):
            raise ValueError("a and b must each select one configuration (all sweep dims)")
        feasible = bool(np.all(one["feasible"].values)) if "feasible" in one else True
        if "completed" in one and not bool(one["completed"].all()) and feasible:
            share = float(one["completed"].mean())
            raise ValueError(
                f"configuration {name} ({point_text(point)}) has runs censored at max_wall_days "
                f"({share:.1%} completed): its values are truncated and cannot be compared"
            )
        runs.append(values.transpose(*samples).values.astype(float).reshape(-1, ds.sizes["run"]))
    return runs[0], runs[1]


def _share_won(sign: float, a: np.ndarray, b: np.ndarray, units: str) -> Probability:
    """Share of the pairs (``a[i]``, ``b[i]``) finite in both where ``a`` is better (``sign``: +1 lower is
    better, -1 higher), ties counted half, with its Wilson interval; ``units`` names the pairs in the error."""
    ok = np.isfinite(a) & np.isfinite(b)
    if not ok.any():
        raise ValueError(f"no comparable {units} (infeasible configuration?)")
    sa, sb = sign * a[ok], sign * b[ok]
    wins = float(np.sum(sa < sb) + 0.5 * np.sum(sa == sb))
    n = int(ok.sum())
    return Probability(wins / n, wilson_interval(wins, n), n)


def prob_better(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str = "cost") -> Probability:
    """Probability that configuration ``a`` beats ``b`` on ``objective``, from paired runs.

    ``a`` and ``b`` select configurations by coordinate (``{"gpus": 4096, "strategy":
    "gockpt"}``). "Beats" follows the objective's direction (lower cost, higher ETTR).
    Run r of both used the same random streams, so the estimate is ``mean(a_r better
    than b_r) + 0.5 mean(a_r == b_r)`` over the runs finite in both. With parameter
    draws the pairs are (draw d, run r): same parameter values, same streams; the
    estimate is then the predictive probability over both levels, and its Wilson
    interval counts the D x R pairs as independent, which they are not (see
    :func:`prob_better_by_draw` for the probability over draws).

    Returns
    -------
    Probability
        ``(probability, ci95, runs)``: the estimate, its 95 % Wilson score interval
        (never of zero width, also at 0 or 1) and the number of paired runs.

    Raises
    ------
    ValueError
        An objective without a direction, a selection that is not one configuration,
        a configuration with censored runs, or no comparable runs.
    """
    sign = objective_sign(ds, objective)
    xa, xb = (x.ravel() for x in _paired(ds, a, b, objective))
    return _share_won(sign, xa, xb, "runs")


def prob_better_by_draw(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str = "cost") -> Probability:
    """Probability over parameter draws that ``a``'s mean over the draw's runs beats ``b``'s.

    For each draw d, ``a`` wins when its mean of ``objective`` over the R runs of d is
    better (in the objective's direction) than ``b``'s; ties count half. The share of
    draws won estimates P(a's R-run mean beats b's) for an input drawn from its
    distribution: it includes the runs' noise in each draw mean (with common random
    numbers, small), and tends to the probability that a is better in expectation as R
    grows. The 95 % Wilson interval treats the D draws as independent trials.

    Returns
    -------
    Probability
        ``(probability, ci95, runs)``; here ``runs`` is the number of draws compared.

    Raises
    ------
    ValueError
        No parameter draws, or as :func:`prob_better`.
    """
    require_draws(ds)
    sign = objective_sign(ds, objective)
    ma, mb = (nanmean_rows(x) for x in _paired(ds, a, b, objective))
    return _share_won(sign, ma, mb, "draws")


def paired_difference(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str) -> dict:
    """Mean of ``objective`` at ``a`` minus at ``b`` over paired runs, with its 95 % CI.

    The CI is the normal interval of the mean of the per-run differences (common random
    numbers make it much narrower than that of the difference of two means). When it
    contains 0 the two configurations are equivalent on ``objective`` within the
    uncertainty of the simulation. With parameter draws the pairs are (draw, run) and
    the CI comes from the spread of the D per-draw mean differences (the draws are the
    independent units): it holds the inputs' uncertainty as well as the runs' noise.

    Returns
    -------
    dict
        ``mean``, ``ci95`` (low, high), ``runs`` and ``units`` (those of ``objective``);
        with parameter draws also ``draws``.
    """
    objective_sign(ds, objective)
    xa, xb = _paired(ds, a, b, objective)
    differences = xa - xb
    d = differences[np.isfinite(differences)]
    if d.size == 0:
        raise ValueError("no comparable runs (infeasible configuration?)")
    mean = float(d.mean())
    by_draw = "draw" in sample_dims(ds)
    half, n_units = mean_half_width(differences, d, by_draw)
    record = {
        "mean": mean,
        "ci95": (mean - half, mean + half),
        "runs": int(d.size),
        "units": ds[objective].attrs.get("units", ""),
    }
    if by_draw:
        record["draws"] = int(n_units)
    return record
