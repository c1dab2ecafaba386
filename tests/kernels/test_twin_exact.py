"""The kernel against its slow twin (tests/naive_run.py), run for run, every output column.

The twin follows docs/model.md §3-§4 in plain Python and draws from the same
random streams (§6), so each run of the kernel must give the same outputs:
equal to 1e-12 relative (counts exactly). The grid is a covering design, not
the Cartesian product: each checkpoint strategy (sync, async, gockpt,
in_memory) meets every feature (failure scopes gpu / node / cluster / domain of
2 nodes, Weibull shapes 0.7 / 1 / 3, failures during recovery, spares and
repair, job factor, slow-node episodes, censoring at the wall-clock limit) in at
least one scenario, and :func:`test_grid_exercises_every_feature` checks that
the runs really go through them. Exact mode here; fast mode (blocks and whole
stretches of checkpoint cycles drawn at once, docs/model.md §4 "Execution modes")
is compared with the same twin on its own grid in tests/kernels/test_twin_fast.py, and
with exact mode in distribution in tests/kernels/test_fast_stretches.py.
"""

from __future__ import annotations

import naive
import naive_run
import numpy as np
import pytest
from builders import failure_classes
from twin_cases import (
    CASES,
    PHASE_CASES,
    RTOL,
    RUNS,
    _column,
    _scenario_config,
    assert_twin_matches,
    case_params,
    features_seen,
    ideal_s,
    phase_table,
)

from mcsim.kernels import interface as mc
from mcsim.model.checkpointing import checkpoint_plan
from mcsim.model.preparation import run_params
from mcsim.model.workload import workload


def test_twin_columns_are_the_kernels():
    # Every kernel column has one twin output at the same position.
    assert len(naive_run.OUTPUT_NAMES) == mc.N_OUT
    assert [_column(name) for name in naive_run.OUTPUT_NAMES] == list(range(mc.N_OUT))


def test_twin_stream_is_the_reference_generator():
    stream = naive_run.Stream(123, 45, 6)
    assert [stream.next_u64() for _ in range(20)] == naive.xoshiro256ss(naive.seed_state(123, 45, 6), 20)


