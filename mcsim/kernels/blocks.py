"""Training between events: blocks of iterations, and fast mode's stretches of whole checkpoint cycles.

:func:`advance_block` advances the run up to the next checkpoint, the end of the phase or of the run,
or a change of the conditions (:mod:`mcsim.kernels.conditions`); a failure or the wall-clock limit
interrupts it. Exact mode draws every iteration's factor ``F``. Fast mode draws the sum of a block of
``K >= fast_min_block`` factors at once from ``N(K E[F], K Var[F])``, and a block of the checkpoint
interval ``short_block < fast_min_block`` from its own law (a polynomial of one normal deviate,
:mod:`mcsim.model.block_law`); shorter blocks are walked iteration by iteration.
:func:`keep_block_share` keeps the whole iterations of a fast block that a planned stop interrupted.

:func:`advance_stretch` advances whole stretches of checkpoint cycles between two events with one such
draw, so that fast mode's cost follows the failures, restarts and episodes, not the checkpoints; the
checkpoints' hooks of a stretch are applied in closed form (:func:`mcsim.kernels.checkpoints.stretch_writes`).
"""

from __future__ import annotations

import math

import numpy as np

from .accelerate import jit_inline, jit_unmanaged
from .checkpoints import gate_s, stretch_writes
from .conditions import factor_law, iteration_terms
from .declarations import STRATEGY_IN_MEMORY, STRATEGY_SYNC
from .normal import max_lognormal_factor, ndtri_acklam
from .rng import uniform
from .workspace import (
    K_CHECKPOINTS,
    K_NEXT_CHECKPOINT,
    K_PENDING,
    K_PHASE_END,
    K_SNAPSHOTS,
    P_ALIVE,
    P_DONE,
    P_EPISODE_PHASE,
    P_PERSISTENT,
    P_TRANSIENT,
    PT_NOW,
    PT_STRETCH_START,
    X_BUSY,
    X_CHECKPOINT,
    X_CUT_BLOCK,
    X_CUT_DT,
    X_CUT_START,
    X_CUT_TOTAL,
    X_EXECUTED,
    X_GATE,
    X_PARTIAL,
    X_PENDING_READY,
    X_T,
    copy_point,
)

# What a block of iterations ended with (:func:`advance_block`).
BLOCK_DONE = 0  # reached the next checkpoint or the end
BLOCK_CUT = 1  # stopped at an episode change
BLOCK_INTERRUPTED = 2  # a failure or the wall-clock limit struck inside it


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
def _transient_s(p, active, c, iterations, total):
    """The transient straggler excess of drawn ``iterations`` of factor sum ``total``, s: the per-iteration
    rank noise, at its expectation in an episode (the rest of the excess is persistent)."""
    if active:
        return c * iterations * (p.factor_mean - 1.0)
    return c * (total - iterations)


@jit_inline
def _book_drawn(p, x, pts, active, iterations, dt, total, c, job, comm):
    """``iterations`` drawn at once (a fast block, or a stretch's blocks) took ``dt`` seconds, their factor
    sum ``total``: the run's counts and times, the straggler excess split into its two parts."""
    x[X_EXECUTED] += iterations
    pts[PT_NOW, P_ALIVE] += dt
    x[X_BUSY] += dt
    transient = _transient_s(p, active, c, iterations, total)
    if active:
        pts[PT_NOW, P_EPISODE_PHASE] += c * job * total
    pts[PT_NOW, P_TRANSIENT] += transient
    pts[PT_NOW, P_PERSISTENT] += dt - iterations * (c + comm) - transient


@jit_inline
def _fast_block_size(p, x, active, block, transition):
    """Whether fast mode draws the ``block`` iterations ahead at once, and how many: those that start
    before the conditions change at ``transition``, in expectation. Returns ``(block, drawn at once)``."""
    f_mean, _, min_block = factor_law(p, active)
    short = float(p.short_block) if p.fast and not active else -1.0  # a short block with its own law
    use_fast = p.fast and (block >= min_block or block == short)
    if use_fast and transition < np.inf:
        c, job, comm = iteration_terms(x)
        fit = math.ceil((transition - x[X_T]) / (c * job * f_mean + comm))
        block = min(block, float(max(1, fit)))
        use_fast = block >= min_block or block == short
    return block, use_fast


