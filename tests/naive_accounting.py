"""The per-run outputs as NumPy computed them before the compiled pass (one operation over the runs at a time):
the slow twin of :func:`mcsim.kernels.accounting.account_runs`, compared with it output by output and bit
for bit in ``tests/kernels/test_accounting.py``.

Moved here unchanged from ``mcsim.model.energy`` and ``mcsim.engine.outputs`` when the accounting became
a compiled pass; only the names of the entry point and the imports differ. The rental and owned costs
and the emissions are those of :func:`mcsim.model.energy.allocation_usd` and
:func:`mcsim.model.energy.co2_t`, which the planner's screen uses: the kernel must agree with them too.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from mcsim.io.variables import PER_RUN
from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import CheckpointPlan
from mcsim.model.energy import (
    BITS_PER_BYTE,
    ENERGY_PARTS,
    J_PER_KWH,
    J_PER_MWH,
    PowerModel,
    allocation_usd,
    co2_t,
    power_model,
)
from mcsim.model.strategies import STRATEGIES
from mcsim.model.workload import Workload
from mcsim.scenario.catalog import gpu_hour_usd
from mcsim.scenario.config import Config


def restart_state_s(out: np.ndarray, after_hangs_s: np.ndarray) -> np.ndarray:
    """Time of each run restarting (a restart's parts and the loads, as the kernel booked them), s, at
    most ``after_hangs_s`` (the recovery time but the hangs' detection; rounding only)."""
    return np.minimum(out[:, kernel.OUT_RESTART_S] + out[:, kernel.OUT_LOAD_S], np.maximum(after_hangs_s, 0.0))


def run_energy_j(
    cfg: Config, wl: Workload, plan: CheckpointPlan, pm: PowerModel, out: np.ndarray
) -> dict[str, np.ndarray]:
    """Energy of each run by component, J; facility level except ``gpu`` (IT).

    ``out`` is the kernel's per-run matrix (columns ``mcsim.kernels.interface.OUT_*``).
    """
    gpus, pue = cfg.parallelism.gpus, cfg.energy.pue
    net = cfg.network
    wall = out[:, kernel.OUT_WALL_S]
    done = out[:, kernel.OUT_ITERATIONS_DONE]
    lost = out[:, kernel.OUT_LOST_S]
    stalled = out[:, kernel.OUT_CHECKPOINT_S]
    recovering = out[:, kernel.OUT_RECOVERY_S]
    done_compute_s, done_comm_s = wl.times_of_first(done)  # each iteration at its phase's times
    compute_phase = done_compute_s + out[:, kernel.OUT_STRAGGLER_S]  # sum of compute_time * J * F
    # Both phases are sums of non-negative terms; computed apart they differ by rounding, so the
    # episode phase is capped by the whole and each part is a non-negative share, not a difference.
    episode_phase = np.minimum(out[:, kernel.OUT_EPISODE_PHASE_S], compute_phase)
    calm_phase = compute_phase - episode_phase
    computing = pm.busy_share * calm_phase + pm.busy_share_episode * episode_phase
    waiting = (1.0 - pm.busy_share) * calm_phase + (1.0 - pm.busy_share_episode) * episode_phase

    gpu_compute = gpus * pm.busy_w * computing
    gpu_wait = gpus * pm.wait_w * (waiting + done_comm_s)
    gpu_lost = gpus * pm.iteration_power_w * lost
    gpu_stalled = gpus * pm.checkpoint_w * stalled
    # Hung ranks sit in a collective that never completes: power as waiting at a barrier; a restart's
    # parts and the loads reading the state back at the checkpoint power; down the rest (idle,
    # docs/model.md §5 "Power by state").
    hung = out[:, kernel.OUT_HANG_DETECTION_S]
    restarting = restart_state_s(out, recovering - hung)
    gpu_recovering = gpus * (
        pm.idle_w * (recovering - hung - restarting) + pm.wait_w * hung + pm.checkpoint_w * restarting
    )

    storage_j_per_copy = plan.size_bytes * BITS_PER_BYTE * cfg.energy.storage_pj_per_bit * 1e-12
    peer_j_per_copy = plan.size_bytes * BITS_PER_BYTE * net.inter_pj_per_bit * 1e-12
    writes_j = out[:, kernel.OUT_STORAGE_WRITES] * storage_j_per_copy
    peer_copies = STRATEGIES[cfg.checkpoint.strategy].peer_copies_per_checkpoint
    if peer_copies:  # in_memory: every snapshot also crosses to the peer node
        writes_j = writes_j + out[:, kernel.OUT_CHECKPOINTS] * peer_copies * peer_j_per_copy
    # Every recovery attempt starts a load: from storage, or one node's shard from its peer.
    reads_j = (
        out[:, kernel.OUT_STORAGE_LOADS] * storage_j_per_copy
        + out[:, kernel.OUT_MEMORY_LOADS] * peer_j_per_copy / cfg.nodes
    )
    # ... in the share of their time the loads ran (a failure during another incident's longer
    # recovery counts a load that starts later, once; one during a load cuts it short).
    full_s = out[:, kernel.OUT_STORAGE_LOADS] * plan.load_s + out[:, kernel.OUT_MEMORY_LOADS] * plan.load_memory_s
    with np.errstate(invalid="ignore", divide="ignore"):
        reads_j = reads_j * np.where(full_s > 0, np.minimum(out[:, kernel.OUT_LOAD_S] / full_s, 1.0), 0.0)

    bits_j = (
        (wl.intra_bytes_per_gpu * net.intra_pj_per_bit + wl.inter_bytes_per_gpu * net.inter_pj_per_bit)
        * BITS_PER_BYTE
        * 1e-12
        * gpus
    )
    executed_iterations = out[:, kernel.OUT_EXECUTED_ITERATIONS]
    return {
        "compute": pue * gpu_compute,
        "wait": pue * gpu_wait,
        "checkpoint": pue * (gpu_stalled + writes_j),
        "recovery": pue * (gpu_recovering + reads_j),
        "lost": pue * gpu_lost,
        "network": pue * bits_j * executed_iterations,
        "node": pue * cfg.nodes * cfg.energy.node_overhead_w * wall,
        "gpu": gpu_compute + gpu_wait + gpu_lost + gpu_stalled + gpu_recovering,
    }


def run_cost_usd(cfg: Config, wall_s: np.ndarray, energy_j: np.ndarray) -> dict[str, np.ndarray]:
    """Allocation and electricity cost of each run, USD.

    Rental: ``G wall_h price``, with ``price`` the GPU type's hourly price
    (:func:`mcsim.scenario.catalog.gpu_hour_usd`: the scenario's price for the type, its one
    ``gpu_hour_usd``, or the catalog's rate). Owned: ``(G gpu_capex + nodes node_capex)
    wall_h / (amortization_years * 8766 h)``. Electricity: ``kWh electricity_usd_per_kwh``.
    """
    price = gpu_hour_usd(cfg.cost, cfg.hardware.gpu)
    return {
        "allocation": allocation_usd(cfg.cost, price, cfg.parallelism.gpus, cfg.nodes, wall_s / 3600.0),
        "electricity": energy_j / J_PER_KWH * cfg.cost.electricity_usd_per_kwh,
    }


def run_co2_t(cfg: Config, wall_s: np.ndarray, energy_j: np.ndarray) -> dict[str, np.ndarray]:
    """Operational and embodied emissions of each run, tonnes CO2e.

    ``kWh grid_g_per_kwh / 1e6`` and ``embodied_kg_per_gpu G wall / lifetime / 1e3``.
    """
    return co2_t(cfg.carbon, cfg.parallelism.gpus, wall_s, energy_j)


def naive_run_outputs(cfg: Config, wl: Workload, plan: CheckpointPlan | None, out: np.ndarray) -> dict[str, np.ndarray]:
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
    if plan is None:  # infeasible: NaN everywhere, not completed
        nan = np.full(out.shape[0], np.nan)
        return {name: (nan == 0.0 if name == "completed" else nan) for name in PER_RUN}
    wall_s = out[:, kernel.OUT_WALL_S]
    energy = run_energy_j(cfg, wl, plan, power_model(cfg, wl), out)
    total_j = cast(np.ndarray, sum(energy[k] for k in ENERGY_PARTS))
    cost = run_cost_usd(cfg, wall_s, total_j)
    co2 = run_co2_t(cfg, wall_s, total_j)
    completed = out[:, kernel.OUT_COMPLETED] == 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        # ETTR = ideal time of the work done / wall time. A completed run did all the
        # iterations; a censored one only the OUT_ITERATIONS_DONE that survived, so its
        # ETTR stays in [0, 1] instead of setting the full job against a truncated wall time.
        # The ideal is the failure-free time at the nominal iteration time, or the run's own
        # productive time where its iterations ran faster than nominal (negative straggler
        # time: with few GPUs the maximum of the rank factors, median 1, can fall below 1), so
        # that it never exceeds the wall time (docs/model.md §11).
        compute_s, comm_s = wl.times_of_first(out[:, kernel.OUT_ITERATIONS_DONE])
        done_ideal_s = np.where(completed, wl.ideal_time_s, compute_s + comm_s)
        done_ideal_s = done_ideal_s + np.minimum(out[:, kernel.OUT_STRAGGLER_S], 0.0)
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
        "n_hangs": out[:, kernel.OUT_HANGS],
        "n_instabilities": out[:, kernel.OUT_INSTABILITIES],
        "hang_time": out[:, kernel.OUT_HANG_S] / 3600.0,
        "hang_detection_time": out[:, kernel.OUT_HANG_DETECTION_S] / 3600.0,
        "instability_time": out[:, kernel.OUT_INSTABILITY_S] / 3600.0,
        "n_planned_stops": out[:, kernel.OUT_PLANNED_STOPS],
        "planned_time": out[:, kernel.OUT_PLANNED_S] / 3600.0,
        "restart_time": out[:, kernel.OUT_RESTART_S] / 3600.0,
        "load_time": out[:, kernel.OUT_LOAD_S] / 3600.0,
        "abandoned_restart_time": out[:, kernel.OUT_ABANDONED_S] / 3600.0,
        "staff_wait_time": out[:, kernel.OUT_STAFF_WAIT_S] / 3600.0,
        "time_limit_stops": out[:, kernel.OUT_TIME_LIMIT_STOPS],
        "queue_wait_time": out[:, kernel.OUT_QUEUE_WAIT_S] / 3600.0,
        "release_wait_time": out[:, kernel.OUT_RELEASE_WAIT_S] / 3600.0,
        "ettr": ettr,
        "completed": completed,
        **{f"energy_{k}": energy[k] / J_PER_MWH for k in (*ENERGY_PARTS, "gpu")},
        "cost_allocation": cost["allocation"],
        "cost_electricity": cost["electricity"],
        "co2_operational": co2["operational"],
        "co2_embodied": co2["embodied"],
    }
