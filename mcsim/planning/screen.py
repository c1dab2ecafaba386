"""The planner's screen: every candidate ruled out with its reason, or ranked, and the finalists chosen.

:func:`screen` takes every candidate's estimates (the model's first-order estimates of its run,
:mod:`mcsim.model.expected_runs`, and the plan's objective of them) and rules candidates out in
order, each keeping the first reason found (:data:`REJECTIONS`): what the workload model cannot
run, a checkpoint strategy or failure domain that does not fit the size, the constraints known
exactly (GPU count, power cap), then those it estimates (the simulation's horizon, the deadline,
the budget) beyond the margin. The rest are ranked by their objective estimate; the finalists are
those within ``margin`` of the best, at most ``plan.finalists`` of them, and the ranking is the
pool the plan simulates from (:mod:`mcsim.planning.pool`; docs/model.md §9). Where none is left,
:func:`no_candidate_message` says in one line which constraint (or memory) rules every candidate
out and how close the closest comes.

:func:`uncertain_objectives` screens the finalists again under the plan's uncertain inputs: for every
``[uncertain]`` input of the plan's scenario (docs/model.md, "Uncertain inputs"), the finalists'
screen objective with that input at the 5th and at the 95th percentile of its (truncated)
distribution, the others at their scenario values: one-at-a-time, deterministic, and cheap (the
screen is exact on the deterministic parts and within 0.2 % of simulated means on the shipped plans,
docs/planning.md). The report says which finalist would be best at each end, and how much the
recommendation's objective moves (docs/model.md §9).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from mcsim.model.energy import J_PER_MWH
from mcsim.model.expected_runs import ExpectedRuns, expected_runs
from mcsim.model.feasibility import FREQUENCY, MEMORY, STRUCTURAL, TIME_RESOLUTION_CODE, TOO_MANY_ITERATIONS
from mcsim.model.memory import capacity_gb
from mcsim.planning.candidates import Candidates, candidate_runs, reference_candidate
from mcsim.planning.plan_file import Plan, weighted_objective
from mcsim.scenario.config import config_with_values

# Rejection codes (the first one found is kept), in the order they are assigned but for the constraints: those
# known exactly (7, 8) first, then those estimated: 14 (the simulation's horizon), 9, 10 (a code added later
# keeps the earlier ones' numbers). Per code: the word of the dataset's flag_meanings, and the text.
_REJECTION_TABLE = (
    (0, "finalist", ""),
    (1, "layout", "layout: the workload model cannot run it"),
    (2, "frequency", "frequency outside the GPU's clock range"),
    (3, "iterations", "too many iterations"),
    (4, "time_resolution", "iteration below the time resolution"),
    (5, "memory", "memory: does not fit in GPU memory with constraints.memory_headroom of it free"),
    (6, "strategy_or_domain", "checkpoint strategy or failure domain does not fit the size"),
    (7, "gpu_count", "constraint: GPU count limits"),
    (8, "power_cap", "constraint: facility power cap"),
    (
        9,
        "deadline",
        "constraint: deadline (screen estimate of the wall time's quantile beyond it by more than the margin)",
    ),
    (10, "budget", "constraint: budget (screen estimate above it by more than the margin)"),
    (
        11,
        "dominated",
        "dominated: objective beyond the margin of the best (screen estimate, or the recommendation's simulated mean)",
    ),
    (
        12,
        "beyond_finalist_cap",
        "within the margin, but never simulated: the plan's pool of simulated candidates was full",
    ),
    (
        13,
        "equivalent",
        "equivalent to another candidate: the same screen estimates (e.g. microbatch without a pipeline)",
    ),
    (
        14,
        "beyond_max_wall_days",
        "run.max_wall_days: screen estimate beyond the simulation's horizon by more than the margin",
    ),
)
REJECTIONS = {code: text for code, _, text in _REJECTION_TABLE}
REJECTION_WORDS = {code: word for code, word, _ in _REJECTION_TABLE}
KEPT, LAYOUT, STRATEGY_OR_DOMAIN = 0, 1, 6
WORKLOAD_REJECTION = {FREQUENCY: 2, TOO_MANY_ITERATIONS: 3, TIME_RESOLUTION_CODE: 4, MEMORY: 5}
CONSTRAINT_CODES = {"max_wall_days": 14, "gpus": 7, "power": 8, "deadline": 9, "budget": 10}
DOMINATED, BEYOND_CAP, EQUIVALENT = 11, 12, 13
# Re-screened, a finalist ranked out only by the others (the ranking's codes) is still a candidate.
_STILL_CANDIDATE = (KEPT, DOMINATED, BEYOND_CAP, EQUIVALENT)
QUANTILES = (0.05, 0.95)


@dataclass(frozen=True)
class Screen(ExpectedRuns):
    """The screen's estimates per candidate (the model's, :class:`~mcsim.model.expected_runs.ExpectedRuns`,
    and the plan's objective of them) and the outcome."""

    objective: np.ndarray  # in the objective's per-run units (h, MWh, USD, t)
    rejection: np.ndarray  # REJECTIONS code
    gap: np.ndarray  # objective / best - 1 (NaN where rejected before the ranking)
    finalists: np.ndarray  # candidate indices, best screen objective first (then the reference)
    reference: int = -1  # candidate index of the plan file's own [parallelism] layout (-1: none)
    # The pool (docs/model.md §9): candidates not ruled out exactly (structure, memory, GPU count, power)
    # and not equivalent to another, best screen objective first; and each candidate's largest relative
    # excess of its estimates over the estimated constraints (<= 0: meets them all by its estimates).
    ranking: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    excess: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))


