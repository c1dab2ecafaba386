"""The configurations of a result: which may be ranked, how their values are read, their statistics.

Every decision on a result (:mod:`mcsim.analysis.ranking`, :mod:`mcsim.analysis.compare`,
:mod:`mcsim.analysis.deadline`) takes a dataset from :func:`mcsim.simulate` (dims: sweep dims...,
``run``, or sweep dims..., ``draw``, ``run`` with parameter draws of uncertain inputs) and reads
its configurations through this module. Each objective is ranked in its own direction, taken from
the variable registry (:attr:`mcsim.io.variables.Variable.direction`: lower wall time, energy, cost
and carbon, higher ETTR); a variable without a direction is refused with a ``ValueError`` naming it.

Which configurations are ranked
    Only *eligible* configurations: feasible ones whose runs all completed. A configuration with
    a run censored at ``max_wall_days`` has truncated values (its wall time, cost and energy stop
    where the run was cut off), so it is never ranked: :func:`eligible` leaves it out, and the
    comparisons of two configurations refuse it. :func:`completed_share` gives each
    configuration's share of completed runs.

With parameter draws
    A configuration is then the sweep point; its values are pooled over draws and runs (the
    predictive distribution), and the 95 % CI of a mean comes from the spread of the D draw means
    (the draws are the independent units): :func:`config_record`.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from mcsim.analysis.decisions import Z_95
from mcsim.io.variables import PART_DIM, PER_RUN, objective_direction, sweep_dims


def objectives_of(ds: xr.Dataset) -> list[str]:
    """The per-run variables of ``ds`` that can be ranked (those with a direction)."""
    return [name for name in PER_RUN if name in ds and has_direction(name)]


def has_direction(name: str) -> bool:
    """Whether the variable ``name`` has a direction (lower or higher is better) in the registry."""
    try:
        objective_direction(name)
    except ValueError:
        return False
    return True


def objective_sign(ds: xr.Dataset, objective: str) -> float:
    """+1 for an objective to minimise, -1 for one to maximise; refuses non-objectives."""
    if not isinstance(objective, str):
        raise TypeError(f"objective: expected a variable name such as 'cost', got {objective!r}")
    if objective not in ds:
        raise ValueError(
            f"objective {objective!r} is not a variable of this dataset; expected one of "
            f"{', '.join(objectives_of(ds)) or '(none: not an mcsim result)'}"
        )
    direction = objective_direction(objective)
    if "run" not in ds[objective].dims:
        raise ValueError(f"objective {objective!r} has no run dimension in this dataset")
    return 1.0 if direction == "lower" else -1.0


def sample_dims(ds: xr.Dataset) -> tuple[str, ...]:
    """The dims a configuration's values run along: (``draw``, ``run``) with parameter draws, else (``run``,)."""
    return ("draw", "run") if "draw" in ds["wall_time"].dims else ("run",)


def statistic(ds: xr.Dataset, variable: str, stat: str | float) -> xr.DataArray:
    """``stat`` ("mean" or a quantile in (0, 1)) of ``variable`` over runs (and draws; NaN runs skipped)."""
    values = ds[variable].astype(float)
    samples = list(sample_dims(ds))
    with warnings.catch_warnings():  # infeasible configurations are all-NaN slices: NaN, silently
        warnings.simplefilter("ignore", RuntimeWarning)
        if stat == "mean":
            return values.mean(samples)
        if isinstance(stat, (int, float)) and 0.0 < float(stat) < 1.0:
            return values.quantile(float(stat), dim=samples).drop_vars("quantile")
    raise ValueError(f"stat: expected 'mean' or a quantile in (0, 1), got {stat!r}")


def feasible_mask(ds: xr.Dataset) -> xr.DataArray | None:
    """Feasible configurations (in every draw, with parameter draws); None without ``feasible``."""
    if "feasible" not in ds:
        return None
    feasible = ds["feasible"].astype(bool)
    return feasible.all("draw") if "draw" in feasible.dims else feasible


def refuse_part(ds: xr.Dataset) -> None:
    """Raise ValueError (one line) when ``ds`` is one part of a sharded run (its ``shard`` attribute, or the
    ``configuration`` dim of the part layout, :mod:`mcsim.engine.shards`).

    A part holds only that part's configurations, so any answer on it (the best, the
    front, a share, a summary) would be an answer on a few configurations presented as the sweep's.
    """
    if "shard" in ds.attrs or PART_DIM in ds.dims:  # the part layout, even with its attribute removed
        raise ValueError(
            f"part {ds.attrs.get('shard', '(its shard attribute removed)')} of a sharded run (mcsim run --shard): "
            "it holds only that part's configurations; merge every part first (mcsim combine PART.nc... -o OUT.nc, "
            "or mcsim.combine)"
        )


