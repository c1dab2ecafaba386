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

:class:`IntervalSearch` holds one configuration's grid and fit; :func:`search_intervals`
searches several configurations' grids together, each grid point's kernel inputs prepared once
(:meth:`mcsim.model.preparation.Prepared.grid_point`), and applies the optima
(:meth:`mcsim.model.preparation.Prepared.fix_interval`). How the grid points' runs are executed
is the caller's (:mod:`mcsim.engine.optimize`: as tasks on the scenario's execution). The
objective per run is the output variable of the same name
(:func:`mcsim.model.run_outputs.run_outputs`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import CheckpointPlan, checkpoint_plan, daly_interval_s
from mcsim.model.preparation import Prepared, with_fixed_interval
from mcsim.model.run_outputs import run_outputs
from mcsim.model.workload import Workload, workload
from mcsim.scenario.config import Config
from mcsim.scenario.schema import Interval

OBJECTIVES = ("wall_time", "energy", "cost")
COARSE_SPREAD, COARSE_POINTS = 4.0, 11
FINE_SPREAD, FINE_POINTS = 1.8, 9
# Runs per grid point when resolving interval = "optimize" (at most the scenario's runs).
OPTIMIZE_RUNS = 300
# The runs of grid points: {configuration: [interval in iterations, ...]} -> {(configuration, interval): rows}.
RunPoints = Callable[[dict[int, list[int]]], dict[tuple[int, int], np.ndarray]]


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
    """The objective per run: the output variable of its name (:func:`mcsim.model.run_outputs.run_outputs`)."""
    if objective == "wall_time":  # the one output of the kernel's wall time alone
        return rows[:, kernel.OUT_WALL_S] / 3600.0
    return run_outputs(cfg, rows, wl, plan)[objective]


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


def _stage_points(search: IntervalSearch, stage: str, evaluated: dict[int, np.ndarray]) -> list[int]:
    """The grid points of one stage of a search: the coarse grid, or the fine grid around the best
    coarse point (``evaluated``: the objective per run of each interval simulated so far)."""
    if stage == "coarse":
        return search.coarse()
    return search.fine({k: float(v.mean()) for k, v in evaluated.items()})


def search_intervals(
    prepared: Prepared, indices: list[int], run_points: RunPoints, bootstrap_seed: int
) -> dict[int, IntervalOptimum]:
    """The optimum checkpoint interval of each configuration ``indices`` of ``prepared``, applied.

    Every configuration's coarse grid is simulated together (``run_points``), then every fine grid;
    each grid point's kernel inputs are prepared once into ``prepared.rows`` (the caller's runs find
    them under ``(configuration, interval)``). Each optimum is then applied: the configuration is
    prepared again with its optimised interval (:meth:`Prepared.fix_interval`).

    Parameters
    ----------
    prepared : Prepared
        The prepared configurations.
    indices : list of int
        Feasible configurations whose interval is optimised.
    run_points : callable
        ``{configuration: [interval, ...]} -> {(configuration, interval): rows}``: the kernel rows of
        the same runs at every grid point (common random numbers).
    bootstrap_seed : int
        Seed of the bootstrap of each optimum's 95 % interval.
    """
    configs = prepared.configs
    searches = {i: IntervalSearch(configs[i], configs[i].checkpoint.optimize_objective) for i in indices}
    evaluated: dict[int, dict[int, np.ndarray]] = {i: {} for i in indices}
    for stage in ("coarse", "fine"):
        points = {
            i: search.coarse()
            if stage == "coarse"
            else search.fine({k: float(v.mean()) for k, v in evaluated[i].items()})
            for i, search in searches.items()
        }
        new = {i: [k for k in ks if k not in evaluated[i]] for i, ks in points.items()}
        grid = {(i, k): prepared.grid_point(i, k) for i, ks in new.items() for k in ks}
        for (i, k), rows in run_points(new).items():
            evaluated[i][k] = searches[i].objective_per_run(k, rows, grid[(i, k)].workload, grid[(i, k)].plan)
    optima = {i: searches[i].optimum(evaluated[i], bootstrap_seed) for i in indices}
    for i, optimum in optima.items():
        prepared.fix_interval(i, optimum.interval_iterations)
    return optima
