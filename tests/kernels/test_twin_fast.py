"""Fast mode of the kernel against its slow twin (tests/naive_run.py), run for run, every output column.

Fast mode draws the factor sum of a block of iterations at once, and of whole
stretches of checkpoint cycles between two events (docs/model.md §4 "Execution
modes", "Whole stretches of checkpoint cycles"); the twin does the same in plain
Python from the same random streams, replaying a stretch's checkpoints one by one
at their interpolated progress and time. So each run must give the same outputs
as the kernel: equal to 1e-12 relative, counts exactly (as in tests/kernels/test_twin_exact.py).

The grid is a covering design: each checkpoint strategy (sync, async, gockpt,
in_memory) meets long runs of checkpoints between failures (stretches), slow-node
episodes (stretches during an episode, and ending before the next change),
spares with failure domains and the job factor, stationary starts censored at the
wall-clock limit, and checkpoint intervals below the block threshold (blocks drawn
one iteration at a time, stretches of several intervals drawn at once). Single
cases add the regimes: writes as long as a block (cycles walked), in_memory
skipping persists, with a replica slower than a block and persisting every
snapshot, the failure guard, and huge G. :func:`test_fast_grid_exercises_every_feature`
checks that the runs really go through them.
"""

from __future__ import annotations

import pytest
from twin_cases import (
    assert_twin_matches,
    ideal_s,
    phase_table,
)
from twin_fast_cases import FAST_CASES, RUNS, _seed, _twin_runs, fast_case_params, fast_features_seen

from mcsim.kernels import interface as mc


@pytest.mark.parametrize("case", FAST_CASES, ids=[c.name for c in FAST_CASES])
def test_fast_kernel_equals_twin(case):
    assert_twin_matches(fast_case_params(case), case.classes, seed=_seed(case), runs=RUNS, phases=phase_table(case))


@pytest.mark.parametrize("case", FAST_CASES, ids=[c.name for c in FAST_CASES])
def test_fast_grid_exercises_every_feature(case):
    # A comparison proves little on paths the runs never take: each case's runs (the same
    # as above) must go through the features it stands for.
    runs = _twin_runs(case)
    seen = fast_features_seen([state for _, state in runs], [row for row, _ in runs])
    assert set(case.features) <= seen, f"missing {set(case.features) - seen}"


def test_fast_twin_time_accounts_add_up():
    # The fast twin against docs/model.md §4 "Time bookkeeping", independently of the kernel: a
    # stretch's waits (heavy: n W - blocks) and stalls are checkpoint time, its blocks alive time.
    completed = 0
    for case in FAST_CASES:
        params = fast_case_params(case)
        for row, state in _twin_runs(case):
            loads = row[mc.OUT_STORAGE_LOADS] + row[mc.OUT_MEMORY_LOADS]  # a time-limit stop loads too
            assert loads == row[mc.OUT_FAILURES] + row[mc.OUT_TIME_LIMIT_STOPS]
            assert state.stretches_dropped == 0  # a stretch reaches the horizon with probability < 1e-15
            if row[mc.OUT_COMPLETED] != 1.0:
                continue
            completed += 1
            ideal = ideal_s(params, case.phases)
            parts = (
                ideal + row[mc.OUT_STRAGGLER_S] + row[mc.OUT_LOST_S] + row[mc.OUT_CHECKPOINT_S] + row[mc.OUT_RECOVERY_S]
            )
            assert parts == pytest.approx(row[mc.OUT_WALL_S], rel=1e-9), case.name
            assert row[mc.OUT_BUSY_S] == pytest.approx(ideal + row[mc.OUT_STRAGGLER_S] + row[mc.OUT_LOST_S], rel=1e-9)
    assert completed > 100