def completed_share(ds: xr.Dataset) -> xr.DataArray:
    """Share of runs that completed (not censored at ``max_wall_days``), per configuration.

    NaN for infeasible configurations; 1 everywhere when the dataset has no ``completed``.
    With parameter draws: the share over all draws and runs, NaN when infeasible in any draw.

    Raises
    ------
    ValueError
        ``ds`` is one part of a sharded run (:func:`refuse_part`); so do the decisions built on
        this share (:func:`eligible`: best, Pareto front, cheapest within a deadline).
    """
    refuse_part(ds)
    dims = sweep_dims(ds)
    if "completed" in ds:
        share = ds["completed"].astype(float).mean(list(sample_dims(ds)))
    else:
        share = xr.ones_like(ds["wall_time"].isel({d: 0 for d in sample_dims(ds)}, drop=True), dtype=float)
    feasible = feasible_mask(ds)
    if feasible is not None:
        share = share.where(feasible)
    return share.transpose(*dims)


def eligible(ds: xr.Dataset) -> xr.DataArray:
    """Configurations that may be ranked: feasible, with every run completed."""
    return completed_share(ds) == 1.0


def require_eligible(ds: xr.Dataset, mask: xr.DataArray) -> None:
    """Raise ValueError (one line) when no configuration is feasible, or none of ``mask`` (:func:`eligible`)."""
    feasible = feasible_mask(ds)
    if feasible is None:  # no feasible variable: every configuration is
        feasible = xr.ones_like(mask)
    if not bool(feasible.any()):
        raise ValueError("no feasible configuration")
    if not bool(mask.any()):
        raise ValueError(
            "no configuration has all its runs completed (every feasible one has runs censored "
            "at max_wall_days, so its values are truncated): none can be ranked; "
            "raise run.max_wall_days"
        )


def require_draws(ds: xr.Dataset) -> None:
    """Raise ValueError (one line) when the result has no parameter draws."""
    if "draw" not in sample_dims(ds):
        raise ValueError(
            "the result has no parameter draws (run a scenario with an [uncertain] table and run.draws > 0)"
        )


def check_days(days: object) -> float:
    """``days`` as a float: a finite number of days > 0.

    Raises
    ------
    ValueError
        Anything else (negative, zero, NaN, infinite, not a number), in one line.
    """
    value = _real(days)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"days: expected a finite number of days > 0, got {days!r}")
    return value


def _real(value: object) -> float:
    """``value`` as a float when it is a real number (not a bool), else NaN."""
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan


def check_probability(probability: object) -> float:
    """``probability`` as a float in the open interval (0, 1).

    Raises
    ------
    ValueError
        Anything else, in one line; a value in (1, 100] is taken for a percentage and
        the message says so (0.9, not 90).
    """
    value = _real(probability)
    if not 0.0 < value < 1.0:
        hint = f" (a share, not a percentage: {value / 100:g} for {value:g} %)" if 1.0 < value <= 100.0 else ""
        raise ValueError(f"probability: expected a number in (0, 1){hint}, got {probability!r}")
    return value


def check_point(ds: xr.Dataset, point: object, name: str) -> Mapping:
    """``point`` if it selects exactly one configuration of ``ds`` by coordinate; else a one-line ValueError."""
    dims = sweep_dims(ds)
    if not isinstance(point, Mapping):
        raise TypeError(
            f"{name}: expected a mapping of sweep coordinates such as {{{dims[0] if dims else 'gpus'!r}: ...}}, "
            f"got {point!r}"
        )
    unknown = [str(k) for k in point if k not in dims]
    if unknown:
        raise ValueError(
            f"{name}: {', '.join(unknown)} is not a sweep dimension; expected {', '.join(dims) or 'none (no sweep)'}"
        )
    missing = [d for d in dims if d not in point]
    if missing:
        raise ValueError(f"{name}: selects more than one configuration; also give {', '.join(missing)}")
    for d, value in point.items():
        values = ds[d].values.tolist()
        if value not in values:
            shown = ", ".join(map(str, values[:12])) + (" ..." if len(values) > 12 else "")
            raise ValueError(f"{name}: {d}={value!r} is not a configuration of this result; {d} is one of {shown}")
    return point


