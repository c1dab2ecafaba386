"""The batch system: job time limits, the wait in the queue, crashed jobs released late.

docs/model.md §3 "The batch system". A chained job's part trains at most ``time_limit_s`` from its
start (the run's start, or the restart after a requeue): at the limit it stops as a planned stop
does (:func:`stop_at_limit`: its progress is saved, at most the partial iteration is lost), waits in
the queue and restarts by full requeue, its restart's parts and a storage load
(:func:`mcsim.kernels.recovery.recover` with ``at_limit``). Every restart by requeue (after a
time-limit stop, and a failure's whose path is a requeue) first waits in the queue
(:func:`queue_wait_s`, :func:`queue_after`); an in-place restart keeps its allocation and does not
queue, nor does it begin a new part (:func:`begin_part`). A share of fail-stop failures leaves the
job holding its allocation until the crash is noticed and the job released (:func:`release_wait_s`).
The time waited is booked by :func:`book_waits`.

Every draw is made from the recovery stream, and only where the scenario has the law: a scenario
without ``[scheduler]`` draws nothing here.
"""

from __future__ import annotations

import math

from .accelerate import jit_inline
from .declarations import KIND_FAIL_STOP
from .normal import lognormal_mean_one
from .rng import uniform
from .workspace import (
    K_LIMIT_STOPS,
    K_MEMORY_VALID,
    K_NEXT_CHECKPOINT,
    K_REQUEUED,
    K_STORAGE_LOADS,
    K_STORAGE_WRITES,
    P_DONE,
    PT_DURABLE,
    PT_MEMORY,
    PT_NOW,
    X_PART_END,
    X_QUEUE,
    X_RELEASE,
    X_T,
    copy_point,
)


@jit_inline
def _lognormal_s(mean_s, sigma, stream):
    """A time of mean ``mean_s`` s: fixed for ``sigma = 0``, else lognormal of log-sd ``sigma`` (one uniform)."""
    if sigma <= 0.0:
        return mean_s
    return mean_s * lognormal_mean_one(stream, sigma)


@jit_inline
def queue_wait_s(p, stream):
    """One wait in the batch queue before a new allocation, s: 0 without a queue (no draw)."""
    if p.queue_s <= 0.0:
        return 0.0
    return _lognormal_s(p.queue_s, p.queue_sigma, stream)


@jit_inline
def queue_after(p, k, requeue, queue_s, stream):
    """The queue wait of a recovery after an incident whose restart is (``requeue``) or is not a requeue:
    a requeue is submitted again and waits a new draw (the recovery's part is then a new job part,
    ``K_REQUEUED``); an in-place incident keeps the recovery's wait ``queue_s``."""
    if not requeue:
        return queue_s
    k[K_REQUEUED] = 1
    return queue_wait_s(p, stream)


@jit_inline
def schedules_paths(p):
    """Whether a restart's path matters to the batch system (a queue, or time limits: a requeue begins a
    new part) even where the two paths' parts are equal."""
    return p.queue_s > 0.0 or p.time_limit_s < math.inf


@jit_inline
def release_wait_s(p, opening, kind, stream):
    """How long the job of a fail-stop failure (``kind``) that opens a recovery (``opening``) holds its
    allocation before it is released, s: 0 for the share ``1 - release_share`` that the batch system ends
    at once, and for other incidents. Draws only with ``release_share > 0``."""
    if p.release_share <= 0.0 or not opening or kind != KIND_FAIL_STOP:
        return 0.0
    if p.release_share < 1.0 and uniform(stream) >= p.release_share:
        return 0.0
    return _lognormal_s(p.release_s, p.release_sigma, stream)


@jit_inline
def stop_at_limit(p, x, k, pts, stream):
    """The job part's time limit at ``X_T``: the progress is saved (a storage checkpoint, as a planned stop's:
    nothing is rolled back but the partial iteration, booked by :func:`mcsim.kernels.recovery.fail`), the
    checkpoints stay on their grid, the job's memory snapshots end with it. Returns the queue wait drawn, s.
    """
    copy_point(pts, PT_DURABLE, PT_NOW)
    copy_point(pts, PT_MEMORY, PT_NOW)
    k[K_MEMORY_VALID] = 0
    k[K_STORAGE_WRITES] += 1
    k[K_STORAGE_LOADS] += 1
    k[K_NEXT_CHECKPOINT] = (int(pts[PT_NOW, P_DONE]) // p.checkpoint_every + 1) * p.checkpoint_every
    k[K_LIMIT_STOPS] += 1
    k[K_REQUEUED] = 1
    return queue_wait_s(p, stream)


@jit_inline
def book_waits(x, t, stop, queued, released):
    """The queue wait (``queued``: from, until) and the release wait (``released``) within ``[t, stop)``."""
    x[X_QUEUE] += max(0.0, min(queued[1], stop) - max(t, queued[0]))
    x[X_RELEASE] += max(0.0, min(released[1], stop) - max(t, released[0]))


@jit_inline
def begin_part(p, x, k):
    """After a restart: a restart by requeue begins a new job part, whose limit is ``time_limit_s`` from now;
    after an in-place one the part goes on, and a limit that passed during the recovery strikes at once."""
    if k[K_REQUEUED] == 1:
        x[X_PART_END] = x[X_T] + p.time_limit_s
        k[K_REQUEUED] = 0
    else:
        x[X_PART_END] = max(x[X_PART_END], x[X_T])
