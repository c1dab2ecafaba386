"""Baseline for benchmarks/bench_kernel.py: the run loop before it became event functions over a workspace.

A frozen copy of ``mcsim/kernels/montecarlo.py`` at commit c763bab (one function,
every checkpoint an event), kept importable so that speed-ups are measured as
ratios in one process. Not used by mcsim itself.

The Monte Carlo run loop: one whole stochastic training run per random stream.

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
  the class's recovery time plus the load, after waiting for spare nodes when
  a spare pool is modelled; a failure during recovery restarts it.
* Slow-node episodes arrive as a Poisson process, last exponential times and
  end at every restart.
* A run ends when all iterations are done, or is censored at ``max_wall_s``
  or after ``max_failures`` failures.
* Exact mode draws ``F`` every iteration. Fast mode draws the sum of a block
  of ``K >= fast_min_block`` factors at once from N(K E[F], K Var[F]).

Time bookkeeping: ``wall = alive_iteration_time + lost + checkpoint + recovery``
for completed runs, with ``alive_iteration_time = iterations * ideal +
straggler_transient + straggler_persistent``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from mcsim.kernels.accelerate import jit, jit_parallel
from mcsim.kernels.normal import max_lognormal_factor, ndtri_acklam
from mcsim.kernels.renewal import consume_failure, heap_pop, heap_push, init_failures, next_failure
from mcsim.kernels.rng import seed_stream, uniform

# Columns of the per-run output matrix.
OUT_WALL_S = 0
OUT_FAILURES = 1
OUT_LOST_S = 2
OUT_CHECKPOINT_S = 3
OUT_RECOVERY_S = 4
OUT_STRAGGLER_S = 5
OUT_COMPLETED = 6
OUT_ITERATIONS_DONE = 7
OUT_BUSY_S = 8
OUT_CHECKPOINTS = 9
OUT_STRAGGLER_TRANSIENT_S = 10
OUT_STRAGGLER_PERSISTENT_S = 11
OUT_MEMORY_RECOVERIES = 12
OUT_SPARE_WAIT_S = 13
OUT_EPISODE_PHASE_S = 14  # compute phase (compute_time * J * F) of surviving iterations in episodes
OUT_STORAGE_WRITES = 15  # checkpoint writes to storage started
OUT_STORAGE_LOADS = 16  # loads from storage started (one per recovery attempt)
OUT_MEMORY_LOADS = 17  # loads from a peer's memory started
OUT_EXECUTED_ITERATIONS = 18  # iterations run, rolled-back ones and the interrupted partial one included
N_OUT = 19

STRATEGY_SYNC = 0
STRATEGY_ASYNC = 1  # async and gockpt
STRATEGY_IN_MEMORY = 2

# Random streams of a run (stream ids given to :func:`rng.seed_stream`).
STREAM_ITERATION = 0
STREAM_JOB = 1
STREAM_EPISODE = 2
STREAM_FIRST_FAILURE_CLASS = 3


class RunParams(NamedTuple):
    """Scalars of one configuration, in seconds unless named otherwise."""

    iterations: int
    compute_time_s: float
    comm_time_s: float
    n_ranks: float
    sigma: float
    job_sigma: float
    strategy: int
    checkpoint_every: int
    checkpoint_stall_s: float
    checkpoint_write_s: float  # storage durability after the stall (async, gockpt, in_memory)
    replicate_s: float  # in_memory: snapshot restorable this long after the stall
    persist_every: int  # in_memory: persist every n-th snapshot
    load_s: float  # checkpoint load from storage
    load_memory_s: float  # in_memory: snapshot load from the peer's memory
    episode_rate_per_s: float  # slow-node episodes, whole job
    episode_mean_s: float
    episode_slowdown: float
    spare_nodes: int  # -1: unlimited (recovery as given)
    max_wall_s: float
    max_failures: int
    fast: bool
    fast_min_block: int
    factor_mean: float
    factor_std: float
    fast_min_block_episode: int
    factor_mean_episode: float  # moments of max(M, slowdown)
    factor_std_episode: float


class FailureClasses(NamedTuple):
    """Per-class arrays (one entry per failure class)."""

    units: np.ndarray  # int64: independent units
    shape: np.ndarray  # Weibull shape k
    scale_s: np.ndarray  # Weibull scale lambda, s
    recovery_s: np.ndarray  # recovery before the load, s
    nodes_taken: np.ndarray  # int64: nodes an event takes out (needs as spares)
    memory_ok: np.ndarray  # int64 0/1: an in-memory snapshot survives the event
    repair_s: np.ndarray  # time until a taken node returns to the spare pool, s
    start: np.ndarray  # int64: units at t = 0, renewal.START_NEW / START_STATIONARY / START_AGED
    age_s: np.ndarray  # START_AGED: every unit's age at t = 0, s (0 otherwise)


@jit
def _job_factor(state, job_sigma):
    if job_sigma == 0.0:
        return 1.0
    return max(1.0, math.exp(job_sigma * ndtri_acklam(uniform(state))))


@jit
def _exponential(state):
    return -math.log(uniform(state))


@jit
def _simulate_run(p, fc, seed, run, row):
    n_classes = fc.units.shape[0]
    streams = np.empty((n_classes, 4), np.uint64)
    for c in range(n_classes):
        seed_stream(streams[c], seed, run, STREAM_FIRST_FAILURE_CLASS + c)
    it_stream = np.empty(4, np.uint64)
    seed_stream(it_stream, seed, run, STREAM_ITERATION)
    job_stream = np.empty(4, np.uint64)
    seed_stream(job_stream, seed, run, STREAM_JOB)
    ep_stream = np.empty(4, np.uint64)
    seed_stream(ep_stream, seed, run, STREAM_EPISODE)

    pool_left, pool_hazard, pool_next, heap_time, heap_class = init_failures(
        fc.units, fc.shape, fc.scale_s, fc.start, fc.age_s, streams
    )
    heap_size = 0
    repair_time = np.empty(16)  # spare nodes under repair: return times
    repair_tag = np.empty(16, np.int64)
    repair_size = 0
    spares_free = p.spare_nodes

    t = 0.0
    done = 0  # iterations completed and not rolled back
    alive_s = 0.0  # time spent on those iterations
    transient_s = 0.0  # straggler excess within them: per-iteration noise
    persistent_s = 0.0  # ... and job factor and episodes
    episode_phase_s = 0.0  # compute phase of those iterations spent in slow-node episodes
    # Restore points: (iterations, alive_s, transient_s, persistent_s, episode_phase_s).
    durable = (0, 0.0, 0.0, 0.0, 0.0)  # last durable storage checkpoint
    memory = durable  # last restorable in-memory snapshot (in_memory)
    pending = durable  # storage write in flight, durable at pending_ready_s
    pending_active = False
    pending_ready_s = 0.0
    replicating = durable  # in_memory snapshot being replicated, until replica_ready_s
    replicating_active = False
    replica_ready_s = 0.0
    memory_valid = False  # a replicated snapshot exists in peer memory
    next_checkpoint = p.checkpoint_every
    n_snapshots = 0
    n_storage_writes = 0
    n_storage_loads = 0
    n_memory_loads = 0
    executed = 0.0
    lost_s = 0.0
    checkpoint_s = 0.0
    recovery_total_s = 0.0
    spare_wait_s = 0.0
    busy_s = 0.0
    n_failures = 0
    n_checkpoints = 0
    n_memory_recoveries = 0
    completed = False
    job = _job_factor(job_stream, p.job_sigma)
    ideal_iter = p.compute_time_s + p.comm_time_s
    episode_next = np.inf
    if p.episode_rate_per_s > 0.0:
        episode_next = _exponential(ep_stream) / p.episode_rate_per_s
    episode_until = 0.0

    # The earliest pending failure changes only when a failure is consumed.
    fail_t, source = next_failure(pool_next, heap_time, heap_size)
    while True:
        horizon = min(fail_t, p.max_wall_s)
        if done >= p.iterations:
            completed = True
            break
        if t >= p.max_wall_s or n_failures >= p.max_failures:
            break
        while episode_next <= t:
            episode_until = max(episode_until, episode_next + p.episode_mean_s * _exponential(ep_stream))
            episode_next += _exponential(ep_stream) / p.episode_rate_per_s
        active = episode_until > t
        transition = episode_until if active else episode_next
        if active:
            f_mean, f_std, min_block = p.factor_mean_episode, p.factor_std_episode, p.fast_min_block_episode
        else:
            f_mean, f_std, min_block = p.factor_mean, p.factor_std, p.fast_min_block

        # --- a block of iterations up to the next checkpoint, the end, or an episode change ---
        interrupted = False
        target = min(next_checkpoint, p.iterations)
        block = target - done
        use_fast = p.fast and block >= min_block
        if use_fast and transition < np.inf:
            # Iterations that start before the episode state changes, in expectation.
            fit = math.ceil((transition - t) / (p.compute_time_s * job * f_mean + p.comm_time_s))
            block = min(block, max(1, fit))
            use_fast = block >= min_block
        if use_fast:
            total = block * f_mean + math.sqrt(block) * f_std * ndtri_acklam(uniform(it_stream))
            total = max(total, 0.0)
            dt = p.compute_time_s * job * total + block * p.comm_time_s
            if t + dt > horizon:
                interrupted = True
                executed += block * (horizon - t) / dt
            else:
                t += dt
                done += block
                executed += block
                alive_s += dt
                busy_s += dt
                if active:  # transient share at its expectation; the rest is persistent
                    transient = p.compute_time_s * block * (p.factor_mean - 1.0)
                    episode_phase_s += p.compute_time_s * job * total
                else:
                    transient = p.compute_time_s * (total - block)
                transient_s += transient
                persistent_s += dt - block * ideal_iter - transient
        else:
            stop = done + block
            while done < stop and t < transition:
                m = max_lognormal_factor(uniform(it_stream), p.n_ranks, p.sigma)
                factor = max(m, p.episode_slowdown) if active else m
                dt = p.compute_time_s * job * factor + p.comm_time_s
                if t + dt > horizon:
                    interrupted = True
                    executed += (horizon - t) / dt
                    break
                t += dt
                done += 1
                executed += 1.0
                alive_s += dt
                busy_s += dt
                if active:
                    episode_phase_s += p.compute_time_s * job * factor
                transient_s += p.compute_time_s * (m - 1.0)
                persistent_s += p.compute_time_s * (job * factor - m)
        partial_s = 0.0
        if interrupted:
            # The GPUs computed up to the horizon; lost if the horizon is a failure.
            partial_s = horizon - t
            busy_s += partial_s
            t = horizon
        elif done < target:
            continue  # the episode state changed: re-evaluate before going on
        elif done < p.iterations:
            # --- checkpoint after iteration `done`: first wait for the previous write ---
            tiered = p.strategy == STRATEGY_IN_MEMORY
            waiting = replicating_active if tiered else pending_active
            ready_s = replica_ready_s if tiered else pending_ready_s
            if waiting and ready_s > t:
                wait_end = min(ready_s, horizon)
                checkpoint_s += wait_end - t
                t = wait_end
                interrupted = t < ready_s
            if not interrupted and waiting:
                if tiered:
                    memory = replicating
                    memory_valid = True
                    replicating_active = False
                else:
                    durable = pending
                    pending_active = False
            if not interrupted:
                stall_end = t + p.checkpoint_stall_s
                if stall_end > horizon:
                    checkpoint_s += horizon - t
                    t = horizon
                    interrupted = True
                else:
                    checkpoint_s += p.checkpoint_stall_s
                    t = stall_end
                    n_checkpoints += 1
                    next_checkpoint = done + p.checkpoint_every
                    snapshot = (done, alive_s, transient_s, persistent_s, episode_phase_s)
                    if p.strategy == STRATEGY_SYNC:
                        durable = snapshot
                        n_storage_writes += 1
                    elif p.strategy == STRATEGY_ASYNC:
                        pending = snapshot
                        pending_active = True
                        pending_ready_s = t + p.checkpoint_write_s
                        n_storage_writes += 1
                    else:
                        replicating = snapshot
                        replicating_active = True
                        replica_ready_s = t + p.replicate_s
                        n_snapshots += 1
                        if pending_active and pending_ready_s <= t:
                            durable = pending
                            pending_active = False
                        if n_snapshots % p.persist_every == 0 and not pending_active:
                            pending = snapshot
                            pending_active = True
                            pending_ready_s = t + p.checkpoint_write_s
                            n_storage_writes += 1
        if not interrupted:
            continue
        if horizon < fail_t:
            break  # censored at max_wall_s

        # --- failure at t == fail_t: writes in flight complete only if already done ---
        if pending_active and pending_ready_s <= t:
            durable = pending
        pending_active = False
        if replicating_active and replica_ready_s <= t:
            memory = replicating
            memory_valid = True
        replicating_active = False
        if durable[0] > memory[0]:
            memory = durable
        lost_s += partial_s
        from_memory = False
        first = True
        wait_until = t
        # --- recovery, restarted by every failure that strikes during it ---
        while True:
            n_failures += 1
            c, heap_time, heap_class, heap_size = consume_failure(
                source,
                t,
                pool_left,
                pool_hazard,
                pool_next,
                heap_time,
                heap_class,
                heap_size,
                fc.shape,
                fc.scale_s,
                fc.start,
                fc.age_s,
                streams,
                0.0,  # the failing class's bad-replacement share, a later argument of the renewal code; none here
                1.0,
            )
            if first:
                from_memory = p.strategy == STRATEGY_IN_MEMORY and fc.memory_ok[c] == 1 and memory_valid
                restore = memory if from_memory else durable
                lost_s += alive_s - restore[1]
                done, alive_s, transient_s, persistent_s, episode_phase_s = restore
                next_checkpoint = done + p.checkpoint_every
                if from_memory:
                    n_memory_recoveries += 1
                first = False
            elif from_memory and fc.memory_ok[c] == 0:
                # The snapshot being restored is destroyed: fall back to storage.
                lost_s += alive_s - durable[1]
                done, alive_s, transient_s, persistent_s, episode_phase_s = durable
                next_checkpoint = done + p.checkpoint_every
                from_memory = False
                n_memory_recoveries -= 1
            memory = (done, alive_s, transient_s, persistent_s, episode_phase_s)
            # After a restore from storage no replica of the restored state exists yet.
            memory_valid = memory_valid and from_memory
            if p.spare_nodes >= 0 and fc.nodes_taken[c] > 0:
                while repair_size > 0 and repair_time[0] <= t:
                    _, _, repair_size = heap_pop(repair_time, repair_tag, repair_size)
                    spares_free += 1
                need = fc.nodes_taken[c]
                for _ in range(need):
                    repair_time, repair_tag, repair_size = heap_push(
                        repair_time, repair_tag, repair_size, t + fc.repair_s[c], c
                    )
                if spares_free >= need:
                    spares_free -= need
                else:
                    for _ in range(need - spares_free):
                        back, _, repair_size = heap_pop(repair_time, repair_tag, repair_size)
                        wait_until = max(wait_until, back)
                    spares_free = 0
            load = p.load_memory_s if from_memory else p.load_s
            if from_memory:
                n_memory_loads += 1
            else:
                n_storage_loads += 1
            recovery_end = max(t, wait_until) + fc.recovery_s[c] + load
            fail_t, source = next_failure(pool_next, heap_time, heap_size)
            stop = min(recovery_end, fail_t, p.max_wall_s)
            spare_wait_s += max(0.0, min(wait_until, stop) - t)
            recovery_total_s += stop - t
            t = stop
            if stop < fail_t or stop >= p.max_wall_s or n_failures >= p.max_failures:
                break
        job = _job_factor(job_stream, p.job_sigma)
        # The restart ends every episode, those that began during the recovery too.
        episode_until = min(episode_until, t)
        while episode_next <= t:
            episode_next += _exponential(ep_stream) / p.episode_rate_per_s

    row[OUT_WALL_S] = t
    row[OUT_FAILURES] = n_failures
    row[OUT_LOST_S] = lost_s
    row[OUT_CHECKPOINT_S] = checkpoint_s
    row[OUT_RECOVERY_S] = recovery_total_s
    row[OUT_STRAGGLER_S] = transient_s + persistent_s
    row[OUT_COMPLETED] = 1.0 if completed else 0.0
    row[OUT_ITERATIONS_DONE] = done
    row[OUT_BUSY_S] = busy_s
    row[OUT_CHECKPOINTS] = n_checkpoints
    row[OUT_STRAGGLER_TRANSIENT_S] = transient_s
    row[OUT_STRAGGLER_PERSISTENT_S] = persistent_s
    row[OUT_MEMORY_RECOVERIES] = n_memory_recoveries
    row[OUT_SPARE_WAIT_S] = spare_wait_s
    row[OUT_EPISODE_PHASE_S] = episode_phase_s
    row[OUT_STORAGE_WRITES] = n_storage_writes
    row[OUT_STORAGE_LOADS] = n_storage_loads
    row[OUT_MEMORY_LOADS] = n_memory_loads
    row[OUT_EXECUTED_ITERATIONS] = executed


@jit_parallel
def simulate_runs(p, fc, seed, first_run, out):
    """Simulate runs ``first_run .. first_run + out.shape[0] - 1`` of one configuration.

    Parameters
    ----------
    p : RunParams
        Scalars of the configuration.
    fc : FailureClasses
        Per-class arrays of the failure processes.
    seed : int
        Scenario seed; with the run index it names every random stream.
    first_run : int
        Global index of the first run of this call.
    out : float64[n_runs, N_OUT]
        Filled in place; each run writes its own row only.
    """
    for i in numba.prange(out.shape[0]):
        _simulate_run(p, fc, seed, first_run + i, out[i])
