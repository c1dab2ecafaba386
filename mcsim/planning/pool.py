"""The plan's pool: simulate from the top of the screen's ranking until no candidate left out could be better.

:func:`simulate_pool` runs the Kim–Nelson selection (:func:`mcsim.planning.selection.select_best`)
over the first finalists of the screen (:mod:`mcsim.planning.screen`), drops every simulated
candidate whose runs miss a constraint, measures the screen's error per family on the candidates
simulated and in the calibration pilot (:mod:`mcsim.planning.calibration`), and brings in the next
candidates of the screen's ranking whenever a candidate left out could, by its screen estimate and
its family's margin, meet the constraints and be better than the current best; it stops when none
could (the pool is closed) or when ``plan.pool`` candidates have been simulated (the recommendation
is then not decided). docs/model.md §9, "Pool".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

import numpy as np

from mcsim.engine.resume import PieceStore
from mcsim.errors import NoCandidate
from mcsim.model.run_outputs import run_outputs
from mcsim.planning.calibration import Calibration, Families, family_margins
from mcsim.planning.candidates import Candidates, candidate_config
from mcsim.planning.plan_file import Plan, weighted_objective
from mcsim.planning.screen import BEYOND_CAP, DOMINATED, KEPT, Screen
from mcsim.planning.selection import ExecutionOptions, SelectionResult, check_kept_runs, select_best
from mcsim.scenario.config import Config

PER_RUN_KEPT = ("wall_time", "energy", "cost", "co2")


@dataclass(frozen=True)
class PoolOutcome:
    """What the pool simulated, and what the screen's part of the claim is (docs/model.md §9)."""

    finalists: np.ndarray  # candidate indices, in the order they were brought in
    outputs: list[dict[str, np.ndarray] | None]  # per finalist: per-run outputs of its simulated runs
    selection: SelectionResult  # the last selection (over `selected`)
    selected: np.ndarray  # finalist positions the last selection ran over
    dropped: dict[int, str]  # finalist position -> constraint it missed when simulated
    recommended: int  # finalist position
    errors: dict[str, float]  # measured screen error: objective, and the deadline quantile / cost when constrained
    margin: float  # the largest margin the pool closed with (of the families of the ranked candidates)
    closed: bool  # no candidate left out could be better (else the pool ran out first)
    never_simulated: int  # candidates of the ranking never simulated
    closest_gap: float  # smallest screen objective / recommendation's mean - 1 of those that may meet the constraints
    left_out: np.ndarray  # candidates that could be better but were never simulated (the pool ran out)
    calibration: Calibration  # the pilot: the screen's error per family before the selection
    family_margin: np.ndarray  # per family: the margin the pool closed with (calibration.family_margins)


