"""The fast-mode twin's cases: a grid of run-loop configurations for fast mode's blocks and stretches, their
kernel parameters and the features their runs go through (used by the fast twin and the plain-Python tests)."""

from __future__ import annotations

import naive_run
from builders import factor_fields, failure_classes, kernel_params, short_block_fields
from twin_cases import (
    ABANDON,
    DEGRADATION_FEATURES,
    JOB,
    KIND_FEATURES,
    PHASE_FEATURES,
    SCHEDULER,
    STRATEGIES,
    Case,
    case_values,
    cluster,
    domain,
    features_seen,
    gpu,
    kind,
    kinds_classes,
    node,
    phase_table,
    staffing_classes,
)

from mcsim.kernels import interface as mc

# Small thresholds (not the W1 ones), different in and out of episodes: the block and
# the stretch paths both occur, and blocks cut below the threshold are drawn one by one.
MIN_BLOCK, MIN_BLOCK_EPISODE = 4, 6

# Episodes rarer and longer than test_twin's: a stretch needs several checkpoints between changes.
EPISODES = dict(episode_rate_per_s=1 / 1200.0, episode_mean_s=300.0, episode_slowdown=1.6)


ITERATIONS = 3000  # about 150 checkpoints: several failures per run, dozens of checkpoints between them


RUNS = 8


def _per_strategy_cases(s: str) -> list[Case]:
    """The cases every checkpoint strategy meets."""
    return [
        Case(
            f"{s}-long",
            s,
            [gpu(0.7, 1500.0), node(1.0, 3000.0), cluster(3.0, 2500.0)],
            JOB,
            ("stretch", "failure", "failure in recovery", "block at once"),
        ),
        Case(
            f"{s}-episodes",
            s,
            [cluster(1.0, 900.0, recovery_s=45.0), gpu(0.7, 1800.0)],
            EPISODES,
            ("stretch", "stretch in episode", "stretch before episode change", "block iterated", "episode"),
        ),
        Case(
            f"{s}-spares-domains",
            s,
            [gpu(1.0, 900.0, repair_s=40.0), domain(3.0, 1500.0, repair_s=400.0)],
            dict(spare_nodes=1, **JOB),
            ("stretch", "spare wait", "failure"),
        ),
        Case(
            f"{s}-stationary-censored",
            s,
            [
                gpu(0.7, 1500.0, start="stationary"),
                node(3.0, 2000.0, start="stationary"),
                domain(0.7, 3000.0, start="stationary"),
            ],
            dict(spare_nodes=2, max_wall_s=2500.0, **JOB, **EPISODES),
            ("stretch", "censored", "failure"),
        ),
        # Checkpoints every 3 iterations, below the threshold of 4: walked blocks are drawn one
        # iteration at a time; stretches of several intervals at once (in_memory persisting
        # every 12th snapshot, so that its storage write keeps up).
        Case(
            f"{s}-short-interval",
            s,
            [gpu(1.0, 1000.0)],
            dict(
                checkpoint_every=3, iterations=1500, **EPISODES, **(dict(persist_every=12) if s == "in_memory" else {})
            ),
            ("stretch", "block iterated", "stretch in episode"),
        ),
        # Hangs, instabilities rolling back beyond stretches' checkpoints, recovery laws.
        Case(
            f"{s}-kinds",
            s,
            kinds_classes(rate=5.0),
            dict(spare_nodes=1, restart_s=12.0, **JOB),
            ("stretch", "kept at planned stop", *KIND_FEATURES),
        ),
    ]


# Training phases (docs/model.md §4): the first ends off the checkpoint grid, the second on it; a
# checkpoint every 100 iterations, so that failures roll back across phase ends and stretches
# end within a phase.
FAST_PHASES = ((0.0, 0.9, 0.1), (1070.0, 1.4, 0.25), (2000.0, 0.6, 0.05))


# Throughput degradation in steps shorter than a checkpoint interval, its cap reached 120 s into an
# attempt (stretches only then) ...
SHORT_STEPS = dict(degradation_per_s=0.002, degradation_step_s=15.0, degradation_max=0.25)


