"""The named outputs of one configuration: per run from its kernel rows, and per configuration.

The per-run outputs (wall time, energy, cost, CO2, ETTR, ...) and the per-configuration outputs
(iteration time, interval, MTBF, ...) of :mod:`mcsim.io.variables` come from a configuration, its
workload and checkpoint plan and its kernel rows here and nowhere else: the sweep's output arrays
(:mod:`mcsim.engine.outputs`), the interval optimiser's objective (:mod:`mcsim.engine.optimize`)
and the planner's simulations all call :func:`run_outputs`.
"""

from __future__ import annotations

import math

import numpy as np

from mcsim.io.variables import PER_CONFIG, PER_RUN
from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import CheckpointPlan, workload_and_plan
from mcsim.model.energy import accounting_parameters, ideal_iteration_energy_j, power_model
from mcsim.model.restart import restart_overhead_s
from mcsim.model.workload import Workload
from mcsim.scenario.config import Config

__all__ = ["PER_CONFIG", "PER_RUN", "account_runs_into", "configuration_outputs", "run_outputs"]


def run_outputs(
    cfg: Config, rows: np.ndarray, wl: Workload | None = None, plan: CheckpointPlan | None = None
) -> dict[str, np.ndarray]:
    """Every per-run output variable (:data:`mcsim.io.variables.PER_RUN`) of one configuration's kernel rows.

    Parameters
    ----------
    cfg : Config
        The configuration simulated (its interval as simulated).
    rows : ndarray
        Kernel output rows ``(runs, N_OUT)``.
    wl : Workload, optional
        Its workload, when at hand; by default the workload and checkpoint plan of
        :func:`mcsim.model.checkpointing.workload_and_plan` (computed once per configuration).
    plan : CheckpointPlan or None
        With ``wl``: its checkpoint plan, None when infeasible (every output NaN, ``completed``
        False).

    Returns
    -------
    dict of str to ndarray
        By variable name, in the variables' units (hours, MWh, USD, t CO2e; see the registry).
    """
    if wl is None:
        wl, plan = workload_and_plan(cfg)
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    if plan is None:  # infeasible: NaN everywhere, not completed
        nan = np.full(rows.shape[0], np.nan)
        return {name: (nan == 0.0 if name == "completed" else nan) for name in PER_RUN}
    accounted = np.empty((kernel.N_ACCOUNTED, rows.shape[0]))
    account_runs_into(cfg, wl, plan, rows, accounted)
    by_name = dict(zip(kernel.ACCOUNTED, accounted, strict=True))
    by_name["completed"] = rows[:, kernel.OUT_COMPLETED] == 1.0
    return {name: by_name[name] for name in PER_RUN}


def account_runs_into(cfg: Config, wl: Workload, plan: CheckpointPlan, rows: np.ndarray, into: np.ndarray) -> None:
    """The floating-point per-run outputs of a feasible configuration's kernel rows, written into the
    rows of ``into`` (``(N_ACCOUNTED, runs)``, C order, the variables in the order of
    :data:`mcsim.kernels.interface.ACCOUNTED`).

    Energy by part, cost, carbon and ETTR (docs/model.md §5, §11) are computed by one compiled pass
    (:func:`mcsim.kernels.interface.account_runs`) from the configuration's scalars
    (:func:`mcsim.model.energy.accounting_parameters`) and the compute and communication time of each
    run's surviving iterations, each at its phase's times (:meth:`Workload.times_of_first`).
    ETTR = ideal time of the work done / wall time: a completed run did all the iterations, a
    censored one only those that survived (its ETTR stays in [0, 1]); the ideal is the run's own
    productive time where its iterations ran faster than nominal (negative straggler time), so that
    it never exceeds the wall time (docs/model.md §11).
    """
    done_compute_s, done_comm_s = wl.times_of_first(rows[:, kernel.OUT_ITERATIONS_DONE])
    powers = power_model(cfg, wl)
    params = accounting_parameters(cfg, wl, plan, powers)  # the GPU's price from the catalog, last
    kernel.account_runs(rows, done_compute_s, done_comm_s, params, into)


def configuration_outputs(cfg: Config, wl: Workload, plan: CheckpointPlan | None) -> dict[str, object]:
    """Every per-configuration output variable (:data:`mcsim.io.variables.PER_CONFIG`) but the optimised
    interval's bounds, from the configuration, its workload and checkpoint plan (None when infeasible)."""
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
        "hfu_ideal": wl.hfu_ideal,
        "feasible": wl.feasible,
        "infeasible_reason": wl.infeasible_reason,
        "ideal_time": wl.ideal_time_s / 3600.0,
        "checkpoint_write_time": plan.size_bytes / (plan.write_gbps * 1e9) if plan else nan,
        "checkpoint_load_time": plan.load_s if plan else nan,
        "restart_overhead": restart_overhead_s(cfg.restart, cfg.parallelism.gpus, wl.iteration_time_s) if plan else nan,
        "system_mtbf": plan.system_mtbf_s / 3600.0 if plan else nan,
        "iteration_energy": iteration_j,
        "gpu_power": iteration_j / (cfg.parallelism.gpus * wl.iteration_time_s),
    }