def point_text(point: Mapping) -> str:
    """A configuration as ``gpus=1024, strategy=async`` (or "the single configuration")."""
    return ", ".join(f"{d}={plain_value(v)}" for d, v in point.items()) or "the single configuration"


def plain_value(value: Any) -> Any:
    """A coordinate value as a Python scalar (a NumPy scalar's ``item()``)."""
    return value.item() if hasattr(value, "item") else value


def point_of(ds: xr.Dataset, flat: int) -> dict:
    """The configuration at index ``flat`` of the sweep in C order, as ``{dim: value}``."""
    dims = sweep_dims(ds)
    index = np.unravel_index(flat, tuple(ds.sizes[d] for d in dims)) if dims else ()
    return {d: ds[d].values[i] for d, i in zip(dims, index, strict=False)}


def nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis, NaN where a row has no finite value (silently)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=-1)


def mean_half_width(array: np.ndarray, values: np.ndarray, by_draw: bool) -> tuple[float, int]:
    """Half-width of the normal 95 % CI of the mean of ``values``, and the number of independent units.

    ``array`` holds the values as (draws, runs) and ``values`` its finite ones. With ``by_draw`` the
    units are the draws: the spread is that of the finite draw means (it holds the inputs'
    uncertainty and the runs' noise); else the units are the finite values. NaN with fewer than
    two units.
    """
    units = nanmean_rows(array) if by_draw else values
    units = units[np.isfinite(units)]
    n_units = units.size
    spread = float(units.std(ddof=1)) if n_units > 1 else math.nan
    return (Z_95 * spread / math.sqrt(n_units) if n_units > 1 else math.nan), n_units


def config_record(ds: xr.Dataset, point: Mapping, objective: str) -> dict:
    """Statistics of ``objective`` over the runs of one configuration.

    Returns a dict: ``configuration`` (coordinates), ``objective``, ``units``,
    ``direction``, ``mean`` and its normal ``ci95``, ``p5``, ``p95``, ``runs`` (finite
    runs) and ``completed`` (share of runs not censored). With parameter draws the
    statistics pool draws and runs (p5 and p95: the predictive interval), the CI of the
    mean is ``mean ± 1.96 s_B / sqrt(D)`` (s_B: standard deviation of the D draw means,
    as in :func:`mcsim.summarize`), ``runs`` counts draws x runs and ``draws`` is added.
    """
    one = ds.sel(dict(point)) if point else ds
    samples = sample_dims(ds)
    array = one[objective].transpose(*samples).values.astype(float).reshape(-1, ds.sizes["run"])
    values = array[np.isfinite(array)]  # as xarray's skipna mean that chose the point
    if values.size == 0:
        raise ValueError(f"{objective}: no finite run at {point_text(point)}")
    mean = float(values.mean())
    half = mean_half_width(array, values, "draw" in samples)[0]
    record = {
        "configuration": {k: plain_value(v) for k, v in point.items()},
        "objective": objective,
        "units": ds[objective].attrs.get("units", ""),
        "direction": objective_direction(objective) if has_direction(objective) else None,
        "mean": mean,
        "ci95": (mean - half, mean + half),
        "p5": float(np.percentile(values, 5)),
        "p95": float(np.percentile(values, 95)),
        "runs": values.size,
        "completed": float(one["completed"].mean()) if "completed" in one else 1.0,
    }
    if "draw" in samples:
        record["draws"] = int(ds.sizes["draw"])
    return record


def configuration_array(ds: xr.Dataset, variable: xr.DataArray) -> np.ndarray:
    """``variable`` (sweep..., draw, run) as a (configurations, draws, runs) array, the sweep in C order."""
    dims = sweep_dims(ds)
    values = variable.transpose(*dims, "draw", "run").values.astype(float)
    return values.reshape(-1, ds.sizes["draw"], ds.sizes["run"])


def on_sweep(ds: xr.Dataset, arrays: dict[str, np.ndarray], attrs: dict[str, dict]) -> xr.Dataset:
    """A dataset over the sweep dims of ``ds``: each array of ``attrs``' names, flat in C order, with its attributes."""
    dims = sweep_dims(ds)
    shape = tuple(ds.sizes[d] for d in dims)
    return xr.Dataset(
        {
            name: xr.DataArray(
                np.asarray(arrays[name]).reshape(shape), dims=dims, coords={d: ds[d] for d in dims}, attrs=attrs[name]
            )
            for name in attrs
        }
    )
