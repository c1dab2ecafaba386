"""Workload and checkpoint plan once per configuration; the thread split of kernel calls.

Counted by wrapping ``mcsim.model.preparation.workload`` and ``mcsim.model.preparation.checkpoint_plan``.

A sweep computes each configuration's workload and checkpoint plan
once, shared by the time estimate, every task and the output variables (and each
interval-optimiser grid point's plan once). The counts below are what that promise
means; before it, they grew with the number of tasks (4 per configuration here).
"""

from __future__ import annotations

import copy
import dataclasses

import numba
import numpy as np
import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.engine import threads as kernel_threads
from mcsim.model import checkpointing
from mcsim.model import preparation as tasks
from mcsim.scenario.config import scenario_from_dict


def _counting(monkeypatch, name: str) -> list:
    """Count the calls of ``name`` (``workload`` or ``checkpoint_plan``) wherever the engine makes them: in
    stage 2 itself and in :func:`mcsim.model.checkpointing.workload_and_plan`, whose kept results from
    earlier tests in this process are dropped first, so that every configuration here is counted."""
    checkpointing.workload_and_plan.cache_clear()
    tasks._kernel_inputs_of.cache_clear()
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
    # A plan's selection prepares its growing list of candidates at every round (preparing them again slowed the plan):
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


class _Unreadable:
    """A section the step model must not read: any attribute access fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the step model read .{name} of a section outside step_sections")

    def __hash__(self):
        return 0


def test_step_model_reads_only_its_cache_key():
    # mcsim.model.workload.own_layout_arrays keeps the arrays of each distinct step_sections(cfg)
    # (a sweep computes them once per layout): that is right only if workload_arrays reads nothing else. Every other
    # section is replaced by one that fails on any read; the arrays must come out the same.
    from mcsim.model import workload as wl

    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["phases"] = {"token_shares": [0.25, 0.75], "seq_len": [2048, 4096]}
    operators = copy.deepcopy(SMALL_SCENARIO)
    operators.setdefault("compute", {}).update(step_model="operators", fp8=True)
    bases = [scenario_from_dict(r).base for r in (copy.deepcopy(SMALL_SCENARIO), raw, operators)]
    for cfg in bases:
        fields = [f for f in cfg.__dataclass_fields__ if f != "name"]
        # The sections in the key: those whose replacement changes it.
        keyed = {
            f
            for f in fields
            if wl.step_sections(dataclasses.replace(cfg, **{f: _Unreadable()})) != wl.step_sections(cfg)
        }
        assert keyed < set(fields)  # the failures, checkpoint, costs ... are not in it
        poisoned = dataclasses.replace(cfg, **{f: _Unreadable() for f in fields if f not in keyed})
        expected = wl.workload_arrays(cfg, wl.layouts_of([cfg]))
        got = wl.workload_arrays(poisoned, wl.layouts_of([poisoned]))
        for field in expected.__dataclass_fields__:
            np.testing.assert_array_equal(getattr(got, field), getattr(expected, field), err_msg=field)


def test_configurations_that_differ_outside_the_step_model_share_its_arrays(monkeypatch):
    from mcsim.model import workload as wl

    wl._cached_arrays.cache_clear()
    calls = []
    original = wl.workload_arrays
    monkeypatch.setattr(wl, "workload_arrays", lambda cfg, lay: calls.append(cfg) or original(cfg, lay))
    configs = scenario_from_dict(_sweep()).configs  # gpus 64, 128 x strategy sync, async
    workloads = [wl.workload(c) for c in configs]
    assert len(calls) == 2  # one per GPU count, the strategies share it
    assert workloads[0] == workloads[1] and workloads[0] != workloads[2]
    # ... and each is the workload computed alone, without the cache
    for cfg, got in zip(configs, workloads, strict=True):
        wl._cached_arrays.cache_clear()
        assert wl.workload(cfg) == got
