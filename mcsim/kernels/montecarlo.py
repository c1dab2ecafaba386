"""The Monte Carlo run loop: one whole stochastic training run per random stream.

Semantics (the full statement is ``docs/model.md`` §4):

* Iterations take ``compute_time_s * J * F + comm_time_s``: ``F`` is the
  slowest of ``n_ranks`` lognormal rank factors, or ``max(M, slowdown)`` while
  a slow-node episode is active; ``J`` is the job-level factor drawn at start
  and after every restart.
* Every ``checkpoint_every`` iterations a checkpoint is taken. ``sync``:
  training stalls and the checkpoint is durable when the stall ends.
  ``async`` (and ``gockpt``, with its own stall and delay): durable
  ``checkpoint_write_s`` after the stall, and a new checkpoint waits for the
  previous one. ``in_memory``: a snapshot in CPU memory, replicated to a peer
  node (restorable ``replicate_s`` after the stall), persisted to storage every
  ``persist_every`` snapshots when no write is in flight.
* A failure loses everything after the restore point: the last memory
  snapshot for ``in_memory`` when the failure's class leaves a replica
  (``memory_ok``), else the last durable storage checkpoint. Recovery takes
  the class's recovery time (its mean, or a draw of its law) plus the load,
  after waiting for spare nodes when a spare pool is modelled; a fail-stop
  failure during recovery restarts it. A hang (``KIND_HANG``) adds its
  detection time before the recovery; an instability (``KIND_INSTABILITY``)
  restores from storage ``rollback_checkpoints`` checkpoints further back; both
  are dropped when they fall in a recovery.
* Slow-node episodes arrive as a Poisson process, last exponential times and
  end at every restart.
* A run ends when all iterations are done, or is censored at ``max_wall_s``
  or after ``max_failures`` failures.
* Exact mode draws ``F`` every iteration. Fast mode draws the sum of a block
  of ``K >= fast_min_block`` factors at once from N(K E[F], K Var[F]), a block
  of the checkpoint interval ``short_block < fast_min_block`` from its own law
  (a polynomial of one normal deviate, :mod:`mcsim.model.block_law`), and
  advances whole stretches of checkpoint cycles between two events with one
  such draw (:func:`_advance_stretch`), so that its cost follows the failures,
  restarts and episodes, not the checkpoints.

Time bookkeeping: ``wall = alive_iteration_time + lost + checkpoint + recovery``
for completed runs, with ``alive_iteration_time = iterations * ideal +
straggler_transient + straggler_persistent``.

Structure. A run's state lives in three arrays with named slots: ``x`` (float
scalars, ``X_*``, then the run's phase table), ``k`` (integer scalars, ``K_*``) and
``pts`` (progress points: the run's progress ``PT_NOW`` and its restore points
``PT_DURABLE``, ``PT_MEMORY``, ``PT_PENDING``, ``PT_REPLICATING``, each a vector of
``P_*`` columns). They, the random streams and the failure and repair heaps form the
*workspace* (:func:`_workspace`), allocated once per kernel call by the entry points
and reset at the start of every run; the run loop and everything it calls are compiled
without Numba's reference counting (:func:`mcsim.kernels.accelerate.jit_unmanaged`) and
allocate nothing. A heap that fills stops the run with a ``RUN_*`` code; the entry point
grows it and runs the run again (the same streams give the same run), so the first
sizes are chosen large enough that this is rare. One small function per event changes it: :func:`_episodes_at`
(episode change), :func:`_advance_block` (advance a block),
:func:`_checkpoint` (checkpoint begins: wait, stall, then the strategy's hook
:func:`_checkpoint_hook`), :func:`_complete_writes` (write completes: the one
place where a finished write becomes a restore point), :func:`_failure`,
:func:`_recover` (recovery, restarted by failures during it) and
:func:`_restart`; :func:`_simulate_run` is the loop that dispatches them. The
output columns are declared once in :data:`OUTPUT_COLUMNS`.
"""

from __future__ import annotations

import math

import numpy as np

from .accelerate import jit, jit_inline, jit_unmanaged
from .declarations import (
    KIND_FAIL_STOP,
    KIND_HANG,
    KIND_INSTABILITY,
    KIND_PLANNED,
    N_PH,
    OUT_BUSY_S,
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
    OUT_ITERATIONS_DONE,
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
    PH_COMM_S,
    PH_COMPUTE_S,
    PH_START,
    STRATEGY_ASYNC,
    STRATEGY_IN_MEMORY,
    STRATEGY_SYNC,
    STREAM_EPISODE,
    STREAM_FIRST_FAILURE_CLASS,
    STREAM_ITERATION,
    STREAM_JOB,
    STREAM_RECOVERY,
    FailureClasses,
    RunParams,
)
from .normal import max_lognormal_factor, ndtri_acklam
from .renewal import consume_failure, heap_pop, heap_push, init_failures, next_failure, pending_class
from .rng import seed_stream, uniform

# --- Run state: named slots of three arrays of the run's workspace ------------------------------
# Float scalars (``x``).
X_T = 0  # simulated time, s
X_FAIL_T = 1  # time of the earliest pending failure, s
X_JOB = 2  # job factor J of the current attempt
X_EPISODE_NEXT = 3  # next slow-node episode arrival, s
X_EPISODE_UNTIL = 4  # end of the episodes that have begun, s
X_GATE = 5  # a checkpoint waits until this time (the previous foreground write), s
X_PENDING_READY = 6  # the storage write in flight is durable at this time, s
X_REPLICA_READY = 7  # the snapshot being replicated is restorable at this time, s
X_PARTIAL = 8  # time of the iterations a failure interrupted, s
X_EXECUTED = 9  # iterations run (rolled back and partial ones included)
X_LOST = 10  # iteration time rolled back, s
X_CHECKPOINT = 11  # time in checkpoints (waits and stalls), s
X_RECOVERY = 12  # time recovering, s
X_SPARE_WAIT = 13  # time waiting for spare nodes, s
X_BUSY = 14  # time computing, s
X_HANG = 15  # iteration time rolled back and recovery time caused by hangs, s
X_HANG_DETECT = 16  # time hung before detection, s
X_INSTABILITY = 17  # iteration time rolled back and recovery time caused by instabilities, s
X_PLANNED = 18  # time down for planned stops (their partial iterations included), s
X_CUT_BLOCK = 19  # fast block a failure interrupted: its iterations (0: none, or drawn one by one)
X_CUT_START = 20  # ... the time it began, s
X_CUT_DT = 21  # ... its drawn duration, s
X_CUT_TOTAL = 22  # ... its drawn factor sum
X_RESTART = 23  # time in the restart's parts (re-scheduling, process start, communicators, warm-up), s
X_COMPUTE = 24  # the current phase's compute time per iteration, s
X_COMM = 25  # ... and exposed communication, s
X_PHASE_START = 26  # iterations done when the current phase begins
X_DEGRADE = 27  # throughput degradation: the factor on compute time now (1: none)
X_DEGRADE_NEXT = 28  # ... changes at this time, s (inf: never)
X_ATTEMPT_START = 29  # the current attempt (since the start or the last restart) began at this time, s
X_LOADING = 30  # time reading the state back (loads, those cut short included), s
N_X = 31
# After the N_X slots, x holds the run's phase table, row j at N_X + N_PH j (K_PHASES rows): read by the
# events that need it without passing another array to them (each array argument costs reference
# counting, issue 26).
# Integer scalars (``k``).
K_FAILURES = 0
K_CHECKPOINTS = 1
K_SNAPSHOTS = 2  # in_memory snapshots taken
K_STORAGE_WRITES = 3
K_STORAGE_LOADS = 4
K_MEMORY_LOADS = 5
K_MEMORY_RECOVERIES = 6
K_NEXT_CHECKPOINT = 7  # iteration count after which the next checkpoint is taken
K_SOURCE = 8  # source of the earliest pending failure (renewal.next_failure)
K_PENDING = 9  # 1: a storage write is in flight
K_REPLICATING = 10  # 1: a snapshot is being replicated
K_MEMORY_VALID = 11  # 1: a replicated snapshot exists in peer memory
K_SPARES_FREE = 12
K_HEAP_SIZE = 13  # failure heap entries
K_REPAIR_SIZE = 14  # nodes under repair
K_COMPLETED = 15
K_HANGS = 16
K_INSTABILITIES = 17
K_PLANNED = 18
K_DROPPED = 19  # hangs, instabilities and planned stops dropped in recoveries (for the failure guard)
K_PHASE_END = 20  # iterations done when the current phase ends (the run's iterations in the last)
K_PHASES = 21  # rows of the phase table (0: one phase, RunParams' iteration times)
K_OVERFLOW = 22  # RUN_DONE, or the workspace array that was too small (the run stops)
N_K = 23
# Progress points (rows of ``pts``): the run's progress and its restore points, each a
# vector of the columns below.
PT_NOW = 0  # the run's progress
PT_DURABLE = 1  # last durable storage checkpoint
PT_MEMORY = 2  # last restorable in-memory snapshot (in_memory)
PT_PENDING = 3  # storage write in flight, durable at X_PENDING_READY
PT_REPLICATING = 4  # in_memory snapshot being replicated, until X_REPLICA_READY
PT_STRETCH_START = 5  # fast mode: the progress where the current stretch began
N_PT = 6
P_DONE = 0  # iterations completed
P_ALIVE = 1  # time spent on them, s
P_TRANSIENT = 2  # straggler excess within them: per-iteration noise, s
P_PERSISTENT = 3  # ... and job factor and episodes, s
P_EPISODE_PHASE = 4  # compute phase of those iterations spent in slow-node episodes, s
N_P = 5

