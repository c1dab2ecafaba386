"""``simulate(scenario)``: the engine's stages in one straight line.

Each stage takes the previous stage's value and none calls back into an earlier one:

1. :mod:`~mcsim.scenario.draws`: the simulated configurations, with the parameter draws;
2. :mod:`~mcsim.model.preparation`: each prepared once (workload, checkpoint plan, kernel
   inputs; the draw tables'), and the mapping from task key to row simulator;
3. :mod:`~mcsim.engine.tasks`: the units of work (and where their rows go);
4. :mod:`~mcsim.engine.optimize`: ``interval = "optimize"`` resolved, its grid points as tasks
   on the same execution (only when a configuration asks for it);
5. :mod:`~mcsim.engine.execution`: resume store -> backend (:mod:`~mcsim.engine.backends`,
   kernel calls on :mod:`~mcsim.engine.threads`) -> progress bar;
6. :mod:`~mcsim.engine.outputs`: the named outputs from the kernel's columns;
7. :mod:`~mcsim.engine.dataset`: the dataset, coordinates and provenance.

The run-time estimate (:mod:`~mcsim.model.run_estimate`) is checked against the time limit
before anything runs. Run ``r`` always uses the random streams of ``(seed, r)``, so
results do not depend on the chunk size, the thread count, the backend, resumption, or
the configuration's place in the sweep (common random numbers).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.engine.backends import Backend, make_backend
from mcsim.engine.dataset import provenance_attrs, sweep_dataset
from mcsim.engine.execution import Execution, completed_configurations, progress_bar
from mcsim.engine.optimize import COARSE_POINTS, FINE_POINTS, OPTIMIZE_RUNS, optimize_intervals
from mcsim.engine.options import ExecutionOptions
from mcsim.engine.outputs import OutputArrays
from mcsim.engine.resume import PieceStore
from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS, placements, plan_sweep_tasks, plan_tasks
from mcsim.engine.threads import run_kernel
from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import CheckpointPlan
from mcsim.model.preparation import KernelInputs, Prepared, kernel_inputs, prepare_draws
from mcsim.model.run_estimate import time_estimate
from mcsim.model.workload import Workload, workload
from mcsim.scenario.config import Config, Scenario, load_scenario
from mcsim.scenario.draws import DrawPlan, preparation_estimate
from mcsim.scenario.limits import TimeEstimate, check_time, format_duration
from mcsim.scenario.shard import Shard, checked_shard

__all__ = ["OPTIMIZE_RUNS", "provenance_attrs", "run_task", "simulate", "simulate_config"]

COMPILING = f"compiling kernels (first run only, about {kernel.COMPILE_SECONDS:.0f} s)"


def simulate(
    scenario: Scenario | str | Path,
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
    scenario : Scenario, str or path-like
        From :func:`mcsim.load_scenario`; ``scenario.run`` gives runs, seed and mode. A path to a
        scenario file, or the name of a shipped scenario (``"capacity-planning"``), is read with
        :func:`mcsim.load_scenario` first (no overrides: load it yourself to give some), its memory
        checked for the part ``shard`` only (``load_scenario(path, shard=...)`` does the same).
    progress, chunk_runs, workers, scheduler, store, notify
        How the runs are executed (:class:`mcsim.engine.options.ExecutionOptions`: progress bar,
        runs per task, dask workers or scheduler, resume store, one-line messages); none of them
        changes a result.
    shard : Shard, optional
        Simulate only the sweep configurations of this part (:mod:`mcsim.scenario.shard`): the
        result holds only them, along a ``configuration`` dim (the part layout of
        :mod:`mcsim.engine.shards`), and its ``shard`` attribute names the part.
        :func:`mcsim.engine.shards.combine_parts` of every part is the unsharded result.

    Returns
    -------
    xarray.Dataset
        Dims (sweep dims..., [``draw``,] ``run``), or for a part (``configuration``, [``draw``,] ``run``);
        every registered variable with ``units`` and ``long_name``; provenance in the global attributes.
        Identical whatever the backend, chunk size or resumption.

    Raises
    ------
    ScenarioError
        A scenario file that cannot be read or is invalid (one line naming the file and the key);
        when the estimated duration exceeds the limit of :func:`mcsim.scenario.limits.limits`
        (24 h by default).
    BackendUnavailable
        No dask extra, or no dask scheduler answering at ``scheduler``.
    TypeError
        ``shard`` is not a :class:`mcsim.scenario.shard.Shard` (a tuple, ``"i/n"`` text).
    """
    shard = checked_shard(shard)
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, shard=shard)  # sized by the part's share
    options = ExecutionOptions(progress, chunk_runs or DEFAULT_CHUNK_RUNS, workers, scheduler, store, notify)
    _check_draws(scenario, shard, options)
    draws = DrawPlan(scenario, shard)  # stage 1: the simulated configurations
    compiling = kernel.compiled(draws.tabled) is False  # the first run in this environment compiles
    prepared = prepare_draws(draws, scenario.run.mode)  # stage 2: each prepared once
    backend = make_backend(options.workers, options.scheduler)
    try:
        runs = scenario.run.runs
        grid_runs = min(runs, OPTIMIZE_RUNS) * (COARSE_POINTS + FINE_POINTS)  # one interval search at most
        estimate = time_estimate(
            prepared.inputs, prepared.simulated, prepared.to_optimize, runs, grid_runs, backend.parallelism
        )
        check_time(estimate, scenario.source)
        outputs = _execute(scenario, draws, prepared, backend, estimate, compiling, options)  # stages 3 to 6
    finally:
        backend.close()
    shape = scenario.shape if shard is None else (len(shard.flat_indices(len(scenario.configs))),)
    arrays = outputs.arrays(shape + ((draws.count,) if draws.count else ()))
    return sweep_dataset(scenario, draws, arrays)  # stage 7


