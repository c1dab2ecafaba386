"""Checkpoint interval optimiser: the interval that minimises an objective, by simulation.

For one configuration, the objective (mean wall time, energy or cost over runs) is
simulated on a geometric grid of intervals around Daly's (2006) estimate, then on
a finer grid around the best point. Every grid point uses the same runs (common
random numbers: identical failure times), so differences between intervals are
paired and the curve is smooth. The optimum is the vertex of a parabola fitted to
the fine grid in log(interval): the checkpoint overhead ``C/tau + tau/(2M)`` is
symmetric in log(tau) around its minimum, so the parabola fits it well. Its 95 %
interval comes from a bootstrap over runs (resampled runs, refitted vertex).

With exponential failures the optimum lands near Daly's formula; with Weibull
failures of shape k < 1 (early failures more likely) it moves, and docs/model.md
shows by how much.

:class:`IntervalSearch` holds the grid logic only. Stage 3 of :func:`mcsim.simulate`
(and of the selection, :mod:`mcsim.planning.selection`) is :func:`optimize_intervals`:
the grid points as tasks (``Task.optimize_every``) on the scenario's execution
(backend, progress bar and resume store), each grid point's kernel inputs prepared
once (:meth:`mcsim.engine.prepare.Prepared.grid_point`); :func:`optimize_interval`
runs one configuration's grid here, in this process. The objective per run is the
output variable of the same name (:func:`mcsim.engine.outputs.per_run_outputs`).
This module does not import :mod:`mcsim.engine.simulate`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from mcsim.engine.execution import Execution
from mcsim.engine.outputs import per_run_outputs
from mcsim.engine.prepare import KernelInputs, Prepared, kernel_inputs, with_fixed_interval
from mcsim.engine.tasks import OPTIMIZE_SEED_OFFSET, Task, plan_tasks
from mcsim.engine.threads import run_kernel
from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import CheckpointPlan, checkpoint_plan, daly_interval_s
from mcsim.model.workload import Workload, workload
from mcsim.scenario.config import Config
from mcsim.scenario.schema import Interval

OBJECTIVES = ("wall_time", "energy", "cost")
COARSE_SPREAD, COARSE_POINTS = 4.0, 11
FINE_SPREAD, FINE_POINTS = 1.8, 9
# Runs per grid point when resolving interval = "optimize" (at most the scenario's runs).
OPTIMIZE_RUNS = 300


@dataclass(frozen=True)
class IntervalOptimum:
    """The optimum checkpoint interval of one configuration."""

    objective: str
    interval_s: float  # compute time between checkpoints at the optimum, s
    interval_iterations: int  # the same, rounded to whole iterations
    ci95_s: tuple[float, float]  # bootstrap 95 % interval of interval_s
    daly_s: float  # Daly's (2006) estimate, s
    grid_s: tuple[float, ...]  # intervals simulated, s
    grid_mean: tuple[float, ...]  # objective mean at each (units of the output variable)


def objective_per_run(cfg: Config, every: int, rows: np.ndarray, objective: str) -> np.ndarray:
    """Per-run objective of ``cfg`` checkpointed every ``every`` iterations, from its kernel rows.

    Parameters
    ----------
    cfg : Config
        The configuration (its own interval setting is ignored).
    every : int
        Iterations between checkpoints the rows were simulated with.
    rows : ndarray
        Kernel output ``(runs, N_OUT)``.
    objective : {"wall_time", "energy", "cost"}
        Wall time [h], facility energy [MWh] or cost [USD] per run, as the output
        variables of the same names.
    """
    if objective == "wall_time":
        return rows[:, kernel.OUT_WALL_S] / 3600.0
    fixed = with_fixed_interval(cfg, every)
    wl = workload(fixed)
    return _objective(fixed, wl, checkpoint_plan(fixed, wl), rows, objective)


def _objective(cfg: Config, wl: Workload, plan: CheckpointPlan, rows: np.ndarray, objective: str) -> np.ndarray:
    """The objective per run: the output variable of its name (:func:`mcsim.engine.outputs.per_run_outputs`)."""
    if objective == "wall_time":  # the one output of the kernel's wall time alone
        return rows[:, kernel.OUT_WALL_S] / 3600.0
    return per_run_outputs(cfg, wl, plan, rows)[objective]


def _vertex(log_k: np.ndarray, means: np.ndarray) -> float:
    a, b, _ = np.polyfit(log_k, means, 2)
    if a <= 0:  # no curvature (flat or noisy): the best grid point
        return float(log_k[int(np.argmin(means))])
    return float(np.clip(-b / (2 * a), log_k[0], log_k[-1]))


class IntervalSearch:
    """The grid of one configuration's interval search: coarse points, fine points, the fit.

    Parameters
    ----------
    cfg : Config
        A feasible configuration (its own interval setting is ignored).
    objective : {"wall_time", "energy", "cost"}
        Per-run output whose mean is minimised.
    """

    def __init__(self, cfg: Config, objective: str = "wall_time") -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        wl = workload(cfg)
        if not wl.feasible:
            raise ValueError(f"infeasible configuration: {wl.infeasible_reason}")
        daly = dataclasses.replace(cfg, checkpoint=dataclasses.replace(cfg.checkpoint, interval=Interval("young_daly")))
        plan = checkpoint_plan(daly, wl)
        self.cfg = cfg
        self.objective = objective
        self.iteration_s = wl.iteration_time_s
        self.k_daly = plan.every_iterations
        self.k_max = max(1, wl.iterations)  # an interval of all iterations: no checkpoint at all
        self.daly_s = cast(float, daly_interval_s(plan.stall_s, plan.system_mtbf_s))  # scalars in, a scalar out

    def _grid(self, center: float, spread: float, points: int) -> list[int]:
        raw = np.exp(np.linspace(math.log(center / spread), math.log(center * spread), points))
        return sorted({int(min(self.k_max, max(1, round(k)))) for k in raw})

    def coarse(self) -> list[int]:
        """Intervals (iterations) of the coarse grid: Daly/4 .. 4 Daly."""
        return self._grid(self.k_daly, COARSE_SPREAD, COARSE_POINTS)

    def fine(self, means: dict[int, float]) -> list[int]:
        """Intervals of the fine grid around the best coarse point (``means``: objective mean per interval)."""
        best = min(self.coarse(), key=lambda k: means[k])
        return self._grid(best, FINE_SPREAD, FINE_POINTS)

    def objective_per_run(
        self, every: int, rows: np.ndarray, wl: Workload | None = None, plan: CheckpointPlan | None = None
    ) -> np.ndarray:
        """The objective per run of the grid point ``every`` from its kernel rows (``wl``, ``plan``: the
        grid point's workload and checkpoint plan when already prepared)."""
        if wl is None or plan is None:
            return objective_per_run(self.cfg, every, rows, self.objective)
        return _objective(with_fixed_interval(self.cfg, every), wl, plan, rows, self.objective)

    def optimum(self, evaluated: dict[int, np.ndarray], seed: int, bootstrap: int = 200) -> IntervalOptimum:
        """Fit the optimum to every grid point's per-run objective (the same runs at every point).

        Parameters
        ----------
        evaluated : dict
            Objective per run, by interval in iterations: every coarse and fine point.
        seed : int
            Seed of the bootstrap's resampling.
        bootstrap : int
            Bootstrap resamples for the 95 % interval.
        """
        ks = sorted(evaluated)
        means = {k: float(evaluated[k].mean()) for k in ks}
        fine = self.fine(means)
        if len(fine) < 3:
            fine = ks
        iteration_s = self.iteration_s
        if len(fine) < 3:  # one or two candidate intervals (a very short run): take the best, no fit
            k = min(ks, key=lambda k: means[k])
            return IntervalOptimum(
                self.objective,
                k * iteration_s,
                k,
                (k * iteration_s, k * iteration_s),
                self.daly_s,
                tuple(x * iteration_s for x in ks),
                tuple(means[x] for x in ks),
            )
        log_k = np.log(np.array(fine, dtype=float))
        samples = np.stack([evaluated[k] for k in fine])  # (points, runs), paired by run
        runs = samples.shape[1]
        vertex = _vertex(log_k, samples.mean(axis=1))
        rng = np.random.default_rng(seed)
        boots = [_vertex(log_k, samples[:, rng.integers(0, runs, runs)].mean(axis=1)) for _ in range(bootstrap)]
        low, high = np.percentile(boots, [2.5, 97.5])
        return IntervalOptimum(
            objective=self.objective,
            interval_s=math.exp(vertex) * iteration_s,
            interval_iterations=int(max(1, round(math.exp(vertex)))),
            ci95_s=(math.exp(low) * iteration_s, math.exp(high) * iteration_s),
            daly_s=self.daly_s,
            grid_s=tuple(k * iteration_s for k in ks),
            grid_mean=tuple(means[k] for k in ks),
        )


def optimize_interval(
    cfg: Config, objective: str = "wall_time", runs: int = 400, seed: int = 0, mode: str = "fast", bootstrap: int = 200
) -> IntervalOptimum:
    """Find the checkpoint interval minimising the mean of ``objective`` for ``cfg``, in this process.

    Parameters
    ----------
    cfg : Config
        A feasible configuration (its own interval setting is ignored).
    objective : {"wall_time", "energy", "cost"}
        Per-run output whose mean is minimised.
    runs, seed, mode
        Monte Carlo runs per grid point (runs ``0 .. runs - 1`` of the streams of
        ``seed``, the same at every point), seed, mode.
    bootstrap : int
        Bootstrap resamples for the 95 % interval.
    """
    search = IntervalSearch(cfg, objective)
    evaluated: dict[int, np.ndarray] = {}

    def evaluate(ks: list[int]) -> None:
        for k in ks:
            if k not in evaluated:
                inputs = kernel_inputs(with_fixed_interval(cfg, k), mode)
                evaluated[k] = search.objective_per_run(
                    k, run_kernel(inputs, seed, 0, runs), inputs.workload, inputs.plan
                )

    evaluate(search.coarse())
    evaluate(search.fine({k: float(v.mean()) for k, v in evaluated.items()}))
    return search.optimum(evaluated, seed, bootstrap)


def optimize_intervals(
    execution: Execution, prepared: Prepared, indices: list[int], runs: int, chunk: int, seed: int
) -> dict[int, IntervalOptimum]:
    """Resolve ``interval = "optimize"`` of the configurations ``indices``, the grid points as tasks.

    Every grid point is a task (``Task.optimize_every``) of min(runs, OPTIMIZE_RUNS)
    runs on the streams of seed + OPTIMIZE_SEED_OFFSET, its kernel inputs prepared once
    into ``prepared.rows``, run by the execution's backend, saved by its store and counted
    by its progress bar like the reported runs. The configurations themselves are not
    changed (:meth:`mcsim.engine.prepare.Prepared.fix_interval` applies an optimum).

    Parameters
    ----------
    execution : Execution
        Backend, resume store and progress bar (its mapping is ``prepared.rows``).
    prepared : Prepared
        The prepared configurations.
    indices : list of int
        Feasible configurations whose interval is optimised.
    runs, chunk, seed
        The scenario's runs per configuration, runs per task and seed.
    """
    configs = prepared.configs
    runs = min(runs, OPTIMIZE_RUNS)
    searches = {i: IntervalSearch(configs[i], configs[i].checkpoint.optimize_objective) for i in indices}
    evaluated: dict[int, dict[int, np.ndarray]] = {i: {} for i in indices}
    grid: dict[tuple[int, int], KernelInputs] = {}

    def grid_tasks(points: dict[int, list[int]]) -> list[Task]:
        tasks = []
        for i, ks in points.items():
            for k in ks:
                if k not in evaluated[i]:
                    grid[(i, k)] = prepared.grid_point(i, k)
                    tasks += plan_tasks([i], runs, chunk, optimize_every=k)
        return tasks

    def collect(tasks: list[Task]) -> None:
        rows_of: dict[Task, np.ndarray] = {}
        execution.execute(tasks, rows_of.__setitem__, "interval optimiser tasks")
        points: dict[tuple[int, int], list[Task]] = {}
        for task in rows_of:
            assert task.optimize_every is not None
            points.setdefault((task.config, task.optimize_every), []).append(task)
        for (i, k), chunks in points.items():
            rows = np.concatenate([rows_of[t] for t in sorted(chunks, key=lambda t: t.start)])
            evaluated[i][k] = searches[i].objective_per_run(k, rows, grid[(i, k)].workload, grid[(i, k)].plan)

    coarse = grid_tasks({i: search.coarse() for i, search in searches.items()})
    bar = execution.bar
    fine_bound = FINE_POINTS * runs * len(indices)  # until the fine grids are known
    bar.total += sum(t.runs for t in coarse) + fine_bound
    bar.refresh()
    collect(coarse)
    fine = grid_tasks({i: searches[i].fine({k: float(v.mean()) for k, v in evaluated[i].items()}) for i in indices})
    bar.total += sum(t.runs for t in fine) - fine_bound
    bar.refresh()
    collect(fine)
    optima = {i: searches[i].optimum(evaluated[i], seed + OPTIMIZE_SEED_OFFSET) for i in indices}
    if execution.notify is not None:
        for i, optimum in optima.items():
            label = "" if len(configs) == 1 else f" of configuration {i}"
            execution.notify(
                f"optimized checkpoint interval{label} ({optimum.objective}): {optimum.interval_s:.4g} s "
                f"[{optimum.ci95_s[0]:.4g}, {optimum.ci95_s[1]:.4g}], Daly {optimum.daly_s:.4g} s"
            )
    return optima