# What a block of iterations ended with (:func:`_advance_block`).
# What :func:`_simulate_run` returns: the run is done, or an array of the workspace was full (the caller
# grows it and runs the run again: its streams make the run the same, only longer arrays).
RUN_DONE = 0
RUN_FAILURE_HEAP_FULL = 1
RUN_REPAIR_HEAP_FULL = 2
BLOCK_DONE = 0  # reached the next checkpoint or the end
BLOCK_CUT = 1  # stopped at an episode change
BLOCK_INTERRUPTED = 2  # a failure or the wall-clock limit struck inside it


@jit_inline
def _job_factor(state, job_sigma):
    if job_sigma == 0.0:
        return 1.0
    return max(1.0, math.exp(job_sigma * ndtri_acklam(uniform(state))))


@jit_inline
def _exponential(state):
    return -math.log(uniform(state))


@jit_inline
def _copy_point(pts, dst, src):
    for j in range(N_P):
        pts[dst, j] = pts[src, j]


# --- Events --------------------------------------------------------------------------------


@jit_inline
def _episodes_at(p, x, ep_stream):
    """Episode change: process the arrivals up to now; returns ``(active, next change time)``."""
    t = x[X_T]
    while x[X_EPISODE_NEXT] <= t:
        x[X_EPISODE_UNTIL] = max(x[X_EPISODE_UNTIL], x[X_EPISODE_NEXT] + p.episode_mean_s * _exponential(ep_stream))
        x[X_EPISODE_NEXT] += _exponential(ep_stream) / p.episode_rate_per_s
    active = x[X_EPISODE_UNTIL] > t
    transition = x[X_EPISODE_UNTIL] if active else x[X_EPISODE_NEXT]
    return active, transition


@jit_inline
def _enter_phase(p, x, k, done):
    """Phase change: the phase of the progress ``done`` (after a phase's last block, or a rollback)
    sets the iteration times (``X_COMPUTE``, ``X_COMM``) and where it begins and ends
    (``X_PHASE_START``, ``K_PHASE_END``). Only runs with a phase table call it."""
    k[K_PHASE_END] = p.iterations
    for j in range(k[K_PHASES]):
        row = N_X + N_PH * j
        if x[row + PH_START] > done:
            if x[row + PH_START] < p.iterations:  # padded rows begin at infinity
                k[K_PHASE_END] = int(x[row + PH_START])
            return
        x[X_PHASE_START] = x[row + PH_START]
        x[X_COMPUTE] = x[row + PH_COMPUTE_S]
        x[X_COMM] = x[row + PH_COMM_S]


@jit_inline
def _load_phases(p, phases, x, k):
    """The run's phase table into the tail of ``x`` (``K_PHASES`` rows), and its first phase entered."""
    k[K_PHASES] = phases.shape[0]
    for j in range(phases.shape[0]):
        for col in range(N_PH):
            x[N_X + N_PH * j + col] = phases[j, col]
    _enter_phase(p, x, k, 0.0)


@jit_inline
def _has_kind(fc, kind):
    """Whether any failure class is of ``kind``."""
    for c in range(fc.kind.shape[0]):
        if fc.kind[c] == kind:
            return True
    return False


@jit_inline
def _begin_attempt(p, x, t):
    """An attempt begins at ``t`` (the start, or a restart): the throughput degradation starts again."""
    x[X_ATTEMPT_START] = t
    x[X_DEGRADE] = 1.0
    x[X_DEGRADE_NEXT] = t if p.degradation_per_s > 0.0 else np.inf


@jit_inline
def _degradation_at(p, x):
    """Degradation change: the factor on compute time of the step of the attempt now; returns the time
    it next changes (inf when it has reached its maximum, or without degradation).

    Step ``j`` of an attempt that began at ``t_a`` is ``[t_a + j S, t_a + (j + 1) S)``; its factor is
    ``1 + min(r (j + 1/2) S, D)`` (the linear degradation ``r`` at mid-step, at most ``D``).
    """
    t = x[X_T]
    if x[X_DEGRADE_NEXT] > t:
        return x[X_DEGRADE_NEXT]
    step, t_a = p.degradation_step_s, x[X_ATTEMPT_START]
    j = math.floor((t - t_a) / step)
    while t_a + (j + 1.0) * step <= t:  # rounding: the step whose end is after now
        j += 1.0
    added = p.degradation_per_s * (j + 0.5) * step
    if added >= p.degradation_max:
        x[X_DEGRADE] = 1.0 + p.degradation_max
        x[X_DEGRADE_NEXT] = np.inf
    else:
        x[X_DEGRADE] = 1.0 + added
        x[X_DEGRADE_NEXT] = t_a + (j + 1.0) * step
    return x[X_DEGRADE_NEXT]


@jit_inline
def _short_block_sum(p, z):
    """The factor sum of a ``p.short_block``-iteration block at the normal deviate ``z``
    (:func:`mcsim.model.block_law.short_block_law`; Horner, highest degree first)."""
    total = p.short_block_c6
    total = total * z + p.short_block_c5
    total = total * z + p.short_block_c4
    total = total * z + p.short_block_c3
    total = total * z + p.short_block_c2
    total = total * z + p.short_block_c1
    return total * z + p.short_block_c0


