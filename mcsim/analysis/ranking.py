"""Which configuration of a result is best: on one objective, on several (the Pareto front), over draws.

:func:`best` picks the eligible configuration (:func:`mcsim.analysis.configurations.eligible`) with
the best mean or quantile of one objective, in the objective's direction; :func:`pareto_front`
marks those no other beats on every objective. With parameter draws of uncertain inputs,
:func:`decision_table` compares the configurations draw by draw: P(best) and the expected regret
of each (:func:`prob_best`, :func:`expected_regret`; docs/model.md, "Decisions under uncertainty"),
and :func:`best` adds them to its record.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from mcsim.analysis.configurations import (
    config_record,
    configuration_array,
    eligible,
    objective_sign,
    on_sweep,
    point_of,
    require_draws,
    require_eligible,
    sample_dims,
    statistic,
)
from mcsim.analysis.decisions import decision_arrays
from mcsim.analysis.pareto import nondominated
from mcsim.io.variables import sweep_dims


def risk_averse_stat(stat: str | float, sign: float) -> str | float:
    """``stat`` on the side of the risk: a quantile q of an objective where higher is better (``sign`` < 0)
    is taken as its counterpart 1 - q (0.9: the 10th percentile); the mean and the quantiles of an
    objective to minimise as they are."""
    return stat if stat == "mean" or sign > 0 else 1.0 - float(stat)


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
    signs = [objective_sign(ds, name) for name in objectives]
    mask = eligible(ds)
    require_eligible(ds, mask)
    columns = [
        sign * statistic(ds, name, risk_averse_stat(stat, sign)).where(mask).values.ravel()
        for name, sign in zip(objectives, signs, strict=False)
    ]
    front = nondominated(np.stack(columns, axis=1))
    dims = sweep_dims(ds)
    shape = tuple(ds.sizes[d] for d in dims)
    return xr.DataArray(
        front.reshape(shape),
        dims=dims,
        coords={d: ds[d] for d in dims},
        attrs={"long_name": f"Pareto front of {', '.join(objectives)} ({stat})", "units": "1"},
    )


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
    sign = objective_sign(ds, objective)
    mask = eligible(ds)
    require_eligible(ds, mask)
    summary = (sign * statistic(ds, objective, risk_averse_stat(stat, sign))).where(mask)
    if not np.isfinite(summary.values).any():
        raise ValueError(f"{objective}: no finite value at any configuration that can be ranked")
    flat = int(np.nanargmin(summary.values.ravel())) if summary.ndim else 0
    point = point_of(ds, flat)
    record = config_record(ds, point, objective)
    if "draw" in sample_dims(ds):
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


def decision_table(ds: xr.Dataset, objective: str = "cost") -> xr.Dataset:
    """P(best) and expected regret of every configuration across parameter draws.

    For draw d, m(c, d) is the mean of ``objective`` over the draw's runs at
    configuration c. P(best) of c is the share of draws in which m(c, d) is the best of
    the eligible configurations (ties share the draw), with its 95 % Wilson interval
    over the D draws; its regret in draw d is the amount by which m(c, d) falls short
    of the best m(., d) (objective units, >= 0, in the objective's direction), and the
    expected regret is the mean over draws with its normal 95 % interval. m carries the
    runs' noise (see :mod:`mcsim.analysis.decisions`): ``p_best_clear`` counts only the draws won
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
    require_draws(ds)
    sign = objective_sign(ds, objective)
    mask = eligible(ds)
    require_eligible(ds, mask)
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
    table = on_sweep(ds, arrays, attrs)
    table.attrs = {"objective": objective, "draws": int(arrays["draws"])}
    return table


def prob_best(ds: xr.Dataset, objective: str = "cost") -> xr.DataArray:
    """P(best) of every configuration across parameter draws (:func:`decision_table`'s ``p_best``)."""
    return decision_table(ds, objective)["p_best"]


def expected_regret(ds: xr.Dataset, objective: str = "cost") -> xr.DataArray:
    """Expected regret of picking each configuration (:func:`decision_table`'s ``expected_regret``)."""
    return decision_table(ds, objective)["expected_regret"]