def screen(plan: Plan, cand: Candidates) -> Screen:
    """Estimate every candidate, rule candidates out, rank the rest and choose the finalists (the module
    docstring)."""
    reference = reference_candidate(plan, cand)
    runs = candidate_runs(plan, cand)
    est = expected_runs(plan.scenario.base, runs, plan.constraints.deadline_probability)
    outputs = {
        "cost": est.cost_usd,
        "energy": est.energy_j / J_PER_MWH,
        "wall_time": est.wall_s / 3600.0,
        "co2": est.co2_t,
    }
    objective = weighted_objective(outputs, plan.objective_weights)
    rejection = _structural_rejection(est)
    _memory_headroom(plan, cand, rejection, est.memory_per_gpu_gb)
    exact = _constraints(plan, cand, rejection, est.power_mw)
    excess = constraint_excess(plan, est.wall_s, est.wall_quantile_s, est.cost_usd)
    _estimated_constraints(plan, rejection, est.wall_s, est.wall_quantile_s, est.cost_usd)
    gap, finalists, ranking = _finalists(
        plan, objective, rejection, exact, excess, (est.wall_s, est.energy_j, est.memory_per_gpu_gb)
    )
    if (
        reference >= 0
        and finalists.size
        and reference not in finalists
        and rejection[reference] in (DOMINATED, BEYOND_CAP, EQUIVALENT)
    ):
        finalists = np.append(finalists, reference)  # simulated too, so the report can compare with it
    estimates = {f.name: getattr(est, f.name) for f in dataclasses.fields(est)}
    return Screen(**estimates, objective=objective, rejection=rejection, gap=gap, finalists=finalists,
                  reference=reference, ranking=ranking, excess=excess)  # fmt: skip


def _structural_rejection(est: ExpectedRuns) -> np.ndarray:
    """Per candidate, the first structural reason it cannot run (:data:`REJECTIONS`; 0: none): its layout,
    then its strategy or failure domains."""
    rejection = np.zeros(est.feasibility.size, dtype=np.int8)
    rejection[np.isin(est.feasibility, STRUCTURAL)] = LAYOUT
    for code, reason in WORKLOAD_REJECTION.items():
        rejection[(rejection == KEPT) & (est.feasibility == code)] = reason
    rejection[(rejection == KEPT) & ~est.configuration_fits] = STRATEGY_OR_DOMAIN
    return rejection