@jit_inline
def _advance_block(p, x, k, pts, it_stream, horizon, active, transition):
    """Advance a block of iterations up to the next checkpoint, the end, or an episode change.

    Fast mode draws a block of ``K >= min_block`` iterations at once; shorter blocks and
    exact mode draw each iteration. A fast block that the horizon interrupts is noted in the
    ``X_CUT_*`` slots (for :func:`_keep_block_share`). Returns a ``BLOCK_*`` code.
    """
    x[X_CUT_BLOCK] = 0.0
    if active:
        f_mean, f_std, min_block = p.factor_mean_episode, p.factor_std_episode, p.fast_min_block_episode
    else:
        f_mean, f_std, min_block = p.factor_mean, p.factor_std, p.fast_min_block
    job = x[X_JOB] * x[X_DEGRADE]
    c, comm = x[X_COMPUTE], x[X_COMM]
    t = x[X_T]
    done = pts[PT_NOW, P_DONE]
    ideal_iter = c + comm
    interrupted = False
    target = float(min(k[K_NEXT_CHECKPOINT], p.iterations))
    block = float(min(k[K_NEXT_CHECKPOINT], k[K_PHASE_END])) - done
    short = float(p.short_block) if p.fast and not active else -1.0  # a short block with its own law
    use_fast = p.fast and (block >= min_block or block == short)
    if use_fast and transition < np.inf:
        # Iterations that start before the episode or degradation state changes, in expectation.
        fit = math.ceil((transition - t) / (c * job * f_mean + comm))
        block = min(block, float(max(1, fit)))
        use_fast = block >= min_block or block == short
    if use_fast:
        z = ndtri_acklam(uniform(it_stream))
        if block >= min_block:
            total = block * f_mean + math.sqrt(block) * f_std * z
        else:
            total = _short_block_sum(p, z)
        total = max(total, 0.0)
        dt = c * job * total + block * comm
        if t + dt > horizon:
            interrupted = True
            x[X_EXECUTED] += block * (horizon - t) / dt
            x[X_CUT_BLOCK] = block
            x[X_CUT_START] = t
            x[X_CUT_DT] = dt
            x[X_CUT_TOTAL] = total
        else:
            t += dt
            done += block
            x[X_EXECUTED] += block
            pts[PT_NOW, P_ALIVE] += dt
            x[X_BUSY] += dt
            if active:  # transient share at its expectation; the rest is persistent
                transient = c * block * (p.factor_mean - 1.0)
                pts[PT_NOW, P_EPISODE_PHASE] += c * job * total
            else:
                transient = c * (total - block)
            pts[PT_NOW, P_TRANSIENT] += transient
            pts[PT_NOW, P_PERSISTENT] += dt - block * ideal_iter - transient
    else:
        stop = done + block
        executed = x[X_EXECUTED]
        alive_s = pts[PT_NOW, P_ALIVE]
        busy_s = x[X_BUSY]
        transient_s = pts[PT_NOW, P_TRANSIENT]
        persistent_s = pts[PT_NOW, P_PERSISTENT]
        episode_phase_s = pts[PT_NOW, P_EPISODE_PHASE]
        while done < stop and t < transition:
            m = max_lognormal_factor(uniform(it_stream), p.n_ranks, p.sigma)
            factor = max(m, p.episode_slowdown) if active else m
            dt = c * job * factor + comm
            if t + dt > horizon:
                interrupted = True
                executed += (horizon - t) / dt
                break
            t += dt
            done += 1.0
            executed += 1.0
            alive_s += dt
            busy_s += dt
            if active:
                episode_phase_s += c * job * factor
            transient_s += c * (m - 1.0)
            persistent_s += c * (job * factor - m)
        x[X_EXECUTED] = executed
        pts[PT_NOW, P_ALIVE] = alive_s
        x[X_BUSY] = busy_s
        pts[PT_NOW, P_TRANSIENT] = transient_s
        pts[PT_NOW, P_PERSISTENT] = persistent_s
        pts[PT_NOW, P_EPISODE_PHASE] = episode_phase_s
    pts[PT_NOW, P_DONE] = done
    x[X_PARTIAL] = 0.0
    if interrupted:
        # The GPUs computed up to the horizon; lost if the horizon is a failure.
        x[X_PARTIAL] = horizon - t
        x[X_BUSY] += horizon - t
        x[X_T] = horizon
        return BLOCK_INTERRUPTED
    x[X_T] = t
    if done < target:
        return BLOCK_CUT
    return BLOCK_DONE


@jit_unmanaged
def _keep_block_share(p, x, pts, active):
    """A planned stop keeps the whole iterations of the fast block it interrupted (``X_CUT_*``): their
    share of its time and of its accounts, as a stretch's interpolated points (docs/model.md §3); the
    rest of the block is the partial work lost. Compiled on its own and called after the block, only
    in runs with planned classes, so that the blocks' hot path does not carry it (whether inlining it
    there costs speed was not settled: the one measurement that said so came from the first process
    after a compile)."""
    block, t0, dt, total = x[X_CUT_BLOCK], x[X_CUT_START], x[X_CUT_DT], x[X_CUT_TOTAL]
    kept = math.floor(block * (x[X_T] - t0) / dt)
    if block == 0.0 or kept <= 0.0:
        return
    c, job = x[X_COMPUTE], x[X_JOB] * x[X_DEGRADE]
    share = kept / block
    kept_s = share * dt
    if active:
        transient = c * block * (p.factor_mean - 1.0)
        pts[PT_NOW, P_EPISODE_PHASE] += share * c * job * total
    else:
        transient = c * (total - block)
    persistent = dt - block * (c + x[X_COMM]) - transient
    pts[PT_NOW, P_ALIVE] += kept_s
    pts[PT_NOW, P_TRANSIENT] += share * transient
    pts[PT_NOW, P_PERSISTENT] += share * persistent
    pts[PT_NOW, P_DONE] += kept
    x[X_PARTIAL] = x[X_T] - (t0 + kept_s)


@jit_inline
def _complete_writes(x, k, pts):
    """Write completes: every write in flight that has finished by now becomes a restore point."""
    t = x[X_T]
    if k[K_PENDING] == 1 and x[X_PENDING_READY] <= t:
        _copy_point(pts, PT_DURABLE, PT_PENDING)
        k[K_PENDING] = 0
    if k[K_REPLICATING] == 1 and x[X_REPLICA_READY] <= t:
        _copy_point(pts, PT_MEMORY, PT_REPLICATING)
        k[K_MEMORY_VALID] = 1
        k[K_REPLICATING] = 0


# --- Checkpoint strategy hooks: what a checkpoint does once its stall has ended --------------


@jit_inline
def _sync_checkpoint(p, x, k, pts):
    """sync: the state is durable when the stall ends."""
    _copy_point(pts, PT_DURABLE, PT_NOW)
    k[K_STORAGE_WRITES] += 1


@jit_inline
def _async_checkpoint(p, x, k, pts):
    """async, gockpt: durable ``checkpoint_write_s`` after the stall; the next checkpoint waits for it."""
    _copy_point(pts, PT_PENDING, PT_NOW)
    k[K_PENDING] = 1
    x[X_PENDING_READY] = x[X_T] + p.checkpoint_write_s
    x[X_GATE] = x[X_PENDING_READY]
    k[K_STORAGE_WRITES] += 1


