"""``simulate(scenario)``: the engine's stages in one straight line.

Each stage takes the previous stage's value and none calls back into an earlier one:

1. :mod:`~mcsim.engine.draws`: the simulated configurations, with the parameter draws;
2. :mod:`~mcsim.engine.prepare`: each prepared once (workload, checkpoint plan, kernel
   inputs; the draw tables'), and the mapping from task key to row simulator;
3. :mod:`~mcsim.engine.tasks`: the units of work (and where their rows go);
4. :mod:`~mcsim.engine.optimize`: ``interval = "optimize"`` resolved, its grid points as tasks
   on the same execution (only when a configuration asks for it);
5. :mod:`~mcsim.engine.execution`: resume store -> backend (:mod:`~mcsim.engine.backends`,
   kernel calls on :mod:`~mcsim.engine.threads`) -> progress bar;
6. :mod:`~mcsim.engine.outputs`: the named outputs from the kernel's columns;
7. :mod:`~mcsim.engine.dataset`: the dataset, coordinates and provenance.

The run-time estimate (:mod:`~mcsim.engine.estimate`) is checked against the time limit
before anything runs. Run ``r`` always uses the random streams of ``(seed, r)``, so
results do not depend on the chunk size, the thread count, the backend, resumption, or
the configuration's place in the sweep (common random numbers).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import xarray as xr

from mcsim.engine.backends import make_backend
from mcsim.engine.dataset import provenance_attrs, sweep_dataset
from mcsim.engine.draws import DrawPlan
from mcsim.engine.estimate import time_estimate
from mcsim.engine.execution import Execution, completed_configurations, progress_bar
from mcsim.engine.optimize import COARSE_POINTS, FINE_POINTS, OPTIMIZE_RUNS, optimize_intervals
from mcsim.engine.outputs import OutputArrays
from mcsim.engine.prepare import KernelInputs, Prepared, kernel_inputs, prepare, prepare_tables
from mcsim.engine.resume import PieceStore
from mcsim.engine.shards import Shard
from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS, placements, plan_sweep_tasks, plan_tasks
from mcsim.engine.threads import run_kernel
from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import CheckpointPlan
from mcsim.model.workload import Workload, workload
from mcsim.scenario.config import Config, Scenario
from mcsim.scenario.limits import TimeEstimate, check_time, format_duration

# Preparation of one (configuration, draw), s: 11.9 ms measured on 2 loaded cores for
# capacity-planning-uncertain with 16,384 draws (stragglers.sigma drawn: the slowest, its factor
# law is integrated per draw); an upper bound for the estimate printed and checked first.
PREPARE_SECONDS_PER_DRAW = 0.012
# ... plus, in fast mode, the law of a short checkpoint interval's block (mcsim.model.block_law), once
# per distinct (G, sigma, K): 34-39 ms measured for the largest blocks (K = 64) on this 2-core
# machine, 1-8 ms for K <= 32. An upper bound: most pairs share a law or need none.
PREPARE_SECONDS_PER_SHORT_BLOCK_LAW = 0.045

__all__ = ["OPTIMIZE_RUNS", "provenance_attrs", "run_task", "simulate", "simulate_config"]


def simulate(
    scenario: Scenario,
    *,
    progress: bool | None = None,
    chunk_runs: int | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    store: PieceStore | None = None,
    notify: Callable[[str], None] | None = None,
    shard: Shard | None = None,
) -> xr.Dataset:
    """Simulate every configuration of a scenario (or one part of them: ``shard``).

    Parameters
    ----------
    scenario : Scenario
        From :func:`mcsim.load_scenario`; ``scenario.run`` gives runs, seed and mode.
    progress : bool, optional
        Show a tqdm bar over all runs (runs/s, configurations done), the interval
        optimiser's included; by default only when stderr is a terminal.
    chunk_runs : int, optional
        Runs per task (default 250); does not change the results.
    workers : int, optional
        Run the tasks on a dask ``LocalCluster`` of this many worker processes
        (at most the CPUs this process may use).
    scheduler : str, optional
        Run the tasks on the dask scheduler at this address (``tcp://HOST:PORT``).
    store : PieceStore, optional
        Saves each finished task and reuses the saved ones (resume), the interval
        optimiser's too.
    notify : callable, optional
        Called with one-line messages (backend in use, time estimate, tasks resumed).
    shard : Shard, optional
        Simulate only the sweep configurations of this part (:mod:`mcsim.engine.shards`);
        the others' per-run variables are NaN, and the ``shard`` attribute names the part.
        :func:`mcsim.engine.shards.combine_parts` of every part is the unsharded result.

    Returns
    -------
    xarray.Dataset
        Dims (sweep dims..., ``run``); every registered variable with ``units`` and
        ``long_name``; provenance in the global attributes. Identical whatever the
        backend, chunk size or resumption.

    Raises
    ------
    ScenarioError
        When the estimated duration exceeds the limit of :func:`mcsim.scenario.limits.limits`
        (24 h by default).
    BackendUnavailable
        No dask extra, or no dask scheduler answering at ``scheduler``.
    """
    run = scenario.run
    chunk = chunk_runs or DEFAULT_CHUNK_RUNS
    if chunk < 1:  # before anything starts
        raise ValueError(f"chunk_runs must be >= 1, got {chunk}")
    if shard is not None:
        shard.check_sweep(len(scenario.configs))
    _check_preparation(scenario, notify)
    draws = DrawPlan(scenario)
    prepared = _prepare(scenario, draws, store)
    feasible = prepared.feasible
    if shard is not None:  # simulated configuration c is (sweep configuration c // draws, draw c % draws)
        feasible = [c for c in feasible if shard.holds(c // max(draws.count, 1))]
    to_optimize = [i for i in feasible if prepared.configs[i].checkpoint.interval.kind == "optimize"]
    tasks = plan_sweep_tasks(draws, feasible, chunk)
    where = placements(draws, tasks)
    backend = make_backend(workers, scheduler)
    try:
        grid_runs = min(run.runs, OPTIMIZE_RUNS) * (COARSE_POINTS + FINE_POINTS)  # one interval search at most
        estimate = time_estimate(prepared.inputs, feasible, to_optimize, run.runs, grid_runs, backend.parallelism)
        check_time(estimate, scenario.source)
        if notify is not None:
            notify(
                f"running {len(tasks)} tasks ({len(feasible)} configurations x {run.runs} runs"
                f"{f', {len(to_optimize)} interval optimisations' if to_optimize else ''}) on "
                f"{backend.description}; {estimate.describe()}"
            )
            if kernel.compiled(draws.tabled) is False:
                notify(f"compiling kernels (first run only, about {kernel.COMPILE_SECONDS:.0f} s)")
            if estimate.longest_run_s > 2.0:
                notify(
                    f"one run takes about {format_duration(estimate.longest_run_s)}: progress and Ctrl-C "
                    "act between runs"
                )
        with progress_bar(
            progress,
            total=len(feasible) * run.runs,
            unit="run",
            desc=scenario.name,
            leave=False,
            dynamic_ncols=True,
        ) as bar:
            if notify is None and not bar.disable and kernel.compiled(draws.tabled) is False:
                bar.set_postfix_str(f"compiling kernels (first run only, about {kernel.COMPILE_SECONDS:.0f} s)")
            execution = Execution(backend, prepared.rows, run.seed, store, bar, notify)
            optima = (
                optimize_intervals(execution, prepared, to_optimize, run.runs, chunk, run.seed) if to_optimize else {}
            )
            for i, optimum in optima.items():
                prepared.fix_interval(i, optimum.interval_iterations)
            # Each configuration's outputs are derived as its last task comes in: the kernel rows of the
            # whole sweep are never held beside the outputs (issue 26 item 4).
            outputs = OutputArrays(prepared, {i: o.ci95_s for i, o in optima.items()}, run.runs)
            for config, rows in completed_configurations(execution, tasks, where, feasible, run.runs):
                outputs.add(config, rows)
    finally:
        backend.close()
    shape = scenario.shape + ((draws.count,) if draws.count else ())
    ds = sweep_dataset(scenario, draws, outputs.arrays(shape))
    if shard is not None:
        ds.attrs["shard"] = shard.label
    return ds


def _check_preparation(scenario: Scenario, notify: Callable[[str], None] | None) -> None:
    """Estimate the preparation of many parameter draws, say it and check it against the time limit, first.

    Each (configuration, draw) gets its kernel parameters before any run, and its estimate
    with them; with 100,000 draws that took minutes before anything was printed.
    """
    if not scenario.run.draws:
        return
    simulated = len(scenario.configs) * scenario.run.draws
    per_pair = PREPARE_SECONDS_PER_DRAW + (PREPARE_SECONDS_PER_SHORT_BLOCK_LAW if scenario.run.mode == "fast" else 0.0)
    estimate = TimeEstimate(simulated * per_pair, 1, 0.0)
    check_time(estimate, scenario.source, "run.draws")
    if notify is not None and estimate.cpu_s > 5.0:
        notify(f"preparing {simulated:,} (configuration, draw) pairs: {estimate.describe()} at most")


def _prepare(scenario: Scenario, draws: DrawPlan, store: PieceStore | None) -> Prepared:
    """Stage 2 for the configurations of ``draws``: draw tables, or each simulated configuration alone."""
    run = scenario.run
    if draws.tabled:  # every configuration's draws evaluated together; tasks over its draws x runs rows
        return prepare_tables(scenario.configs, draws.configs, draws.arrays, draws.first_runs, run.runs, run.mode)
    prepared = prepare(draws.configs, run.mode)  # workload and plan: once per configuration
    if draws.count and store is not None:
        store.configs = prepared.configs  # pieces are checked against the (configuration, draw) they ran
    return prepared


def run_task(
    cfg: Config,
    seed: int,
    mode: str,
    start: int,
    stop: int,
    threads: int | None = None,
    inputs: KernelInputs | None = None,
) -> np.ndarray:
    """Kernel output rows ``(stop - start, N_OUT)`` of one feasible configuration.

    Parameters
    ----------
    cfg : Config
        The configuration (must be feasible).
    seed : int
        Scenario seed.
    mode : {"fast", "exact"}
        Execution mode.
    start, stop : int
        Global run indices ``start .. stop - 1``.
    threads : int, optional
        Numba threads for this call.
    inputs : KernelInputs, optional
        ``kernel_inputs(cfg, mode)`` when already prepared (then ``cfg`` is not read).
    """
    return run_kernel(kernel_inputs(cfg, mode) if inputs is None else inputs, seed, start, stop, threads)


def simulate_config(
    cfg: Config, runs: int, seed: int, mode: str, first_run: int = 0, chunk_runs: int | None = None
) -> tuple[np.ndarray, Workload, CheckpointPlan | None]:
    """Kernel output matrix ``(runs, N_OUT)`` of one configuration (NaN if infeasible), its workload and plan.

    Runs ``first_run .. first_run + runs - 1``, ``chunk_runs`` per kernel call.
    """
    wl = workload(cfg)
    out = np.full((runs, kernel.N_OUT), np.nan)
    if not wl.feasible:
        return out, wl, None
    inputs = kernel_inputs(cfg, mode, wl)
    for task in plan_tasks([0], runs, chunk_runs or DEFAULT_CHUNK_RUNS):
        out[task.start : task.stop] = run_kernel(inputs, seed, first_run + task.start, first_run + task.stop)
    return out, wl, inputs.plan
