"""Failures and recovery: the failure, the restore, the wait for spare nodes, the recovery, the restart.

A failure loses everything after the restore point (docs/model.md §3, §4): the last memory snapshot
for ``in_memory`` when the failure's class leaves a replica (``memory_ok``), else the last durable
storage checkpoint. Recovery takes the class's recovery time (its mean, a draw of its law, or one of
its measured recoveries) plus the restart's parts and the load, after waiting for spare nodes when a
spare pool is modelled; a fail-stop failure during recovery restarts it. A hang (``KIND_HANG``) adds
its detection time before the recovery; an instability (``KIND_INSTABILITY``) restores from storage
``rollback_checkpoints`` checkpoints further back; a planned stop (``KIND_PLANNED``) saves the
progress first and loses only the partial iteration; the three are dropped when they fall in a
recovery.
The restart's parts are a full requeue's or, for a class's in-place share, those without the
re-scheduling (:func:`_restart_path`); a restart may fail again within its first steps and be done
again (:func:`_abandoned_s`; docs/model.md §3 "Restart paths", "Abandoned restarts"). A recovery that needs
a person waits for one first, as the staffing calendar says (:mod:`mcsim.kernels.staffing`; docs/model.md §3
"Staffing"); the batch system's waits are :mod:`mcsim.kernels.scheduler`'s (docs/model.md §3 "The batch
system").

One function per step: :func:`fail` (writes in flight and the partial block), :func:`recover` (the
restore of the event that opens it, :func:`_interrupt`; the spares, :func:`_take_spares`; the
recovery's time, restarted by failures during it, booked by cause, :func:`_book_recovery`) and
:func:`restart` (training resumes: a new job factor and attempt, the episodes end).
"""

from __future__ import annotations

import math

import numpy as np

from .accelerate import jit_inline
from .checkpoints import complete_writes, restores_from_memory
from .conditions import begin_attempt, exponential, ideal_s, job_factor
from .declarations import KIND_FAIL_STOP, KIND_HANG, KIND_INSTABILITY, KIND_PLANNED, STRATEGY_IN_MEMORY
from .normal import lognormal_mean_one
from .renewal import consume_failure, heap_pop, heap_push, next_failure, pending_class
from .rng import uniform
from .scheduler import book_waits, queue_after, release_wait_s, schedules_paths, stop_at_limit
from .staffing import staff_wait_s
from .workspace import (
    K_DROPPED,
    K_FAILURES,
    K_HANGS,
    K_HEAP_SIZE,
    K_INSTABILITIES,
    K_MEMORY_LOADS,
    K_MEMORY_RECOVERIES,
    K_MEMORY_VALID,
    K_NEXT_CHECKPOINT,
    K_OVERFLOW,
    K_PENDING,
    K_PHASES,
    K_PLANNED,
    K_REPAIR_SIZE,
    K_REPLICATING,
    K_SOURCE,
    K_SPARES_FREE,
    K_STORAGE_LOADS,
    K_STORAGE_WRITES,
    N_P,
    P_ALIVE,
    P_DONE,
    PT_DURABLE,
    PT_MEMORY,
    PT_NOW,
    RUN_DONE,
    RUN_FAILURE_HEAP_FULL,
    RUN_REPAIR_HEAP_FULL,
    X_ABANDONED,
    X_EPISODE_NEXT,
    X_EPISODE_UNTIL,
    X_FAIL_T,
    X_GATE,
    X_HANG,
    X_HANG_DETECT,
    X_INSTABILITY,
    X_JOB,
    X_LOADING,
    X_LOST,
    X_PARTIAL,
    X_PLANNED,
    X_RECOVERY,
    X_RESTART,
    X_SPARE_WAIT,
    X_STAFF_WAIT,
    X_T,
    copy_point,
)


@jit_inline
def fail(x, k, pts):
    """Failure at ``X_T``: writes in flight complete only if already done; the partial block is lost."""
    complete_writes(x, k, pts)
    k[K_PENDING] = 0
    k[K_REPLICATING] = 0
    x[X_GATE] = -np.inf
    if pts[PT_DURABLE, P_DONE] > pts[PT_MEMORY, P_DONE]:
        copy_point(pts, PT_MEMORY, PT_DURABLE)
    x[X_LOST] += x[X_PARTIAL]


@jit_inline
def _restore(p, x, k, pts, point):
    """Roll the run back to restore point ``point``: its later iterations are lost. Returns their time, s."""
    lost = pts[PT_NOW, P_ALIVE] - pts[point, P_ALIVE]
    x[X_LOST] += lost
    copy_point(pts, PT_NOW, point)
    k[K_NEXT_CHECKPOINT] = int(pts[PT_NOW, P_DONE]) + p.checkpoint_every
    return lost


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
        pts[PT_DURABLE, P_ALIVE] = ideal_s(p, x, k, target) + share * (alive - ideal_s(p, x, k, done))


