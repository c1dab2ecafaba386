"""The plan's dataset: every candidate with its screen estimates and rejection reason, the finalists'
per-run results, the Pareto front among them, and the recommendation (docs/model.md §9).

:func:`plan_dataset` writes what :func:`mcsim.planning.run.run_plan` found (:class:`PlanResult`):
the variables of :data:`PLAN_VARIABLES` (``candidate``, ``finalist``, ``run``, ``reason``,
``uncertain_input`` and ``quantile`` dimensions), the calibration pilot's per family
(:data:`FAMILY_VARIABLES`), and the plan's attributes; ``attrs['mcsim_kind'] = 'plan'``.
:func:`layout_label` names a candidate of such a dataset in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import xarray as xr

from mcsim._version import __version__
from mcsim.analysis.pareto import nondominated
from mcsim.io.variables import Variable
from mcsim.model.layouts import RECOMPUTE_CODES
from mcsim.planning.calibration import ERROR_KINDS, Calibration
from mcsim.planning.candidates import Candidates
from mcsim.planning.plan_file import Plan, weighted_objective
from mcsim.planning.pool import PER_RUN_KEPT, PoolOutcome
from mcsim.planning.screen import (
    QUANTILES,
    REJECTION_WORDS,
    REJECTIONS,
    Screen,
    binding_constraint,
    uncertain_objectives,
)


@dataclass(frozen=True)
class PlanResult:
    """Everything :func:`plan_dataset` writes: the plan, its candidates, their screen and the pool simulated."""

    plan: Plan
    candidates: Candidates
    screen: Screen
    pool: PoolOutcome  # the finalists simulated, the last selection, the recommendation, the screen's measured error


# Variables of a plan dataset (one registry, as mcsim/io/variables.py holds mcsim run's outputs).
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


# Variables of a plan dataset about the pilot (registered once, as PLAN_VARIABLES): name ->
# (dims, units, long_name).
FAMILY_VARIABLES = {
    "candidate_family": (("candidate",), "1", "family of the candidate (GPU type, strategy, recompute, size band)"),
    "family_gpu_type": (("family",), "", "GPU type of the family (catalog name)"),
    "family_strategy": (("family",), "", "checkpoint strategy of the family"),
    "family_recompute": (("family",), "", "activation recomputation policy of the family"),
    "family_gpus_low": (("family",), "1", "smallest searched GPU count of the family's size band"),
    "family_gpus_high": (("family",), "1", "largest searched GPU count of the family's size band"),
    "family_pilot_candidate": (("family",), "1", "candidate simulated in the calibration pilot (-1: none)"),
    "family_pilot_error": (
        ("family", "error_kind"),
        "1",
        "pilot's simulated / screen estimate - 1 (objective mean, deadline quantile, mean cost; NaN: not measured)",
    ),
    "family_pilot_error_se": (("family", "error_kind"), "1", "standard error of family_pilot_error"),
    "family_margin": (("family",), "1", "screening margin the pool closed with for the family's candidates"),
}


def _family_variables(plan: Plan, pool_margin: np.ndarray, cal: Calibration) -> dict[str, Any]:
    """The pilot's variables and coordinates of the plan dataset (``family``, ``error_kind`` dims)."""
    fam = cal.families
    recompute_names = {code: name for name, code in RECOMPUTE_CODES.items()}
    values = {
        "candidate_family": fam.of_candidate,
        "family_gpu_type": np.array([plan.search.gpu_types[int(k)] for k in fam.gpu_type], dtype=object),
        "family_strategy": np.array([plan.search.strategy[int(k)] for k in fam.strategy], dtype=object),
        "family_recompute": np.array([recompute_names[int(k)] for k in fam.recompute], dtype=object),
        "family_gpus_low": fam.gpus_low,
        "family_gpus_high": fam.gpus_high,
        "family_pilot_candidate": cal.pilot,
        "family_pilot_error": cal.error,
        "family_pilot_error_se": cal.error_se,
        "family_margin": pool_margin,
    }
    out: dict[str, Any] = {}
    for name, (dims, units, long_name) in FAMILY_VARIABLES.items():
        attrs = {"long_name": long_name, **({"units": units} if units else {})}
        out[name] = xr.Variable(dims, values[name], attrs)
    out["family"] = xr.Variable(("family",), np.arange(len(fam)), {"long_name": "family index", "units": "1"})
    out["error_kind"] = xr.Variable(
        ("error_kind",), np.array(ERROR_KINDS, dtype=object), {"long_name": "estimate whose error is measured"}
    )
    return out


