"""What crosses the boundary between Python and the compiled run loop, declared once.

* :class:`RunParams`: the scalars of one configuration; :class:`FailureClasses`: the
  per-class arrays of its failure processes;
* :data:`OUTPUT_COLUMNS` and the constants ``OUT_<NAME>``: the columns of the per-run
  output matrix (``N_OUT`` of them), written out once and checked against each other at
  import;
* ``STRATEGY_*``: the kernel's checkpoint hooks; ``STREAM_*``: the random streams of a run;
* :func:`params_table`, :func:`classes_table`: parameter sets as arrays, for the draw tables.

The run loop's modules (:mod:`mcsim.kernels.montecarlo` and the modules of its parts) and the
accounting import these; Python code above the kernels reaches them, with the entry points,
through :mod:`mcsim.kernels.interface`.
"""

from __future__ import annotations

import math
import typing
from typing import NamedTuple

import numpy as np

# Columns of the per-run output matrix, declared once: (name, meaning); ``OUT_<NAME>`` is its index.
OUTPUT_COLUMNS = (
    ("wall_s", "wall-clock time of the run, s"),
    ("failures", "failures, those during recovery included"),
    ("lost_s", "iteration time rolled back, partial iterations included, s"),
    ("checkpoint_s", "time stalled or waiting for a previous write at checkpoints, s"),
    ("recovery_s", "time recovering (spare wait, recovery, load), s"),
    ("straggler_s", "straggler excess of the surviving iterations, s"),
    ("completed", "1 if all iterations were done, 0 if censored"),
    ("iterations_done", "iterations completed and not rolled back"),
    ("busy_s", "time the GPUs computed, rolled-back and partial iterations included, s"),
    ("checkpoints", "checkpoints taken (stalls completed)"),
    ("straggler_transient_s", "straggler excess from per-iteration rank noise, s"),
    ("straggler_persistent_s", "straggler excess from the job factor and episodes, s"),
    ("memory_recoveries", "recoveries from an in-memory snapshot"),
    ("spare_wait_s", "time waiting for spare nodes, s"),
    ("episode_phase_s", "compute phase (compute_time * J * F) of surviving iterations in episodes, s"),
    ("storage_writes", "checkpoint writes to storage started"),
    ("storage_loads", "loads from storage started (one per recovery attempt)"),
    ("memory_loads", "loads from a peer's memory started"),
    ("executed_iterations", "iterations run, rolled-back ones and the interrupted partial one included"),
    ("hangs", "interruptions by hangs (of the failures)"),
    ("instabilities", "interruptions by training instabilities (of the failures)"),
    ("hang_s", "iteration time rolled back and recovery time (detection included) caused by hangs, s"),
    ("hang_detection_s", "time hung before detection (part of recovery_s and hang_s), s"),
    ("instability_s", "iteration time rolled back and recovery time caused by instabilities, s"),
    ("planned_stops", "planned stops (of the failures)"),
    ("planned_s", "time down for planned stops (the interrupted partial iteration included), s"),
    (
        "restart_s",
        "time in the restarts' parts: re-scheduling, process start, communicators, warm-up (of recovery_s), s",
    ),
    ("load_s", "time reading the state back from storage or a peer, loads cut short included (of recovery_s), s"),
    (
        "abandoned_s",
        "time of abandoned restarts: their first steps lost, the restart's parts and the load again (of recovery_s), s",
    ),
    ("staff_wait_s", "time a recovery that needs a person waited for one (of recovery_s), s"),
    ("time_limit_stops", "stops at the job's time limit (not failures)"),
    ("queue_wait_s", "time waiting in the batch queue for a new allocation (of recovery_s), s"),
    ("release_wait_s", "time crashed jobs held their allocation until released (of recovery_s), s"),
)
N_OUT = len(OUTPUT_COLUMNS)

