"""The Monte Carlo run loop and its entry points: one whole stochastic training run per random stream.

Semantics (the full statement is ``docs/model.md`` §4):

* Iterations take ``compute_time_s * J * F + comm_time_s`` (:mod:`mcsim.kernels.conditions`): ``F`` is
  the slowest of ``n_ranks`` lognormal rank factors, or ``max(M, slowdown)`` while a slow-node episode
  is active; ``J`` is the job-level factor drawn at start and after every restart.
* Every ``checkpoint_every`` iterations a checkpoint is taken, as the strategy says
  (:mod:`mcsim.kernels.checkpoints`).
* A failure loses everything after the restore point; recovery takes the class's recovery time plus
  the load, after waiting for spare nodes, and a fail-stop failure during recovery restarts it
  (:mod:`mcsim.kernels.recovery`).
* A chained job's part ends at its time limit: its progress is saved, it waits in the batch queue and
  restarts by full requeue (:mod:`mcsim.kernels.scheduler`; no limit: none).
* Slow-node episodes arrive as a Poisson process, last exponential times and end at every restart.
* A run ends when all iterations are done, or is censored at ``max_wall_s`` or after
  ``max_failures`` failures.
* Exact mode draws ``F`` every iteration; fast mode draws blocks of iterations and whole stretches of
  checkpoint cycles at once (:mod:`mcsim.kernels.blocks`).

Time bookkeeping: ``wall = alive_iteration_time + lost + checkpoint + recovery`` for completed runs,
with ``alive_iteration_time = iterations * ideal + straggler_transient + straggler_persistent``.

Structure. A run's state lives in the workspace (:mod:`mcsim.kernels.workspace`), allocated once per
kernel call by the entry points (:func:`simulate_runs`, :func:`simulate_runs_table`) and reset at the
start of every run (:func:`_start_run`). :func:`_simulate_run` is the loop: it asks for the next
event and lets one small function change the state for it: a change of the conditions
(:func:`~mcsim.kernels.conditions.enter_phase`, :func:`~mcsim.kernels.conditions.episodes_at`,
:func:`~mcsim.kernels.conditions.degradation_at`), a stretch or a block of iterations
(:func:`~mcsim.kernels.blocks.advance_stretch`, :func:`~mcsim.kernels.blocks.advance_block`), a
checkpoint (:func:`~mcsim.kernels.checkpoints.checkpoint`), a failure
(:func:`~mcsim.kernels.recovery.fail`, :func:`~mcsim.kernels.recovery.recover`,
:func:`~mcsim.kernels.recovery.restart`). The output columns are declared once in
:data:`~mcsim.kernels.declarations.OUTPUT_COLUMNS`.
"""

from __future__ import annotations

import numpy as np

from . import declarations as decl
from .accelerate import jit, jit_inline, jit_unmanaged
from .blocks import BLOCK_CUT, BLOCK_DONE, BLOCK_INTERRUPTED, advance_block, advance_stretch, keep_block_share
from .checkpoints import checkpoint
from .conditions import conditions_now, start_conditions
from .recovery import fail, next_kind, recover, restart
from .renewal import init_failures, next_failure
from .rng import seed_stream
from .scheduler import begin_part
from .workspace import (
    K_COMPLETED,
    K_DROPPED,
    K_FAILURES,
    K_NEXT_CHECKPOINT,
    K_OVERFLOW,
    K_SOURCE,
    K_SPARES_FREE,
    P_DONE,
    PT_NOW,
    RUN_DONE,
    RUN_FAILURE_HEAP_FULL,
    X_FAIL_T,
    X_GATE,
    X_PART_END,
    X_T,
    allocate_workspace,
    clear_state,
    write_outputs,
)


@jit_inline
def _has_kind(fc, kind):
    """Whether any failure class is of ``kind``."""
    for c in range(fc.kind.shape[0]):
        if fc.kind[c] == kind:
            return True
    return False


# --- The run loop --------------------------------------------------------------------------


@jit_inline
def _keeps_block(fc, k, heap_class, has_planned, at_limit):
    """Whether the stop that interrupted a block saves its whole iterations: the job part's time limit, or
    a planned stop (asked only in runs with planned classes)."""
    return at_limit or (has_planned and next_kind(fc, k, heap_class) == decl.KIND_PLANNED)


@jit_inline
def _run_over(p, x, k, pts):
    """Whether the run has ended: all its iterations done (``K_COMPLETED`` set), or censored at
    ``max_wall_s`` or after ``max_failures`` failures."""
    if pts[PT_NOW, P_DONE] >= p.iterations:
        k[K_COMPLETED] = 1
        return True
    return x[X_T] >= p.max_wall_s or k[K_FAILURES] + k[K_DROPPED] >= p.max_failures


