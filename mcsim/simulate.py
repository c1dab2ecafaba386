"""``simulate(scenario)``: run the Monte Carlo kernel over every configuration.

The public function validates and prepares; the kernel only computes. Runs of
a configuration are handed to the kernel in chunks (for the progress bar);
run ``r`` always uses the random streams of ``(seed, r)``, so results do not
depend on the chunk size, the thread count, or the configuration's place in
the sweep (common random numbers).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

import numba
import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from . import __version__
from .checkpointing import CheckpointPlan, checkpoint_plan
from .energy import (J_PER_MWH, ideal_iteration_energy_j, power_model, run_co2_t, run_cost_usd,
                     run_energy_j)
from .kernels import montecarlo as mc
from .scenario import Config, Scenario
from .stragglers import factor_law
from .variables import PER_CONFIG, PER_RUN, build_dataset
from .workload import Workload, workload

# A run with more failures than this is censored: a guard against parameters
# that would make one run take hours (Llama 3 saw 419 in 54 days).
MAX_FAILURES_PER_RUN = 1_000_000
# The facility-level parts of `energy`, which add up to it.
ENERGY_PARTS = ("compute", "wait", "checkpoint", "recovery", "lost", "network", "node")
STRATEGY_CODES = {"sync": mc.STRATEGY_SYNC, "async": mc.STRATEGY_ASYNC, "gockpt": mc.STRATEGY_ASYNC,
                  "in_memory": mc.STRATEGY_IN_MEMORY}


def run_params(cfg: Config, wl: Workload, plan: CheckpointPlan, mode: str) -> mc.RunParams:
    """The kernel's scalars for one feasible configuration."""
    st = cfg.stragglers
    ranks = float(cfg.parallelism.gpus)
    law = factor_law(ranks, st.sigma)
    episode_law = factor_law(ranks, st.sigma, floor=st.episode_slowdown)
    return mc.RunParams(
        iterations=wl.iterations,
        compute_time_s=wl.compute_time_s,
        comm_time_s=wl.comm_time_s,
        n_ranks=ranks,
        sigma=st.sigma,
        job_sigma=st.job_sigma,
        strategy=STRATEGY_CODES[cfg.checkpoint.strategy],
        checkpoint_every=plan.every_iterations,
        checkpoint_stall_s=plan.stall_s,
        checkpoint_write_s=plan.write_s,
        replicate_s=plan.replicate_s,
        persist_every=cfg.checkpoint.in_memory_persist_every,
        load_s=plan.load_s,
        load_memory_s=plan.load_memory_s,
        episode_rate_per_s=st.episode_rate_per_node_day * cfg.nodes / 86400.0,
        episode_mean_s=st.episode_hours * 3600.0,
        episode_slowdown=st.episode_slowdown,
        spare_nodes=-1 if cfg.hardware.spare_nodes is None else cfg.hardware.spare_nodes,
        max_wall_s=cfg.run.max_wall_days * 86400.0,
        max_failures=MAX_FAILURES_PER_RUN,
        fast=mode == "fast",
        fast_min_block=law.fast_min_block(),
        factor_mean=law.mean,
        factor_std=law.std,
        fast_min_block_episode=episode_law.fast_min_block(),
        factor_mean_episode=episode_law.mean,
        factor_std_episode=episode_law.std,
    )


def simulate_config(cfg: Config, runs: int, seed: int, mode: str, first_run: int = 0,
                    chunk_runs: int | None = None, progress=None) -> tuple[np.ndarray, Workload, CheckpointPlan | None]:
    """Kernel output matrix ``(runs, N_OUT)`` of one configuration (NaN if infeasible)."""
    wl = workload(cfg)
    out = np.full((runs, mc.N_OUT), np.nan)
    if not wl.feasible:
        if progress is not None:
            progress.update(runs)
        return out, wl, None
    plan = checkpoint_plan(cfg, wl)
    params = run_params(cfg, wl, plan, mode)
    chunk = chunk_runs or max(64, 128 * numba.get_num_threads())
    for start in range(0, runs, chunk):
        stop = min(runs, start + chunk)
        mc.simulate_runs(params, plan.classes, seed, first_run + start, out[start:stop])
        if progress is not None:
            progress.update(stop - start)
    return out, wl, plan


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
        "iteration_energy": ideal_iteration_energy_j(cfg, wl, power_model(cfg, wl)) if plan else nan,
        "gpu_power": (ideal_iteration_energy_j(cfg, wl, power_model(cfg, wl))
                      / (cfg.parallelism.gpus * wl.iteration_time_s)) if plan else nan,
    }


def simulate(scenario: Scenario, *, progress: bool | None = None,
             chunk_runs: int | None = None) -> xr.Dataset:
    """Simulate every configuration of a scenario.

    Parameters
    ----------
    scenario : Scenario
        From :func:`mcsim.load_scenario`; ``scenario.run`` gives runs, seed and mode.
    progress : bool, optional
        Show a tqdm bar; by default only when stderr is a terminal.
    chunk_runs : int, optional
        Runs per kernel call (does not change the results).

    Returns
    -------
    xarray.Dataset
        Dims (sweep dims..., ``run``); the SPEC §5 variables with ``units`` and
        ``long_name``; provenance in the global attributes.
    """
    run = scenario.run
    shape = scenario.shape
    per_run = {name: np.empty(shape + (run.runs,), dtype=object if name == "completed" else float)
               for name in PER_RUN}
    per_config = {name: np.empty(shape, dtype=object) for name in PER_CONFIG}
    total = len(scenario.configs) * run.runs
    with tqdm(total=total, disable=None if progress is None else not progress, unit="run",
              desc=scenario.name, leave=False) as bar:
        for flat, cfg in enumerate(scenario.configs):
            index = np.unravel_index(flat, shape) if shape else ()
            out, wl, plan = simulate_config(cfg, run.runs, run.seed, run.mode,
                                            chunk_runs=chunk_runs, progress=bar)
            for name, values in _per_run_outputs(cfg, wl, plan, out).items():
                per_run[name][index] = values
            for name, value in _per_config_outputs(cfg, wl, plan).items():
                per_config[name][index] = value
    per_run["completed"] = per_run["completed"].astype(bool)
    casts = {"feasible": bool, "iterations": np.int64, "infeasible_reason": object}
    data = {**per_run, **{k: v.astype(casts.get(k, float)) for k, v in per_config.items()}}
    dims = tuple(axis.dim for axis in scenario.axes)
    coords = {axis.dim: list(axis.coords) for axis in scenario.axes}
    coords["run"] = np.arange(run.runs)
    attrs = provenance_attrs(scenario)
    return build_dataset(data, dims, coords, attrs)


def provenance_attrs(scenario: Scenario) -> dict[str, object]:
    """Global attributes: version, scenario TOML, seed, runs, mode, creation time."""
    run = scenario.run
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
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "Conventions": "CF-1.10",
    }
