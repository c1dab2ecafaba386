"""Decision analysis on simulated sweeps: Pareto fronts, paired comparisons, best picks.

All functions take a dataset from :func:`mcsim.simulate` (dims: sweep dims...,
``run``) and minimise every objective (time, energy, cost, carbon). Infeasible
configurations never qualify. Runs share their random streams across
configurations (common random numbers), so comparisons between two
configurations use the paired runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

Z_95 = 1.959963984540054


def _statistic(ds: xr.Dataset, variable: str, stat: str | float) -> xr.DataArray:
    """``stat`` ("mean" or a quantile in (0, 1)) of ``variable`` over runs."""
    values = ds[variable].astype(float)
    if stat == "mean":
        return values.mean("run")
    if isinstance(stat, (int, float)) and 0.0 < float(stat) < 1.0:
        return values.quantile(float(stat), dim="run").drop_vars("quantile")
    raise ValueError(f"stat must be 'mean' or a quantile in (0, 1), got {stat!r}")


def _sweep_dims(ds: xr.Dataset) -> list[str]:
    return [d for d in ds["wall_time"].dims if d != "run"]


def pareto_front(ds: xr.Dataset, objectives: Sequence[str] = ("wall_time", "cost"),
                 stat: str | float = "mean") -> xr.DataArray:
    """Non-dominated feasible configurations, all objectives minimised.

    Parameters
    ----------
    ds : xarray.Dataset
        Simulation results.
    objectives : sequence of str
        Per-run variables, e.g. ``("wall_time", "energy")``.
    stat : "mean" or float
        Summary of each objective over runs: the mean or a quantile (0.9: the
        90th percentile, a risk-averse planner's choice).

    Returns
    -------
    xarray.DataArray
        Boolean over the sweep dims: True on the Pareto front.
    """
    if len(objectives) < 1:
        raise ValueError("give at least one objective")
    values = np.stack([_statistic(ds, name, stat).values.ravel() for name in objectives], axis=1)
    feasible = ds["feasible"].values.ravel().astype(bool) & np.all(np.isfinite(values), axis=1)
    front = feasible.copy()
    for i in np.flatnonzero(feasible):
        others = values[feasible]
        dominated = np.any(np.all(others <= values[i], axis=1) & np.any(others < values[i], axis=1))
        front[i] = not dominated
    dims = _sweep_dims(ds)
    shape = tuple(ds.sizes[d] for d in dims)
    return xr.DataArray(front.reshape(shape), dims=dims, coords={d: ds[d] for d in dims},
                        attrs={"long_name": f"Pareto front of {', '.join(objectives)} ({stat})", "units": "1"})


def prob_better(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str = "cost") -> tuple[float, float]:
    """Probability that configuration ``a`` beats ``b`` on ``objective``, from paired runs.

    ``a`` and ``b`` select configurations by coordinate (``{"gpus": 4096, "strategy":
    "gockpt"}``). Run r of both used the same random streams, so the estimate is
    ``mean(a_r < b_r) + 0.5 mean(a_r == b_r)`` over runs, with its standard error
    ``sqrt(p (1 - p) / n)`` (binomial over the paired runs).

    Returns
    -------
    (probability, standard_error)
    """
    xa = ds[objective].sel(dict(a)).values.astype(float)
    xb = ds[objective].sel(dict(b)).values.astype(float)
    if xa.shape != xb.shape or xa.ndim != 1:
        raise ValueError("a and b must each select one configuration (all sweep dims)")
    ok = np.isfinite(xa) & np.isfinite(xb)
    if not ok.any():
        raise ValueError("no comparable runs (infeasible configuration?)")
    wins = (xa[ok] < xb[ok]) + 0.5 * (xa[ok] == xb[ok])
    n = int(ok.sum())
    p = float(wins.mean())
    # The binomial SE, with p shrunk to (k + 0.5) / (n + 1) so that p = 0 or 1 does not
    # claim certainty.
    shrunk = (p * n + 0.5) / (n + 1)
    return p, math.sqrt(shrunk * (1 - shrunk) / n)


def _config_record(ds: xr.Dataset, point: Mapping, objective: str) -> dict:
    values = ds[objective].sel(dict(point)).values.astype(float)
    values = values[np.isfinite(values)]  # as xarray's skipna mean that chose the point
    n = values.size
    mean = float(values.mean())
    half = Z_95 * float(values.std(ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    return {
        "configuration": {k: (v.item() if hasattr(v, "item") else v) for k, v in point.items()},
        "objective": objective,
        "units": ds[objective].attrs.get("units", ""),
        "mean": mean,
        "ci95": (mean - half, mean + half),
        "p5": float(np.percentile(values, 5)),
        "p95": float(np.percentile(values, 95)),
        "runs": n,
    }


def _points(ds: xr.Dataset):
    dims = _sweep_dims(ds)
    for index in np.ndindex(*(ds.sizes[d] for d in dims)):
        yield {d: ds[d].values[i] for d, i in zip(dims, index)}


def best(ds: xr.Dataset, objective: str = "cost", stat: str | float = "mean") -> dict:
    """The feasible configuration that minimises ``stat`` of ``objective``.

    Returns a dict: ``configuration`` (coordinates), ``mean``, its ``ci95``, ``p5``,
    ``p95`` of the objective, and its ``units``.
    """
    summary = _statistic(ds, objective, stat).where(ds["feasible"])
    if not np.isfinite(summary.values).any():
        raise ValueError("no feasible configuration")
    flat = int(np.nanargmin(summary.values.ravel())) if summary.ndim else 0
    dims = _sweep_dims(ds)
    index = np.unravel_index(flat, summary.shape) if dims else ()
    point = {d: ds[d].values[i] for d, i in zip(dims, index)}
    return _config_record(ds, point, objective)


def cheapest_within(ds: xr.Dataset, days: float, probability: float = 0.9, cost: str = "cost") -> dict | None:
    """The cheapest configuration that finishes within ``days`` with at least ``probability``.

    The probability is the share of runs that completed within the deadline (censored
    runs count as late); a configuration qualifies when that share is at least
    ``probability``. Returns :func:`best`'s record plus ``p_within`` and its standard
    error, or None when no configuration qualifies.
    """
    within = ((ds["wall_time"] <= days * 24.0) & ds["completed"]).mean("run")
    qualifies = (within >= probability) & ds["feasible"]
    if not bool(qualifies.any()):
        return None
    mean_cost = ds[cost].mean("run").where(qualifies)
    dims = _sweep_dims(ds)
    flat = int(np.nanargmin(mean_cost.values.ravel())) if dims else 0
    index = np.unravel_index(flat, mean_cost.shape) if dims else ()
    point = {d: ds[d].values[i] for d, i in zip(dims, index)}
    record = _config_record(ds, point, cost)
    p = float(within.sel(point)) if dims else float(within)
    record.update(p_within=p, p_within_se=math.sqrt(p * (1 - p) / ds.sizes["run"]), days=days)
    return record