@jit_inline
def _recovery_s(seconds, sigma, share, manual, rec_stream):
    """Recovery time of one event before the load, s: the class's mean ``seconds``, lognormal when
    ``sigma > 0``, plus a person's time (mean ``manual``, the same law) for a ``share`` of them; and whether
    it needs a person. Draws from ``rec_stream`` only when the class has a law, so fixed recoveries draw
    nothing."""
    if sigma > 0.0:
        seconds *= lognormal_mean_one(rec_stream, sigma)
    if share > 0.0 and uniform(rec_stream) < share:
        if sigma > 0.0:
            manual *= lognormal_mean_one(rec_stream, sigma)
        return seconds + manual, True
    return seconds, False


@jit_inline
def _class_recovery_s(fc, c, start, rec_stream):
    """Class ``c``'s recovery from ``start`` before the restart's parts and the load: the wait for a person
    when it needs one (:func:`~mcsim.kernels.staffing.staff_wait_s`, docs/model.md §3 "Staffing") and the
    recovery itself, its mean or one of its measured recoveries at random, then its law
    (:func:`_recovery_s`); both s."""
    measured = fc.durations_count[c]
    base_s = fc.recovery_s[c]
    if measured > 0:  # one of the measured recoveries, at random
        base_s = fc.durations_s[c, min(int(uniform(rec_stream) * measured), measured - 1)]
    seconds, needs_person = _recovery_s(base_s, fc.recovery_sigma[c], fc.manual_share[c], fc.manual_s[c], rec_stream)
    return (staff_wait_s(fc, c, start, rec_stream) if needs_person else 0.0), seconds


@jit_inline
def _restart_path(p, fc, c, rec_stream):
    """The restart's parts after an incident of class ``c``, s, and whether it is a requeue: a full requeue
    (``restart_s``) for a share ``requeue_share`` of them, else in place (``restart_in_place_s``, no
    re-scheduling). Draws from ``rec_stream`` only where both paths are possible and differ, in their parts
    or to the batch system (docs/model.md §3 "Restart paths", "The batch system")."""
    share = fc.requeue_share[c]
    if share >= 1.0 or (p.restart_in_place_s == p.restart_s and not schedules_paths(p)):
        return p.restart_s, True
    if share <= 0.0 or uniform(rec_stream) >= share:
        return p.restart_in_place_s, False
    return p.restart_s, True


@jit_inline
def _abandoned_s(p, rec_stream):
    """Whether the restart just done fails again within its first steps (probability ``abandon_share``):
    the time the abandoned attempt loses before the restart is repeated (mean ``abandon_s``, lognormal of
    log-sd ``abandon_sigma``), s, or -1 when it holds. Draws only with ``abandon_share > 0``."""
    if p.abandon_share <= 0.0 or uniform(rec_stream) >= p.abandon_share:
        return -1.0
    if p.abandon_sigma > 0.0:
        return p.abandon_s * lognormal_mean_one(rec_stream, p.abandon_sigma)
    return p.abandon_s


