"""Selecting the best configuration by simulation: Kim–Nelson's fully sequential procedure.

:func:`select_best` simulates a set of feasible candidate configurations in stages and
stops when the recommended one is the best within an indifference zone with
probability at least 1 − alpha, or says why it could not decide within its budget of
runs. The procedure is KN (Kim & Nelson 2001) with common random numbers: run r of
every candidate draws from the streams of (seed, r), so the runs of two candidates are
paired and the variance of their difference, not of each alone, sets how many runs
are needed. Definitions and guarantees: docs/model.md, "Selecting the best
configuration".

The procedure itself, on arrays, is :func:`mcsim.kim_nelson.kim_nelson`; this module
validates, simulates and reports. Runs go through the same tasks, backends (local,
dask) and resume store as ``mcsim run``; stage k + 1 adds runs n .. n' - 1 of each surviving candidate, so the
selection depends only on the seed, never on workers, chunking or resumption.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from mcsim.analysis.decisions import mean_interval
from mcsim.engine.backends import make_backend
from mcsim.engine.estimate import RunInputs, estimate_run
from mcsim.engine.execution import Execution, progress_bar
from mcsim.engine.optimize import OPTIMIZE_RUNS, optimize_intervals
from mcsim.engine.outputs import config_outputs_per_run
from mcsim.engine.prepare import prepare
from mcsim.engine.resume import PieceStore
from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS, Task, plan_tasks
from mcsim.kernels import interface as kernel
from mcsim.model.workload import workload
from mcsim.planning.kim_nelson import Outcome, bonferroni_pcs, kim_nelson
from mcsim.scenario.config import Config
from mcsim.scenario.limits import TimeEstimate, check_time

OBJECTIVES = ("cost", "energy", "wall_time", "co2")
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
        pass them with the rows to :func:`mcsim.engine.outputs.config_outputs_per_run`.
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


def _check_arguments(
    configs: Sequence[Config],
    seed: int,
    mode: str,
    alpha: float,
    indifference: float,
    first_runs: int,
    max_runs: int,
    max_total_runs: int | None,
    chunk_runs: int | None,
) -> None:
    """Raise ValueError with one clear line for any argument out of its domain."""
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
    if not _is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed: expected a whole number from 0 to 2**63 - 1, got {seed!r}")
    if mode not in MODES:
        raise ValueError(f"mode: expected 'fast' or 'exact', got {mode!r}")
    if not _is_real(alpha) or not 0 < alpha < 0.5:
        raise ValueError(f"alpha: expected a number in (0, 0.5), got {alpha!r}")
    if not _is_real(indifference) or not 0 < indifference < 1:
        raise ValueError(f"indifference: expected a fraction of the best mean in (0, 1), got {indifference!r}")
    if not _is_int(first_runs) or first_runs < 2:
        raise ValueError(f"first_runs: expected a whole number >= 2 (10 or more recommended), got {first_runs!r}")
    if not _is_int(max_runs) or max_runs < first_runs:
        raise ValueError(f"max_runs: expected a whole number >= first_runs = {first_runs}, got {max_runs!r}")
    if max_total_runs is not None and (not _is_int(max_total_runs) or max_total_runs < len(configs) * first_runs):
        raise ValueError(
            f"max_total_runs: expected a whole number >= {len(configs) * first_runs} (first_runs "
            f"for each of the {len(configs)} candidates), got {max_total_runs!r}"
        )
    if chunk_runs is not None and (not _is_int(chunk_runs) or chunk_runs < 1):
        raise ValueError(f"chunk_runs: expected a whole number >= 1, got {chunk_runs!r}")


def objective_values(cfg: Config, rows: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
    """Per-run objective of a feasible configuration from its kernel rows: Σ weight × output.

    Outputs as :func:`mcsim.engine.outputs.per_run_outputs` computes them (cost USD, energy MWh,
    wall_time h, co2 t CO2e).
    """
    return weighted_objective(config_outputs_per_run(cfg, rows), weights)


def weighted_objective(outputs: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Per-run objective Σ weight × output of per-run outputs (named as :func:`mcsim.engine.outputs.per_run_outputs`
    names them)."""
    # An array, never the empty sum's 0: every caller's weights have a nonzero one (_check_objective, the plan schema).
    return cast(np.ndarray, sum(weight * outputs[name] for name, weight in weights.items() if weight))


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
    workers: int | None = None,
    scheduler: str | None = None,
    store: PieceStore | None = None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
    chunk_runs: int | None = None,
    source: str = "<selection>",
) -> SelectionResult:
    """Select the configuration with the lowest mean objective, with a stated probability.

    Kim & Nelson's (2001) fully sequential procedure KN with common random numbers,
    screened at the end of stages of runs (docs/model.md, "Selecting the best
    configuration").

    Parameters
    ----------
    configs : sequence of Config
        Feasible candidates (the caller screens them); ``interval = "optimize"`` is
        resolved first, as :func:`mcsim.simulate` does.
    objective : str or mapping
        "cost" (USD), "energy" (MWh), "wall_time" (h) or "co2" (t CO2e), or a mapping of
        those names to weights >= 0: the weighted sum of the per-run outputs. Minimised.
    seed : int
        Run r of every candidate uses the streams of (seed, r).
    mode : {"fast", "exact"}
        Kernel mode.
    alpha : float
        The recommendation is within the indifference zone of the best with
        probability >= 1 - alpha (0 < alpha < 0.5).
    indifference : float
        Indifference zone relative to the best mean: δ = indifference × the best
        first-stage mean (objective units).
    first_runs : int
        First-stage runs n0 of every candidate (>= 2; KN's variances come from them).
    max_runs : int
        Most runs of one candidate.
    max_total_runs : int, optional
        Most runs in all (at least ``len(configs) * first_runs``).
    workers, scheduler : optional
        Backend, as for :func:`mcsim.simulate`.
    store : PieceStore, optional
        Resume store; must be for this seed and mode. Its ``configs`` are set to the candidates.
    progress : bool, optional
        One tqdm bar over the runs; by default only when stderr is a terminal.
    notify : callable, optional
        Called with one line per stage (survivors, runs spent) and the backend's messages.
    chunk_runs : int, optional
        Runs per task (default 250); does not change the result.
    source : str
        The plan file, for the message of a refusal.

    Returns
    -------
    SelectionResult

    Raises
    ------
    ValueError
        An argument out of its domain, an infeasible candidate, or a store made for
        another seed or mode.
    BackendUnavailable
        No dask extra, or no dask scheduler answering at ``scheduler``.
    ScenarioError
        When the largest number of runs the arguments allow is estimated to take longer
        than the limit of :func:`mcsim.scenario.limits.limits` (24 h by default), before any run.
    """
    weights = _check_objective(objective)
    _check_arguments(configs, seed, mode, alpha, indifference, first_runs, max_runs, max_total_runs, chunk_runs)
    configs = list(configs)
    seed = int(seed)
    if store is not None:
        header = store.header(Task(0, 0, 1))
        if header["seed"] != seed or header["mode"] != mode:
            raise ValueError(
                f"store: made for seed {header['seed']} and mode {header['mode']!r}, not seed {seed} and mode {mode!r}"
            )
        store.configs = configs  # pieces are checked against the candidate they ran
    chunk = chunk_runs or DEFAULT_CHUNK_RUNS
    runner = _Runner(workers, scheduler, progress, notify, source)
    first_line = f"selecting the best of {len(configs)} candidates by simulation"
    with runner.executing(configs, seed, mode, store, (max_runs, max_total_runs), "select", first_line) as (
        execution,
        prepared,
    ):
        to_optimize = [i for i, c in enumerate(configs) if c.checkpoint.interval.kind == "optimize"]
        runs = min(max_runs, OPTIMIZE_RUNS)
        optima = optimize_intervals(execution, prepared, to_optimize, runs, chunk, seed) if to_optimize else {}
        for i, optimum in optima.items():
            prepared.fix_interval(i, optimum.interval_iterations)
        simulation = _Simulation(execution, configs, weights, chunk)
        outcome = kim_nelson(
            len(configs),
            simulation.draw,
            alpha=alpha,
            indifference=indifference,
            first_runs=first_runs,
            max_runs=max_runs,
            max_total_runs=max_total_runs,
            excluded=simulation.cut_off,
            notify=notify,
        )
    return _result(outcome, simulation, alpha)


