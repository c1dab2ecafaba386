"""The run's state: the named slots of the workspace's arrays, the workspace, clearing it, the outputs.

A run's state lives in three arrays with named slots: ``x`` (float scalars, ``X_*``, then the run's
phase table), ``k`` (integer scalars, ``K_*``) and ``pts`` (progress points: the run's progress
``PT_NOW`` and its restore points ``PT_DURABLE``, ``PT_MEMORY``, ``PT_PENDING``, ``PT_REPLICATING``,
each a vector of ``P_*`` columns). They, the random streams and the failure and repair heaps form the
*workspace* (:func:`allocate_workspace`), allocated once per kernel call by the entry points of
:mod:`mcsim.kernels.montecarlo` and cleared at the start of every run (:func:`clear_state`). The run
loop and everything it calls are compiled without Numba's reference counting
(:func:`mcsim.kernels.accelerate.jit_unmanaged`) and allocate nothing: a heap that fills stops the run
with a ``RUN_*`` code, and the entry point grows it and runs the run again (the same streams give the
same run), so the first sizes are chosen large enough that this is rare. At its end a run's state
becomes its row of outputs (:func:`write_outputs`, the columns of
:data:`mcsim.kernels.declarations.OUTPUT_COLUMNS`).
"""

from __future__ import annotations

import numpy as np

from . import declarations as decl
from .accelerate import jit_inline

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
X_ABANDONED = 31  # time of abandoned restarts (their lost steps, the parts and the load again), s
X_STAFF_WAIT = 32  # time recoveries that need a person waited for one, s
X_QUEUE = 33  # time waiting in the batch queue for a new allocation, s
X_RELEASE = 34  # time crashed jobs held their allocation until released, s
X_PART_END = 35  # the current job part's time limit strikes at this time, s (inf: no limit)
N_X = 36
# After the N_X slots, x holds the run's phase table, row j at N_X + N_PH j (K_PHASES rows): read by the
# events that need it without passing another array to them (an array argument is reference-counted
# in managed code, and one more argument to every event).
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
K_LIMIT_STOPS = 23  # stops at the job part's time limit
K_REQUEUED = 24  # 1: the recovery under way restarts by requeue (a new job part begins)
N_K = 25
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


# What :func:`mcsim.kernels.montecarlo._simulate_run` returns: the run is done, or an array of the
# workspace was full (the caller grows it and runs the run again: its streams make the run the same,
# only longer arrays). ``K_OVERFLOW`` holds it while the run goes on.
RUN_DONE = 0
RUN_FAILURE_HEAP_FULL = 1
RUN_REPAIR_HEAP_FULL = 2

# First sizes of the heaps. Replaced units pending a failure: at most every unit once, so the units
# (up to FAILURE_HEAP_MAX entries, 1 MiB) fit any run; spare nodes under repair: REPAIR_HEAP_START. A
# run that needs more runs again with twice the room (a run cut short is wasted work, so the first
# sizes avoid it), and the larger arrays serve the runs after it.
FAILURE_HEAP_MAX = 65_536
REPAIR_HEAP_START = 64


@jit_inline
def allocate_workspace(units, phase_values):
    """The arrays one run works in (:func:`mcsim.kernels.montecarlo._simulate_run`), allocated once per kernel
    call (``units``: the failure classes' units)."""
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
def clear_state(x, k, pts):
    """Every slot of the run's state to 0 (the workspace is reused from run to run)."""
    for i in range(x.shape[0]):
        x[i] = 0.0
    for i in range(k.shape[0]):
        k[i] = 0
    for i in range(pts.shape[0]):
        for j in range(pts.shape[1]):
            pts[i, j] = 0.0


@jit_inline
def copy_point(pts, dst, src):
    """Progress point ``src`` (a ``PT_*`` row of ``pts``) copied into row ``dst``."""
    for j in range(N_P):
        pts[dst, j] = pts[src, j]


@jit_inline
def write_outputs(row, x, k, pts):
    """The output columns (``OUTPUT_COLUMNS``) from the final state."""
    row[decl.OUT_WALL_S] = x[X_T]
    row[decl.OUT_FAILURES] = k[K_FAILURES]
    row[decl.OUT_LOST_S] = x[X_LOST]
    row[decl.OUT_CHECKPOINT_S] = x[X_CHECKPOINT]
    row[decl.OUT_RECOVERY_S] = x[X_RECOVERY]
    row[decl.OUT_STRAGGLER_S] = pts[PT_NOW, P_TRANSIENT] + pts[PT_NOW, P_PERSISTENT]
    row[decl.OUT_COMPLETED] = k[K_COMPLETED]
    row[decl.OUT_ITERATIONS_DONE] = pts[PT_NOW, P_DONE]
    row[decl.OUT_BUSY_S] = x[X_BUSY]
    row[decl.OUT_CHECKPOINTS] = k[K_CHECKPOINTS]
    row[decl.OUT_STRAGGLER_TRANSIENT_S] = pts[PT_NOW, P_TRANSIENT]
    row[decl.OUT_STRAGGLER_PERSISTENT_S] = pts[PT_NOW, P_PERSISTENT]
    row[decl.OUT_MEMORY_RECOVERIES] = k[K_MEMORY_RECOVERIES]
    row[decl.OUT_SPARE_WAIT_S] = x[X_SPARE_WAIT]
    row[decl.OUT_EPISODE_PHASE_S] = pts[PT_NOW, P_EPISODE_PHASE]
    row[decl.OUT_STORAGE_WRITES] = k[K_STORAGE_WRITES]
    row[decl.OUT_STORAGE_LOADS] = k[K_STORAGE_LOADS]
    row[decl.OUT_MEMORY_LOADS] = k[K_MEMORY_LOADS]
    row[decl.OUT_EXECUTED_ITERATIONS] = x[X_EXECUTED]
    row[decl.OUT_HANGS] = k[K_HANGS]
    row[decl.OUT_INSTABILITIES] = k[K_INSTABILITIES]
    row[decl.OUT_HANG_S] = x[X_HANG]
    row[decl.OUT_HANG_DETECTION_S] = x[X_HANG_DETECT]
    row[decl.OUT_INSTABILITY_S] = x[X_INSTABILITY]
    row[decl.OUT_PLANNED_STOPS] = k[K_PLANNED]
    row[decl.OUT_PLANNED_S] = x[X_PLANNED]
    row[decl.OUT_RESTART_S] = x[X_RESTART]
    row[decl.OUT_LOAD_S] = x[X_LOADING]
    row[decl.OUT_ABANDONED_S] = x[X_ABANDONED]
    row[decl.OUT_STAFF_WAIT_S] = x[X_STAFF_WAIT]
    row[decl.OUT_TIME_LIMIT_STOPS] = k[K_LIMIT_STOPS]
    row[decl.OUT_QUEUE_WAIT_S] = x[X_QUEUE]
    row[decl.OUT_RELEASE_WAIT_S] = x[X_RELEASE]
