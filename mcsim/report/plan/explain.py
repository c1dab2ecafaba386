"""``mcsim report PLAN.nc``: the Markdown that explains why this configuration (docs/model.md §9).

:func:`explain_plan` explains the recommendation: its probability of correct selection, what the
runner-up would cost more (or less), which finalists are equivalent to it (within the indifference
zone), which constraint binds and how much slack the recommendation has against each, how many
candidates the screen ruled out and why, the Pareto front of wall time, cost and energy among the
finalists, and what each uncertain input changes. :mod:`mcsim.report.plan.files` writes it into the
report folder.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from mcsim.analysis.decisions import wilson_interval
from mcsim.io.format import format_usd
from mcsim.planning.calibration import first_order_effects, screen_error_text
from mcsim.planning.dataset import layout_label
from mcsim.planning.screen import CONSTRAINT_CODES
from mcsim.report.plan.calibration import calibration_section
from mcsim.report.plan.finalists import (
    equivalent_section,
    finalist_means,
    finalist_table_section,
    ranked_finalists,
    recommended_finalist,
    runner_up_section,
)
from mcsim.report.plan.steptime import memory_lines, step_time_section, stored_scenario
from mcsim.report.plan.table import screen_claim


def explain_plan(ds: xr.Dataset, source: str = "plan.nc") -> str:
    """The plan report as Markdown."""
    ranked = ranked_finalists(ds)
    best_f = recommended_finalist(ds)
    best = finalist_means(ds, best_f)
    decided = bool(ds["decided"])
    selection_decided = bool(ds.attrs.get("selection_decided", decided))
    lines = [
        f"# Plan {ds.attrs.get('scenario_name', '')}: {source}",
        "",
        f"**Recommended:** {layout_label(ds, int(ds['recommended']))}",
        "",
        f"- objective: {ds.attrs['objective']} (minimised); mean over {int(ds['finalist_runs'][best_f])} runs: "
        f"{float(ds['finalist_objective'][best_f]):.6g} ± {float(ds['finalist_half_width'][best_f]):.3g}",
        f"- wall time {best['wall_time'] / 24:.2f} days, energy {best['energy']:,.0f} MWh, "
        f"cost {format_usd(best['cost'])}, "
        f"CO2 {best['co2']:,.0f} t",
        f"- probability of correct selection {'>= ' if selection_decided else '~ '}{float(ds['pcs']):.3f} within "
        f"an indifference zone of {100 * ds.attrs['indifference']:g} % "
        f"({_decided_text(decided, selection_decided)}); "
        f"{ds.attrs['selection_reason']}",
        *([f"- {screen_claim(ds)}"] if screen_claim(ds) else []),
        "",
    ]
    lines += runner_up_section(ds, ranked, best_f)
    lines += equivalent_section(ds)
    lines += step_time_section(ds) + memory_lines(ds)
    lines += _reference(ds, best_f)
    lines += _constraints(ds, best_f)
    lines += _screen_counts(ds)
    lines += calibration_section(ds)
    lines += finalist_table_section(ds, ranked)
    lines += _uncertain(ds, best_f)
    return "\n".join(lines)


def _decided_text(decided: bool, selection_decided: bool) -> str:
    """Whether the selection was decided, and why not when it was not."""
    if decided:
        return "decided by the stopping rule, among the candidates simulated"
    if selection_decided:
        return "NOT decided: candidates never simulated could be better (below)"
    return "NOT decided: the run budget ran out"


def _uncertain(ds: xr.Dataset, best_f: int) -> list[str]:
    """What changes with each uncertain input at its 5 % and 95 % (the finalists re-screened)."""
    keys = [str(k) for k in ds["uncertain_input"].values]
    lines = ["", "## Under the uncertain inputs", ""]
    if not keys:
        return lines + ["The plan has no [uncertain] inputs.", ""]
    base = float(ds["screen_objective"][int(ds["recommended"])])
    for i, key in enumerate(keys):
        for j, q in enumerate(ds["quantile"].values):
            objective = ds["uncertain_objective"].values[i, j]
            value = float(ds["uncertain_value"].values[i, j])
            verdict = _uncertain_verdict(ds, objective, i, j, best_f, base)
            lines.append(f"- {key} at its {100 * q:g} % ({value:.4g}): {verdict}")
    lines.append("")
    lines.append("One input at a time, the others as given; screen estimates of the finalists (docs/model.md §9).")
    return lines + _spread_from_rates(ds, keys, best_f, base) + [""]


def is_failure_rate_key(key: str) -> bool:
    """Whether an uncertain key sets a failure rate: the fleet's factor or a class's MTBF."""
    parts = key.split(".")
    return key == "hardware.failure_rate_factor" or (parts[0] == "failures" and parts[-1] == "mtbf_hours")


def _spread_from_rates(ds: xr.Dataset, keys: list[str], best_f: int, base: float) -> list[str]:
    """The recommendation's objective over the inputs' 5-95 % ranges, combined in quadrature (one at a time:
    first order, inputs independent), and the failure rates' share of it (docs/model.md §9)."""
    objective = ds["uncertain_objective"].values[:, :, best_f]  # inputs x quantiles
    if base == 0 or not np.all(np.isfinite(objective)):
        return []
    low = np.minimum(objective[:, 0], objective[:, 1]) / base - 1.0
    high = np.maximum(objective[:, 0], objective[:, 1]) / base - 1.0
    below, above = np.sqrt(np.sum(np.minimum(low, 0.0) ** 2)), np.sqrt(np.sum(np.maximum(high, 0.0) ** 2))
    squares = (high - low) ** 2
    rates = np.array([is_failure_rate_key(k) for k in keys])
    line = (
        f"Together (in quadrature): the recommendation's objective {-100 * below:+.1f} % to {100 * above:+.1f} % "
        "over the inputs' 5-95 % ranges"
    )
    if rates.any() and squares.sum() > 0:
        share = float(squares[rates].sum() / squares.sum())
        named = ", ".join(k for k, r in zip(keys, rates, strict=True) if r)
        line += f"; the failure rates ({named}) make {100 * share:.0f} % of its variance"
    return [line + "."]