@jit_inline
def _book_recovery(p, x, kind, t, stop, wait_until, detect_end, ends, abandoned, staff):
    """Recovery from ``t`` to ``stop``: its time, the spare wait, the restart's parts (``ends``: the restart's
    end, the recovery's end and the parts' length; the load from the first to the second), the abandoned
    restarts' window (``abandoned``: from, until), the wait for a person (``staff``: from, until) and the
    cause's share."""
    restart_end, recovery_end, restart_s = ends
    x[X_STAFF_WAIT] += max(0.0, min(staff[1], stop) - max(t, staff[0]))
    x[X_LOADING] += max(0.0, min(recovery_end, stop) - max(t, restart_end))
    x[X_SPARE_WAIT] += max(0.0, min(wait_until, stop) - max(t, detect_end))
    x[X_RECOVERY] += stop - t
    x[X_ABANDONED] += max(0.0, min(abandoned[1], stop) - max(t, abandoned[0]))
    if restart_s > 0.0:
        x[X_RESTART] += max(0.0, min(restart_end, stop) - max(t, restart_end - restart_s))
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
        copy_point(pts, PT_DURABLE, PT_NOW)
        k[K_STORAGE_WRITES] += 1
        from_memory = False
    else:
        from_memory = restores_from_memory(p) and memory_ok == 1 and k[K_MEMORY_VALID] == 1
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
        repair_s = fc.repair_s[c] * (lognormal_mean_one(rec_stream, sigma) if sigma > 0.0 else 1.0)
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
def _consume_failure(fc, k, t, streams, pools, heap_time, heap_class):
    """The pending failure at ``t`` consumed and its unit replaced; returns its class, or -1 when the
    failure heap was full (``K_OVERFLOW`` set)."""
    failing = pending_class(k[K_SOURCE], heap_class)  # the failing unit's class, for its replacement
    c, heap_size = consume_failure(
        k[K_SOURCE],
        t,
        pools[0],
        pools[1],
        pools[2],
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
        return -1
    k[K_HEAP_SIZE] = heap_size
    return c


@jit_inline
def _restore_for(p, fc, c, x, k, pts, opening, from_memory):
    """The restore a fail-stop failure of class ``c`` causes: the event's own when it opens the recovery
    (``opening``, :func:`_interrupt`), else the fall-back to storage when it destroys the snapshot being
    loaded. Returns whether the recovery loads from memory."""
    if opening:
        from_memory = _interrupt(p, fc.kind[c], fc.rollback_checkpoints[c], fc.memory_ok[c], x, k, pts)
    elif from_memory and fc.memory_ok[c] == 0:
        # The snapshot being restored is destroyed: fall back to storage.
        _restore(p, x, k, pts, PT_DURABLE)
        from_memory = False
        k[K_MEMORY_RECOVERIES] -= 1
    copy_point(pts, PT_MEMORY, PT_NOW)
    # After a restore from storage no replica of the restored state exists yet.
    if not from_memory:
        k[K_MEMORY_VALID] = 0
    return from_memory


@jit_inline
def _incident(fc, c, k, t, opening, from_memory, wait_until, kind, detect_end, ready_end, staff, rec_stream):
    """The load a failure of class ``c`` at ``t`` starts, and the incident training waits for: returns
    the ``(kind, detection end, ready time, wait for a person: from, until)`` of the recovery under way
    after it. The class's recovery begins once detected and the spares are there; one that needs a
    person first waits for one."""
    if from_memory:
        k[K_MEMORY_LOADS] += 1
    else:
        k[K_STORAGE_LOADS] += 1
    detect_new = t + fc.detect_s[c] if fc.kind[c] == KIND_HANG else t
    begin = max(detect_new, wait_until)
    staff_s, recovery_s = _class_recovery_s(fc, c, begin, rec_stream)
    ready_new = begin + staff_s + recovery_s
    # The recovery already under way for a detected incident (a replacement, a decision, a
    # person's time) goes on: training restarts after the later of the two, charged to its cause. A
    # crash of a hung job is detected at once; a crashed job held by the batch system stays held.
    if opening or (t < detect_end and kind == KIND_HANG) or ready_new >= ready_end:
        return fc.kind[c], detect_new, ready_new, (begin, begin + staff_s)
    return kind, detect_end, ready_end, staff


@jit_inline
def _opening(p, x, k, pts, at_limit, rec_stream):
    """The recovery's state before its first incident: ``(consume, queue wait, ends, queued, load)``, ``ends``
    the restart's parts' end, the load's end and the parts' length, ``queued`` the queue wait's window.
    Opened by a failure (``consume``): nothing yet. Opened by the job part's time limit (``at_limit``,
    :func:`~mcsim.kernels.scheduler.stop_at_limit`): the queue wait, a full requeue's parts, a storage load."""
    t = x[X_T]
    if not at_limit:
        return True, 0.0, (t, t, 0.0), (t, t), 0.0
    queue_s = stop_at_limit(p, x, k, pts, rec_stream)
    restart_end = t + queue_s + p.restart_s
    return False, queue_s, (restart_end, restart_end + p.load_s, p.restart_s), (t, t + queue_s), p.load_s


@jit_inline
def _restart_ends(p, fc, c, k, ready_end, restart_s, queue_s, load, rec_stream):
    """After an incident of class ``c`` whose own recovery ends at ``ready_end``: the queue wait (a
    requeue's, :func:`~mcsim.kernels.scheduler.queue_after`), the restart's parts (a requeue's when any of
    the recovery's incidents needs one, ``restart_s`` so far: :func:`_restart_path`), then the load.
    Returns ``(ends, queue wait, queued)`` as :func:`_opening`."""
    path_s, requeue = _restart_path(p, fc, c, rec_stream)
    restart_s = max(restart_s, path_s)
    queue_s = queue_after(p, k, requeue, queue_s, rec_stream)
    restart_end = ready_end + queue_s + restart_s
    return (restart_end, restart_end + load, restart_s), queue_s, (ready_end, ready_end + queue_s)


@jit_inline
def _dropped(fc, c, first, t, queued):
    """Whether an event of class ``c`` at ``t`` falls in the recovery under way without a say (``first``: it
    opens one): a hang, an instability or a planned stop needs a running job; and during the wait in the
    queue (``queued``) the job holds no allocation, so a failure then is the pool's, not the job's."""
    return not first and (fc.kind[c] != KIND_FAIL_STOP or queued[0] <= t < queued[1])


@jit_inline
def recover(p, fc, ws, at_limit):
    """Recovery, restarted by every fail-stop failure that strikes during it, in the workspace ``ws``;
    opened by the failure due now, or (``at_limit``) by the job part's time limit.

    A hang or an instability needs a running job: one that falls in a recovery is dropped (its
    unit renews; it is not counted), as is any failure during the wait in the queue. The restart's
    parts are a requeue's when any of the recovery's incidents needs one (:func:`_restart_path`),
    after a wait in the batch queue; a fail-stop failure that opens it may hold the allocation until
    released (:mod:`mcsim.kernels.scheduler`); a restart that fails again within its first steps
    (:func:`_abandoned_s`) loses its time and is done again. Stops early with ``K_OVERFLOW`` set when a heap is full.
    """
    x, k, pts, streams, run_streams, pools, heap_time, heap_class, repair_time, repair_tag = ws
    rec_stream = run_streams[3]
    from_memory = False
    wait_until = x[X_T]
    kind = KIND_FAIL_STOP  # the kind of the event whose recovery is under way
    detect_end = x[X_T]
    ready_end = x[X_T]  # the incidents' own recovery (replacement, decision, a person) ends here
    abandoned = (np.inf, np.inf)  # the abandoned restart under way: from, until
    staff = (np.inf, np.inf)  # the recovery's wait for a person: from, until
    released = (x[X_T], x[X_T])  # the crashed job held until released: from, until
    # False: no failure struck (the part's time limit opens the recovery, or an abandoned restart is repeated)
    consume, queue_s, ends, queued, load = _opening(p, x, k, pts, at_limit, rec_stream)
    first = consume
    while True:
        t = x[X_T]
        if consume:
            c = _consume_failure(fc, k, t, streams, pools, heap_time, heap_class)
            if c < 0:
                return
            if _dropped(fc, c, first, t, queued):
                k[K_DROPPED] += 1
            else:
                k[K_FAILURES] += 1
                from_memory = _restore_for(p, fc, c, x, k, pts, first, from_memory)
                if p.spare_nodes >= 0 and fc.nodes_taken[c] > 0:
                    wait_until = _take_spares(p, fc, c, x, k, repair_time, repair_tag, wait_until, rec_stream)
                    if k[K_OVERFLOW] != RUN_DONE:
                        return
                load = p.load_memory_s if from_memory else p.load_s
                # A fail-stop failure's job may hold its allocation until it is released (the batch system).
                held = release_wait_s(p, first, fc.kind[c], rec_stream)
                released = (t, t + held)  # (a later incident ends an earlier one's wait: it opens its own)
                kind, detect_end, ready_end, staff = _incident(
                    fc, c, k, t + held, first, from_memory, wait_until, kind, detect_end, ready_end, staff, rec_stream
                )
                first = False
                ends, queue_s, queued = _restart_ends(p, fc, c, k, ready_end, ends[2], queue_s, load, rec_stream)
            x[X_FAIL_T], k[K_SOURCE] = next_failure(pools[2], heap_time, k[K_HEAP_SIZE])
        stop = min(ends[1], x[X_FAIL_T], p.max_wall_s)
        _book_recovery(p, x, kind, t, stop, wait_until, detect_end, ends, abandoned, staff)
        book_waits(x, t, stop, queued, released)
        x[X_T] = stop
        if stop >= p.max_wall_s or k[K_FAILURES] + k[K_DROPPED] >= p.max_failures:
            return
        consume = stop >= x[X_FAIL_T]
        if not consume:
            lost = _abandoned_s(p, rec_stream)
            if lost < 0.0:
                return
            # Abandoned: its first steps are lost, then the restart's parts and the load again.
            kind, ready_end = KIND_FAIL_STOP, stop + lost
            ends = (ready_end + ends[2], ready_end + ends[2] + load, ends[2])
            abandoned = (stop, ends[1])


@jit_inline
def next_kind(fc, k, heap_class):
    """Kind of the earliest pending failure (``KIND_FAIL_STOP`` when none is pending)."""
    c = pending_class(k[K_SOURCE], heap_class)
    return fc.kind[c] if c >= 0 else KIND_FAIL_STOP


@jit_inline
def restart(p, x, job_stream, ep_stream):
    """Training resumes: a new job factor and attempt (no degradation); the restart ends every episode."""
    x[X_JOB] = job_factor(job_stream, p.job_sigma)
    t = x[X_T]
    begin_attempt(p, x, t)
    # Those that began during the recovery too.
    x[X_EPISODE_UNTIL] = min(x[X_EPISODE_UNTIL], t)
    while x[X_EPISODE_NEXT] <= t:
        x[X_EPISODE_NEXT] += exponential(ep_stream) / p.episode_rate_per_s