def _memory_headroom(plan: Plan, cand: Candidates, rejection: np.ndarray, memory_gb: np.ndarray) -> None:
    """Rule out, as not fitting in memory, the candidates whose memory per GPU leaves less than
    ``constraints.memory_headroom`` of their GPU's memory free (the memory model's measured error)."""
    catalog_gb = np.array([spec.memory_gb for spec in plan.gpu_specs])[cand.gpu_type]
    usable = capacity_gb(catalog_gb) * (1.0 - plan.constraints.memory_headroom)
    rejection[(rejection == KEPT) & (memory_gb > usable)] = WORKLOAD_REJECTION[MEMORY]


def _constraints(plan: Plan, cand: Candidates, rejection, power_mw) -> np.ndarray:
    """Rule out the candidates that fail a constraint known exactly (GPU count, power cap); returns the
    mask of those that pass them and every structural check (the pool's candidates)."""
    c = plan.constraints
    checks = [("gpus", (cand.gpus < c.min_gpus) | (cand.gpus > c.max_gpus))]
    if c.power_mw is not None:
        checks.append(("power", power_mw > c.power_mw))
    for name, failed in checks:
        rejection[(rejection == KEPT) & failed] = CONSTRAINT_CODES[name]
    return rejection == KEPT


def constraint_excess(plan: Plan, wall_s: np.ndarray, quantile_s: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Each candidate's largest relative excess of its screen estimates over the constraints the screen
    estimates: the simulation's horizon (mean wall time against ``run.max_wall_days``), the deadline (the
    wall time's ``deadline_probability``-quantile against ``deadline_days``) and the budget (mean cost against
    ``budget_usd``). <= 0: meets them all by its estimates; inf where an estimate is not finite."""
    c = plan.constraints
    excess = wall_s / (plan.scenario.base.run.max_wall_days * 86400.0) - 1.0
    if c.deadline_days is not None:
        excess = np.maximum(excess, quantile_s / (c.deadline_days * 86400.0) - 1.0)
    if c.budget_usd is not None:
        excess = np.maximum(excess, cost / c.budget_usd - 1.0)
    return np.where(np.isnan(excess), np.inf, excess)


def _estimated_constraints(plan: Plan, rejection: np.ndarray, wall_s, quantile_s, cost) -> None:
    """Rule out the candidates whose estimates exceed a constraint by more than the margin, naming the
    first: the simulation's horizon, the deadline (on the wall time's quantile), the budget."""
    c, margin = plan.constraints, plan.margin
    checks = [("max_wall_days", wall_s > plan.scenario.base.run.max_wall_days * 86400.0 * (1.0 + margin))]
    if c.deadline_days is not None:
        checks.append(("deadline", quantile_s > c.deadline_days * 86400.0 * (1.0 + margin)))
    if c.budget_usd is not None:
        checks.append(("budget", cost > c.budget_usd * (1.0 + margin)))
    for name, failed in checks:
        rejection[(rejection == KEPT) & failed] = CONSTRAINT_CODES[name]


def _finalists(
    plan: Plan,
    objective: np.ndarray,
    rejection: np.ndarray,
    exact: np.ndarray,
    excess: np.ndarray,
    tie_keys: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gaps, the first finalists and the pool's ranking (docs/model.md §9).

    The ranking: every candidate that passes the exact checks, one of each set of equal estimates
    (the one with the least memory per GPU), best screen objective first. The gap of a candidate that may
    meet the constraints (excess within the margin) is measured against the best of those that meet them
    by their estimates (so a candidate just beyond a constraint, likely to be dropped when simulated,
    rules no other out); the finalists are those within the margin of it, at most ``plan.finalists``.
    """
    gap = np.full(objective.shape, np.nan)
    eligible = np.flatnonzero(exact)
    wall, energy, memory = (key[eligible] for key in tie_keys)
    order = eligible[np.lexsort((memory, energy, wall, objective[eligible]))]
    same = np.zeros(order.size, dtype=bool)
    same[1:] = (
        (objective[order][1:] == objective[order][:-1])
        & (tie_keys[0][order][1:] == tie_keys[0][order][:-1])
        & (tie_keys[1][order][1:] == tie_keys[1][order][:-1])
    )
    duplicates = order[same]
    rejection[duplicates[rejection[duplicates] == KEPT]] = EQUIVALENT
    ranking = order[~same]
    kept = ranking[rejection[ranking] == KEPT]
    if kept.size == 0:
        return gap, kept, ranking
    meets = kept[excess[kept] <= 0]
    best = objective[meets if meets.size else kept].min()
    if best > 0:
        gap[kept] = objective[kept] / best - 1.0
    else:  # an objective of 0 (co2 on a zero-carbon grid): the others are infinitely far, the ties at 0
        gap[kept] = np.where(objective[kept] == best, 0.0, np.inf)
    rejection[kept[gap[kept] > plan.margin]] = DOMINATED
    within = kept[gap[kept] <= plan.margin]
    rejection[within[plan.finalists :]] = BEYOND_CAP
    return gap, within[: plan.finalists], ranking


