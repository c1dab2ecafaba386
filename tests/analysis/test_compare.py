"""Decision analysis: Pareto fronts, paired dominance, best picks, interval optimiser."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import xarray as xr
from builders import SMALL_SCENARIO
from scipy import stats

import mcsim
from mcsim.analysis.compare import prob_better
from mcsim.analysis.configurations import completed_share
from mcsim.analysis.deadline import cheapest_within
from mcsim.analysis.pareto import nondominated
from mcsim.analysis.ranking import best, pareto_front
from mcsim.engine.optimize import optimize_interval
from mcsim.errors import NoneQualifies
from mcsim.scenario.config import scenario_from_dict


def _synthetic(means: dict[str, list[float]], runs: int = 4, feasible=None, spread: float = 0.0) -> xr.Dataset:
    """A hand-built result set: configurations 'A', 'B', ... with given per-variable means."""
    names = [chr(ord("A") + i) for i in range(len(means["wall_time"]))]
    offsets = np.linspace(-spread, spread, runs)
    data = {k: (("config", "run"), np.array(v, float)[:, None] + offsets[None, :]) for k, v in means.items()}
    ds = xr.Dataset(data, coords={"config": names, "run": np.arange(runs)})
    ds["feasible"] = ("config", np.array(feasible if feasible is not None else [True] * len(names)))
    ds["completed"] = (("config", "run"), np.ones((len(names), runs), bool))
    for k in means:
        ds[k].attrs["units"] = {"wall_time": "h", "ettr": "1", "energy": "MWh"}.get(k, "USD")
    return ds


def test_pareto_front_known_by_hand():
    # (time, cost): A (1, 9) B (2, 5) C (3, 6) D (4, 1) E (2, 5) F (5, 5):
    # C is dominated by B; F by B and D; E ties B exactly: neither dominates the other.
    ds = _synthetic({"wall_time": [1, 2, 3, 4, 2, 5], "cost": [9, 5, 6, 1, 5, 5]})
    front = pareto_front(ds, ("wall_time", "cost"))
    assert list(front.values) == [True, True, False, True, True, False]
    # One objective: only the minimum (and its ties).
    assert list(pareto_front(ds, ("cost",)).values) == [False, False, False, True, False, False]


def test_infeasible_never_on_front_nor_best():
    ds = _synthetic({"wall_time": [1, 2], "cost": [1, 2]}, feasible=[False, True])
    assert list(pareto_front(ds).values) == [False, True]
    assert best(ds, "cost")["configuration"] == {"config": "B"}


def test_pareto_on_a_quantile():
    # Means favour A, the 90th percentile favours B (A has a long tail).
    runs = 100
    a = np.ones(runs)
    a[-15:] = 10.0  # mean 2.35, p90 10
    b = np.full(runs, 3.0)  # mean 3, p90 3
    ds = _synthetic({"wall_time": [0, 0], "cost": [0, 0]}, runs=runs)
    ds["cost"][:] = np.stack([a, b])
    assert list(pareto_front(ds, ("cost",), stat="mean").values) == [True, False]
    assert list(pareto_front(ds, ("cost",), stat=0.9).values) == [False, True]


def test_prob_better_on_paired_runs():
    # Paired runs: B = A + d with d > 0 on 70 of 100 runs, < 0 on 20, = 0 on 10:
    # P(A beats B) = 0.70 + 0.5 * 0.10 = 0.75 exactly; SE = sqrt(0.75 * 0.25 / 100).
    rng = np.random.default_rng(1)
    a = rng.normal(10, 3, 100)
    d = np.concatenate([np.full(70, 0.5), np.full(20, -0.5), np.zeros(10)])
    ds = _synthetic({"wall_time": [0, 0], "cost": [0, 0]}, runs=100)
    ds["cost"][:] = np.stack([a, a + d])
    p, ci, n = prob_better(ds, {"config": "A"}, {"config": "B"}, "cost")
    # 95 % Wilson score interval of 75 successes in 100, from scipy's own implementation
    expected = stats.binomtest(75, 100).proportion_ci(0.95, method="wilson")
    assert p == pytest.approx(0.75) and n == 100
    assert ci == pytest.approx((expected.low, expected.high), rel=1e-9)
    q, _, _ = prob_better(ds, {"config": "B"}, {"config": "A"}, "cost")
    assert q == pytest.approx(0.25)


def test_cheapest_within_deadline():
    # Deadline 2 days = 48 h. A: fast, dear; B: 40 h +- 10 (half the runs late? no: 30..50 -> some late);
    # C: 100 h, cheapest but late.
    ds = _synthetic({"wall_time": [20, 40, 100], "cost": [10, 5, 1]}, runs=5, spread=10.0)
    # runs of B: 30, 35, 40, 45, 50 h -> 4 of 5 within 48 h (0.8)
    assert cheapest_within(ds, 2.0, 0.8)["configuration"] == {"config": "B"}
    assert cheapest_within(ds, 2.0, 0.9)["configuration"] == {"config": "A"}
    # nothing finishes within 12 h with probability 0.9; A comes closest: 1 of its 5 runs (10 h) is in time
    with pytest.raises(NoneQualifies, match=r"closest is config=A with probability 0\.2 ") as caught:
        cheapest_within(ds, 0.5, 0.9)
    assert caught.value.closest["configuration"] == {"config": "A"}
    assert caught.value.closest["p_within"] == pytest.approx(0.2)


def _optimizer_case(stall_s: float, mtbf_h: float, shape: float = 1.0):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["stragglers"]["sigma"] = 0.0
    raw["model"]["tokens"] = 2e11
    # Sync stall S / W with W = 8 nodes x 1 GB/s: bytes_per_param sets the stall.
    raw["checkpoint"] = {
        "strategy": "sync",
        "bytes_per_param": stall_s * 8e9 / 1.3e9,
        "write_gbps_per_node": 1.0,
        "storage_gbps": 1e6,
    }
    raw["failures"] = [{"name": "c", "scope": "cluster", "shape": shape, "mtbf_hours": mtbf_h, "recovery_minutes": 5.0}]
    return scenario_from_dict(raw).base


@pytest.mark.parametrize("stall_s,mtbf_h", [(60.0, 2.0), (20.0, 4.0), (120.0, 1.0), (5.0, 0.5)])
def test_optimizer_lands_near_daly_with_exponential_failures(stall_s, mtbf_h):
    # Daly (2006, eq. 37) is the optimum of the expected wall time for exponential failures
    # to higher order; docs/model.md §6c and the README claim the simulated optimum is within
    # 2 % of it. Measured (seed 0, 300 runs): -0.4, -0.3, -1.6, -0.5 % with bootstrap standard
    # errors of 0.7, 1.0, 0.45 and 0.3 %; the tolerance is the claim itself.
    opt = optimize_interval(_optimizer_case(stall_s, mtbf_h), runs=300)
    assert opt.interval_s == pytest.approx(opt.daly_s, rel=0.02)
    assert opt.ci95_s[0] <= opt.interval_s <= opt.ci95_s[1]


def test_optimize_interval_from_toml():
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["checkpoint"] = {"strategy": "async", "interval": "optimize", "optimize_objective": "cost"}
    raw["failures"][0]["mtbf_hours"] = 100.0
    raw["run"]["runs"] = 50
    ds = mcsim.simulate(scenario_from_dict(raw), progress=False)
    low, high = float(ds["checkpoint_interval_ci_low"]), float(ds["checkpoint_interval_ci_high"])
    assert 0 < low <= high and np.isfinite(float(ds["checkpoint_interval"]))


def test_accessor_matches_functions(small_raw):
    small_raw["sweep"] = {"parallelism.gpus": [64, 128], "checkpoint.strategy": ["async", "gockpt"]}
    small_raw["run"]["runs"] = 30
    ds = mcsim.simulate(scenario_from_dict(small_raw), progress=False)
    assert ds.mcsim.best("cost") == best(ds, "cost")
    assert ds.mcsim.pareto(("wall_time", "energy")).equals(pareto_front(ds, ("wall_time", "energy")))
    assert "stat" in ds.mcsim.summary().dims
    p, (low, high), n = ds.mcsim.prob_better(
        {"gpus": 128, "strategy": "async"}, {"gpus": 64, "strategy": "async"}, "wall_time"
    )
    assert p > 0.9 and low < p <= high and n == 30


def test_certain_win_still_has_an_error_and_nan_runs_are_skipped():
    ds = _synthetic({"wall_time": [1, 2], "cost": [1, 2]}, runs=10)
    p, (low, high), _ = prob_better(ds, {"config": "A"}, {"config": "B"}, "cost")
    # Wilson's lower bound at 10 successes of 10 is n / (n + z^2) (Wilson 1927), not 1
    assert p == 1.0 and high == 1.0 and low == pytest.approx(10 / (10 + 1.959963984540054**2))
    q, (low, high), _ = prob_better(ds, {"config": "B"}, {"config": "A"}, "cost")
    assert q == 0.0 and low == 0.0 and high == pytest.approx(1 - 10 / (10 + 1.959963984540054**2))
    ds["cost"][0, 3] = np.nan  # a NaN run must not turn the chosen configuration's record into NaN
    record = best(ds, "cost")
    assert record["configuration"] == {"config": "A"} and np.isfinite(record["mean"]) and record["runs"] == 9


def test_optimizer_on_a_two_iteration_run_picks_a_grid_point():
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["model"]["tokens"] = 2 * 512 * 2048  # two iterations: too few candidate intervals for a fit
    opt = optimize_interval(scenario_from_dict(raw).base, runs=20)
    assert opt.interval_iterations in (1, 2) and opt.ci95_s[0] == opt.ci95_s[1] == opt.interval_s


# ---------------------------------------------------------------- directions: lower cost, higher ETTR


def test_each_objective_is_ranked_in_its_registered_direction():
    # A has the lower cost and the higher ETTR; B the other way round.
    ds = _synthetic({"wall_time": [1, 2], "cost": [1, 2], "ettr": [0.9, 0.5]}, runs=5, spread=0.01)
    assert best(ds, "cost")["configuration"] == {"config": "A"}
    assert best(ds, "ettr")["configuration"] == {"config": "A"}  # higher is better: not the worst
    assert best(ds, "ettr", stat=0.9)["configuration"] == {"config": "A"}
    # On (cost, ETTR) A is better on both, so B is dominated.
    assert list(pareto_front(ds, ("cost", "ettr")).values) == [True, False]
    assert prob_better(ds, {"config": "A"}, {"config": "B"}, "ettr").probability == 1.0
    # C: higher ETTR but dearer than A: a trade-off, both on the front.
    ds3 = _synthetic({"wall_time": [1, 2, 3], "cost": [1, 2, 3], "ettr": [0.5, 0.4, 0.9]})
    assert list(pareto_front(ds3, ("cost", "ettr")).values) == [True, False, True]


@pytest.mark.parametrize("name", ["n_memory_recoveries", "iterations", "not_a_variable"])
def test_an_objective_without_a_direction_is_refused(name):
    ds = _synthetic({"wall_time": [1, 2], "cost": [1, 2], "n_memory_recoveries": [0, 1]})
    ds["iterations"] = ("config", [10, 10])
    ds["not_a_variable"] = ds["cost"]
    for call in (
        lambda: best(ds, name),
        lambda: pareto_front(ds, ("cost", name)),
        lambda: prob_better(ds, {"config": "A"}, {"config": "B"}, name),
    ):
        with pytest.raises(ValueError, match=name):
            call()


def test_every_per_run_variable_has_a_stated_direction_or_none():
    from mcsim.io.variables import VARIABLES

    for var in VARIABLES.values():
        assert var.direction in (("lower", "higher", None) if var.per_run else (None,)), var.name
    assert VARIABLES["ettr"].direction == "higher" and VARIABLES["cost"].direction == "lower"


# ---------------------------------------------------------------- censored runs: truncated values, never ranked


def test_a_configuration_with_censored_runs_is_never_ranked():
    # A is cheapest and fastest only because its runs were cut off (completed = False).
    ds = _synthetic({"wall_time": [10, 50, 60], "cost": [1, 5, 6], "energy": [1, 5, 4]}, runs=4)
    ds["completed"][0, :] = False
    ds["completed"][2, 1] = False  # one censored run of four is enough
    assert best(ds, "cost")["configuration"] == {"config": "B"}
    assert best(ds, "energy")["configuration"] == {"config": "B"}
    assert list(pareto_front(ds, ("wall_time", "cost")).values) == [False, True, False]
    assert cheapest_within(ds, 100.0, 0.5)["configuration"] == {"config": "B"}
    with pytest.raises(ValueError, match="censored"):
        prob_better(ds, {"config": "A"}, {"config": "B"}, "cost")
    ds["completed"][1, 0] = False
    with pytest.raises(ValueError, match="max_wall_days"):
        best(ds, "cost")
    assert list(completed_share(ds).values) == [0.0, 0.75, 0.75]


@pytest.fixture(scope="module")
def censored_sweep():
    """8 vs 64 GPUs with a wall-time limit that no 8-GPU run meets: its truncated runs look cheapest."""
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=40, mode="fast", max_wall_days=0.05)  # 1.2 h; 8 GPUs need ~4 h of compute
    raw["sweep"] = {"parallelism.gpus": [8, 64]}
    return mcsim.simulate(scenario_from_dict(raw), progress=False)


def test_censored_sweep_recommends_the_configuration_that_finishes(censored_sweep):
    ds = censored_sweep
    assert not ds["completed"].sel(gpus=8).any() and ds["completed"].sel(gpus=64).all()
    for objective in ("cost", "energy", "wall_time", "ettr"):
        assert best(ds, objective)["configuration"] == {"gpus": 64}, objective
    assert list(pareto_front(ds, ("wall_time", "cost")).values) == [False, True]


def test_ettr_of_censored_runs_counts_the_work_done(censored_sweep):
    # ETTR = ideal time of the surviving iterations / wall time can never exceed 1; before,
    # the full job's ideal time was set against the truncated wall time (ETTR 3 and more).
    ettr = censored_sweep["ettr"]
    assert float(ettr.max()) <= 1.0 and float(ettr.sel(gpus=8).min()) > 0.5
    # A censored run stopped at the limit: its wall time is the limit, and its ETTR is the
    # share of that time that did surviving work.
    assert np.allclose(censored_sweep["wall_time"].sel(gpus=8), 0.05 * 24, rtol=1e-9)


# ---------------------------------------------------------------- fast Pareto front: the naive one's answers


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_pareto_front_matches_the_naive_reference(k):
    from naive import pareto_front_naive

    rng = np.random.default_rng(100 + k)
    for trial in range(30):
        n = int(rng.integers(1, 400))
        values = rng.integers(0, 6 if trial % 2 else 50, size=(n, k)).astype(float)  # many ties
        values[rng.random(n) < 0.05, int(rng.integers(k))] = np.nan
        if trial % 3 == 0:
            values[: n // 2] = values[n // 2 : 2 * (n // 2)]  # exact duplicate rows
        expected = pareto_front_naive(values)
        np.testing.assert_array_equal(nondominated(values), expected)
