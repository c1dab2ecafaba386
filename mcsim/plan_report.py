"""``mcsim report PLAN.nc`` for a plan file: why this configuration (docs/model.md §9).

The Markdown explains the recommendation: its probability of correct selection,
what the runner-up would cost more (or less), which constraint binds and how much
slack the recommendation has against each, how many candidates the screen ruled out
and why, and the Pareto front of wall time, cost and energy among the finalists.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr


def is_plan_file(path: str | Path) -> bool:
    """Whether ``path`` is a netCDF file written by ``mcsim plan`` (global attribute ``mcsim_kind = plan``)."""
    from .netcdf import is_result_file

    if not is_result_file(path):
        return False
    import netCDF4

    try:
        with netCDF4.Dataset(path, "r") as nc:
            return getattr(nc, "mcsim_kind", "") == "plan"
    except (OSError, RuntimeError):
        return False


def write_plan_report(source: str | Path, folder: str | Path) -> list[Path]:
    """Write ``folder/README.md`` explaining the plan in ``source``; returns the files written."""
    from .atomic import write_atomic
    from .netcdf import open_results

    ds = open_results(source)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [write_atomic(folder / "README.md", explain_plan(ds, Path(source).name))]


def _money(value: float) -> str:
    return f"{value / 1e6:,.3f} MUSD" if abs(value) >= 1e5 else f"{value:,.0f} USD"


def _ranked(ds: xr.Dataset) -> np.ndarray:
    objective = ds["finalist_objective"].values
    eligible = np.array([not str(d) for d in ds["finalist_dropped"].values])
    order = np.argsort(np.where(eligible & np.isfinite(objective), objective, np.inf), kind="stable")
    return order[eligible[order]]


def _means(ds: xr.Dataset, k: int) -> dict[str, float]:
    return {name: float(np.nanmean(ds[name].values[k])) for name in ("wall_time", "energy", "cost", "co2")}


def explain_plan(ds: xr.Dataset, source: str = "plan.nc") -> str:
    """The plan report as Markdown."""
    from .planner import layout_label

    ranked = _ranked(ds)
    best_f = int(np.flatnonzero(ds["finalist_candidate"].values == int(ds["recommended"]))[0])
    best = _means(ds, best_f)
    decided = bool(ds["decided"])
    lines = [f"# Plan {ds.attrs.get('scenario_name', '')}: {source}", "",
             f"**Recommended:** {layout_label(ds, int(ds['recommended']))}", "",
             f"- objective: {ds.attrs['objective']} (minimised); mean over {int(ds['finalist_runs'][best_f])} runs: "
             f"{float(ds['finalist_objective'][best_f]):.6g} ± {float(ds['finalist_half_width'][best_f]):.3g}",
             f"- wall time {best['wall_time'] / 24:.2f} days, energy {best['energy']:,.0f} MWh, "
             f"cost {_money(best['cost'])}, "
             f"CO2 {best['co2']:,.0f} t",
             f"- probability of correct selection {'>= ' if decided else '~ '}{float(ds['pcs']):.3f} within an "
             f"indifference zone of {100 * ds.attrs['indifference']:g} % "
             f"({'decided by the stopping rule' if decided else 'NOT decided: the run budget ran out'}); "
             f"{ds.attrs['selection_reason']}", ""]
    lines += _runner_up(ds, ranked, best_f, best)
    lines += _reference(ds, best_f)
    lines += _constraints(ds, best_f)
    lines += _screen_counts(ds)
    lines += _finalist_table(ds, ranked)
    lines += _uncertain(ds, best_f)
    return "\n".join(lines)


def _uncertain(ds: xr.Dataset, best_f: int) -> list[str]:
    """What changes with each uncertain input at its 5 % and 95 % (the finalists re-screened)."""
    from .planner import layout_label

    keys = [str(k) for k in ds["uncertain_input"].values]
    lines = ["", "## Under the uncertain inputs", ""]
    if not keys:
        return lines + ["The plan has no [uncertain] inputs.", ""]
    base = float(ds["screen_objective"][int(ds["recommended"])])
    for i, key in enumerate(keys):
        for j, q in enumerate(ds["quantile"].values):
            objective = ds["uncertain_objective"].values[i, j]
            best = int(np.nanargmin(objective))
            value = float(ds["uncertain_value"].values[i, j])
            move = 100 * (objective[best_f] / base - 1)
            if best == best_f:
                verdict = "the recommendation stays the best finalist"
            else:
                gain = 100 * (1 - objective[best] / objective[best_f])
                verdict = (f"{layout_label(ds, int(ds['finalist_candidate'][best]))} would be best, "
                           f"{gain:.2f} % better than the recommendation")
            lines.append(f"- {key} at its {100 * q:g} % ({value:.4g}): the recommendation's objective "
                         f"{move:+.1f} %; {verdict}")
    lines.append("")
    lines.append("One input at a time, the others as given; screen estimates of the finalists (docs/model.md §9).")
    return lines + [""]


def _runner_up(ds: xr.Dataset, ranked: np.ndarray, best_f: int, best: dict[str, float]) -> list[str]:
    from .planner import layout_label

    others = [k for k in ranked if k != best_f]
    if not others:
        return ["Only one finalist remained: no runner-up.", ""]
    k = others[0]
    other = _means(ds, k)
    diff = float(ds["finalist_objective"][k]) - float(ds["finalist_objective"][best_f])
    rel = diff / float(ds["finalist_objective"][best_f])
    return ["## Runner-up", "", f"{layout_label(ds, int(ds['finalist_candidate'][k]))}",
            f"- objective {diff:+.4g} ({100 * rel:+.2f} %) against the recommendation; cost "
            f"{_money(other['cost'] - best['cost'])} {'more' if other['cost'] >= best['cost'] else 'less'}, "
            f"wall time {(other['wall_time'] - best['wall_time']) / 24:+.2f} days, energy "
            f"{other['energy'] - best['energy']:+,.0f} MWh", ""]


def reference_rank(ds: xr.Dataset) -> tuple[int, int, float] | None:
    """(rank, of how many, relative gap) of the plan file's own layout by screen objective among the
    candidates that passed memory and the constraints; None without a reference layout."""
    ref = int(ds.attrs.get("reference_candidate", -1))
    if ref < 0:
        return None
    gap = ds["screen_gap"].values
    objective = ds["screen_objective"].values
    ranked = np.isfinite(gap)
    if not ranked[ref]:
        return None
    return int(np.sum(objective[ranked] < objective[ref])) + 1, int(ranked.sum()), float(gap[ref])


def _reference(ds: xr.Dataset, best_f: int) -> list[str]:
    """Where the plan file's own [parallelism] layout ranks, and what the recommendation gains on it."""
    from .planner import layout_label

    ref = int(ds.attrs.get("reference_candidate", -1))
    if ref < 0:
        return []
    lines = ["## The plan file's own layout", "", layout_label(ds, ref)]
    rank = reference_rank(ds)
    if rank is None:
        return lines + ["- ruled out by the screen before the ranking (memory or a constraint)", ""]
    lines.append(f"- screen rank {rank[0]} of {rank[1]} candidates that fit and meet the constraints "
                 f"({100 * rank[2]:+.1f} % against the best screen estimate)")
    k = np.flatnonzero(ds["finalist_candidate"].values == ref)
    if k.size:
        ref_mean, best_mean = float(ds["finalist_objective"][k[0]]), float(ds["finalist_objective"][best_f])
        lines.append(f"- simulated: {ref_mean:.6g} ± {float(ds['finalist_half_width'][k[0]]):.3g}; the recommendation "
                     f"is {100 * (best_mean / ref_mean - 1):+.1f} % on it")
    return lines + [""]


