"""The simulated finalists of a plan compared with its recommendation, run by run (docs/model.md §9).

Run r of every finalist shares its random streams (common random numbers), so two finalists
are compared over the runs both simulated: :func:`difference_from_recommendation`. Finalists
leave the selection at different stages, so their own means are over different runs and are not
compared. The report's sections on the finalists are here too: the runner-up, the finalists
equivalent to the recommendation, and the table of the finalists.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from mcsim.io.format import format_usd
from mcsim.io.units import format_readable, readable_unit
from mcsim.io.variables import VARIABLES
from mcsim.planning.dataset import layout_label


def objective_unit(ds: xr.Dataset) -> tuple[float, str]:
    """The unit the plan's objective reads best in over its finalists' means, and the factor from its
    stored unit (the objective's per-run unit: USD, MW h, h, t; a weighted objective has none: ``(1, "")``)."""
    name = str(ds.attrs.get("objective", ""))
    stored = VARIABLES[name].units if name in VARIABLES else "1"
    factor, shown = readable_unit(np.asarray(ds["finalist_objective"].values, dtype=float), stored)
    return factor, "" if shown == "1" else shown


def recommended_finalist(ds: xr.Dataset) -> int:
    """Index along ``finalist`` of the recommendation."""
    return int(np.flatnonzero(ds["finalist_candidate"].values == int(ds["recommended"]))[0])


def difference_from_recommendation(ds: xr.Dataset, k: int, name: str = "objective") -> tuple[float, float, int]:
    """Mean of finalist ``k``'s per-run ``name`` minus the recommendation's over the runs both simulated
    (run r of every finalist shares its random streams, so the pair differs by the configuration alone),
    the recommendation's mean over those runs, and how many runs that is.

    Finalists are eliminated at different stages: their own means are over different runs, and comparing
    those would mix run-to-run noise into the difference (a runner-up could look better than the pick).
    """
    if name == "objective" and name not in ds:  # a plan file written before the per-run objective was kept
        name = str(ds.attrs["objective"])
        if name not in ds:  # a weighted objective: only each finalist's mean over its own runs is there
            means = ds["finalist_objective"].values
            return float(means[k] - means[recommended_finalist(ds)]), float(means[recommended_finalist(ds)]), 0
    other, best = ds[name].values[k], ds[name].values[recommended_finalist(ds)]
    both = np.isfinite(other) & np.isfinite(best)
    if not both.any():
        return np.nan, np.nan, 0
    return float(np.mean(other[both] - best[both])), float(np.mean(best[both])), int(both.sum())


def difference_half_width(ds: xr.Dataset, k: int) -> float:
    """Half-width of the normal 95 % interval of :func:`difference_from_recommendation` (objective units; NaN
    without per-run objectives or with fewer than two shared runs)."""
    name = "objective" if "objective" in ds else str(ds.attrs["objective"])
    if name not in ds:
        return np.nan
    other, best = ds[name].values[k], ds[name].values[recommended_finalist(ds)]
    both = np.isfinite(other) & np.isfinite(best)
    if both.sum() < 2:
        return np.nan
    return float(1.959964 * np.std(other[both] - best[both], ddof=1) / np.sqrt(both.sum()))


def indifference_zone(ds: xr.Dataset) -> float:
    """The selection's indifference zone δ in objective units: as the selection set it, or (a file
    written before it was kept, or a selection that never set it) indifference × |the recommendation's mean|."""
    delta = float(ds.attrs.get("indifference_zone", np.nan))
    if np.isfinite(delta) and delta > 0:
        return delta
    return float(ds.attrs["indifference"]) * abs(float(ds["finalist_objective"][recommended_finalist(ds)]))


def equivalent_finalists(ds: xr.Dataset) -> list[tuple[int, float, float]]:
    """The other simulated finalists that met the constraints and whose paired objective difference to
    the recommendation is within the indifference zone (:func:`indifference_zone`): ``(finalist,
    difference, half-width)``, closest first. The selection cannot tell these from the recommendation
    and does not try to: any of them is as good a choice within δ, so the report lists them beside it."""
    delta = indifference_zone(ds)
    near = []
    for k in ranked_finalists(ds)[1:]:
        diff = difference_from_recommendation(ds, int(k))[0]
        if np.isfinite(diff) and diff <= delta:
            near.append((int(k), diff, difference_half_width(ds, int(k))))
    return near


def ranked_finalists(ds: xr.Dataset) -> np.ndarray:
    """The recommendation, then the other finalists that met the constraints, by their paired objective
    difference to it (:func:`difference_from_recommendation`)."""
    best_f = recommended_finalist(ds)
    eligible = [k for k, d in enumerate(ds["finalist_dropped"].values) if not str(d) and k != best_f]
    gaps = [difference_from_recommendation(ds, k)[0] for k in eligible]
    order: np.ndarray | list[int] = (
        np.argsort(np.where(np.isfinite(gaps), gaps, np.inf), kind="stable") if eligible else []
    )
    return np.array([best_f, *(eligible[i] for i in order)], dtype=np.int64)


def finalist_means(ds: xr.Dataset, k: int) -> dict[str, float]:
    """Finalist ``k``'s mean wall time [h], energy [MWh], cost [USD] and CO2 [t] over its own runs."""
    return {name: float(np.nanmean(ds[name].values[k])) for name in ("wall_time", "energy", "cost", "co2")}


def runner_up_section(ds: xr.Dataset, ranked: np.ndarray, best_f: int) -> list[str]:
    """The section "Runner-up": the best other finalist against the recommendation, over the runs both simulated."""
    others = [k for k in ranked if k != best_f]
    if not others:
        return ["Only one finalist remained: no runner-up.", ""]
    k = others[0]
    diff, base, runs = difference_from_recommendation(ds, k)
    cost, wall, energy = (difference_from_recommendation(ds, k, name)[0] for name in ("cost", "wall_time", "energy"))
    return [
        "## Runner-up",
        "",
        f"{layout_label(ds, int(ds['finalist_candidate'][k]))}",
        f"- objective {diff:+.4g}{f' ({100 * diff / base:+.2f} %)' if base else ''} against the recommendation "
        + (
            f"over the {runs} runs both simulated (paired: the same random streams)"
            if runs
            else "(means over each one's own runs: this file has no per-run objective)"
        )
        + f"; cost {format_usd(abs(cost))} "
        f"{'more' if cost >= 0 else 'less'}, wall time {wall / 24:+.2f} days, energy {energy:+,.0f} MWh",
        "",
    ]


def equivalent_section(ds: xr.Dataset) -> list[str]:
    """The section "Equivalent to the recommendation": the finalists within the indifference zone."""
    near = equivalent_finalists(ds)
    delta = indifference_zone(ds)
    lines = ["## Equivalent to the recommendation", ""]
    if not near:
        return lines + [f"No other simulated candidate is within the indifference zone ({delta:.4g}).", ""]
    lines.append(
        f"Within the indifference zone ({delta:.4g}, objective units) of the recommendation: as good a choice "
        "to the precision the selection was asked for. Paired objective difference to the recommendation "
        "(the same random streams), with the half-width of its 95 % interval:"
    )
    lines.append("")
    base = abs(float(ds["finalist_objective"][recommended_finalist(ds)]))
    for k, diff, half in near:
        label = layout_label(ds, int(ds["finalist_candidate"][k]))
        share = f" ({100 * diff / base:+.2f} %)" if base else ""
        lines.append(f"- {label}: {diff:+.4g} ± {half:.3g}{share}")
    return lines + [""]


def finalist_table_section(ds: xr.Dataset, ranked: np.ndarray) -> list[str]:
    """The section "Finalists": each one's objective (in the unit it reads best in), wall time, cost, energy, runs
    and Pareto membership."""
    unit = objective_unit(ds)
    lines = [
        "## Finalists (Pareto: wall time, cost, energy)",
        "",
        f"| rank | configuration | objective{f' [{unit[1]}]' if unit[1] else ''} | wall time [d] | cost | energy [MWh] "
        "| runs | Pareto |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rank, k in enumerate(ranked, 1):
        m = finalist_means(ds, k)
        lines.append(
            f"| {rank} | {layout_label(ds, int(ds['finalist_candidate'][k]))} | "
            f"{format_readable(float(ds['finalist_objective'][k]) * unit[0], 5)} | {m['wall_time'] / 24:.2f} | "
            f"{format_usd(m['cost'])} | "
            f"{m['energy']:,.0f} | {int(ds['finalist_runs'][k])} | {'yes' if bool(ds['pareto'][k]) else ''} |"
        )
    return lines