def _check_draws(scenario: Scenario, shard: Shard | None, options: ExecutionOptions) -> None:
    """Before stage 1: the part ``shard`` of the sweep checked, and the preparation of many draws estimated,
    said and checked against the time limit before the draws are made (with 100,000 draws that took
    minutes before anything was printed)."""
    if shard is not None:
        shard.check_sweep(len(scenario.configs))
    if scenario.run.draws:
        preparation = preparation_estimate(scenario)
        if preparation.cpu_s > 5.0:
            options.say(
                f"preparing {len(scenario.configs) * scenario.run.draws:,} (configuration, draw) pairs: "
                f"{preparation.describe()} at most"
            )


def _execute(
    scenario: Scenario,
    draws: DrawPlan,
    prepared: Prepared,
    backend: Backend,
    estimate: TimeEstimate,
    compiling: bool,
    options: ExecutionOptions,
) -> OutputArrays:
    """Stages 3 to 6: the tasks, the intervals optimised when asked, then every task run and each
    configuration's outputs derived as its last task comes in, under one progress bar."""
    runs, simulated = scenario.run.runs, prepared.simulated
    if draws.count and options.store is not None and not draws.tabled:
        options.store.configs = prepared.configs  # pieces are checked against the (configuration, draw) they ran
    tasks = plan_sweep_tasks(draws, simulated, options.chunk_runs)
    if options.notify is not None:
        options.notify(
            f"running {len(tasks)} tasks ({len(simulated)} configurations x {runs} runs"
            f"{f', {len(prepared.to_optimize)} interval optimisations' if prepared.to_optimize else ''} on "
            f"{backend.description}; {estimate.describe()}"
        )
        if compiling:
            options.notify(COMPILING)
        if estimate.longest_run_s > 2.0:
            options.notify(
                f"one run takes about {format_duration(estimate.longest_run_s)}: progress and Ctrl-C act between runs"
            )
    bar_options = dict(total=len(simulated) * runs, unit="run", desc=scenario.name, leave=False, dynamic_ncols=True)
    with progress_bar(options.progress, **bar_options) as bar:
        if options.notify is None and not bar.disable and compiling:
            bar.set_postfix_str(COMPILING)
        execution = Execution(backend, prepared.rows, scenario.run.seed, options.store, bar, options.notify)
        to_optimize = prepared.to_optimize
        optima = (
            optimize_intervals(execution, prepared, to_optimize, runs, options.chunk_runs, execution.seed)
            if to_optimize
            else {}
        )
        # Each configuration's outputs are derived as its last task comes in (stage 6 of stage 5's rows):
        # the kernel rows of the whole sweep are never held beside the outputs.
        outputs = OutputArrays(prepared, {i: o.ci95_s for i, o in optima.items()}, runs, draws.held)
        where = placements(draws, tasks)
        held = draws.held_configs()
        for config, rows in completed_configurations(execution, tasks, where, simulated, runs, held):
            outputs.add(config, rows)  # the held configurations not simulated (infeasible) too, as NaN runs
    return outputs


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