# ... and in steps of several checkpoint intervals (50 iterations), capped 600 s in: stretches end
# before a step.
LONG_STEPS = dict(degradation_per_s=0.0005, degradation_step_s=200.0, degradation_max=0.3)


def _phase_degradation_cases(s: str) -> list[Case]:
    """Training phases and the throughput degradation, for every checkpoint strategy."""
    return [
        Case(
            f"{s}-phases",
            s,
            [gpu(0.7, 1000.0), node(1.0, 2000.0), cluster(3.0, 1500.0)],
            dict(checkpoint_every=100, **JOB),
            ("stretch", "failure", *PHASE_FEATURES),
            FAST_PHASES,
        ),
        Case(
            f"{s}-degradation",
            s,
            [gpu(0.7, 1500.0), node(1.0, 3000.0)],
            dict(**SHORT_STEPS, **JOB, **EPISODES),
            ("stretch", "block at once", "episode", *DEGRADATION_FEATURES),
        ),
        # Both, with hangs, instabilities, planned stops (keeping a share of the block they cut).
        Case(
            f"{s}-phases-degradation-kinds",
            s,
            kinds_classes(rate=15.0),
            dict(spare_nodes=1, restart_s=12.0, checkpoint_every=50, **LONG_STEPS, **JOB),
            (
                "stretch",
                "stretch before degradation change",
                "kept at planned stop",
                "hang",
                "planned stop",
                *PHASE_FEATURES,
                *DEGRADATION_FEATURES,
            ),
            FAST_PHASES,
        ),
    ]


def _fast_cases() -> list[Case]:
    cases = [c for s in STRATEGIES for c in _per_strategy_cases(s)]
    cases += [
        # Block ~22.3 s: a write as long gives random waits, so cycles are walked (blocks at once).
        Case("async-write-as-block", "async", [gpu(1.0, 1500.0)], dict(checkpoint_write_s=22.3), ("write wait",)),
        # Storage slower than persist_every cycles: persists skipped, cycles walked.
        Case(
            "in-memory-slow-storage",
            "in_memory",
            [gpu(1.0, 1500.0), domain(1.0, 3000.0)],
            dict(persist_every=2, checkpoint_write_s=70.0),
            ("persist skipped", "memory recovery"),
        ),
        # Replica slower than a block: every cycle waits for it (the heavy regime of in_memory).
        Case(
            "in-memory-heavy-replica",
            "in_memory",
            [gpu(1.0, 1500.0), domain(1.0, 3000.0)],
            dict(replicate_s=30.0, checkpoint_write_s=50.0, persist_every=2),
            ("stretch", "write wait"),
        ),
        Case(
            "in-memory-persist-all",
            "in_memory",
            [gpu(1.0, 1000.0), domain(0.7, 2000.0)],
            dict(persist_every=1, replicate_s=1.0, checkpoint_write_s=5.0, **EPISODES),
            ("stretch", "stretch in episode"),
        ),
        Case(
            "gockpt-failure-guard",
            "gockpt",
            [cluster(1.0, 600.0, recovery_s=50.0)],
            dict(max_failures=3),
            ("stretch", "censored"),
        ),
        Case("sync-huge-G", "sync", [gpu(1.0, 1500.0)], dict(n_ranks=2.0e6, sigma=0.03), ("stretch", "failure")),
        # A stretch's tail of 2 x 6 cycles, sized before an episode began, is slowed by it
        # (slowdown 2.5): a domain failure strikes before the tail's persist is durable and
        # restores a point inside the stretch (docs/model.md says none does; run 3).
        Case(
            "in-memory-tail-in-episode",
            "in_memory",
            [domain(1.0, 700.0)],
            dict(
                persist_every=6,
                checkpoint_write_s=120.0,
                episode_rate_per_s=1 / 400.0,
                episode_mean_s=150.0,
                episode_slowdown=2.5,
            ),
            ("stretch", "restore inside a stretch"),
        ),
    ]
    cases += [c for s in STRATEGIES for c in _phase_degradation_cases(s)]  # appended: the seeds stay
    # Checkpoints every 3 iterations with the short-block law (docs/model.md §4 "Short blocks"):
    # walked cycles are drawn a block at a time from its polynomial, except during episodes.
    cases += [
        Case(
            f"{s}-short-law",
            s,
            [gpu(1.0, 1000.0), node(1.0, 2500.0)],
            dict(
                checkpoint_every=3,
                iterations=1500,
                short_law=True,
                **EPISODES,
                **JOB,
                **(dict(persist_every=12) if s == "in_memory" else {}),
            ),
            ("stretch", "short block", "block iterated", "failure"),
        )
        for s in STRATEGIES
    ]
    # Restart paths and abandoned restarts between stretches (docs/model.md §3), appended: the seeds stay.
    cases += [
        Case(
            f"{s}-restart-paths",
            s,
            [kind(gpu(0.7, 1500.0), requeue_share=0.4), kind(node(1.0, 2000.0), requeue_share=0.0)],
            dict(spare_nodes=1, restart_s=12.0, restart_in_place_s=3.0, **ABANDON, **JOB),
            ("stretch", "in-place restart", "abandoned restart"),
        )
        for s in STRATEGIES
    ]
    # Staffing: waits for a person over a weekend and a holiday between stretches (appended: the seeds stay).
    cases += [
        Case(f"{s}-staffing", s, staffing_classes(5.0), dict(spare_nodes=1, restart_s=12.0, **JOB),
             ("stretch", "staff wait", "out of hours", "on call"))
        for s in ("sync", "async")
    ]  # fmt: skip
    # The batch system between stretches (docs/model.md §3 "The batch system"): job parts of 600 s, stretches
    # kept off the limit, fast blocks it cuts keeping their whole iterations; appended: the seeds stay.
    cases += [
        Case(
            f"{s}-scheduler",
            s,
            [kind(gpu(0.7, 1500.0), requeue_share=0.5), kind(node(1.0, 2000.0), requeue_share=0.0)],
            dict(spare_nodes=1, restart_s=12.0, restart_in_place_s=3.0, **{**SCHEDULER, "time_limit_s": 600.0}, **JOB),
            ("stretch", "time-limit stop", "kept at limit", "released job"),
        )
        for s in STRATEGIES
    ]
    for c in cases:
        if c.strategy == "in_memory" and "stretch" in c.features:
            c.features += ("stretch persist",)
        if c.strategy == "in_memory" and any(cl[5] == 1 for cl in c.classes):
            c.features += ("memory recovery",)
        if c.strategy == "async" and c.name in ("async-long", "async-episodes", "async-spares-domains"):
            c.features += ("heavy stretch",)  # a 25 s write: longer than a block, every cycle waits
    return cases