# Compiled on its own, not inlined into simulate_runs: one call per run costs nothing
# measurable, and inlining the whole run loop (with the events it inlines) into the
# entry point made the first compile about 2.6x longer (docs/model.md §4 "Compile time").
# Unmanaged (no reference counting: it was most of fast mode's time): every array comes from the
# caller's workspace.
@jit_unmanaged
def _simulate_run(p, fc, phases, seed, run, row, ws):
    """Run ``run`` of the configuration into ``row``, in the workspace ``ws``
    (:func:`~mcsim.kernels.workspace.allocate_workspace`).

    Returns ``RUN_DONE``, or which workspace array was too small (``row`` is then not written).
    """
    x, k, pts, streams, run_streams, pools, heap_time, heap_class, repair_time, repair_tag = ws
    _start_run(p, fc, phases, seed, run, ws)
    it_stream, job_stream, ep_stream = run_streams[0], run_streams[1], run_streams[2]
    has_phases = phases.shape[0] > 0
    has_planned = _has_kind(fc, decl.KIND_PLANNED)  # read once: the loop asks the next kind only when it may matter

    while True:
        horizon = min(x[X_FAIL_T], p.max_wall_s, x[X_PART_END])
        if _run_over(p, x, k, pts):
            break
        active, transition = conditions_now(p, x, k, pts, ep_stream, has_phases)
        if p.fast and advance_stretch(p, x, k, pts, it_stream, horizon, active, transition) > 0:
            continue
        status = advance_block(p, x, k, pts, it_stream, horizon, active, transition)
        if status == BLOCK_CUT:
            continue  # the episode state changed: re-evaluate before going on
        if status == BLOCK_DONE:
            if pts[PT_NOW, P_DONE] >= p.iterations or not checkpoint(p, x, k, pts, horizon):
                continue
        at_limit = horizon < x[X_FAIL_T]  # the wall-clock limit or the job part's time limit
        if at_limit and horizon >= p.max_wall_s:
            break  # censored at max_wall_s
        if status == BLOCK_INTERRUPTED and _keeps_block(fc, k, heap_class, has_planned, at_limit):
            keep_block_share(p, x, pts, active)
        fail(x, k, pts)
        recover(p, fc, ws, at_limit)
        if k[K_OVERFLOW] != RUN_DONE:
            return k[K_OVERFLOW]
        restart(p, x, job_stream, ep_stream)
        begin_part(p, x, k)
    write_outputs(row, x, k, pts)
    return RUN_DONE


@jit_inline
def _start_run(p, fc, phases, seed, run, ws):
    """The run's state at t = 0 in the workspace: its streams seeded, the failure processes in their
    start states, its conditions (:func:`~mcsim.kernels.conditions.start_conditions`), the first pending
    failure."""
    x, k, pts, streams, run_streams, pools, heap_time, heap_class, repair_time, repair_tag = ws
    for c in range(fc.units.shape[0]):
        seed_stream(streams[c], seed, run, decl.STREAM_FIRST_FAILURE_CLASS + c)
    for i, stream in enumerate((decl.STREAM_ITERATION, decl.STREAM_JOB, decl.STREAM_EPISODE, decl.STREAM_RECOVERY)):
        seed_stream(run_streams[i], seed, run, stream)
    init_failures(fc.units, fc.shape, fc.scale_s, fc.start, fc.age_s, streams, pools[0], pools[1], pools[2])
    clear_state(x, k, pts)
    x[X_PART_END] = p.time_limit_s  # the first job part's time limit (inf: none)
    k[K_SPARES_FREE] = p.spare_nodes
    k[K_NEXT_CHECKPOINT] = p.checkpoint_every
    x[X_GATE] = -np.inf
    start_conditions(p, phases, x, k, run_streams[1], run_streams[2])
    # The earliest pending failure changes only when a failure is consumed.
    x[X_FAIL_T], k[K_SOURCE] = next_failure(pools[2], heap_time, 0)


# --- Entry points ---------------------------------------------------------------------------


@jit_inline
def _run_growing(p, fc, phases, seed, run, row, ws):
    """Run ``run`` in ``ws``, growing the heap that was too small until it fits; returns the workspace."""
    while True:
        status = _simulate_run(p, fc, phases, seed, run, row, ws)
        if status == RUN_DONE:
            return ws
        x, k, pts, streams, run_streams, pools, heap_time, heap_class, repair_time, repair_tag = ws
        if status == RUN_FAILURE_HEAP_FULL:
            heap_time = np.empty(2 * heap_time.shape[0])
            heap_class = np.empty(2 * heap_class.shape[0], np.int64)
        else:
            repair_time = np.empty(2 * repair_time.shape[0])
            repair_tag = np.empty(2 * repair_tag.shape[0], np.int64)
        ws = (x, k, pts, streams, run_streams, pools, heap_time, heap_class, repair_time, repair_tag)