def _uncertain_verdict(ds: xr.Dataset, objective: np.ndarray, i: int, j: int, best_f: int, base: float) -> str:
    """What one uncertain input at one quantile does to the recommendation and the finalists."""
    if np.isnan(objective[best_f]):
        reason = (
            str(ds["rejection_reason"].values[int(ds["uncertain_rejection"].values[i, j, best_f])])
            if "uncertain_rejection" in ds
            else "memory or a constraint"
        )  # files written before it was kept
        head = f"the recommendation is ruled out ({reason})"
    elif base == 0:  # an objective of 0 (co2 on a zero-carbon grid): no relative change to state
        head = f"the recommendation's objective {float(objective[best_f]):.4g} (0 as given)"
    else:
        head = f"the recommendation's objective {100 * (objective[best_f] / base - 1):+.1f} %"
    if np.all(np.isnan(objective)):
        return f"{head}; no finalist remains"
    best = int(np.nanargmin(objective))
    if best == best_f:
        return f"{head}; the recommendation stays the best finalist"
    gain = (
        f", {100 * (1 - objective[best] / objective[best_f]):.2f} % better than the recommendation"
        if np.isfinite(objective[best_f])
        else ""
    )
    return f"{head}; {layout_label(ds, int(ds['finalist_candidate'][best]))} would be best{gain}"


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
    ref = int(ds.attrs.get("reference_candidate", -1))
    if ref < 0:
        return []
    lines = ["## The plan file's own layout", "", layout_label(ds, ref)]
    rank = reference_rank(ds)
    if rank is None:
        return lines + ["- ruled out by the screen before the ranking (memory or a constraint)", ""]
    lines.append(
        f"- screen rank {rank[0]} of {rank[1]} candidates that fit and meet the constraints "
        f"({100 * rank[2]:+.1f} % against the best screen estimate)"
    )
    k = np.flatnonzero(ds["finalist_candidate"].values == ref)
    if k.size:
        ref_mean, best_mean = float(ds["finalist_objective"][k[0]]), float(ds["finalist_objective"][best_f])
        lines.append(
            f"- simulated: {ref_mean:.6g} ± {float(ds['finalist_half_width'][k[0]]):.3g}; the recommendation "
            f"is {100 * (best_mean / ref_mean - 1):+.1f} % on it"
        )
    return lines + [""]