# The column index of each output, by name (checked against OUTPUT_COLUMNS below, at import).
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
OUT_EPISODE_PHASE_S = 14
OUT_STORAGE_WRITES = 15
OUT_STORAGE_LOADS = 16
OUT_MEMORY_LOADS = 17
OUT_EXECUTED_ITERATIONS = 18
OUT_HANGS = 19
OUT_INSTABILITIES = 20
OUT_HANG_S = 21
OUT_HANG_DETECTION_S = 22
OUT_INSTABILITY_S = 23
OUT_PLANNED_STOPS = 24
OUT_PLANNED_S = 25
OUT_LOAD_S = 27
OUT_RESTART_S = 26
OUT_ABANDONED_S = 28
OUT_STAFF_WAIT_S = 29
OUT_TIME_LIMIT_STOPS = 30
OUT_QUEUE_WAIT_S = 31
OUT_RELEASE_WAIT_S = 32

STRATEGY_SYNC = 0
STRATEGY_ASYNC = 1  # async and gockpt
STRATEGY_IN_MEMORY = 2

# Random streams of a run (stream ids given to :func:`rng.seed_stream`).
STREAM_ITERATION = 0
STREAM_JOB = 1
STREAM_EPISODE = 2
STREAM_FIRST_FAILURE_CLASS = 3
# Recovery durations drawn from a law (docs/model.md §4): far above the classes' streams 3 + c.
STREAM_RECOVERY = 1 << 40

# Kinds of failure class: what an event does to the run (docs/model.md §3 "Kinds of interruption").
KIND_FAIL_STOP = 0  # detected at once; restore from the last restore point
KIND_HANG = 1  # no progress, GPUs drawing power, until detected after detect_s
KIND_INSTABILITY = 2  # restore from storage, rollback_checkpoints storage checkpoints further back
KIND_PLANNED = 3  # a clean stop: the progress is saved, nothing is rolled back

# Staffing teams (FailureClasses.staff_team; docs/model.md §3 "Staffing"), in the order of
# mcsim.scenario.interruptions.STAFF_TEAMS.
STAFF_NONE = 0  # no calendar: a recovery that needs a person costs its manual time alone
STAFF_OFFICE = 1  # a person at work in working hours only (on call out of hours with staff_on_call)
STAFF_ALWAYS = 2  # 24/7: always someone


# Columns of the phase table (docs/model.md §4 "Training phases"): one row per phase, in order; an
# empty table is one phase with RunParams.compute_time_s and comm_time_s.
PH_START = 0  # iterations done when the phase begins (0 for the first), as a float
PH_COMPUTE_S = 1  # the phase's compute time per iteration (the part stragglers stretch), s
PH_COMM_S = 2  # ... and exposed communication, s
N_PH = 3