@jit_inline
def _row_params(t, j):
    """Parameter set ``j`` of the table ``t`` (a RunParams of arrays) as a RunParams of scalars."""
    return decl.RunParams(
        t.iterations[j],
        t.compute_time_s[j],
        t.comm_time_s[j],
        t.n_ranks[j],
        t.sigma[j],
        t.job_sigma[j],
        t.strategy[j],
        t.checkpoint_every[j],
        t.checkpoint_stall_s[j],
        t.checkpoint_write_s[j],
        t.replicate_s[j],
        t.persist_every[j],
        t.load_s[j],
        t.load_memory_s[j],
        t.episode_rate_per_s[j],
        t.episode_mean_s[j],
        t.episode_slowdown[j],
        t.spare_nodes[j],
        t.max_wall_s[j],
        t.max_failures[j],
        t.fast[j],
        t.fast_min_block[j],
        t.factor_mean[j],
        t.factor_std[j],
        t.fast_min_block_episode[j],
        t.factor_mean_episode[j],
        t.factor_std_episode[j],
        t.restart_s[j],
        t.degradation_per_s[j],
        t.degradation_step_s[j],
        t.degradation_max[j],
        t.short_block[j],
        t.short_block_c0[j],
        t.short_block_c1[j],
        t.short_block_c2[j],
        t.short_block_c3[j],
        t.short_block_c4[j],
        t.short_block_c5[j],
        t.short_block_c6[j],
        t.restart_in_place_s[j],
        t.abandon_share[j],
        t.abandon_s[j],
        t.abandon_sigma[j],
        t.time_limit_s[j],
        t.queue_s[j],
        t.queue_sigma[j],
        t.release_share[j],
        t.release_s[j],
        t.release_sigma[j],
    )


@jit_inline
def _row_classes(c, j):
    """Parameter set ``j`` of the failure-class table ``c`` (2-D: set x class) as FailureClasses."""
    return decl.FailureClasses(
        c.units[j],
        c.shape[j],
        c.scale_s[j],
        c.recovery_s[j],
        c.nodes_taken[j],
        c.memory_ok[j],
        c.repair_s[j],
        c.start[j],
        c.age_s[j],
        c.kind[j],
        c.detect_s[j],
        c.rollback_checkpoints[j],
        c.recovery_sigma[j],
        c.manual_share[j],
        c.manual_s[j],
        c.bad_share[j],
        c.bad_mean_s[j],
        c.repair_sigma[j],
        c.durations_s[j],
        c.durations_count[j],
        c.requeue_share[j],
        c.staff_team[j],
        c.staff_offset_s[j],
        c.staff_begin_s[j],
        c.staff_end_s[j],
        c.staff_days[j],
        c.staff_holidays_s[j],
        c.staff_response_s[j],
        c.staff_on_call[j],
        c.staff_on_call_s[j],
        c.staff_on_call_sigma[j],
    )


@jit
def simulate_runs_table(table, classes, phases, row_param, row_stream_run, seed, out):
    """Simulate one run per output row, each with its own parameter set and random streams, in this thread.

    Serial and ``nogil`` like :func:`simulate_runs`: :func:`mcsim.engine.threads.run_kernel` runs
    slices of the rows on several threads at once (each row depends only on its own
    parameter set and stream index, so the split never changes a result).

    Parameters
    ----------
    table : RunParams of arrays
        Every field an array over the parameter sets (e.g. the parameter draws of one
        configuration): int64, float64 or bool as the field's scalar type
        (:func:`~mcsim.kernels.declarations.params_table`).
    classes : FailureClasses of 2-D arrays
        Per parameter set (rows) and failure class (columns) (:func:`~mcsim.kernels.declarations.classes_table`).
    phases : float64[n_sets, n_phases, N_PH]
        Per parameter set, its phase table (:func:`~mcsim.kernels.declarations.phases_table`; no rows: one phase).
    row_param : int64[n_rows]
        Parameter set of each output row.
    row_stream_run : int64[n_rows]
        Global run index of each output row: with ``seed`` it names the row's random streams.
    seed : int
        Scenario seed.
    out : float64[n_rows, N_OUT]
        Filled in place; each row is written by its own run only.
    """
    largest = 0  # the parameter set with the most units sizes the failure heap
    for j in range(classes.units.shape[0]):
        if classes.units[j].sum() > classes.units[largest].sum():
            largest = j
    ws = allocate_workspace(classes.units[largest], phases.shape[1] * phases.shape[2])
    for i in range(out.shape[0]):
        j = row_param[i]
        ws = _run_growing(
            _row_params(table, j), _row_classes(classes, j), phases[j], seed, row_stream_run[i], out[i], ws
        )


@jit
def simulate_runs(p, fc, phases, seed, first_run, out):
    """Simulate runs ``first_run .. first_run + out.shape[0] - 1`` of one configuration, in this thread.

    It holds no GIL (``nogil``): :func:`mcsim.engine.threads.run_kernel` runs slices of the runs
    on several threads at once. Each run depends only on its index, so the split never
    changes a result.

    Parameters
    ----------
    p : RunParams
        Scalars of the configuration.
    fc : FailureClasses
        Per-class arrays of the failure processes.
    phases : float64[n_phases, N_PH]
        The training phases, one row each (``PH_*`` columns; no rows: one phase with ``p``'s
        iteration times; :func:`~mcsim.kernels.declarations.no_phases`).
    seed : int
        Scenario seed; with the run index it names every random stream.
    first_run : int
        Global index of the first run of this call.
    out : float64[n_runs, N_OUT]
        Filled in place; each run writes its own row only.
    """
    ws = allocate_workspace(fc.units, phases.size)
    for i in range(out.shape[0]):
        ws = _run_growing(p, fc, phases, seed, first_run + i, out[i], ws)