@jit_inline
def _draw_block(p, x, pts, it_stream, horizon, active, block, t, done):
    """Fast mode: the ``block`` iterations from ``t`` drawn at once (their factor sum from its normal law,
    or a short block's); returns ``(t, done, interrupted)``. A block that ``horizon`` interrupts is noted
    in the ``X_CUT_*`` slots, its share of iterations run counted."""
    c, job, comm = iteration_terms(x)
    f_mean, f_std, min_block = factor_law(p, active)
    z = ndtri_acklam(uniform(it_stream))
    if block >= min_block:
        total = block * f_mean + math.sqrt(block) * f_std * z
    else:
        total = _short_block_sum(p, z)
    total = max(total, 0.0)
    dt = c * job * total + block * comm
    if t + dt > horizon:
        x[X_EXECUTED] += block * (horizon - t) / dt
        x[X_CUT_BLOCK] = block
        x[X_CUT_START] = t
        x[X_CUT_DT] = dt
        x[X_CUT_TOTAL] = total
        return t, done, True
    _book_drawn(p, x, pts, active, block, dt, total, c, job, comm)
    return t + dt, done + block, False


@jit_inline
def _walk_block(p, x, pts, it_stream, horizon, active, transition, stop, t, done):
    """Iterations drawn one by one from ``t`` until ``done`` reaches ``stop``, the conditions change at
    ``transition`` or ``horizon`` strikes (the partial iteration's share counted as run); returns
    ``(t, done, interrupted)``. The accounts are kept in locals and written once."""
    c, job, comm = iteration_terms(x)
    interrupted = False
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
    return t, done, interrupted


