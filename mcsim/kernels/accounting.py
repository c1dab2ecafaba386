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

from . import declarations as decl
from .accelerate import jit, jit_inline
from .declarations import (  # the accounting's slots and rows: declarations, importable without Numba
    ACCOUNTED_COLUMNS,
    FIRST_COLUMN_ROW,
    J_PER_KWH,
    J_PER_MWH,
    N_PARTS,
    R_CO2,
    R_CO2_EMBODIED,
    R_CO2_OPERATIONAL,
    R_COST,
    R_COST_ALLOCATION,
    R_COST_ELECTRICITY,
    R_ENERGY,
    R_ENERGY_GPU,
    R_ETTR,
    R_FIRST_PART,
    R_WALL_TIME,
    S_PER_H,
    SLOT,
)


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
        for j in range(ACCOUNTED_COLUMNS.shape[0]):
            value = out[i, ACCOUNTED_COLUMNS[j, 0]]
            into[FIRST_COLUMN_ROW + j, i] = value / S_PER_H if ACCOUNTED_COLUMNS[j, 1] else value
