"""``simulate(scenario)``: run the Monte Carlo kernel over every configuration.

The public function validates and prepares; the kernel only computes. Runs of
a configuration are handed to the kernel in chunks (for the progress bar);
run ``r`` always uses the random streams of ``(seed, r)``, so results do not
depend on the chunk size, the thread count, or the configuration's place in
the sweep (common random numbers).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numba
import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from mcsim._version import __version__
from mcsim.engine.backends import make_backend
from mcsim.engine.draws import DrawPlan
from mcsim.engine.optimize import COARSE_POINTS, FINE_POINTS, IntervalOptimum, IntervalSearch
from mcsim.engine.resume import PieceStore
from mcsim.engine.tasks import (
    DEFAULT_CHUNK_RUNS,
    OPTIMIZE_SEED_OFFSET,
    PreparedConfigs,
    Task,
    estimate_run,
    kernel_inputs,
    plan_tasks,
    run_task,
    with_fixed_interval,
)
from mcsim.io.variables import PER_CONFIG, PER_RUN, build_dataset, coordinate_attrs
from mcsim.kernels import types as kernel
from mcsim.model.checkpointing import CheckpointPlan
from mcsim.model.energy import (
    ENERGY_PARTS,
    J_PER_MWH,
    ideal_iteration_energy_j,
    power_model,
    run_co2_t,
    run_cost_usd,
    run_energy_j,
)
from mcsim.model.workload import Workload, workload
from mcsim.scenario.config import Config, Scenario
from mcsim.scenario.limits import TimeEstimate, check_time, format_duration
from mcsim.scenario.schema import field_meta


def simulate_config(
    cfg: Config, runs: int, seed: int, mode: str, first_run: int = 0, chunk_runs: int | None = None
) -> tuple[np.ndarray, Workload, CheckpointPlan | None]:
    """Kernel output matrix ``(runs, N_OUT)`` of one configuration (NaN if infeasible).

    Runs ``first_run .. first_run + runs - 1``, ``chunk_runs`` per kernel call.
    """
    wl = workload(cfg)
    out = np.full((runs, kernel.N_OUT), np.nan)
    if not wl.feasible:
        return out, wl, None
    inputs = kernel_inputs(cfg, mode, wl)
    for task in plan_tasks([0], runs, chunk_runs or DEFAULT_CHUNK_RUNS):
        out[task.start : task.stop] = run_task(
            cfg, seed, mode, first_run + task.start, first_run + task.stop, inputs=inputs
        )
    return out, wl, inputs.plan


def _per_run_outputs(cfg: Config, wl: Workload, plan: CheckpointPlan | None, out: np.ndarray) -> dict[str, np.ndarray]:
    if plan is None:  # infeasible: NaN everywhere, not completed
        nan = np.full(out.shape[0], np.nan)
        return {name: (nan == 0.0 if name == "completed" else nan) for name in PER_RUN}
    wall_s = out[:, kernel.OUT_WALL_S]
    energy = run_energy_j(cfg, wl, plan, power_model(cfg, wl), out)
    total_j = sum(energy[k] for k in ENERGY_PARTS)
    cost = run_cost_usd(cfg, wall_s, total_j)
    co2 = run_co2_t(cfg, wall_s, total_j)
    completed = out[:, kernel.OUT_COMPLETED] == 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        # ETTR = ideal time of the work done / wall time. A completed run did all the
        # iterations; a censored one only the OUT_ITERATIONS_DONE that survived, so its
        # ETTR stays in [0, 1] instead of setting the full job against a truncated wall time.
        done_ideal_s = np.where(completed, wl.ideal_time_s, out[:, kernel.OUT_ITERATIONS_DONE] * wl.iteration_time_s)
        ettr = np.where(wall_s > 0, done_ideal_s / wall_s, np.nan)
    return {
        "wall_time": wall_s / 3600.0,
        "energy": total_j / J_PER_MWH,
        "cost": cost["allocation"] + cost["electricity"],
        "co2": co2["operational"] + co2["embodied"],
        "n_failures": out[:, kernel.OUT_FAILURES],
        "lost_time": out[:, kernel.OUT_LOST_S] / 3600.0,
        "checkpoint_time": out[:, kernel.OUT_CHECKPOINT_S] / 3600.0,
        "recovery_time": out[:, kernel.OUT_RECOVERY_S] / 3600.0,
        "straggler_time": out[:, kernel.OUT_STRAGGLER_S] / 3600.0,
        "straggler_transient_time": out[:, kernel.OUT_STRAGGLER_TRANSIENT_S] / 3600.0,
        "straggler_persistent_time": out[:, kernel.OUT_STRAGGLER_PERSISTENT_S] / 3600.0,
        "n_memory_recoveries": out[:, kernel.OUT_MEMORY_RECOVERIES],
        "spare_wait_time": out[:, kernel.OUT_SPARE_WAIT_S] / 3600.0,
        "ettr": ettr,
        "completed": completed,
        **{f"energy_{k}": energy[k] / J_PER_MWH for k in (*ENERGY_PARTS, "gpu")},
        "cost_allocation": cost["allocation"],
        "cost_electricity": cost["electricity"],
        "co2_operational": co2["operational"],
        "co2_embodied": co2["embodied"],
    }


def _per_config_outputs(cfg: Config, wl: Workload, plan: CheckpointPlan | None) -> dict[str, object]:
    nan = math.nan
    iteration_j = ideal_iteration_energy_j(cfg, wl, power_model(cfg, wl)) if plan else nan
    return {
        "iteration_time": wl.iteration_time_s,
        "compute_time": wl.compute_time_s,
        "comm_time": wl.comm_time_s,
        "iterations": wl.iterations,
        "checkpoint_interval": plan.every_iterations * wl.iteration_time_s if plan else nan,
        "checkpoint_stall": plan.stall_s if plan else nan,
        "memory_per_gpu": wl.memory_per_gpu_gb,
        "mfu_ideal": wl.mfu_ideal,
        "feasible": wl.feasible,
        "infeasible_reason": wl.infeasible_reason,
        "ideal_time": wl.ideal_time_s / 3600.0,
        "checkpoint_write_time": plan.size_bytes / (plan.write_gbps * 1e9) if plan else nan,
        "checkpoint_load_time": plan.load_s if plan else nan,
        "system_mtbf": plan.system_mtbf_s / 3600.0 if plan else nan,
        "iteration_energy": iteration_j,
        "gpu_power": iteration_j / (cfg.parallelism.gpus * wl.iteration_time_s),
    }


# Runs per grid point when resolving interval = "optimize" (at most the scenario's runs).
OPTIMIZE_RUNS = 300


class _Execution:
    """Tasks through the resume store, a backend and one progress bar.

    ``prepared``: the configurations' workloads and kernel inputs (computed once per
    configuration and shared with the caller); made from ``configs`` when not given.
    """

    def __init__(
        self,
        backend,
        configs: list[Config],
        run,
        store: PieceStore | None,
        bar,
        notify,
        prepared: PreparedConfigs | None = None,
    ) -> None:
        self.backend, self.configs, self.run, self.store, self.bar = backend, configs, run, store, bar
        self.notify = notify
        self.prepared = PreparedConfigs(configs, run.mode) if prepared is None else prepared

    def execute(self, tasks: list[Task], on_rows, what: str = "tasks") -> None:
        """Call ``on_rows(task, rows)`` for every task: saved ones loaded, the others run and saved."""
        pending = []
        for task in tasks:
            rows = self.store.load(task) if self.store is not None else None
            if rows is None:
                pending.append(task)
            else:
                self.bar.update(task.runs)
                on_rows(task, rows)
        if self.notify is not None and len(pending) < len(tasks):
            self.notify(
                f"resuming: {len(tasks) - len(pending)} of {len(tasks)} {what} already done ({self.store.folder})"
            )
        reported = 0

        def on_runs(n: int) -> None:
            nonlocal reported
            reported += n
            self.bar.update(n)

        # The prepared configurations: the backend reuses their kernel inputs.
        for task, rows in self.backend.run(pending, self.prepared, self.run.seed, self.run.mode, on_runs=on_runs):
            if self.store is not None:
                self.store.save(task, rows)
            self.bar.update(task.runs - reported)
            reported = 0
            on_rows(task, rows)


def _optimize_intervals(execution: _Execution, indices: list[int], chunk: int) -> dict[int, IntervalOptimum]:
    """Resolve ``interval = "optimize"`` of the configurations ``indices``, the grid points as tasks.

    Every grid point is a task (``Task.optimize_every``) of min(runs, OPTIMIZE_RUNS)
    runs on the streams of seed + 1, run by the backend, saved by the store and
    counted by the progress bar like the reported runs.
    """
    run, configs = execution.run, execution.configs
    runs = min(run.runs, OPTIMIZE_RUNS)
    searches = {i: IntervalSearch(configs[i], configs[i].checkpoint.optimize_objective) for i in indices}
    evaluated: dict[int, dict[int, np.ndarray]] = {i: {} for i in indices}

    def grid_tasks(points: dict[int, list[int]]) -> list[Task]:
        return [
            task
            for i, ks in points.items()
            for k in ks
            if k not in evaluated[i]
            for task in plan_tasks([i], runs, chunk, optimize_every=k)
        ]

    def collect(tasks: list[Task]) -> None:
        rows_of: dict[Task, np.ndarray] = {}
        execution.execute(tasks, rows_of.__setitem__, "interval optimiser tasks")
        points: dict[tuple[int, int], list[Task]] = {}
        for task in rows_of:
            points.setdefault((task.config, task.optimize_every), []).append(task)
        for (i, k), chunks in points.items():
            rows = np.concatenate([rows_of[t] for t in sorted(chunks, key=lambda t: t.start)])
            evaluated[i][k] = searches[i].objective_per_run(k, rows)

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
    optima = {i: searches[i].optimum(evaluated[i], run.seed + OPTIMIZE_SEED_OFFSET) for i in indices}
    if execution.notify is not None:
        for i, optimum in optima.items():
            label = "" if len(configs) == 1 else f" of configuration {i}"
            execution.notify(
                f"optimized checkpoint interval{label} ({optimum.objective}): {optimum.interval_s:.4g} s "
                f"[{optimum.ci95_s[0]:.4g}, {optimum.ci95_s[1]:.4g}], Daly {optimum.daly_s:.4g} s"
            )
    return optima


def _time_estimate(
    configs: list[Config],
    feasible: list[int],
    to_optimize: list[int],
    run,
    parallelism: int,
    prepared: PreparedConfigs | None = None,
) -> TimeEstimate:
    """Estimated kernel time of every task, the optimiser's grid points included."""
    grid_runs = min(run.runs, OPTIMIZE_RUNS) * (COARSE_POINTS + FINE_POINTS)
    cpu_s, longest = 0.0, 0.0
    optimized = set(to_optimize)
    prepared = PreparedConfigs(configs, run.mode) if prepared is None else prepared
    for i in feasible:
        run_s = estimate_run(prepared.inputs(i)).seconds
        cpu_s += run_s * (run.runs + (grid_runs if i in optimized else 0))
        longest = max(longest, run_s)
    return TimeEstimate(cpu_s, parallelism, longest)