def _categorical(codes: np.ndarray, names) -> np.ndarray:
    """The names of ``codes`` as fixed-width text (stored without a per-element conversion)."""
    return np.array([str(n) for n in names], dtype=str)[codes]


def plan_dataset(res: PlanResult) -> xr.Dataset:
    """The plan's dataset (see the module docstring); ``attrs['mcsim_kind'] = 'plan'``."""
    plan, cand, pool = res.plan, res.candidates, res.pool
    finalists = _finalist_data(plan, pool)
    keys, values, uncertain, uncertain_rejection = uncertain_objectives(plan, cand, pool.finalists)
    coords = {
        **_candidate_coordinates(plan, cand),
        "finalist": np.arange(pool.finalists.size),
        "reason": np.arange(len(REJECTIONS)),
        "run": np.arange(finalists["wall_time"].shape[1]),
        "uncertain_input": np.array(keys, dtype=object),
        "quantile": np.array(QUANTILES),
    }
    data = {
        **_screen_data(res.screen),
        **finalists,
        "uncertain_value": values,
        "uncertain_objective": uncertain,
        "uncertain_rejection": uncertain_rejection,
        "recommended": np.int64(pool.finalists[pool.recommended]),
        "pcs": float(pool.selection.pcs),
        "decided": bool(pool.selection.decided) and pool.closed,
    }
    variables = _variables(data)
    variables.update(_family_variables(plan, pool.family_margin, pool.calibration))
    ds = xr.Dataset(variables, coords=coords, attrs=_attrs(res))
    _describe_coordinates(ds)
    return ds


# The expert layout's coordinates: written for a mixture of experts only (a dense plan's file as before them).
EXPERT_COORDINATES = ("ep", "expert_tp")
# The coordinates along ``candidate`` but its index: (name, long name, units; None: no units attribute).
_CANDIDATE_COORDINATES = (
    ("gpu_type", "GPU type (catalog name)", None),
    ("gpus", "GPUs in the job", "1"),
    ("tp", "tensor-parallel degree", "1"),
    ("pp", "pipeline-parallel degree", "1"),
    ("cp", "context-parallel degree", "1"),
    ("ep", "expert-parallel degree (mixture of experts only)", "1"),
    ("expert_tp", "expert tensor-parallel degree (mixture of experts only)", "1"),
    ("dp", "data-parallel degree", "1"),
    ("microbatch", "microbatch size, sequences", "1"),
    ("interleave", "virtual pipeline stages per GPU", "1"),
    ("recompute", "activation recomputation policy", None),
    ("sequence_parallel", "sequence parallelism (1) or not (0)", "1"),
    ("zero_stage", "ZeRO stage (0: none, 1: optimizer states, 2: + gradients, 3: + weights)", "1"),
    ("strategy", "checkpoint strategy", None),
    ("interval", "checkpoint interval rule", None),
    ("freq_mhz", "GPU core frequency", "MHz"),
)


