"""Workload and checkpoint plan once per configuration; the thread split of kernel calls.

Counted by wrapping ``mcsim.engine.prepare.workload`` and ``mcsim.engine.prepare.checkpoint_plan``.

Issue 12 item 2: a sweep computes each configuration's workload and checkpoint plan
once, shared by the time estimate, every task and the output variables (and each
interval-optimiser grid point's plan once). The counts below are what that promise
means; before it, they grew with the number of tasks (4 per configuration here).
"""

from __future__ import annotations

import copy

import numba
import numpy as np
import pytest
from conftest import SMALL_SCENARIO

import mcsim
from mcsim.engine import prepare as tasks
from mcsim.engine import threads as kernel_threads
from mcsim.model import checkpointing
from mcsim.scenario.config import scenario_from_dict


def _counting(monkeypatch, name: str) -> list:
    """Count the calls of ``name`` (``workload`` or ``checkpoint_plan``) wherever the engine makes them: in
    stage 2 itself and in :func:`mcsim.model.checkpointing.workload_and_plan`, whose kept results from
    earlier tests in this process are dropped first, so that every configuration here is counted."""
    checkpointing._workload_and_plan_cached.cache_clear()
    calls = []
    original = getattr(tasks, name)

    def counted(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(tasks, name, counted)
    monkeypatch.setattr(checkpointing, name, counted)
    return calls


def _sweep(**checkpoint) -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=40, mode="fast")
    raw["checkpoint"].update(checkpoint)
    raw["sweep"] = {"parallelism.gpus": [64, 128], "checkpoint.strategy": ["sync", "async"]}
    return raw


def test_workload_and_plan_are_computed_once_per_configuration(monkeypatch):
    workloads, plans = _counting(monkeypatch, "workload"), _counting(monkeypatch, "checkpoint_plan")
    scenario = scenario_from_dict(_sweep())
    ds = mcsim.simulate(scenario, progress=False, chunk_runs=10)  # 4 tasks per configuration
    configurations = len(scenario.configs)
    assert configurations == 4 and bool(ds["feasible"].all())
    assert len(workloads) == configurations
    assert len(plans) == configurations


def test_a_configuration_prepared_again_is_not_recomputed(monkeypatch):
    # A plan's selection prepares its growing list of candidates at every round (issue 26 item 5):
    # a configuration already prepared in this process reuses its workload and kernel inputs.
    workloads, plans = _counting(monkeypatch, "workload"), _counting(monkeypatch, "checkpoint_plan")
    configs = scenario_from_dict(_sweep()).configs
    first = tasks.prepare(configs, "fast")
    again = tasks.prepare(list(configs) + list(configs[:1]), "fast")
    exact = tasks.prepare(configs, "exact")
    assert len(workloads) == len(plans) == len(configs)
    assert again.workloads[-1] is first.workloads[0] and again.inputs[-1].plan is first.inputs[0].plan
    assert again.inputs[-1].params == first.inputs[0].params
    assert first.inputs[0].params.fast and not exact.inputs[0].params.fast  # the mode is applied per call


def test_optimiser_grid_points_each_get_one_plan(monkeypatch):
    workloads, plans = _counting(monkeypatch, "workload"), _counting(monkeypatch, "checkpoint_plan")
    raw = _sweep(interval="optimize")
    raw["sweep"] = {"parallelism.gpus": [64, 128]}
    mcsim.simulate(scenario_from_dict(raw), progress=False, chunk_runs=10)  # 4 tasks per grid point
    # One workload per configuration, and one per optimised configuration (a new Config).
    assert len(workloads) == 2 * 2
    # Plans: one per configuration for the time estimate ("optimize": Daly's interval stands
    # in), one per grid point (coarse and fine), one per optimised configuration.
    estimate = [p for p in plans if p.checkpoint.interval.kind == "optimize"]
    fixed = [
        (p.parallelism.gpus, p.checkpoint.interval.value) for p in plans if p.checkpoint.interval.kind == "iterations"
    ]
    assert len(estimate) == 2
    assert len(fixed) <= len(set(fixed)) + 2  # an optimum may repeat a grid point, nothing else
    assert len(set(fixed)) >= 2 * 5  # the grids were searched (>= 5 points each)


@pytest.mark.parametrize("runs", [1, 2, 7, 250])
def test_thread_split_gives_the_rows_of_one_thread(runs):
    cfg = scenario_from_dict(copy.deepcopy(SMALL_SCENARIO)).base
    inputs = tasks.kernel_inputs(cfg, "exact")
    threads = numba.get_num_threads()
    try:
        split = kernel_threads.run_kernel(inputs, 7, 100, 100 + runs, threads=numba.config.NUMBA_NUM_THREADS)
        serial = kernel_threads.run_kernel(inputs, 7, 100, 100 + runs, threads=1)
    finally:
        numba.set_num_threads(threads)
    # A run depends only on its index: slices on several threads give one thread's rows.
    np.testing.assert_array_equal(split, serial)
