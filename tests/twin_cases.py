"""The slow twin's cases: a covering grid of run-loop configurations, and the comparison of the
kernel's rows with the twin's (used by the exact and the fast twin tests)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import naive_run
import numpy as np
from builders import SMALL_SCENARIO, factor_fields, failure_classes, kernel_params

from mcsim.kernels import interface as mc
from mcsim.scenario.config import scenario_from_dict

RTOL = 1e-12
NODES, GPUS_PER_NODE = 8, 8


# Checkpoint strategies on 1 s iterations (0.9 s compute, 0.1 s exposed communication),
# a checkpoint every 20 iterations, 8 s storage load. gockpt is async with GoCkpt's short
# stall and a durability delay of an overlap window (3 iterations) plus the storage write.
# async's write (25 s) is longer than the interval: every checkpoint waits for the previous.
# in_memory replicates its snapshot in 2 s, persists every 3rd and loads from memory in 1 s.
MEMORY_TIER = dict(replicate_s=2.0, persist_every=3, load_memory_s=1.0)
STRATEGIES = {
    "sync": dict(strategy=mc.STRATEGY_SYNC, checkpoint_stall_s=8.0),
    "async": dict(strategy=mc.STRATEGY_ASYNC, checkpoint_stall_s=1.5, checkpoint_write_s=25.0),
    "gockpt": dict(strategy=mc.STRATEGY_ASYNC, checkpoint_stall_s=0.2, checkpoint_write_s=3 * 1.0 + 12.0),
    "in_memory": dict(strategy=mc.STRATEGY_IN_MEMORY, checkpoint_stall_s=0.5, checkpoint_write_s=30.0, **MEMORY_TIER),
}


def weibull(
    units: int,
    shape: float,
    mtbf_s: float,
    recovery_s: float,
    nodes_taken: int,
    memory_ok: int,
    repair_s: float,
    start: str = "new",
) -> tuple:
    """A failure class tuple for conftest.failure_classes; ``mtbf_s`` is one unit's MTBF.

    ``start``: "new", "stationary", or "aged" (every unit one MTBF old at t = 0).
    """
    scale_s = mtbf_s / math.gamma(1.0 + 1.0 / shape)
    return (units, shape, scale_s, recovery_s, nodes_taken, memory_ok, repair_s, mtbf_s if start == "aged" else start)


def gpu(
    shape: float, system_mtbf_s: float, recovery_s: float = 20.0, repair_s: float = 150.0, start: str = "new"
) -> tuple:
    """GPU scope: 64 units; a failure takes out its node, CPU memory survives."""
    units = NODES * GPUS_PER_NODE
    return weibull(units, shape, units * system_mtbf_s, recovery_s, 1, 1, repair_s, start)


def node(
    shape: float, system_mtbf_s: float, recovery_s: float = 30.0, repair_s: float = 150.0, start: str = "new"
) -> tuple:
    """Node scope, one node per domain: the snapshot's replica lives on the peer."""
    return weibull(NODES, shape, NODES * system_mtbf_s, recovery_s, 1, 1, repair_s, start)