@jit_inline
def _in_memory_checkpoint(p, x, k, pts):
    """in_memory: a snapshot replicated to the peer (the next checkpoint waits for it),
    persisted to storage every ``persist_every``-th snapshot when no write is in flight."""
    _copy_point(pts, PT_REPLICATING, PT_NOW)
    k[K_REPLICATING] = 1
    x[X_REPLICA_READY] = x[X_T] + p.replicate_s
    x[X_GATE] = x[X_REPLICA_READY]
    k[K_SNAPSHOTS] += 1
    if k[K_SNAPSHOTS] % p.persist_every == 0 and k[K_PENDING] == 0:
        _copy_point(pts, PT_PENDING, PT_NOW)
        k[K_PENDING] = 1
        x[X_PENDING_READY] = x[X_T] + p.checkpoint_write_s
        k[K_STORAGE_WRITES] += 1


@jit_inline
def _checkpoint_hook(p, x, k, pts):
    """The strategy's hook (one per ``STRATEGY_*`` code)."""
    if p.strategy == STRATEGY_SYNC:
        _sync_checkpoint(p, x, k, pts)
    elif p.strategy == STRATEGY_ASYNC:
        _async_checkpoint(p, x, k, pts)
    else:
        _in_memory_checkpoint(p, x, k, pts)


@jit_inline
def _restores_from_memory(p):
    """Whether the strategy keeps snapshots a recovery can load from a peer's memory."""
    return p.strategy == STRATEGY_IN_MEMORY


@jit_inline
def _checkpoint(p, x, k, pts, horizon):
    """Checkpoint begins: wait for the previous write (``X_GATE``), stall, then the strategy's hook.

    Returns True when a failure or the wall-clock limit interrupted it.
    """
    t = x[X_T]
    if x[X_GATE] > t:
        wait_end = min(x[X_GATE], horizon)
        x[X_CHECKPOINT] += wait_end - t
        x[X_T] = wait_end
        if wait_end < x[X_GATE]:
            return True
    _complete_writes(x, k, pts)
    t = x[X_T]
    stall_end = t + p.checkpoint_stall_s
    if stall_end > horizon:
        x[X_CHECKPOINT] += horizon - t
        x[X_T] = horizon
        return True
    x[X_CHECKPOINT] += p.checkpoint_stall_s
    x[X_T] = stall_end
    k[K_CHECKPOINTS] += 1
    k[K_NEXT_CHECKPOINT] = int(pts[PT_NOW, P_DONE]) + p.checkpoint_every
    _complete_writes(x, k, pts)
    _checkpoint_hook(p, x, k, pts)
    return False


@jit_inline
def _failure(x, k, pts):
    """Failure at ``X_T``: writes in flight complete only if already done; the partial block is lost."""
    _complete_writes(x, k, pts)
    k[K_PENDING] = 0
    k[K_REPLICATING] = 0
    x[X_GATE] = -np.inf
    if pts[PT_DURABLE, P_DONE] > pts[PT_MEMORY, P_DONE]:
        _copy_point(pts, PT_MEMORY, PT_DURABLE)
    x[X_LOST] += x[X_PARTIAL]


@jit_inline
def _restore(p, x, k, pts, point):
    """Roll the run back to restore point ``point``: its later iterations are lost. Returns their time, s."""
    lost = pts[PT_NOW, P_ALIVE] - pts[point, P_ALIVE]
    x[X_LOST] += lost
    _copy_point(pts, PT_NOW, point)
    k[K_NEXT_CHECKPOINT] = int(pts[PT_NOW, P_DONE]) + p.checkpoint_every
    return lost


@jit_inline
def _ideal_s(p, x, k, iterations):
    """Ideal time of the first ``iterations`` iterations of a run with a phase table, s."""
    total = 0.0
    for j in range(k[K_PHASES]):
        row = N_X + N_PH * j
        end = x[row + N_PH + PH_START] if j + 1 < k[K_PHASES] else np.inf
        end = min(end, float(p.iterations), iterations)
        if end > x[row + PH_START]:
            total += (end - x[row + PH_START]) * (x[row + PH_COMPUTE_S] + x[row + PH_COMM_S])
    return total


@jit_inline
def _roll_back_durable(p, x, k, pts, checkpoints):
    """Instability: the last durable checkpoint moves ``checkpoints`` storage checkpoints back (on the grid
    of multiples of ``K`` iterations, ``K persist_every`` for in_memory, a planned stop's save counting as
    the one after it; not before the start). The time accounts of the earlier point are the durable
    point's scaled by the share of its iterations; with phases, its time is its own ideal time plus that
    share of the durable point's straggler excess (docs/model.md §3)."""
    if checkpoints == 0:
        return
    step = float(p.checkpoint_every) * float(p.persist_every if p.strategy == STRATEGY_IN_MEMORY else 1)
    done = pts[PT_DURABLE, P_DONE]
    target = max(0.0, math.ceil(done / step) * step - float(checkpoints) * step)
    share = target / done if done > 0.0 else 0.0
    alive = pts[PT_DURABLE, P_ALIVE]
    for j in range(N_P):
        pts[PT_DURABLE, j] *= share
    pts[PT_DURABLE, P_DONE] = target
    if k[K_PHASES] > 0:
        pts[PT_DURABLE, P_ALIVE] = _ideal_s(p, x, k, target) + share * (alive - _ideal_s(p, x, k, done))


@jit_inline
def _lognormal_mean_one(stream, sigma):
    """A lognormal factor of mean 1 and log-sd ``sigma``: ``exp(sigma Z - sigma^2 / 2)``."""
    return math.exp(sigma * ndtri_acklam(uniform(stream)) - 0.5 * sigma * sigma)


@jit_inline
def _recovery_s(seconds, sigma, share, manual, rec_stream):
    """Recovery time of one event before the load, s: the class's mean ``seconds``, lognormal when
    ``sigma > 0``, plus a person's time (mean ``manual``, the same law) for a ``share`` of them. Draws
    from ``rec_stream`` only when the class has a law, so fixed recoveries draw nothing."""
    if sigma > 0.0:
        seconds *= _lognormal_mean_one(rec_stream, sigma)
    if share > 0.0 and uniform(rec_stream) < share:
        if sigma > 0.0:
            manual *= _lognormal_mean_one(rec_stream, sigma)
        seconds += manual
    return seconds


@jit_inline
def _class_recovery_s(fc, c, rec_stream):
    """Class ``c``'s recovery before the restart's parts and the load, s: its mean, or one of its measured
    recoveries at random, then its law (:func:`_recovery_s`)."""
    measured = fc.durations_count[c]
    base_s = fc.recovery_s[c]
    if measured > 0:  # one of the measured recoveries, at random
        base_s = fc.durations_s[c, min(int(uniform(rec_stream) * measured), measured - 1)]
    return _recovery_s(base_s, fc.recovery_sigma[c], fc.manual_share[c], fc.manual_s[c], rec_stream)


