"""The per-run accounting: energy by part, cost, carbon, ETTR and hours from the run loop's columns.

One compiled pass over a configuration's kernel rows writes every floating-point per-run output
(docs/model.md §5, §11) into rows of the caller's array, in the order of :data:`ACCOUNTED`:
``mcsim.engine.outputs`` gives it the configuration's scalars (:data:`N_PARAMS` slots, :data:`SLOT` by name,
built by :func:`mcsim.model.energy.accounting_parameters`) and the sweep's output arrays, so the
outputs are computed where they are stored, with no temporary arrays. Computed in NumPy, one
operation over the runs at a time, the same outputs cost 0.1 ms a configuration, a quarter of a
480-configuration sweep's CPU around its kernel, when the sweep's overhead around the kernel was
cut.

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
from typing import NamedTuple

import numpy as np

from . import declarations as decl
from .accelerate import jit, jit_inline


# --- A configuration's scalars: the parameter vector's slots, by name -----------------------------
# A caller fills the vector by these names (mcsim.model.energy.accounting_parameters).
class ParamSlots(NamedTuple):
    """The slot of each scalar in a configuration's parameter vector, by its name (the fields' order)."""

    gpus: int  # G, GPUs (as a float)
    nodes: int  # nodes
    pue: int
    busy_w: int  # per-GPU power computing, W
    wait_w: int  # ... waiting at a barrier or exchanging data, W
    idle_w: int  # ... allocated and idle, W
    checkpoint_w: int  # ... stalled for a checkpoint or restarting, W
    busy_share: int  # b: share of the compute phase computing, outside episodes
    busy_share_episode: int  # b_ep: ... in a slow-node episode
    iteration_w: int  # mean per-GPU power over an executed iteration (rolled-back time), W
    storage_j: int  # one copy of the checkpoint written to or read from storage, J
    peer_j: int  # one copy of it sent to a peer node, J
    peer_copies: int  # copies a snapshot sends to peers (in_memory), per checkpoint
    load_s: int  # a full load from storage, s
    load_memory_s: int  # a full load from a peer's memory, s
    bits_j: int  # links' energy of one iteration, all GPUs, J
    node_w: int  # per-node overhead power, W
    rental: int  # 1: rented at gpu_hour_usd; 0: owned, amortised
    gpu_hour_usd: int  # USD per GPU-hour (rental)
    capital_usd: int  # GPUs' and nodes' capital cost (owned), USD
    amortization_h: int  # amortisation period (owned), h
    usd_per_kwh: int  # electricity price, USD/kWh
    grid_g_per_kwh: int  # grid carbon intensity, g CO2e/kWh
    embodied_kg: int  # embodied emissions of the GPUs held, kg CO2e (per GPU x G)
    lifetime_s: int  # GPU lifetime over which embodied emissions are spread, s
    ideal_s: int  # failure-free time of the whole job, s


PARAMS = ParamSlots._fields
N_PARAMS = len(PARAMS)
SLOT = ParamSlots(*range(N_PARAMS))  # ``p[SLOT.gpus]``: compiled as constants

J_PER_MWH = 3.6e9
J_PER_KWH = 3.6e6
S_PER_H = 3600.0

# --- The outputs written, one row each, in this order (float variables of mcsim.io.variables) -----
# The facility energy by part, in the order their sum is formed (mcsim.model.energy.ENERGY_PARTS is this one).
ENERGY_PARTS = ("compute", "wait", "checkpoint", "recovery", "lost", "network", "node")
_COMPUTED = (
    "wall_time",
    "energy",
    "cost",
    "co2",
    "ettr",
    *(f"energy_{part}" for part in ENERGY_PARTS),
    "energy_gpu",
    "cost_allocation",
    "cost_electricity",
    "co2_operational",
    "co2_embodied",
)
# Kernel columns stored as they are (counts) or in hours (times): (output, kernel column, in hours).
_COLUMN_OUTPUTS = (
    ("n_failures", decl.OUT_FAILURES, False),
    ("lost_time", decl.OUT_LOST_S, True),
    ("checkpoint_time", decl.OUT_CHECKPOINT_S, True),
    ("recovery_time", decl.OUT_RECOVERY_S, True),
    ("straggler_time", decl.OUT_STRAGGLER_S, True),
    ("straggler_transient_time", decl.OUT_STRAGGLER_TRANSIENT_S, True),
    ("straggler_persistent_time", decl.OUT_STRAGGLER_PERSISTENT_S, True),
    ("n_memory_recoveries", decl.OUT_MEMORY_RECOVERIES, False),
    ("spare_wait_time", decl.OUT_SPARE_WAIT_S, True),
    ("n_hangs", decl.OUT_HANGS, False),
    ("n_instabilities", decl.OUT_INSTABILITIES, False),
    ("hang_time", decl.OUT_HANG_S, True),
    ("hang_detection_time", decl.OUT_HANG_DETECTION_S, True),
    ("instability_time", decl.OUT_INSTABILITY_S, True),
    ("n_planned_stops", decl.OUT_PLANNED_STOPS, False),
    ("planned_time", decl.OUT_PLANNED_S, True),
    ("restart_time", decl.OUT_RESTART_S, True),
    ("load_time", decl.OUT_LOAD_S, True),
)
ACCOUNTED = _COMPUTED + tuple(name for name, _, _ in _COLUMN_OUTPUTS)
N_ACCOUNTED = len(ACCOUNTED)
_COLUMNS = np.array([(column, in_hours) for _, column, in_hours in _COLUMN_OUTPUTS], dtype=np.int64)
_FIRST_COLUMN_ROW = len(_COMPUTED)
# Rows of the computed outputs (module constants: compiled in).
R_WALL_TIME = ACCOUNTED.index("wall_time")
R_ENERGY = ACCOUNTED.index("energy")
R_COST = ACCOUNTED.index("cost")
R_CO2 = ACCOUNTED.index("co2")
R_ETTR = ACCOUNTED.index("ettr")
R_FIRST_PART = ACCOUNTED.index("energy_compute")  # then the other ENERGY_PARTS, in order
R_ENERGY_GPU = ACCOUNTED.index("energy_gpu")
R_COST_ALLOCATION = ACCOUNTED.index("cost_allocation")
R_COST_ELECTRICITY = ACCOUNTED.index("cost_electricity")
R_CO2_OPERATIONAL = ACCOUNTED.index("co2_operational")
R_CO2_EMBODIED = ACCOUNTED.index("co2_embodied")
N_PARTS = len(ENERGY_PARTS)


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
def _energy(out, i, compute_s, comm_s, p, into):
    """Run ``i``'s energy by part and the GPUs' own into their rows (MWh); returns the facility total, J."""
    gpus, pue = p[SLOT.gpus], p[SLOT.pue]
    lost = out[i, decl.OUT_LOST_S]
    stalled = out[i, decl.OUT_CHECKPOINT_S]
    recovering = out[i, decl.OUT_RECOVERY_S]
    compute_phase = compute_s + out[i, decl.OUT_STRAGGLER_S]
    episode_phase = _minimum(out[i, decl.OUT_EPISODE_PHASE_S], compute_phase)
    calm_phase = compute_phase - episode_phase
    busy_share, busy_share_episode = p[SLOT.busy_share], p[SLOT.busy_share_episode]
    computing = busy_share * calm_phase + busy_share_episode * episode_phase
    waiting = (1.0 - busy_share) * calm_phase + (1.0 - busy_share_episode) * episode_phase
    gpu_compute = gpus * p[SLOT.busy_w] * computing
    gpu_wait = gpus * p[SLOT.wait_w] * (waiting + comm_s)
    gpu_lost = gpus * p[SLOT.iteration_w] * lost
    gpu_stalled = gpus * p[SLOT.checkpoint_w] * stalled
    hung = out[i, decl.OUT_HANG_DETECTION_S]
    restarting = _minimum(out[i, decl.OUT_RESTART_S] + out[i, decl.OUT_LOAD_S], _maximum(recovering - hung, 0.0))
    gpu_recovering = gpus * (
        p[SLOT.idle_w] * (recovering - hung - restarting) + p[SLOT.wait_w] * hung + p[SLOT.checkpoint_w] * restarting
    )
    writes_j = out[i, decl.OUT_STORAGE_WRITES] * p[SLOT.storage_j]
    if p[SLOT.peer_copies] != 0.0:
        writes_j = writes_j + out[i, decl.OUT_CHECKPOINTS] * p[SLOT.peer_copies] * p[SLOT.peer_j]
    reads_j = (
        out[i, decl.OUT_STORAGE_LOADS] * p[SLOT.storage_j]
        + out[i, decl.OUT_MEMORY_LOADS] * p[SLOT.peer_j] / p[SLOT.nodes]
    )
    full_s = out[i, decl.OUT_STORAGE_LOADS] * p[SLOT.load_s] + out[i, decl.OUT_MEMORY_LOADS] * p[SLOT.load_memory_s]
    share = 0.0
    if full_s > 0:
        share = _minimum(out[i, decl.OUT_LOAD_S] / full_s, 1.0)
    reads_j = reads_j * share
    parts = (
        pue * gpu_compute,
        pue * gpu_wait,
        pue * (gpu_stalled + writes_j),
        pue * (gpu_recovering + reads_j),
        pue * gpu_lost,
        pue * p[SLOT.bits_j] * out[i, decl.OUT_EXECUTED_ITERATIONS],
        pue * p[SLOT.nodes] * p[SLOT.node_w] * out[i, decl.OUT_WALL_S],
    )
    total_j = 0.0
    for k in range(N_PARTS):
        into[R_FIRST_PART + k, i] = parts[k] / J_PER_MWH
        total_j = total_j + parts[k]
    into[R_ENERGY_GPU, i] = (gpu_compute + gpu_wait + gpu_lost + gpu_stalled + gpu_recovering) / J_PER_MWH
    return total_j


@jit_inline
def _cost_and_carbon(wall_s, total_j, p, into, i):
    """Run ``i``'s cost (USD) and emissions (t CO2e), totals and parts, into their rows."""
    hours = wall_s / S_PER_H
    if p[SLOT.rental] != 0.0:
        allocation = p[SLOT.gpus] * hours * p[SLOT.gpu_hour_usd]
    else:
        allocation = p[SLOT.capital_usd] * hours / p[SLOT.amortization_h]
    electricity = total_j / J_PER_KWH * p[SLOT.usd_per_kwh]
    operational = total_j / J_PER_KWH * p[SLOT.grid_g_per_kwh] / 1e6
    embodied = p[SLOT.embodied_kg] * wall_s / p[SLOT.lifetime_s] / 1e3
    into[R_COST, i] = allocation + electricity
    into[R_CO2, i] = operational + embodied
    into[R_COST_ALLOCATION, i] = allocation
    into[R_COST_ELECTRICITY, i] = electricity
    into[R_CO2_OPERATIONAL, i] = operational
    into[R_CO2_EMBODIED, i] = embodied