def domain(
    shape: float, system_mtbf_s: float, recovery_s: float = 30.0, repair_s: float = 150.0, start: str = "new"
) -> tuple:
    """Node scope with domain_nodes = 2: 4 domains, each event takes a node and its peer."""
    return weibull(NODES // 2, shape, NODES // 2 * system_mtbf_s, recovery_s, 2, 0, repair_s, start)


def cluster(shape: float, mtbf_s: float, recovery_s: float = 40.0, start: str = "new") -> tuple:
    """Cluster scope: one unit, takes out no node."""
    return weibull(1, shape, mtbf_s, recovery_s, 0, 1, 0.0, start)


def kind(failure_class: tuple, **fields) -> tuple:
    """A failure class tuple with the fields of its kind and recovery law (conftest.KIND_DEFAULTS)."""
    return failure_class + (fields,)


def kinds_classes(rate: float = 1.0) -> list:
    """Every kind of interruption and a recovery law (docs/model.md §3 "Kinds of interruption"): GPU
    failures whose recoveries are lognormal, a third of them needing a person; hangs detected after
    25 s, their recoveries one of three measured ones; instabilities that roll back two storage
    checkpoints beyond the last; planned stops; 30 % of the GPUs put in after a failure are bad (fail
    after 40 s on average); GPU nodes' repairs are lognormal. ``rate`` scales the mean times (longer
    runs use larger ones)."""
    return [
        kind(
            gpu(0.7, 300.0 * rate),
            recovery_sigma=0.8,
            manual_share=0.3,
            manual_s=90.0,
            bad_share=0.3,
            bad_mean_s=40.0,
            repair_sigma=0.6,
        ),
        kind(
            cluster(1.0, 250.0 * rate, recovery_s=30.0),
            kind=mc.KIND_HANG,
            detect_s=25.0,
            durations_s=[10.0, 25.0, 90.0],
        ),
        kind(cluster(1.0, 350.0 * rate, recovery_s=20.0), kind=mc.KIND_INSTABILITY, rollback_checkpoints=2),
        kind(cluster(1.0, 300.0 * rate, recovery_s=50.0), kind=mc.KIND_PLANNED),
    ]


KIND_FEATURES = (
    "hang",
    "instability",
    "planned stop",
    "dropped in recovery",
    "failure in recovery",
    "manual recovery",
    "bad replacement",
)


EPISODES = dict(episode_rate_per_s=1 / 150.0, episode_mean_s=80.0, episode_slowdown=1.6)  # overlaps often


JOB = dict(job_sigma=0.15)
ABANDON = dict(abandon_share=0.25, abandon_s=15.0, abandon_sigma=0.5)  # restarts that fail again, often


@dataclass
class Case:
    name: str
    strategy: str
    classes: list
    overrides: dict = field(default_factory=dict)
    features: tuple = ()  # what the runs must go through (checked by test_grid_exercises_every_feature)
    phases: tuple = ()  # training phases: rows (start iteration, compute s, comm s); none: one phase


def _cases() -> list[Case]:
    cases = []
    for s in STRATEGIES:
        cases += [
            Case(f"{s}-scopes-shapes", s, [gpu(0.7, 300.0), node(1.0, 600.0), cluster(3.0, 500.0)], JOB, ("failure",)),
            Case(
                f"{s}-recovery-failures",
                s,
                [cluster(1.0, 60.0, recovery_s=45.0), gpu(0.7, 400.0)],
                EPISODES,
                ("failure in recovery", "episode"),
            ),
            # GPU nodes come back faster than domains: a GPU failure during a wait for a domain's
            # nodes needs a node that returns before the ones already awaited.
            Case(
                f"{s}-spares-domains",
                s,
                [gpu(1.0, 150.0, repair_s=40.0), domain(3.0, 300.0, repair_s=400.0)],
                dict(spare_nodes=1, **JOB),
                ("spare wait", "failure in spare wait", "failure"),
            ),
            Case(
                f"{s}-censored",
                s,
                [node(0.7, 120.0), cluster(1.0, 300.0)],
                dict(max_wall_s=420.0, spare_nodes=0, **EPISODES),
                ("censored", "spare wait", "episode"),
            ),
            Case(
                f"{s}-everything",
                s,
                [gpu(0.7, 400.0), node(3.0, 1000.0), domain(1.0, 500.0), cluster(1.0, 200.0, recovery_s=60.0)],
                dict(spare_nodes=2, max_wall_s=1100.0, **JOB, **EPISODES),
                ("failure in recovery", "spare wait", "episode"),
            ),
            # With a restart's parts (restart.from_parts): 12 s on every recovery.
            Case(
                f"{s}-kinds",
                s,
                kinds_classes(),
                dict(spare_nodes=1, restart_s=12.0, **JOB),
                (*KIND_FEATURES, "failure in restart", "recovery kept"),
            ),
        ]
    cases += [
        # Stragglers at scale (the quantile's upper-tail branch) and none at all (G = 1, sigma = 0).
        Case("sync-huge-G", "sync", [gpu(1.0, 200.0)], dict(n_ranks=2.0e6, sigma=0.03), ("failure",)),
        Case("async-no-stragglers", "async", [cluster(0.7, 150.0)], dict(n_ranks=1.0, sigma=0.0), ("failure",)),
        # The failure guard: censored after 3 failures.
        Case(
            "gockpt-failure-guard", "gockpt", [cluster(1.0, 80.0, recovery_s=50.0)], dict(max_failures=3), ("censored",)
        ),
        # Every snapshot persisted, replica slower than the storage write (storage newer than memory).
        Case(
            "in-memory-persist-all",
            "in_memory",
            [gpu(1.0, 100.0), domain(0.7, 200.0)],
            dict(persist_every=1, replicate_s=40.0, checkpoint_write_s=5.0),
            ("memory recovery",),
        ),
        # Storage slower than two snapshot intervals: persists are skipped while a write is in flight.
        Case(
            "in-memory-slow-storage",
            "in_memory",
            [gpu(1.0, 150.0), domain(1.0, 200.0)],
            dict(persist_every=2, checkpoint_write_s=70.0, **EPISODES),
            ("persist skipped", "episode"),
        ),
    ]
    # Start states (docs/model.md §4 "Failure processes"): the equilibrium residual life and a
    # fixed age, for infant mortality (k = 0.7) and wear-out (k = 3), every scope.
    for s, start in (("sync", "stationary"), ("in_memory", "stationary"), ("async", "aged"), ("gockpt", "aged")):
        cases.append(
            Case(
                f"{s}-{start}",
                s,
                [
                    gpu(0.7, 300.0, start=start),
                    node(3.0, 600.0, start=start),
                    domain(0.7, 900.0, start=start),
                    cluster(3.0, 500.0, start=start),
                    cluster(0.7, 700.0, recovery_s=30.0, start=start),
                ],
                dict(spare_nodes=2, max_wall_s=1500.0, **JOB),
                ("failure", "failure in recovery"),
            )
        )
    # Restart paths and abandoned restarts (docs/model.md §3): GPU failures requeue (12 s) in 40 % of
    # restarts, the others restart in place (3 s), node failures and hangs in place; a quarter of the
    # restarts fail again and lose a lognormal 15 s each before the restart is done again. Last, so that
    # the cases before keep their seeds.
    for s in STRATEGIES:
        cases.append(
            Case(
                f"{s}-restart-paths",
                s,
                [
                    kind(gpu(0.7, 300.0), requeue_share=0.4),
                    kind(node(1.0, 400.0), requeue_share=0.0),
                    kind(cluster(1.0, 250.0, recovery_s=30.0), kind=mc.KIND_HANG, detect_s=25.0, requeue_share=0.0),
                ],
                dict(spare_nodes=1, restart_s=12.0, restart_in_place_s=3.0, **ABANDON, **JOB),
                ("failure in restart", "in-place restart", "abandoned restart", "failure in recovery"),
            )  # fmt: skip
        )
    for c in cases:
        if c.strategy == "in_memory" and any(cl[5] == 1 for cl in c.classes):
            c.features += ("memory recovery",)
        if c.strategy == "in_memory" and any(cl[5] == 0 for cl in c.classes):
            c.features += ("memory fallback",)  # a domain failure during a memory restore
        if (c.strategy == "async" and "censored" not in c.name) or c.name == "in-memory-persist-all":
            c.features += ("write wait",)
    return cases


# Training phases and the throughput degradation (docs/model.md §4). Three phases of
# other iteration times on 400 iterations: the first ends off the checkpoint grid (130), the second on it
# (240, a multiple of the interval); checkpoints every 60 iterations (in_memory persists every 3rd),
# long against a phase, so that failures roll back across phase ends.
PHASES = ((0.0, 0.9, 0.1), (130.0, 1.5, 0.3), (240.0, 0.55, 0.05))


LONG_INTERVAL = dict(checkpoint_every=60)


# Compute stretched by 0.2 % a second of the attempt in 15 s steps (shorter than a checkpoint
# interval), up to 25 % (reached 120 s into an attempt); restarts reset it.
DEGRADATION = dict(degradation_per_s=0.002, degradation_step_s=15.0, degradation_max=0.25)


PHASE_FEATURES = ("phase end off grid", "phase end on grid", "rollback across phases")


DEGRADATION_FEATURES = ("degradation capped", "degradation reset")


def _phase_cases() -> list[Case]:
    cases = []
    for s in STRATEGIES:
        cases += [
            Case(
                f"{s}-phases",
                s,
                [gpu(0.7, 250.0), cluster(1.0, 300.0)],
                dict(**LONG_INTERVAL, **JOB),
                ("failure", *PHASE_FEATURES),
                PHASES,
            ),
            Case(
                f"{s}-degradation",
                s,
                [gpu(0.7, 300.0), node(1.0, 600.0)],
                dict(**DEGRADATION, **JOB, **EPISODES),
                ("failure", "episode", *DEGRADATION_FEATURES),
            ),
            # Both, with hangs, instabilities, planned stops and stragglers.
            Case(
                f"{s}-phases-degradation-kinds",
                s,
                kinds_classes(),
                dict(spare_nodes=1, restart_s=12.0, **LONG_INTERVAL, **DEGRADATION, **JOB),
                ("hang", "planned stop", "instability", *PHASE_FEATURES, *DEGRADATION_FEATURES),
                PHASES,
            ),
        ]
    return cases


PHASE_CASES = _phase_cases()


# Staffing (docs/model.md §3 "Staffing"): the run starts on a Friday at 16:50 local time, ten minutes
# before the office team goes home; Monday is a holiday. GPU failures need a person in 60 % of their
# recoveries (office, an exponential 20 s response in hours, nobody out of hours: the wait runs to
# Tuesday 9:00), node failures in half (office, on call out of hours: a lognormal 60 s), hangs always
# (a 24/7 team, 30 s). Failures go on during the long waits and restart the recovery.
FRIDAY_1650 = 4 * 86400.0 + 16 * 3600.0 + 50 * 60.0
HOLIDAY_MONDAY = ((7 * 86400.0 - FRIDAY_1650, 8 * 86400.0 - FRIDAY_1650),)
OFFICE = dict(staff_team=mc.STAFF_OFFICE, staff_offset_s=FRIDAY_1650, staff_holidays_s=HOLIDAY_MONDAY)
STAFFING_FEATURES = ("staff wait", "out of hours", "on call", "after holiday", "failure in recovery")


def staffing_classes(rate: float = 1.0) -> list:
    """The failure classes of the staffing cases (above); ``rate`` scales the mean times."""
    return [
        kind(gpu(0.7, 300.0 * rate), manual_share=0.6, manual_s=40.0, recovery_sigma=0.5, staff_response_s=20.0,
             **OFFICE),
        kind(node(1.0, 500.0 * rate), manual_share=0.5, manual_s=30.0, staff_on_call=1, staff_on_call_s=60.0,
             staff_on_call_sigma=0.5, **OFFICE),
        kind(cluster(1.0, 400.0 * rate, recovery_s=30.0), kind=mc.KIND_HANG, detect_s=25.0, manual_share=1.0,
             manual_s=10.0, staff_team=mc.STAFF_ALWAYS, staff_response_s=30.0),
    ]  # fmt: skip


STAFFING_CASES = [
    Case(f"{s}-staffing", s, staffing_classes(), dict(spare_nodes=1, restart_s=12.0, **JOB), STAFFING_FEATURES)
    for s in ("sync", "in_memory")
]


# The batch system (docs/model.md §3 "The batch system"): job parts of 90 s (several a run), a lognormal
# queue wait of mean 20 s after the limit and a requeue; GPU failures requeue in half their restarts, node
# failures restart in place (a limit that passes during their recovery strikes at once), hangs fall in
# queue waits and are dropped; half the fail-stop failures hold the job for a lognormal 15 s. One case a
# strategy, and a censored one.
SCHEDULER = dict(time_limit_s=90.0, queue_s=20.0, queue_sigma=0.6, release_share=0.5, release_s=15.0, release_sigma=0.5)
SCHEDULER_FEATURES = ("time-limit stop", "failure in queue", "released job", "in-place restart", "failure")


def _scheduler_cases() -> list[Case]:
    classes = [
        kind(gpu(0.7, 300.0), requeue_share=0.5),
        kind(node(1.0, 400.0), requeue_share=0.0),
        kind(cluster(1.0, 500.0, recovery_s=30.0), kind=mc.KIND_HANG, detect_s=25.0, requeue_share=0.0),
    ]
    paths = dict(spare_nodes=1, restart_s=12.0, restart_in_place_s=3.0)
    cases = [
        Case(f"{s}-scheduler", s, classes, dict(**paths, **SCHEDULER, **ABANDON, **JOB), SCHEDULER_FEATURES)
        for s in STRATEGIES
    ]
    cases.append(
        Case(
            "sync-scheduler-censored",
            "sync",
            classes[:1],
            dict(**paths, **SCHEDULER, max_wall_s=500.0),
            ("time-limit stop", "censored"),
        )
    )
    return cases


SCHEDULER_CASES = _scheduler_cases()
CASES = _cases() + PHASE_CASES + STAFFING_CASES + SCHEDULER_CASES  # appended: the seeds of the others stay


RUNS = 8


ITERATIONS = 400


def phase_table(case: Case) -> np.ndarray | None:
    """The case's phase table for the kernel and the twin (None: one phase)."""
    return np.array(case.phases, dtype=float) if case.phases else None


def phase_lengths(iterations: int, phases) -> list[float]:
    """The iterations in each phase of a table (rows: start, compute s, comm s)."""
    starts = [row[0] for row in phases] + [iterations]
    return [starts[i + 1] - starts[i] for i in range(len(phases))]


def set_mean_iteration_times(values: dict, phases) -> None:
    """With phases, RunParams' iteration times are their means over the iterations (as the Python side
    sets them; the kernel reads the table's rows)."""
    if phases:
        lengths = phase_lengths(values["iterations"], phases)
        values["compute_time_s"] = sum(n * r[1] for n, r in zip(lengths, phases, strict=True)) / sum(lengths)
        values["comm_time_s"] = sum(n * r[2] for n, r in zip(lengths, phases, strict=True)) / sum(lengths)


def ideal_s(params: mc.RunParams, phases=()) -> float:
    """The run's iterations' time without stragglers: each phase's length times its iteration time."""
    if not phases:
        return params.iterations * (params.compute_time_s + params.comm_time_s)
    lengths = phase_lengths(params.iterations, phases)
    return sum(n * (row[1] + row[2]) for n, row in zip(lengths, phases, strict=True))


def case_values(case: Case, iterations: int = ITERATIONS) -> dict:
    """RunParams' values of a case, for kernel_params: ``iterations`` 1 s iterations on 64 ranks (sigma 0.05), a
    checkpoint every 20, 8 s loads, the case's strategy, then its overrides; with phases, the mean iteration times."""
    values = dict(iterations=iterations, n_ranks=float(NODES * GPUS_PER_NODE), sigma=0.05, checkpoint_every=20)
    values.update(load_s=8.0, **STRATEGIES[case.strategy])
    values.update(case.overrides)
    set_mean_iteration_times(values, case.phases)
    return values


def case_params(case: Case, fast: bool) -> mc.RunParams:
    values = case_values(case)
    if fast:
        # A small threshold (not the W1 one): blocks at once, cut at episode changes, and short exact ones.
        values.update(fast=True, **factor_fields(values, min_block=4, min_block_episode=4))
    return kernel_params(**values)


def assert_twin_matches(
    params: mc.RunParams, classes, seed: int, runs: int, first_run: int = 0, phases: np.ndarray | None = None
) -> list:
    """Kernel rows == twin rows for runs ``first_run ..``, column by column; returns the twin's final states.

    ``phases``: the phase table (rows ``(start iteration, compute s, comm s)``; None: one phase)."""
    fc = failure_classes(classes) if isinstance(classes, list) else classes
    kernel = np.zeros((runs, mc.N_OUT))
    table = mc.no_phases() if phases is None else np.asarray(phases, dtype=float)
    mc.simulate_runs(params, fc, table, seed, first_run, kernel)
    extra = {} if phases is None else {"phases": table}
    traced = [naive_run.simulate_run_traced(params, fc, seed, first_run + r, **extra) for r in range(runs)]
    twin = np.array([row for row, _ in traced])
    bad = []
    for name in naive_run.OUTPUT_NAMES:
        col = _column(name)
        k, t = kernel[:, col], twin[:, col]
        off = ~np.isclose(k, t, rtol=RTOL, atol=0.0)
        if off.any():
            r = int(np.argmax(off))
            bad.append(f"{name}: run {r} kernel {k[r]!r} twin {t[r]!r}")
    assert not bad, "kernel and twin differ:\n" + "\n".join(bad)
    return [state for _, state in traced]


def _column(name: str) -> int:
    """The kernel's OUT_* index of a twin output name."""
    return getattr(mc, KERNEL_COLUMNS[name])


KERNEL_COLUMNS = {
    "wall_s": "OUT_WALL_S",
    "failures": "OUT_FAILURES",
    "lost_s": "OUT_LOST_S",
    "checkpoint_s": "OUT_CHECKPOINT_S",
    "recovery_s": "OUT_RECOVERY_S",
    "straggler_s": "OUT_STRAGGLER_S",
    "completed": "OUT_COMPLETED",
    "iterations_done": "OUT_ITERATIONS_DONE",
    "busy_s": "OUT_BUSY_S",
    "checkpoints": "OUT_CHECKPOINTS",
    "straggler_transient_s": "OUT_STRAGGLER_TRANSIENT_S",
    "straggler_persistent_s": "OUT_STRAGGLER_PERSISTENT_S",
    "memory_recoveries": "OUT_MEMORY_RECOVERIES",
    "spare_wait_s": "OUT_SPARE_WAIT_S",
    "episode_phase_s": "OUT_EPISODE_PHASE_S",
    "storage_writes": "OUT_STORAGE_WRITES",
    "storage_loads": "OUT_STORAGE_LOADS",
    "memory_loads": "OUT_MEMORY_LOADS",
    "executed_iterations": "OUT_EXECUTED_ITERATIONS",
    "hangs": "OUT_HANGS",
    "instabilities": "OUT_INSTABILITIES",
    "hang_s": "OUT_HANG_S",
    "hang_detection_s": "OUT_HANG_DETECTION_S",
    "instability_s": "OUT_INSTABILITY_S",
    "planned_stops": "OUT_PLANNED_STOPS",
    "planned_s": "OUT_PLANNED_S",
    "restart_s": "OUT_RESTART_S",
    "load_s": "OUT_LOAD_S",
    "abandoned_s": "OUT_ABANDONED_S",
    "staff_wait_s": "OUT_STAFF_WAIT_S",
    "time_limit_stops": "OUT_TIME_LIMIT_STOPS",
    "queue_wait_s": "OUT_QUEUE_WAIT_S",
    "release_wait_s": "OUT_RELEASE_WAIT_S",
}


def features_seen(states, outputs) -> set:
    """The features of :class:`Case` that the twin's final ``states`` (and output rows) went through."""
    seen = set()
    for state, row in zip(states, outputs, strict=False):
        if state.failures:
            seen.add("failure")
        if state.failures_in_recovery:
            seen.add("failure in recovery")
        if state.failures_in_restart:
            seen.add("failure in restart")
        if state.bad_replacements:
            seen.add("bad replacement")
        if state.spare_waits:
            seen.add("spare wait")
        if state.memory_recoveries:
            seen.add("memory recovery")
        if state.memory_fallbacks:
            seen.add("memory fallback")
        if row[mc.OUT_COMPLETED] == 0.0:
            seen.add("censored")
        if state.persists_skipped:
            seen.add("persist skipped")
        if state.failures_in_spare_wait:
            seen.add("failure in spare wait")
        if state.recoveries_kept:
            seen.add("recovery kept")
        if state.write_waits:
            seen.add("write wait")
        if state.episode_stretches:
            seen.add("episode")
        if state.hangs:
            seen.add("hang")
        if state.instabilities:
            seen.add("instability")
        if state.dropped_in_recovery:
            seen.add("dropped in recovery")
        if state.manual_recoveries:
            seen.add("manual recovery")
        if state.planned_stops:
            seen.add("planned stop")
        if state.kept_at_planned_stop:
            seen.add("kept at planned stop")
        if state.phase_ends_off_grid:
            seen.add("phase end off grid")
        if state.phase_ends_on_grid:
            seen.add("phase end on grid")
        if state.rollbacks_across_phases:
            seen.add("rollback across phases")
        if state.degradation_capped:
            seen.add("degradation capped")
        if state.degradation_resets:
            seen.add("degradation reset")
        if state.abandoned_restarts:
            seen.add("abandoned restart")
        if state.in_place_restarts:
            seen.add("in-place restart")
        for feature, count in (
            ("staff wait", state.staff_waits),
            ("out of hours", state.staff_waits_out_of_hours),
            ("on call", state.staff_waits_on_call),
            ("after holiday", state.staff_waits_after_holiday),
        ):
            if count:
                seen.add(feature)
        if state.time_limit_stops:
            seen.add("time-limit stop")
        if state.failures_in_queue:
            seen.add("failure in queue")
        if state.released_jobs:
            seen.add("released job")
        if state.kept_at_limit:
            seen.add("kept at limit")
    return seen


def _scenario_config(strategy: str):
    raw = {
        k: (dict(v) if isinstance(v, dict) else [dict(x) for x in v] if isinstance(v, list) else v)
        for k, v in SMALL_SCENARIO.items()
    }
    raw["model"]["tokens"] = 4e8  # ~380 iterations of 0.93 s
    raw["hardware"]["spare_nodes"] = 1
    raw["stragglers"] = {
        "sigma": 0.05,
        "job_sigma": 0.1,
        "episode_rate_per_node_day": 10.0,
        "episode_hours": 0.02,
        "episode_slowdown": 1.5,
    }
    raw["failures"] = [
        {
            "name": "gpu",
            "scope": "gpu",
            "shape": 0.7,
            "mtbf_hours": 64 * 0.05,
            "recovery_minutes": 0.5,
            "repair_hours": 0.05,
        },
        {
            "name": "rack",
            "scope": "node",
            "domain_nodes": 2,
            "shape": 3.0,
            "mtbf_hours": 4 * 0.1,
            "recovery_minutes": 1.0,
            "repair_hours": 0.1,
        },
        {"name": "fabric", "scope": "cluster", "shape": 1.0, "mtbf_hours": 0.03, "recovery_minutes": 1.5},
    ]
    raw["checkpoint"] = {
        "strategy": strategy,
        "interval": {"iterations": 25},
        "write_gbps_per_node": 0.5,
        "in_memory_persist_every": 2,
    }
    raw["run"] = dict(raw["run"], max_wall_days=0.012)
    return scenario_from_dict(raw).base
