"""``mcsim plan``: screen every candidate, then select the best finalist by simulation (docs/model.md §9).

:func:`run_plan` enumerates the plan's search (:mod:`mcsim.plan`), screens
every candidate analytically (:mod:`mcsim.screen`), simulates the finalists in
Kim–Nelson's ranking-and-selection procedure (:func:`mcsim.selection.select_best`,
common random numbers, the same tasks, backends and resume store as ``mcsim
run``), checks the simulated deadline probability and budget of the
recommendation (dropping a finalist that misses them and selecting again), and
returns the dataset :func:`plan_dataset` builds: every candidate with its
screen estimates and rejection reason, the finalists' per-run results, the
Pareto front of wall time, cost and energy among the finalists, and the
recommendation with its probability of correct selection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from mcsim.analysis.pareto import nondominated
from mcsim.errors import NoCandidate  # noqa: F401  (raised here; public from this module too)
from mcsim.io.variables import Variable
from mcsim.model.workload import FREQUENCY, MEMORY, RECOMPUTE_CODES
from mcsim.planning.calibration import family_dataset_variables, run_pilot
from mcsim.planning.plan import Candidates, Plan, enumerate_candidates, gpu_specs, load_plan
from mcsim.planning.pool import (  # noqa: F401  (per_run_outputs, simulated_constraint, missed_text: public here too)
    PER_RUN_KEPT,
    PoolOutcome,
    missed_text,
    objective_values,
    per_run_outputs,
    simulate_pool,
    simulated_constraint,
)
from mcsim.planning.screen import (
    CONSTRAINT_CODES,
    KEPT,
    REJECTIONS,
    WORKLOAD_REJECTION,
    Screen,
    screen,
)
from mcsim.planning.uncertain import QUANTILES, uncertain_objectives

if TYPE_CHECKING:  # only for annotations (select_best is imported when a plan runs)
    from pathlib import Path

    from mcsim.engine.resume import PieceStore
    from mcsim.planning.selection import SelectionResult


@dataclass(frozen=True)
class PlanResult:
    """Everything :func:`plan_dataset` writes."""

    plan: Plan
    candidates: Candidates
    screen: Screen
    finalists: np.ndarray  # candidate indices, in finalist order
    outputs: list[dict[str, np.ndarray] | None]  # per finalist: per-run outputs of its simulated runs (None: none)
    selection: SelectionResult  # the last SelectionResult (over `selected` finalists)
    selected: np.ndarray  # finalist positions the last selection ran over
    dropped: dict[int, str]  # finalist position -> constraint it missed when simulated
    recommended: int  # finalist position
    screen_error: float = np.nan  # largest |simulated mean / screen estimate - 1| of the objective
    pool: PoolOutcome | None = None  # the screen's part of the claim (docs/model.md §9, "Pool")


def run_plan(
    plan: Plan,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    store=None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
    select=None,
) -> PlanResult:
    """Screen, then select by simulation (``select``: :func:`mcsim.selection.select_best` by default).

    Raises
    ------
    NoCandidate
        With one line saying which constraint (or memory) rules every candidate out and
        how close the closest candidate comes.
    """
    if select is None:
        from mcsim.planning.selection import select_best as select
    cand = enumerate_candidates(plan)
    scr = screen(plan, cand)
    if plan.has_reference and scr.reference < 0 and notify:
        notify(
            f"{plan.source}: parallelism: the plan file's own layout is not among the searched candidates "
            "(its GPU type, size, layout, recomputation, strategy, interval or clock is outside [search], or "
            "the layout is not valid for the model): it is not compared with the recommendation"
        )
    if scr.finalists.size == 0:
        raise NoCandidate(no_candidate_message(plan, cand, scr))
    backend = {"workers": workers, "scheduler": scheduler, "progress": progress}
    calibration = run_pilot(plan, cand, scr, notify, **backend)
    pool = simulate_pool(plan, cand, scr, select, store, notify, calibration, **backend)
    error = pool.errors["objective"]
    if notify and pool.margin > plan.margin:
        measured = np.array([*pool.errors.values(), *calibration.bound()], dtype=np.float64)
        largest = float(np.max(measured[~np.isnan(measured)], initial=0.0))
        notify(f"warning: {screen_error_text(largest, plan.margin)}")
    return PlanResult(
        plan,
        cand,
        scr,
        pool.finalists,
        pool.outputs,
        pool.selection,
        pool.selected,
        pool.dropped,
        pool.recommended,
        error,
        pool,
    )


def plan(
    plan_file: str | Path | Plan,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    store: PieceStore | None = None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """Search the cluster configurations of a plan file: screen all, select the best by simulation.

    The Python form of ``mcsim plan`` (docs/planning.md, docs/model.md §9).

    Parameters
    ----------
    plan_file : str, Path or Plan
        A plan file (a scenario plus ``[search]``, ``[constraints]``, ``[plan]``), or one
        read already (:func:`mcsim.planning.plan.load_plan`).
    workers, scheduler : optional
        Run the simulations on a local dask cluster of ``workers`` processes, or on the
        dask scheduler at ``scheduler`` (default: threads of this process).
    store : PieceStore, optional
        Resume store (finished simulation tasks kept and reused).
    progress : bool, optional
        A progress bar over the simulated runs; by default when standard error is a
        terminal or in a Jupyter kernel.
    notify : callable, optional
        Called with one-line messages (stages, backend).

    Returns
    -------
    xarray.Dataset
        The plan result (:func:`plan_dataset`): the recommendation, finalists, screen;
        write it with :func:`mcsim.write_results`, explain it with :func:`mcsim.report`.

    Raises
    ------
    ScenarioError
        An invalid plan file (file, key and what was expected).
    NoCandidate
        No candidate meets the constraints (the message says which binds, and how close
        the closest candidate comes).
    """
    loaded = plan_file if isinstance(plan_file, Plan) else load_plan(plan_file)
    return plan_dataset(
        run_plan(loaded, workers=workers, scheduler=scheduler, store=store, progress=progress, notify=notify)
    )


def screen_error_text(error: float, margin: float) -> str:
    """One line: the screen's error is beyond the margin, and what the plan did about it."""
    return (
        f"the screen's estimates are off by up to {100 * error:.1f} % against the simulated candidates "
        f"(the pilot's: |error| + ~2 standard errors), beyond the {100 * margin:g} % margin (effects it models "
        f"only to first order: a young cluster's failures, spare-node waits; docs/planning.md): the plan widened each "
        f"family's margin to its measured error and brought in the candidates that could then be better; raise "
        f"plan.margin to screen with it from the start"
    )


