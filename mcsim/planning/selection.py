"""Selecting the best configuration by simulation: Kim–Nelson's fully sequential procedure.

:func:`select_best` simulates a set of feasible candidate configurations in stages and
stops when the recommended one is the best within an indifference zone with
probability at least 1 − alpha, or says why it could not decide within its budget of
runs. The procedure is KN (Kim & Nelson 2001) with common random numbers: run r of
every candidate draws from the streams of (seed, r), so the runs of two candidates are
paired and the variance of their difference, not of each alone, sets how many runs
are needed. Definitions and guarantees: docs/model.md, "Selecting the best
configuration".

The procedure itself, on arrays, is :func:`mcsim.planning.kim_nelson.kim_nelson`; this module
validates, simulates and reports. Runs go through the same tasks, backends (local,
dask) and resume store as ``mcsim run`` (:class:`ExecutionOptions`); stage k + 1 adds runs
n .. n' - 1 of each surviving candidate, so the selection depends only on the seed, never on
workers, chunking or resumption. :func:`simulate_first_runs` simulates the first runs of
configurations the same way, for the plan's calibration pilot.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from mcsim.analysis.decisions import mean_interval
from mcsim.engine.backends import make_backend
from mcsim.engine.execution import Execution, progress_bar
from mcsim.engine.optimize import OPTIMIZE_RUNS, optimize_intervals
from mcsim.engine.options import ExecutionOptions
from mcsim.engine.resume import PieceStore
from mcsim.engine.tasks import Task, plan_tasks
from mcsim.errors import ScenarioError
from mcsim.io.format import format_bytes
from mcsim.kernels import interface as kernel
from mcsim.model.preparation import prepare
from mcsim.model.run_estimate import RunInputs, estimate_run
from mcsim.model.run_outputs import run_outputs
from mcsim.model.workload import workload
from mcsim.planning.kim_nelson import Outcome, bonferroni_pcs, kim_nelson
from mcsim.planning.plan_file import OBJECTIVES, weighted_objective
from mcsim.scenario.config import Config
from mcsim.scenario.limits import TimeEstimate, check_time, over_memory_limit

MODES = ("fast", "exact")
MAX_SEED = 2**63 - 1


@dataclass(frozen=True, eq=False)
class SelectionResult:
    """What :func:`select_best` found.

    Attributes
    ----------
    best : int
        Index (into the candidates) of the recommended configuration.
    pcs : float
        Probability of correct selection: the procedure's guaranteed lower bound
        1 − alpha when ``decided`` (1 with a single candidate); otherwise an estimate,
        the Bonferroni bound 1 − Σ P(μ_l < μ_best − δ) from pairwise paired-t
        probabilities (not a guarantee).
    decided : bool
        Whether the procedure stopped by its rule (else the budget ran out).
    reason : str
        One line: how it stopped, the survivors and the runs spent.
    runs : ndarray of int, shape (k,)
        Runs simulated per candidate (0 .. runs - 1).
    eliminated_round : ndarray of int, shape (k,)
        Stage (0: after the first stage) at which each candidate was eliminated, -1 if never.
    means : ndarray, shape (k,)
        Mean objective over each candidate's runs (objective units: USD, MWh, h, t CO2e,
        or the weighted sum).
    half_widths : ndarray, shape (k,)
        Half-width of the normal 95 % interval of each mean (same units).
    rows : dict of int to ndarray
        Kernel output rows ``(runs[i], N_OUT)`` of every candidate, runs in order.
    total_runs : int
        Runs simulated in all (the interval optimiser's grid points not included).
    configs : tuple of Config
        The candidates as simulated (``interval = "optimize"`` resolved to a fixed interval):
        pass them with the rows to :func:`mcsim.model.run_outputs.run_outputs`.
    delta : float
        The indifference zone in objective units (indifference × the best first-stage mean).
    h2 : float
        KN's constant h² for this k, first-stage size and alpha.
    stages : int
        Stages simulated (the first included).
    """

    best: int
    pcs: float
    decided: bool
    reason: str
    runs: np.ndarray
    eliminated_round: np.ndarray
    means: np.ndarray
    half_widths: np.ndarray
    rows: dict[int, np.ndarray]
    total_runs: int
    configs: tuple[Config, ...] = field(default=())
    delta: float = math.nan
    h2: float = math.nan
    stages: int = 0


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_objective(objective: str | Mapping[str, float]) -> dict[str, float]:
    """The objective as {output name: weight}; raises ValueError when it is not one."""
    if isinstance(objective, str):
        if objective not in OBJECTIVES:
            raise ValueError(
                f"objective: expected one of {', '.join(OBJECTIVES)} or a mapping of them to weights, got {objective!r}"
            )
        return {objective: 1.0}
    if not isinstance(objective, Mapping) or not objective:
        raise ValueError(
            f"objective: expected one of {', '.join(OBJECTIVES)} or a non-empty mapping of them "
            f"to weights, got {objective!r}"
        )
    weights = {}
    for name, weight in objective.items():
        if name not in OBJECTIVES:
            raise ValueError(f"objective: unknown output {name!r}; expected some of {', '.join(OBJECTIVES)}")
        if not _is_real(weight) or not 0 <= weight < math.inf:
            raise ValueError(f"objective: the weight of {name!r} must be a finite number >= 0, got {weight!r}")
        weights[name] = float(weight)
    if not any(weights.values()):
        raise ValueError("objective: at least one weight must be > 0")
    return weights


def _check_configs(configs: Sequence[Config]) -> None:
    """Raise ValueError unless ``configs`` is a non-empty sequence of feasible configurations."""
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Sequence) or not configs:
        raise ValueError("configs: expected a non-empty sequence of configurations")
    for i, cfg in enumerate(configs):
        if not isinstance(cfg, Config):
            raise ValueError(f"configs[{i}]: expected a mcsim Config, got {type(cfg).__name__}")
        wl = workload(cfg)
        if not wl.feasible:
            raise ValueError(
                f"configs[{i}] ({cfg.name}) is infeasible ({wl.infeasible_key}: "
                f"{wl.infeasible_reason}); screen the candidates first"
            )


def _check_seed_mode(seed: int, mode: str) -> None:
    if not _is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed: expected a whole number from 0 to 2**63 - 1, got {seed!r}")
    if mode not in MODES:
        raise ValueError(f"mode: expected 'fast' or 'exact', got {mode!r}")


def _check_stages(stages: _Stages, candidates: int) -> None:
    """Raise ValueError with one clear line for a setting of KN's stages out of its domain."""
    alpha, indifference, first_runs, max_runs, max_total_runs = stages
    if not _is_real(alpha) or not 0 < alpha < 0.5:
        raise ValueError(f"alpha: expected a number in (0, 0.5), got {alpha!r}")
    if not _is_real(indifference) or not 0 < indifference < 1:
        raise ValueError(f"indifference: expected a fraction of the best mean in (0, 1), got {indifference!r}")
    if not _is_int(first_runs) or first_runs < 2:
        raise ValueError(f"first_runs: expected a whole number >= 2 (10 or more recommended), got {first_runs!r}")
    if not _is_int(max_runs) or max_runs < first_runs:
        raise ValueError(f"max_runs: expected a whole number >= first_runs = {first_runs}, got {max_runs!r}")
    if max_total_runs is not None and (not _is_int(max_total_runs) or max_total_runs < candidates * first_runs):
        raise ValueError(
            f"max_total_runs: expected a whole number >= {candidates * first_runs} (first_runs "
            f"for each of the {candidates} candidates), got {max_total_runs!r}"
        )


def objective_of_rows(cfg: Config, rows: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
    """Per-run objective of a feasible configuration from its kernel rows: Σ weight × output.

    Outputs as :func:`mcsim.model.run_outputs.run_outputs` computes them (cost USD, energy MWh,
    wall_time h, co2 t CO2e).
    """
    return weighted_objective(run_outputs(cfg, rows), weights)


def select_best(
    configs: Sequence[Config],
    objective: str | Mapping[str, float],
    *,
    seed: int,
    mode: str = "fast",
    alpha: float = 0.05,
    indifference: float = 0.005,
    first_runs: int = 100,
    max_runs: int = 5000,
    max_total_runs: int | None = None,
    execution: ExecutionOptions | None = None,
    source: str = "<selection>",
) -> SelectionResult:
    """Select the configuration with the lowest mean objective, with a stated probability.

    Kim & Nelson's (2001) fully sequential procedure KN with common random numbers,
    screened at the end of stages of runs (docs/model.md, "Selecting the best configuration").

    Parameters
    ----------
    configs : sequence of Config
        Feasible candidates (the caller screens them); ``interval = "optimize"`` is resolved first.
    objective : str or mapping
        "cost" (USD), "energy" (MWh), "wall_time" (h) or "co2" (t CO2e), or a mapping of
        those names to weights >= 0: the weighted sum of the per-run outputs. Minimised.
    seed, mode : int, {"fast", "exact"}
        Run r of every candidate uses the streams of (seed, r); the kernel mode.
    alpha, indifference, first_runs, max_runs, max_total_runs
        The recommendation is within δ = indifference × the best first-stage mean of the best with
        probability >= 1 - alpha (0 < alpha < 0.5); first-stage runs n0 (>= 2), most runs of one
        candidate, most in all (None, or at least ``len(configs) * first_runs``).
    execution : ExecutionOptions, optional
        Backend, progress bar, messages (a line per stage), runs per task, resume store.
    source : str
        The plan file, for the message of a refusal.

    Raises
    ------
    ValueError
        An argument out of its domain, an infeasible candidate, a store for another seed or mode.
    BackendUnavailable
        No dask extra, or no dask scheduler answering at ``execution.scheduler``.
    ScenarioError
        When the most runs the arguments allow are estimated to take longer than the limit of
        :func:`mcsim.scenario.limits.limits` (24 h by default), before any run.
    """
    execution = execution or ExecutionOptions()
    weights = _check_objective(objective)
    stages = _Stages(alpha, indifference, first_runs, max_runs, max_total_runs)
    _check_configs(configs)
    _check_seed_mode(seed, mode)
    _check_stages(stages, len(configs))
    configs = list(configs)
    _check_store(execution.store, int(seed), mode, configs)
    return _select(configs, weights, int(seed), mode, stages, _Runner(execution, source))


class _Stages(NamedTuple):
    """The settings of KN's stages (:func:`select_best`)."""

    alpha: float
    indifference: float
    first_runs: int
    max_runs: int
    max_total_runs: int | None


def _select(
    configs: list[Config], weights: dict[str, float], seed: int, mode: str, stages: _Stages, runner: _Runner
) -> SelectionResult:
    """Simulate KN's stages (intervals to optimise resolved first) and report the outcome."""
    first_line = f"selecting the best of {len(configs)} candidates by simulation"
    chunk = runner.execution.chunk_runs
    most_runs = (stages.max_runs, stages.max_total_runs)
    with runner.executing(configs, seed, mode, most_runs, "select", first_line) as (running, prepared):
        to_optimize = [i for i, c in enumerate(configs) if c.checkpoint.interval.kind == "optimize"]
        if to_optimize:
            runs = min(stages.max_runs, OPTIMIZE_RUNS)
            for i, optimum in optimize_intervals(running, prepared, to_optimize, runs, chunk, seed).items():
                prepared.fix_interval(i, optimum.interval_iterations)
        simulation = _Simulation(running, configs, weights, chunk)
        outcome = kim_nelson(
            len(configs),
            simulation.draw,
            **stages._asdict(),
            excluded=simulation.cut_off,
            notify=runner.execution.notify,
        )
    return _result(outcome, simulation, stages.alpha)


def _check_store(store: PieceStore | None, seed: int, mode: str, configs: list[Config]) -> None:
    """Refuse a resume store made for another seed or mode; give it the candidates (pieces are checked
    against the candidate they ran)."""
    if store is None:
        return
    header = store.header(Task(0, 0, 1))
    if header["seed"] != seed or header["mode"] != mode:
        raise ValueError(
            f"store: made for seed {header['seed']} and mode {header['mode']!r}, not seed {seed} and mode {mode!r}"
        )
    store.configs = configs


@dataclass(frozen=True)
class _Runner:
    """Where and how a simulation runs (``execution``), and the plan file named in a refusal."""

    execution: ExecutionOptions
    source: str
    # The key a refusal for time blames, and its remedy.
    limit_key: tuple[str, str] = ("plan.max_runs", "lower plan.max_runs or plan.max_total_runs")

    @contextmanager
    def executing(
        self, configs: list[Config], seed: int, mode: str, most_runs: tuple[int, int | None], desc: str, first_line: str
    ) -> Iterator[tuple[Execution, Any]]:
        """The execution and prepared candidates of a simulation of at most ``most_runs = (max_runs,
        max_total_runs)`` runs (refused before any run when that is estimated to take longer than the limit);
        the backend is closed after, unless it is ``execution.lease``'s."""
        max_runs, max_total_runs = most_runs
        options = self.execution
        notify = options.notify
        lease = options.lease  # a plan's rounds share one backend (BackendLease); else this simulation's own
        try:
            backend = lease.backend() if lease is not None else make_backend(options.workers, options.scheduler)
        except ValueError as err:
            raise ValueError(f"workers: {err}") from None
        try:
            if notify is not None:
                notify(f"{first_line} on {backend.description}")
            with progress_bar(options.progress, total=0, unit="run", desc=desc, leave=False, dynamic_ncols=True) as bar:
                prepared = prepare(configs, mode)  # the same list: an optimised interval replaces its candidate
                estimate = worst_case_estimate(prepared.inputs, max_runs, max_total_runs, backend.parallelism)
                check_time(estimate, self.source, *self.limit_key)
                if notify is not None:
                    notify(
                        f"at most {min(len(configs) * max_runs, max_total_runs or math.inf):,} runs: "
                        f"{estimate.describe()} at worst"
                    )
                yield Execution(backend, prepared.rows, seed, options.store, bar, notify), prepared
        finally:
            if lease is None:
                backend.close()


def simulate_first_runs(
    configs: Sequence[Config],
    runs: int,
    *,
    seed: int,
    mode: str = "fast",
    execution: ExecutionOptions | None = None,
    source: str = "<pilot>",
    what: str = "simulating",
) -> list[np.ndarray]:
    """Kernel output rows ``(runs, N_OUT)`` of runs ``0 .. runs - 1`` of every configuration.

    Run r of every configuration draws from the streams of (seed, r), as in :func:`select_best` (the
    plan's calibration pilot, :mod:`mcsim.planning.calibration`, simulates with it). The configurations
    are feasible (the screen's ranked candidates, through the same workload model: not checked again)
    and have fixed intervals (``"optimize"`` is refused: a plan does not search it); ``execution.store``
    is not read.
    """
    execution = execution or ExecutionOptions()
    configs = list(configs)
    if any(c.checkpoint.interval.kind == "optimize" for c in configs):
        raise ValueError('simulate_first_runs: interval "optimize" is not supported; give fixed intervals')
    _check_seed_mode(seed, mode)
    chunk = execution.chunk_runs
    runner = _Runner(dataclasses.replace(execution, store=None), source, ("plan.pilot_runs", "lower plan.pilot_runs"))
    first_line = f"{what} {runs} runs of {len(configs)} candidate{'' if len(configs) == 1 else 's'}"
    with runner.executing(configs, int(seed), mode, (runs, None), "pilot", first_line) as (running, _):
        simulation = _Simulation(running, configs, {}, chunk)
        simulation.simulate(list(range(len(configs))), 0, runs)
    return simulation.rows


# Memory a plan holds per simulated run it keeps: the run's kernel row (N_OUT float64) twice (the task's
# rows kept for reuse and the candidate's rows joined in run order) and the per-run outputs a plan keeps
# (wall time, energy, cost, CO2 as float64 and completion as a bool: mcsim.planning.pool.kept_outputs).
BYTES_PER_KEPT_RUN = 2 * 8 * kernel.N_OUT + 4 * 8 + 1


def check_kept_runs(runs: int, source: str, key: str, what: str, advice: str) -> None:
    """Refuse, before the first run, a plan stage that may keep more runs than fit in memory.

    Parameters
    ----------
    runs : int
        The most runs the stage may keep in memory at once.
    source, key : str
        The plan file and the key the refusal names.
    what, advice : str
        What keeps the runs (``"the pool"``), and the remedy.

    Raises
    ------
    ScenarioError
        When ``runs`` x :data:`BYTES_PER_KEPT_RUN` bytes exceed the memory limit
        (:func:`mcsim.scenario.limits.over_memory_limit`: half the available memory by default).
    """
    need = runs * BYTES_PER_KEPT_RUN
    if (over := over_memory_limit(need)) is not None:
        raise ScenarioError(
            source, key, f"{what} may keep {runs:,} runs in memory, about {format_bytes(need)}, {over}; {advice}"
        )


def worst_case_estimate(
    inputs: Sequence[RunInputs | None], max_runs: int, max_total_runs: int | None, parallelism: int
) -> TimeEstimate:
    """The estimated duration of the most runs a selection may simulate (before the first one).

    Every candidate run ``max_runs`` times, or, when ``max_total_runs`` is smaller, that many
    runs of the most expensive candidate (:func:`mcsim.model.run_estimate.estimate_run`).
    """
    run_s = [estimate_run(i).seconds for i in inputs if i is not None]
    longest = max(run_s, default=0.0)
    cpu_s = sum(run_s) * max_runs
    if max_total_runs is not None:
        cpu_s = min(cpu_s, max_total_runs * longest)
    return TimeEstimate(cpu_s, parallelism, longest)


class _Simulation:
    """KN's draws as simulated runs: tasks of runs start .. stop - 1 through one execution."""

    def __init__(self, execution: Execution, configs: list[Config], weights: Mapping[str, float], chunk: int) -> None:
        self.execution, self.configs, self.weights, self.chunk = execution, configs, weights, chunk
        self.rows: list[np.ndarray] = [np.empty((0, kernel.N_OUT)) for _ in configs]

    def simulate(self, alive: list[int], start: int, stop: int) -> dict[int, np.ndarray]:
        """Kernel rows of runs ``start .. stop - 1`` of the candidates ``alive`` (kept in ``rows`` too)."""
        tasks = [Task(t.config, t.start + start, t.stop + start) for t in plan_tasks(alive, stop - start, self.chunk)]
        bar = self.execution.bar
        bar.total = (bar.total or 0) + sum(t.runs for t in tasks)
        bar.refresh()
        got: dict[int, list[tuple[int, np.ndarray]]] = {i: [] for i in alive}
        self.execution.execute(tasks, lambda task, rows: got[task.config].append((task.start, rows)), "selection tasks")
        new = {}
        for i in alive:
            new[i] = np.concatenate([rows for _, rows in sorted(got[i], key=lambda item: item[0])])
            self.rows[i] = np.concatenate([self.rows[i], new[i]])
        return new

    def draw(self, alive: list[int], start: int, stop: int) -> dict[int, np.ndarray]:
        """Objective values of runs ``start .. stop - 1`` of the candidates ``alive`` (rows kept)."""
        new = self.simulate(alive, start, stop)
        return {i: objective_of_rows(self.configs[i], rows, self.weights) for i, rows in new.items()}

    def cut_off(self, i: int) -> bool:
        """Whether a run of candidate ``i`` was cut off at run.max_wall_days (objective a lower bound)."""
        return bool(np.any(self.rows[i][:, kernel.OUT_COMPLETED] != 1.0))


def _result(outcome: Outcome, simulation: _Simulation, alpha: float) -> SelectionResult:
    values = outcome.values
    longest = max(map(len, values))
    means, _, high = mean_interval(np.array([np.pad(v, (0, longest - len(v)), constant_values=np.nan) for v in values]))
    reason = outcome.reason
    if len(values) == 1:
        pcs = 1.0
    elif outcome.decided:
        pcs = 1.0 - alpha
        reason += f"; indifference zone {outcome.delta:.4g} (objective units)"
    else:
        pcs = bonferroni_pcs(values, outcome.best, outcome.delta) if math.isfinite(outcome.delta) else math.nan
        if math.isfinite(pcs):
            reason += f" (estimated P(correct selection) {pcs:.3f}, Bonferroni over paired t)"
    runs = np.array([len(v) for v in values], dtype=np.int64)
    return SelectionResult(
        best=outcome.best,
        pcs=pcs,
        decided=outcome.decided,
        reason=reason,
        runs=runs,
        eliminated_round=outcome.eliminated,
        means=means,
        half_widths=high - means,
        rows=dict(enumerate(simulation.rows)),
        total_runs=int(runs.sum()),
        configs=tuple(simulation.configs),
        delta=outcome.delta,
        h2=outcome.h2,
        stages=outcome.stages,
    )