@dataclass(frozen=True)
class _Runner:
    """Where and how a simulation runs: the backend (``workers``, ``scheduler``), the progress bar, the
    messages and the plan file named in a refusal."""

    workers: int | None
    scheduler: str | None
    progress: bool | None
    notify: Callable[[str], None] | None
    source: str
    # The key a refusal for time blames, and its remedy.
    limit_key: tuple[str, str] = ("plan.max_runs", "lower plan.max_runs or plan.max_total_runs")

    @contextmanager
    def executing(
        self,
        configs: list[Config],
        seed: int,
        mode: str,
        store: PieceStore | None,
        most_runs: tuple[int, int | None],
        desc: str,
        first_line: str,
    ) -> Iterator[tuple[Execution, Any]]:
        """The execution and prepared candidates of a simulation of at most ``most_runs = (max_runs,
        max_total_runs)`` runs (refused before any run when that is estimated to take longer than the limit);
        the backend is closed after."""
        max_runs, max_total_runs = most_runs
        notify = self.notify
        try:
            backend = make_backend(self.workers, self.scheduler)
        except ValueError as err:
            raise ValueError(f"workers: {err}") from None
        try:
            if notify is not None:
                notify(f"{first_line} on {backend.description}")
            with progress_bar(self.progress, total=0, unit="run", desc=desc, leave=False, dynamic_ncols=True) as bar:
                prepared = prepare(configs, mode)  # the same list: an optimised interval replaces its candidate
                estimate = worst_case_estimate(prepared.inputs, max_runs, max_total_runs, backend.parallelism)
                check_time(estimate, self.source, *self.limit_key)
                if notify is not None:
                    notify(
                        f"at most {min(len(configs) * max_runs, max_total_runs or math.inf):,} runs: "
                        f"{estimate.describe()} at worst"
                    )
                yield Execution(backend, prepared.rows, seed, store, bar, notify), prepared
        finally:
            backend.close()


