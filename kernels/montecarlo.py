"""The Monte Carlo run loop: one whole stochastic training run per random stream.

Semantics (see ``docs/model.md`` for the full statement):

* Iterations take ``compute_time_s * J * M + comm_time_s``; ``M`` is the
  slowest of ``n_ranks`` lognormal rank factors, ``J`` the job-level factor
  drawn at start and after every restart.
* A checkpoint is taken every ``checkpoint_every`` iterations. Synchronous:
  training stalls ``checkpoint_stall_s`` and the checkpoint is durable when
  the stall ends. Asynchronous: training stalls ``checkpoint_stall_s`` (copy
  to host memory), the checkpoint is durable ``checkpoint_write_s`` later; a
  new checkpoint waits until the previous one is durable.
* On a failure all iterations after the last durable checkpoint are lost;
  recovery takes the class's recovery time plus ``load_s``, restarted by any
  failure that strikes during it.
* A run ends when all iterations are done, or is censored at ``max_wall_s``
  or after ``max_failures`` failures, so it never loops unbounded.
* Exact mode draws ``M`` every iteration. Fast mode (``fast_min_block > 0``)
  draws the sum of ``K >= fast_min_block`` factors of a block between two
  checkpoints at once from the normal law N(K E[M], K Var[M]).

Time bookkeeping: ``wall = alive_iteration_time + lost + checkpoint + recovery``
for completed runs, with ``alive_iteration_time = iterations * ideal +
straggler`` (``ideal = compute_time_s + comm_time_s``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from .accelerate import jit, jit_parallel
from .normal import max_lognormal_factor, ndtri
from .renewal import consume_failure, init_failures, next_failure
from .rng import seed_stream, uniform

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
N_OUT = 10

# Random streams of a run (stream ids given to :func:`rng.seed_stream`).
STREAM_ITERATION = 0
STREAM_JOB = 1
STREAM_FIRST_FAILURE_CLASS = 2


class RunParams(NamedTuple):
    """Scalars of one configuration, in seconds unless named otherwise."""

    iterations: int
    compute_time_s: float
    comm_time_s: float
    n_ranks: float
    sigma: float
    job_sigma: float
    checkpoint_every: int
    checkpoint_stall_s: float
    checkpoint_write_s: float
    is_async: bool
    load_s: float
    max_wall_s: float
    max_failures: int
    fast_min_block: int
    factor_mean: float
    factor_std: float


@jit
def _job_factor(state, job_sigma):
    if job_sigma == 0.0:
        return 1.0
    return max(1.0, math.exp(job_sigma * ndtri(uniform(state))))


@jit
def _simulate_run(p, units, shape, scale_s, recovery_s, seed, run, row):
    n_classes = units.shape[0]
    streams = np.empty((n_classes, 4), np.uint64)
    for c in range(n_classes):
        seed_stream(streams[c], seed, run, STREAM_FIRST_FAILURE_CLASS + c)
    it_stream = np.empty(4, np.uint64)
    seed_stream(it_stream, seed, run, STREAM_ITERATION)
    job_stream = np.empty(4, np.uint64)
    seed_stream(job_stream, seed, run, STREAM_JOB)

    pool_left, pool_hazard, pool_next, heap_time, heap_class = init_failures(
        units, shape, scale_s, streams)
    heap_size = 0

    t = 0.0
    done = 0                  # iterations completed and not rolled back
    alive_s = 0.0             # time spent on those iterations
    alive_strag_s = 0.0       # straggler excess within them
    # (iterations, alive_s, alive_strag_s) at the last durable checkpoint, and at the
    # asynchronous one being written in the background (durable at pending_ready_s).
    durable = (0, 0.0, 0.0)
    pending = durable
    pending_active = False
    pending_ready_s = 0.0
    next_checkpoint = p.checkpoint_every
    lost_s = 0.0
    checkpoint_s = 0.0
    recovery_s_total = 0.0
    busy_s = 0.0
    n_failures = 0
    n_checkpoints = 0
    completed = False
    job = _job_factor(job_stream, p.job_sigma)
    ideal_iter = p.compute_time_s + p.comm_time_s

    while True:
        fail_t, source = next_failure(pool_next, heap_time, heap_size)
        horizon = min(fail_t, p.max_wall_s)
        if done >= p.iterations:
            completed = True
            break
        if t >= p.max_wall_s or n_failures >= p.max_failures:
            break

        # --- a block of iterations up to the next checkpoint (or the end) ---
        interrupted = False
        target = min(next_checkpoint, p.iterations)
        block = target - done
        if p.fast_min_block > 0 and block >= p.fast_min_block:
            total = block * p.factor_mean + math.sqrt(block) * p.factor_std * ndtri(uniform(it_stream))
            total = max(total, 0.0)
            dt = p.compute_time_s * job * total + block * p.comm_time_s
            if t + dt > horizon:
                interrupted = True
            else:
                t += dt
                done = target
                alive_s += dt
                busy_s += dt
                alive_strag_s += dt - block * ideal_iter
        else:
            while done < target:
                m = max_lognormal_factor(uniform(it_stream), p.n_ranks, p.sigma)
                dt = p.compute_time_s * job * m + p.comm_time_s
                if t + dt > horizon:
                    interrupted = True
                    break
                t += dt
                done += 1
                alive_s += dt
                busy_s += dt
                alive_strag_s += dt - ideal_iter
        partial_s = 0.0
        if interrupted:
            # The GPUs computed up to the horizon; that partial block or
            # iteration is lost if the horizon is a failure.
            partial_s = horizon - t
            busy_s += partial_s
            t = horizon
        elif done < p.iterations:
            # --- checkpoint after iteration `done` ---
            if pending_active:
                if pending_ready_s > t:
                    # Wait for the previous asynchronous checkpoint to be durable.
                    wait_end = min(pending_ready_s, horizon)
                    checkpoint_s += wait_end - t
                    t = wait_end
                    interrupted = t < pending_ready_s
                if not interrupted:
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
                    if p.is_async:
                        pending = (done, alive_s, alive_strag_s)
                        pending_active = True
                        pending_ready_s = t + p.checkpoint_write_s
                    else:
                        durable = (done, alive_s, alive_strag_s)
        if not interrupted:
            continue
        if horizon < fail_t:
            break  # censored at max_wall_s

        # --- failure at t == fail_t: roll back to the last durable checkpoint ---
        if pending_active and pending_ready_s <= t:
            durable = pending
        pending_active = False
        lost_s += partial_s + alive_s - durable[1]
        done, alive_s, alive_strag_s = durable
        next_checkpoint = done + p.checkpoint_every
        # --- recovery, restarted by every failure that strikes during it ---
        while True:
            n_failures += 1
            c, heap_time, heap_class, heap_size = consume_failure(
                source, t, pool_left, pool_hazard, pool_next, heap_time, heap_class,
                heap_size, shape, scale_s, streams)
            recovery_end = t + recovery_s[c] + p.load_s
            fail_t, source = next_failure(pool_next, heap_time, heap_size)
            stop = min(recovery_end, fail_t, p.max_wall_s)
            recovery_s_total += stop - t
            t = stop
            if stop < fail_t or stop >= p.max_wall_s or n_failures >= p.max_failures:
                break
        job = _job_factor(job_stream, p.job_sigma)

    row[OUT_WALL_S] = t
    row[OUT_FAILURES] = n_failures
    row[OUT_LOST_S] = lost_s
    row[OUT_CHECKPOINT_S] = checkpoint_s
    row[OUT_RECOVERY_S] = recovery_s_total
    row[OUT_STRAGGLER_S] = alive_strag_s
    row[OUT_COMPLETED] = 1.0 if completed else 0.0
    row[OUT_ITERATIONS_DONE] = done
    row[OUT_BUSY_S] = busy_s
    row[OUT_CHECKPOINTS] = n_checkpoints


@jit_parallel
def simulate_runs(p, units, shape, scale_s, recovery_s, seed, first_run, out):
    """Simulate runs ``first_run .. first_run + out.shape[0] - 1`` of one configuration.

    Parameters
    ----------
    p : RunParams
        Scalars of the configuration.
    units : int64[n_classes]
        Units per failure class.
    shape : float64[n_classes]
        Weibull shape k per class.
    scale_s : float64[n_classes]
        Weibull scale lambda per class, s.
    recovery_s : float64[n_classes]
        Recovery time per class before the checkpoint load, s.
    seed : int
        Scenario seed; with the run index it names every random stream.
    first_run : int
        Global index of the first run of this call.
    out : float64[n_runs, N_OUT]
        Filled in place; each run writes its own row only.
    """
    for i in numba.prange(out.shape[0]):
        _simulate_run(p, units, shape, scale_s, recovery_s, seed, first_run + i, out[i])
