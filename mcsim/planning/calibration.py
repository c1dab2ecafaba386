"""The plan's calibration pilot: the screen's error measured per family before the selection.

A *family* is the candidates that share GPU type, checkpoint strategy, recomputation and size band
(the octave of the GPU count, ``2**k <= G < 2**(k + 1)``): the screen's first-order terms (failures
per run, write waits, spare pools, slow-node episodes) err alike within one and differently across
(docs/planning.md, "The screen's error per feature"). Before the selection, :func:`run_pilot`
simulates ``plan.pilot_runs`` runs of one candidate per family (the family's best-ranked candidate
that may meet the constraints by its estimates, else its best-ranked one), at most
``plan.pilot_families`` families (those whose candidate ranks best first), and measures per family
the screen's signed relative error ``simulated / screen - 1`` of the objective's mean and, under
constraints, of the deadline's quantile of the wall time and of the mean cost, with its standard
error. :func:`family_margins` turns them, with the errors the pool measures on the candidates it
simulates, into each candidate's screening margin (:mod:`mcsim.planning.pool`; docs/model.md §9,
"Calibration"); :func:`screen_error_text` warns when they are beyond the plan's margin, naming the effects
the screen models only to first order that the space has (:func:`first_order_effects`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special

from mcsim.model.run_outputs import run_outputs
from mcsim.planning.candidates import Candidates, candidate_config
from mcsim.planning.plan_file import Plan, weighted_objective
from mcsim.planning.screen import Screen
from mcsim.planning.selection import ExecutionOptions, check_kept_runs, simulate_first_runs

ERROR_KINDS = ("objective", "deadline", "budget")
# The pilot's error bound: |error| + k standard errors of the simulated estimate, k the one-sided 97.7 % point of
# Student's t with n - 1 degrees of freedom (2 for a normal law; 2.09 at n = 30, 13.9 at n = 2), so that a pilot of
# tens of runs widens a margin for its noise rather than narrowing it.
BOUND_PROBABILITY = 0.9772498680518208  # Phi(2): the normal law's one-sided probability within 2 standard deviations
# Standard normal density at the quantile z_p: the empirical p-quantile of n runs has a standard error of about
# sd * sqrt(p (1 - p) / n) / phi(z_p) for a normal wall time (Kendall & Stuart, the asymptotic variance of a
# sample quantile, p (1 - p) / (n f(q_p)^2)).
_SQRT_2PI = np.sqrt(2.0 * np.pi)


@dataclass(frozen=True)
class Families:
    """The families of a plan's candidates (the module docstring); arrays per family but ``of_candidate``."""

    of_candidate: np.ndarray  # family index of each candidate
    gpu_type: np.ndarray  # index into search.gpu_types
    strategy: np.ndarray  # index into search.strategy
    recompute: np.ndarray  # RECOMPUTE_CODES
    gpus_low: np.ndarray  # the smallest and largest searched GPU count of the family's size band
    gpus_high: np.ndarray

    def __len__(self) -> int:
        return int(self.gpu_type.size)


def size_band(gpus: np.ndarray) -> np.ndarray:
    """The octave of each GPU count: ``k`` with ``2**k <= gpus < 2**(k + 1)`` (exact for every integer)."""
    return np.frexp(np.asarray(gpus, dtype=np.float64))[1].astype(np.int64) - 1


def families(cand: Candidates) -> Families:
    """Group the candidates into families (GPU type x strategy x recompute x size band), in sorted key order."""
    # The keys' rows in the order np.unique(axis=0) gives the stacked keys (lexicographic by column),
    # from each column's codes: the same families in the same order, without sorting 217,800 rows
    # (0.18 s of a plan; tests/test_calibration.py holds the stacked version).
    columns = [np.asarray(c) for c in (cand.gpu_type, cand.strategy, cand.recompute, size_band(cand.gpus))]
    dtype = np.result_type(*columns)
    values, codes = zip(*(np.unique(c.astype(dtype), return_inverse=True) for c in columns), strict=True)
    sizes = [len(v) for v in values]
    combined = np.ravel_multi_index([c.ravel() for c in codes], sizes)
    unique_codes, inverse = np.unique(combined, return_inverse=True)
    key_codes = np.unravel_index(unique_codes, sizes)
    inverse = inverse.ravel()
    low = np.full(len(unique_codes), np.iinfo(np.int64).max, dtype=np.int64)
    high = np.zeros(len(unique_codes), dtype=np.int64)
    np.minimum.at(low, inverse, cand.gpus)
    np.maximum.at(high, inverse, cand.gpus)
    gpu_type, strategy, recompute = (values[k][key_codes[k]] for k in range(3))
    return Families(inverse.astype(np.int64), gpu_type, strategy, recompute, low, high)


