"""``mcsim report PLAN.nc`` for a plan file: why this configuration (docs/model.md §9).

The Markdown explains the recommendation: its probability of correct selection,
what the runner-up would cost more (or less), which finalists are equivalent to it
(within the indifference zone), which constraint binds and how much
slack the recommendation has against each, how many candidates the screen ruled out
and why, and the Pareto front of wall time, cost and energy among the finalists.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mcsim.io.format import format_compact, format_usd
from mcsim.planning.planner import PLAN_VARIABLES, layout_label, missed_text, screen_error_text
from mcsim.planning.screen import KEPT
from mcsim.report.plan.calibration import calibration_section, check_calibration, pilot_bound, pilot_claim
from mcsim.report.plan.finalists import (
    equivalent_finalists,
    indifference_zone,
    paired_difference,
    ranked_finalists,
    recommended_finalist,
)
from mcsim.report.plan.steptime import memory_lines, step_time_section


def is_plan_file(path: str | Path) -> bool:
    """Whether ``path`` is a netCDF file written by ``mcsim plan`` (global attribute ``mcsim_kind = plan``)."""
    from mcsim.io.netcdf import is_result_file

    if not is_result_file(path):
        return False
    import netCDF4

    try:
        with netCDF4.Dataset(path, "r") as nc:
            return getattr(nc, "mcsim_kind", "") == "plan"
    except (OSError, RuntimeError):
        return False


RECOMMENDED_FILE = "recommended.toml"


def write_plan_report(source: str | Path, folder: str | Path) -> list[Path]:
    """Write ``folder/README.md`` explaining the plan in ``source`` and ``folder/recommended.toml``, the
    recommendation as a scenario ``mcsim run`` runs (:func:`recommended_toml`); returns the files written.

    Raises
    ------
    ValueError
        One line, before anything is written, when ``source`` is not a complete plan file or its
        recommendation is not a valid scenario.
    """
    from mcsim.io.atomic import write_atomic
    from mcsim.io.netcdf import open_results

    ds = open_results(source)
    check_plan_dataset(ds)
    name = Path(source).name
    scenario = recommended_toml(ds, name)
    text = explain_plan(ds, name) + _rerun_text(tomllib.loads(scenario).get("run", {}).get("draws", 0))
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [write_atomic(folder / "README.md", text), write_atomic(folder / RECOMMENDED_FILE, scenario)]


def _rerun_text(draws: int) -> str:
    """How the recommendation's scenario file runs, and whether its runs repeat the plan's."""
    head = (
        f"\n\nThe recommendation as a scenario: [`{RECOMMENDED_FILE}`]({RECOMMENDED_FILE}), the plan's scenario "
        f"with the recommended configuration; from this folder, `mcsim run {RECOMMENDED_FILE}` simulates it"
    )
    if not draws:
        return head + (
            " (run r draws from the same streams as run r of the plan's simulation, so its first runs repeat "
            "the recommendation's).\n"
        )
    return head + (
        f" with its [uncertain] inputs drawn {draws} times ({draws} x run.runs runs), so its spread includes "
        "them (the plan simulated the inputs' given values); without the [uncertain] table run r draws from "
        "the same streams as run r of the plan's simulation, so its first runs repeat the recommendation's.\n"
    )


def _interval_value(label: str) -> str | dict[str, float | int]:
    """The TOML value of a checkpoint interval from its label (``young_daly``, ``60min``, ``500it``;
    :attr:`mcsim.scenario.schema.Interval.label` writes the number so that it reads back exactly)."""
    if label.endswith("min"):
        return {"minutes": float(label[:-3])}
    if label.endswith("it"):
        return {"iterations": int(float(label[:-2]))}
    return label


def recommended_scenario(ds: xr.Dataset) -> dict:
    """The raw tables of a scenario file for the plan's recommendation: the plan's scenario
    (``scenario_toml``) with the recommended GPU type, size, layout, recomputation, checkpoint
    strategy and interval and clock, as :func:`mcsim.planning.screen.candidate_config` makes it.

    Raises
    ------
    ValueError
        When ``recommended`` is not a candidate index of the file.
    """
    import tomllib

    index = int(ds["recommended"]) if np.isfinite(float(ds["recommended"])) else -1
    if not 0 <= index < ds.sizes["candidate"]:
        raise ValueError(
            f"recommended = {ds['recommended'].item()} is not a candidate index (0..{ds.sizes['candidate'] - 1})"
        )
    raw = tomllib.loads(str(ds.attrs["scenario_toml"]))
    c = ds.isel(candidate=index)
    raw["name"] = f"{raw.get('name', ds.attrs.get('scenario_name', 'plan'))}-recommended"
    raw["description"] = f"The recommendation of mcsim plan ({ds.attrs['objective']}): {layout_label(ds, index)}"
    updates: dict[str, dict[str, Any]] = {
        "hardware": {"gpu": str(c["gpu_type"].item())},
        "parallelism": {name: int(c[name]) for name in ("gpus", "tp", "pp", "microbatch", "interleave")},
        "model": {"recompute": str(c["recompute"].item())},
        "compute": {"freq_mhz": float(c["freq_mhz"])},
        "checkpoint": {"strategy": str(c["strategy"].item()), "interval": _interval_value(str(c["interval"].item()))},
    }
    if "sequence_parallel" in c.variables:  # plan files before issue 24 have neither
        updates["parallelism"]["sequence_parallel"] = bool(int(c["sequence_parallel"]))
        updates["parallelism"]["zero_stage"] = int(c["zero_stage"])
    if "cp" in c.variables:
        updates["parallelism"]["cp"] = int(c["cp"])
    for table, values in updates.items():
        raw[table] = {**raw.get(table, {}), **values}
    return raw


def recommended_toml(ds: xr.Dataset, source: str = "plan.nc") -> str:
    """:func:`recommended_scenario` as the text of a scenario file, checked by the scenario validator.

    Raises
    ------
    ValueError
        When the recommendation is not a valid scenario (one line: the key and what was expected).
    """
    from mcsim.errors import ScenarioError
    from mcsim.scenario.config import scenario_from_dict
    from mcsim.scenario.toml import dumps_toml

    raw = recommended_scenario(ds)
    try:
        scenario_from_dict(raw, RECOMMENDED_FILE)
    except ScenarioError as err:
        raise ValueError(f"the recommendation is not a valid scenario: {err}") from None
    safe = "".join(ch if ch.isprintable() else "?" for ch in source)
    header = (
        f"# The recommendation of `mcsim plan`, written by `mcsim report` from {safe}:\n"
        f"# {layout_label(ds, int(ds['recommended']))}; P(correct selection) {float(ds['pcs']):.3f}.\n"
        "# The plan's scenario with the recommended configuration. Run it: mcsim run recommended.toml\n"
    )
    return header + dumps_toml(raw)


# Kept by every plan file (those added later, "objective" and "uncertain_rejection", have fallbacks).
_REQUIRED_ATTRS = ("objective", "indifference", "margin", "selection_reason", "candidates_enumerated")
_LATER = ("objective", "uncertain_rejection")


def check_plan_dataset(ds: xr.Dataset) -> None:
    """Raise ValueError (one line) when ``ds`` lacks a variable or attribute the plan report reads."""

    names = [
        n
        for n in (
            *PLAN_VARIABLES,
            "rejection_reason",
            "gpu_type",
            "gpus",
            "tp",
            "pp",
            "dp",
            "microbatch",
            "interleave",
            "recompute",
            "strategy",
            "interval",
            "freq_mhz",
        )
        if n not in _LATER
    ]
    missing = [n for n in names if n not in ds.variables]
    if missing:
        raise ValueError(f"not a complete plan file: no variable {', '.join(missing)}")
    missing = [n for n in _REQUIRED_ATTRS if n not in ds.attrs]
    if missing:
        raise ValueError(f"not a complete plan file: no attribute {', '.join(missing)}")
    _check_indices(ds)
    check_calibration(ds)


def _check_indices(ds: xr.Dataset) -> None:
    """Raise ValueError (one line) unless ``recommended`` and ``finalist_candidate`` are candidate indices.

    Both must be whole numbers in [0, candidates); the recommendation must be one of the finalists.
    """
    n = ds.sizes.get("candidate", 0)
    for name in ("recommended", "finalist_candidate"):
        values = np.asarray(ds[name].values)
        if values.dtype.kind not in "iu" or (values.size and not ((values >= 0) & (values < n)).all()):
            shown = values.ravel()[:5].tolist()
            raise ValueError(
                f"{name}: expected whole-number candidate indices in [0, {n}), got {shown}"
                f" ({values.dtype.name}); the file is damaged or was edited"
            )
    if ds["recommended"].size != 1 or int(ds["recommended"]) not in set(ds["finalist_candidate"].values.tolist()):
        raise ValueError(
            f"recommended: expected the candidate index of one of the finalists, got "
            f"{ds['recommended'].values.ravel()[:5].tolist()}; the file is damaged or was edited"
        )


def _equivalent(ds: xr.Dataset) -> list[str]:
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


def _means(ds: xr.Dataset, k: int) -> dict[str, float]:
    return {name: float(np.nanmean(ds[name].values[k])) for name in ("wall_time", "energy", "cost", "co2")}


def explain_plan(ds: xr.Dataset, source: str = "plan.nc") -> str:
    """The plan report as Markdown."""

    ranked = ranked_finalists(ds)
    best_f = recommended_finalist(ds)
    best = _means(ds, best_f)
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
    lines += _runner_up(ds, ranked, best_f)
    lines += _equivalent(ds)
    lines += step_time_section(ds) + memory_lines(ds)
    lines += _reference(ds, best_f)
    lines += _constraints(ds, best_f)
    lines += _screen_counts(ds)
    lines += calibration_section(ds)
    lines += _finalist_table(ds, ranked)
    lines += _uncertain(ds, best_f)
    return "\n".join(lines)


def _decided_text(decided: bool, selection_decided: bool) -> str:
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


def _runner_up(ds: xr.Dataset, ranked: np.ndarray, best_f: int) -> list[str]:

    others = [k for k in ranked if k != best_f]
    if not others:
        return ["Only one finalist remained: no runner-up.", ""]
    k = others[0]
    diff, base, runs = paired_difference(ds, k)
    cost, wall, energy = (paired_difference(ds, k, name)[0] for name in ("cost", "wall_time", "energy"))
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
    from mcsim.analysis.decisions import wilson_interval

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
    from mcsim.planning.screen import CONSTRAINT_CODES

    lines = ["## Constraints", ""]
    rejection = ds["rejection"].values
    binding = ds.attrs.get("binding_constraint", "")
    for name, code in CONSTRAINT_CODES.items():
        count = int(np.sum(rejection == code))
        if count:
            lines.append(f"- {name}: ruled out {count:,} candidates that fit in memory")
    best = _means(ds, best_f)
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
    keys = ("screen_error", "screen_error_deadline", "screen_error_budget")
    error = max((e for e in (float(ds.attrs.get(key, np.nan)) for key in keys) if np.isfinite(e)), default=np.nan)
    if error > ds.attrs["margin"]:
        lines += ["", f"**Warning:** {screen_error_text(error, ds.attrs['margin'])}."]
    return lines + [""]


def _finalist_table(ds: xr.Dataset, ranked: np.ndarray) -> list[str]:

    lines = [
        "## Finalists (Pareto: wall time, cost, energy)",
        "",
        "| rank | configuration | objective | wall time [d] | cost | energy [MWh] | runs | Pareto |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rank, k in enumerate(ranked, 1):
        m = _means(ds, k)
        lines.append(
            f"| {rank} | {layout_label(ds, int(ds['finalist_candidate'][k]))} | "
            f"{float(ds['finalist_objective'][k]):.5g} | {m['wall_time'] / 24:.2f} | {format_usd(m['cost'])} | "
            f"{m['energy']:,.0f} | {int(ds['finalist_runs'][k])} | {'yes' if bool(ds['pareto'][k]) else ''} |"
        )
    return lines


def screen_claim(ds: xr.Dataset) -> str:
    """One line: the screen's part of the claim (what was never simulated, the closest, the error the margin
    covered; docs/model.md §9, "Pool"); "" for files written before the pool."""
    if "pool_closed" not in ds.attrs:
        return ""
    a = ds.attrs
    errors = ", ".join(
        f"{name} {100 * float(a[key]):.2g} %"
        for name, key in (
            ("objective", "screen_error"),
            ("deadline", "screen_error_deadline"),
            ("budget", "screen_error_budget"),
        )
        if np.isfinite(float(a.get(key, np.nan)))
    )
    gap = float(a["closest_never_simulated_gap"])
    closest = (
        f" (the closest screen estimate {100 * gap:+.2g} % against the recommendation's simulated mean)"
        if np.isfinite(gap)
        else ""
    )
    pilot = pilot_bound(ds)
    if np.isfinite(pilot):
        errors += f"{', ' if errors else ''}the pilot's error bound {100 * pilot:.2g} %"
    margin, used = float(a["margin"]), float(a["screen_margin_used"])
    covered = (
        f"the {100 * margin:g} % margin covered the measured screen error ({errors or 'none measured'})"
        if used <= margin
        else f"the measured screen error ({errors}) exceeded the {100 * margin:g} % margin: the plan widened it to "
        f"{100 * used:.3g} % and simulated the candidates that could then be better"
    )
    line = (
        f"screen's part: {int(a['candidates_simulated'])} candidates simulated, "
        f"{int(a['candidates_never_simulated']):,} never simulated{closest}; {covered}{pilot_claim(ds)}"
    )
    if not int(a["pool_closed"]):
        line += (
            f"; NOT decided: the pool of {int(a['pool_size'])} simulated candidates was full while "
            f"{int(a['candidates_left_out'])} never simulated could be better by their screen estimates "
            f"(rejection code 12; the closest: {_closest_left_out(ds)}): raise plan.pool"
        )
    return line


def _closest_left_out(ds: xr.Dataset, shown: int = 3) -> str:
    """The ``shown`` candidates of code 12 of least screen objective, each with its gap to the recommendation's
    simulated mean."""
    left = np.flatnonzero(ds["rejection"].values == 12)
    objective = ds["screen_objective"].values
    best = float(ds["finalist_objective"][recommended_finalist(ds)])
    closest = left[np.argsort(objective[left], kind="stable")][:shown]
    return "; ".join(
        f"{layout_label(ds, int(i))} ({100 * (objective[i] / best - 1):+.2g} %)" if best else layout_label(ds, int(i))
        for i in closest
    )


def plan_table(ds: xr.Dataset, rows: int = 8) -> str:
    """The recommendation, then the other finalists by their paired objective against it, as text."""
    ranked = ranked_finalists(ds)
    rest = [
        k
        for k in np.argsort(
            np.where(np.isnan(ds["finalist_objective"].values), np.inf, ds["finalist_objective"].values), kind="stable"
        )
        if k not in ranked
    ]
    order = [*ranked, *rest][:rows]  # the dropped ones (missed a constraint when simulated) last
    reference = int(ds.attrs.get("reference_candidate", -1))
    own_row = np.flatnonzero(ds["finalist_candidate"].values == reference)
    if own_row.size and int(own_row[0]) not in order:  # the plan file's own layout is always shown
        order.append(int(own_row[0]))
    own = (
        ""
        if reference < 0 or reference not in ds["finalist_candidate"].values
        else ", and the plan file's own layout (marked +)"
    )
    lines = [
        f"{int((ds['rejection'] == KEPT).sum())} finalists of {ds.sizes['candidate']:,} candidates "
        f"({ds.attrs['candidates_enumerated']:,} combinations searched){own}; objective {ds.attrs['objective']}, "
        f"mean ± 95 % half-width over the runs simulated:"
    ]
    for k in order:
        index = int(ds["finalist_candidate"][k])
        mark = (" *" if bool(ds["pareto"][k]) else "") + (" +" if index == reference else "")
        dropped = str(ds["finalist_dropped"].values[k])
        note = f" ({missed_text(dropped)})" if dropped else ""
        lines.append(
            f"  {format_compact(float(ds['finalist_objective'][k]), 4, 4)}"
            f" ± {format_compact(float(ds['finalist_half_width'][k]), 4, 4)}"
            f"  screen {format_compact(float(ds['screen_objective'][index]), 4, 4)}  runs {int(ds['finalist_runs'][k])}"
            f"  {layout_label(ds, index)}{mark}{note}"
        )
    lines.append(
        "  * on the Pareto front of wall time, cost and energy among the finalists"
        + ("; + the plan file's own layout" if own else "")
    )
    selection_decided = bool(ds.attrs.get("selection_decided", bool(ds["decided"])))
    decided = (
        "decided" if bool(ds["decided"]) else "NOT decided" + ("" if selection_decided else " within the run budget")
    )
    simulated = f" among the {int(ds.attrs['candidates_simulated'])} simulated" if "pool_closed" in ds.attrs else ""
    lines.append(
        f"recommended: {layout_label(ds, int(ds['recommended']))}; P(correct selection) "
        f"{'>= ' if selection_decided else '~ '}{float(ds['pcs']):.3f} ({decided}){simulated}; "
        f"{ds.attrs['selection_reason']}"
    )
    near = equivalent_finalists(ds)
    if near:
        lines.append(
            f"equivalent within the indifference zone ({indifference_zone(ds):.4g}): "
            + "; ".join(
                f"{layout_label(ds, int(ds['finalist_candidate'][k]))} ({diff:+.4g})" for k, diff, _ in near[:3]
            )
            + (f"; and {len(near) - 3} more (mcsim report)" if len(near) > 3 else "")
        )
    claim = screen_claim(ds)
    return "\n".join([*lines, claim] if claim else lines)