def _deadline_line(ds: xr.Dataset, best_f: int) -> str:
    """The recommendation's share of runs within the deadline, with its 95 % Wilson interval.

    The planner keeps a finalist whose share reaches the required probability; on a few
    runs that share is itself uncertain, so the line says when its interval still
    reaches below the requirement.
    """
    p, runs = float(ds["finalist_deadline_probability"][best_f]), int(ds["finalist_runs"][best_f])
    required = float(ds.attrs["deadline_probability"])
    low, high = wilson_interval(p * runs, runs)
    line = (
        f"- deadline {ds.attrs['deadline_days']:g} days: the recommendation meets it in {p:.1%} of its "
        f"{runs} runs (95 % Wilson interval {low:.1%}–{high:.1%}; required {required:.0%})"
    )
    if low < required:
        line += "; these runs do not establish the requirement at 95 % confidence: simulate more runs to be sure"
    return line


def _constraints(ds: xr.Dataset, best_f: int) -> list[str]:
    """The section "Constraints": what each ruled out, the recommendation's slack, the binding one."""
    lines = ["## Constraints", ""]
    rejection = ds["rejection"].values
    binding = ds.attrs.get("binding_constraint", "")
    for name, code in CONSTRAINT_CODES.items():
        count = int(np.sum(rejection == code))
        if count:
            lines.append(f"- {name}: ruled out {count:,} candidates that fit in memory")
    best = finalist_means(ds, best_f)
    if np.isfinite(ds.attrs.get("deadline_days", np.nan)):
        lines.append(_deadline_line(ds, best_f))
    if np.isfinite(ds.attrs.get("budget_usd", np.nan)):
        lines.append(
            f"- budget {format_usd(ds.attrs['budget_usd'])}: the recommendation's mean cost leaves "
            f"{format_usd(ds.attrs['budget_usd'] - best['cost'])}"
        )
    if np.isfinite(ds.attrs.get("power_mw", np.nan)):
        power = float(ds["screen_power"][int(ds["recommended"])])
        lines.append(f"- power cap {ds.attrs['power_mw']:g} MW: the recommendation draws {power:.2f} MW")
    lines.append(
        f"- binding constraint: {binding}"
        if binding
        else "- no constraint ruled out a candidate that fits in memory: the objective alone decides"
    )
    return lines + [""]


def _screen_counts(ds: xr.Dataset) -> list[str]:
    """The section "Screen": the candidates by the reason they were ruled out, and a screen error over the margin."""
    reasons = ds["rejection_reason"].values
    counts = np.bincount(ds["rejection"].values.astype(np.int64), minlength=len(reasons))
    lines = [
        "## Screen",
        "",
        f"{ds.sizes['candidate']:,} valid candidates of {ds.attrs['candidates_enumerated']:,} "
        f"combinations; finalists: those within {100 * ds.attrs['margin']:g} % of the best screen estimate that meets "
        "the constraints, then those brought in while a candidate left out could be better (docs/model.md §9, Pool):",
        "",
    ]
    lines += [f"- {counts[k]:,}: {reasons[k] or 'finalist'}" for k in range(len(reasons)) if counts[k]]
    expert = int(ds.attrs.get("candidates_expert_layout_rejected", 0))  # a mixture of experts' plan
    if expert:
        lines.append(
            f"- {expert:,} combinations left out of the candidates, valid but for their expert layout (ep dividing "
            "model.experts, expert_tp x ep dividing the tp x cp x dp GPUs of a pipeline stage)"
        )
    keys = ("screen_error", "screen_error_deadline", "screen_error_budget")
    error = max((e for e in (float(ds.attrs.get(key, np.nan)) for key in keys) if np.isfinite(e)), default=np.nan)
    if error > ds.attrs["margin"]:
        effects = first_order_effects(stored_scenario(ds))
        lines += ["", f"**Warning:** {screen_error_text(error, ds.attrs['margin'], effects)}."]
    return lines + [""]
