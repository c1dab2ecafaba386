"""The per-run accounting: energy by part, cost, carbon, ETTR and hours from the run loop's columns.

One compiled pass over a configuration's kernel rows writes every floating-point per-run output
(docs/model.md §5, §11) into rows of the caller's array, in the order of :data:`ACCOUNTED`:
``mcsim.engine.outputs`` gives it the configuration's scalars (:data:`N_PARAMS` slots ``A_*``,
built by :func:`mcsim.model.energy.accounting_parameters`) and the sweep's output arrays, so the
outputs are computed where they are stored, with no temporary arrays. Computed in NumPy, one
operation over the runs at a time, the same outputs cost 0.1 ms a configuration, a quarter of a
480-configuration sweep's CPU around its kernel (issue 26 item 4).

Every expression is evaluated as the NumPy formulation it replaced did, operation by operation
and in the same order (a product of scalars first where NumPy formed it first), so the outputs are
bit-identical to it: ``tests/naive_accounting.py`` keeps that formulation, and the tests compare
the two output by output. The one exception is the sign of a NaN made from infinite columns (which
the run loop never writes): two NaN of opposite signs meeting in a sum keep the first operand's,
and the compiler may swap an addition's operands. ``_minimum``/``_maximum`` are
``np.minimum``/``np.maximum`` to the sign of a zero.

Energy per run, J, facility level but ``gpu`` (IT), with ``F`` the compute phase of the surviving
iterations (``compute_s + straggler_s``), ``E`` its part in slow-node episodes (at most ``F``):

* compute ``PUE G P_busy (b F_calm + b_ep E)``; wait ``PUE G P_wait ((1 - b) F_calm + (1 - b_ep) E
  + comm_s)``; lost ``PUE G P_iteration lost_s``;
* checkpoint ``PUE (G P_ckpt stall_s + writes J_storage [+ snapshots c J_peer])``;
* recovery ``PUE (G (P_idle down + P_wait hung + P_ckpt restarting) + reads)``, reads charged in
  the share of their full length the loads ran;
* network ``PUE J_bits executed_iterations``; node ``PUE nodes P_node wall_s``.
"""

from __future__ import annotations

import math

import numpy as np

from .accelerate import jit, jit_inline
from .declarations import (
    OUT_CHECKPOINT_S,
    OUT_CHECKPOINTS,
    OUT_COMPLETED,
    OUT_EPISODE_PHASE_S,
    OUT_EXECUTED_ITERATIONS,
    OUT_FAILURES,
    OUT_HANG_DETECTION_S,
    OUT_HANG_S,
    OUT_HANGS,
    OUT_INSTABILITIES,
    OUT_INSTABILITY_S,
    OUT_LOAD_S,
    OUT_LOST_S,
    OUT_MEMORY_LOADS,
    OUT_MEMORY_RECOVERIES,
    OUT_PLANNED_S,
    OUT_PLANNED_STOPS,
    OUT_RECOVERY_S,
    OUT_RESTART_S,
    OUT_SPARE_WAIT_S,
    OUT_STORAGE_LOADS,
    OUT_STORAGE_WRITES,
    OUT_STRAGGLER_PERSISTENT_S,
    OUT_STRAGGLER_S,
    OUT_STRAGGLER_TRANSIENT_S,
    OUT_WALL_S,
)