@pytest.mark.parametrize("fast", [False], ids=["exact"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_equals_twin(case, fast):
    assert_twin_matches(
        case_params(case, fast), case.classes, seed=1000 + CASES.index(case), runs=RUNS, phases=phase_table(case)
    )


@pytest.mark.parametrize("case", PHASE_CASES, ids=[c.name for c in PHASE_CASES])
def test_kernel_equals_twin_fast_phases_degradation(case):
    # Fast mode (blocks at once, cut at episode and degradation changes and at phase ends; the
    # block threshold 4) on the phase and degradation cases; their long-run stretches are in
    # tests/kernels/test_twin_fast.py.
    states = assert_twin_matches(
        case_params(case, True), case.classes, seed=1000 + CASES.index(case), runs=RUNS, phases=phase_table(case)
    )
    assert sum(s.blocks_at_once for s in states) > 0
    if case.overrides.get("degradation_per_s", 0.0) > 0.0:
        assert sum(s.blocks_cut for s in states) > 0  # at the expected iterations before a step


def test_phase_iteration_times_come_from_the_table():
    # With a phase table the kernel ignores RunParams' iteration times (they hold the means), as the
    # twin does: other values give the same runs.
    case = next(c for c in PHASE_CASES if c.name == "sync-phases-degradation-kinds")
    fc = failure_classes(case.classes)
    for fast in (False, True):
        params = case_params(case, fast)
        out, other = np.zeros((RUNS, mc.N_OUT)), np.zeros((RUNS, mc.N_OUT))
        mc.simulate_runs(params, fc, phase_table(case), 5, 0, out)
        mc.simulate_runs(params._replace(compute_time_s=7.0, comm_time_s=3.0), fc, phase_table(case), 5, 0, other)
        np.testing.assert_array_equal(out, other)


def test_padded_phase_rows_are_never_reached():
    # Tables padded as mc.phases_table pads them (rows at start +inf) run as the table itself, in both.
    case = next(c for c in PHASE_CASES if c.name == "async-phases-degradation-kinds")
    fc = failure_classes(case.classes)
    padded = mc.phases_table([phase_table(case), np.zeros((len(case.phases) + 2, mc.N_PH))])[0]
    assert len(padded) == len(case.phases) + 2 and np.isinf(padded[-1, mc.PH_START])
    for fast in (False, True):
        params = case_params(case, fast)
        out, padded_out = np.zeros((RUNS, mc.N_OUT)), np.zeros((RUNS, mc.N_OUT))
        mc.simulate_runs(params, fc, phase_table(case), 11, 0, out)
        mc.simulate_runs(params, fc, padded, 11, 0, padded_out)
        np.testing.assert_array_equal(out, padded_out)
        for r in range(2):
            np.testing.assert_allclose(
                naive_run.simulate_run(params, fc, 11, r, phases=padded), out[r], rtol=RTOL, atol=0
            )


def test_one_phase_table_is_no_table():
    # A table of one row with RunParams' iteration times is the run without a table, in both (to
    # rounding: an instability's earlier checkpoint is then computed as ideal time + straggler share).
    case = next(c for c in CASES if c.name == "gockpt-kinds")
    fc = failure_classes(case.classes)
    for fast in (False, True):
        params = case_params(case, fast)
        table = np.array([[0.0, params.compute_time_s, params.comm_time_s]])
        plain, one = np.zeros((RUNS, mc.N_OUT)), np.zeros((RUNS, mc.N_OUT))
        mc.simulate_runs(params, fc, mc.no_phases(), 9, 0, plain)
        mc.simulate_runs(params, fc, table, 9, 0, one)
        np.testing.assert_allclose(one, plain, rtol=1e-12, atol=1e-9)
        for r in range(3):
            np.testing.assert_allclose(
                naive_run.simulate_run(params, fc, 9, r, phases=table),
                naive_run.simulate_run(params, fc, 9, r),
                rtol=1e-12,
                atol=1e-9,
            )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grid_exercises_every_feature(case):
    # A comparison proves little on paths the runs never take: each case's runs must go
    # through the features it stands for (exact mode, the same seeds as above).
    params = case_params(case, fast=False)
    fc = failure_classes(case.classes)
    seed = 1000 + CASES.index(case)
    runs = [naive_run.simulate_run_traced(params, fc, seed, r, phases=phase_table(case)) for r in range(RUNS)]
    seen = features_seen([s for _, s in runs], [row for row, _ in runs])
    assert set(case.features) <= seen, f"missing {set(case.features) - seen}"


# --- Configurations built from scenario tables (checkpoint_plan + run_params) -----------------


@pytest.mark.parametrize("mode", ["exact", "fast"])
@pytest.mark.parametrize("strategy", ["sync", "async", "gockpt", "in_memory"])
def test_kernel_equals_twin_on_scenario_configurations(strategy, mode):
    # The kernel's parameters as `mcsim run` derives them (fast mode with its W1 block threshold),
    # runs 40 .. 47 of a chunk that does not start at run 0.
    cfg = _scenario_config(strategy)
    wl = workload(cfg)
    plan = checkpoint_plan(cfg, wl)
    params = run_params(cfg, wl, plan, mode)
    states = assert_twin_matches(params, plan.classes, seed=77, runs=RUNS, first_run=40)
    assert sum(s.failures for s in states) > 0


def test_twin_time_accounts_add_up():
    # The twin against docs/model.md §4 "Time bookkeeping", independently of the kernel: for a
    # completed run wall = I (compute + comm) + straggler + lost + checkpoint + recovery, and the
    # GPUs computed the surviving iterations plus the rolled-back time; one load per recovery attempt
    # (and per stop at the job part's time limit); the waits within the recovery.
    completed = 0
    for case in CASES:
        params = case_params(case, fast=False)
        fc = failure_classes(case.classes)
        for r in range(RUNS):
            row = naive.simulate_run(params, fc, 1000 + CASES.index(case), r, phases=phase_table(case))
            # (a stop at the job part's time limit loads from storage too)
            loads = row[mc.OUT_STORAGE_LOADS] + row[mc.OUT_MEMORY_LOADS]
            assert loads == row[mc.OUT_FAILURES] + row[mc.OUT_TIME_LIMIT_STOPS]
            assert row[mc.OUT_SPARE_WAIT_S] <= row[mc.OUT_RECOVERY_S]
            waits = row[mc.OUT_QUEUE_WAIT_S] + row[mc.OUT_RELEASE_WAIT_S] + row[mc.OUT_SPARE_WAIT_S]
            assert waits <= row[mc.OUT_RECOVERY_S] * (1 + 1e-12)
            if row[mc.OUT_COMPLETED] != 1.0:
                continue
            completed += 1
            ideal = ideal_s(params, case.phases)  # degradation: persistent straggler time
            parts = (
                ideal + row[mc.OUT_STRAGGLER_S] + row[mc.OUT_LOST_S] + row[mc.OUT_CHECKPOINT_S] + row[mc.OUT_RECOVERY_S]
            )
            assert parts == pytest.approx(row[mc.OUT_WALL_S], rel=1e-9)
            assert row[mc.OUT_BUSY_S] == pytest.approx(ideal + row[mc.OUT_STRAGGLER_S] + row[mc.OUT_LOST_S], rel=1e-9)
    assert completed > 50


def test_start_state_cases_differ_from_new_units():
    # The start-state cases really run another failure law: the same runs with all units new
    # give other failure times (the twin comparison above would not notice a start state dropped
    # on both sides).
    for case in [c for c in CASES if c.name.endswith(("-stationary", "-aged"))]:
        as_new = [tuple(cl[:7]) + ("new",) for cl in case.classes]
        params = case_params(case, fast=False)
        seed = 1000 + CASES.index(case)
        out = np.zeros((RUNS, mc.N_OUT))
        new = np.zeros((RUNS, mc.N_OUT))
        mc.simulate_runs(params, failure_classes(case.classes), mc.no_phases(), seed, 0, out)
        mc.simulate_runs(params, failure_classes(as_new), mc.no_phases(), seed, 0, new)
        assert not np.array_equal(out[:, mc.OUT_WALL_S], new[:, mc.OUT_WALL_S]), case.name
