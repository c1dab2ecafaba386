"""Decision analysis on simulated sweeps: Pareto fronts, paired comparisons, best picks.

All functions take a dataset from :func:`mcsim.simulate` (dims: sweep dims...,
``run``). Each objective is ranked in its own direction, taken from the variable
registry (:attr:`mcsim.variables.Variable.direction`: lower wall time, energy, cost
and carbon, higher ETTR); a variable without a direction is refused with a
``ValueError`` naming it.

Which configurations are ranked
    Only *eligible* configurations: feasible ones whose runs all completed. A
    configuration with a run censored at ``max_wall_days`` has truncated values (its
    wall time, cost and energy stop where the run was cut off), so it is never ranked:
    :func:`best`, :func:`pareto_front` and :func:`cheapest_within` leave it out, and
    :func:`prob_better` and :func:`paired_difference` refuse it. :func:`completed_share`
    gives each configuration's share of completed runs.

Runs share their random streams across configurations (common random numbers), so
comparisons between two configurations use the paired runs.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import xarray as xr

from .variables import objective_direction

Z_95 = 1.959963984540054
PARETO_BLOCK = 256  # rows compared at once by the k-objective Pareto sweep


class Probability(NamedTuple):
    """An estimated probability with its 95 % Wilson score interval."""

    probability: float
    ci95: tuple[float, float]
    runs: int


def wilson_interval(successes: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927).

    Unlike the normal interval ``p ± z sqrt(p(1-p)/n)`` it does not collapse to a
    point at p = 0 or 1. ``successes`` may be fractional (ties counted half).
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes <= 0 else max(0.0, centre - half)   # exact bounds at p = 0 and 1,
    high = 1.0 if successes >= n else min(1.0, centre + half)  # free of round-off
    return (low, high)


def _sign(ds: xr.Dataset, objective: str) -> float:
    """+1 for an objective to minimise, -1 for one to maximise; refuses non-objectives."""
    if objective not in ds:
        raise ValueError(f"objective {objective!r} is not a variable of this dataset")
    direction = objective_direction(objective)
    if "run" not in ds[objective].dims:
        raise ValueError(f"objective {objective!r} has no run dimension in this dataset")
    return 1.0 if direction == "lower" else -1.0


def _statistic(ds: xr.Dataset, variable: str, stat: str | float) -> xr.DataArray:
    """``stat`` ("mean" or a quantile in (0, 1)) of ``variable`` over runs (NaN runs skipped)."""
    values = ds[variable].astype(float)
    with warnings.catch_warnings():  # infeasible configurations are all-NaN slices: NaN, silently
        warnings.simplefilter("ignore", RuntimeWarning)
        if stat == "mean":
            return values.mean("run")
        if isinstance(stat, (int, float)) and 0.0 < float(stat) < 1.0:
            return values.quantile(float(stat), dim="run").drop_vars("quantile")
    raise ValueError(f"stat must be 'mean' or a quantile in (0, 1), got {stat!r}")


def _sweep_dims(ds: xr.Dataset) -> list[str]:
    return [d for d in ds["wall_time"].dims if d != "run"]


def completed_share(ds: xr.Dataset) -> xr.DataArray:
    """Share of runs that completed (not censored at ``max_wall_days``), per configuration.

    NaN for infeasible configurations; 1 everywhere when the dataset has no ``completed``.
    """
    dims = _sweep_dims(ds)
    if "completed" in ds:
        share = ds["completed"].astype(float).mean("run")
    else:
        share = xr.ones_like(ds["wall_time"].isel(run=0, drop=True), dtype=float)
    if "feasible" in ds:
        share = share.where(ds["feasible"])
    return share.transpose(*dims)


def eligible(ds: xr.Dataset) -> xr.DataArray:
    """Configurations that may be ranked: feasible, with every run completed."""
    return completed_share(ds) == 1.0


def _require_eligible(ds: xr.Dataset, mask: xr.DataArray) -> None:
    feasible = ds["feasible"] if "feasible" in ds else xr.ones_like(mask)
    if not bool(feasible.any()):
        raise ValueError("no feasible configuration")
    if not bool(mask.any()):
        raise ValueError("no configuration has all its runs completed (every feasible one has runs censored "
                         "at max_wall_days, so its values are truncated): none can be ranked; "
                         "raise run.max_wall_days")


def nondominated(values: np.ndarray) -> np.ndarray:
    """Rows of ``values`` (n points x k objectives, all minimised) that no other row dominates.

    Row q dominates row p when q <= p in every column and q < p in one; equal rows do not
    dominate each other. Rows with a NaN are never on the front. Sort-based for k <= 2
    (O(n log n)); for k > 2 a block sweep in lexicographic order, each block compared at
    once with itself and with the front found so far (a dominating row always sorts
    first, and dominance is transitive, so the front of the earlier rows is enough).
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError("values must be a 2-d array (points x objectives)")
    n, k = values.shape
    result = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(np.all(np.isfinite(values), axis=1))
    if rows.size == 0 or k == 0:
        return result
    finite = values[rows]
    if k == 1:
        result[rows] = finite[:, 0] == finite[:, 0].min()
    elif k == 2:
        result[rows] = _front_2d(finite[:, 0], finite[:, 1])
    else:
        result[rows] = _front_blocks(finite)
    return result