def kept_outputs(cfg: Config, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The per-run outputs a plan keeps of a candidate's kernel rows: wall time h, energy MWh, cost USD,
    CO2 t, and whether each run completed."""
    out = run_outputs(cfg, rows)
    return {name: out[name] for name in (*PER_RUN_KEPT, "completed")}


def simulated_constraint(plan: Plan, out: dict[str, np.ndarray]) -> str:
    """What a candidate's simulated runs miss: "max_wall_days" (a run cut off at the simulation's horizon:
    its objective is only a lower bound), "deadline" or "budget"; or ""."""
    c = plan.constraints
    if not np.all(out["completed"]):
        return "max_wall_days"
    if c.deadline_days is not None:
        met = np.mean(out["completed"] & (out["wall_time"] <= c.deadline_days * 24.0))
        if met < c.deadline_probability:
            return "deadline"
    if c.budget_usd is not None and np.mean(out["cost"]) > c.budget_usd:
        return "budget"
    return ""


def missed_text(missed: str) -> str:
    """``misses the deadline``, or ``has runs cut off at run.max_wall_days``."""
    return "has runs cut off at run.max_wall_days" if missed == "max_wall_days" else f"misses the {missed}"


def relative_error(simulated: float, estimate: float) -> float:
    """|simulated / estimate - 1|; 0 for 0 against 0, inf for anything else against 0."""
    if estimate == 0:  # an objective of 0 (co2 on a zero-carbon grid)
        return 0.0 if simulated == 0 else np.inf
    return abs(simulated / estimate - 1.0)


def finalist_errors(plan: Plan, scr: Screen, index: int, out: dict[str, np.ndarray] | None) -> dict[str, float]:
    """The screen's relative errors against one simulated candidate whose runs all completed ({} otherwise).

    ``objective``: |simulated mean / screen estimate - 1| of the objective; with a deadline,
    ``deadline``: the same of the wall time's ``deadline_probability``-quantile (the simulated runs'
    empirical quantile: its sampling error is included, which errs on the safe side); with a budget,
    ``budget``: the same of the mean cost.
    """
    if out is None or not np.all(out["completed"]):
        return {}
    c = plan.constraints
    objective = float(np.mean(weighted_objective(out, plan.objective_weights)))
    errors = {"objective": relative_error(objective, float(scr.objective[index]))}
    if c.deadline_days is not None:
        quantile_h = float(np.quantile(out["wall_time"], c.deadline_probability))
        errors["deadline"] = relative_error(quantile_h, float(scr.wall_quantile_s[index]) / 3600.0)
    if c.budget_usd is not None:
        errors["budget"] = relative_error(float(np.mean(out["cost"])), float(scr.cost_usd[index]))
    return errors


def measured_errors(plan: Plan, errors: list[dict[str, float]]) -> dict[str, float]:
    """The screen's largest relative error (``errors``: :func:`finalist_errors` of each simulated candidate)
    against the simulated candidates whose runs all completed: ``objective``, and ``deadline`` / ``budget``
    under those constraints; NaN where nothing was simulated to completion."""
    c = plan.constraints
    largest: dict[str, list[float]] = {"objective": []}
    if c.deadline_days is not None:
        largest["deadline"] = []
    if c.budget_usd is not None:
        largest["budget"] = []
    for finalist in errors:
        for name, value in finalist.items():
            largest[name].append(value)
    return {name: max(values) if values else np.nan for name, values in largest.items()}


def family_error_bounds(fam: Families, finalists: np.ndarray, errors: list[dict[str, float]]) -> np.ndarray:
    """Per family: the largest error (``errors``: :func:`finalist_errors` of each finalist) over its
    simulated candidates (NaN: none)."""
    bound = np.full(len(fam), np.nan)
    for i, finalist in zip(finalists, errors, strict=True):
        if finalist:
            f = fam.of_candidate[int(i)]
            bound[f] = np.fmax(bound[f], max(finalist.values()))
    return bound


def _errors_text(errors: dict[str, float]) -> str:
    """``objective 1.2 %, deadline 3.4 %``: the measured errors (:func:`measured_errors`) that are finite."""
    shown = [f"{name} {100 * value:.2g} %" for name, value in errors.items() if np.isfinite(value)]
    return ", ".join(shown) if shown else "none measured"


class FinalistPieces:
    """The selection's store of finished tasks, named by finalist position, not by position among the
    candidates of the current selection (which shifts when one is dropped or brought in).

    Tasks the plan already ran are served from memory (with or without a resume store: a selection run
    again simulates no run twice), as are runs the calibration pilot simulated (``known``: finalist
    position -> kernel rows of its runs 0 .. n - 1; run r draws from the streams of (seed, r) whatever the
    task, so a slice of them is the task's rows); the others go to ``store`` (a :class:`PieceStore` or None) under the
    finalist's own position, so an interrupted plan resumes every selection it had begun. Finalists
    brought in later are appended (positions never change). ``select_best`` sees the interface of a
    :class:`PieceStore` (``header``, ``configs``, ``load``, ``save``, ``folder``).
    """

    def __init__(self, store, configs: list[Config], seed: int, mode: str) -> None:
        self.store, self.seed, self.mode = store, seed, mode
        self.finalist_configs = list(configs)
        self.active: list[int] = list(range(len(configs)))
        self.rows: dict = {}
        self.known: dict[int, np.ndarray] = {}
        self.served: set[str] = set()  # where the tasks loaded since `folder` was last read came from
        if store is not None:
            store.configs = self.finalist_configs

    @property
    def folder(self) -> str:
        """Where the reused tasks of the last execution came from (for its 'resuming' line); read once per
        execution (:meth:`mcsim.engine.execution.Execution.execute`), it starts the next one's count."""
        names = {"pilot": "the calibration pilot's runs", "memory": "the plan's earlier selection"}
        if self.store is not None:
            names["store"] = str(self.store.folder)
        text = " and ".join(names[source] for source in sorted(self.served, key=list(names).index))
        self.served = set()
        return text or "nowhere"

    @property
    def configs(self) -> list[Config]:
        return [self.finalist_configs[k] for k in self.active]

    @configs.setter
    def configs(self, configs: list[Config]) -> None:  # as simulated (select_best resolves "optimize")
        for j, cfg in enumerate(configs):
            self.finalist_configs[self.active[j]] = cfg

    def _own(self, task):
        return dataclasses.replace(task, config=self.active[task.config])

    def header(self, task) -> dict[str, object]:
        if self.store is not None:
            return self.store.header(self._own(task))
        return {"seed": self.seed, "mode": self.mode}

    def load(self, task) -> np.ndarray | None:
        own = self._own(task)
        if own in self.rows:
            self.served.add("memory")
            return self.rows[own]
        known = self.known.get(own.config)
        if known is not None and own.optimize_every is None and own.stop <= len(known):
            self.served.add("pilot")
            return known[own.start : own.stop]
        rows = self.store.load(own) if self.store is not None else None
        if rows is not None:
            self.served.add("store")
        return rows

    def save(self, task, rows: np.ndarray) -> None:
        own = self._own(task)
        self.rows[own] = rows
        if self.store is not None:
            self.store.save(own, rows)


def _could_be_better(scr: Screen, simulated: set[int], margins: np.ndarray, best_mean: float | None) -> np.ndarray:
    """Candidates of the ranking not simulated yet that could, by their screen estimates and their margins
    (``margins``, per candidate), meet the constraints and (with a current best) have a mean below
    ``best_mean``; best screen objective first."""
    ranking = scr.ranking
    left = ranking[~np.isin(ranking, list(simulated)) & (scr.excess[ranking] <= margins[ranking])]
    if best_mean is None:
        return left
    return left[scr.objective[left] < best_mean * (1.0 + margins[left])]


class _Pool:
    """The growing list of simulated candidates and their state (positions never change)."""

    def __init__(
        self, plan: Plan, cand: Candidates, scr: Screen, calibration: Calibration, execution: ExecutionOptions
    ) -> None:
        self.plan, self.cand, self.scr, self.calibration = plan, cand, scr, calibration
        self.finalists = [int(i) for i in scr.finalists]
        configs = [candidate_config(plan, cand, i) for i in self.finalists]
        self.pieces = FinalistPieces(execution.store, configs, plan.scenario.run.seed, plan.scenario.run.mode)
        # Every selection runs through the pieces: runs the plan already has are not simulated again.
        self.execution = dataclasses.replace(execution, store=cast(PieceStore, self.pieces))
        self.outputs: list[dict[str, np.ndarray] | None] = [None] * len(configs)
        self.dropped: dict[int, str] = {}
        self._errors: dict[int, tuple[object, dict[str, float]]] = {}  # k -> (its outputs, their errors)
        self._outputs_of: dict[int, tuple[Config, np.ndarray, dict[str, np.ndarray]]] = {}  # k -> (cfg, rows, outputs)
        self._know(range(len(self.finalists)))

    def _know(self, positions) -> None:
        """Give the pieces the pilot's runs of the finalists at ``positions`` (those it simulated)."""
        for k in positions:
            rows = self.calibration.rows.get(self.finalists[k])
            if rows is not None:
                self.pieces.known[k] = rows

    def active(self) -> list[int]:
        return [k for k in range(len(self.finalists)) if k not in self.dropped]

    def bring_in(self, candidates: np.ndarray) -> None:
        for i in candidates:
            self.finalists.append(int(i))
            self.pieces.finalist_configs.append(candidate_config(self.plan, self.cand, int(i)))
            self.outputs.append(None)
            self.scr.rejection[int(i)] = KEPT  # a finalist now
        self._know(range(len(self.finalists) - len(candidates), len(self.finalists)))

    def finalist_errors(self) -> list[dict[str, float]]:
        """:func:`finalist_errors` of every finalist, each computed again only when its outputs changed (the
        pool asks after every selection; most finalists were not in it)."""
        errors = []
        for k, out in enumerate(self.outputs):
            kept = self._errors.get(k)
            if kept is None or kept[0] is not out:
                kept = self._errors[k] = (out, finalist_errors(self.plan, self.scr, self.finalists[k], out))
            errors.append(kept[1])
        return errors

    def errors(self) -> dict[str, float]:
        return measured_errors(self.plan, self.finalist_errors())

    def family_margins(self) -> np.ndarray:
        """Each family's margin: from its pilot and its simulated candidates (:func:`family_margins`)."""
        bounds = family_error_bounds(self.calibration.families, np.array(self.finalists), self.finalist_errors())
        return family_margins(self.plan, self.calibration, bounds)

    def set_outputs(self, k: int, cfg: Config, rows: np.ndarray) -> None:
        """Finalist ``k``'s per-run outputs from its rows (:func:`kept_outputs`), those of the runs it
        had before reused: every output is a function of its own run's row, so the outputs of more runs
        of the same configuration are the earlier ones followed by those of the new runs."""
        kept = self._outputs_of.get(k)
        if (
            kept is not None
            and kept[0] == cfg
            and len(rows) >= len(kept[1])
            and np.array_equal(rows[: len(kept[1])], kept[1])
        ):
            new = kept_outputs(cfg, rows[len(kept[1]) :]) if len(rows) > len(kept[1]) else None
            out = kept[2] if new is None else {name: np.concatenate([v, new[name]]) for name, v in kept[2].items()}
        else:
            out = kept_outputs(cfg, rows)
        self._outputs_of[k] = (cfg, rows, out)
        self.outputs[k] = out

    def margins(self) -> np.ndarray:
        """Each candidate's margin: its family's."""
        return self.family_margins()[self.calibration.families.of_candidate]

    def room(self) -> int:
        """How many candidates may be brought in now: ``plan.finalists`` at a time, ``plan.pool`` in all."""
        return max(0, min(self.plan.finalists, self.plan.pool_size - len(self.finalists)))

    def say(self, line: str) -> None:
        if self.execution.notify is not None:
            self.execution.notify(line)

    def select(self, active: list[int]) -> SelectionResult:
        """One Kim–Nelson selection over the finalists ``active`` (runs already simulated are reused)."""
        plan = self.plan
        self.pieces.active = list(active)
        configs = [self.pieces.finalist_configs[k] for k in active]
        total = plan.max_total_runs
        if total is not None:  # each selection may simulate first_runs of every candidate in it
            total = max(total, len(active) * plan.first_runs)
        result = select_best(
            configs,
            plan.objective,
            seed=plan.scenario.run.seed,
            mode=plan.scenario.run.mode,
            alpha=plan.alpha,
            indifference=plan.indifference,
            first_runs=plan.first_runs,
            max_runs=plan.max_runs,
            max_total_runs=total,
            execution=self.execution,
            source=plan.source,
        )
        simulated = result.configs or configs
        for j, k in enumerate(active):
            self.set_outputs(k, simulated[j], result.rows[j])
        return result

    def drop_missed(self, best: int, active: list[int]) -> bool:
        """Drop the finalists of the last selection whose simulated runs miss a constraint; whether the
        recommendation ``best`` is one of them (the selection then runs again without it)."""
        misses = {}
        for k in dict.fromkeys((best, *active)):
            out = self.outputs[k]
            assert out is not None  # the selection over `active` has just set it
            misses[k] = simulated_constraint(self.plan, out)
        newly = [k for k, missed in misses.items() if missed and k not in self.dropped]
        self.dropped.update({k: misses[k] for k in newly})
        if best not in newly:
            return False
        others = f" ({len(newly) - 1} other candidates simulated miss a constraint too)" if len(newly) > 1 else ""
        self.say(f"finalist {best} {missed_text(misses[best])} when simulated{others}; selecting again without it")
        return True

    def replace_dropped(self) -> None:
        """Every finalist missed a constraint: bring in those of the ranking that could meet the constraints.

        Raises
        ------
        NoCandidate
            When none could, or the pool is full.
        """
        scr, margins = self.scr, self.margins()
        possible = _could_be_better(scr, set(self.finalists), margins, None)
        batch = possible[: self.room()]
        if batch.size == 0:
            raise NoCandidate(
                _all_dropped_message(self.plan, self.dropped, _largest(scr, margins), self.errors(), possible.size)
            )
        self.say(
            f"bringing in {_count(batch.size)} from the screen's ranking (every one simulated "
            f"missed a constraint; margin up to {100 * _largest(scr, margins):.3g} %)"
        )
        self.bring_in(batch)

    def outcome(
        self, result: SelectionResult, active: list[int], best: int, margins: np.ndarray, wanted: np.ndarray
    ) -> PoolOutcome:
        """The pool's outcome: the candidates that could be better but were left out are marked (code 12)."""
        scr = self.scr
        finalists = np.array(self.finalists, dtype=np.int64)
        closed = wanted.size == 0
        # Code 12 only for those never simulated that could still be better; the first screen's others are dominated
        # by the recommendation's simulated mean.
        scr.rejection[(scr.rejection == BEYOND_CAP) & ~np.isin(np.arange(scr.rejection.size), finalists)] = DOMINATED
        scr.rejection[wanted] = BEYOND_CAP
        never = scr.ranking[~np.isin(scr.ranking, finalists)]
        possible = never[scr.excess[never] <= margins[never]]
        best_mean = float(result.means[result.best])
        if possible.size and best_mean > 0:
            closest = float(np.min(scr.objective[possible]) / best_mean - 1.0)
        else:
            closest = np.inf if not possible.size else (0.0 if np.min(scr.objective[possible]) == 0 else np.inf)
        return PoolOutcome(
            finalists,
            self.outputs,
            result,
            np.array(active),
            self.dropped,
            best,
            self.errors(),
            _largest(scr, margins),
            closed,
            int(never.size),
            closest,
            wanted,
            self.calibration,
            self.family_margins(),
        )


def simulate_pool(
    plan: Plan, cand: Candidates, scr: Screen, calibration: Calibration, execution: ExecutionOptions
) -> PoolOutcome:
    """Select by simulation over a pool brought in from the screen's ranking (the module docstring).

    ``calibration``: the pilot's errors per family (:func:`mcsim.planning.calibration.run_pilot`), which set
    each family's margin with the errors measured on the simulated candidates.

    Raises
    ------
    NoCandidate
        When every simulated candidate missed a constraint and no other could meet the constraints by
        its screen estimate within the measured error.
    """
    # Every candidate the pool may bring in, and the plan's own layout, with up to max_runs runs each.
    check_kept_runs(
        (plan.pool_size + 1) * plan.max_runs,
        plan.source,
        "plan.max_runs",
        f"the selection's pool ({plan.pool_size:,} candidates and the plan's own layout, up to "
        f"{plan.max_runs:,} runs each)",
        "lower plan.max_runs or plan.pool",
    )
    pool = _Pool(plan, cand, scr, calibration, execution)
    while True:
        active = pool.active()
        if not active:
            pool.replace_dropped()
            continue
        result = pool.select(active)
        best = active[result.best]
        if pool.drop_missed(best, active):
            continue
        margins = pool.margins()
        wanted = _could_be_better(scr, set(pool.finalists), margins, float(result.means[result.best]))
        batch = wanted[: pool.room()]
        if batch.size == 0:
            return pool.outcome(result, active, best, margins, wanted)
        pool.say(
            f"bringing in {_count(batch.size)} from the screen's ranking: by their screen estimates and "
            f"the measured error (margins up to {100 * _largest(scr, margins):.2g} %) they could be better than "
            f"finalist {best}"
        )
        pool.bring_in(batch)


def _largest(scr: Screen, margins: np.ndarray) -> float:
    """The largest margin of a candidate of the ranking (the margin the claim covers)."""
    return float(np.max(margins[scr.ranking])) if scr.ranking.size else float(np.max(margins, initial=0.0))


def _count(n: int) -> str:
    return f"{n} candidate" + ("" if n == 1 else "s")


def _all_dropped_message(
    plan: Plan, dropped: dict[int, str], margin: float, errors: dict[str, float], left: int
) -> str:
    missed = sorted(set(dropped.values()))
    tail = (
        f"; no other candidate could meet the constraints by its screen estimate within the margin of "
        f"{100 * margin:.3g} % (the screen's measured error: {_errors_text(errors)})"
        if not left
        else f"; the pool of {plan.pool_size} simulated candidates is full and {left} never simulated could meet "
        "them by their screen estimates: raise plan.pool"
    )
    if missed == ["max_wall_days"]:
        return (
            f"{plan.source}: run.max_wall_days: every finalist has runs cut off at "
            f"{plan.scenario.base.run.max_wall_days:g} days when simulated{tail}; raise run.max_wall_days"
        )
    return f"{plan.source}: constraints: every finalist misses a constraint when simulated ({', '.join(missed)}){tail}"