class RunParams(NamedTuple):
    """Scalars of one configuration, in seconds unless named otherwise."""

    iterations: int
    compute_time_s: float  # per iteration; with a phase table, its mean over the iterations (unused by the kernel)
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
    restart_s: float  # a restart's parts beyond the class's recovery and the load (0 unless restart.from_parts)
    degradation_per_s: float  # compute time added per second since the attempt began, a share (0: none)
    degradation_step_s: float  # the degradation is constant over steps of this length (its value mid-step)
    degradation_max: float  # ... and at most this share
    # Fast mode: a block of exactly this many iterations (the checkpoint interval, when shorter than
    # fast_min_block and mcsim.model.block_law has its law; 0: none) outside episodes is drawn at once,
    # its factor sum the polynomial sum_j short_block_c<j> z^j of one standard normal deviate z.
    short_block: int = 0
    short_block_c0: float = 0.0
    short_block_c1: float = 0.0
    short_block_c2: float = 0.0
    short_block_c3: float = 0.0
    short_block_c4: float = 0.0
    short_block_c5: float = 0.0
    short_block_c6: float = 0.0
    # The restart paths and abandoned restarts (docs/model.md §3 "Restart paths", "Abandoned restarts"):
    restart_in_place_s: float = 0.0  # an in-place restart's parts (restart_s less re-scheduling; 0 unless from_parts)
    abandon_share: float = 0.0  # probability that a restart fails again within its first steps
    abandon_s: float = 0.0  # mean time an abandoned attempt loses before the restart is repeated, s
    abandon_sigma: float = 0.0  # its lognormal log-sd (0: abandon_s, fixed)
    # The batch system (docs/model.md §3 "The batch system"; mcsim.kernels.scheduler):
    time_limit_s: float = math.inf  # a job part's training ends this long after it starts (inf: no limit)
    queue_s: float = 0.0  # mean wait in the batch queue before a new allocation, s (0: none)
    queue_sigma: float = 0.0  # its lognormal log-sd (0: queue_s, fixed)
    release_share: float = 0.0  # share of fail-stop failures whose job holds its allocation until released
    release_s: float = 0.0  # mean time until it is released, s
    release_sigma: float = 0.0  # its lognormal log-sd (0: release_s, fixed)


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
    kind: np.ndarray  # int64: KIND_FAIL_STOP, KIND_HANG, KIND_INSTABILITY or KIND_PLANNED
    detect_s: np.ndarray  # KIND_HANG: time from the hang to its detection, s
    rollback_checkpoints: np.ndarray  # int64, KIND_INSTABILITY: storage checkpoints rolled back beyond the last
    recovery_sigma: np.ndarray  # lognormal sigma of the recovery time (0: the mean, fixed)
    manual_share: np.ndarray  # share of the class's recoveries that need a person
    manual_s: np.ndarray  # mean extra time of a recovery that needs a person, s
    bad_share: np.ndarray  # share of replacement units that are bad (fail after an exponential life)
    bad_mean_s: np.ndarray  # mean life of a bad replacement, s
    repair_sigma: np.ndarray  # lognormal sigma of the repair time (0: repair_s, fixed)
    durations_s: np.ndarray  # 2-D (class x width): measured recoveries, s, the first durations_count[c] of row c
    durations_count: np.ndarray  # int64: measured recoveries of the class (0: recovery_s or its law)
    requeue_share: np.ndarray  # share of the class's restarts by full requeue (RunParams.restart_s), else in place
    # The calendar of the people a recovery that needs a person waits for (docs/model.md §3 "Staffing"); every
    # class holds the [staffing] team's (mcsim.kernels.staffing):
    staff_team: np.ndarray  # int64: STAFF_NONE, STAFF_OFFICE or STAFF_ALWAYS
    staff_offset_s: np.ndarray  # the run's start: local seconds since the Monday 00:00 before it
    staff_begin_s: np.ndarray  # a working day's hours begin (local seconds of the day) ...
    staff_end_s: np.ndarray  # ... and end
    staff_days: np.ndarray  # int64: working weekdays as bits, Monday bit 0
    staff_holidays_s: np.ndarray  # 2-D (class x 2 width): holidays' [from, until) pairs, s since the start (inf: none)
    staff_response_s: np.ndarray  # mean response in working hours or of a 24/7 team (exponential), s
    staff_on_call: np.ndarray  # int64 0/1: out of hours a person on call answers (office team)
    staff_on_call_s: np.ndarray  # the on-call response's mean, s
    staff_on_call_sigma: np.ndarray  # ... and lognormal log-sd (0: the mean, fixed)


def _check_columns() -> None:
    """Each ``OUT_<NAME>`` is the index of its name in :data:`OUTPUT_COLUMNS` (run at import)."""
    names = globals()
    for index, (name, _) in enumerate(OUTPUT_COLUMNS):
        constant = f"OUT_{name.upper()}"
        if names.get(constant) != index:
            raise ImportError(f"mcsim.kernels.declarations: {constant} is {names.get(constant)}, its column is {index}")
    declared = sorted(n for n in names if n.startswith("OUT_"))
    if len(declared) != N_OUT:
        raise ImportError(f"mcsim.kernels.declarations: {len(declared)} OUT_* constants for {N_OUT} columns")


_check_columns()