# --- A configuration's scalars: slots of the parameter vector ----------------------------------
A_GPUS = 0  # G, GPUs (as a float)
A_NODES = 1  # nodes
A_PUE = 2
A_BUSY_W = 3  # per-GPU power computing, W
A_WAIT_W = 4  # ... waiting at a barrier or exchanging data, W
A_IDLE_W = 5  # ... allocated and idle, W
A_CHECKPOINT_W = 6  # ... stalled for a checkpoint or restarting, W
A_BUSY_SHARE = 7  # b: share of the compute phase computing, outside episodes
A_BUSY_SHARE_EPISODE = 8  # b_ep: ... in a slow-node episode
A_ITERATION_W = 9  # mean per-GPU power over an executed iteration (rolled-back time), W
A_STORAGE_J = 10  # one copy of the checkpoint written to or read from storage, J
A_PEER_J = 11  # one copy of it sent to a peer node, J
A_PEER_COPIES = 12  # copies a snapshot sends to peers (in_memory), per checkpoint
A_LOAD_S = 13  # a full load from storage, s
A_LOAD_MEMORY_S = 14  # a full load from a peer's memory, s
A_BITS_J = 15  # links' energy of one iteration, all GPUs, J
A_NODE_W = 16  # per-node overhead power, W
A_RENTAL = 17  # 1: rented at A_GPU_HOUR_USD; 0: owned, amortised
A_GPU_HOUR_USD = 18  # USD per GPU-hour (rental)
A_CAPITAL_USD = 19  # GPUs' and nodes' capital cost (owned), USD
A_AMORTIZATION_H = 20  # amortisation period (owned), h
A_USD_PER_KWH = 21  # electricity price, USD/kWh
A_GRID_G_PER_KWH = 22  # grid carbon intensity, g CO2e/kWh
A_EMBODIED_KG = 23  # embodied emissions of the GPUs held, kg CO2e (per GPU x G)
A_LIFETIME_S = 24  # GPU lifetime over which embodied emissions are spread, s
A_IDEAL_S = 25  # failure-free time of the whole job, s
N_PARAMS = 26
# The slots' names, in order: a caller fills the vector by name (mcsim.model.energy.accounting_parameters).
PARAMS = (
    "gpus",
    "nodes",
    "pue",
    "busy_w",
    "wait_w",
    "idle_w",
    "checkpoint_w",
    "busy_share",
    "busy_share_episode",
    "iteration_w",
    "storage_j",
    "peer_j",
    "peer_copies",
    "load_s",
    "load_memory_s",
    "bits_j",
    "node_w",
    "rental",
    "gpu_hour_usd",
    "capital_usd",
    "amortization_h",
    "usd_per_kwh",
    "grid_g_per_kwh",
    "embodied_kg",
    "lifetime_s",
    "ideal_s",
)
assert len(PARAMS) == N_PARAMS and PARAMS[A_IDEAL_S] == "ideal_s" and PARAMS[A_STORAGE_J] == "storage_j"

J_PER_MWH = 3.6e9
J_PER_KWH = 3.6e6
S_PER_H = 3600.0

# --- The outputs written, one row each, in this order (float variables of mcsim.io.variables) -----
ACCOUNTED = (
    "wall_time",
    "energy",
    "cost",
    "co2",
    "ettr",
    "energy_compute",
    "energy_wait",
    "energy_checkpoint",
    "energy_recovery",
    "energy_lost",
    "energy_network",
    "energy_node",
    "energy_gpu",
    "cost_allocation",
    "cost_electricity",
    "co2_operational",
    "co2_embodied",
    # kernel columns as they are (counts) or in hours (times): _COLUMNS
    "n_failures",
    "lost_time",
    "checkpoint_time",
    "recovery_time",
    "straggler_time",
    "straggler_transient_time",
    "straggler_persistent_time",
    "n_memory_recoveries",
    "spare_wait_time",
    "n_hangs",
    "n_instabilities",
    "hang_time",
    "hang_detection_time",
    "instability_time",
    "n_planned_stops",
    "planned_time",
    "restart_time",
    "load_time",
)
_FIRST_COLUMN_ROW = 17
# (kernel column, in hours) of ACCOUNTED[_FIRST_COLUMN_ROW:], in order.
_COLUMNS = np.array(
    [
        (OUT_FAILURES, 0),
        (OUT_LOST_S, 1),
        (OUT_CHECKPOINT_S, 1),
        (OUT_RECOVERY_S, 1),
        (OUT_STRAGGLER_S, 1),
        (OUT_STRAGGLER_TRANSIENT_S, 1),
        (OUT_STRAGGLER_PERSISTENT_S, 1),
        (OUT_MEMORY_RECOVERIES, 0),
        (OUT_SPARE_WAIT_S, 1),
        (OUT_HANGS, 0),
        (OUT_INSTABILITIES, 0),
        (OUT_HANG_S, 1),
        (OUT_HANG_DETECTION_S, 1),
        (OUT_INSTABILITY_S, 1),
        (OUT_PLANNED_STOPS, 0),
        (OUT_PLANNED_S, 1),
        (OUT_RESTART_S, 1),
        (OUT_LOAD_S, 1),
    ],
    dtype=np.int64,
)
N_ACCOUNTED = len(ACCOUNTED)
assert len(_COLUMNS) == N_ACCOUNTED - _FIRST_COLUMN_ROW