FAST_CASES = _fast_cases()


def fast_case_params(case: Case) -> mc.RunParams:
    """Kernel parameters of a fast-mode case: 1 s iterations on 64 ranks, a checkpoint every 20."""
    values = case_values(case, ITERATIONS)
    if values.pop("short_law", False):
        short = short_block_fields(values)
        assert short
        values.update(short)
    values.update(fast=True, **factor_fields(values, MIN_BLOCK, MIN_BLOCK_EPISODE))
    return kernel_params(**values)


def _seed(case: Case) -> int:
    return 2000 + FAST_CASES.index(case)


def _twin_runs(case: Case) -> list[tuple[list[float], naive_run.RunState]]:
    """The twin's output rows and final states of the case's runs."""
    params, fc = fast_case_params(case), failure_classes(case.classes)
    return [naive_run.simulate_run_traced(params, fc, _seed(case), r, phases=phase_table(case)) for r in range(RUNS)]


def fast_features_seen(states, outputs) -> set:
    """:func:`test_twin.features_seen` and fast mode's own paths."""
    seen = features_seen(states, outputs)
    counters = {
        "stretch": "cycle_stretches",
        "heavy stretch": "heavy_stretches",
        "stretch in episode": "episode_cycle_stretches",
        "stretch before episode change": "stretches_before_episode_change",
        "stretch persist": "stretch_persists",
        "block at once": "blocks_at_once",
        "block iterated": "blocks_iterated",
        "short block": "short_blocks",
        "restore inside a stretch": "interpolated_restores",
        "stretch before degradation change": "stretches_before_degradation_change",
    }
    for feature, counter in counters.items():
        if any(getattr(state, counter) for state in states):
            seen.add(feature)
    return seen