# Scalar type of each RunParams field, as the arrays of a parameter table hold it.
_FIELD_DTYPES = {int: np.int64, float: np.float64, bool: np.bool_}


def params_table(params: typing.Sequence[RunParams]) -> RunParams:
    """The parameter sets ``params`` (a sequence of RunParams) as one RunParams of arrays."""
    # Each field holds an array where RunParams declares a scalar: the table is the kernel's other layout.
    return RunParams(
        *(
            typing.cast(typing.Any, np.array([getattr(p, name) for p in params], dtype=_FIELD_DTYPES[kind]))
            for name, kind in typing.get_type_hints(RunParams).items()
        )
    )


def classes_table(classes: typing.Sequence[FailureClasses]) -> FailureClasses:
    """The failure classes of several parameter sets (equal class counts) as 2-D arrays (set x class)."""
    return FailureClasses(
        *(np.ascontiguousarray(np.stack([getattr(c, name) for c in classes])) for name in FailureClasses._fields)
    )


def no_phases() -> np.ndarray:
    """The phase table of a run with one phase (RunParams' iteration times): no rows."""
    return np.zeros((0, N_PH))


def phases_table(phases: typing.Sequence[np.ndarray]) -> np.ndarray:
    """The phase tables of several parameter sets as one 3-D array (set x phase x column).

    Tables with fewer rows are padded by repeating their last row with its start at infinity,
    a phase no run reaches. Either every set has rows or none has.
    """
    width = max([0] + [len(t) for t in phases])
    if width and min(len(t) for t in phases) == 0:
        raise ValueError("phases_table: some parameter sets have a phase table and some have none")
    out = np.zeros((len(phases), width, N_PH))
    for i, table in enumerate(phases):
        out[i, : len(table)] = table
        if 0 < len(table) < width:
            out[i, len(table) :] = table[-1]
            out[i, len(table) :, PH_START] = np.inf
    return out


# --- A configuration's scalars: the parameter vector's slots, by name -----------------------------
# A caller fills the vector by these names (mcsim.model.energy.accounting_parameters).
class ParamSlots(NamedTuple):
    """The slot of each scalar in a configuration's parameter vector, by its name (the fields' order)."""

    gpus: int  # G, GPUs (as a float)
    nodes: int  # nodes
    pue: int
    busy_w: int  # per-GPU power computing, W
    wait_w: int  # ... waiting at a barrier or exchanging data, W
    idle_w: int  # ... allocated and idle, W
    checkpoint_w: int  # ... stalled for a checkpoint or restarting, W
    busy_share: int  # b: share of the compute phase computing, outside episodes
    busy_share_episode: int  # b_ep: ... in a slow-node episode
    iteration_w: int  # mean per-GPU power over an executed iteration (rolled-back time), W
    storage_j: int  # one copy of the checkpoint written to or read from storage, J
    peer_j: int  # one copy of it sent to a peer node, J
    peer_copies: int  # copies a snapshot sends to peers (in_memory), per checkpoint
    load_s: int  # a full load from storage, s
    load_memory_s: int  # a full load from a peer's memory, s
    bits_j: int  # links' energy of one iteration, all GPUs, J
    node_w: int  # per-node overhead power, W
    rental: int  # 1: rented at gpu_hour_usd; 0: owned, amortised
    gpu_hour_usd: int  # USD per GPU-hour (rental)
    capital_usd: int  # GPUs' and nodes' capital cost (owned), USD
    amortization_h: int  # amortisation period (owned), h
    usd_per_kwh: int  # electricity price, USD/kWh
    grid_g_per_kwh: int  # grid carbon intensity, g CO2e/kWh
    embodied_kg: int  # embodied emissions of the GPUs held, kg CO2e (per GPU x G)
    lifetime_s: int  # GPU lifetime over which embodied emissions are spread, s
    ideal_s: int  # failure-free time of the whole job, s


PARAMS = ParamSlots._fields
N_PARAMS = len(PARAMS)
SLOT = ParamSlots(*range(N_PARAMS))  # ``p[SLOT.gpus]``: compiled as constants