@jit_inline
def advance_block(p, x, k, pts, it_stream, horizon, active, transition):
    """Advance a block of iterations up to the next checkpoint, the end, or an episode change.

    Fast mode draws a block of ``K >= min_block`` iterations at once; shorter blocks and
    exact mode draw each iteration. A fast block that the horizon interrupts is noted in the
    ``X_CUT_*`` slots (for :func:`keep_block_share`). Returns a ``BLOCK_*`` code.
    """
    x[X_CUT_BLOCK] = 0.0
    t = x[X_T]
    done = pts[PT_NOW, P_DONE]
    target = float(min(k[K_NEXT_CHECKPOINT], p.iterations))
    block = float(min(k[K_NEXT_CHECKPOINT], k[K_PHASE_END])) - done
    block, use_fast = _fast_block_size(p, x, active, block, transition)
    if use_fast:
        t, done, interrupted = _draw_block(p, x, pts, it_stream, horizon, active, block, t, done)
    else:
        t, done, interrupted = _walk_block(p, x, pts, it_stream, horizon, active, transition, done + block, t, done)
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
def keep_block_share(p, x, pts, active):
    """A planned stop keeps the whole iterations of the fast block it interrupted (``X_CUT_*``): their
    share of its time and of its accounts, as a stretch's interpolated points (docs/model.md §3); the
    rest of the block is the partial work lost. Compiled on its own and called after the block, only
    in runs with planned classes, so that the blocks' hot path does not carry it (whether inlining it
    there costs speed was not settled: the one measurement that said so came from the first process
    after a compile)."""
    block, t0, dt, total = x[X_CUT_BLOCK], x[X_CUT_START], x[X_CUT_DT], x[X_CUT_TOTAL]
    if block == 0.0:  # no fast block was cut (dt is 0 then: the share below would be NaN)
        return
    kept = math.floor(block * (x[X_T] - t0) / dt)
    if kept <= 0.0:
        return
    c, job, comm = iteration_terms(x)
    share = kept / block
    kept_s = share * dt
    transient = _transient_s(p, active, c, block, total)
    if active:
        pts[PT_NOW, P_EPISODE_PHASE] += share * c * job * total
    persistent = dt - block * (c + comm) - transient
    pts[PT_NOW, P_ALIVE] += kept_s
    pts[PT_NOW, P_TRANSIENT] += share * transient
    pts[PT_NOW, P_PERSISTENT] += share * persistent
    pts[PT_NOW, P_DONE] += kept
    x[X_PARTIAL] = x[X_T] - (t0 + kept_s)


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
def _stretch_cycles(p, x, k, pts, horizon, active, transition):
    """How many whole checkpoint cycles a stretch from now may advance (see :func:`advance_stretch`), and
    whether each waits for the previous write (``heavy``); ``(0, False)`` when none."""
    K = p.checkpoint_every
    done = pts[PT_NOW, P_DONE]
    if k[K_NEXT_CHECKPOINT] - done != K:
        return 0, False
    f_mean, f_std, min_block = factor_law(p, active)
    n_max = (k[K_PHASE_END] - int(done) - 1) // K  # cycles that end with a checkpoint, in this phase
    if n_max < 1 or n_max * K < min_block:
        return 0, False
    t = x[X_T]
    c, job, comm = iteration_terms(x)
    iter_mean = c * job * f_mean + comm
    block_mean = K * iter_mean
    block_std = c * job * math.sqrt(K) * f_std
    write = gate_s(p)
    heavy = False
    if write <= block_mean - STRETCH_Z * block_std:
        cycle_mean, cycle_std = block_mean + p.checkpoint_stall_s, block_std
    elif write >= block_mean + STRETCH_Z * block_std and x[X_GATE] == t + write:
        heavy = True
        cycle_mean, cycle_std = write + p.checkpoint_stall_s, 0.0
    else:
        return 0, False  # the write and the block overlap: cycles are walked
    tail = _stretch_tail(p, x, k, t, cycle_mean, cycle_std)
    if tail < 0:
        return 0, False
    n = _cycles_within(horizon - t, cycle_mean, cycle_std) - tail
    if transition < np.inf:
        n = min(n, _cycles_within(transition - t - block_mean, cycle_mean, cycle_std))
    n = min(n, n_max)
    if n < 1 or n * K < min_block:
        return 0, False
    return n, heavy


@jit_inline
def advance_stretch(p, x, k, pts, it_stream, horizon, active, transition):
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
    n, heavy = _stretch_cycles(p, x, k, pts, horizon, active, transition)
    if n == 0:
        return 0
    K = p.checkpoint_every
    done = pts[PT_NOW, P_DONE]
    t = x[X_T]
    c, job, comm = iteration_terms(x)
    f_mean, f_std, _ = factor_law(p, active)
    iterations = float(n * K)
    total = iterations * f_mean + math.sqrt(iterations) * f_std * ndtri_acklam(uniform(it_stream))
    total = max(total, 0.0)
    dt_sum = c * job * total + iterations * comm
    extra = gate_s(p) + p.checkpoint_stall_s if heavy else p.checkpoint_stall_s
    t_end = t + n * extra if heavy else t + dt_sum + n * extra
    if t_end > horizon:
        return 0  # beyond 8 sd (probability < 1e-15): walk instead
    x[X_CHECKPOINT] += n * extra - dt_sum if heavy else n * extra
    copy_point(pts, PT_STRETCH_START, PT_NOW)
    pts[PT_NOW, P_DONE] = done + iterations
    _book_drawn(p, x, pts, active, iterations, dt_sum, total, c, job, comm)
    x[X_T] = t_end
    k[K_CHECKPOINTS] += n
    k[K_NEXT_CHECKPOINT] = int(done) + (n + 1) * K
    stretch_writes(p, x, k, pts, n, t, dt_sum, extra, heavy)
    return n