def finalist_front(per_run: dict[str, np.ndarray], n_runs: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Which finalists are on the Pareto front of mean wall time, cost and energy (bool per finalist).

    ``per_run[name]`` is (finalist, run), NaN past each finalist's ``n_runs``; only ``eligible``
    finalists (not dropped for a constraint) take part. Each mean is over the runs every
    eligible finalist simulated (runs 0 .. n - 1, n the fewest; the same random streams in
    each: common random numbers), not over each one's own runs, whose count depends on the
    stage it left the selection at.
    """
    front = np.zeros(n_runs.size, dtype=bool)
    simulated = eligible & (n_runs > 0)
    if not simulated.any():
        return front
    common = int(np.min(n_runs[simulated]))
    means = np.column_stack(
        [np.mean(per_run[name][simulated, :common], axis=1) for name in ("wall_time", "cost", "energy")]
    )
    front[np.flatnonzero(simulated)[nondominated(means)]] = True
    return front


def no_candidate_message(plan: Plan, cand: Candidates, scr: Screen) -> str:
    """One line: why no candidate passed the screen, and how close the closest came."""
    fits = np.isin(scr.rejection, [KEPT, *CONSTRAINT_CODES.values()])
    if not fits.any():
        return _structural_message(plan, scr)
    c = plan.constraints
    codes = scr.rejection[fits]
    name = max(CONSTRAINT_CODES, key=lambda k: int(np.sum(codes == CONSTRAINT_CODES[k])))
    if name == "max_wall_days":
        closest = float(np.min(scr.wall_s[fits])) / 86400.0
        horizon = plan.scenario.base.run.max_wall_days
        return (
            f"{plan.source}: run.max_wall_days: no candidate finishes within {horizon:g} days, the simulation's "
            f"horizon (the fastest screen estimate is {closest:.3g} days); raise run.max_wall_days"
        )
    if name == "deadline":
        closest = float(np.min(scr.wall_quantile_s[fits])) / 86400.0
        return (
            f"{plan.source}: constraints.deadline_days: no candidate can finish within {c.deadline_days:g} days "
            f"with probability {c.deadline_probability:g} (the smallest screen estimate of that quantile of the "
            f"wall time is {closest:.3g} days, beyond the deadline by more than the {plan.margin:.0%} margin)"
        )
    if name == "budget":
        assert c.budget_usd is not None  # the screen rejects for the budget only when there is one
        closest = float(np.min(scr.cost_usd[fits]))
        budget = f"{c.budget_usd:,.0f}" if c.budget_usd >= 1 else f"{c.budget_usd:.3g}"
        return (
            f"{plan.source}: constraints.budget_usd: no candidate fits the budget of {budget} USD "
            f"(the cheapest screen estimate is {closest:,.0f} USD)"
        )
    if name == "power":
        closest = float(np.min(scr.power_mw[fits]))
        return (
            f"{plan.source}: constraints.power_mw: no candidate fits the {c.power_mw:g} MW power cap "
            f"(the smallest draws {closest:.2f} MW)"
        )
    return (
        f"{plan.source}: constraints: no searched GPU count is within min_gpus..max_gpus = {c.min_gpus}..{c.max_gpus}"
    )


def _structural_message(plan: Plan, scr: Screen) -> str:
    """One line when no candidate passes the structural checks: the most common reason, named."""
    codes, counts = np.unique(scr.rejection, return_counts=True)
    code = int(codes[np.argmax(counts)])
    if code == WORKLOAD_REJECTION[MEMORY]:
        return (
            f"{plan.source}: search: no candidate fits in GPU memory (smallest need "
            f"{np.nanmin(scr.memory_per_gpu_gb):.1f} GB per GPU); search more GPUs, recompute or larger GPUs"
        )
    if code == WORKLOAD_REJECTION[FREQUENCY]:
        ranges = ", ".join(
            f"{name} {spec.freq_min_mhz:g}..{spec.freq_max_mhz:g} MHz"
            for name, spec in zip(plan.search.gpu_types, gpu_specs(plan), strict=True)
        )
        return f"{plan.source}: search.freq_mhz: no searched clock is within the GPU's range ({ranges})"
    return (
        f"{plan.source}: search: no candidate passes the screen; {int(counts.max()):,} of "
        f"{int(counts.sum()):,} are rejected for: {REJECTIONS[code]}"
    )


# Variables of a plan dataset (one registry, as mcsim/variables.py does for mcsim run's outputs).
_PLAN_VARIABLES = [
    Variable("screen_iteration_time", False, "s", "ideal iteration time (screen; equals mcsim run's iteration_time)"),
    Variable("screen_memory_per_gpu", False, "Gbyte", "memory per GPU (screen; equals mcsim run's memory_per_gpu)"),
    Variable("screen_power", False, "MW", "facility power with every GPU computing (screen)"),
    Variable("screen_checkpoint_every", False, "1", "checkpoint interval in iterations (screen)", "int64"),
    Variable("screen_system_mtbf", False, "h", "mean time between failures of the whole job"),
    Variable("screen_wall_time", False, "h", "expected wall time, Daly's first-order model (screen)"),
    Variable("screen_energy", False, "MW h", "expected facility energy (screen)"),
    Variable("screen_cost", False, "USD", "expected cost (screen)"),
    Variable("screen_co2", False, "t", "expected emissions, tonnes CO2e (screen)"),
    Variable("screen_objective", False, "1", "objective estimate in the units of its per-run outputs (screen)"),
    Variable("screen_gap", False, "1", "screen objective / best screen objective - 1 (NaN if ruled out before)"),
    Variable(
        "rejection", False, "1", "why the screen ruled the candidate out (0: finalist); see rejection_reason", "int8"
    ),
    Variable("finalist_candidate", False, "1", "index of the finalist in the candidate dimension", "int64"),
    Variable("finalist_runs", False, "1", "runs simulated", "int64"),
    Variable("finalist_eliminated_round", False, "1", "selection stage that eliminated it (-1: never)", "int64"),
    Variable("finalist_objective", False, "1", "mean simulated objective (units of its per-run outputs)"),
    Variable("finalist_half_width", False, "1", "half-width of the 95 % interval of finalist_objective"),
    Variable("finalist_deadline_probability", False, "1", "share of simulated runs within the deadline"),
    Variable("finalist_dropped", False, "1", "constraint missed when simulated (empty: none)", "str"),
    Variable(
        "pareto",
        False,
        "1",
        "on the Pareto front of mean wall time, cost and energy among finalists (over the runs all of them simulated)",
        "bool",
    ),
    Variable("wall_time", True, "h", "job start to the last durable iteration (simulated; NaN: run not simulated)"),
    Variable("energy", True, "MW h", "facility energy (simulated)"),
    Variable("cost", True, "USD", "allocation plus electricity (simulated)"),
    Variable("co2", True, "t", "operational plus embodied emissions, tonnes CO2e (simulated)"),
    Variable("objective", True, "1", "the plan's objective per run, in the units of its outputs (simulated)"),
    Variable("uncertain_value", False, "1", "value of the uncertain input at the quantile (in the key's unit)"),
    Variable(
        "uncertain_objective",
        False,
        "1",
        "finalist's screen objective with the uncertain input at the quantile, the others as given "
        "(NaN: ruled out then, see uncertain_rejection)",
    ),
    Variable(
        "uncertain_rejection",
        False,
        "1",
        "why the re-screen at the quantile rules the finalist out (0: it does not; codes as rejection)",
        "int8",
    ),
    Variable("recommended", False, "1", "candidate index of the recommendation", "int64"),
    Variable("pcs", False, "1", "probability of correct selection (a guaranteed bound when decided)"),
    Variable(
        "decided",
        False,
        "1",
        "whether the selection stopped by its rule and no candidate left out could be better by its screen estimate "
        "and the measured error (else its run budget or the pool ran out)",
        "bool",
    ),
]
PLAN_VARIABLES = {v.name: v for v in _PLAN_VARIABLES}


def _categorical(codes: np.ndarray, names) -> np.ndarray:
    """The names of ``codes`` as fixed-width text (stored without a per-element conversion)."""
    return np.array([str(n) for n in names], dtype=str)[codes]


def plan_dataset(res: PlanResult) -> xr.Dataset:
    """The plan's dataset (see the module docstring); ``attrs['mcsim_kind'] = 'plan'``."""
    plan, cand, scr = res.plan, res.candidates, res.screen
    recompute_names = {code: name for name, code in RECOMPUTE_CODES.items()}
    coords = {
        "candidate": np.arange(len(cand)),
        "gpu_type": ("candidate", _categorical(cand.gpu_type, plan.search.gpu_types)),
        "gpus": ("candidate", cand.gpus),
        "tp": ("candidate", cand.tp),
        "pp": ("candidate", cand.pp),
        "cp": ("candidate", cand.cp),
        "dp": ("candidate", cand.dp),
        "microbatch": ("candidate", cand.microbatch),
        "interleave": ("candidate", cand.interleave),
        "recompute": ("candidate", _categorical(cand.recompute, [recompute_names[k] for k in range(3)])),
        "sequence_parallel": ("candidate", cand.sequence_parallel.astype(np.int8)),
        "zero_stage": ("candidate", cand.zero_stage),
        "strategy": ("candidate", _categorical(cand.strategy, plan.search.strategy)),
        "interval": ("candidate", _categorical(cand.interval, [i.label for i in plan.search.interval])),
        "freq_mhz": ("candidate", cand.freq_mhz),
        "finalist": np.arange(res.finalists.size),
        "reason": np.arange(len(REJECTIONS)),
    }
    runs = max(len(o["wall_time"]) for o in res.outputs if o is not None)
    coords["run"] = np.arange(runs)
    per_run = {name: np.full((res.finalists.size, runs), np.nan) for name in (*PER_RUN_KEPT, "objective")}
    n_runs = np.zeros(res.finalists.size, dtype=np.int64)
    eliminated = np.full(res.finalists.size, -1, dtype=np.int64)
    objective = np.full(res.finalists.size, np.nan)
    half = np.full(res.finalists.size, np.nan)
    for j, k in enumerate(res.selected):
        eliminated[k] = res.selection.eliminated_round[j]
        objective[k], half[k] = res.selection.means[j], res.selection.half_widths[j]
    deadline = np.full(res.finalists.size, np.nan)
    for k, out in enumerate(res.outputs):
        if out is None:
            continue
        n_runs[k] = len(out["wall_time"])
        for name in PER_RUN_KEPT:
            per_run[name][k, : n_runs[k]] = out[name]
        per_run["objective"][k, : n_runs[k]] = objective_values(plan, out)
        if plan.constraints.deadline_days is not None:
            deadline[k] = np.mean(out["completed"] & (out["wall_time"] <= plan.constraints.deadline_days * 24.0))
        if k not in res.selected:  # dropped earlier: its mean from its own runs
            objective[k] = float(np.mean(objective_values(plan, out)))
    keys, values, uncertain, uncertain_rejection = uncertain_objectives(plan, cand, res.finalists)
    coords["uncertain_input"] = np.array(keys, dtype=object)
    coords["quantile"] = np.array(QUANTILES)
    eligible = np.array([k not in res.dropped for k in range(res.finalists.size)])
    pareto = finalist_front(per_run, n_runs, eligible)
    data = {
        "screen_iteration_time": scr.iteration_time_s,
        "screen_memory_per_gpu": scr.memory_per_gpu_gb,
        "screen_power": scr.power_mw,
        "screen_checkpoint_every": scr.checkpoint_every,
        "screen_system_mtbf": scr.system_mtbf_s / 3600.0,
        "screen_wall_time": scr.wall_s / 3600.0,
        "screen_energy": scr.energy_j / 3.6e9,
        "screen_cost": scr.cost_usd,
        "screen_co2": scr.co2_t,
        "screen_objective": scr.objective,
        "screen_gap": scr.gap,
        "rejection": scr.rejection,
        "finalist_candidate": res.finalists,
        "finalist_runs": n_runs,
        "finalist_eliminated_round": eliminated,
        "finalist_objective": objective,
        "finalist_half_width": half,
        "finalist_deadline_probability": deadline,
        "finalist_dropped": np.array([res.dropped.get(k, "") for k in range(res.finalists.size)], dtype=object),
        "pareto": pareto,
        **per_run,
        "uncertain_value": values,
        "uncertain_objective": uncertain,
        "uncertain_rejection": uncertain_rejection,
        "recommended": np.int64(res.finalists[res.recommended]),
        "pcs": float(res.selection.pcs),
        "decided": bool(res.selection.decided) and (res.pool is None or res.pool.closed),
    }
    variables = {}
    for name, var in PLAN_VARIABLES.items():
        dims = _dims(name, var)
        array = np.asarray(data[name])
        array = array.astype(object) if var.dtype == "str" else array.astype(var.dtype)
        variables[name] = xr.Variable(dims, array, {"units": var.units, "long_name": var.long_name})
    variables["rejection"].attrs.update(
        flag_values=np.arange(len(REJECTIONS), dtype=np.int8), flag_meanings=" ".join(_flag_word(k) for k in REJECTIONS)
    )
    variables["rejection_reason"] = xr.Variable(
        ("reason",),
        np.array(list(REJECTIONS.values()), dtype=object),
        {"long_name": "text of each rejection code", "units": "1"},
    )
    if res.pool is not None:
        variables.update(family_dataset_variables(plan, res.pool.family_margin, res.pool.calibration))
    ds = xr.Dataset(variables, coords=coords, attrs=_attrs(res))
    for name, text in (
        ("candidate", "candidate index"),
        ("finalist", "finalist index"),
        ("reason", "rejection code"),
        ("run", "run index (names the random stream)"),
        ("quantile", "quantile of its distribution"),
    ):
        ds[name].attrs.update(long_name=text, units="1")
    ds["uncertain_input"].attrs.update(long_name="uncertain scenario key ([uncertain] table)")
    for name, text, units in (
        ("gpu_type", "GPU type (catalog name)", None),
        ("gpus", "GPUs in the job", "1"),
        ("tp", "tensor-parallel degree", "1"),
        ("pp", "pipeline-parallel degree", "1"),
        ("cp", "context-parallel degree", "1"),
        ("dp", "data-parallel degree", "1"),
        ("microbatch", "microbatch size, sequences", "1"),
        ("interleave", "virtual pipeline stages per GPU", "1"),
        ("recompute", "activation recomputation policy", None),
        ("sequence_parallel", "sequence parallelism (1) or not (0)", "1"),
        ("zero_stage", "ZeRO stage (0: none, 1: optimizer states, 2: + gradients, 3: + weights)", "1"),
        ("strategy", "checkpoint strategy", None),
        ("interval", "checkpoint interval rule", None),
        ("freq_mhz", "GPU core frequency", "MHz"),
    ):
        ds[name].attrs.update(long_name=text, **({"units": units} if units else {}))
    return ds


def _dims(name: str, var: Variable) -> tuple[str, ...]:
    if var.per_run:
        return ("finalist", "run")
    if name.startswith("finalist_") or name == "pareto":
        return ("finalist",)
    if name == "uncertain_value":
        return ("uncertain_input", "quantile")
    if name in ("uncertain_objective", "uncertain_rejection"):
        return ("uncertain_input", "quantile", "finalist")
    if name in ("recommended", "pcs", "decided"):
        return ()
    return ("candidate",)


def _flag_word(code: int) -> str:
    words = {
        0: "finalist",
        1: "layout",
        2: "frequency",
        3: "iterations",
        4: "time_resolution",
        5: "memory",
        6: "strategy_or_domain",
        7: "gpu_count",
        8: "power_cap",
        9: "deadline",
        10: "budget",
        11: "dominated",
        12: "beyond_finalist_cap",
        13: "equivalent",
        14: "beyond_max_wall_days",
    }
    return words[code]


def _pool_attrs(res: PlanResult) -> dict[str, object]:
    """The screen's part of the claim (docs/model.md §9, "Pool"): what was never simulated and why that holds."""
    pool = res.pool
    if pool is None:
        return {}
    return {
        "screen_error_deadline": float(pool.errors.get("deadline", np.nan)),
        "screen_error_budget": float(pool.errors.get("budget", np.nan)),
        "screen_margin_used": float(pool.margin),
        "selection_decided": int(bool(res.selection.decided)),
        "pool_closed": int(pool.closed),
        "pool_size": int(res.plan.pool_size),
        "candidates_simulated": int(pool.finalists.size),
        "candidates_never_simulated": int(pool.never_simulated),
        "candidates_left_out": int(pool.left_out.size),
        "closest_never_simulated_gap": float(pool.closest_gap),
        "pilot_runs": int(pool.calibration.runs),
        "pilot_families": int(np.sum(pool.calibration.pilot >= 0)),
        "pilot_total_runs": int(pool.calibration.runs * np.sum(pool.calibration.pilot >= 0)),
    }


def _attrs(res: PlanResult) -> dict[str, object]:
    from mcsim._version import __version__
    from mcsim.planning.screen import binding_constraint

    plan = res.plan
    c = plan.constraints
    created = datetime.now(UTC).isoformat(timespec="seconds")
    return {
        "title": f"mcsim plan: {plan.scenario.name}",  # title, history: CF-1.10 §2.6.2, as mcsim run's files
        "history": (
            f"{created}: mcsim {__version__} planned {plan.scenario.name!r} from {plan.source}, "
            f"seed {plan.scenario.run.seed}, {plan.scenario.run.mode} mode"
        ),
        "created": created,
        "mcsim_kind": "plan",
        "mcsim_version": __version__,
        "scenario_name": plan.scenario.name,
        "plan_source": plan.source,
        "scenario_toml": plan.scenario.to_toml(),
        "objective": plan.objective_label,
        "indifference": plan.indifference,
        "alpha": plan.alpha,
        "margin": plan.margin,
        "screen_error": float(res.screen_error),
        "indifference_zone": float(res.selection.delta),  # objective units (NaN: the selection never set it)
        **_pool_attrs(res),
        "seed": plan.scenario.run.seed,
        "mode": plan.scenario.run.mode,
        "candidates_enumerated": res.candidates.enumerated,
        "selection_reason": str(res.selection.reason),
        "total_runs": int(sum(len(o["wall_time"]) for o in res.outputs if o is not None)),
        "binding_constraint": binding_constraint(res.screen.rejection),
        "reference_candidate": int(res.screen.reference),
        "deadline_days": c.deadline_days if c.deadline_days is not None else np.nan,
        "deadline_probability": c.deadline_probability,
        "budget_usd": c.budget_usd if c.budget_usd is not None else np.nan,
        "power_mw": c.power_mw if c.power_mw is not None else np.nan,
        "Conventions": "CF-1.10",
    }


def _software_label(c: xr.Dataset) -> str:
    """``, no SP, ZeRO 3`` where a plan file records a candidate's software choices (older files do not)."""
    parts = []
    if "sequence_parallel" in c.variables and not int(c["sequence_parallel"]):
        parts.append("no SP")
    if "zero_stage" in c.variables:
        parts.append(f"ZeRO {int(c['zero_stage'])}")
    if "cp" in c.variables and int(c["cp"]) > 1:
        parts.append(f"cp {int(c['cp'])}")
    return "".join(f", {part}" for part in parts)


def layout_label(ds: xr.Dataset, index: int) -> str:
    """``H100-SXM x 4096, tp 8 pp 4 dp 128, mb 1, v 5, selective, async, young_daly`` of candidate ``index``."""
    c = ds.isel(candidate=int(index))
    return (
        f"{c['gpu_type'].item()} x {int(c['gpus'])}, tp {int(c['tp'])} pp {int(c['pp'])} dp {int(c['dp'])}, "
        f"mb {int(c['microbatch'])}, v {int(c['interleave'])}, {c['recompute'].item()}{_software_label(c)}, "
        f"{c['strategy'].item()}, "
        f"{c['interval'].item()}, {float(c['freq_mhz']):g} MHz"
    )