def simulate(
    scenario: Scenario,
    *,
    progress: bool | None = None,
    chunk_runs: int | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    store: PieceStore | None = None,
    notify=None,
) -> xr.Dataset:
    """Simulate every configuration of a scenario.

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

    Returns
    -------
    xarray.Dataset
        Dims (sweep dims..., ``run``); every registered variable with ``units`` and
        ``long_name``; provenance in the global attributes. Identical whatever the
        backend, chunk size or resumption.

    Raises
    ------
    ScenarioError
        When the estimated duration exceeds the limit of :func:`mcsim.budget.limits`
        (24 h by default).
    BackendUnavailable
        No dask extra, or no dask scheduler answering at ``scheduler``.
    """
    run = scenario.run
    shape = scenario.shape
    configs = list(scenario.configs)
    draws = DrawPlan(scenario)
    if draws.tabled:  # every configuration's draws evaluated together; tasks over its draws x runs rows
        prepared = draws.prepared(run.mode)
        configs, shape = list(prepared.configs), shape + (draws.count,)
    else:
        if draws.count:
            configs, shape = draws.configs(), shape + (draws.count,)
            if store is not None:
                store.configs = configs  # pieces are checked against the (configuration, draw) they ran
        prepared = PreparedConfigs(configs, run.mode)  # workload and plan: once per configuration
    feasible = [i for i in range(len(configs)) if prepared.workload(i).feasible]
    to_optimize = [i for i in feasible if configs[i].checkpoint.interval.kind == "optimize"]
    chunk = chunk_runs or DEFAULT_CHUNK_RUNS
    # validates chunk before anything starts
    tasks = draws.tasks(feasible, chunk) if draws.count else plan_tasks(feasible, run.runs, chunk)
    backend = make_backend(workers, scheduler)
    try:
        estimate = _time_estimate(configs, feasible, to_optimize, run, backend.parallelism, prepared)
        check_time(estimate, scenario.source)
        if notify is not None:
            notify(
                f"running {len(tasks)} tasks ({len(feasible)} configurations x {run.runs} runs"
                f"{f', {len(to_optimize)} interval optimisations' if to_optimize else ''}) on "
                f"{backend.description}; {estimate.describe()}"
            )
            if estimate.longest_run_s > 2.0:
                notify(
                    f"one run takes about {format_duration(estimate.longest_run_s)}: progress and Ctrl-C "
                    "act between runs"
                )
        with tqdm(
            total=len(feasible) * run.runs,
            disable=None if progress is None else not progress,
            unit="run",
            desc=scenario.name,
            leave=False,
            dynamic_ncols=True,
        ) as bar:
            execution = _Execution(backend, configs, run, store, bar, notify, prepared)
            optima = _optimize_intervals(execution, to_optimize, chunk) if to_optimize else {}
            for i, optimum in optima.items():
                configs[i] = with_fixed_interval(configs[i], optimum.interval_iterations)
            left = {i: 0 for i in feasible}
            for task in tasks:
                for piece in draws.pieces(task):
                    left[piece[0]] += 1
            done = [0]
            outs = {i: np.full((run.runs, kernel.N_OUT), np.nan) for i in feasible}

            def place(task: Task, rows: np.ndarray) -> None:
                for config, run_start, run_stop, row_start, row_stop in draws.pieces(task):
                    outs[config][run_start:run_stop] = rows[row_start:row_stop]
                    left[config] -= 1
                    done[0] += left[config] == 0
                if not bar.disable:
                    bar.set_postfix_str(
                        f"{done[0]}/{len(feasible)} configurations, "
                        f"{done[0] / max(bar.format_dict['elapsed'], 1e-9):.2f} configs/s",
                        refresh=False,
                    )

            execution.execute(tasks, place)
    finally:
        backend.close()

    data = _output_arrays(configs, prepared, outs, optima, shape, run.runs)
    dims = tuple(axis.dim for axis in scenario.axes) + (("draw",) if draws.count else ())
    coords = {axis.dim: list(axis.coords) for axis in scenario.axes}
    coords["run"] = np.arange(run.runs)
    if draws.count:
        coords["draw"] = np.arange(draws.count)
    attrs = provenance_attrs(scenario)
    ds = build_dataset(data, dims, coords, attrs)
    for axis in scenario.axes:
        ds[axis.dim].attrs.update(_coordinate_attrs(axis))
    return draws.annotate(ds)