def binding_constraint(rejection: np.ndarray) -> str:
    """The constraint that rejected the most candidates that fit in memory, or ""."""
    counts = {name: int(np.sum(rejection == code)) for name, code in CONSTRAINT_CODES.items()}
    name, count = max(counts.items(), key=lambda kv: kv[1])
    return name if count else ""


def no_candidate_message(plan: Plan, scr: Screen) -> str:
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
            f"{np.nanmin(scr.memory_per_gpu_gb):.1f} GB per GPU, with constraints.memory_headroom = "
            f"{plan.constraints.memory_headroom:g} of it free); search more GPUs, recompute or larger GPUs"
        )
    if code == WORKLOAD_REJECTION[FREQUENCY]:
        ranges = ", ".join(
            f"{name} {spec.freq_min_mhz:g}..{spec.freq_max_mhz:g} MHz"
            for name, spec in zip(plan.search.gpu_types, plan.gpu_specs, strict=True)
        )
        return f"{plan.source}: search.freq_mhz: no searched clock is within the GPU's range ({ranges})"
    return (
        f"{plan.source}: search: no candidate passes the screen; {int(counts.max()):,} of "
        f"{int(counts.sum()):,} are rejected for: {REJECTIONS[code]}"
    )


def uncertain_objectives(
    plan: Plan, cand: Candidates, finalists: np.ndarray
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Input keys, their values at :data:`QUANTILES` (inputs x 2), the finalists' screen objective with
    each input at each quantile (inputs x 2 x finalists; NaN where the re-screen rules the finalist out:
    memory or a constraint), and that rejection code (0 where it is still a candidate)."""
    inputs = plan.scenario.uncertain
    values = np.array([[float(u.ppf(np.array([q]))[0]) for q in QUANTILES] for u in inputs]).reshape(len(inputs), 2)
    objectives = np.full((len(inputs), len(QUANTILES), finalists.size), np.nan)
    rejections = np.zeros(objectives.shape, dtype=np.int8)
    subset = cand.subset(finalists)
    for i, entry in enumerate(inputs):
        for j in range(len(QUANTILES)):
            base = config_with_values(
                plan.scenario, 0, {entry.key: values[i, j]}, f"{entry.key} at its p{QUANTILES[j]:.0%}"
            )
            varied = dataclasses.replace(
                plan,
                scenario=dataclasses.replace(plan.scenario, base=base),
                constraints=dataclasses.replace(plan.constraints),
            )
            scr = screen(varied, subset)
            out = ~np.isin(scr.rejection, _STILL_CANDIDATE)
            objectives[i, j] = np.where(out, np.nan, scr.objective)
            rejections[i, j] = np.where(out, scr.rejection, KEPT)
    return [u.key for u in inputs], values, objectives, rejections
