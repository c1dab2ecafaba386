"""The compiled per-run accounting against its slow twin, bit for bit (the NumPy formulation it replaced).

:func:`mcsim.kernels.interface.account_runs` (through :func:`mcsim.model.run_outputs.run_outputs` and the
sweep's :class:`mcsim.engine.outputs.OutputArrays`) must give the same bytes as the NumPy formulation it
replaced, kept unchanged in ``tests/naive_accounting.py``: energy by part, cost (rental and owned),
carbon, ETTR and the columns in hours, for simulated runs of shipped scenarios (phases, hangs,
in-memory checkpoints, spare pools, censored runs) and for rows no run produces (NaN, zeros, huge
and tiny values).
"""

from __future__ import annotations

import numpy as np
import pytest
from naive_accounting import naive_run_outputs

import mcsim
from mcsim.engine.simulate import run_task
from mcsim.io.variables import PER_RUN
from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import workload_and_plan
from mcsim.model.run_outputs import run_outputs
from mcsim.scenario.config import load_scenario


def _assert_same_bytes(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], where: str) -> None:
    assert set(got) == set(expected) == set(PER_RUN), where
    for name in PER_RUN:
        a, b = np.ascontiguousarray(got[name]), np.ascontiguousarray(expected[name])  # the twin's may be strided
        assert a.dtype == b.dtype and a.shape == b.shape, (where, name)
        if a.tobytes() != b.tobytes():
            differs = a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)
            runs = np.flatnonzero(differs.any(axis=1))[:5]
            raise AssertionError(f"{where}: {name} differs in its bytes at runs {runs}: {a[runs]} != {b[runs]}")


CASES = [
    ("capacity-planning", []),
    ("capacity-planning", [("checkpoint.strategy", "in_memory")]),
    ("capacity-planning", [("checkpoint.strategy", "async"), ("cost.model", "owned")]),
    ("capacity-planning", [("hardware.spare_nodes", 1), ("run.max_wall_days", 20.0)]),  # censored runs
    ("llama3-405b", []),
    ("megascale-175b", []),
    ("byterobust-dense", []),
    ("bloom-176b", []),
    ("rsc1-8k", []),  # a queue wait after every failure
    ("dvfs-opt350m-pp2", []),
]


@pytest.mark.parametrize("name,overrides", CASES, ids=[f"{n}{'+' if o else ''}{len(o) or ''}" for n, o in CASES])
def test_simulated_runs_are_accounted_as_numpy_did(name, overrides):
    scenario = load_scenario(name, runs=300, seed=11, overrides=overrides)
    for cfg in scenario.configs[:2]:
        wl, plan = workload_and_plan(cfg)
        if plan is None:
            continue
        rows = run_task(cfg, 11, "fast", 0, 300)
        _assert_same_bytes(run_outputs(cfg, rows, wl, plan), naive_run_outputs(cfg, wl, plan, rows), name)


@pytest.mark.plain_python
def test_rows_no_run_produces_are_accounted_as_numpy_did():
    # Every column drawn from a mix of NaN, +-0, tiny, ordinary and huge values (and completed 0/1/NaN):
    # the branches of the accounting (loads cut short, no load, wall time 0, negative straggler time)
    # and NaN propagation through minimum and maximum.
    rng = np.random.default_rng(26)
    cfg = load_scenario("capacity-planning", runs=10, seed=0, overrides=[("checkpoint.strategy", "in_memory")]).base
    wl, plan = workload_and_plan(cfg)
    choices = np.array([np.nan, 0.0, -0.0, 1e-300, 1.0, 3.0, 7.5e3, 1e6, 2e9, 1e300, -5.0])
    rows = rng.choice(choices, size=(4000, kernel.N_OUT))
    rows[:, kernel.OUT_COMPLETED] = rng.choice([0.0, 1.0, np.nan], size=4000)
    rows[::7, kernel.OUT_ITERATIONS_DONE] = wl.iterations  # some runs did all the work
    with np.errstate(over="ignore"):  # the twin warns where 1e300 overflows; the kernel is silent
        expected = naive_run_outputs(cfg, wl, plan, rows)
    _assert_same_bytes(run_outputs(cfg, rows, wl, plan), expected, "fuzz")
    # Rows as the sweep fills a configuration it never simulated.
    nan_rows = np.full((50, kernel.N_OUT), np.nan)
    _assert_same_bytes(run_outputs(cfg, nan_rows, wl, plan), naive_run_outputs(cfg, wl, plan, nan_rows), "nan")


def test_a_sweep_stores_what_the_twin_computes():
    # OutputArrays accounts each configuration into a buffer and copies it into the sweep's arrays:
    # every configuration's runs in the dataset are the twin's outputs of its own rows.
    scenario = load_scenario(
        "capacity-planning",
        runs=64,
        seed=5,
        overrides=[
            ("checkpoint.strategy", ["sync", "in_memory"]),
            ("checkpoint.interval", [{"minutes": 15}, {"minutes": 40}]),
        ],
    )
    ds = mcsim.simulate(scenario, progress=False)
    stacked = ds.stack(config=[axis.dim for axis in scenario.axes]).transpose("config", "run")
    for flat, cfg in enumerate(scenario.configs):
        wl, plan = workload_and_plan(cfg)
        expected = naive_run_outputs(cfg, wl, plan, run_task(cfg, 5, scenario.run.mode, 0, 64))
        got = {name: stacked[name].values[flat] for name in PER_RUN}
        _assert_same_bytes(got, expected, f"configuration {flat}")


@pytest.mark.plain_python
def test_infinite_columns_give_the_same_values_up_to_the_nan_sign():
    # A column of +-inf (the kernel never writes one) makes NaN in two energy parts at once, one
    # negative (inf - inf, 0 * inf: the processor's default NaN) and one positive: which of them a
    # sum keeps depends on the operands' order, which the compiler may swap (IEEE addition commutes
    # but for NaN payloads). Values agree; only a NaN's sign may differ (docs/model.md §5).
    rng = np.random.default_rng(27)
    cfg = load_scenario("capacity-planning", runs=10, seed=0, overrides=[("checkpoint.strategy", "in_memory")]).base
    wl, plan = workload_and_plan(cfg)
    rows = rng.choice(np.array([np.inf, -np.inf, np.nan, 0.0, 1.0, 7.5e3, 2e9]), size=(4000, kernel.N_OUT))
    rows[:, kernel.OUT_COMPLETED] = rng.choice([0.0, 1.0], size=4000)
    with np.errstate(all="ignore"):
        expected = naive_run_outputs(cfg, wl, plan, rows)
    got = run_outputs(cfg, rows, wl, plan)
    for name in PER_RUN:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)  # NaN equals NaN here
