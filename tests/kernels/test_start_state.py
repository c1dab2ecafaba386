"""Start states of the failure processes (docs/model.md §4 "Failure processes").

A failure class's ``initial_age`` says how old its units are when the job starts:
``"stationary"`` (default) runs the renewal process in equilibrium, so the expected
failures in any window of length T are ``units · T / MTBF`` for every Weibull shape
(the elementary renewal identity of a stationary renewal process: Cox, *Renewal
Theory*, 1962, §5.2; Ross, *Stochastic Processes*, 2nd ed., §3.5); ``"new"`` is a
freshly installed cluster; a number is every unit's age in hours. Every run here is
censored at the horizon T (iterations that never finish), so a run's failure count is
the number of failures in [0, T).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from builders import SMALL_SCENARIO, kernel_params
from child_python import outputs_by_thread_count

from mcsim.engine.simulate import simulate, simulate_config
from mcsim.errors import ScenarioError
from mcsim.kernels import interface as mc
from mcsim.kernels.renewal import START_AGED, START_NEW, START_STATIONARY, first_failure_s
from mcsim.model import checkpointing
from mcsim.scenario.config import scenario_from_dict

MTBF_H = 1000.0
MTBF_S = MTBF_H * 3600.0
HORIZON_S = 0.2 * MTBF_S  # short against one unit's MTBF: the start state matters
UNITS = {"gpu": 64, "node": 8, "cluster": 1}  # SMALL_SCENARIO: 64 GPUs on 8 nodes
RUNS = {"gpu": 2_000, "node": 10_000, "cluster": 50_000}  # about 10^4 failures in each case


def _config(scope: str, shape: float, initial_age=None, mtbf_hours: float = MTBF_H):
    """SMALL_SCENARIO with one failure class; ``initial_age`` None leaves the schema default."""
    raw = copy.deepcopy(SMALL_SCENARIO)
    fclass = {"name": "f", "scope": scope, "shape": shape, "mtbf_hours": mtbf_hours}
    if initial_age is not None:
        fclass["initial_age"] = initial_age
    raw["failures"] = [fclass]
    return scenario_from_dict(raw).base


def _failures_in_horizon(classes: mc.FailureClasses, runs: int, horizon_s: float, seed: int = 5) -> np.ndarray:
    """Failures per run in [0, horizon_s): training never ends, the run is censored at the horizon.

    Fast mode with one block up to the (never reached) end: one kernel event per failure.
    """
    never = 10**15
    # kernel_params' block thresholds (fast_min_block and fast_min_block_episode) are 1 iteration
    params = kernel_params(iterations=never, checkpoint_every=never, max_wall_s=horizon_s, fast=True)
    out = np.zeros((runs, mc.N_OUT))
    mc.simulate_runs(params, classes, mc.no_phases(), seed, 0, out)
    assert not out[:, mc.OUT_COMPLETED].any()
    assert np.all(out[:, mc.OUT_WALL_S] == horizon_s)
    return out[:, mc.OUT_FAILURES]


def _z(counts: np.ndarray, expected: float) -> float:
    return (counts.mean() - expected) / (counts.std(ddof=1) / math.sqrt(counts.size))


@pytest.mark.parametrize("scope", ["gpu", "node", "cluster"])
@pytest.mark.parametrize("shape", [0.5, 1.0, 3.0])
def test_stationary_start_gives_units_times_window_over_mtbf(shape, scope):
    # Expected failures in [0, T) of a stationary renewal process: T / MTBF per unit, any shape.
    cfg = _config(scope, shape)  # the schema default: "stationary"
    classes = checkpointing.failure_classes(cfg)
    assert classes.units[0] == UNITS[scope] and classes.start[0] == START_STATIONARY
    expected = UNITS[scope] * HORIZON_S / MTBF_S
    counts = _failures_in_horizon(classes, RUNS[scope], HORIZON_S)
    assert abs(_z(counts, expected)) < 4.0, (counts.mean(), expected)
    if shape != 1.0:
        # The test can fail: new units (infant mortality for k < 1, wear-out for k > 1) miss it.
        new = _failures_in_horizon(checkpointing.failure_classes(_config(scope, shape, "new")), RUNS[scope], HORIZON_S)
        assert abs(_z(new, expected)) > 8.0


def _direct_aged_failures(
    shape: float, scale_s: float, age_s: float, horizon_s: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Failures in [0, T) of one unit aged ``age_s`` at 0, by direct simulation in numpy.

    The first lifetime is a Weibull lifetime conditioned on exceeding the age (by rejection:
    redraw until it does), later ones are fresh Weibull lifetimes (the unit is renewed).
    """
    first = scale_s * rng.weibull(shape, n)
    while (short := first <= age_s).any():
        first[short] = scale_s * rng.weibull(shape, int(short.sum()))
    t = first - age_s
    counts = np.zeros(n)
    while (alive := t < horizon_s).any():
        counts[alive] += 1
        t[alive] += scale_s * rng.weibull(shape, int(alive.sum()))
    return counts


