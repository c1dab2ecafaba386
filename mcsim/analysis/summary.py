"""``summarize(ds)``: per-variable, per-configuration statistics over runs.

For every per-run variable: mean, standard deviation (ddof = 1), the 5th,
50th and 95th percentiles and the bounds of a 95 % confidence interval of the
mean (normal approximation, ``mean +- 1.959964 std / sqrt(n)``), stacked
along a ``stat`` dimension. Runs that are NaN (infeasible configurations) are
skipped. Censored runs are included as they are (their wall time is a lower
bound); ``completed``'s mean is the fraction of runs that finished.

:func:`summary_frame` is the same as a table of numbers (a pandas DataFrame: ``ds.mcsim.table()``,
``mcsim summary --format json|csv``).

Also here: :func:`check_results` (what ``mcsim summary``, ``plot`` and ``report`` require of a
result file).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from mcsim.analysis.configurations import refuse_part
from mcsim.io.netcdf import open_results
from mcsim.io.variables import LATER_VARIABLES, PER_RUN, VARIABLES

STATS = ("mean", "std", "p5", "p50", "p95", "ci95_low", "ci95_high")
Z_95 = 1.959963984540054  # Phi^-1(0.975)


def _stats(values: xr.DataArray, dim: str) -> xr.DataArray:
    with warnings.catch_warnings():  # infeasible configurations are all-NaN: their stats are NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return _stats_of(values.astype(float), dim)


def _stats_of(x: xr.DataArray, dim: str) -> xr.DataArray:
    count = x.count(dim)
    mean = x.mean(dim)
    std = x.std(dim, ddof=1)
    half = Z_95 * std / np.sqrt(count)
    q = x.quantile([0.05, 0.5, 0.95], dim=dim).drop_vars("quantile")
    parts = [mean, std, q.isel(quantile=0), q.isel(quantile=1), q.isel(quantile=2), mean - half, mean + half]
    return xr.concat(parts, dim="stat", coords="minimal", compat="override")


# With parameter draws (dims ..., draw, run) the summary has two more statistics.
TWO_LEVEL_STATS = (*STATS, "epistemic_share", "aleatoric_share")


def _two_level_stats(values: xr.DataArray) -> xr.DataArray:
    with warnings.catch_warnings():  # all-NaN (infeasible) configurations, zero variance: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return _two_level_stats_of(values.astype(float))


def _two_level_stats_of(x: xr.DataArray) -> xr.DataArray:
    """Statistics over draws and runs: the draws are the independent units of the mean's CI.

    mean, std, p5/p50/p95: over all draws and runs (the predictive distribution).
    ci95: mean +- 1.96 s_B / sqrt(D), s_B the standard deviation of the D draw means (it
    holds both the input uncertainty and the runs' noise of each draw mean). Shares of the
    variance, by the law of total variance Var X = Var E[X|theta] + E Var[X|theta]:
    aleatoric W = mean over draws of the within-draw variance (ddof 1), epistemic
    max(s_B^2 - W / R, 0) (the between-draw variance less the runs' noise in each draw
    mean, R runs per draw); each divided by their sum, so the two add up to 1.
    """
    pooled = x.stack(sample=("draw", "run"))
    mean = pooled.mean("sample")
    std = pooled.std("sample", ddof=1)
    q = pooled.quantile([0.05, 0.5, 0.95], dim="sample").drop_vars("quantile")
    draw_means = x.mean("run")
    between = draw_means.var("draw", ddof=1)
    half = Z_95 * np.sqrt(between / draw_means.count("draw"))
    within = x.var("run", ddof=1).mean("draw")
    epistemic = (between - within / x.count("run").mean("draw")).clip(min=0.0)
    total = epistemic + within
    parts = [
        mean,
        std,
        q.isel(quantile=0),
        q.isel(quantile=1),
        q.isel(quantile=2),
        mean - half,
        mean + half,
        epistemic / total,
        within / total,
    ]
    return xr.concat(parts, dim="stat", coords="minimal", compat="override")


def summarize(ds: xr.Dataset | str | Path, dim: str = "run") -> xr.Dataset:
    """Statistics of every per-run variable along ``dim``.

    Parameters
    ----------
    ds : xarray.Dataset, str or path-like
        As returned by :func:`mcsim.simulate` or read by :func:`mcsim.open_results`; or the path of
        a result file, opened with :func:`mcsim.open_results` and checked as ``mcsim summary``
        checks it (:func:`check_results`).
    dim : str
        The dimension to reduce (``run``).

    Returns
    -------
    xarray.Dataset
        One variable per per-run variable, dims (``stat``, sweep dims...), with
        the units of the source variable (``completed``: fraction of runs);
        the per-configuration variables are carried over unchanged. A result
        with parameter draws (``run.draws``, dims sweep..., ``draw``, ``run``)
        is summarised over draws and runs together (:data:`TWO_LEVEL_STATS`):
        the percentiles are the predictive interval, the CI of the mean comes
        from the spread of the draw means, and ``epistemic_share`` and
        ``aleatoric_share`` split the variance between the inputs' uncertainty
        (between draws) and chance (within a draw).

    Raises
    ------
    ValueError
        A path to a file that is not a complete mcsim result (one line naming the file), or ``ds``
        is one part of a sharded run (merge the parts first: :func:`mcsim.combine`).
    OSError
        A path to a file that cannot be read.
    """
    if not isinstance(ds, xr.Dataset):
        ds = open_checked(ds)
    refuse_part(ds)
    out = {}
    two_level = dim == "run" and "draw" in ds.dims
    for name in PER_RUN:
        if name not in ds:
            continue
        summary = _two_level_stats(ds[name]) if two_level else _stats(ds[name], dim)
        units = "1" if name == "completed" else ds[name].attrs.get("units", VARIABLES[name].units)
        summary.attrs = {"units": units, "long_name": ds[name].attrs.get("long_name", "")}
        out[name] = summary
    result = xr.Dataset(out)
    result = result.assign_coords(stat=list(TWO_LEVEL_STATS if two_level else STATS))
    for key, var in ds.data_vars.items():  # the per-configuration variables
        if dim not in var.dims:
            result[key] = var
    result.attrs = dict(ds.attrs)
    return result


def open_checked(path: str | Path) -> xr.Dataset:
    """The result file ``path``, opened (:func:`mcsim.open_results`) and checked (:func:`check_results`).

    Raises
    ------
    ValueError
        Not an mcsim result, or not a complete one: one line starting with the path.
    OSError
        The file cannot be read.
    """
    ds = open_results(path)
    try:
        check_results(ds)
    except ValueError as err:
        raise ValueError(f"{os.fspath(path)}: {err}") from None
    return ds


def check_results(ds: xr.Dataset) -> None:
    """Refuse a dataset that is not a complete mcsim result, naming what is wrong.

    Checks that every registered variable is present with numbers (text for
    ``infeasible_reason``) on the dims of ``wall_time`` (sweep dims + ``run``, or the
    sweep dims alone for per-configuration variables), that there is at least one run
    and one configuration, that no dimension is named ``stat`` (the dimension
    :func:`summarize` adds), that some configuration is feasible and that every
    feasible one has a finite wall time, energy and cost.

    Raises
    ------
    ValueError
        One line saying what is missing or wrong.
    """
    _check_kind(ds)
    _check_variables(ds)
    _check_distinct_coordinates(ds)
    if ds.sizes["run"] == 0:
        raise ValueError("no runs (the run dimension is empty)")
    empty = [d for d in ds["wall_time"].dims if d != "run" and ds.sizes[d] == 0]
    if empty:
        raise ValueError(f"no configurations (sweep dimension {str(empty[0])!r} is empty)")
    feasible = ds["feasible"].astype(bool)
    if not bool(feasible.any()):
        raise ValueError("no feasible configuration")
    for name in ("wall_time", "energy", "cost"):
        finite = xr.apply_ufunc(np.isfinite, ds[name].astype(float)).any("run")
        if bool((feasible & ~finite).any()):
            raise ValueError(f"{name}: no finite value in a feasible configuration (all NaN)")


def _check_distinct_coordinates(ds: xr.Dataset) -> None:
    """Refuse a sweep coordinate that repeats a value: a configuration is found by its values (a
    repeated one ended a breakdown figure in TypeError); a scenario's sweep values are distinct."""
    for dim in ds["wall_time"].dims:
        if dim == "run" or dim not in ds.coords:
            continue
        values = ds[dim].to_index()
        if values.has_duplicates:
            repeated = values[values.duplicated()].tolist()[0]
            raise ValueError(f"coordinate {dim} repeats the value {repeated!r}: a sweep's values are distinct")


def _check_kind(ds: xr.Dataset) -> None:
    """Refuse a summary, a ``draw`` dimension without uncertain inputs, and a part of a sharded run."""
    if "stat" in ds.dims:
        raise ValueError("has a dimension named 'stat' (a summary from mcsim.summarize, not a result of mcsim run)")
    if "draw" in ds.dims and not str(ds.attrs.get("uncertain_inputs", "")).strip():
        raise ValueError(
            "has a dimension named 'draw' but no uncertain inputs (attribute uncertain_inputs): 'draw' is "
            "reserved for parameter draws, which every statistic pools; rename that dimension"
        )
    refuse_part(ds)


def _check_variables(ds: xr.Dataset) -> None:
    """Refuse a dataset without every registered variable, each on the dims of ``wall_time`` (with ``run`` or
    without, as registered) and of numbers (but text)."""
    missing = [name for name in VARIABLES if name not in ds.variables and name not in LATER_VARIABLES]
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        raise ValueError(f"not an mcsim result file: no variable {shown}")
    if "run" not in ds["wall_time"].dims:
        raise ValueError("not an mcsim result file: wall_time has no run dimension")
    _check_dims_and_types(ds, [str(d) for d in ds["wall_time"].dims if d != "run"])


def _check_dims_and_types(ds: xr.Dataset, sweep: list[str]) -> None:
    """Refuse a registered variable off the ``sweep`` dims (and ``run`` for a per-run one), or not of numbers."""
    for name, var in VARIABLES.items():
        if name not in ds.variables:
            continue  # one of LATER_VARIABLES, in a file written before it existed
        expected = set(sweep) | ({"run"} if var.per_run else set())
        if set(ds[name].dims) != expected:
            raise ValueError(
                f"{name}: dimensions ({', '.join(map(str, ds[name].dims))}), expected ({', '.join(sorted(expected))})"
            )
        if var.dtype != "str" and ds[name].dtype.kind not in "fiub":
            raise ValueError(f"{name}: expected numbers, got {ds[name].dtype}")


# the per-run variables of the machine-readable table, and the statistics of each
TABLE_VARIABLES = ("wall_time", "energy", "cost", "co2", "n_failures", "ettr", "completed")
TABLE_STATS = ("mean", "ci95_low", "ci95_high", "p5", "p95")


def summary_frame(
    ds: xr.Dataset, variables: Sequence[str] = TABLE_VARIABLES, stats: Sequence[str] = TABLE_STATS
) -> pd.DataFrame:
    """The summary as a table of numbers: one row per configuration, one column per variable and statistic.

    The machine-readable twin of ``mcsim summary`` (``--format json|csv``) and ``ds.mcsim.table()``.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`mcsim.simulate`.
    variables : sequence of str
        Per-run variables (default :data:`TABLE_VARIABLES`).
    stats : sequence of str
        Statistics of :func:`summarize` (default :data:`TABLE_STATS`).

    Returns
    -------
    pandas.DataFrame
        Columns: the sweep dimensions' values, ``feasible``, then ``<variable>_<stat>`` in the
        variable's stored unit; ``frame.attrs["units"]`` maps each column to its unit (the ``units``
        attribute of the file: h, MW h, USD, t, 1).

    Raises
    ------
    ValueError
        A name that is not a per-run variable of ``ds``, or a statistic :func:`summarize` does not give.
    """
    unknown = [name for name in variables if name not in ds or "run" not in ds[name].dims]
    if unknown:
        raise ValueError(f"not a per-run variable: {', '.join(unknown)}; expected some of {', '.join(PER_RUN)}")
    summary = summarize(ds)
    known = [str(s) for s in summary["stat"].values]
    if missing := [s for s in stats if s not in known]:
        raise ValueError(f"unknown statistic {', '.join(missing)}; expected some of {', '.join(known)}")
    dims = [str(d) for d in summary[variables[0]].dims if d != "stat"]
    frame = _coordinates_frame(ds, summary, dims)
    units = frame.attrs["units"]
    for name in variables:
        unit = str(ds[name].attrs.get("units", VARIABLES[name].units))
        for stat in stats:
            frame[f"{name}_{stat}"] = np.asarray(summary[name].sel(stat=stat).transpose(*dims).values, float).ravel()
            units[f"{name}_{stat}"] = unit
    return frame


def _coordinates_frame(ds: xr.Dataset, summary: xr.Dataset, dims: list[str]) -> pd.DataFrame:
    """One row per configuration of ``dims`` (C order): the coordinates' values and ``feasible`` (in every
    draw); ``attrs["units"]`` holds the coordinates' units."""
    points = list(np.ndindex(*(summary.sizes[d] for d in dims)))
    frame = pd.DataFrame({d: [summary[d].values[index[k]].item() for index in points] for k, d in enumerate(dims)})
    units = {d: str(ds[d].attrs.get("units", "")) for d in dims}
    if "feasible" in ds:
        feasible = ds["feasible"].transpose(*dims, ...).values
        frame["feasible"] = [bool(np.all(feasible[index])) for index in points]
        units["feasible"] = "1"
    frame.attrs["units"] = units
    return frame