@jit_inline
def _book_recovery(p, x, kind, t, stop, wait_until, detect_end, restart_end, recovery_end):
    """Recovery from ``t`` to ``stop``: its time, the spare wait, the restart's parts, the load (from
    ``restart_end`` to ``recovery_end``) and the cause's share."""
    x[X_LOADING] += max(0.0, min(recovery_end, stop) - max(t, restart_end))
    x[X_SPARE_WAIT] += max(0.0, min(wait_until, stop) - max(t, detect_end))
    x[X_RECOVERY] += stop - t
    if p.restart_s > 0.0:
        x[X_RESTART] += max(0.0, min(restart_end, stop) - max(t, restart_end - p.restart_s))
    if kind == KIND_HANG:
        x[X_HANG] += stop - t
        x[X_HANG_DETECT] += max(0.0, min(detect_end, stop) - t)
    elif kind == KIND_INSTABILITY:
        x[X_INSTABILITY] += stop - t
    elif kind == KIND_PLANNED:
        x[X_PLANNED] += stop - t


@jit_inline
def _interrupt(p, kind, rollback_checkpoints, memory_ok, x, k, pts):
    """The restore of the event (of kind ``kind``) that begins a recovery; returns whether it is from memory.

    A fail-stop failure or a hang restores the last in-memory snapshot when the class leaves one
    (``memory_ok``), else the last durable checkpoint; an instability restores from storage,
    ``rollback_checkpoints`` further back. The time rolled back (the interrupted partial block
    included) is charged to the event's kind."""
    if kind == KIND_INSTABILITY:
        _roll_back_durable(p, x, k, pts, rollback_checkpoints)
        from_memory = False
    elif kind == KIND_PLANNED:  # saved before the stop: a durable checkpoint of the progress
        _copy_point(pts, PT_DURABLE, PT_NOW)
        k[K_STORAGE_WRITES] += 1
        from_memory = False
    else:
        from_memory = _restores_from_memory(p) and memory_ok == 1 and k[K_MEMORY_VALID] == 1
    lost = x[X_PARTIAL] + _restore(p, x, k, pts, PT_MEMORY if from_memory else PT_DURABLE)
    if kind == KIND_PLANNED:  # the checkpoints stay on their grid of multiples of K
        k[K_NEXT_CHECKPOINT] = (int(pts[PT_NOW, P_DONE]) // p.checkpoint_every + 1) * p.checkpoint_every
    if from_memory:
        k[K_MEMORY_RECOVERIES] += 1
    if kind == KIND_HANG:
        k[K_HANGS] += 1
        x[X_HANG] += lost
    elif kind == KIND_INSTABILITY:
        k[K_INSTABILITIES] += 1
        x[X_INSTABILITY] += lost
    elif kind == KIND_PLANNED:
        k[K_PLANNED] += 1
        x[X_PLANNED] += lost
    return from_memory


@jit_inline
def _take_spares(p, fc, c, x, k, repair_time, repair_tag, wait_until, rec_stream):
    """Failure of class ``c`` takes its nodes to repair (each for the class's repair time, or a draw of its
    lognormal law from ``rec_stream``); returns when the spares it needs are there (``K_OVERFLOW`` set
    when the repair heap is full)."""
    t = x[X_T]
    repair_size = k[K_REPAIR_SIZE]
    spares_free = k[K_SPARES_FREE]
    while repair_size > 0 and repair_time[0] <= t:
        _, _, repair_size = heap_pop(repair_time, repair_tag, repair_size)
        spares_free += 1
    need = fc.nodes_taken[c]
    sigma = fc.repair_sigma[c]
    for _ in range(need):
        repair_s = fc.repair_s[c] * (_lognormal_mean_one(rec_stream, sigma) if sigma > 0.0 else 1.0)
        repair_size = heap_push(repair_time, repair_tag, repair_size, t + repair_s, c)
        if repair_size < 0:
            k[K_OVERFLOW] = RUN_REPAIR_HEAP_FULL
            return wait_until
    if spares_free >= need:
        spares_free -= need
    else:
        for _ in range(need - spares_free):
            back, _, repair_size = heap_pop(repair_time, repair_tag, repair_size)
            wait_until = max(wait_until, back)
        spares_free = 0
    k[K_REPAIR_SIZE] = repair_size
    k[K_SPARES_FREE] = spares_free
    return wait_until


@jit_inline
def _recover(
    p,
    fc,
    x,
    k,
    pts,
    streams,
    rec_stream,
    pool_left,
    pool_hazard,
    pool_next,
    heap_time,
    heap_class,
    repair_time,
    repair_tag,
):
    """Recovery, restarted by every fail-stop failure that strikes during it.

    A hang or an instability needs a running job: one that falls in a recovery is dropped (its
    unit renews; it is not counted). Stops early with ``K_OVERFLOW`` set when a heap is full.
    """
    from_memory = False
    first = True
    wait_until = x[X_T]
    kind = KIND_FAIL_STOP  # the kind of the event whose recovery is under way
    detect_end = x[X_T]
    ready_end = x[X_T]  # the incidents' own recovery (replacement, decision, a person) ends here
    recovery_end = x[X_T]
    restart_end = x[X_T]  # the restart's parts end here; the load follows
    while True:
        t = x[X_T]
        # The failing unit's class, for its replacement.
        failing = pending_class(k[K_SOURCE], heap_class)
        c, heap_size = consume_failure(
            k[K_SOURCE],
            t,
            pool_left,
            pool_hazard,
            pool_next,
            heap_time,
            heap_class,
            k[K_HEAP_SIZE],
            fc.shape,
            fc.scale_s,
            fc.start,
            fc.age_s,
            streams,
            fc.bad_share[failing],
            fc.bad_mean_s[failing],
        )
        if heap_size < 0:
            k[K_OVERFLOW] = RUN_FAILURE_HEAP_FULL
            return
        k[K_HEAP_SIZE] = heap_size
        if not first and fc.kind[c] != KIND_FAIL_STOP:
            k[K_DROPPED] += 1
        else:
            k[K_FAILURES] += 1
            opening = first
            if first:
                from_memory = _interrupt(p, fc.kind[c], fc.rollback_checkpoints[c], fc.memory_ok[c], x, k, pts)
                first = False
            elif from_memory and fc.memory_ok[c] == 0:
                # The snapshot being restored is destroyed: fall back to storage.
                _restore(p, x, k, pts, PT_DURABLE)
                from_memory = False
                k[K_MEMORY_RECOVERIES] -= 1
            _copy_point(pts, PT_MEMORY, PT_NOW)
            # After a restore from storage no replica of the restored state exists yet.
            if not from_memory:
                k[K_MEMORY_VALID] = 0
            if p.spare_nodes >= 0 and fc.nodes_taken[c] > 0:
                wait_until = _take_spares(p, fc, c, x, k, repair_time, repair_tag, wait_until, rec_stream)
                if k[K_OVERFLOW] != RUN_DONE:
                    return
            load = p.load_memory_s if from_memory else p.load_s
            if from_memory:
                k[K_MEMORY_LOADS] += 1
            else:
                k[K_STORAGE_LOADS] += 1
            detect_new = t + fc.detect_s[c] if fc.kind[c] == KIND_HANG else t
            ready_new = max(detect_new, wait_until) + _class_recovery_s(fc, c, rec_stream)
            # The recovery already under way for a detected incident (a replacement, a decision, a
            # person's time) goes on: training restarts after the later of the two, charged to its cause.
            if opening or t < detect_end or ready_new >= ready_end:
                kind, detect_end, ready_end = fc.kind[c], detect_new, ready_new
            restart_end = ready_end + p.restart_s
            recovery_end = restart_end + load
        fail_t, source = next_failure(pool_next, heap_time, heap_size)
        x[X_FAIL_T] = fail_t
        k[K_SOURCE] = source
        stop = min(recovery_end, fail_t, p.max_wall_s)
        _book_recovery(p, x, kind, t, stop, wait_until, detect_end, restart_end, recovery_end)
        x[X_T] = stop
        if stop < fail_t or stop >= p.max_wall_s or k[K_FAILURES] + k[K_DROPPED] >= p.max_failures:
            return


@jit_inline
def _next_kind(fc, k, heap_class):
    """Kind of the earliest pending failure (``KIND_FAIL_STOP`` when none is pending)."""
    c = pending_class(k[K_SOURCE], heap_class)
    return fc.kind[c] if c >= 0 else KIND_FAIL_STOP


@jit_inline
def _restart(p, x, job_stream, ep_stream):
    """Training resumes: a new job factor and attempt (no degradation); the restart ends every episode."""
    x[X_JOB] = _job_factor(job_stream, p.job_sigma)
    t = x[X_T]
    _begin_attempt(p, x, t)
    # Those that began during the recovery too.
    x[X_EPISODE_UNTIL] = min(x[X_EPISODE_UNTIL], t)
    while x[X_EPISODE_NEXT] <= t:
        x[X_EPISODE_NEXT] += _exponential(ep_stream) / p.episode_rate_per_s


@jit_inline
def _write_outputs(row, x, k, pts):
    """The output columns (``OUTPUT_COLUMNS``) from the final state."""
    row[OUT_WALL_S] = x[X_T]
    row[OUT_FAILURES] = k[K_FAILURES]
    row[OUT_LOST_S] = x[X_LOST]
    row[OUT_CHECKPOINT_S] = x[X_CHECKPOINT]
    row[OUT_RECOVERY_S] = x[X_RECOVERY]
    row[OUT_STRAGGLER_S] = pts[PT_NOW, P_TRANSIENT] + pts[PT_NOW, P_PERSISTENT]
    row[OUT_COMPLETED] = k[K_COMPLETED]
    row[OUT_ITERATIONS_DONE] = pts[PT_NOW, P_DONE]
    row[OUT_BUSY_S] = x[X_BUSY]
    row[OUT_CHECKPOINTS] = k[K_CHECKPOINTS]
    row[OUT_STRAGGLER_TRANSIENT_S] = pts[PT_NOW, P_TRANSIENT]
    row[OUT_STRAGGLER_PERSISTENT_S] = pts[PT_NOW, P_PERSISTENT]
    row[OUT_MEMORY_RECOVERIES] = k[K_MEMORY_RECOVERIES]
    row[OUT_SPARE_WAIT_S] = x[X_SPARE_WAIT]
    row[OUT_EPISODE_PHASE_S] = pts[PT_NOW, P_EPISODE_PHASE]
    row[OUT_STORAGE_WRITES] = k[K_STORAGE_WRITES]
    row[OUT_STORAGE_LOADS] = k[K_STORAGE_LOADS]
    row[OUT_MEMORY_LOADS] = k[K_MEMORY_LOADS]
    row[OUT_EXECUTED_ITERATIONS] = x[X_EXECUTED]
    row[OUT_HANGS] = k[K_HANGS]
    row[OUT_INSTABILITIES] = k[K_INSTABILITIES]
    row[OUT_HANG_S] = x[X_HANG]
    row[OUT_HANG_DETECTION_S] = x[X_HANG_DETECT]
    row[OUT_INSTABILITY_S] = x[X_INSTABILITY]
    row[OUT_PLANNED_STOPS] = k[K_PLANNED]
    row[OUT_PLANNED_S] = x[X_PLANNED]
    row[OUT_RESTART_S] = x[X_RESTART]
    row[OUT_LOAD_S] = x[X_LOADING]


# --- Fast mode: whole stretches of checkpoint cycles at once -----------------------------------

STRETCH_Z = 8.0  # margin, in standard deviations, that a stretch keeps from the next event


@jit_inline
def _cycles_within(distance, mean, std):
    """Largest ``n >= 0`` with ``n mean + STRETCH_Z sqrt(n) std <= distance`` (cycles of that mean and std)."""
    if not distance > 0.0 or not mean > 0.0:
        return 0
    if distance == np.inf:
        return 1 << 62
    root = (-STRETCH_Z * std + math.sqrt(STRETCH_Z * STRETCH_Z * std * std + 4.0 * mean * distance)) / (2.0 * mean)
    n = int(root * root)
    while n > 0 and n * mean + STRETCH_Z * math.sqrt(n) * std > distance:
        n -= 1
    return n


@jit_inline
def _stretch_point(pts, dst, j, n, t0, t_of_n_frac, stall_and_wait_s):
    """Progress point after ``j`` of the ``n`` cycles of a stretch, by interpolation (never reached
    by a failure: see :func:`_advance_stretch`); returns its time."""
    share = j / n
    for col in range(N_P):
        pts[dst, col] = pts[PT_STRETCH_START, col] + share * (pts[PT_NOW, col] - pts[PT_STRETCH_START, col])
    return t0 + share * t_of_n_frac + j * stall_and_wait_s


@jit_inline
def _stretch_writes(p, x, k, pts, n, t0, dt_sum, cycle_extra_s, heavy):
    """The strategy's hook for ``n`` skipped cycles: counters and restore points in closed form.

    ``cycle_extra_s``: stall (and, ``heavy``, the write wait's deterministic length) per cycle.
    """
    t_end = x[X_T]
    span = 0.0 if heavy else dt_sum  # the random part of the stretch's time
    if p.strategy == STRATEGY_SYNC:
        _copy_point(pts, PT_DURABLE, PT_NOW)
        k[K_STORAGE_WRITES] += n
        return
    if p.strategy == STRATEGY_ASYNC:
        k[K_STORAGE_WRITES] += n
        if k[K_PENDING] == 1:  # the write in flight at the start is durable by checkpoint 1
            _copy_point(pts, PT_DURABLE, PT_PENDING)
        if n >= 2:
            _stretch_point(pts, PT_DURABLE, n - 1, n, t0, span, cycle_extra_s)
        _copy_point(pts, PT_PENDING, PT_NOW)
        k[K_PENDING] = 1
        x[X_PENDING_READY] = t_end + p.checkpoint_write_s
        x[X_GATE] = x[X_PENDING_READY]
        return
    # in_memory: snapshots replicated; every persist_every-th persisted (none skipped: regular regime)
    if k[K_REPLICATING] == 1:  # the replica in flight at the start is restorable by checkpoint 1
        _copy_point(pts, PT_MEMORY, PT_REPLICATING)
        k[K_MEMORY_VALID] = 1
        k[K_REPLICATING] = 0
    if n >= 2:
        _stretch_point(pts, PT_MEMORY, n - 1, n, t0, span, cycle_extra_s)
        k[K_MEMORY_VALID] = 1
    s0 = k[K_SNAPSHOTS]
    pe = p.persist_every
    persists = (s0 + n) // pe - s0 // pe
    k[K_SNAPSHOTS] = s0 + n
    k[K_STORAGE_WRITES] += persists
    if persists >= 1:
        if k[K_PENDING] == 1:  # durable before the first persist of the stretch
            _copy_point(pts, PT_DURABLE, PT_PENDING)
        last = (s0 + n) // pe * pe - s0
        if persists >= 2:
            _stretch_point(pts, PT_DURABLE, last - pe, n, t0, span, cycle_extra_s)
        t_last = _stretch_point(pts, PT_PENDING, last, n, t0, span, cycle_extra_s)
        k[K_PENDING] = 1
        x[X_PENDING_READY] = t_last + p.checkpoint_write_s
    _complete_writes(x, k, pts)
    _copy_point(pts, PT_REPLICATING, PT_NOW)
    k[K_REPLICATING] = 1
    x[X_REPLICA_READY] = t_end + p.replicate_s
    x[X_GATE] = x[X_REPLICA_READY]


@jit_inline
def _stretch_tail(p, x, k, t, cycle_mean, cycle_std):
    """Cycles of a stretch walked one by one before the next failure, so that every restore point a
    failure can reach is walked; -1 when in_memory's persists would not be durable in time (no stretch)."""
    if p.strategy == STRATEGY_SYNC:
        return 0
    if p.strategy != STRATEGY_IN_MEMORY:
        return 1
    pe = p.persist_every
    # Regular persists: each storage write is durable before the next persist is due.
    if p.checkpoint_write_s > pe * cycle_mean - STRETCH_Z * math.sqrt(pe) * cycle_std:
        return -1
    if k[K_PENDING] == 1:
        first = pe - k[K_SNAPSHOTS] % pe
        if x[X_PENDING_READY] > t + first * cycle_mean - STRETCH_Z * math.sqrt(first) * cycle_std:
            return -1
    return 2 * pe


@jit_inline
def _advance_stretch(p, x, k, pts, it_stream, horizon, active, transition):
    """Fast mode: advance ``n`` whole checkpoint cycles (block, wait, stall) with one normal draw.

    From a checkpoint boundary in a steady state, the cycles up to the next event are iid:
    a block of K iterations (``c J S + K comm``, ``S ~ N(K E[F], K Var[F])``), the wait for
    the previous write (none when the write is ``8 sd`` shorter than the block, ``W - block``
    when it is ``8 sd`` longer) and the stall. The sum of ``n`` blocks' factor sums is
    ``N(nK E[F], nK Var[F])``: drawn at once, exactly given the normal law. ``n`` keeps
    ``8 sd`` from the next failure or the wall-clock limit plus a tail of cycles that are
    walked one by one (so that every restore point a failure can reach is walked), and
    ``8 sd`` plus one block from the next episode change. Returns the cycles advanced (0: none).
    """
    K = p.checkpoint_every
    done = pts[PT_NOW, P_DONE]
    if k[K_NEXT_CHECKPOINT] - done != K:
        return 0
    if active:
        f_mean, f_std, min_block = p.factor_mean_episode, p.factor_std_episode, p.fast_min_block_episode
    else:
        f_mean, f_std, min_block = p.factor_mean, p.factor_std, p.fast_min_block
    n_max = (k[K_PHASE_END] - int(done) - 1) // K  # cycles that end with a checkpoint, in this phase
    if n_max < 1 or n_max * K < min_block:
        return 0
    t = x[X_T]
    job = x[X_JOB] * x[X_DEGRADE]
    c, comm = x[X_COMPUTE], x[X_COMM]
    iter_mean = c * job * f_mean + comm
    block_mean = K * iter_mean
    block_std = c * job * math.sqrt(K) * f_std
    if p.strategy == STRATEGY_SYNC:
        write = 0.0
    elif p.strategy == STRATEGY_ASYNC:
        write = p.checkpoint_write_s
    else:
        write = p.replicate_s
    heavy = False
    if write <= block_mean - STRETCH_Z * block_std:
        cycle_mean, cycle_std = block_mean + p.checkpoint_stall_s, block_std
    elif write >= block_mean + STRETCH_Z * block_std and x[X_GATE] == t + write:
        heavy = True
        cycle_mean, cycle_std = write + p.checkpoint_stall_s, 0.0
    else:
        return 0  # the write and the block overlap: cycles are walked
    tail = _stretch_tail(p, x, k, t, cycle_mean, cycle_std)
    if tail < 0:
        return 0
    n = _cycles_within(horizon - t, cycle_mean, cycle_std) - tail
    if transition < np.inf:
        n = min(n, _cycles_within(transition - t - block_mean, cycle_mean, cycle_std))
    n = min(n, n_max)
    if n < 1 or n * K < min_block:
        return 0

    iterations = float(n * K)
    total = iterations * f_mean + math.sqrt(iterations) * f_std * ndtri_acklam(uniform(it_stream))
    total = max(total, 0.0)
    dt_sum = c * job * total + iterations * comm
    extra = write + p.checkpoint_stall_s if heavy else p.checkpoint_stall_s
    t_end = t + n * extra if heavy else t + dt_sum + n * extra
    if t_end > horizon:
        return 0  # beyond 8 sd (probability < 1e-15): walk instead
    x[X_CHECKPOINT] += n * extra - dt_sum if heavy else n * extra
    _copy_point(pts, PT_STRETCH_START, PT_NOW)
    pts[PT_NOW, P_DONE] = done + iterations
    x[X_EXECUTED] += iterations
    pts[PT_NOW, P_ALIVE] += dt_sum
    x[X_BUSY] += dt_sum
    if active:  # transient share at its expectation; the rest is persistent
        transient = c * iterations * (p.factor_mean - 1.0)
        pts[PT_NOW, P_EPISODE_PHASE] += c * job * total
    else:
        transient = c * (total - iterations)
    pts[PT_NOW, P_TRANSIENT] += transient
    pts[PT_NOW, P_PERSISTENT] += dt_sum - iterations * (c + comm) - transient
    x[X_T] = t_end
    k[K_CHECKPOINTS] += n
    k[K_NEXT_CHECKPOINT] = int(done) + (n + 1) * K
    _stretch_writes(p, x, k, pts, n, t, dt_sum, extra, heavy)
    return n


# --- The run loop --------------------------------------------------------------------------


# Compiled on its own, not inlined into simulate_runs: one call per run costs nothing
# measurable, and inlining the whole run loop (with the events it inlines) into the
# entry point made the first compile about 2.6x longer (docs/model.md §4 "Compile time").
# Unmanaged (no reference counting, issue 26): every array comes from the caller's workspace.
@jit_unmanaged
def _simulate_run(p, fc, phases, seed, run, row, ws):
    """Run ``run`` of the configuration into ``row``, in the workspace ``ws`` (:func:`_workspace`).

    Returns ``RUN_DONE``, or which workspace array was too small (``row`` is then not written).
    """
    x, k, pts, streams, run_streams, pools, heap_time, heap_class, repair_time, repair_tag = ws
    _start_run(p, fc, phases, seed, run, ws)
    it_stream, job_stream, ep_stream, rec_stream = run_streams[0], run_streams[1], run_streams[2], run_streams[3]
    pool_left, pool_hazard, pool_next = pools[0], pools[1], pools[2]
    has_phases = phases.shape[0] > 0
    has_planned = _has_kind(fc, KIND_PLANNED)  # read once: the loop asks the next kind only when it may matter

    while True:
        horizon = min(x[X_FAIL_T], p.max_wall_s)
        if pts[PT_NOW, P_DONE] >= p.iterations:
            k[K_COMPLETED] = 1
            break
        if x[X_T] >= p.max_wall_s or k[K_FAILURES] + k[K_DROPPED] >= p.max_failures:
            break
        if has_phases and not x[X_PHASE_START] <= pts[PT_NOW, P_DONE] < k[K_PHASE_END]:
            _enter_phase(p, x, k, pts[PT_NOW, P_DONE])
        active, transition = _episodes_at(p, x, ep_stream)
        if p.degradation_per_s > 0.0:
            transition = min(transition, _degradation_at(p, x))
        if p.fast and _advance_stretch(p, x, k, pts, it_stream, horizon, active, transition) > 0:
            continue
        status = _advance_block(p, x, k, pts, it_stream, horizon, active, transition)
        if status == BLOCK_CUT:
            continue  # the episode state changed: re-evaluate before going on
        if status == BLOCK_DONE:
            if pts[PT_NOW, P_DONE] >= p.iterations or not _checkpoint(p, x, k, pts, horizon):
                continue
        if horizon < x[X_FAIL_T]:
            break  # censored at max_wall_s
        if has_planned and status == BLOCK_INTERRUPTED and _next_kind(fc, k, heap_class) == KIND_PLANNED:
            _keep_block_share(p, x, pts, active)
        _failure(x, k, pts)
        _recover(
            p,
            fc,
            x,
            k,
            pts,
            streams,
            rec_stream,
            pool_left,
            pool_hazard,
            pool_next,
            heap_time,
            heap_class,
            repair_time,
            repair_tag,
        )
        if k[K_OVERFLOW] != RUN_DONE:
            return k[K_OVERFLOW]
        _restart(p, x, job_stream, ep_stream)
    _write_outputs(row, x, k, pts)
    return RUN_DONE


@jit_inline
def _start_run(p, fc, phases, seed, run, ws):
    """The run's state at t = 0 in the workspace: its streams seeded, the failure processes in their
    start states, the first phase, attempt, job factor and episode arrival, the first pending failure."""
    x, k, pts, streams, run_streams, pools, heap_time, heap_class, repair_time, repair_tag = ws
    for c in range(fc.units.shape[0]):
        seed_stream(streams[c], seed, run, STREAM_FIRST_FAILURE_CLASS + c)
    for i, stream in enumerate((STREAM_ITERATION, STREAM_JOB, STREAM_EPISODE, STREAM_RECOVERY)):
        seed_stream(run_streams[i], seed, run, stream)
    init_failures(fc.units, fc.shape, fc.scale_s, fc.start, fc.age_s, streams, pools[0], pools[1], pools[2])
    _clear_state(x, k, pts)
    k[K_SPARES_FREE] = p.spare_nodes
    k[K_NEXT_CHECKPOINT] = p.checkpoint_every
    x[X_COMPUTE] = p.compute_time_s
    x[X_COMM] = p.comm_time_s
    k[K_PHASE_END] = p.iterations
    if phases.shape[0] > 0:
        _load_phases(p, phases, x, k)
    _begin_attempt(p, x, 0.0)
    x[X_GATE] = -np.inf
    x[X_JOB] = _job_factor(run_streams[1], p.job_sigma)
    x[X_EPISODE_NEXT] = np.inf
    if p.episode_rate_per_s > 0.0:
        x[X_EPISODE_NEXT] = _exponential(run_streams[2]) / p.episode_rate_per_s
    # The earliest pending failure changes only when a failure is consumed.
    x[X_FAIL_T], k[K_SOURCE] = next_failure(pools[2], heap_time, 0)


@jit_inline
def _clear_state(x, k, pts):
    """Every slot of the run's state to 0 (the workspace is reused from run to run)."""
    for i in range(x.shape[0]):
        x[i] = 0.0
    for i in range(k.shape[0]):
        k[i] = 0
    for i in range(pts.shape[0]):
        for j in range(pts.shape[1]):
            pts[i, j] = 0.0


# --- Entry points ---------------------------------------------------------------------------


# First sizes of the heaps. Replaced units pending a failure: at most every unit once, so the units
# (up to FAILURE_HEAP_MAX entries, 1 MiB) fit any run; spare nodes under repair: REPAIR_HEAP_START. A
# run that needs more runs again with twice the room (a run cut short is wasted work, so the first
# sizes avoid it), and the larger arrays serve the runs after it.
FAILURE_HEAP_MAX = 65_536
REPAIR_HEAP_START = 64


@jit_inline
def _workspace(units, phase_values):
    """The arrays one run works in (:func:`_simulate_run`), allocated once per kernel call (``units``:
    the failure classes' units)."""
    n_classes = units.shape[0]
    heap = 1
    for c in range(n_classes):
        heap += units[c]
    heap = min(heap, FAILURE_HEAP_MAX)
    return (
        np.empty(N_X + phase_values),  # x
        np.empty(N_K, np.int64),  # k
        np.empty((N_PT, N_P)),  # pts
        np.empty((n_classes, 4), np.uint64),  # the classes' streams
        np.empty((4, 4), np.uint64),  # iteration, job, episode and recovery streams
        np.empty((3, n_classes)),  # pool_left, pool_hazard, pool_next
        np.empty(heap),
        np.empty(heap, np.int64),
        np.empty(REPAIR_HEAP_START),
        np.empty(REPAIR_HEAP_START, np.int64),
    )


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
    return RunParams(
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
    )


@jit_inline
def _row_classes(c, j):
    """Parameter set ``j`` of the failure-class table ``c`` (2-D: set x class) as FailureClasses."""
    return FailureClasses(
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
    )


@jit
def simulate_runs_table(table, classes, phases, row_param, row_stream_run, seed, out):
    """Simulate one run per output row, each with its own parameter set and random streams, in this thread.

    Serial and ``nogil`` like :func:`simulate_runs`: :func:`mcsim.engine.tasks.run_kernel` runs
    slices of the rows on several threads at once (each row depends only on its own
    parameter set and stream index, so the split never changes a result).

    Parameters
    ----------
    table : RunParams of arrays
        Every field an array over the parameter sets (e.g. the parameter draws of one
        configuration): int64, float64 or bool as the field's scalar type
        (:func:`params_table`).
    classes : FailureClasses of 2-D arrays
        Per parameter set (rows) and failure class (columns) (:func:`classes_table`).
    phases : float64[n_sets, n_phases, N_PH]
        Per parameter set, its phase table (:func:`phases_table`; no rows: one phase).
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
    ws = _workspace(classes.units[largest], phases.shape[1] * phases.shape[2])
    for i in range(out.shape[0]):
        j = row_param[i]
        ws = _run_growing(
            _row_params(table, j), _row_classes(classes, j), phases[j], seed, row_stream_run[i], out[i], ws
        )


@jit
def simulate_runs(p, fc, phases, seed, first_run, out):
    """Simulate runs ``first_run .. first_run + out.shape[0] - 1`` of one configuration, in this thread.

    It holds no GIL (``nogil``): :func:`mcsim.engine.tasks.run_kernel` runs slices of the runs
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
        iteration times; :func:`no_phases`).
    seed : int
        Scenario seed; with the run index it names every random stream.
    first_run : int
        Global index of the first run of this call.
    out : float64[n_runs, N_OUT]
        Filled in place; each run writes its own row only.
    """
    ws = _workspace(fc.units, phases.size)
    for i in range(out.shape[0]):
        ws = _run_growing(p, fc, phases, seed, first_run + i, out[i], ws)
