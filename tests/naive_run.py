"""The slow twin of the run loop: one run of docs/model.md §4, step by step, in plain Python.

Written from ``docs/model.md`` (§3 checkpoints and failures, §4 one run, §6
randomness), not from the kernel's code: named state, one function per event
(a stretch of training, a checkpoint, a failure and its recovery, a restart),
and plain loops. It draws from the same random streams as the kernel, so the
two must agree run for run (``tests/kernels/test_twin_exact.py``); it is the reference the
kernel is refactored against.

Random streams of run ``r`` (docs/model.md §6), each a xoshiro256** generator
seeded from ``(seed, r, stream)`` (``naive.seed_state``):

* stream 0, the iterations: one uniform per iteration started (the max-of-G
  rank factor), or, in fast mode, one uniform per block drawn at once (the
  normal deviate of the block sum);
* stream 1, the job factor J: one uniform at the start and after every restart
  (none when ``job_sigma`` is 0);
* stream 2, slow-node episodes: the gaps between arrivals and the durations of
  the episodes the job sees (see :class:`Episodes` for the order);
* stream 3 + c, failure class c: the Rényi pool of never-failed units and the
  lifetimes of replacement units (see :class:`FailureProcesses` for the order);
  the class's start state (new, stationary, or a fixed age) changes only how
  the pool's cumulative hazards become times, not the draws.

The uniform of a stream is ``((x >> 11) + 0.5) / 2**53`` of its next 64-bit
output (mcsim/kernels/rng.py), in the open interval (0, 1).

Where docs/model.md leaves a choice open, the twin takes the one below (the
kernel's today); a redesign that changes one changes the streams or the
numbers and must change it here too:

* episodes: the stream is read at the start of each stretch of training
  (after a checkpoint, a restart or an episode change), each arrival drawing
  its duration and then the next gap; a restart skips the arrivals up to it
  drawing only gaps (so arrivals during a recovery or a stall followed by a
  failure draw no duration);
* failures of class c: a pooled failure draws the pool's next failure before
  its replacement's lifetime; on equal times pools win, lowest class first;
* in_memory: snapshots are counted over the whole run (rolled-back ones too)
  for "every n-th is persisted"; a memory restore brings back the newer of the
  last replicated snapshot and the last durable checkpoint (the latter only
  when storage was faster than the replica), at the memory load;
* a sync checkpoint counts as a storage write when its stall completes (an
  interrupted stall is not counted);
* the failure guard (``max_failures``): the recovery of the last counted
  failure runs to its end or to the next failure's instant, then the run stops;
* fast mode: a stretch shorter than the block threshold, or cut below it at the
  expected iterations before an episode (or degradation) change, is run iteration by iteration
  and then the stretch is planned again, unless it is exactly ``short_block`` iterations long
  outside an episode: then its factor sum is the polynomial ``sum_j c_j z^j`` of one normal
  deviate z (docs/model.md §4 "Short blocks"), drawn and booked like a block;
* fast mode, whole checkpoint cycles at once (docs/model.md §4 "Whole stretches of
  checkpoint cycles"; :meth:`Run.advance_cycle_stretch`): planned at a checkpoint
  boundary after the episode state is read and before a block is; one uniform of
  stream 0 for the factor sum of all its iterations, spent even when the stretch
  drawn would reach the horizon and is dropped (then blocks are walked).
  The n checkpoints of a stretch are replayed one by one at their interpolated
  progress and time through the same checkpoint bookkeeping as walked ones
  (:meth:`Run.checkpoint_taken`), so the kernel's closed forms for the counters
  and restore points are checked, not copied. Where the kernel's arithmetic
  order decides the last bits of a time that later events compare with (the
  stretch's end, the interpolated times and points), the twin follows it and
  says so.

Training phases and the throughput degradation (docs/model.md §4; the twin is written from
their specification, not from the kernel):

* phases: a table of rows (start iteration, compute s, comm s); the phase of the run is the
  last row whose start is at most the iterations done, read afresh at the top of every pass
  of the run loop (:class:`Phase`, :func:`phase_list`). No stretch of training crosses the
  phase's end: one that reaches it off the checkpoint grid ends there with no checkpoint and
  the loop goes round ("state changed"); fast mode's stretches of whole cycles end within the
  phase. A rollback to an earlier phase brings its iteration times back.
* degradation: the compute part of an iteration is stretched by ``g = 1 + min(r (j + 1/2) S, D)``
  in step ``j`` (of ``S`` seconds) of the attempt (since the start or the last restart); the
  factor is read at the top of each pass after the episodes, like J it multiplies compute and
  its excess is persistent straggler time, and its changes are transitions like an episode's
  (:class:`Degradation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from naive import seed_state, xoshiro256ss_next
from scipy import special

STREAM_ITERATIONS = 0
STREAM_JOB = 1
STREAM_EPISODES = 2
STREAM_FIRST_FAILURE_CLASS = 3
STREAM_RECOVERY = 1 << 40  # recovery durations of the classes with a recovery law

FAIL_STOP, HANG, INSTABILITY, PLANNED = 0, 1, 2, 3  # the kernel's codes of the kinds of failure class

SYNC, ASYNC, IN_MEMORY = 0, 1, 2  # the kernel's strategy codes (gockpt runs as async)
START_NEW, START_STATIONARY, START_AGED = 0, 1, 2  # the kernel's start-state codes (FailureClasses.start)

# The output of one run, in the kernel's column order (mcsim/kernels/declarations.py OUT_*).
OUTPUT_NAMES = (
    "wall_s",
    "failures",
    "lost_s",
    "checkpoint_s",
    "recovery_s",
    "straggler_s",
    "completed",
    "iterations_done",
    "busy_s",
    "checkpoints",
    "straggler_transient_s",
    "straggler_persistent_s",
    "memory_recoveries",
    "spare_wait_s",
    "episode_phase_s",
    "storage_writes",
    "storage_loads",
    "memory_loads",
    "executed_iterations",
    "hangs",
    "instabilities",
    "hang_s",
    "hang_detection_s",
    "instability_s",
    "planned_stops",
    "planned_s",
    "restart_s",
    "load_s",
    "abandoned_s",
    "staff_wait_s",
    "time_limit_stops",
    "queue_wait_s",
    "release_wait_s",
)


# ---------------------------------------------------------------------------
# Random numbers
# ---------------------------------------------------------------------------


class Stream:
    """One xoshiro256** stream (Blackman & Vigna's reference C code), Python integers."""

    def __init__(self, seed: int, run: int, stream: int):
        self.s = seed_state(seed, run, stream)

    def next_u64(self) -> int:
        return xoshiro256ss_next(self.s)

    def uniform(self) -> float:
        """Uniform in (0, 1): the top 53 bits plus one half, times 2**-53."""
        return ((self.next_u64() >> 11) + 0.5) * 2.0**-53

    def exponential(self) -> float:
        """Exp(1) by inversion."""
        return -math.log(self.uniform())


# Acklam (2003), "An algorithm for computing the inverse normal cumulative
# distribution function": rational approximations in the central region and
# in the tails (split at 0.02425), relative error < 1.15e-9.
ACKLAM_A = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
ACKLAM_B = (
    -5.447609879822406e01,
    1.615858368580409e02,
    -1.556989798598866e02,
    6.680131188771972e01,
    -1.328068155288572e01,
)
ACKLAM_C = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
ACKLAM_SPLIT = 0.02425


def _horner(coefficients: tuple[float, ...], x: float) -> float:
    """c0 x^n + c1 x^(n-1) + ... + cn, highest power first."""
    value = coefficients[0]
    for c in coefficients[1:]:
        value = value * x + c
    return value


def _acklam_tail(q: float) -> float:
    """Acklam's tail approximation in q = sqrt(-2 log p) (the lower tail's quantile)."""
    return _horner(ACKLAM_C, q) / (_horner(ACKLAM_D, q) * q + 1.0)


def normal_quantile_acklam(p: float) -> float:
    """Acklam's Φ⁻¹(p); the upper tail uses log1p(-p) so that 1 - p is not formed."""
    if p < ACKLAM_SPLIT:
        return _acklam_tail(math.sqrt(-2.0 * math.log(p)))
    if p <= 1.0 - ACKLAM_SPLIT:
        q = p - 0.5
        r = q * q
        return _horner(ACKLAM_A, r) * q / (_horner(ACKLAM_B, r) * r + 1.0)
    return -_acklam_tail(math.sqrt(-2.0 * math.log1p(-p)))


def normal_quantile(p: float) -> float:
    """Φ⁻¹(p) to double precision: Acklam refined by one Halley step on erfc."""
    x = normal_quantile_acklam(p)
    if p < 0.5:
        residual = 0.5 * math.erfc(-x / math.sqrt(2.0)) - p  # Φ(x) - p
    else:
        residual = (1.0 - p) - 0.5 * math.erfc(x / math.sqrt(2.0))  # Φ(x) - p, with 1 - p exact
    u = residual * math.sqrt(2.0 * math.pi) * math.exp(0.5 * x * x)
    return x - u / (1.0 + 0.5 * x * u)


def slowest_rank_factor(u: float, ranks: float, sigma: float) -> float:
    """M = exp(sigma Φ⁻¹(u^(1/G))): the largest of G lognormal rank factors, from one uniform.

    When u^(1/G) >= 1/2 the quantile is taken as -Φ⁻¹(q), q = 1 - u^(1/G) = -expm1(log(u)/G).
    """
    if sigma == 0.0:
        return 1.0
    log_p = math.log(u) / ranks
    if log_p < -math.log(2.0):
        z = normal_quantile(math.exp(log_p))
    else:
        z = -normal_quantile(-math.expm1(log_p))
    return math.exp(sigma * z)


# ---------------------------------------------------------------------------
# Failure processes (docs/model.md §4 "Failure processes")
# ---------------------------------------------------------------------------


@dataclass
class FailureClass:
    units: int
    shape: float
    scale_s: float
    recovery_s: float
    nodes_taken: int
    memory_ok: bool
    repair_s: float
    start: str = "new"  # "new", "stationary" or "aged" (every unit age_s old at t = 0)
    age_s: float = 0.0
    kind: int = FAIL_STOP
    detect_s: float = 0.0  # hang: the hang lasts this long before it is detected
    rollback_checkpoints: int = 0  # instability: storage checkpoints rolled back beyond the last
    recovery_sigma: float = 0.0  # lognormal log-sd of the recovery (mean recovery_s)
    manual_share: float = 0.0  # share of recoveries that need a person ...
    manual_s: float = 0.0  # ... for this long on average (same law)
    bad_share: float = 0.0  # share of replacement units that are bad ...
    bad_mean_s: float = 3600.0  # ... and fail after an exponential life of this mean
    repair_sigma: float = 0.0  # lognormal log-sd of a node's repair (mean repair_s)
    durations_s: tuple = ()  # measured recoveries: each recovery is one of them at random
    requeue_share: float = 1.0  # share of restarts by full requeue (params.restart_s), else in place
    # Staffing (docs/model.md §3 "Staffing"): who answers a recovery that needs a person, and when.
    staff_team: int = 0  # 0 none, 1 office (working hours), 2 always (24/7)
    staff_offset_s: float = 0.0  # the start: local seconds since the Monday 00:00 before it
    staff_begin_s: float = 9 * 3600.0  # a working day's shift, local seconds of the day
    staff_end_s: float = 17 * 3600.0
    staff_days: int = 0b11111  # working weekdays, Monday bit 0
    staff_response_s: float = 0.0  # mean response in working hours or of a 24/7 team (exponential)
    staff_on_call: int = 0  # 1: out of hours a person on call answers after a lognormal response
    staff_on_call_s: float = 1800.0
    staff_on_call_sigma: float = 0.0
    staff_holidays: tuple = ()  # (from, until) pairs, s since the start: nobody at work


def first_failure_time(fc: FailureClass, hazard: float) -> float:
    """The time at which a never-failed unit's first-failure cumulative hazard reaches ``hazard``.

    new: a Weibull lifetime, ``H(t) = (t/scale)^k``. stationary: the forward-recurrence
    time of the renewal process in equilibrium, survival ``(1/mean) int_t^inf S(u) du``,
    which for a Weibull is ``Q(1/k, (t/scale)^k)`` (SciPy's inverse; near Q = 1 through
    P = 1 - Q, which ``-expm1(-H)`` gives to full precision). aged: the residual life of a
    unit that has worked ``a`` hours, ``S(a + t) / S(a) = exp(-H)``.
    """
    k, scale = fc.shape, fc.scale_s
    if fc.start == "new" or (fc.start == "aged" and (k == 1.0 or fc.age_s == 0.0)):
        return scale * hazard ** (1.0 / k)
    if fc.start == "stationary":
        if hazard < math.log(2.0):
            x = special.gammaincinv(1.0 / k, -math.expm1(-hazard))
        else:
            x = special.gammainccinv(1.0 / k, math.exp(-hazard))
        return scale * x ** (1.0 / k)
    age_hazard = (fc.age_s / scale) ** k
    return scale * (age_hazard + hazard) ** (1.0 / k) - fc.age_s


class FailureProcesses:
    """Every unit of every class is a Weibull renewal process, replaced as new when it fails.

    Never-failed units of class c are pooled: the cumulative hazards of their
    first failures are iid Exp(1), so in increasing order the next is
    ``H + E / (units left)``, at time :func:`first_failure_time` (``scale * H^(1/k)``
    for new units). A replaced unit is new: its next failure is its failure
    time plus a fresh Weibull lifetime ``scale * E^(1/k)``.

    Draw order on class c's stream: one draw for the pool's first failure at the
    start (none for an empty class); when a pooled unit fails, first the pool's
    next failure (none once the pool is empty), then the replacement's lifetime;
    when a replaced unit fails, its replacement's lifetime.

    The earliest pending failure is taken; on equal times a pooled failure of
    the lowest class comes first.
    """

    def __init__(self, classes: list[FailureClass], seed: int, run: int):
        self.classes = classes
        self.streams = [Stream(seed, run, STREAM_FIRST_FAILURE_CLASS + c) for c in range(len(classes))]
        self.never_failed = [fc.units for fc in classes]
        self.pool_hazard = [0.0] * len(classes)
        self.pool_next_s = [math.inf] * len(classes)
        self.replaced: list[tuple[float, int]] = []  # (next failure time, class) of replaced units
        self.bad_replacements = 0  # replacement units that were bad (not an output)
        self._earliest_cache: tuple[float, str, int] | None = None
        for c in range(len(classes)):
            self._next_pooled_failure(c)

    def _next_pooled_failure(self, c: int) -> None:
        if self.never_failed[c] <= 0:
            self.pool_next_s[c] = math.inf
            return
        self.pool_hazard[c] += self.streams[c].exponential() / self.never_failed[c]
        self.pool_next_s[c] = first_failure_time(self.classes[c], self.pool_hazard[c])

    def _lifetime(self, c: int) -> float:
        """The replacement's life: bad with probability ``bad_share`` (one uniform, drawn only when
        the share is positive), then an exponential life of mean ``bad_mean_s``; else a Weibull one."""
        fc = self.classes[c]
        if fc.bad_share > 0.0 and self.streams[c].uniform() < fc.bad_share:
            self.bad_replacements += 1
            return fc.bad_mean_s * self.streams[c].exponential()
        return fc.scale_s * self.streams[c].exponential() ** (1.0 / fc.shape)

    def _earliest(self) -> tuple[float, str, int]:
        """(time, "pool" | "replaced" | "none", class or index in ``replaced``)."""
        if self._earliest_cache is None:  # remembered until a failure is taken
            self._earliest_cache = self._find_earliest()
        return self._earliest_cache

    def _find_earliest(self) -> tuple[float, str, int]:
        best = (math.inf, "none", -1)
        for c, time_s in enumerate(self.pool_next_s):
            if time_s < best[0]:
                best = (time_s, "pool", c)
        for i, (time_s, _) in enumerate(self.replaced):
            if time_s < best[0]:
                best = (time_s, "replaced", i)
        return best

    def next_time(self) -> float:
        """Time of the earliest pending failure (inf when none is pending)."""
        return self._earliest()[0]

    def next_kind(self) -> int:
        """Kind of the earliest pending failure (FAIL_STOP when none is pending)."""
        _, where, index = self._earliest()
        if where == "pool":
            return self.classes[index].kind
        if where == "replaced":
            return self.classes[self.replaced[index][1]].kind
        return FAIL_STOP

    def take_next(self) -> int:
        """Remove the earliest pending failure, replace its unit, and return its class."""
        time_s, where, index = self._earliest()
        self._earliest_cache = None
        if where == "pool":
            c = index
            self.never_failed[c] -= 1
            self._next_pooled_failure(c)
            self.replaced.append((time_s + self._lifetime(c), c))
            return c
        _, c = self.replaced[index]
        self.replaced[index] = (time_s + self._lifetime(c), c)
        return c


# ---------------------------------------------------------------------------
# Slow-node episodes
# ---------------------------------------------------------------------------


class Episodes:
    """Poisson arrivals of slow-node episodes with Exp(mean) durations; overlapping ones merge.

    The job reads the stream when it (re)starts a stretch of training
    (:meth:`catch_up`): each arrival up to then draws its duration, then the gap
    to the next arrival. A restart ends every episode and skips the arrivals
    up to it, drawing only their gaps (:meth:`restart`).
    """

    def __init__(self, rate_per_s: float, mean_s: float, stream: Stream):
        self.rate_per_s = rate_per_s
        self.mean_s = mean_s
        self.stream = stream
        self.next_arrival_s = stream.exponential() / rate_per_s if rate_per_s > 0.0 else math.inf
        self.active_until_s = 0.0  # end of the merged episodes seen so far

    def catch_up(self, t: float) -> None:
        while self.next_arrival_s <= t:
            end = self.next_arrival_s + self.mean_s * self.stream.exponential()
            self.active_until_s = max(self.active_until_s, end)
            self.next_arrival_s += self.stream.exponential() / self.rate_per_s

    def active(self, t: float) -> bool:
        return self.active_until_s > t

    def next_change_s(self, t: float) -> float:
        """When the state read at ``t`` may change: the end of the episodes or the next arrival."""
        return self.active_until_s if self.active(t) else self.next_arrival_s

    def restart(self, t: float) -> None:
        self.active_until_s = min(self.active_until_s, t)
        while self.next_arrival_s <= t:
            self.next_arrival_s += self.stream.exponential() / self.rate_per_s


# ---------------------------------------------------------------------------
# Throughput degradation that a restart resets
# ---------------------------------------------------------------------------


class Degradation:
    """The share of compute time an attempt has added by now, in steps of ``step_s``.

    An attempt begins at t = 0 and at every restart. Its step j covers
    ``[begun + j step, begun + (j + 1) step)`` and stretches compute by the factor
    ``1 + min(per_s (j + 1/2) step, most)``; once the cap is reached the factor stays
    there until the next restart. ``per_s = 0``: the factor is 1 and never changes.
    """

    def __init__(self, per_s: float, step_s: float, most: float):
        self.per_s = per_s
        self.step_s = step_s
        self.most = most
        self.capped = 0  # attempts that reached the cap (not an output)
        self.begin(0.0)

    def begin(self, t: float) -> None:
        """A new attempt at ``t``: no degradation yet; the first read sets step 0."""
        self.begun_s = t
        self.factor = 1.0
        self.next_change_s = t if self.per_s > 0.0 else math.inf

    def read(self, t: float) -> None:
        """The factor of the step the attempt is in at ``t`` (nothing to do before the next change)."""
        if self.next_change_s > t:
            return
        step = self.step_s
        j = math.floor((t - self.begun_s) / step)
        while self.begun_s + (j + 1) * step <= t:  # the division may round down a step's end
            j += 1
        added = self.per_s * (j + 0.5) * step
        if added >= self.most:
            self.factor = 1.0 + self.most
            self.next_change_s = math.inf
            self.capped += 1
        else:
            self.factor = 1.0 + added
            self.next_change_s = self.begun_s + (j + 1) * step


# ---------------------------------------------------------------------------
# Training phases
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """Iterations ``start .. end - 1`` of the run, each ``compute_s`` (stretched by stragglers) + ``comm_s``."""

    index: int
    start: int
    end: int
    compute_s: float
    comm_s: float


def phase_list(params, table) -> list[Phase]:
    """The phases of a run from its phase table (rows: start, compute s, comm s); none: one phase of
    ``params``' iteration times. Rows that begin at or after the run's end (padding at +inf) are never
    reached; the last phase reached ends with the run."""
    if table is None or len(table) == 0:
        return [Phase(0, 0, params.iterations, params.compute_time_s, params.comm_time_s)]
    rows = [(float(r[0]), float(r[1]), float(r[2])) for r in table if float(r[0]) < params.iterations]
    phases = []
    for i, (start, compute_s, comm_s) in enumerate(rows):
        end = int(rows[i + 1][0]) if i + 1 < len(rows) else params.iterations
        phases.append(Phase(i, int(start), end, compute_s, comm_s))
    assert phases[0].start == 0 and all(a.start < a.end for a in phases), "phase starts must increase from 0"
    return phases


def phase_at(phases: list[Phase], done: int) -> Phase:
    """The phase whose iterations are being done after ``done``: the last that starts at or before it."""
    current = phases[0]
    for phase in phases:
        if phase.start <= done:
            current = phase
    return current


# ---------------------------------------------------------------------------
# Spare nodes
# ---------------------------------------------------------------------------


class SparePool:
    """Hot spares: a failure's taken nodes go to repair and come back after the repair time."""

    def __init__(self, spares: int):
        self.free = spares
        self.back_at_s: list[float] = []  # return times of nodes under repair, not yet claimed

    def replace(self, t: float, repairs_s: list[float]) -> float:
        """Send nodes to repair at ``t`` (one repair time each), take as many replacements; when they are
        all there."""
        need = len(repairs_s)
        returned = [x for x in self.back_at_s if x <= t]
        self.back_at_s = [x for x in self.back_at_s if x > t]
        self.free += len(returned)
        self.back_at_s += [t + r for r in repairs_s]
        if self.free >= need:
            self.free -= need
            return t
        missing = need - self.free
        self.free = 0
        self.back_at_s.sort()
        awaited, self.back_at_s = self.back_at_s[:missing], self.back_at_s[missing:]
        return max(awaited)


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

STRETCH_MARGIN_SD = 8.0  # fast mode: a stretch of cycles keeps this many standard deviations from events


@dataclass(frozen=True)
class Progress:
    """What a restore brings back: iterations done and the time accounts of those iterations."""

    iterations: int = 0
    alive_s: float = 0.0  # time of those iterations
    transient_s: float = 0.0  # straggler excess: per-iteration rank noise
    persistent_s: float = 0.0  # straggler excess: job factor and episodes
    episode_phase_s: float = 0.0  # compute phase of those iterations during episodes
    # Not a restore point's value: set on the points inside a fast-mode stretch of cycles,
    # which docs/model.md says no failure restores (counted in RunState.interpolated_restores).
    interpolated: bool = field(default=False, compare=False)


@dataclass
class Write:
    """A copy in flight: ``point`` becomes restorable at ``ready_s``."""

    point: Progress
    ready_s: float


@dataclass
class RunState:
    t: float = 0.0
    progress: Progress = field(default_factory=Progress)
    next_checkpoint: int = 0
    job_factor: float = 1.0
    durable: Progress = field(default_factory=Progress)  # last durable storage checkpoint
    replica: Progress | None = None  # last snapshot replicated to a peer (in_memory)
    storage_write: Write | None = None
    replication: Write | None = None
    snapshots: int = 0
    # Accounts.
    lost_s: float = 0.0
    checkpoint_s: float = 0.0
    recovery_s: float = 0.0
    spare_wait_s: float = 0.0
    busy_s: float = 0.0
    executed: float = 0.0
    failures: int = 0
    checkpoints: int = 0
    memory_recoveries: int = 0
    storage_writes: int = 0
    storage_loads: int = 0
    memory_loads: int = 0
    partial_s: float = 0.0  # the iteration (or block) a failure interrupted
    hangs: int = 0
    instabilities: int = 0
    hang_s: float = 0.0  # rolled back and recovering because of hangs
    hang_detection_s: float = 0.0
    instability_s: float = 0.0
    planned_stops: int = 0
    planned_s: float = 0.0  # down for planned stops, their partial iterations included
    restart_s: float = 0.0  # in the restarts' parts (scheduling, process start, communicators, warm-up)
    load_s: float = 0.0  # reading the state back (loads, those cut short included)
    abandoned_s: float = 0.0  # abandoned restarts: their lost steps, the parts and the load again
    staff_wait_s: float = 0.0  # recoveries that needed a person waiting for one
    staff_waits: int = 0  # waits for a person longer than zero (not an output) ...
    staff_waits_out_of_hours: int = 0  # ... of which until the next working hour
    staff_waits_on_call: int = 0  # ... or for the person on call
    staff_waits_after_holiday: int = 0  # ... until the next working hour after a holiday
    abandoned_restarts: int = 0  # (not an output)
    in_place_restarts: int = 0  # incidents whose restart path was in place (not an output)
    kept_at_planned_stop: int = 0  # fast blocks a planned stop kept a share of (not an output)
    # The batch system (docs/model.md §3 "The batch system").
    part_end: float = math.inf  # the job part's time limit strikes here
    time_limit_stops: int = 0
    queue_wait_s: float = 0.0  # in the batch queue before a new allocation
    release_wait_s: float = 0.0  # crashed jobs holding their allocation until released
    released_jobs: int = 0  # fail-stop failures whose job was held (not an output)
    failures_in_queue: int = 0  # failures during a queue wait (not an output)
    kept_at_limit: int = 0  # fast blocks a time limit kept a share of (not an output)
    dropped_in_recovery: int = 0  # hangs and instabilities that fell in a recovery (not an output)
    manual_recoveries: int = 0  # recoveries that needed a person (not an output)
    # Not outputs: what the run went through, so that tests can check their grid covers it.
    failures_in_recovery: int = 0
    failures_in_restart: int = 0  # failures during a restart's parts
    bad_replacements: int = 0  # replacement units that were bad
    memory_fallbacks: int = 0
    spare_waits: int = 0
    episode_stretches: int = 0
    write_waits: int = 0
    blocks_at_once: int = 0
    blocks_cut: int = 0
    persists_skipped: int = 0
    failures_in_spare_wait: int = 0
    recoveries_kept: int = 0  # failures during a recovery whose own recovery ended first (not an output)
    blocks_iterated: int = 0  # fast mode: blocks below the threshold, drawn one iteration at a time
    short_blocks: int = 0  # fast mode: blocks of short_block iterations below the threshold, drawn at once
    cycle_stretches: int = 0  # fast mode: stretches of whole checkpoint cycles advanced at once
    cycles_in_stretches: int = 0
    heavy_stretches: int = 0  # ... in the regime where every cycle waits for the previous write
    episode_cycle_stretches: int = 0  # ... during a slow-node episode
    stretches_before_episode_change: int = 0  # ... shortened to end before the next episode change
    stretch_persists: int = 0  # in_memory: snapshots persisted inside stretches
    stretches_dropped: int = 0  # drawn past the horizon (probability < 1e-15) and walked instead
    interpolated_restores: int = 0  # failures that restored a point inside a stretch
    # Phases and degradation (not outputs).
    phase_ends_off_grid: int = 0  # stretches of training that ended at a phase's end, no checkpoint there
    phase_ends_on_grid: int = 0  # ... that ended at a phase's end with a checkpoint due there
    rollbacks_across_phases: int = 0  # restores of a point in an earlier phase
    degradation_capped: int = 0  # attempts whose degradation reached its cap
    degradation_resets: int = 0  # restarts of a degraded attempt (factor > 1)
    stretches_before_degradation_change: int = 0  # fast stretches shortened to end before a degradation step


@dataclass(frozen=True)
class CycleStretch:
    """Fast mode: ``cycles`` whole checkpoint cycles of ``block_iterations`` iterations to advance at once."""

    cycles: int
    block_iterations: int
    factor_mean: float  # E[F] and sd(F) of one iteration's factor (in an episode or not)
    factor_std: float
    fixed_s: float  # the deterministic part of a cycle: the stall, plus the write W when heavy
    heavy: bool  # every cycle waits for the previous write: a cycle lasts exactly W + stall
    before_episode_change: bool  # shortened to end before the next episode (or degradation) change


def cycles_within(distance_s: float, mean_s: float, std_s: float) -> float:
    """Largest ``n >= 0`` with ``n mean + STRETCH_MARGIN_SD sqrt(n) std <= distance`` (inf if unbounded).

    By doubling and bisection over n (the kernel solves the quadratic in sqrt(n));
    the inequality is written in the kernel's order, which decides its ties.
    """
    if not (distance_s > 0.0 and mean_s > 0.0):
        return 0
    if distance_s == math.inf:
        return math.inf

    def fits(n: int) -> bool:
        return n * mean_s + STRETCH_MARGIN_SD * math.sqrt(n) * std_s <= distance_s

    low, high = 0, 1  # fits(low), and high is the first power of 2 that does not fit
    while fits(high):
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def interpolated_progress(start: Progress, end: Progress, share: float, iterations: int) -> Progress:
    """The progress ``share`` of the way from ``start`` to ``end`` (a point inside a stretch of cycles).

    Each time account as the kernel interpolates it, ``a + share (b - a)``; the
    iterations exactly (a whole number of cycles).
    """

    def between(a: float, b: float) -> float:
        return a + share * (b - a)

    return Progress(
        iterations=iterations,
        alive_s=between(start.alive_s, end.alive_s),
        transient_s=between(start.transient_s, end.transient_s),
        persistent_s=between(start.persistent_s, end.persistent_s),
        episode_phase_s=between(start.episode_phase_s, end.episode_phase_s),
        interpolated=True,
    )


class Run:
    """One run of one configuration: ``params`` (kernel RunParams), failure classes, seed and run index."""

    def __init__(self, params, classes: list[FailureClass], seed: int, run: int, phases=None):
        self.p = params
        self.phases = phase_list(params, phases)
        self.phase_table_given = phases is not None and len(phases) > 0
        self.phase = self.phases[0]
        self.degradation = Degradation(params.degradation_per_s, params.degradation_step_s, params.degradation_max)
        self.failures = FailureProcesses(classes, seed, run)
        self.classes = classes
        self.iteration_stream = Stream(seed, run, STREAM_ITERATIONS)
        self.job_stream = Stream(seed, run, STREAM_JOB)
        self.recovery_stream = Stream(seed, run, STREAM_RECOVERY)
        self.episodes = Episodes(params.episode_rate_per_s, params.episode_mean_s, Stream(seed, run, STREAM_EPISODES))
        self.spares = SparePool(params.spare_nodes) if params.spare_nodes >= 0 else None
        self.state = RunState(next_checkpoint=params.checkpoint_every, part_end=params.time_limit_s)
        self.state.job_factor = self.draw_job_factor()

    # --- draws --------------------------------------------------------------

    def draw_job_factor(self) -> float:
        """J = max(1, exp(job_sigma Z)), Z from Acklam's quantile (sampled only, unrefined)."""
        if self.p.job_sigma == 0.0:
            return 1.0
        z = normal_quantile_acklam(self.job_stream.uniform())
        return max(1.0, math.exp(self.p.job_sigma * z))

    # --- when the current activity must stop ----------------------------------

    def planned_stop_next(self) -> bool:
        """Whether the horizon is a planned stop (not the wall-clock limit, not another failure)."""
        return self.failures.next_time() <= self.p.max_wall_s and self.failures.next_kind() == PLANNED

    def limit_next(self) -> bool:
        """Whether the horizon is the job part's time limit (before the next failure and the wall-clock limit)."""
        return self.state.part_end < min(self.failures.next_time(), self.p.max_wall_s)

    def horizon(self) -> float:
        """The next failure, the wall-clock limit or the job part's time limit, whichever comes first."""
        return min(self.failures.next_time(), self.p.max_wall_s, self.state.part_end)

    def transition_s(self) -> float:
        """When the state read at ``t`` (the episodes and the degradation step) next changes."""
        return min(self.episodes.next_change_s(self.state.t), self.degradation.next_change_s)

    def slowdown(self) -> float:
        """What multiplies the compute part of every iteration besides its rank factor: J g."""
        return self.state.job_factor * self.degradation.factor

    # --- training -------------------------------------------------------------

    def train_stretch(self) -> str:
        """Train towards the next checkpoint (or the end); "interrupted", "state changed" or "reached".

        The episode state and the degradation step are read at the stretch's start
        (:meth:`simulate`); the stretch stops when either changes, and at the end of
        the phase. Fast mode draws the stretch as one block when it is long enough,
        cut at the expected number of iterations before the change.
        """
        p, s = self.p, self.state
        in_episode = self.episodes.active(s.t)
        s.episode_stretches += in_episode
        change_s = self.transition_s()
        target = min(s.next_checkpoint, p.iterations)
        count = min(s.next_checkpoint, self.phase.end) - s.progress.iterations
        if p.fast:
            mean, std, min_block = self.block_law(in_episode)
            # A block of the short law's length outside episodes is drawn at once too.
            short = p.short_block if not in_episode else -1
            if (count >= min_block or count == short) and change_s < math.inf:
                mean_iteration_s = self.phase.compute_s * self.slowdown() * mean + self.phase.comm_s
                fit = max(1, math.ceil((change_s - s.t) / mean_iteration_s))
                s.blocks_cut += fit < count
                count = min(count, fit)
            if count >= min_block or count == short:
                s.blocks_at_once += 1
                s.short_blocks += count < min_block
                return self.train_block(count, mean, std, in_episode, short=count < min_block)
        s.blocks_iterated += p.fast
        stop_at = s.progress.iterations + count
        while s.progress.iterations < stop_at:
            if s.t >= change_s:
                return "state changed"
            if not self.train_iteration(in_episode):
                return "interrupted"
        return "reached" if s.progress.iterations == target else "state changed"

    def train_iteration(self, in_episode: bool) -> bool:
        """One iteration; False if the horizon interrupts it."""
        p, s = self.p, self.state
        m = slowest_rank_factor(self.iteration_stream.uniform(), p.n_ranks, p.sigma)
        factor = max(m, p.episode_slowdown) if in_episode else m
        c, g = self.phase.compute_s, self.degradation.factor
        compute_phase = c * s.job_factor * g * factor
        duration = compute_phase + self.phase.comm_s
        return self.finish_work(
            1,
            duration,
            compute_phase,
            in_episode,
            transient_s=c * (m - 1.0),
            persistent_s=c * (s.job_factor * g * factor - m),
        )

    def block_law(self, in_episode: bool) -> tuple[float, float, int]:
        """Fast mode: mean and std of one iteration's factor F, and the block threshold K_min."""
        p = self.p
        if in_episode:
            return p.factor_mean_episode, p.factor_std_episode, p.fast_min_block_episode
        return p.factor_mean, p.factor_std, p.fast_min_block

    def draw_factor_sum(self, count: int, mean: float, std: float, short: bool = False) -> float:
        """The sum of ``count`` factors at once: one normal deviate z, then N(count mean, count var) at z, or
        for a short block (``short_block`` iterations, below the threshold) the polynomial ``sum_j c_j z^j``;
        clipped at 0."""
        p = self.p
        z = normal_quantile_acklam(self.iteration_stream.uniform())
        if not short:
            return max(count * mean + math.sqrt(count) * std * z, 0.0)
        coefficients = [getattr(p, f"short_block_c{j}") for j in range(7)]
        return max(_horner(tuple(reversed(coefficients)), z), 0.0)

    def block_accounts(self, count: int, factor_sum: float, in_episode: bool) -> tuple[float, float, float, float]:
        """Duration, compute phase, transient and persistent straggler time of ``count`` iterations
        whose factors sum to ``factor_sum`` (a block, or every block of a stretch of cycles)."""
        p, s = self.p, self.state
        c, comm = self.phase.compute_s, self.phase.comm_s
        compute_phase = c * s.job_factor * self.degradation.factor * factor_sum
        duration = compute_phase + count * comm
        if in_episode:  # the rank noise at its expectation, the rest (J, g, the episode) persistent
            transient = c * count * (p.factor_mean - 1.0)
        else:
            transient = c * (factor_sum - count)
        persistent = duration - count * (c + comm) - transient
        return duration, compute_phase, transient, persistent

    def train_block(self, count: int, mean: float, std: float, in_episode: bool, short: bool = False) -> str:
        """``count`` iterations at once: their factor sum ~ N(count mean, count var), or the short law, at 0."""
        p, s = self.p, self.state
        factor_sum = self.draw_factor_sum(count, mean, std, short)
        duration, compute_phase, transient, persistent = self.block_accounts(count, factor_sum, in_episode)
        if not self.finish_work(count, duration, compute_phase, in_episode, transient, persistent):
            return "interrupted"
        return "reached" if s.progress.iterations == min(s.next_checkpoint, p.iterations) else "state changed"

    def finish_work(
        self,
        count: int,
        duration: float,
        compute_phase: float,
        in_episode: bool,
        transient_s: float,
        persistent_s: float,
    ) -> bool:
        """Run ``count`` iterations lasting ``duration``; False (and the partial work) if cut by the horizon."""
        s = self.state
        horizon = self.horizon()
        if s.t + duration > horizon:
            s.executed += count * (horizon - s.t) / duration
            kept = math.floor(count * (horizon - s.t) / duration)
            if kept > 0 and (self.limit_next() or self.planned_stop_next()):
                # A planned stop or the part's time limit saves the block's whole iterations: their share of
                # its time and accounts.
                share = kept / count
                s.t += share * duration
                s.busy_s += share * duration
                old = s.progress
                s.progress = Progress(
                    iterations=old.iterations + kept,
                    alive_s=old.alive_s + share * duration,
                    transient_s=old.transient_s + share * transient_s,
                    persistent_s=old.persistent_s + share * persistent_s,
                    episode_phase_s=old.episode_phase_s + share * compute_phase if in_episode else old.episode_phase_s,
                )
                if self.limit_next():
                    s.kept_at_limit += 1
                else:
                    s.kept_at_planned_stop += 1
            s.partial_s = horizon - s.t
            s.busy_s += s.partial_s
            s.t = horizon
            return False
        s.t += duration
        s.executed += count
        s.busy_s += duration
        old = s.progress
        s.progress = Progress(
            iterations=old.iterations + count,
            alive_s=old.alive_s + duration,
            transient_s=old.transient_s + transient_s,
            persistent_s=old.persistent_s + persistent_s,
            episode_phase_s=old.episode_phase_s + compute_phase if in_episode else old.episode_phase_s,
        )
        return True

    # --- writes in flight -----------------------------------------------------

    def settle_writes(self) -> None:
        """Writes whose copy has finished by now become restore points."""
        s = self.state
        if s.storage_write is not None and s.storage_write.ready_s <= s.t:
            s.durable = s.storage_write.point
            s.storage_write = None
        if s.replication is not None and s.replication.ready_s <= s.t:
            s.replica = s.replication.point
            s.replication = None

    # --- checkpoint -----------------------------------------------------------

    def checkpoint(self) -> bool:
        """Wait for the write this checkpoint depends on, then stall; False if interrupted."""
        p, s = self.p, self.state
        previous = s.replication if p.strategy == IN_MEMORY else s.storage_write
        if previous is not None and previous.ready_s > s.t:
            s.write_waits += 1
            horizon = self.horizon()
            waited_until = min(previous.ready_s, horizon)
            s.checkpoint_s += waited_until - s.t
            s.t = waited_until
            if s.t < previous.ready_s:
                return False
        self.settle_writes()
        horizon = self.horizon()
        if s.t + p.checkpoint_stall_s > horizon:
            s.checkpoint_s += horizon - s.t
            s.t = horizon
            return False
        s.t += p.checkpoint_stall_s
        s.checkpoint_s += p.checkpoint_stall_s
        self.checkpoint_taken()
        return True

    def checkpoint_taken(self) -> None:
        """A checkpoint's stall has ended at ``t`` (the write it waited for settled): what the strategy does."""
        p, s = self.p, self.state
        s.checkpoints += 1
        s.next_checkpoint = s.progress.iterations + p.checkpoint_every
        if p.strategy == SYNC:
            s.durable = s.progress
            s.storage_writes += 1
        elif p.strategy == ASYNC:
            s.storage_write = Write(s.progress, s.t + p.checkpoint_write_s)
            s.storage_writes += 1
        else:
            s.replication = Write(s.progress, s.t + p.replicate_s)
            s.snapshots += 1
            self.settle_writes()
            if s.snapshots % p.persist_every == 0 and s.storage_write is None:
                s.storage_write = Write(s.progress, s.t + p.checkpoint_write_s)
                s.storage_writes += 1
            elif s.snapshots % p.persist_every == 0:
                s.persists_skipped += 1

    # --- fast mode: whole checkpoint cycles at once (docs/model.md §4) ------------

    def advance_cycle_stretch(self) -> bool:
        """Advance ``n`` whole checkpoint cycles (block, wait, stall) with one normal draw; False if none.

        The factor sum of all ``n K`` iterations is one draw of N(nK E[F], nK Var[F]) (clipped
        at 0, like a block's); time, straggler accounts and progress follow from it. The
        ``n`` checkpoints are then replayed at their interpolated progress and time
        (:meth:`replay_checkpoints`). The episode state must have been read at ``t``.
        """
        p, s = self.p, self.state
        in_episode = self.episodes.active(s.t)
        plan = self.plan_cycle_stretch(in_episode, self.transition_s())
        if plan is None:
            return False
        before_degradation_change = self.degradation.next_change_s < self.episodes.next_change_s(s.t)
        count = plan.cycles * p.checkpoint_every
        factor_sum = self.draw_factor_sum(count, plan.factor_mean, plan.factor_std)
        duration, compute_phase, transient, persistent = self.block_accounts(count, factor_sum, in_episode)
        # The kernel's arithmetic order (its end time is what later events compare with):
        # heavy, t + n (W + C) (the blocks hide behind the writes); else t + blocks + n C.
        if plan.heavy:
            t_end = s.t + plan.cycles * plan.fixed_s
        else:
            t_end = s.t + duration + plan.cycles * plan.fixed_s
        if t_end > self.horizon():
            s.stretches_dropped += 1  # the draw is spent; the cycles are walked
            return False
        # Heavy: each cycle waits W - block after its block, so the waits sum to n W - blocks.
        s.checkpoint_s += plan.cycles * plan.fixed_s - duration if plan.heavy else plan.cycles * plan.fixed_s
        s.executed += count
        s.busy_s += duration
        start = s.progress
        end = Progress(
            iterations=start.iterations + count,
            alive_s=start.alive_s + duration,
            transient_s=start.transient_s + transient,
            persistent_s=start.persistent_s + persistent,
            episode_phase_s=start.episode_phase_s + compute_phase if in_episode else start.episode_phase_s,
        )
        self.replay_checkpoints(plan, start, end, 0.0 if plan.heavy else duration, t_end)
        s.cycle_stretches += 1
        s.cycles_in_stretches += plan.cycles
        s.heavy_stretches += plan.heavy
        s.episode_cycle_stretches += in_episode
        s.stretches_before_episode_change += plan.before_episode_change
        s.stretches_before_degradation_change += plan.before_episode_change and before_degradation_change
        return True

    def replay_checkpoints(self, plan: CycleStretch, start: Progress, end: Progress, blocks_s: float, t_end: float):
        """The stretch's checkpoints one by one: after ``j`` of its ``n`` cycles the progress is
        ``j / n`` of the way from ``start`` to ``end`` and the stall ends at
        ``t0 + (j / n) blocks_s + j (stall + deterministic wait)``; the last one is ``end`` at ``t_end``.

        Each goes through the bookkeeping of a walked checkpoint after its stall (the writes
        finished by then settle, then :meth:`checkpoint_taken`): in the stretch's regime no
        cycle waits a random time, so these are the walked checkpoints' restore points,
        persists and counters.
        """
        s = self.state
        t0, n = s.t, plan.cycles
        for j in range(1, n + 1):
            if j < n:
                share = j / n
                # The kernel's interpolation (checkpoints._stretch_point), in its order.
                s.t = t0 + share * blocks_s + j * plan.fixed_s
                s.progress = interpolated_progress(start, end, share, start.iterations + j * plan.block_iterations)
            else:
                s.t, s.progress = t_end, end
            self.settle_writes()
            storage_writes = s.storage_writes
            self.checkpoint_taken()
            if self.p.strategy == IN_MEMORY:
                s.stretch_persists += s.storage_writes - storage_writes

    def plan_cycle_stretch(self, in_episode: bool, change_s: float) -> CycleStretch | None:
        """The stretch of whole cycles fast mode may take now, or None (then blocks are walked).

        Only from a checkpoint boundary and in a steady regime, where the cycles are iid:
        the write the next checkpoint waits for (W: none for sync, the storage write for
        async and gockpt, the replica for in_memory) is ``STRETCH_MARGIN_SD`` block standard
        deviations shorter than the mean block (no cycle waits), or as much longer with
        the previous write begun at ``t`` (every cycle lasts W + stall); in_memory also needs
        regular persists. ``n``: the most cycles that end that margin before the horizon, less
        a tail walked before it (so that every restore point a failure can reach is walked),
        before the next episode or degradation change less one mean block, and before the last
        checkpoint of the phase.
        """
        p, s = self.p, self.state
        every = p.checkpoint_every
        done = s.progress.iterations
        if s.next_checkpoint - done != every:
            return None  # not at a checkpoint boundary
        f_mean, f_std, min_block = self.block_law(in_episode)
        c, slowdown = self.phase.compute_s, self.slowdown()
        block_mean = every * (c * slowdown * f_mean + self.phase.comm_s)
        block_std = c * slowdown * math.sqrt(every) * f_std
        write_s = {SYNC: 0.0, ASYNC: p.checkpoint_write_s, IN_MEMORY: p.replicate_s}[p.strategy]
        previous = s.replication if p.strategy == IN_MEMORY else s.storage_write
        margin = STRETCH_MARGIN_SD
        if write_s <= block_mean - margin * block_std:
            heavy, fixed_s = False, p.checkpoint_stall_s
            cycle_mean, cycle_std = block_mean + p.checkpoint_stall_s, block_std
        elif write_s >= block_mean + margin * block_std and previous is not None and previous.ready_s == s.t + write_s:
            heavy, fixed_s = True, write_s + p.checkpoint_stall_s
            cycle_mean, cycle_std = fixed_s, 0.0
        else:
            return None  # a write about as long as a block: cycles wait at random
        if p.strategy == IN_MEMORY and not self.persists_regular(cycle_mean, cycle_std):
            return None
        tail = {SYNC: 0, ASYNC: 1, IN_MEMORY: 2 * p.persist_every}[p.strategy]
        cycles = cycles_within(self.horizon() - s.t, cycle_mean, cycle_std) - tail
        before_change = cycles
        if change_s < math.inf:  # no block of the stretch may reach the change
            before_change = cycles_within(change_s - s.t - block_mean, cycle_mean, cycle_std)
        last_checkpoint = (self.phase.end - done - 1) // every  # cycles whose checkpoint comes before the phase's end
        n = min(cycles, before_change, last_checkpoint)
        if n < 1 or n * every < min_block:
            return None
        return CycleStretch(n, every, f_mean, f_std, fixed_s, heavy, before_change < min(cycles, last_checkpoint))

    def persists_regular(self, cycle_mean: float, cycle_std: float) -> bool:
        """in_memory: every ``persist_every``-th snapshot of the stretch is persisted (none skipped).

        Each storage write ends the margin before the next persist is due, and a write
        in flight now ends it before the stretch's first persist.
        """
        p, s = self.p, self.state
        every = p.persist_every
        margin = STRETCH_MARGIN_SD
        if p.checkpoint_write_s > every * cycle_mean - margin * math.sqrt(every) * cycle_std:
            return False
        if s.storage_write is None:
            return True
        first = every - s.snapshots % every  # cycles to the stretch's first persist
        return s.storage_write.ready_s <= s.t + first * cycle_mean - margin * math.sqrt(first) * cycle_std

    # --- failure and recovery -------------------------------------------------

    def fail_and_recover(self, at_limit: bool = False) -> None:
        """A failure at ``t`` (or, ``at_limit``, the job part's time limit): roll back, then recover
        (restarted by every fail-stop failure during it).

        A hang or an instability while recovering is dropped: nothing runs that could hang or diverge.
        At the time limit the progress is saved (as a planned stop's), the job waits in the queue and
        restarts by full requeue, then loads from storage.
        """
        p, s = self.p, self.state
        self.settle_writes()
        s.storage_write = None  # writes in flight are lost
        s.replication = None
        s.lost_s += s.partial_s
        partial_s, s.partial_s = s.partial_s, 0.0
        from_memory = False
        spares_back_s = s.t
        first = True
        cause = FAIL_STOP
        detected_s = recovered_s = restarted_s = ready_s = s.t
        parts_s = 0.0  # the restart's parts: a requeue's if any incident of this recovery needs one
        abandoned = (math.inf, math.inf)  # the abandoned attempt under way: from, until
        staff = (math.inf, math.inf)  # the recovery's wait for a person: from, until
        queue_s = 0.0  # the wait in the queue before the parts (a requeue's)
        queued = released = (s.t, s.t)  # the queue wait and a crashed job's hold: from, until
        requeued = False  # a new job part begins at the restart
        load_s = 0.0
        take = True  # False: the time limit opened the recovery, no failure is taken
        if at_limit:
            s.durable = s.progress  # saved at the limit
            s.replica = None  # the job's snapshots end with it
            s.storage_writes += 1
            s.storage_loads += 1
            s.next_checkpoint = (s.progress.iterations // p.checkpoint_every + 1) * p.checkpoint_every
            s.time_limit_stops += 1
            requeued, take, first = True, False, False
            queue_s = self.draw_queue_s()
            parts_s, load_s = p.restart_s, p.load_s
            restarted_s = s.t + queue_s + parts_s
            recovered_s = restarted_s + load_s
            queued = (s.t, s.t + queue_s)
        while True:
            if take:
                c = self.failures.take_next()
                fc = self.classes[c]
                in_queue = queued[0] <= s.t < queued[1]  # the job holds no allocation: the pool's failure
                if not first and (fc.kind != FAIL_STOP or in_queue):
                    s.dropped_in_recovery += 1
                    s.failures_in_queue += 1 if in_queue else 0
                else:
                    s.failures += 1
                    s.failures_in_recovery += 0 if first else 1
                    s.failures_in_restart += 1 if restarted_s - parts_s < s.t < restarted_s else 0
                    s.failures_in_spare_wait += 1 if spares_back_s > s.t else 0
                    opening = first
                    if first:
                        from_memory = self.interrupt(fc, partial_s)
                        first = False
                    elif from_memory and not fc.memory_ok:
                        # This failure destroys the snapshot being restored: fall back to storage.
                        self.roll_back_to(s.durable)
                        from_memory = False
                        s.memory_recoveries -= 1
                        s.memory_fallbacks += 1
                    # A restore from memory leaves the restored snapshot replicated; one from storage leaves none.
                    s.replica = s.progress if from_memory else None
                    if self.spares is not None and fc.nodes_taken > 0:
                        repairs = [self.draw_repair_s(fc) for _ in range(fc.nodes_taken)]
                        spares_back_s = max(spares_back_s, self.spares.replace(s.t, repairs))
                    if from_memory:
                        load_s = p.load_memory_s
                        s.memory_loads += 1
                    else:
                        load_s = p.load_s
                        s.storage_loads += 1
                    # A fail-stop failure that opens the recovery may leave the job holding its allocation.
                    held = self.draw_release_s() if opening and fc.kind == FAIL_STOP else 0.0
                    released = (s.t, s.t + held)
                    # Detection (or the hold), the spare wait, the class's recovery, the queue, the parts, the load.
                    detected_new = s.t + held + (fc.detect_s if fc.kind == HANG else 0.0)
                    # The class's recovery begins once detected and the spares are there; a person first.
                    begin_s = max(detected_new, spares_back_s)
                    staff_s, own_s = self.draw_recovery_s(fc, begin_s)
                    ready_new = begin_s + staff_s + own_s
                    # A detected incident's own recovery (replacement, decision, a person's time) is not cut
                    # short by a failure during it: the later of the two sets the restart, and its cause.
                    # A crash of a hung job is detected at once; a crashed job held until released stays held.
                    if opening or (s.t < detected_s and cause == HANG) or ready_new >= ready_s:
                        cause, detected_s, ready_s = fc.kind, detected_new, ready_new
                        staff = (begin_s, begin_s + staff_s)
                    else:
                        s.recoveries_kept += 1
                    path_s, requeue = self.draw_restart_path(fc)
                    parts_s = max(parts_s, path_s)
                    if requeue:  # submitted again: a new wait in the queue
                        requeued = True
                        queue_s = self.draw_queue_s()
                    restarted_s = ready_s + queue_s + parts_s
                    recovered_s = restarted_s + load_s
                    queued = (ready_s, ready_s + queue_s)
                s.spare_waits += 1 if spares_back_s > s.t else 0
            take = True
            # The recovery runs until a failure strikes (the loop above takes it), the run's limits, or
            # its restart holds; a restart that fails again in its first steps is done again.
            while True:
                end = self.book_recovery_until(cause, detected_s, spares_back_s, restarted_s, recovered_s, parts_s,
                                               abandoned, staff, queued, released)  # fmt: skip
                if end >= p.max_wall_s or self.guard_reached():
                    break
                if end >= self.failures.next_time():
                    break
                lost_s = self.draw_abandoned_s()
                if lost_s is None:
                    break
                s.abandoned_restarts += 1
                cause, ready_s = FAIL_STOP, end + lost_s
                restarted_s = ready_s + parts_s
                recovered_s = restarted_s + load_s
                abandoned = (end, recovered_s)
            if end >= p.max_wall_s or self.guard_reached() or end < self.failures.next_time():
                break
        self.restart()
        # A requeue begins a new job part; after an in-place restart a limit that passed strikes at once.
        s.part_end = s.t + p.time_limit_s if requeued else max(s.part_end, s.t)

    def book_recovery_until(
        self, cause, detected_s, spares_back_s, restarted_s, recovered_s, parts_s, abandoned, staff, queued, released
    ):
        """The recovery from ``t`` to the next failure, its end or the wall limit, booked by part and cause;
        returns where it stopped (the new ``t``)."""
        p, s = self.p, self.state
        end = min(recovered_s, self.failures.next_time(), p.max_wall_s)
        s.staff_wait_s += max(0.0, min(staff[1], end) - max(s.t, staff[0]))
        s.spare_wait_s += max(0.0, min(spares_back_s, end) - max(s.t, detected_s))
        s.recovery_s += end - s.t
        s.restart_s += max(0.0, min(restarted_s, end) - max(s.t, restarted_s - parts_s))
        s.load_s += max(0.0, min(recovered_s, end) - max(s.t, restarted_s))  # the load follows the parts
        s.abandoned_s += max(0.0, min(abandoned[1], end) - max(s.t, abandoned[0]))
        s.queue_wait_s += max(0.0, min(queued[1], end) - max(s.t, queued[0]))
        s.release_wait_s += max(0.0, min(released[1], end) - max(s.t, released[0]))
        if cause == HANG:
            s.hang_s += end - s.t
            s.hang_detection_s += max(0.0, min(detected_s, end) - s.t)
        elif cause == INSTABILITY:
            s.instability_s += end - s.t
        elif cause == PLANNED:
            s.planned_s += end - s.t
        s.t = end
        return end

    def draw_restart_path(self, fc: FailureClass) -> tuple[float, bool]:
        """The restart's parts an incident of class ``fc`` needs and whether it is a requeue: a full requeue
        with probability ``requeue_share``, else in place (no re-scheduling); one uniform of the recovery
        stream, drawn only when both paths can happen and differ, in their parts or to the batch system (a
        queue, or time limits), after the incident's recovery draws."""
        p = self.p
        scheduled = p.queue_s > 0.0 or p.time_limit_s < math.inf
        if fc.requeue_share >= 1.0 or (p.restart_in_place_s == p.restart_s and not scheduled):
            return p.restart_s, True
        if fc.requeue_share > 0.0 and self.recovery_stream.uniform() < fc.requeue_share:
            return p.restart_s, True
        self.state.in_place_restarts += 1
        return p.restart_in_place_s, False

    def draw_lognormal_s(self, mean_s: float, sigma: float) -> float:
        """A time of mean ``mean_s``: fixed for sigma 0, else lognormal (one uniform of the recovery stream)."""
        if sigma == 0.0:
            return mean_s
        z = normal_quantile_acklam(self.recovery_stream.uniform())
        return mean_s * math.exp(sigma * z - sigma**2 / 2.0)

    def draw_queue_s(self) -> float:
        """One wait in the batch queue (mean ``queue_s``, lognormal of log-sd ``queue_sigma``); none: 0."""
        return 0.0 if self.p.queue_s == 0.0 else self.draw_lognormal_s(self.p.queue_s, self.p.queue_sigma)

    def draw_release_s(self) -> float:
        """A fail-stop failure's job is held with probability ``release_share`` (a uniform unless the share is
        0 or 1), for a time of mean ``release_s`` (lognormal of log-sd ``release_sigma``); else 0."""
        p = self.p
        if p.release_share == 0.0:
            return 0.0
        if p.release_share < 1.0 and self.recovery_stream.uniform() >= p.release_share:
            return 0.0
        self.state.released_jobs += 1
        return self.draw_lognormal_s(p.release_s, p.release_sigma)

    def draw_abandoned_s(self) -> float | None:
        """A finished restart fails again within its first steps with probability ``abandon_share``: the
        time it loses (mean ``abandon_s``, lognormal of log-sd ``abandon_sigma``), else None."""
        p, stream = self.p, self.recovery_stream
        if p.abandon_share == 0.0 or stream.uniform() >= p.abandon_share:
            return None
        if p.abandon_sigma == 0.0:
            return p.abandon_s
        z = normal_quantile_acklam(stream.uniform())
        return p.abandon_s * math.exp(p.abandon_sigma * z - p.abandon_sigma**2 / 2.0)

    def interrupt(self, fc: FailureClass, partial_s: float) -> bool:
        """The restore of the event that begins a recovery; whether it is from memory.

        An instability discards the last ``rollback_checkpoints`` storage checkpoints (K
        iterations apart, K * persist_every for in_memory) and restores from storage.
        """
        p, s = self.p, self.state
        if fc.kind == INSTABILITY:
            if fc.rollback_checkpoints > 0:
                s.durable = self.earlier_checkpoint(fc.rollback_checkpoints)
            from_memory = False
        elif fc.kind == PLANNED:  # saved before the stop
            s.durable = s.progress
            s.storage_writes += 1
            from_memory = False
        else:
            from_memory = p.strategy == IN_MEMORY and fc.memory_ok and s.replica is not None
        point = self.memory_restore_point() if from_memory else s.durable
        lost = partial_s + (s.progress.alive_s - point.alive_s)
        self.roll_back_to(point)
        if fc.kind == PLANNED:  # the checkpoints stay on their grid of multiples of K
            s.next_checkpoint = (point.iterations // p.checkpoint_every + 1) * p.checkpoint_every
        if from_memory:
            s.memory_recoveries += 1
        if fc.kind == HANG:
            s.hangs += 1
            s.hang_s += lost
        elif fc.kind == INSTABILITY:
            s.instabilities += 1
            s.instability_s += lost
        elif fc.kind == PLANNED:
            s.planned_stops += 1
            s.planned_s += lost
        return from_memory

    def earlier_checkpoint(self, checkpoints: int) -> Progress:
        """The storage checkpoint ``checkpoints`` before the last durable one (checkpoints sit on the
        multiples of ``step``; a planned stop's save, off them, counts as the next one; not before the
        start); its time accounts are the durable one's in proportion to the iterations."""
        p, s = self.p, self.state
        step = p.checkpoint_every * (p.persist_every if p.strategy == IN_MEMORY else 1)
        done = s.durable.iterations
        target = max(0, -(-done // step) * step - checkpoints * step)  # ceil(done / step) checkpoints, less n
        share = target / done if done > 0 else 0.0
        d = s.durable
        alive_s = d.alive_s * share
        if self.phase_table_given:
            # With phases the iterations' ideal times differ: the earlier point keeps its own ideal time
            # and the durable point's straggler excess in proportion to the iterations.
            alive_s = self.ideal_time_s(target) + share * (d.alive_s - self.ideal_time_s(done))
        return Progress(
            iterations=target,
            alive_s=alive_s,
            transient_s=d.transient_s * share,
            persistent_s=d.persistent_s * share,
            episode_phase_s=d.episode_phase_s * share,
        )

    def ideal_time_s(self, iterations: int) -> float:
        """The ideal time of the first ``iterations`` iterations: each its phase's compute + comm, s."""
        return sum(max(0, min(iterations, ph.end) - ph.start) * (ph.compute_s + ph.comm_s) for ph in self.phases)

    def draw_repair_s(self, fc: FailureClass) -> float:
        """One node's repair: ``repair_s``, or lognormal of that mean (log-sd ``repair_sigma``) drawn from
        the recovery stream, before the recovery's own draws."""
        if fc.repair_sigma == 0.0:
            return fc.repair_s
        sigma = fc.repair_sigma
        return fc.repair_s * math.exp(
            sigma * normal_quantile_acklam(self.recovery_stream.uniform()) - sigma * sigma / 2.0
        )

    def draw_recovery_s(self, fc: FailureClass, begin_s: float) -> tuple[float, float]:
        """The recovery from ``begin_s`` before the load: the wait for a person when it needs one
        (:meth:`draw_staff_wait_s`), and itself: lognormal of mean ``recovery_s`` (log-sd ``recovery_sigma``),
        and with probability ``manual_share`` a person's time, mean ``manual_s``, the same law."""
        stream = self.recovery_stream

        def lognormal_mean_one() -> float:
            sigma = fc.recovery_sigma
            return math.exp(sigma * normal_quantile_acklam(stream.uniform()) - sigma * sigma / 2.0)

        seconds = fc.recovery_s
        if fc.durations_s:  # one measured recovery, picked by one uniform
            seconds = fc.durations_s[min(int(stream.uniform() * len(fc.durations_s)), len(fc.durations_s) - 1)]
        if fc.recovery_sigma > 0.0:
            seconds *= lognormal_mean_one()
        if fc.manual_share > 0.0 and stream.uniform() < fc.manual_share:
            self.state.manual_recoveries += 1
            seconds += fc.manual_s * (lognormal_mean_one() if fc.recovery_sigma > 0.0 else 1.0)
            return self.draw_staff_wait_s(fc, begin_s), seconds
        return 0.0, seconds

    def draw_staff_wait_s(self, fc: FailureClass, t: float) -> float:
        """A person's wait from ``t``: nothing without a team; a 24/7 team's response; an office team's
        in working hours; out of hours the on-call response, or the time until the first working moment
        (:func:`first_staffed_s`) and then the response. A response of mean 0 draws nothing."""
        stream, s = self.recovery_stream, self.state

        def response_s() -> float:  # exponential, by inversion
            return -fc.staff_response_s * math.log(stream.uniform()) if fc.staff_response_s > 0.0 else 0.0

        if fc.staff_team == 0:
            return 0.0
        if fc.staff_team == 2:
            return response_s()
        staffed = first_staffed_s(fc, t)
        if staffed > t and fc.staff_on_call:
            s.staff_waits_on_call += 1
            sigma = fc.staff_on_call_sigma
            if sigma == 0.0:
                return fc.staff_on_call_s
            return fc.staff_on_call_s * math.exp(sigma * normal_quantile_acklam(stream.uniform()) - sigma**2 / 2.0)
        s.staff_waits += staffed > t or fc.staff_response_s > 0.0
        s.staff_waits_out_of_hours += staffed > t
        s.staff_waits_after_holiday += any(a < staffed <= b + 86400.0 for a, b in fc.staff_holidays) and staffed > t
        return (staffed - t) + response_s()

    def guard_reached(self) -> bool:
        """The failure guard: failures and the events dropped in recoveries together reach ``max_failures``."""
        s = self.state
        return s.failures + s.dropped_in_recovery >= self.p.max_failures

    def memory_restore_point(self) -> Progress:
        """The last replicated snapshot, or the durable checkpoint if that is newer."""
        s = self.state
        return s.durable if s.durable.iterations > s.replica.iterations else s.replica

    def roll_back_to(self, point: Progress) -> None:
        s = self.state
        s.rollbacks_across_phases += phase_at(self.phases, point.iterations).start < self.phase.start
        s.interpolated_restores += point.interpolated
        s.lost_s += s.progress.alive_s - point.alive_s
        s.progress = point
        s.next_checkpoint = point.iterations + self.p.checkpoint_every

    def restart(self) -> None:
        """Training resumes: a new job factor and a new attempt (no degradation); every episode ends."""
        self.state.job_factor = self.draw_job_factor()
        self.state.degradation_resets += self.degradation.factor > 1.0
        self.degradation.begin(self.state.t)
        self.episodes.restart(self.state.t)

    # --- the whole run --------------------------------------------------------

    def simulate(self) -> dict[str, float]:
        p, s = self.p, self.state
        completed = False
        while True:
            if s.progress.iterations >= p.iterations:
                completed = True
                break
            if s.t >= p.max_wall_s or self.guard_reached():
                break
            # What the coming training runs under: the phase of the progress (a rollback may have
            # restored an earlier one), the episodes, the degradation step.
            self.phase = phase_at(self.phases, s.progress.iterations)
            self.episodes.catch_up(s.t)
            self.degradation.read(s.t)
            if p.fast and self.advance_cycle_stretch():
                continue
            outcome = self.train_stretch()
            at_phase_end = s.progress.iterations == self.phase.end < p.iterations
            if outcome == "state changed":
                s.phase_ends_off_grid += at_phase_end
                continue
            if outcome == "reached":
                s.phase_ends_on_grid += at_phase_end
                if s.progress.iterations >= p.iterations or self.checkpoint():
                    continue
            # Interrupted: by the wall-clock limit (censored), the job part's time limit, or a failure.
            if s.t >= p.max_wall_s and self.failures.next_time() > s.t:
                break
            self.fail_and_recover(at_limit=s.t >= s.part_end and self.failures.next_time() > s.t)
        return self.outputs(completed)

    def outputs(self, completed: bool) -> dict[str, float]:
        s = self.state
        done = s.progress
        return {
            "wall_s": s.t,
            "failures": s.failures,
            "lost_s": s.lost_s,
            "checkpoint_s": s.checkpoint_s,
            "recovery_s": s.recovery_s,
            "straggler_s": done.transient_s + done.persistent_s,
            "completed": 1.0 if completed else 0.0,
            "iterations_done": done.iterations,
            "busy_s": s.busy_s,
            "checkpoints": s.checkpoints,
            "straggler_transient_s": done.transient_s,
            "straggler_persistent_s": done.persistent_s,
            "memory_recoveries": s.memory_recoveries,
            "spare_wait_s": s.spare_wait_s,
            "episode_phase_s": done.episode_phase_s,
            "storage_writes": s.storage_writes,
            "storage_loads": s.storage_loads,
            "memory_loads": s.memory_loads,
            "executed_iterations": s.executed,
            "hangs": s.hangs,
            "instabilities": s.instabilities,
            "hang_s": s.hang_s,
            "hang_detection_s": s.hang_detection_s,
            "instability_s": s.instability_s,
            "planned_stops": s.planned_stops,
            "planned_s": s.planned_s,
            "restart_s": s.restart_s,
            "load_s": s.load_s,
            "abandoned_s": s.abandoned_s,
            "staff_wait_s": s.staff_wait_s,
            "time_limit_stops": s.time_limit_stops,
            "queue_wait_s": s.queue_wait_s,
            "release_wait_s": s.release_wait_s,
        }


# The casts of FailureClass's scalar fields (by their annotations), each read from the FailureClasses
# array of its name; start and durations_s are read apart.
CASTS = {"int": int, "float": float, "bool": bool}


def first_staffed_s(fc: FailureClass, t: float) -> float:
    """The first time from ``t`` with the office team at work: the shifts of the working days, day by day
    from the week of ``t`` (local midnights at ``day 86400 - staff_offset_s`` from the Monday before the
    start), less the holidays (a time in one moves to its end)."""
    monday = math.floor((fc.staff_offset_s + t) / WEEK_S)  # weeks from the Monday before the start to t's
    for day in range(7 * monday, 7 * monday + 7 * 60):
        if not (fc.staff_days >> (day % 7)) & 1:
            continue
        midnight = day * 86400.0 - fc.staff_offset_s
        begin, end = midnight + fc.staff_begin_s, midnight + fc.staff_end_s
        moment = max(begin, t)
        moved = True
        while moved:  # out of every holiday that holds it
            moved = False
            for a, b in fc.staff_holidays:
                if a <= moment < b:
                    moment, moved = b, True
        if moment < end:
            return moment
    raise AssertionError("no working hour within 60 weeks")


WEEK_S = 7 * 86400.0


def failure_class_list(classes) -> list[FailureClass]:
    """Plain per-class records from the kernel's FailureClasses arrays."""
    starts = {START_NEW: "new", START_STATIONARY: "stationary", START_AGED: "aged"}
    return [
        FailureClass(
            **{f.name: CASTS[f.type](getattr(classes, f.name)[c]) for f in fields(FailureClass) if f.type in CASTS},
            start=starts[int(classes.start[c])],
            durations_s=tuple(float(d) for d in classes.durations_s[c, : int(classes.durations_count[c])]),
            staff_holidays=tuple(
                (float(a), float(b)) for a, b in classes.staff_holidays_s[c].reshape(-1, 2) if math.isfinite(a)
            ),
        )
        for c in range(len(classes.units))
    ]


def simulate_run(params, classes, seed: int, run: int, phases=None) -> list[float]:
    """One run; the outputs in the kernel's column order (:data:`OUTPUT_NAMES`).

    ``phases``: the phase table (rows: start iteration, compute s, comm s); None or no rows:
    one phase with ``params``' iteration times."""
    return simulate_run_traced(params, classes, seed, run, phases=phases)[0]


def simulate_run_traced(params, classes, seed: int, run: int, phases=None) -> tuple[list[float], RunState]:
    """:func:`simulate_run` and the run's final state (for coverage checks)."""
    sim = Run(params, failure_class_list(classes), seed, run, phases)
    out = sim.simulate()
    sim.state.bad_replacements = sim.failures.bad_replacements
    sim.state.degradation_capped = sim.degradation.capped
    return [float(out[name]) for name in OUTPUT_NAMES], sim.state