# Per-configuration variables that are not float64.
_CONFIG_DTYPES = {"feasible": bool, "iterations": np.int64, "infeasible_reason": object}


def _output_arrays(
    configs: list[Config],
    prepared: PreparedConfigs,
    outs: dict[int, np.ndarray],
    optima: dict[int, IntervalOptimum],
    shape: tuple[int, ...],
    runs: int,
) -> dict[str, np.ndarray]:
    """Every registered variable as an array of the sweep ``shape`` (per run: plus ``runs``).

    Filled by flat configuration index (C order), each array in its final dtype; ``outs``
    holds the kernel rows of the feasible configurations.
    """
    n = len(configs)
    per_run = {name: np.empty((n, runs), dtype=bool if name == "completed" else float) for name in PER_RUN}
    per_config = {name: np.empty(n, dtype=_CONFIG_DTYPES.get(name, float)) for name in PER_CONFIG}
    for flat, cfg in enumerate(configs):
        wl = prepared.workload(flat)
        plan = prepared.inputs(flat).plan if wl.feasible else None
        out = outs[flat] if flat in outs else np.full((runs, kernel.N_OUT), np.nan)
        for name, values in _per_run_outputs(cfg, wl, plan, out).items():
            per_run[name][flat] = values
        for name, value in _per_config_outputs(cfg, wl, plan).items():
            per_config[name][flat] = value
        low, high = optima[flat].ci95_s if flat in optima else (math.nan, math.nan)
        per_config["checkpoint_interval_ci_low"][flat] = low
        per_config["checkpoint_interval_ci_high"][flat] = high
    return {
        **{k: v.reshape(shape + (runs,)) for k, v in per_run.items()},
        **{k: v.reshape(shape) for k, v in per_config.items()},
    }


