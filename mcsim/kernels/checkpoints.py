"""Checkpoints: the wait and the stall, the strategies' hooks, and the writes that complete.

A checkpoint is taken every ``checkpoint_every`` iterations (docs/model.md §4). ``sync``: training
stalls and the checkpoint is durable when the stall ends. ``async`` (and ``gockpt``, with its own
stall and delay): durable ``checkpoint_write_s`` after the stall, and a new checkpoint waits for the
previous one. ``in_memory``: a snapshot in CPU memory, replicated to a peer node (restorable
``replicate_s`` after the stall), persisted to storage every ``persist_every`` snapshots when no
write is in flight.

:func:`checkpoint` waits for the previous write, stalls, then calls the strategy's hook (one per
``STRATEGY_*`` code); :func:`complete_writes` is the one place where a finished write becomes a
restore point. :func:`stretch_writes` is the hooks of ``n`` checkpoints at once, in closed form, for
fast mode's stretches of whole checkpoint cycles (:func:`mcsim.kernels.blocks.advance_stretch`): the
restore points a stretch leaves are interpolated along it (:func:`_stretch_point`).
"""

from __future__ import annotations

from .accelerate import jit_inline
from .declarations import STRATEGY_ASYNC, STRATEGY_IN_MEMORY, STRATEGY_SYNC
from .workspace import (
    K_CHECKPOINTS,
    K_MEMORY_VALID,
    K_NEXT_CHECKPOINT,
    K_PENDING,
    K_REPLICATING,
    K_SNAPSHOTS,
    K_STORAGE_WRITES,
    N_P,
    P_DONE,
    PT_DURABLE,
    PT_MEMORY,
    PT_NOW,
    PT_PENDING,
    PT_REPLICATING,
    PT_STRETCH_START,
    X_CHECKPOINT,
    X_GATE,
    X_PENDING_READY,
    X_REPLICA_READY,
    X_T,
    copy_point,
)


@jit_inline
def complete_writes(x, k, pts):
    """Write completes: every write in flight that has finished by now becomes a restore point."""
    t = x[X_T]
    if k[K_PENDING] == 1 and x[X_PENDING_READY] <= t:
        copy_point(pts, PT_DURABLE, PT_PENDING)
        k[K_PENDING] = 0
    if k[K_REPLICATING] == 1 and x[X_REPLICA_READY] <= t:
        copy_point(pts, PT_MEMORY, PT_REPLICATING)
        k[K_MEMORY_VALID] = 1
        k[K_REPLICATING] = 0


# --- Checkpoint strategy hooks: what a checkpoint does once its stall has ended --------------


@jit_inline
def _sync_checkpoint(p, x, k, pts):
    """sync: the state is durable when the stall ends."""
    copy_point(pts, PT_DURABLE, PT_NOW)
    k[K_STORAGE_WRITES] += 1


@jit_inline
def _async_checkpoint(p, x, k, pts):
    """async, gockpt: durable ``checkpoint_write_s`` after the stall; the next checkpoint waits for it."""
    copy_point(pts, PT_PENDING, PT_NOW)
    k[K_PENDING] = 1
    x[X_PENDING_READY] = x[X_T] + p.checkpoint_write_s
    x[X_GATE] = x[X_PENDING_READY]
    k[K_STORAGE_WRITES] += 1


@jit_inline
def _in_memory_checkpoint(p, x, k, pts):
    """in_memory: a snapshot replicated to the peer (the next checkpoint waits for it),
    persisted to storage every ``persist_every``-th snapshot when no write is in flight."""
    copy_point(pts, PT_REPLICATING, PT_NOW)
    k[K_REPLICATING] = 1
    x[X_REPLICA_READY] = x[X_T] + p.replicate_s
    x[X_GATE] = x[X_REPLICA_READY]
    k[K_SNAPSHOTS] += 1
    if k[K_SNAPSHOTS] % p.persist_every == 0 and k[K_PENDING] == 0:
        copy_point(pts, PT_PENDING, PT_NOW)
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
def restores_from_memory(p):
    """Whether the strategy keeps snapshots a recovery can load from a peer's memory."""
    return p.strategy == STRATEGY_IN_MEMORY


@jit_inline
def gate_s(p):
    """How long after its stall a checkpoint makes the next one wait (``X_GATE``), s: nothing for sync,
    the storage write for async, the replication for in_memory."""
    if p.strategy == STRATEGY_SYNC:
        return 0.0
    if p.strategy == STRATEGY_ASYNC:
        return p.checkpoint_write_s
    return p.replicate_s


@jit_inline
def checkpoint(p, x, k, pts, horizon):
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
    complete_writes(x, k, pts)
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
    complete_writes(x, k, pts)
    _checkpoint_hook(p, x, k, pts)
    return False


# --- The hooks of n checkpoints at once: fast mode's stretches of checkpoint cycles -----------------


@jit_inline
def _stretch_point(pts, dst, j, n, t0, t_of_n_frac, stall_and_wait_s):
    """Progress point after ``j`` of the ``n`` cycles of a stretch, by interpolation (never reached
    by a failure: see :func:`mcsim.kernels.blocks.advance_stretch`); returns its time."""
    share = j / n
    for col in range(N_P):
        pts[dst, col] = pts[PT_STRETCH_START, col] + share * (pts[PT_NOW, col] - pts[PT_STRETCH_START, col])
    return t0 + share * t_of_n_frac + j * stall_and_wait_s


@jit_inline
def stretch_writes(p, x, k, pts, n, t0, dt_sum, cycle_extra_s, heavy):
    """The strategy's hook for ``n`` skipped cycles: counters and restore points in closed form.

    ``cycle_extra_s``: stall (and, ``heavy``, the write wait's deterministic length) per cycle.
    """
    t_end = x[X_T]
    span = 0.0 if heavy else dt_sum  # the random part of the stretch's time
    if p.strategy == STRATEGY_SYNC:
        copy_point(pts, PT_DURABLE, PT_NOW)
        k[K_STORAGE_WRITES] += n
        return
    if p.strategy == STRATEGY_ASYNC:
        k[K_STORAGE_WRITES] += n
        if k[K_PENDING] == 1:  # the write in flight at the start is durable by checkpoint 1
            copy_point(pts, PT_DURABLE, PT_PENDING)
        if n >= 2:
            _stretch_point(pts, PT_DURABLE, n - 1, n, t0, span, cycle_extra_s)
        copy_point(pts, PT_PENDING, PT_NOW)
        k[K_PENDING] = 1
        x[X_PENDING_READY] = t_end + p.checkpoint_write_s
        x[X_GATE] = x[X_PENDING_READY]
        return
    # in_memory: snapshots replicated; every persist_every-th persisted (none skipped: regular regime)
    if k[K_REPLICATING] == 1:  # the replica in flight at the start is restorable by checkpoint 1
        copy_point(pts, PT_MEMORY, PT_REPLICATING)
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
            copy_point(pts, PT_DURABLE, PT_PENDING)
        last = (s0 + n) // pe * pe - s0
        if persists >= 2:
            _stretch_point(pts, PT_DURABLE, last - pe, n, t0, span, cycle_extra_s)
        t_last = _stretch_point(pts, PT_PENDING, last, n, t0, span, cycle_extra_s)
        k[K_PENDING] = 1
        x[X_PENDING_READY] = t_last + p.checkpoint_write_s
    complete_writes(x, k, pts)
    copy_point(pts, PT_REPLICATING, PT_NOW)
    k[K_REPLICATING] = 1
    x[X_REPLICA_READY] = t_end + p.replicate_s
    x[X_GATE] = x[X_REPLICA_READY]