def _front_2d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Two objectives: sort by (x, y); a point is on the front when it has the lowest y of
    its x and a y below every y at smaller x."""
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    starts = np.flatnonzero(np.concatenate([[True], xs[1:] != xs[:-1]]))
    group = np.cumsum(np.concatenate([[True], xs[1:] != xs[:-1]])) - 1
    group_min = ys[starts][group]              # y sorted within a group: its first is its minimum
    running = np.minimum.accumulate(ys)
    before = np.concatenate([[np.inf], running[starts[1:] - 1]])[group]  # min y at smaller x
    front = np.empty(x.size, dtype=bool)
    front[order] = (ys == group_min) & (ys < before)
    return front


def _dominated_by(candidates: np.ndarray, others: np.ndarray) -> np.ndarray:
    """For each candidate row, whether some row of ``others`` dominates it."""
    if others.size == 0 or candidates.size == 0:
        return np.zeros(len(candidates), dtype=bool)
    le = np.ones((len(candidates), len(others)), dtype=bool)
    lt = np.zeros((len(candidates), len(others)), dtype=bool)
    for j in range(candidates.shape[1]):  # one 2-d comparison per objective: contiguous and fast
        column, other = candidates[:, j, None], others[None, :, j]
        le &= other <= column
        lt |= other < column
    return np.any(le & lt, axis=1)


def _front_blocks(values: np.ndarray) -> np.ndarray:
    order = np.lexsort(values.T[::-1])
    ordered = values[order]
    on_front = np.zeros(len(values), dtype=bool)
    front_rows = np.empty((0, values.shape[1]))
    for start in range(0, len(ordered), PARETO_BLOCK):
        block = ordered[start:start + PARETO_BLOCK]
        keep = ~_dominated_by(block, front_rows)        # most rows fall here, once a front exists
        survivors = block[keep]
        keep[keep] = ~_dominated_by(survivors, survivors)
        on_front[start:start + len(block)] = keep
        front_rows = np.concatenate([front_rows, block[keep]])
    result = np.empty(len(values), dtype=bool)
    result[order] = on_front
    return result


def pareto_front(ds: xr.Dataset, objectives: Sequence[str] = ("wall_time", "cost"),
                 stat: str | float = "mean") -> xr.DataArray:
    """Non-dominated eligible configurations, each objective in its registered direction.

    Parameters
    ----------
    ds : xarray.Dataset
        Simulation results.
    objectives : sequence of str
        Per-run variables with a direction, e.g. ``("wall_time", "energy")`` or
        ``("cost", "ettr")`` (ETTR: higher is better).
    stat : "mean" or float
        Summary of each objective over runs: the mean or a quantile (0.9: the 90th
        percentile; for an objective where higher is better, 0.9 is taken as its
        risk-averse counterpart, the 10th percentile).

    Returns
    -------
    xarray.DataArray
        Boolean over the sweep dims: True on the Pareto front. Infeasible configurations
        and configurations with a censored run are never on it.

    Raises
    ------
    ValueError
        An objective without a direction, or no configuration that can be ranked.
    """
    if len(objectives) < 1:
        raise ValueError("give at least one objective")
    signs = [_sign(ds, name) for name in objectives]
    mask = eligible(ds)
    _require_eligible(ds, mask)
    columns = []
    for name, sign in zip(objectives, signs):
        risk_stat = stat if stat == "mean" or sign > 0 else 1.0 - float(stat)
        columns.append(sign * _statistic(ds, name, risk_stat).where(mask).values.ravel())
    front = nondominated(np.stack(columns, axis=1))
    dims = _sweep_dims(ds)
    shape = tuple(ds.sizes[d] for d in dims)
    return xr.DataArray(front.reshape(shape), dims=dims, coords={d: ds[d] for d in dims},
                        attrs={"long_name": f"Pareto front of {', '.join(objectives)} ({stat})", "units": "1"})


def _paired(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-run values of ``objective`` at configurations ``a`` and ``b``, both fully completed."""
    runs = []
    for name, point in (("a", a), ("b", b)):
        one = ds.sel(dict(point))
        values = one[objective].values.astype(float)
        if values.ndim != 1:
            raise ValueError("a and b must each select one configuration (all sweep dims)")
        if "completed" in one and not bool(one["completed"].all()) and bool(one.get("feasible", True)):
            share = float(one["completed"].mean())
            raise ValueError(f"configuration {name} ({_text(point)}) has runs censored at max_wall_days "
                             f"({share:.1%} completed): its values are truncated and cannot be compared")
        runs.append(values)
    return runs[0], runs[1]