def _constraints(ds: xr.Dataset, best_f: int) -> list[str]:
    from .screen import CONSTRAINT_CODES

    lines = ["## Constraints", ""]
    rejection = ds["rejection"].values
    binding = ds.attrs.get("binding_constraint", "")
    for name, code in CONSTRAINT_CODES.items():
        count = int(np.sum(rejection == code))
        if count:
            lines.append(f"- {name}: ruled out {count:,} candidates that fit in memory")
    best = _means(ds, best_f)
    if np.isfinite(ds.attrs.get("deadline_days", np.nan)):
        p = float(ds["finalist_deadline_probability"][best_f])
        lines.append(f"- deadline {ds.attrs['deadline_days']:g} days: the recommendation meets it in {p:.1%} of its "
                     f"runs (required {ds.attrs['deadline_probability']:.0%})")
    if np.isfinite(ds.attrs.get("budget_usd", np.nan)):
        lines.append(f"- budget {_money(ds.attrs['budget_usd'])}: the recommendation's mean cost leaves "
                     f"{_money(ds.attrs['budget_usd'] - best['cost'])}")
    if np.isfinite(ds.attrs.get("power_mw", np.nan)):
        power = float(ds["screen_power"][int(ds["recommended"])])
        lines.append(f"- power cap {ds.attrs['power_mw']:g} MW: the recommendation draws {power:.2f} MW")
    lines.append(f"- binding constraint: {binding}" if binding else "- no constraint ruled out a candidate "
                 "that fits in memory: the objective alone decides")
    return lines + [""]


def _screen_counts(ds: xr.Dataset) -> list[str]:
    reasons = ds["rejection_reason"].values
    counts = np.bincount(ds["rejection"].values.astype(np.int64), minlength=len(reasons))
    lines = ["## Screen", "", f"{ds.sizes['candidate']:,} valid candidates of {ds.attrs['candidates_enumerated']:,} "
             f"combinations; finalists within {100 * ds.attrs['margin']:g} % of the best screen estimate:", ""]
    lines += [f"- {counts[k]:,}: {reasons[k] or 'finalist'}" for k in range(len(reasons)) if counts[k]]
    return lines + [""]


def _finalist_table(ds: xr.Dataset, ranked: np.ndarray) -> list[str]:
    from .planner import layout_label

    lines = ["## Finalists (Pareto: wall time, cost, energy)", "",
             "| rank | configuration | objective | wall time [d] | cost | energy [MWh] | runs | Pareto |",
             "|---|---|---|---|---|---|---|---|"]
    for rank, k in enumerate(ranked, 1):
        m = _means(ds, k)
        lines.append(f"| {rank} | {layout_label(ds, int(ds['finalist_candidate'][k]))} | "
                     f"{float(ds['finalist_objective'][k]):.5g} | {m['wall_time'] / 24:.2f} | {_money(m['cost'])} | "
                     f"{m['energy']:,.0f} | {int(ds['finalist_runs'][k])} | {'yes' if bool(ds['pareto'][k]) else ''} |")
    return lines