@pytest.mark.parametrize("shape", [0.5, 3.0])
def test_fixed_age_matches_direct_simulation(shape):
    # One unit (cluster scope) one MTBF old at t = 0: failures in [0, MTBF/2) against a numpy
    # simulation of the same renewal process (rejection for the first, conditioned lifetime).
    horizon_s = 0.5 * MTBF_S
    cfg = _config("cluster", shape, initial_age=MTBF_H)
    classes = checkpointing.failure_classes(cfg)
    assert classes.start[0] == START_AGED and classes.age_s[0] == MTBF_S
    kernel = _failures_in_horizon(classes, 40_000, horizon_s)
    direct = _direct_aged_failures(shape, classes.scale_s[0], MTBF_S, horizon_s, 40_000, np.random.default_rng(11))
    se = math.sqrt(kernel.var(ddof=1) / kernel.size + direct.var(ddof=1) / direct.size)
    assert abs(kernel.mean() - direct.mean()) < 4.0 * se, (kernel.mean(), direct.mean())
    # ... and an old unit is not a new one (the test can fail).
    new = _failures_in_horizon(checkpointing.failure_classes(_config("cluster", shape, "new")), 40_000, horizon_s)
    assert abs(kernel.mean() - new.mean()) > 8.0 * se


def test_fixed_age_zero_is_new():
    # Age 0 h is a new unit: the same failure times, bit for bit.
    new = _failures_in_horizon(checkpointing.failure_classes(_config("gpu", 0.7, "new")), 500, HORIZON_S)
    zero = _failures_in_horizon(checkpointing.failure_classes(_config("gpu", 0.7, 0.0)), 500, HORIZON_S)
    assert new.tobytes() == zero.tobytes()


def test_new_start_is_todays_weibull_lifetime():
    # "new" inverts H(t) = (t/lambda)^k with the arithmetic of a plain Weibull lifetime.
    for h in (1e-9, 0.01, 0.7, 3.0, 40.0):
        for k in (0.5, 0.7, 1.0, 3.0):
            assert first_failure_s(h, k, 1234.5, START_NEW, 0.0) == 1234.5 * h ** (1.0 / k)


@pytest.mark.parametrize("start, age_s", [(START_STATIONARY, 0.0), (START_AGED, 5000.0), (START_AGED, 0.0)])
def test_exponential_start_states_use_the_new_arithmetic(start, age_s):
    # k = 1 is memoryless: every start state is the exponential law, computed exactly as "new".
    for h in (1e-9, 0.01, 0.7, 3.0, 40.0):
        assert first_failure_s(h, 1.0, 1234.5, start, age_s) == first_failure_s(h, 1.0, 1234.5, START_NEW, 0.0)


def test_exponential_scenario_output_is_bit_identical_for_every_start_state():
    # The whole output of a k = 1 scenario (every per-run and per-configuration variable) is the
    # same under "stationary", "new" and a fixed age: exponential classes keep today's numbers.
    def dataset(initial_age):
        raw = copy.deepcopy(SMALL_SCENARIO)
        raw["failures"] = [
            dict(raw["failures"][0], mtbf_hours=40.0, initial_age=initial_age),
            {"name": "fabric", "scope": "cluster", "mtbf_hours": 5.0, "initial_age": initial_age},
        ]
        raw["run"] = dict(raw["run"], runs=100, mode="exact")
        return simulate(scenario_from_dict(raw), progress=False)

    base = dataset("stationary")
    assert float(base["n_failures"].mean()) > 1.0
    for other in (dataset("new"), dataset(3000.0)):
        assert sorted(other.data_vars) == sorted(base.data_vars)
        for name in base.data_vars:
            a, b = base[name].values, other[name].values
            if a.dtype.kind in "fiub":
                assert a.tobytes() == b.tobytes(), name
            else:
                assert np.array_equal(a, b), name


def test_stationary_is_the_default_and_values_are_checked(small_raw):
    assert scenario_from_dict(small_raw).base.failures[0].initial_age == "stationary"
    for good in ("stationary", "new", 0, 12.5, 1e9):
        small_raw["failures"][0]["initial_age"] = good
        assert scenario_from_dict(small_raw).base.failures[0].initial_age == good
    for bad in ("old", "Stationary", -1.0, 2e9, True, float("nan"), [1.0]):
        small_raw["failures"][0]["initial_age"] = bad
        with pytest.raises(ScenarioError) as err:
            scenario_from_dict(small_raw)
        assert err.value.key == "failures.gpu.initial_age"  # errors name the class, as other class keys' do
        assert '"stationary" or "new" or a number' in err.value.message or "expected a" in err.value.message


def _weibull_start_raw() -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = [
        {"name": "g", "scope": "gpu", "shape": 0.7, "mtbf_hours": 64 * 0.5},
        {"name": "n", "scope": "node", "shape": 3.0, "mtbf_hours": 8 * 1.0, "initial_age": 5.0},
        {"name": "c", "scope": "cluster", "shape": 0.5, "mtbf_hours": 2.0},
    ]
    return raw


def test_start_states_are_bit_identical_for_any_chunking():
    cfg = scenario_from_dict(_weibull_start_raw()).base
    whole, _, _ = simulate_config(cfg, 400, 7, "exact", chunk_runs=400)
    chunked, _, _ = simulate_config(cfg, 400, 7, "exact", chunk_runs=37)
    second, _, _ = simulate_config(cfg, 200, 7, "exact", first_run=200)
    assert whole[:, mc.OUT_FAILURES].mean() > 1.0
    assert whole.tobytes() == chunked.tobytes()
    assert whole[200:].tobytes() == second.tobytes()


def test_start_states_are_bit_identical_for_any_thread_count(tmp_path):
    results = outputs_by_thread_count(_weibull_start_raw(), tmp_path)
    assert results["1"] == results["2"]