def _text(point: Mapping) -> str:
    return ", ".join(f"{d}={_plain(v)}" for d, v in point.items()) or "the single configuration"


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def prob_better(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str = "cost") -> Probability:
    """Probability that configuration ``a`` beats ``b`` on ``objective``, from paired runs.

    ``a`` and ``b`` select configurations by coordinate (``{"gpus": 4096, "strategy":
    "gockpt"}``). "Beats" follows the objective's direction (lower cost, higher ETTR).
    Run r of both used the same random streams, so the estimate is ``mean(a_r better
    than b_r) + 0.5 mean(a_r == b_r)`` over the runs finite in both.

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
    sign = _sign(ds, objective)
    xa, xb = _paired(ds, a, b, objective)
    if xa.shape != xb.shape:
        raise ValueError("a and b must each select one configuration (all sweep dims)")
    ok = np.isfinite(xa) & np.isfinite(xb)
    if not ok.any():
        raise ValueError("no comparable runs (infeasible configuration?)")
    sa, sb = sign * xa[ok], sign * xb[ok]
    wins = float(np.sum(sa < sb) + 0.5 * np.sum(sa == sb))
    n = int(ok.sum())
    return Probability(wins / n, wilson_interval(wins, n), n)


def paired_difference(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str) -> dict:
    """Mean of ``objective`` at ``a`` minus at ``b`` over paired runs, with its 95 % CI.

    The CI is the normal interval of the mean of the per-run differences (common random
    numbers make it much narrower than that of the difference of two means). When it
    contains 0 the two configurations are equivalent on ``objective`` within the
    uncertainty of the simulation.

    Returns
    -------
    dict
        ``mean``, ``ci95`` (low, high), ``runs`` and ``units`` (those of ``objective``).
    """
    _sign(ds, objective)
    xa, xb = _paired(ds, a, b, objective)
    d = xa - xb
    d = d[np.isfinite(d)]
    if d.size == 0:
        raise ValueError("no comparable runs (infeasible configuration?)")
    mean = float(d.mean())
    half = Z_95 * float(d.std(ddof=1)) / math.sqrt(d.size) if d.size > 1 else math.nan
    return {"mean": mean, "ci95": (mean - half, mean + half), "runs": int(d.size),
            "units": ds[objective].attrs.get("units", "")}


def config_record(ds: xr.Dataset, point: Mapping, objective: str) -> dict:
    """Statistics of ``objective`` over the runs of one configuration.

    Returns a dict: ``configuration`` (coordinates), ``objective``, ``units``,
    ``direction``, ``mean`` and its normal ``ci95``, ``p5``, ``p95``, ``runs`` (finite
    runs) and ``completed`` (share of runs not censored).
    """
    one = ds.sel(dict(point)) if point else ds
    values = one[objective].values.astype(float)
    values = values[np.isfinite(values)]  # as xarray's skipna mean that chose the point
    n = values.size
    if n == 0:
        raise ValueError(f"{objective}: no finite run at {_text(point)}")
    mean = float(values.mean())
    half = Z_95 * float(values.std(ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    completed = float(one["completed"].mean()) if "completed" in one else 1.0
    return {
        "configuration": {k: _plain(v) for k, v in point.items()},
        "objective": objective,
        "units": ds[objective].attrs.get("units", ""),
        "direction": objective_direction(objective) if _has_direction(objective) else None,
        "mean": mean,
        "ci95": (mean - half, mean + half),
        "p5": float(np.percentile(values, 5)),
        "p95": float(np.percentile(values, 95)),
        "runs": n,
        "completed": completed,
    }


def _has_direction(name: str) -> bool:
    try:
        objective_direction(name)
    except ValueError:
        return False
    return True


def _point_of(ds: xr.Dataset, flat: int) -> dict:
    dims = _sweep_dims(ds)
    index = np.unravel_index(flat, tuple(ds.sizes[d] for d in dims)) if dims else ()
    return {d: ds[d].values[i] for d, i in zip(dims, index)}


def best(ds: xr.Dataset, objective: str = "cost", stat: str | float = "mean") -> dict:
    """The eligible configuration with the best ``stat`` of ``objective``.

    Best is the lowest, or the highest for an objective where higher is better (ETTR);
    with a quantile ``stat`` and such an objective, the ``1 - stat`` quantile is used
    (the risk-averse side). Infeasible configurations and those with a censored run are
    never chosen.

    Returns
    -------
    dict
        :func:`config_record` of the chosen configuration: ``configuration``, ``mean``,
        its ``ci95``, ``p5``, ``p95``, ``units``, ``direction``, ``runs``, ``completed``.

    Raises
    ------
    ValueError
        An objective without a direction, or no configuration that can be ranked.
    """
    sign = _sign(ds, objective)
    mask = eligible(ds)
    _require_eligible(ds, mask)
    risk_stat = stat if stat == "mean" or sign > 0 else 1.0 - float(stat)
    summary = (sign * _statistic(ds, objective, risk_stat)).where(mask)
    if not np.isfinite(summary.values).any():
        raise ValueError(f"{objective}: no finite value at any configuration that can be ranked")
    flat = int(np.nanargmin(summary.values.ravel())) if summary.ndim else 0
    return config_record(ds, _point_of(ds, flat), objective)


def cheapest_within(ds: xr.Dataset, days: float, probability: float = 0.9, cost: str = "cost") -> dict | None:
    """The cheapest configuration that finishes within ``days`` with at least ``probability``.

    The probability is the share of runs that completed within the deadline; a
    configuration qualifies when that share is at least ``probability`` and every one
    of its runs completed (one censored at ``max_wall_days`` has a truncated cost, so
    it is never ranked). Returns :func:`config_record` of ``cost`` plus ``p_within``,
    ``p_within_ci95`` (95 % Wilson interval) and ``days``, or None when no
    configuration qualifies.
    """
    if _sign(ds, cost) < 0:
        raise ValueError(f"{cost!r}: higher is better, so it is not a cost to minimise")
    mask = eligible(ds)
    within = ((ds["wall_time"] <= days * 24.0) & ds["completed"]).mean("run")
    qualifies = (within >= probability) & mask
    if not bool(qualifies.any()):
        return None
    mean_cost = _statistic(ds, cost, "mean").where(qualifies)
    flat = int(np.nanargmin(mean_cost.values.ravel())) if mean_cost.ndim else 0
    point = _point_of(ds, flat)
    record = config_record(ds, point, cost)
    p = float(within.sel(point)) if point else float(within)
    record.update(p_within=p, p_within_ci95=wilson_interval(p * ds.sizes["run"], ds.sizes["run"]), days=days)
    return record
