"""Stage 4 of :func:`mcsim.simulate`: ``interval = "optimize"`` resolved, its grid points run as tasks.

The search itself, the grid, the objective per run and the fitted optimum, is the model's
(:mod:`mcsim.model.interval_search`). Here its grid points are run the way the reported runs are:
each grid point is a task (``Task.optimize_every``) of min(runs, OPTIMIZE_RUNS) runs on the streams
of seed + OPTIMIZE_SEED_OFFSET, run by the execution's backend, saved by its resume store and
counted by its progress bar (:func:`optimize_intervals`, for :func:`mcsim.simulate` and the
planner's selection); :func:`optimize_interval` runs one configuration's grid in this process.
This module does not import :mod:`mcsim.engine.simulate`.
"""

from __future__ import annotations

import numpy as np

from mcsim.engine.execution import Execution
from mcsim.engine.tasks import OPTIMIZE_SEED_OFFSET, Task, plan_tasks
from mcsim.engine.threads import run_kernel
from mcsim.model.interval_search import (
    COARSE_POINTS,
    FINE_POINTS,
    OPTIMIZE_RUNS,
    IntervalOptimum,
    IntervalSearch,
    search_intervals,
)
from mcsim.model.preparation import Prepared, kernel_inputs, with_fixed_interval
from mcsim.scenario.config import Config

__all__ = [
    "COARSE_POINTS",
    "FINE_POINTS",
    "OPTIMIZE_RUNS",
    "IntervalOptimum",
    "optimize_interval",
    "optimize_intervals",
]


class _GridTasks:
    """Runs grid points as tasks on an execution: the coarse grids first, then the fine ones.

    The progress bar counts the grid points' runs: the coarse ones and, until the fine grids are
    known, an upper bound of the fine ones, corrected when they are.
    """

    def __init__(self, execution: Execution, runs: int, chunk: int, configurations: int) -> None:
        self.execution, self.runs, self.chunk = execution, runs, chunk
        self.fine_bound = FINE_POINTS * runs * configurations
        self.calls = 0

    def __call__(self, points: dict[int, list[int]]) -> dict[tuple[int, int], np.ndarray]:
        tasks = [task for i, ks in points.items() for k in ks for task in plan_tasks([i], self.runs, self.chunk, k)]
        bar = self.execution.bar
        bar.total += sum(t.runs for t in tasks) + (self.fine_bound if self.calls == 0 else -self.fine_bound)
        bar.refresh()
        self.calls += 1
        rows_of: dict[Task, np.ndarray] = {}
        self.execution.execute(tasks, rows_of.__setitem__, "interval optimiser tasks")
        chunks: dict[tuple[int, int], list[Task]] = {}
        for task in rows_of:
            assert task.optimize_every is not None
            chunks.setdefault((task.config, task.optimize_every), []).append(task)
        return {
            point: np.concatenate([rows_of[t] for t in sorted(point_tasks, key=lambda t: t.start)])
            for point, point_tasks in chunks.items()
        }


def optimize_intervals(
    execution: Execution, prepared: Prepared, indices: list[int], runs: int, chunk: int, seed: int
) -> dict[int, IntervalOptimum]:
    """Resolve ``interval = "optimize"`` of the configurations ``indices``, the grid points as tasks.

    Every grid point is a task (``Task.optimize_every``) of min(runs, OPTIMIZE_RUNS) runs on the
    streams of seed + OPTIMIZE_SEED_OFFSET, its kernel inputs prepared once into ``prepared.rows``,
    run by the execution's backend, saved by its store and counted by its progress bar like the
    reported runs. Each optimum is then applied (:func:`mcsim.model.interval_search.search_intervals`).

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
    if not indices:
        return {}
    grid_tasks = _GridTasks(execution, min(runs, OPTIMIZE_RUNS), chunk, len(indices))
    optima = search_intervals(prepared, indices, grid_tasks, seed + OPTIMIZE_SEED_OFFSET)
    if execution.notify is not None:
        for i, optimum in optima.items():
            label = "" if len(prepared.configs) == 1 else f" of configuration {i}"
            execution.notify(
                f"optimized checkpoint interval{label} ({optimum.objective}): {optimum.interval_s:.4g} s "
                f"[{optimum.ci95_s[0]:.4g}, {optimum.ci95_s[1]:.4g}], Daly {optimum.daly_s:.4g} s"
            )
    return optima


def optimize_interval(
    cfg: Config, objective: str = "wall_time", runs: int = 400, seed: int = 0, mode: str = "fast", bootstrap: int = 200
) -> IntervalOptimum:
    """Find the checkpoint interval minimising the mean of ``objective`` for ``cfg``, in this process.

    Parameters
    ----------
    cfg, objective
        The configuration and the per-run output minimised, as :class:`~mcsim.model.interval_search.IntervalSearch`
        takes them.
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
