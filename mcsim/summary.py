"""``summarize(ds)``: per-variable, per-configuration statistics over runs.

For every per-run variable: mean, standard deviation (ddof = 1), the 5th,
50th and 95th percentiles and the bounds of a 95 % confidence interval of the
mean (normal approximation, ``mean +- 1.959964 std / sqrt(n)``), stacked
along a ``stat`` dimension. Runs that are NaN (infeasible configurations) are
skipped. Censored runs are included as they are (their wall time is a lower
bound); ``completed``'s mean is the fraction of runs that finished.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from .variables import PER_RUN, VARIABLES

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
    parts = [mean, std, q.isel(quantile=0), q.isel(quantile=1), q.isel(quantile=2),
             mean - half, mean + half]
    return xr.concat(parts, dim="stat", coords="minimal", compat="override")


def summarize(ds: xr.Dataset, dim: str = "run") -> xr.Dataset:
    """Statistics of every per-run variable along ``dim``.

    Parameters
    ----------
    ds : xarray.Dataset
        As returned by :func:`mcsim.simulate` or read by :func:`mcsim.open_results`.
    dim : str
        The dimension to reduce (``run``).

    Returns
    -------
    xarray.Dataset
        One variable per per-run variable, dims (``stat``, sweep dims...), with
        the units of the source variable (``completed``: fraction of runs);
        the per-configuration variables are carried over unchanged.
    """
    out = {}
    for name in PER_RUN:
        if name not in ds:
            continue
        summary = _stats(ds[name], dim)
        units = "1" if name == "completed" else ds[name].attrs.get("units", VARIABLES[name].units)
        summary.attrs = {"units": units, "long_name": ds[name].attrs.get("long_name", "")}
        out[name] = summary
    result = xr.Dataset(out)
    result = result.assign_coords(stat=list(STATS))
    for name, var in ds.data_vars.items():
        if dim not in var.dims:
            result[name] = var
    result.attrs = dict(ds.attrs)
    return result
