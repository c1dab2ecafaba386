"""Decision analysis on simulated sweeps: Pareto fronts, paired comparisons, best picks.

All functions take a dataset from :func:`mcsim.simulate` (dims: sweep dims...,
``run``, or sweep dims..., ``draw``, ``run`` with parameter draws of uncertain
inputs). Each objective is ranked in its own direction, taken from the variable
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

With parameter draws
    A configuration is then the sweep point; its values are pooled over draws and runs
    (the predictive distribution), the 95 % CI of a mean comes from the spread of the D
    draw means (the draws are the independent units), and comparisons pair (draw, run).
    :func:`prob_best`, :func:`expected_regret`, :func:`prob_within` and
    :func:`prob_better_by_draw` compare configurations draw by draw (docs/model.md,
    "Decisions under uncertainty"); :func:`best` and :func:`cheapest_within` add them
    to their record.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import xarray as xr

from mcsim.analysis.decisions import Z_95, decision_arrays, wilson_interval, within_arrays
from mcsim.analysis.pareto import nondominated
from mcsim.errors import NoneQualifies
from mcsim.io.variables import PER_RUN, objective_direction, sweep_dims


class Probability(NamedTuple):
    """An estimated probability with its 95 % Wilson score interval."""

    probability: float
    ci95: tuple[float, float]
    runs: int


def objectives_of(ds: xr.Dataset) -> list[str]:
    """The per-run variables of ``ds`` that can be ranked (those with a direction)."""
    return [name for name in PER_RUN if name in ds and _has_direction(name)]


def _sign(ds: xr.Dataset, objective: str) -> float:
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


def _samples(ds: xr.Dataset) -> tuple[str, ...]:
    """The dims a configuration's values run along: (``draw``, ``run``) with parameter draws, else (``run``,)."""
    return ("draw", "run") if "draw" in ds["wall_time"].dims else ("run",)


def _statistic(ds: xr.Dataset, variable: str, stat: str | float) -> xr.DataArray:
    """``stat`` ("mean" or a quantile in (0, 1)) of ``variable`` over runs (and draws; NaN runs skipped)."""
    values = ds[variable].astype(float)
    samples = list(_samples(ds))
    with warnings.catch_warnings():  # infeasible configurations are all-NaN slices: NaN, silently
        warnings.simplefilter("ignore", RuntimeWarning)
        if stat == "mean":
            return values.mean(samples)
        if isinstance(stat, (int, float)) and 0.0 < float(stat) < 1.0:
            return values.quantile(float(stat), dim=samples).drop_vars("quantile")
    raise ValueError(f"stat: expected 'mean' or a quantile in (0, 1), got {stat!r}")


def _feasible(ds: xr.Dataset) -> xr.DataArray | None:
    """Feasible configurations (in every draw, with parameter draws); None without ``feasible``."""
    if "feasible" not in ds:
        return None
    feasible = ds["feasible"].astype(bool)
    return feasible.all("draw") if "draw" in feasible.dims else feasible


def completed_share(ds: xr.Dataset) -> xr.DataArray:
    """Share of runs that completed (not censored at ``max_wall_days``), per configuration.

    NaN for infeasible configurations; 1 everywhere when the dataset has no ``completed``.
    With parameter draws: the share over all draws and runs, NaN when infeasible in any draw.
    """
    dims = sweep_dims(ds)
    if "completed" in ds:
        share = ds["completed"].astype(float).mean(list(_samples(ds)))
    else:
        share = xr.ones_like(ds["wall_time"].isel({d: 0 for d in _samples(ds)}, drop=True), dtype=float)
    feasible = _feasible(ds)
    if feasible is not None:
        share = share.where(feasible)
    return share.transpose(*dims)


def eligible(ds: xr.Dataset) -> xr.DataArray:
    """Configurations that may be ranked: feasible, with every run completed."""
    return completed_share(ds) == 1.0


def _require_eligible(ds: xr.Dataset, mask: xr.DataArray) -> None:
    feasible = _feasible(ds)
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


def _check_point(ds: xr.Dataset, point: object, name: str) -> Mapping:
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


