"""Deadlines: the probability of finishing within one, and the cheapest configuration that does.

A run finishes in time when it completed and its wall time is at most the deadline; runs censored
at ``max_wall_days`` count as late. :func:`prob_within` gives every configuration's probability of
finishing in time, :func:`cheapest_within` the cheapest eligible configuration whose probability
reaches the one required (or, in :class:`mcsim.errors.NoneQualifies`, the one that came closest).
With parameter draws the probability is the predictive one, pooled over draws and runs, and its
interval counts the draws as the independent units (:func:`mcsim.analysis.decisions.within_arrays`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from mcsim.analysis.configurations import (
    check_days,
    check_probability,
    config_record,
    configuration_array,
    eligible,
    feasible_mask,
    objective_sign,
    on_sweep,
    point_of,
    point_text,
    sample_dims,
    statistic,
)
from mcsim.analysis.decisions import wilson_interval, within_arrays
from mcsim.errors import NoneQualifies
from mcsim.io.variables import sweep_dims

PROBABILITY = 0.9  # the required probability of finishing in time when none is given

PREDICTIVE_BASIS = (
    "predictive: pooled over parameter draws and runs (input uncertainty and chance), "
    "its interval with the draws as the independent units"
)


def cheapest_within(ds: xr.Dataset, days: float, probability: float = PROBABILITY, cost: str = "cost") -> dict:
    """The cheapest configuration that finishes within ``days`` with at least ``probability``.

    The probability is the share of runs that completed within the deadline; a
    configuration qualifies when that share is at least ``probability`` and every one
    of its runs completed (one censored at ``max_wall_days`` has a truncated cost, so
    it is never ranked).

    With parameter draws the probability is the predictive one, pooled over draws and
    runs (:func:`prob_within`), and its interval counts the draws as the independent
    units; the record then also has ``probability_basis`` (saying so), ``draws_meeting``
    (share of draws whose own probability is at least ``probability``) and its
    ``draws_meeting_ci95``.

    Parameters
    ----------
    ds : xarray.Dataset
        Simulation results.
    days : float
        The deadline [days]: finite, > 0.
    probability : float
        The required probability of finishing in time, in (0, 1) (0.9, not 90).
    cost : str
        The per-run variable minimised (lower is better), ``cost`` by default.

    Returns
    -------
    dict
        :func:`config_record` of ``cost`` at the pick, plus ``p_within``, its
        ``p_within_ci95`` (95 % Wilson interval) and ``days``.

    Raises
    ------
    ValueError
        ``days`` or ``probability`` out of range, or ``cost`` not a variable to minimise.
    mcsim.errors.NoneQualifies
        No configuration qualifies. Its ``closest`` is the record (as above) of the
        eligible configuration with the highest probability of finishing in time (the
        cheapest among equals), or None when no configuration can be ranked; the
        message names it with its probability.
    """
    days, probability = check_days(days), check_probability(probability)
    if objective_sign(ds, cost) < 0:
        raise ValueError(f"{cost!r}: higher is better, so it is not a cost to minimise")
    mask = eligible(ds)
    within, table = _share_within(ds, days, probability)
    qualifies = (within >= probability) & mask
    mean_cost = statistic(ds, cost, "mean")
    if bool(qualifies.any()):
        flat = int(np.nanargmin(mean_cost.where(qualifies).values.ravel())) if mean_cost.ndim else 0
        return _within_record(ds, point_of(ds, flat), cost, within, table, days)
    closest = None
    if bool(mask.any()):
        # highest probability first, then the lower mean cost
        key = np.lexsort((mean_cost.values.ravel(), -within.where(mask).fillna(-1.0).values.ravel()))
        closest = _within_record(ds, point_of(ds, int(key[0])), cost, within, table, days)
    raise NoneQualifies(_none_text(days, probability, closest), closest, days, probability)


def _share_within(ds: xr.Dataset, days: float, probability: float) -> tuple[xr.DataArray, xr.Dataset | None]:
    """Each configuration's probability of finishing within ``days``, and with parameter draws the
    :func:`prob_within` table it comes from (None without draws: the share of runs)."""
    if "draw" in sample_dims(ds):
        table = prob_within(ds, days, probability)
        return table["p_within"], table
    return ((ds["wall_time"] <= days * 24.0) & ds["completed"]).mean("run"), None


def _within_record(
    ds: xr.Dataset, point: dict, cost: str, within: xr.DataArray, table: xr.Dataset | None, days: float
) -> dict:
    """:func:`config_record` of ``cost`` at ``point`` with its probability of finishing within ``days``."""
    record = config_record(ds, point, cost)
    if table is not None:
        one = table.sel(point) if point else table
        record.update(
            p_within=float(one["p_within"]),
            p_within_ci95=(float(one["p_within_ci95_low"]), float(one["p_within_ci95_high"])),
            days=days,
            probability_basis=PREDICTIVE_BASIS,
            draws_meeting=float(one["draws_meeting"]),
            draws_meeting_ci95=(float(one["draws_meeting_ci95_low"]), float(one["draws_meeting_ci95_high"])),
        )
        return record
    p = float(within.sel(point)) if point else float(within)
    record.update(p_within=p, p_within_ci95=wilson_interval(p * ds.sizes["run"], ds.sizes["run"]), days=days)
    return record


def _none_text(days: float, probability: float, closest: dict | None) -> str:
    """One line: nothing qualifies, and which configuration came closest."""
    text = f"no configuration finishes within {days:g} days with probability >= {probability:g}"
    if closest is None:
        return text + " (none can be ranked: every configuration is infeasible or has censored runs)"
    low, high = closest["p_within_ci95"]
    return (
        f"{text}; the closest is {point_text(closest['configuration'])} with probability {closest['p_within']:.3g} "
        f"(95 % interval {low:.3g} - {high:.3g})"
    )


def prob_within(ds: xr.Dataset, days: float, probability: float | None = None) -> xr.Dataset:
    """Probability of finishing within ``days``, per configuration, over draws and runs.

    A run finishes in time when it completed and its wall time is at most ``days``;
    runs censored at ``max_wall_days`` count as late. With parameter draws the
    probability is pooled over draws and runs (the predictive probability: input
    uncertainty and chance), its 95 % interval the Wilson interval at the effective
    number of trials of draws as clusters (:func:`mcsim.analysis.decisions.within_arrays`);
    with ``probability`` also the share of draws whose own probability is at least
    ``probability`` (``draws_meeting``, Wilson over draws). Without draws: the share of
    runs with its Wilson interval over runs.

    Parameters
    ----------
    ds : xarray.Dataset
        Simulation results.
    days : float
        The deadline [days]: finite, > 0.
    probability : float, optional
        In (0, 1): also give the share of draws whose own probability reaches it.

    Returns
    -------
    xarray.Dataset
        Over the sweep dims: ``p_within``, ``p_within_ci95_low``, ``p_within_ci95_high``
        (and ``draws_meeting``, ``draws_meeting_ci95_low``, ``draws_meeting_ci95_high``).
        NaN for infeasible configurations.

    Raises
    ------
    ValueError
        ``days`` or ``probability`` out of range.
    """
    days = check_days(days)
    if probability is not None:
        probability = check_probability(probability)
    feasible = feasible_mask(ds)
    done = (ds["wall_time"] <= days * 24.0) & ds["completed"].astype(bool)
    indicator = done.astype(float)
    if feasible is not None:
        indicator = indicator.where(feasible)
    if "draw" in sample_dims(ds):
        arrays = within_arrays(configuration_array(ds, indicator), probability)
    else:
        runs = ds.sizes["run"]
        p = indicator.transpose(*sweep_dims(ds), "run").values.reshape(-1, runs).mean(axis=1)
        bounds = np.array([wilson_interval(x * runs, runs) for x in p]).reshape(-1, 2)
        arrays = {"p_within": p, "p_within_ci95_low": bounds[:, 0], "p_within_ci95_high": bounds[:, 1]}
    text = {
        "p_within": f"probability of finishing within {days:g} days",
        "p_within_ci95_low": "95 % interval of p_within: lower bound",
        "p_within_ci95_high": "95 % interval of p_within: upper bound",
        "draws_meeting": f"share of draws finishing within {days:g} days with probability >= {probability}",
        "draws_meeting_ci95_low": "95 % Wilson interval of draws_meeting: lower bound",
        "draws_meeting_ci95_high": "95 % Wilson interval of draws_meeting: upper bound",
    }
    table = on_sweep(ds, arrays, {k: {"units": "1", "long_name": v} for k, v in text.items() if k in arrays})
    table.attrs = {"days": days}
    return table