J_PER_MWH = 3.6e9
J_PER_KWH = 3.6e6
S_PER_H = 3600.0

# --- The outputs written, one row each, in this order (float variables of mcsim.io.variables) -----
# The facility energy by part, in the order their sum is formed (mcsim.model.energy.ENERGY_PARTS is this one).
ENERGY_PARTS = ("compute", "wait", "checkpoint", "recovery", "lost", "network", "node")
_COMPUTED = (
    "wall_time",
    "energy",
    "cost",
    "co2",
    "ettr",
    *(f"energy_{part}" for part in ENERGY_PARTS),
    "energy_gpu",
    "cost_allocation",
    "cost_electricity",
    "co2_operational",
    "co2_embodied",
)
# Kernel columns stored as they are (counts) or in hours (times): (output, kernel column, in hours).
_COLUMN_OUTPUTS = (
    ("n_failures", OUT_FAILURES, False),
    ("lost_time", OUT_LOST_S, True),
    ("checkpoint_time", OUT_CHECKPOINT_S, True),
    ("recovery_time", OUT_RECOVERY_S, True),
    ("straggler_time", OUT_STRAGGLER_S, True),
    ("straggler_transient_time", OUT_STRAGGLER_TRANSIENT_S, True),
    ("straggler_persistent_time", OUT_STRAGGLER_PERSISTENT_S, True),
    ("n_memory_recoveries", OUT_MEMORY_RECOVERIES, False),
    ("spare_wait_time", OUT_SPARE_WAIT_S, True),
    ("n_hangs", OUT_HANGS, False),
    ("n_instabilities", OUT_INSTABILITIES, False),
    ("hang_time", OUT_HANG_S, True),
    ("hang_detection_time", OUT_HANG_DETECTION_S, True),
    ("instability_time", OUT_INSTABILITY_S, True),
    ("n_planned_stops", OUT_PLANNED_STOPS, False),
    ("planned_time", OUT_PLANNED_S, True),
    ("restart_time", OUT_RESTART_S, True),
    ("load_time", OUT_LOAD_S, True),
    ("abandoned_restart_time", OUT_ABANDONED_S, True),
    ("staff_wait_time", OUT_STAFF_WAIT_S, True),
    ("time_limit_stops", OUT_TIME_LIMIT_STOPS, False),
    ("queue_wait_time", OUT_QUEUE_WAIT_S, True),
    ("release_wait_time", OUT_RELEASE_WAIT_S, True),
)
ACCOUNTED = _COMPUTED + tuple(name for name, _, _ in _COLUMN_OUTPUTS)
N_ACCOUNTED = len(ACCOUNTED)
ACCOUNTED_COLUMNS = np.array([(column, in_hours) for _, column, in_hours in _COLUMN_OUTPUTS], dtype=np.int64)
FIRST_COLUMN_ROW = len(_COMPUTED)
# Rows of the computed outputs (module constants: compiled in).
R_WALL_TIME = ACCOUNTED.index("wall_time")
R_ENERGY = ACCOUNTED.index("energy")
R_COST = ACCOUNTED.index("cost")
R_CO2 = ACCOUNTED.index("co2")
R_ETTR = ACCOUNTED.index("ettr")
R_FIRST_PART = ACCOUNTED.index("energy_compute")  # then the other ENERGY_PARTS, in order
R_ENERGY_GPU = ACCOUNTED.index("energy_gpu")
R_COST_ALLOCATION = ACCOUNTED.index("cost_allocation")
R_COST_ELECTRICITY = ACCOUNTED.index("cost_electricity")
R_CO2_OPERATIONAL = ACCOUNTED.index("co2_operational")
R_CO2_EMBODIED = ACCOUNTED.index("co2_embodied")
N_PARTS = len(ENERGY_PARTS)

# Start states of a failure class's units at t = 0 (FailureClasses.start; mcsim.kernels.renewal says what
# each means).
START_NEW = 0
START_STATIONARY = 1
START_AGED = 2
