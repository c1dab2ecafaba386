"""The run-time estimate that gates ``--max-hours`` (mcsim.model.run_estimate; hostile finding of issue 42).

Speed is measured in benchmarks/; here only what the estimate counts.
"""

from __future__ import annotations

import copy

from builders import SMALL_SCENARIO

from mcsim.model.preparation import kernel_inputs
from mcsim.model.run_estimate import estimate_run, time_estimate
from mcsim.scenario.config import scenario_from_dict

# Measured (issue 42, 2-core x86-64): beyond the kernel's loop, gathering a run's outputs took 1.75-1.94 us of
# CPU per run; a floor well below that.
OUTPUT_FLOOR_S = 1e-6


def test_many_short_runs_are_estimated_with_their_outputs():
    # Found: `--runs 1e7` (with shards) was announced as 4.9 s and ran past 44 s: only the kernel's loop counted.
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(mode="fast")
    raw["sweep"] = {"parallelism.gpus": [32, 64]}
    configs = scenario_from_dict(raw).configs
    inputs = [kernel_inputs(cfg, "fast") for cfg in configs]
    runs = 10_000_000
    kernel_s = sum(estimate_run(one).seconds for one in inputs) * runs
    estimate = time_estimate(inputs, [0, 1], [], runs, 0, parallelism=2)
    assert estimate.cpu_s >= kernel_s + len(configs) * runs * OUTPUT_FLOOR_S
    assert estimate.wall_s == estimate.cpu_s / 2