@jit_inline
def _minimum(a, b):
    """``np.minimum`` of two floats as NumPy computes it (x86, NumPy 1.26 to 2.4): ``a`` if it is NaN or
    the smaller, else ``b`` (so ``b`` of two equal zeros: ``minimum(-0.0, 0.0)`` is ``0.0``)."""
    if math.isnan(a):
        return a
    return a if a < b else b


@jit_inline
def _maximum(a, b):
    """``np.maximum`` of two floats as NumPy computes it: ``a`` if it is NaN or the larger, else ``b``."""
    if math.isnan(a):
        return a
    return a if a > b else b


@jit_inline
def _energy(out, i, compute_s, comm_s, p, into, c):
    """Run ``i``'s energy by part into rows 5-12 of configuration ``c`` (MWh); returns the facility total, J."""
    gpus, pue = p[A_GPUS], p[A_PUE]
    lost = out[i, OUT_LOST_S]
    stalled = out[i, OUT_CHECKPOINT_S]
    recovering = out[i, OUT_RECOVERY_S]
    compute_phase = compute_s + out[i, OUT_STRAGGLER_S]
    episode_phase = _minimum(out[i, OUT_EPISODE_PHASE_S], compute_phase)
    calm_phase = compute_phase - episode_phase
    busy_share, busy_share_episode = p[A_BUSY_SHARE], p[A_BUSY_SHARE_EPISODE]
    computing = busy_share * calm_phase + busy_share_episode * episode_phase
    waiting = (1.0 - busy_share) * calm_phase + (1.0 - busy_share_episode) * episode_phase
    gpu_compute = gpus * p[A_BUSY_W] * computing
    gpu_wait = gpus * p[A_WAIT_W] * (waiting + comm_s)
    gpu_lost = gpus * p[A_ITERATION_W] * lost
    gpu_stalled = gpus * p[A_CHECKPOINT_W] * stalled
    hung = out[i, OUT_HANG_DETECTION_S]
    restarting = _minimum(out[i, OUT_RESTART_S] + out[i, OUT_LOAD_S], _maximum(recovering - hung, 0.0))
    gpu_recovering = gpus * (
        p[A_IDLE_W] * (recovering - hung - restarting) + p[A_WAIT_W] * hung + p[A_CHECKPOINT_W] * restarting
    )
    writes_j = out[i, OUT_STORAGE_WRITES] * p[A_STORAGE_J]
    if p[A_PEER_COPIES] != 0.0:
        writes_j = writes_j + out[i, OUT_CHECKPOINTS] * p[A_PEER_COPIES] * p[A_PEER_J]
    reads_j = out[i, OUT_STORAGE_LOADS] * p[A_STORAGE_J] + out[i, OUT_MEMORY_LOADS] * p[A_PEER_J] / p[A_NODES]
    full_s = out[i, OUT_STORAGE_LOADS] * p[A_LOAD_S] + out[i, OUT_MEMORY_LOADS] * p[A_LOAD_MEMORY_S]
    share = 0.0
    if full_s > 0:
        share = _minimum(out[i, OUT_LOAD_S] / full_s, 1.0)
    reads_j = reads_j * share
    parts = (
        pue * gpu_compute,
        pue * gpu_wait,
        pue * (gpu_stalled + writes_j),
        pue * (gpu_recovering + reads_j),
        pue * gpu_lost,
        pue * p[A_BITS_J] * out[i, OUT_EXECUTED_ITERATIONS],
        pue * p[A_NODES] * p[A_NODE_W] * out[i, OUT_WALL_S],
    )
    total_j = 0.0
    for k in range(7):
        into[5 + k, c, i] = parts[k] / J_PER_MWH
        total_j = total_j + parts[k]
    into[12, c, i] = (gpu_compute + gpu_wait + gpu_lost + gpu_stalled + gpu_recovering) / J_PER_MWH
    return total_j