def _candidate_coordinates(plan: Plan, cand: Candidates) -> dict[str, Any]:
    """The coordinates along ``candidate``: its index and every searched choice, by name where it has one."""
    recompute_names = {code: name for name, code in RECOMPUTE_CODES.items()}
    named = {
        "gpu_type": _categorical(cand.gpu_type, plan.search.gpu_types),
        "recompute": _categorical(cand.recompute, [recompute_names[k] for k in range(3)]),
        "sequence_parallel": cand.sequence_parallel.astype(np.int8),
        "strategy": _categorical(cand.strategy, plan.search.strategy),
        "interval": _categorical(cand.interval, [i.label for i in plan.search.interval]),
    }
    choices = {
        name: ("candidate", named.get(name, getattr(cand, name)))
        for name, _, _ in _CANDIDATE_COORDINATES
        if name not in EXPERT_COORDINATES or plan.scenario.base.model.experts
    }
    return {"candidate": np.arange(len(cand)), **choices}


def _screen_data(scr: Screen) -> dict[str, np.ndarray]:
    """The screen's variables, in the units of :data:`PLAN_VARIABLES`."""
    return {
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
    }


def _finalist_data(plan: Plan, pool: PoolOutcome) -> dict[str, np.ndarray]:
    """The finalists' variables and their per-run outputs (NaN past each one's runs)."""
    size, selection = pool.finalists.size, pool.selection
    runs = max(len(o["wall_time"]) for o in pool.outputs if o is not None)
    per_run = {name: np.full((size, runs), np.nan) for name in (*PER_RUN_KEPT, "objective")}
    n_runs = np.zeros(size, dtype=np.int64)
    eliminated = np.full(size, -1, dtype=np.int64)
    objective, half, deadline = np.full(size, np.nan), np.full(size, np.nan), np.full(size, np.nan)
    for j, k in enumerate(pool.selected):
        eliminated[k] = selection.eliminated_round[j]
        objective[k], half[k] = selection.means[j], selection.half_widths[j]
    for k, out in enumerate(pool.outputs):
        if out is None:
            continue
        n_runs[k] = len(out["wall_time"])
        for name in PER_RUN_KEPT:
            per_run[name][k, : n_runs[k]] = out[name]
        per_run["objective"][k, : n_runs[k]] = weighted_objective(out, plan.objective_weights)
        if plan.constraints.deadline_days is not None:
            deadline[k] = np.mean(out["completed"] & (out["wall_time"] <= plan.constraints.deadline_days * 24.0))
        if k not in pool.selected:  # dropped earlier: its mean from its own runs
            objective[k] = float(np.mean(weighted_objective(out, plan.objective_weights)))
    eligible = np.array([k not in pool.dropped for k in range(size)])
    return {
        "finalist_candidate": pool.finalists,
        "finalist_runs": n_runs,
        "finalist_eliminated_round": eliminated,
        "finalist_objective": objective,
        "finalist_half_width": half,
        "finalist_deadline_probability": deadline,
        "finalist_dropped": np.array([pool.dropped.get(k, "") for k in range(size)], dtype=object),
        "pareto": finalist_front(per_run, n_runs, eligible),
        **per_run,
    }


def _variables(data: dict[str, Any]) -> dict[str, xr.Variable]:
    """The variables of :data:`PLAN_VARIABLES` from their ``data``, and the text of every rejection code."""
    variables = {}
    for name, var in PLAN_VARIABLES.items():
        array = np.asarray(data[name])
        array = array.astype(object) if var.dtype == "str" else array.astype(var.dtype)
        variables[name] = xr.Variable(_dims(name, var), array, {"units": var.units, "long_name": var.long_name})
    variables["rejection"].attrs.update(
        flag_values=np.arange(len(REJECTIONS), dtype=np.int8),
        flag_meanings=" ".join(REJECTION_WORDS[k] for k in REJECTIONS),
    )
    variables["rejection_reason"] = xr.Variable(
        ("reason",),
        np.array(list(REJECTIONS.values()), dtype=object),
        {"long_name": "text of each rejection code", "units": "1"},
    )
    return variables


