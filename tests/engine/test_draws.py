"""Draw tables: a configuration's parameter draws evaluated together and
simulated by one kernel entry that takes per-run parameters (mcsim/draws.py,
``simulate_runs_table``). The reference is the per-draw-configuration path, where every
(configuration, draw) is a validated configuration of its own with its own tasks: the two
must agree bit for bit, output by output."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from builders import SMALL_SCENARIO, failure_classes, kernel_params

import mcsim
from mcsim.engine.resume import PieceStore
from mcsim.engine.tasks import placements, plan_sweep_tasks
from mcsim.kernels import interface as mc
from mcsim.scenario import draws as draws_module
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.draws import DrawPlan

UNCERTAIN = {
    "compute.efficiency": {"dist": "triangular", "low": 0.4, "mode": 0.5, "high": 0.6},
    "failures.gpu.mtbf_hours": {"dist": "lognormal", "median": 2000, "p95": 6000},
    "failures.gpu.shape": {"dist": "uniform", "low": 0.7, "high": 1.3},
    "failures.node.recovery_minutes": {"dist": "uniform", "low": 5, "high": 30},
    "checkpoint.storage_gbps": {"dist": "loguniform", "low": 20, "high": 400},
    "stragglers.sigma": {"dist": "uniform", "low": 0.0, "high": 0.1},
    "network.inter_gbps": {"dist": "uniform", "low": 25, "high": 100},
    "energy.pue": {"dist": "uniform", "low": 1.05, "high": 1.5},
    "checkpoint.bytes_per_param": {"dist": "uniform", "low": 10, "high": 16},
    "stragglers.episode_rate_per_node_day": {"dist": "uniform", "low": 0.0, "high": 0.5},
    "parallelism.overlap_dp": {"dist": "uniform", "low": 0.5, "high": 0.9},
}
DRAWS = 2 * (len(UNCERTAIN) + 2)  # Saltelli: 2 base points


def _raw(mode: str, design: str = "saltelli") -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"].append(
        {"name": "node", "scope": "node", "shape": 1.0, "mtbf_hours": 5000.0, "recovery_minutes": 15.0}
    )
    raw["checkpoint"]["interval"] = "young_daly"  # the drawn MTBF sets each draw's interval
    raw["run"].update(runs=5, draws=DRAWS, mode=mode, design=design)
    raw["sweep"] = {"checkpoint.strategy": ["sync", "async", "gockpt", "in_memory"]}
    raw["uncertain"] = copy.deepcopy(UNCERTAIN)
    return raw


def _per_draw_configurations(monkeypatch) -> None:
    """Make every uncertain key one that takes the per-draw configurations (the reference path)."""
    monkeypatch.setattr(draws_module, "table_key", lambda key: False)


def _comparable(ds):
    ds = ds.copy()
    for name in ("created", "history"):  # the creation time
        ds.attrs.pop(name)
    return ds


@pytest.fixture(scope="module", params=["exact", "fast"])
def reference(request):
    """The scenario and its dataset from the per-draw configurations."""
    scenario = scenario_from_dict(_raw(request.param))
    with pytest.MonkeyPatch.context() as patch:
        _per_draw_configurations(patch)
        assert not DrawPlan(scenario).tabled
        ds = mcsim.simulate(scenario, progress=False)
    return scenario, ds


@pytest.mark.parametrize("chunk_runs", [None, 3, 5, 12])  # pieces of a draw, one draw, two draws per task
def test_draw_tables_equal_per_draw_configurations(reference, chunk_runs):
    scenario, expected = reference
    assert DrawPlan(scenario).tabled
    ds = mcsim.simulate(scenario, progress=False, chunk_runs=chunk_runs)
    assert set(ds.data_vars) == set(expected.data_vars)
    for name in expected.data_vars:  # output by output, bit for bit (NaN where NaN)
        np.testing.assert_array_equal(ds[name].values, expected[name].values, err_msg=name)
    assert _comparable(ds).identical(_comparable(expected))
    # the draws differ in what the kernel computes (not a table of one parameter set)
    assert np.unique(ds.checkpoint_interval.values).size > 1
    assert np.unique(ds.n_failures.values).size > 1


def test_draw_tables_on_dask_workers_equal_per_draw_configurations(reference):
    scenario, expected = reference
    if scenario.run.mode != "fast":
        pytest.skip("one mode is enough for the backend")
    ds = mcsim.simulate(scenario, progress=False, chunk_runs=12, workers=2)
    assert _comparable(ds).identical(_comparable(expected))


@pytest.mark.parametrize("tabled", [True, False])
def test_resumed_from_saved_pieces(reference, tabled, tmp_path, monkeypatch):
    scenario, expected = reference
    if scenario.run.mode != "fast":
        pytest.skip("one mode is enough for resuming")
    if not tabled:
        _per_draw_configurations(monkeypatch)
    mcsim.simulate(scenario, progress=False, chunk_runs=12, store=PieceStore(tmp_path / "out.nc", scenario, 12))
    messages = []
    store = PieceStore(tmp_path / "out.nc", scenario, 12, notify=messages.append)
    resumed = mcsim.simulate(scenario, progress=False, chunk_runs=12, store=store, notify=messages.append)
    # 4 configurations x DRAWS draws of 5 runs: 2 draws per task in a table, else a task per draw
    tasks = 4 * DRAWS // 2 if tabled else 4 * DRAWS
    assert any(m.startswith(f"resuming: {tasks} of {tasks}") for m in messages), messages
    assert _comparable(resumed).identical(_comparable(expected))


def test_tasks_span_whole_draws_or_pieces_of_one():
    scenario = scenario_from_dict(_raw("fast", design="sobol"))
    plan = DrawPlan(scenario)
    count, runs = plan.count, plan.runs  # DRAWS (even) draws x 5 runs per configuration
    feasible = [c * count + d for c in range(3) for d in range(count) if (c, d) != (1, 4)]  # one infeasible draw
    spanning = plan_sweep_tasks(plan, feasible, 12)
    assert {(t.start, t.stop) for t in spanning if t.config == 0} == {(q, q + 10) for q in range(0, 5 * count, 10)}
    assert [(t.start, t.stop) for t in spanning if t.config == 1][1:4] == [(10, 20), (25, 35), (35, 45)]
    pieces = plan_sweep_tasks(plan, feasible, 2)
    assert [(t.start, t.stop) for t in pieces if t.config == 2][:4] == [(0, 2), (2, 4), (4, 5), (5, 7)]
    for tasks in (spanning, pieces):  # every feasible run exactly once
        where = placements(plan, tasks)
        placed = sorted((c, r) for t in tasks for c, r0, r1, _, _ in where[t] for r in range(r0, r1))
        assert placed == [(c, r) for c in feasible for r in range(runs)]


def test_keys_outside_the_tables_and_optimised_intervals_take_per_draw_configurations():
    raw = _raw("fast", design="sobol")
    raw["uncertain"] = {"hardware.tdp_w": {"dist": "uniform", "low": 350, "high": 450}}
    raw["run"]["draws"] = 4
    assert not DrawPlan(scenario_from_dict(raw)).tabled  # a GPU override: the catalog entry is rebuilt
    raw = _raw("fast", design="sobol")
    raw["checkpoint"]["interval"] = "optimize"
    assert not DrawPlan(scenario_from_dict(raw)).tabled  # each draw has its own optimum


def test_kernel_rows_take_their_parameter_set_and_stream():
    """simulate_runs_table row i = simulate_runs of parameter set row_param[i], run row_stream_run[i]."""
    sets = [
        kernel_params(sigma=0.05, n_ranks=64.0),
        kernel_params(compute_time_s=1.4, checkpoint_every=40, is_async=True, checkpoint_write_s=30.0),
    ]
    classes = [failure_classes([(8, 1.0, 3e4, 600.0)]), failure_classes([(8, 0.7, 1e4, 60.0)])]
    row_param = np.array([1, 0, 1, 1, 0], dtype=np.int64)
    row_stream_run = np.array([3, 3, 0, 7, 11], dtype=np.int64)
    out = np.empty((5, mc.N_OUT))
    mc.simulate_runs_table(
        mc.params_table(sets),
        mc.classes_table(classes),
        mc.phases_table([mc.no_phases()] * len(sets)),
        row_param,
        row_stream_run,
        5,
        out,
    )
    for i, (j, run) in enumerate(zip(row_param, row_stream_run, strict=False)):
        single = np.empty((1, mc.N_OUT))
        mc.simulate_runs(sets[j], classes[j], mc.no_phases(), 5, int(run), single)
        np.testing.assert_array_equal(out[i], single[0])
    assert out[0, mc.OUT_WALL_S] != out[1, mc.OUT_WALL_S]  # same stream, other parameters
