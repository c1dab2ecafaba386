"""``simulate(scenario)``: run the Monte Carlo kernel over every configuration.

The public function validates and prepares; the kernel only computes. Runs of
a configuration are handed to the kernel in chunks (for the progress bar);
run ``r`` always uses the random streams of ``(seed, r)``, so results do not
depend on the chunk size, the thread count, or the configuration's place in
the sweep (common random numbers).
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timezone

import numba
import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from . import __version__
from .backends import make_backend
from .checkpointing import CheckpointPlan, checkpoint_plan
from .energy import (ENERGY_PARTS, J_PER_MWH, ideal_iteration_energy_j, power_model, run_co2_t,
                     run_cost_usd, run_energy_j)
from .kernels import montecarlo as mc
from .resume import PieceStore
from .scenario import Config, Scenario
from .schema import Interval
from .tasks import DEFAULT_CHUNK_RUNS, plan_tasks, run_task
from .variables import PER_CONFIG, PER_RUN, build_dataset
from .workload import Workload, workload



def simulate_config(cfg: Config, runs: int, seed: int, mode: str, first_run: int = 0,
                    chunk_runs: int | None = None) -> tuple[np.ndarray, Workload, CheckpointPlan | None]:
    """Kernel output matrix ``(runs, N_OUT)`` of one configuration (NaN if infeasible).

    Runs ``first_run .. first_run + runs - 1``, ``chunk_runs`` per kernel call.
    """
    wl = workload(cfg)
    out = np.full((runs, mc.N_OUT), np.nan)
    if not wl.feasible:
        return out, wl, None
    for task in plan_tasks([0], runs, chunk_runs or DEFAULT_CHUNK_RUNS):
        out[task.start:task.stop] = run_task(cfg, seed, mode, first_run + task.start, first_run + task.stop)
    return out, wl, checkpoint_plan(cfg, wl)


def _per_run_outputs(cfg: Config, wl: Workload, plan: CheckpointPlan | None,
                     out: np.ndarray) -> dict[str, np.ndarray]:
    if plan is None:  # infeasible: NaN everywhere, not completed
        nan = np.full(out.shape[0], np.nan)
        return {name: (nan == 0.0 if name == "completed" else nan) for name in PER_RUN}
    wall_s = out[:, mc.OUT_WALL_S]
    energy = run_energy_j(cfg, wl, plan, power_model(cfg, wl), out)
    total_j = sum(energy[k] for k in ENERGY_PARTS)
    cost = run_cost_usd(cfg, wall_s, total_j)
    co2 = run_co2_t(cfg, wall_s, total_j)
    with np.errstate(invalid="ignore", divide="ignore"):
        ettr = wl.ideal_time_s / wall_s
    return {
        "wall_time": wall_s / 3600.0,
        "energy": total_j / J_PER_MWH,
        "cost": cost["allocation"] + cost["electricity"],
        "co2": co2["operational"] + co2["embodied"],
        "n_failures": out[:, mc.OUT_FAILURES],
        "lost_time": out[:, mc.OUT_LOST_S] / 3600.0,
        "checkpoint_time": out[:, mc.OUT_CHECKPOINT_S] / 3600.0,
        "recovery_time": out[:, mc.OUT_RECOVERY_S] / 3600.0,
        "straggler_time": out[:, mc.OUT_STRAGGLER_S] / 3600.0,
        "straggler_transient_time": out[:, mc.OUT_STRAGGLER_TRANSIENT_S] / 3600.0,
        "straggler_persistent_time": out[:, mc.OUT_STRAGGLER_PERSISTENT_S] / 3600.0,
        "n_memory_recoveries": out[:, mc.OUT_MEMORY_RECOVERIES],
        "spare_wait_time": out[:, mc.OUT_SPARE_WAIT_S] / 3600.0,
        "ettr": ettr,
        "completed": out[:, mc.OUT_COMPLETED] == 1.0,
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


def _resolve_optimized_interval(cfg: Config, run, notify):
    """Replace ``interval = "optimize"`` by the simulated optimum, in whole iterations."""
    from .optimize import optimize_interval

    # Tuned on a stream of its own (seed + 1), so the reported runs are not the ones it was tuned on.
    optimum = optimize_interval(cfg, objective=cfg.checkpoint.optimize_objective,
                                runs=min(run.runs, OPTIMIZE_RUNS), seed=run.seed + 1, mode=run.mode)
    if notify is not None:
        notify(f"optimized checkpoint interval ({optimum.objective}): {optimum.interval_s:.4g} s "
               f"[{optimum.ci95_s[0]:.4g}, {optimum.ci95_s[1]:.4g}], Daly {optimum.daly_s:.4g} s")
    fixed = dataclasses.replace(cfg, checkpoint=dataclasses.replace(
        cfg.checkpoint, interval=Interval("iterations", float(optimum.interval_iterations))))
    return optimum, fixed


def simulate(scenario: Scenario, *, progress: bool | None = None, chunk_runs: int | None = None,
             workers: int | None = None, scheduler: str | None = None, store: PieceStore | None = None,
             notify=None) -> xr.Dataset:
    """Simulate every configuration of a scenario.

    Parameters
    ----------
    scenario : Scenario
        From :func:`mcsim.load_scenario`; ``scenario.run`` gives runs, seed and mode.
    progress : bool, optional
        Show a tqdm bar over all runs (runs/s, configurations done); by default only
        when stderr is a terminal.
    chunk_runs : int, optional
        Runs per task (default 250); does not change the results.
    workers : int, optional
        Run the tasks on a dask ``LocalCluster`` of this many worker processes.
    scheduler : str, optional
        Run the tasks on the dask scheduler at this address.
    store : PieceStore, optional
        Saves each finished task and reuses the saved ones (resume).
    notify : callable, optional
        Called with one-line messages (backend in use, tasks resumed).

    Returns
    -------
    xarray.Dataset
        Dims (sweep dims..., ``run``); every registered variable with ``units`` and
        ``long_name``; provenance in the global attributes. Identical whatever the
        backend, chunk size or resumption.
    """
    run = scenario.run
    shape = scenario.shape
    configs = list(scenario.configs)
    workloads = [workload(cfg) for cfg in configs]
    feasible = [i for i, wl in enumerate(workloads) if wl.feasible]
    optima = {}
    for i in feasible:
        if configs[i].checkpoint.interval.kind == "optimize":
            optima[i], configs[i] = _resolve_optimized_interval(configs[i], run, notify)
    tasks = plan_tasks(feasible, run.runs, chunk_runs or DEFAULT_CHUNK_RUNS)
    outs = {i: np.full((run.runs, mc.N_OUT), np.nan) for i in feasible}
    pending = []
    for task in tasks:
        rows = store.load(task) if store is not None else None
        if rows is None:
            pending.append(task)
        else:
            outs[task.config][task.start:task.stop] = rows
    left = {i: 0 for i in feasible}
    for task in pending:
        left[task.config] += 1
    if notify is not None and len(pending) < len(tasks):
        notify(f"resuming: {len(tasks) - len(pending)} of {len(tasks)} tasks already done ({store.folder})")
    backend = make_backend(workers, scheduler)
    if notify is not None:
        notify(f"running {len(pending)} tasks ({len(feasible)} configurations x {run.runs} runs) on "
               f"{backend.description}")
    waiting = set(pending)
    done_runs = sum(t.stop - t.start for t in tasks if t not in waiting)
    with tqdm(total=len(feasible) * run.runs, initial=done_runs, disable=None if progress is None else not progress,
              unit="run", desc=scenario.name, leave=False, dynamic_ncols=True) as bar:
        configs_done = sum(1 for n in left.values() if n == 0)
        try:
            for task, rows in backend.run(pending, configs, run.seed, run.mode):
                outs[task.config][task.start:task.stop] = rows
                if store is not None:
                    store.save(task, rows)
                left[task.config] -= 1
                configs_done += left[task.config] == 0
                bar.update(rows.shape[0])
                bar.set_postfix_str(f"{configs_done}/{len(feasible)} configurations, "
                                    f"{configs_done / max(bar.format_dict['elapsed'], 1e-9):.2f} configs/s",
                                    refresh=False)
        finally:
            backend.close()

    per_run = {name: np.empty(shape + (run.runs,), dtype=object if name == "completed" else float)
               for name in PER_RUN}
    per_config = {name: np.empty(shape, dtype=object) for name in PER_CONFIG}
    for flat, (cfg, wl) in enumerate(zip(configs, workloads)):
        index = np.unravel_index(flat, shape) if shape else ()
        plan = checkpoint_plan(cfg, wl) if wl.feasible else None
        out = outs.get(flat, np.full((run.runs, mc.N_OUT), np.nan))
        for name, values in _per_run_outputs(cfg, wl, plan, out).items():
            per_run[name][index] = values
        for name, value in _per_config_outputs(cfg, wl, plan).items():
            per_config[name][index] = value
        low, high = optima[flat].ci95_s if flat in optima else (math.nan, math.nan)
        per_config["checkpoint_interval_ci_low"][index] = low
        per_config["checkpoint_interval_ci_high"][index] = high
    per_run["completed"] = per_run["completed"].astype(bool)
    casts = {"feasible": bool, "iterations": np.int64, "infeasible_reason": object}
    data = {**per_run, **{k: v.astype(casts.get(k, float)) for k, v in per_config.items()}}
    dims = tuple(axis.dim for axis in scenario.axes)
    coords = {axis.dim: list(axis.coords) for axis in scenario.axes}
    coords["run"] = np.arange(run.runs)
    attrs = provenance_attrs(scenario)
    return build_dataset(data, dims, coords, attrs)


def provenance_attrs(scenario: Scenario) -> dict[str, object]:
    """Global attributes: version, scenario TOML, seed, runs, mode, creation time, history.

    ``Conventions``, ``title`` and ``history`` are the CF-1.10 §2.6.2
    attributes; ``history`` records when and by which mcsim version the file
    was made, for which scenario, runs, seed and mode.
    """
    run = scenario.run
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
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
        "history": (f"{created}: mcsim {__version__} simulated scenario {scenario.name!r}, "
                    f"{run.runs} runs, seed {run.seed}, {run.mode} mode"),
    }