def pareto_front(
    ds: xr.Dataset, objectives: Sequence[str] = ("wall_time", "cost"), stat: str | float = "mean"
) -> xr.DataArray:
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
    if isinstance(objectives, str):
        raise TypeError(
            f"objectives: expected a sequence of variable names such as ('wall_time', 'cost'), "
            f"got the string {objectives!r}"
        )
    if len(objectives) < 1:
        raise ValueError("objectives: give at least one objective")
    signs = [_sign(ds, name) for name in objectives]
    mask = eligible(ds)
    _require_eligible(ds, mask)
    columns = []
    for name, sign in zip(objectives, signs, strict=False):
        risk_stat = stat if stat == "mean" or sign > 0 else 1.0 - float(stat)
        columns.append(sign * _statistic(ds, name, risk_stat).where(mask).values.ravel())
    front = nondominated(np.stack(columns, axis=1))
    dims = sweep_dims(ds)
    shape = tuple(ds.sizes[d] for d in dims)
    return xr.DataArray(
        front.reshape(shape),
        dims=dims,
        coords={d: ds[d] for d in dims},
        attrs={"long_name": f"Pareto front of {', '.join(objectives)} ({stat})", "units": "1"},
    )


def _paired(ds: xr.Dataset, a: Mapping, b: Mapping, objective: str) -> tuple[np.ndarray, np.ndarray]:
    """Values of ``objective`` at configurations ``a`` and ``b``, both fully completed, as
    (draws, runs) arrays paired element by element ((1, runs) without parameter draws)."""
    samples = _samples(ds)
    runs = []
    for name, point in (("a", a), ("b", b)):
        one = ds.sel(dict(_check_point(ds, point, name)))
        values = one[objective]
        if set(values.dims) != set(samples):
            raise ValueError("a and b must each select one configuration (all sweep dims)")
        feasible = bool(np.all(one["feasible"].values)) if "feasible" in one else True
        if "completed" in one and not bool(one["completed"].all()) and feasible:
            share = float(one["completed"].mean())
            raise ValueError(
                f"configuration {name} ({_text(point)}) has runs censored at max_wall_days "
                f"({share:.1%} completed): its values are truncated and cannot be compared"
            )
        runs.append(values.transpose(*samples).values.astype(float).reshape(-1, ds.sizes["run"]))
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
    sign = _sign(ds, objective)
    xa, xb = (x.ravel() for x in _paired(ds, a, b, objective))
    ok = np.isfinite(xa) & np.isfinite(xb)
    if not ok.any():
        raise ValueError("no comparable runs (infeasible configuration?)")
    sa, sb = sign * xa[ok], sign * xb[ok]
    wins = float(np.sum(sa < sb) + 0.5 * np.sum(sa == sb))
    n = int(ok.sum())
    return Probability(wins / n, wilson_interval(wins, n), n)


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis, NaN where a row has no finite value (silently)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=-1)


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
    _require_draws(ds)
    sign = _sign(ds, objective)
    ma, mb = (_nanmean_rows(x) for x in _paired(ds, a, b, objective))
    ok = np.isfinite(ma) & np.isfinite(mb)
    if not ok.any():
        raise ValueError("no comparable draws (infeasible configuration?)")
    sa, sb = sign * ma[ok], sign * mb[ok]
    wins = float(np.sum(sa < sb) + 0.5 * np.sum(sa == sb))
    n = int(ok.sum())
    return Probability(wins / n, wilson_interval(wins, n), n)


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
    _sign(ds, objective)
    xa, xb = _paired(ds, a, b, objective)
    d = xa - xb
    draw_means = _nanmean_rows(d)
    d = d[np.isfinite(d)]
    if d.size == 0:
        raise ValueError("no comparable runs (infeasible configuration?)")
    mean = float(d.mean())
    if "draw" in _samples(ds):
        draw_means = draw_means[np.isfinite(draw_means)]
        n_units = draw_means.size
        spread = float(draw_means.std(ddof=1)) if n_units > 1 else math.nan
    else:
        n_units = d.size
        spread = float(d.std(ddof=1)) if n_units > 1 else math.nan
    half = Z_95 * spread / math.sqrt(n_units) if n_units > 1 else math.nan
    record = {
        "mean": mean,
        "ci95": (mean - half, mean + half),
        "runs": int(d.size),
        "units": ds[objective].attrs.get("units", ""),
    }
    if "draw" in _samples(ds):
        record["draws"] = int(n_units)
    return record


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
    samples = _samples(ds)
    array = one[objective].transpose(*samples).values.astype(float).reshape(-1, ds.sizes["run"])
    values = array[np.isfinite(array)]  # as xarray's skipna mean that chose the point
    n = values.size
    if n == 0:
        raise ValueError(f"{objective}: no finite run at {_text(point)}")
    mean = float(values.mean())
    if "draw" in samples:
        draw_means = _nanmean_rows(array)
        draw_means = draw_means[np.isfinite(draw_means)]
        n_units, spread = draw_means.size, float(draw_means.std(ddof=1)) if draw_means.size > 1 else math.nan
    else:
        n_units, spread = n, float(values.std(ddof=1)) if n > 1 else math.nan
    half = Z_95 * spread / math.sqrt(n_units) if n_units > 1 else math.nan
    completed = float(one["completed"].mean()) if "completed" in one else 1.0
    record = {
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
    if "draw" in samples:
        record["draws"] = int(ds.sizes["draw"])
    return record


def _has_direction(name: str) -> bool:
    try:
        objective_direction(name)
    except ValueError:
        return False
    return True


def _point_of(ds: xr.Dataset, flat: int) -> dict:
    dims = sweep_dims(ds)
    index = np.unravel_index(flat, tuple(ds.sizes[d] for d in dims)) if dims else ()
    return {d: ds[d].values[i] for d, i in zip(dims, index, strict=False)}


def best(ds: xr.Dataset, objective: str = "cost", stat: str | float = "mean") -> dict:
    """The eligible configuration with the best ``stat`` of ``objective``.

    Best is the lowest, or the highest for an objective where higher is better (ETTR);
    with a quantile ``stat`` and such an objective, the ``1 - stat`` quantile is used
    (the risk-averse side). Infeasible configurations and those with a censored run are
    never chosen. With parameter draws ``stat`` is taken over draws and runs together
    (with ``"mean"``, and as many runs in every draw, the pick is also the one of
    least expected regret, :func:`decision_table`).

    Returns
    -------
    dict
        :func:`config_record` of the chosen configuration: ``configuration``, ``mean``,
        its ``ci95``, ``p5``, ``p95``, ``units``, ``direction``, ``runs``, ``completed``.
        With parameter draws also ``draws`` and the pick's ``p_best`` with its
        ``p_best_ci95`` (Wilson, over draws), ``p_best_clear`` and ``expected_regret``
        with its ``expected_regret_ci95`` (units of ``objective``): see :func:`decision_table`.

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
    point = _point_of(ds, flat)
    record = config_record(ds, point, objective)
    if "draw" in _samples(ds):
        table = decision_table(ds, objective)
        one = table.sel(point) if point else table
        record.update(
            p_best=float(one["p_best"]),
            p_best_ci95=(float(one["p_best_ci95_low"]), float(one["p_best_ci95_high"])),
            p_best_clear=float(one["p_best_clear"]),
            expected_regret=float(one["expected_regret"]),
            expected_regret_ci95=(float(one["expected_regret_ci95_low"]), float(one["expected_regret_ci95_high"])),
        )
    return record


def cheapest_within(ds: xr.Dataset, days: float, probability: float = 0.9, cost: str = "cost") -> dict:
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
    if _sign(ds, cost) < 0:
        raise ValueError(f"{cost!r}: higher is better, so it is not a cost to minimise")
    mask = eligible(ds)
    table = None
    if "draw" in _samples(ds):
        table = prob_within(ds, days, probability)
        within = table["p_within"]
    else:
        within = ((ds["wall_time"] <= days * 24.0) & ds["completed"]).mean("run")
    qualifies = (within >= probability) & mask
    mean_cost = _statistic(ds, cost, "mean")
    if bool(qualifies.any()):
        flat = int(np.nanargmin(mean_cost.where(qualifies).values.ravel())) if mean_cost.ndim else 0
        return _within_record(ds, _point_of(ds, flat), cost, within, table, days)
    closest = None
    if bool(mask.any()):
        # highest probability first, then the lower mean cost
        key = np.lexsort((mean_cost.values.ravel(), -within.where(mask).fillna(-1.0).values.ravel()))
        closest = _within_record(ds, _point_of(ds, int(key[0])), cost, within, table, days)
    raise NoneQualifies(_none_text(days, probability, closest), closest, days, probability)


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
        f"{text}; the closest is {_text(closest['configuration'])} with probability {closest['p_within']:.3g} "
        f"(95 % interval {low:.3g} - {high:.3g})"
    )


PREDICTIVE_BASIS = (
    "predictive: pooled over parameter draws and runs (input uncertainty and chance), "
    "its interval with the draws as the independent units"
)


def _require_draws(ds: xr.Dataset) -> None:
    if "draw" not in _samples(ds):
        raise ValueError(
            "the result has no parameter draws (run a scenario with an [uncertain] table and run.draws > 0)"
        )


def configuration_array(ds: xr.Dataset, variable: xr.DataArray) -> np.ndarray:
    """``variable`` (sweep..., draw, run) as a (configurations, draws, runs) array, the sweep in C order."""
    dims = sweep_dims(ds)
    values = variable.transpose(*dims, "draw", "run").values.astype(float)
    return values.reshape(-1, ds.sizes["draw"], ds.sizes["run"])


def _on_sweep(ds: xr.Dataset, arrays: dict[str, np.ndarray], attrs: dict[str, dict]) -> xr.Dataset:
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


def decision_table(ds: xr.Dataset, objective: str = "cost") -> xr.Dataset:
    """P(best) and expected regret of every configuration across parameter draws.

    For draw d, m(c, d) is the mean of ``objective`` over the draw's runs at
    configuration c. P(best) of c is the share of draws in which m(c, d) is the best of
    the eligible configurations (ties share the draw), with its 95 % Wilson interval
    over the D draws; its regret in draw d is the amount by which m(c, d) falls short
    of the best m(., d) (objective units, >= 0, in the objective's direction), and the
    expected regret is the mean over draws with its normal 95 % interval. m carries the
    runs' noise (see :mod:`mcsim.decisions`): ``p_best_clear`` counts only the draws won
    by more than 1.96 standard errors of the paired difference to the runner-up.

    Returns
    -------
    xarray.Dataset
        Over the sweep dims: ``p_best``, ``p_best_ci95_low``, ``p_best_ci95_high``,
        ``p_best_clear`` (units 1), ``expected_regret``, ``expected_regret_ci95_low``,
        ``expected_regret_ci95_high`` (units of ``objective``); NaN where the
        configuration cannot be ranked (:func:`eligible`). Attributes ``objective``, ``draws``.

    Raises
    ------
    ValueError
        No parameter draws, an objective without a direction, or nothing to rank.
    """
    _require_draws(ds)
    sign = _sign(ds, objective)
    mask = eligible(ds)
    _require_eligible(ds, mask)
    signed = sign * configuration_array(ds, ds[objective].where(mask))
    arrays = decision_arrays(signed)
    units = ds[objective].attrs.get("units", "")
    one = {"units": "1"}
    attrs = {
        "p_best": one | {"long_name": f"probability over draws of the best mean {objective}"},
        "p_best_ci95_low": one | {"long_name": "95 % Wilson interval of p_best: lower bound"},
        "p_best_ci95_high": one | {"long_name": "95 % Wilson interval of p_best: upper bound"},
        "p_best_clear": one | {"long_name": "share of draws won by more than 1.96 standard errors of the runs"},
        "expected_regret": {
            "units": units,
            "long_name": f"mean over draws of the {objective} lost against the draw's best",
        },
        "expected_regret_ci95_low": {"units": units, "long_name": "95 % interval of expected_regret: lower"},
        "expected_regret_ci95_high": {"units": units, "long_name": "95 % interval of expected_regret: upper"},
    }
    table = _on_sweep(ds, arrays, attrs)
    table.attrs = {"objective": objective, "draws": int(arrays["draws"])}
    return table


def prob_best(ds: xr.Dataset, objective: str = "cost") -> xr.DataArray:
    """P(best) of every configuration across parameter draws (:func:`decision_table`'s ``p_best``)."""
    return decision_table(ds, objective)["p_best"]


def expected_regret(ds: xr.Dataset, objective: str = "cost") -> xr.DataArray:
    """Expected regret of picking each configuration (:func:`decision_table`'s ``expected_regret``)."""
    return decision_table(ds, objective)["expected_regret"]


def prob_within(ds: xr.Dataset, days: float, probability: float | None = None) -> xr.Dataset:
    """Probability of finishing within ``days``, per configuration, over draws and runs.

    A run finishes in time when it completed and its wall time is at most ``days``;
    runs censored at ``max_wall_days`` count as late. With parameter draws the
    probability is pooled over draws and runs (the predictive probability: input
    uncertainty and chance), its 95 % interval the Wilson interval at the effective
    number of trials of draws as clusters (:func:`mcsim.decisions.within_arrays`);
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
    feasible = _feasible(ds)
    done = (ds["wall_time"] <= days * 24.0) & ds["completed"].astype(bool)
    indicator = done.astype(float)
    if feasible is not None:
        indicator = indicator.where(feasible)
    if "draw" in _samples(ds):
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
    table = _on_sweep(ds, arrays, {k: {"units": "1", "long_name": v} for k, v in text.items() if k in arrays})
    table.attrs = {"days": days}
    return table