@dataclass(frozen=True)
class Calibration:
    """The pilot's outcome: per family, the candidate simulated and the screen's measured error."""

    families: Families
    runs: int  # pilot runs per piloted family (0: no pilot)
    pilot: np.ndarray  # per family: candidate index simulated (-1: none)
    error: np.ndarray  # (family, ERROR_KINDS): simulated / screen - 1 (NaN: not measured)
    error_se: np.ndarray  # its standard error (same shape)
    rows: dict[int, np.ndarray] = field(default_factory=dict)  # candidate index -> kernel rows of runs 0 .. runs - 1

    def bound(self) -> np.ndarray:
        """Per family: the largest ``|error| + k se`` over the error kinds (NaN where none was measured)."""
        return error_bounds(self.error, self.error_se, self.runs)


def bound_multiplier(runs: int) -> float:
    """``k`` of the error bound ``|error| + k se`` for a pilot of ``runs`` runs: Student's t at
    :data:`BOUND_PROBABILITY` with ``runs - 1`` degrees of freedom (NaN for fewer than 2 runs)."""
    if runs < 2:
        return np.nan
    return float(special.stdtrit(runs - 1, BOUND_PROBABILITY))  # what scipy.stats.t.ppf computes


def error_bounds(error: np.ndarray, error_se: np.ndarray, runs: int) -> np.ndarray:
    """Per family (rows): the largest ``|error| + k se`` over the error kinds (columns), ``k`` of
    :func:`bound_multiplier`; NaN where none is finite."""
    bounds = np.abs(error) + bound_multiplier(runs) * error_se
    measured = np.isfinite(bounds).any(axis=1)
    out = np.full(bounds.shape[0], np.nan)
    out[measured] = np.max(np.where(np.isfinite(bounds[measured]), bounds[measured], -np.inf), axis=1)
    return out


def no_pilot(cand: Candidates) -> Calibration:
    """A calibration without a pilot (``plan.pilot_runs = 0``): every family unmeasured."""
    fam = families(cand)
    shape = (len(fam), len(ERROR_KINDS))
    return Calibration(fam, 0, np.full(len(fam), -1, dtype=np.int64), np.full(shape, np.nan), np.full(shape, np.nan))


def pilot_candidates(plan: Plan, scr: Screen, fam: Families) -> np.ndarray:
    """Per family, the candidate the pilot simulates (-1: none), at most ``plan.pilot_families`` of them.

    A family's candidate is its best-ranked one that may meet the constraints by its estimates (excess
    within the margin), else its best-ranked one; candidates ruled out exactly (memory, layout, GPU count,
    power) are not in the ranking. When more families have one than ``plan.pilot_families``, those whose
    candidate ranks best are kept.
    """
    ranking = scr.ranking
    chosen = np.full(len(fam), -1, dtype=np.int64)
    position = np.full(len(fam), np.iinfo(np.int64).max, dtype=np.int64)
    may_meet = scr.excess[ranking] <= plan.margin
    for subset in (ranking[~may_meet], ranking[may_meet]):  # the second pass overrides: preferred
        found = fam.of_candidate[subset]
        first = np.unique(found, return_index=True)  # the best-ranked candidate of each family in subset
        chosen[first[0]] = subset[first[1]]
    rank_of = np.empty(scr.objective.size, dtype=np.int64)
    rank_of[ranking] = np.arange(ranking.size)
    has = chosen >= 0
    position[has] = rank_of[chosen[has]]
    keep = np.argsort(position, kind="stable")[: plan.pilot_families]
    out = np.full(len(fam), -1, dtype=np.int64)
    out[keep] = chosen[keep]
    return out