def _coordinate_attrs(axis) -> dict[str, str]:
    """``long_name`` and ``units`` of a sweep coordinate, from the schema field it sweeps."""
    parts = axis.key.split(".")
    meta = field_meta(parts[0], parts[-1])
    numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in axis.coords)
    return coordinate_attrs(axis.key, meta, numeric)


def provenance_attrs(scenario: Scenario) -> dict[str, object]:
    """Global attributes: version, scenario TOML, seed, runs, mode, creation time, history.

    ``Conventions``, ``title`` and ``history`` are the CF-1.10 §2.6.2
    attributes; ``history`` records when and by which mcsim version the file
    was made, for which scenario, runs, seed and mode.
    """
    run = scenario.run
    created = datetime.now(UTC).isoformat(timespec="seconds")
    return {
        "title": f"mcsim Monte Carlo results: {scenario.name}",
        "mcsim_version": __version__,
        "numba_version": numba.__version__,
        "scenario_name": scenario.name,
        "scenario_source": scenario.source,
        "scenario_toml": scenario.to_toml(),
        "seed": run.seed,
        "runs": run.runs,
        "mode": run.mode,
        "sweep_dims": " ".join(axis.dim for axis in scenario.axes),
        "created": created,
        "Conventions": "CF-1.10",
        "history": (
            f"{created}: mcsim {__version__} simulated scenario {scenario.name!r}, "
            f"{run.runs} runs, seed {run.seed}, {run.mode} mode"
        ),
    }