def _describe_coordinates(ds: xr.Dataset) -> None:
    """The long names and units of the dataset's coordinates."""
    for name, text in (
        ("candidate", "candidate index"),
        ("finalist", "finalist index"),
        ("reason", "rejection code"),
        ("run", "run index (names the random stream)"),
        ("quantile", "quantile of its distribution"),
    ):
        ds[name].attrs.update(long_name=text, units="1")
    ds["uncertain_input"].attrs.update(long_name="uncertain scenario key ([uncertain] table)")
    for name, text, units in _CANDIDATE_COORDINATES:
        if name in ds.coords:  # the expert layout's only for a mixture of experts
            ds[name].attrs.update(long_name=text, **({"units": units} if units else {}))


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


def _pool_attrs(plan: Plan, pool: PoolOutcome) -> dict[str, object]:
    """The screen's part of the claim (docs/model.md §9, "Pool"): what was never simulated and why that holds."""
    return {
        "screen_error_deadline": float(pool.errors.get("deadline", np.nan)),
        "screen_error_budget": float(pool.errors.get("budget", np.nan)),
        "screen_margin_used": float(pool.margin),
        "selection_decided": int(bool(pool.selection.decided)),
        "pool_closed": int(pool.closed),
        "pool_size": int(plan.pool_size),
        "candidates_simulated": int(pool.finalists.size),
        "candidates_never_simulated": int(pool.never_simulated),
        "candidates_left_out": int(pool.left_out.size),
        "closest_never_simulated_gap": float(pool.closest_gap),
        "pilot_runs": int(pool.calibration.runs),
        "pilot_families": int(np.sum(pool.calibration.pilot >= 0)),
        "pilot_total_runs": int(pool.calibration.runs * np.sum(pool.calibration.pilot >= 0)),
    }


def _attrs(res: PlanResult) -> dict[str, object]:
    """The plan's attributes: provenance (CF-1.10), the plan's settings, the screen's part of the claim and
    the selection's outcome."""
    plan, pool = res.plan, res.pool
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
        "screen_error": float(pool.errors["objective"]),
        "indifference_zone": float(pool.selection.delta),  # objective units (NaN: the selection never set it)
        **_pool_attrs(plan, pool),
        "seed": plan.scenario.run.seed,
        "mode": plan.scenario.run.mode,
        "candidates_enumerated": res.candidates.enumerated,
        **_expert_attrs(res),
        "selection_reason": str(pool.selection.reason),
        "total_runs": int(sum(len(o["wall_time"]) for o in pool.outputs if o is not None)),
        "binding_constraint": binding_constraint(res.screen.rejection),
        "reference_candidate": int(res.screen.reference),
        "deadline_days": c.deadline_days if c.deadline_days is not None else np.nan,
        "deadline_probability": c.deadline_probability,
        "budget_usd": c.budget_usd if c.budget_usd is not None else np.nan,
        "power_mw": c.power_mw if c.power_mw is not None else np.nan,
        "Conventions": "CF-1.10",
    }


def _expert_attrs(res: PlanResult) -> dict[str, int]:
    """A mixture of experts' count of the combinations valid but for their expert layout (none for a dense
    plan, whose file stays as before the expert layout was searched)."""
    if not res.plan.scenario.base.model.experts:
        return {}
    return {"candidates_expert_layout_rejected": res.candidates.expert_layout_rejected}


def _software_label(c: xr.Dataset) -> str:
    """``, no SP, ZeRO 3`` where a plan file records a candidate's software choices (older files do not)."""
    parts = []
    if "sequence_parallel" in c.variables and not int(c["sequence_parallel"]):
        parts.append("no SP")
    if "zero_stage" in c.variables:
        parts.append(f"ZeRO {int(c['zero_stage'])}")
    if "cp" in c.variables and int(c["cp"]) > 1:
        parts.append(f"cp {int(c['cp'])}")
    if "ep" in c.variables:  # a mixture of experts: its expert layout, always
        parts.append(f"ep {int(c['ep'])}")
        if int(c["expert_tp"]) > 1:
            parts.append(f"expert tp {int(c['expert_tp'])}")
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