def pilot_errors(plan: Plan, scr: Screen, index: int, out: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The screen's signed relative errors (ERROR_KINDS order) of candidate ``index`` against its simulated
    per-run outputs ``out``, with their standard errors; NaN where not measured (a run cut off at the
    simulation's horizon, no such constraint, or a screen estimate of 0)."""
    error = np.full(len(ERROR_KINDS), np.nan)
    se = np.full(len(ERROR_KINDS), np.nan)
    if not np.all(out["completed"]) or out["wall_time"].size < 2:
        return error, se
    c = plan.constraints
    error[0], se[0] = _mean_error(weighted_objective(out, plan.objective_weights), float(scr.objective[index]))
    if c.deadline_days is not None:
        error[1], se[1] = _quantile_error(
            out["wall_time"], float(scr.wall_quantile_s[index]) / 3600.0, c.deadline_probability
        )
    if c.budget_usd is not None:
        error[2], se[2] = _mean_error(out["cost"], float(scr.cost_usd[index]))
    return error, se


def _mean_error(values: np.ndarray, estimate: float) -> tuple[float, float]:
    """``mean / estimate - 1`` and its standard error (NaN for an estimate of 0)."""
    if not estimate > 0:
        return np.nan, np.nan
    return float(np.mean(values)) / estimate - 1.0, float(np.std(values, ddof=1)) / np.sqrt(values.size) / estimate


def _quantile_error(values: np.ndarray, estimate: float, probability: float) -> tuple[float, float]:
    """``empirical p-quantile / estimate - 1`` and its standard error under normality (NaN for an estimate of 0)."""
    if not estimate > 0:
        return np.nan, np.nan
    z = _normal_quantile(probability)
    spread = np.std(values, ddof=1) * np.sqrt(probability * (1.0 - probability) / values.size)
    return (
        float(np.quantile(values, probability)) / estimate - 1.0,
        float(spread * _SQRT_2PI * np.exp(0.5 * z * z)) / estimate,
    )


def _normal_quantile(probability: float) -> float:
    return float(special.ndtri(probability))  # what scipy.stats.norm.ppf computes


def run_pilot(plan: Plan, cand: Candidates, scr: Screen, execution: ExecutionOptions) -> Calibration:
    """Simulate the pilot (the module docstring) and measure the screen's error per family.

    Runs 0 .. ``plan.pilot_runs`` - 1 of every piloted candidate use the plan's seed (common random
    numbers, as the selection's first runs; :func:`mcsim.planning.selection.simulate_first_runs`).
    """
    fam = families(cand)
    if plan.pilot_runs == 0:
        return no_pilot(cand)
    pilot = pilot_candidates(plan, scr, fam)
    piloted = np.flatnonzero(pilot >= 0)
    shape = (len(fam), len(ERROR_KINDS))
    error, se = np.full(shape, np.nan), np.full(shape, np.nan)
    if not piloted.size:
        return Calibration(fam, plan.pilot_runs, pilot, error, se, {})
    check_kept_runs(
        piloted.size * plan.pilot_runs,
        plan.source,
        "plan.pilot_runs",
        f"the calibration pilot ({piloted.size:,} candidates x {plan.pilot_runs:,} runs)",
        "lower plan.pilot_runs or plan.pilot_families",
    )
    configs = [candidate_config(plan, cand, int(pilot[f])) for f in piloted]
    rows = simulate_first_runs(
        configs,
        plan.pilot_runs,
        seed=plan.scenario.run.seed,
        mode=plan.scenario.run.mode,
        execution=execution,
        source=plan.source,
        what=f"calibration pilot ({len(fam)} families):",
    )
    outputs = [run_outputs(cfg, got) for cfg, got in zip(configs, rows, strict=True)]
    for f, out in zip(piloted, outputs, strict=True):
        error[f], se[f] = pilot_errors(plan, scr, int(pilot[f]), out)
    kept = {int(pilot[f]): got for f, got in zip(piloted, rows, strict=True)}
    return Calibration(fam, plan.pilot_runs, pilot, error, se, kept)


def widened(plan: Plan, error: np.ndarray) -> np.ndarray:
    """``max(plan.margin, e / (1 - e))`` of each error bound ``e`` (inf from ``e >= 1``; ``plan.margin`` for NaN).

    A candidate whose screen estimate is ``x`` has a true value of at least ``x (1 - e)``, which is below a
    bar ``b`` only if ``x < b / (1 - e)``.
    """
    error = np.asarray(error, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.where(error >= 1.0, np.inf, error / (1.0 - error))
    return np.where(np.isnan(margin), plan.margin, np.maximum(plan.margin, margin))


def family_margins(plan: Plan, cal: Calibration, finalist_bound: np.ndarray) -> np.ndarray:
    """Each family's screening margin: :func:`widened` of the larger of its pilot's bound and the largest error
    measured on its simulated finalists (``finalist_bound``, per family, NaN: none); a family measured by
    neither takes the largest error measured anywhere (``plan.margin`` when none is)."""
    bound = np.fmax(cal.bound(), finalist_bound)
    if np.isnan(bound).all():
        return np.full(bound.shape, plan.margin)
    return widened(plan, np.where(np.isnan(bound), np.nanmax(bound), bound))


# The effects the screen models only to first order, its misses in docs/planning.md ("How close the screen
# comes"), each with the test of a scenario's tables ([hardware], [[failures]]) that says it is there.
def _failures(raw: dict) -> list[dict]:
    failures = raw.get("failures", [])
    return [f for f in failures if isinstance(f, dict)] if isinstance(failures, list) else []


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and value > 0


def _young(raw: dict) -> bool:
    return any(
        (f.get("initial_age", "stationary") != "stationary" and f.get("shape", 1.0) != 1.0)
        or _positive(f.get("bad_replacement_share", 0.0))
        for f in _failures(raw)
    )


def _interruptions(raw: dict) -> bool:
    return any(
        f.get("kind", "fail_stop") != "fail_stop"
        or _positive(f.get("recovery_sigma", 0.0))
        or _positive(f.get("manual_share", 0.0))
        or bool(f.get("recovery_durations_minutes"))
        for f in _failures(raw)
    )


def _spares(raw: dict) -> bool:
    hardware = raw.get("hardware", {})
    return isinstance(hardware, dict) and hardware.get("spare_nodes") is not None


FIRST_ORDER_EFFECTS = (
    ("a young cluster's failures", _young),
    ("kinds of interruption and recovery laws", _interruptions),
    ("spare-node waits", _spares),
)


def first_order_effects(raw: dict) -> list[str]:
    """The effects the screen models only to first order (:data:`FIRST_ORDER_EFFECTS`) that a scenario has.

    Parameters
    ----------
    raw : dict
        The scenario's tables, as read (:attr:`mcsim.scenario.config.Scenario.raw`, or the plan dataset's
        ``scenario_toml`` attribute parsed).
    """
    return [name for name, present in FIRST_ORDER_EFFECTS if present(raw)]


def screen_error_text(error: float, margin: float, effects: list[str]) -> str:
    """One line: the screen's error is beyond the margin, why (``effects``: :func:`first_order_effects`, only
    those the space has) and what the plan did about it."""
    why = (
        f"effects it models only to first order: {', '.join(effects)}"
        if effects
        else "none of the effects it models only to first order is in this space: mostly the pilot's sampling error"
    )
    return (
        f"the screen's estimates may be off by up to {100 * error:.1f} % against the simulated candidates "
        f"(the pilot's: |error| + ~2 standard errors), beyond the {100 * margin:g} % margin ({why}; docs/planning.md): "
        f"the plan widened each family's margin to its measured error and brought in the candidates that could then "
        f"be better; raise plan.margin to screen with it from the start"
    )
