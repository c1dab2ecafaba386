"""Stage 6 of :func:`mcsim.simulate`: the named outputs, derived from the kernel's columns (the one place).

The per-run outputs (wall time, energy, cost, CO2, ETTR, ...) and per-configuration
outputs (iteration time, interval, MTBF, ...) of :mod:`mcsim.io.variables` come from a
configuration, its workload and checkpoint plan and its kernel rows here and nowhere
else: :func:`mcsim.simulate`, the interval optimiser's objective
(:mod:`mcsim.engine.optimize`), the selection (:mod:`mcsim.planning.selection`) and the
planner (:mod:`mcsim.planning.planner`) all call :func:`per_run_outputs`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from mcsim.io.pages import ordinary_pages
from mcsim.io.variables import PER_CONFIG, PER_RUN
from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import CheckpointPlan, workload_and_plan
from mcsim.model.energy import accounting_parameters, ideal_iteration_energy_j, power_model
from mcsim.model.restart import restart_overhead_s
from mcsim.model.workload import Workload
from mcsim.scenario.config import Config

if TYPE_CHECKING:
    from mcsim.engine.prepare import Prepared


def per_run_outputs(cfg: Config, wl: Workload, plan: CheckpointPlan | None, out: np.ndarray) -> dict[str, np.ndarray]:
    """Every per-run output variable (:data:`mcsim.io.variables.PER_RUN`) of one configuration's kernel rows.

    Parameters
    ----------
    cfg : Config
        The configuration simulated (its interval as simulated).
    wl : Workload
        Its workload.
    plan : CheckpointPlan or None
        Its checkpoint plan; None when infeasible (every output NaN, ``completed`` False).
    out : ndarray
        Kernel output rows ``(runs, N_OUT)``.

    Returns
    -------
    dict of str to ndarray
        By variable name, in the variables' units (hours, MWh, USD, t CO2e; see the registry).
    """
    out = np.ascontiguousarray(out, dtype=np.float64)
    if plan is None:  # infeasible: NaN everywhere, not completed
        nan = np.full(out.shape[0], np.nan)
        return {name: (nan == 0.0 if name == "completed" else nan) for name in PER_RUN}
    accounted = np.empty((kernel.N_ACCOUNTED, out.shape[0]))
    account_runs_into(cfg, wl, plan, out, accounted)
    by_name = dict(zip(kernel.ACCOUNTED, accounted, strict=True))
    by_name["completed"] = out[:, kernel.OUT_COMPLETED] == 1.0
    return {name: by_name[name] for name in PER_RUN}


def account_runs_into(cfg: Config, wl: Workload, plan: CheckpointPlan, out: np.ndarray, into: np.ndarray) -> None:
    """The floating-point per-run outputs of a feasible configuration's kernel rows ``out``, written into the
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
    done_compute_s, done_comm_s = wl.times_of_first(out[:, kernel.OUT_ITERATIONS_DONE])
    params = accounting_parameters(cfg, wl, plan, power_model(cfg, wl))
    kernel.account_runs(out, done_compute_s, done_comm_s, params, into)


def config_outputs_per_run(cfg: Config, rows: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`per_run_outputs` of a feasible configuration's kernel rows, its workload and plan those of
    :func:`mcsim.model.checkpointing.workload_and_plan` (computed once per configuration)."""
    wl, plan = workload_and_plan(cfg)
    return per_run_outputs(cfg, wl, plan, np.asarray(rows))


def per_config_outputs(cfg: Config, wl: Workload, plan: CheckpointPlan | None) -> dict[str, object]:
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


# Per-configuration variables that are not float64.
_CONFIG_DTYPES = {"feasible": bool, "iterations": np.int64, "infeasible_reason": object}


class OutputArrays:
    """Every registered variable as an array of the sweep, filled one configuration at a time.

    The arrays are allocated once, in their final dtype, by flat configuration index (C
    order); :meth:`add` turns a configuration's kernel rows into its outputs as soon as its
    last task is in, so the kernel rows of the whole sweep are never held beside the outputs
    (issue 26: a 480-configuration sweep's peak memory above the baseline fell from 2.1 to
    1.2 times its dataset). Configurations never added (infeasible, or another shard's) get
    NaN runs in :meth:`arrays`.

    Parameters
    ----------
    prepared : Prepared
        The configurations, their workloads and kernel inputs (optimised intervals fixed).
    interval_ci_s : mapping
        Flat index -> 95 % interval of its optimised checkpoint interval, s.
    runs : int
        Runs per configuration.
    """

    def __init__(self, prepared: Prepared, interval_ci_s: Mapping[int, tuple[float, float]], runs: int) -> None:
        n = len(prepared.configs)
        self.prepared, self.interval_ci_s, self.runs = prepared, interval_ci_s, runs
        with ordinary_pages():  # written once, in order: huge pages would only cost compaction
            # Each variable an array of its own (one kept alone keeps only itself alive).
            self.per_run = {name: np.empty((n, runs), dtype=bool if name == "completed" else float) for name in PER_RUN}
            self._accounted = [self.per_run[name] for name in kernel.ACCOUNTED]  # the kernel's row order
            self.per_config = {name: np.empty(n, dtype=_CONFIG_DTYPES.get(name, float)) for name in PER_CONFIG}
            self._buffer = np.empty((kernel.N_ACCOUNTED, runs))  # one configuration's, see add()
        assert {*kernel.ACCOUNTED, "completed"} == set(PER_RUN), "every per-run variable is accounted once"
        self._added = np.zeros(n, dtype=bool)

    def add(self, flat: int, rows: np.ndarray) -> None:
        """Configuration ``flat``'s outputs from its kernel rows ``(runs, N_OUT)`` (NaN: not simulated)."""
        prepared = self.prepared
        cfg, wl, inputs = prepared.configs[flat], prepared.workloads[flat], prepared.inputs[flat]
        plan = inputs.plan if inputs is not None and wl.feasible else None
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        if plan is None:  # infeasible: NaN everywhere, not completed
            self._buffer.fill(np.nan)
            self.per_run["completed"][flat] = False
        else:
            # Into a small buffer, then copied row by row: written in place, a run's 35 stores would
            # lie a variable's size apart (a multiple of 2 KiB for 1,000 runs) and share two L1 cache
            # sets, 2.6 times slower than the copies (measured in issue 26 item 4).
            account_runs_into(cfg, wl, plan, rows, self._buffer)
            self.per_run["completed"][flat] = rows[:, kernel.OUT_COMPLETED] == 1.0
        for values, row in zip(self._accounted, self._buffer, strict=True):
            values[flat] = row
        for name, value in per_config_outputs(cfg, wl, plan).items():
            self.per_config[name][flat] = value
        low, high = self.interval_ci_s.get(flat, (math.nan, math.nan))
        self.per_config["checkpoint_interval_ci_low"][flat] = low
        self.per_config["checkpoint_interval_ci_high"][flat] = high
        self._added[flat] = True

    def arrays(self, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """The arrays of the sweep ``shape`` (per run: plus ``runs``), every configuration not added as NaN runs."""
        missing = np.flatnonzero(~self._added)
        if missing.size:
            nan_rows = np.full((self.runs, kernel.N_OUT), np.nan)
            for flat in missing:
                self.add(int(flat), nan_rows)
        return {
            **{k: v.reshape(shape + (self.runs,)) for k, v in self.per_run.items()},
            **{k: v.reshape(shape) for k, v in self.per_config.items()},
        }