@jit
def account_runs(out, done_compute_s, done_comm_s, params, into):
    """Every floating-point per-run output of one configuration's kernel rows, into ``into``.

    Parameters
    ----------
    out : ndarray, (runs, N_OUT)
        The kernel's rows (columns ``OUT_*``).
    done_compute_s, done_comm_s : ndarray, (runs,)
        Compute and exposed communication time of each run's surviving iterations, s.
    params : ndarray, (N_PARAMS,)
        The configuration's scalars (slots :data:`SLOT`).
    into : ndarray, (N_ACCOUNTED, runs), C order
        Written: the outputs named by :data:`ACCOUNTED`, one a row, in the variables' units (hours,
        MWh, USD, t CO2e).
    """
    for i in range(out.shape[0]):
        wall_s = out[i, decl.OUT_WALL_S]
        total_j = _energy(out, i, done_compute_s[i], done_comm_s[i], params, into)
        into[R_WALL_TIME, i] = wall_s / S_PER_H
        into[R_ENERGY, i] = total_j / J_PER_MWH
        _cost_and_carbon(wall_s, total_j, params, into, i)
        # ETTR: the ideal time of the work done (the run's own where faster than nominal) / wall time.
        ideal_s = params[SLOT.ideal_s] if out[i, decl.OUT_COMPLETED] == 1.0 else done_compute_s[i] + done_comm_s[i]
        ideal_s = ideal_s + _minimum(out[i, decl.OUT_STRAGGLER_S], 0.0)
        into[R_ETTR, i] = ideal_s / wall_s if wall_s > 0 else math.nan
        for j in range(_COLUMNS.shape[0]):
            value = out[i, _COLUMNS[j, 0]]
            into[_FIRST_COLUMN_ROW + j, i] = value / S_PER_H if _COLUMNS[j, 1] else value