@jit_inline
def _cost_and_carbon(wall_s, total_j, p, into, c, i):
    """Run ``i``'s cost (USD) and emissions (t CO2e) into rows 2, 3 and 13-16."""
    hours = wall_s / S_PER_H
    if p[A_RENTAL] != 0.0:
        allocation = p[A_GPUS] * hours * p[A_GPU_HOUR_USD]
    else:
        allocation = p[A_CAPITAL_USD] * hours / p[A_AMORTIZATION_H]
    electricity = total_j / J_PER_KWH * p[A_USD_PER_KWH]
    operational = total_j / J_PER_KWH * p[A_GRID_G_PER_KWH] / 1e6
    embodied = p[A_EMBODIED_KG] * wall_s / p[A_LIFETIME_S] / 1e3
    into[2, c, i] = allocation + electricity
    into[3, c, i] = operational + embodied
    into[13, c, i] = allocation
    into[14, c, i] = electricity
    into[15, c, i] = operational
    into[16, c, i] = embodied


@jit
def account_runs(out, done_compute_s, done_comm_s, params, into, c):
    """Every floating-point per-run output of one configuration's kernel rows, into ``into``.

    Parameters
    ----------
    out : ndarray, (runs, N_OUT)
        The kernel's rows (columns ``OUT_*``).
    done_compute_s, done_comm_s : ndarray, (runs,)
        Compute and exposed communication time of each run's surviving iterations, s.
    params : ndarray, (N_PARAMS,)
        The configuration's scalars (slots ``A_*``).
    into : ndarray, (N_ACCOUNTED, configurations, runs), C order
        Written at ``[:, c, :]``: the outputs named by :data:`ACCOUNTED`, in the variables' units
        (hours, MWh, USD, t CO2e). Indexed here rather than sliced by the caller, so that every
        call has the one compiled type (a strided slice would compile a second one).
    c : int
        The configuration's index in ``into``.
    """
    for i in range(out.shape[0]):
        wall_s = out[i, OUT_WALL_S]
        total_j = _energy(out, i, done_compute_s[i], done_comm_s[i], params, into, c)
        into[0, c, i] = wall_s / S_PER_H
        into[1, c, i] = total_j / J_PER_MWH
        _cost_and_carbon(wall_s, total_j, params, into, c, i)
        # ETTR: the ideal time of the work done (the run's own where faster than nominal) / wall time.
        ideal_s = params[A_IDEAL_S] if out[i, OUT_COMPLETED] == 1.0 else done_compute_s[i] + done_comm_s[i]
        ideal_s = ideal_s + _minimum(out[i, OUT_STRAGGLER_S], 0.0)
        into[4, c, i] = ideal_s / wall_s if wall_s > 0 else math.nan
        for j in range(_COLUMNS.shape[0]):
            value = out[i, _COLUMNS[j, 0]]
            into[_FIRST_COLUMN_ROW + j, c, i] = value / S_PER_H if _COLUMNS[j, 1] else value