def simulate_runs(
    configs: Sequence[Config],
    runs: int,
    *,
    seed: int,
    mode: str = "fast",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
    chunk_runs: int | None = None,
    source: str = "<pilot>",
    what: str = "simulating",
) -> list[np.ndarray]:
    """Kernel output rows ``(runs, N_OUT)`` of runs ``0 .. runs - 1`` of every configuration.

    Run r of every configuration draws from the streams of (seed, r), as in :func:`select_best` (the
    plan's calibration pilot, :mod:`mcsim.planning.calibration`, simulates with it). The configurations
    have fixed intervals (``"optimize"`` is refused: a plan does not search it).
    """
    configs = list(configs)
    if any(c.checkpoint.interval.kind == "optimize" for c in configs):
        raise ValueError('simulate_runs: interval "optimize" is not supported; give fixed intervals')
    _check_arguments(configs, seed, mode, 0.05, 0.005, max(2, runs), max(2, runs), None, chunk_runs)
    chunk = chunk_runs or DEFAULT_CHUNK_RUNS
    runner = _Runner(workers, scheduler, progress, notify, source, ("plan.pilot_runs", "lower plan.pilot_runs"))
    first_line = f"{what} {runs} runs of {len(configs)} candidate{'' if len(configs) == 1 else 's'}"
    with runner.executing(configs, int(seed), mode, None, (runs, None), "pilot", first_line) as (execution, _):
        simulation = _Simulation(execution, configs, {"cost": 1.0}, chunk)
        simulation.draw(list(range(len(configs))), 0, runs)
    return simulation.rows


def worst_case_estimate(
    inputs: Sequence[RunInputs | None], max_runs: int, max_total_runs: int | None, parallelism: int
) -> TimeEstimate:
    """The estimated duration of the most runs a selection may simulate (before the first one).

    Every candidate run ``max_runs`` times, or, when ``max_total_runs`` is smaller, that many
    runs of the most expensive candidate (:func:`mcsim.engine.estimate.estimate_run`).
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

    def draw(self, alive: list[int], start: int, stop: int) -> dict[int, np.ndarray]:
        """Objective values of runs ``start .. stop - 1`` of the candidates ``alive`` (rows kept)."""
        tasks = [Task(t.config, t.start + start, t.stop + start) for t in plan_tasks(alive, stop - start, self.chunk)]
        bar = self.execution.bar
        bar.total = (bar.total or 0) + sum(t.runs for t in tasks)
        bar.refresh()
        got: dict[int, list[tuple[int, np.ndarray]]] = {i: [] for i in alive}
        self.execution.execute(tasks, lambda task, rows: got[task.config].append((task.start, rows)), "selection tasks")
        values = {}
        for i in alive:
            rows = np.concatenate([rows for _, rows in sorted(got[i], key=lambda item: item[0])])
            self.rows[i] = np.concatenate([self.rows[i], rows])
            values[i] = objective_values(self.configs[i], rows, self.weights)
        return values

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
