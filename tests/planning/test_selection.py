"""select_best: Kim–Nelson selection with common random numbers (mcsim/selection.py).

The reference for "the best" is exhaustive simulation with mcsim.simulate on other
streams (another seed), or a designed case whose answer is known in closed form.
"""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest
from builders import SMALL_SCENARIO
from selection_spaces import INTERVALS, STRATEGIES, space_raw

from mcsim.engine.resume import PieceStore
from mcsim.engine.simulate import simulate, simulate_config
from mcsim.kernels.interface import OUT_WALL_S
from mcsim.planning.kim_nelson import bonferroni_pcs, kn_constants
from mcsim.planning.selection import ExecutionOptions, select_best
from mcsim.scenario.config import scenario_from_dict

QUIET = ExecutionOptions(progress=False)  # no progress bar


@pytest.fixture(scope="module")
def exhaustive() -> tuple[np.ndarray, np.ndarray]:
    """Mean cost of each candidate from 2,000 runs (seed 11) and the paired SE to the best."""
    ds = simulate(scenario_from_dict(space_raw(2000, 11)), progress=False)
    cost = ds["cost"].values.reshape(len(INTERVALS) * len(STRATEGIES), -1)
    means = cost.mean(axis=1)
    best = int(np.argmin(means))
    paired_se = np.std(cost - cost[best], axis=1, ddof=1) / math.sqrt(cost.shape[1])
    return means, paired_se


def candidates():
    return scenario_from_dict(space_raw(100, 0)).configs


@pytest.mark.parametrize("first_runs, fewer", [(100, 19.9), (10, 50.0)])
def test_recommends_the_exhaustive_best_in_19_of_20_seeds(exhaustive, first_runs, fewer):
    """Within the 0.5 % zone of the exhaustive best in >= 19 of 20 seeds, with far fewer runs.

    Measured: 20/20 both ways; 1,000 runs with n0 = 100 (KN stops after the first stage:
    20x fewer than 20,000) and about 140 with n0 = 10 (about 4 stages, 140x fewer).
    """
    means, paired_se = exhaustive
    configs = candidates()
    good, spent = 0, []
    for seed in range(1000, 1020):
        result = select_best(configs, "cost", seed=seed, first_runs=first_runs, execution=QUIET)
        # The verdict means something only if the exhaustive search resolves every
        # candidate's side of the zone: |gap - delta| > 4 paired standard errors.
        gap = means - means.min()
        assert np.all(np.abs(gap - result.delta) > 4 * paired_se)
        good += bool(gap[result.best] <= result.delta)
        spent.append(result.total_runs)
    ratio = len(configs) * 2000 / np.mean(spent)
    print(
        f"select_best, n0 = {first_runs}: {good}/20 within the zone of the exhaustive best, "
        f"{np.mean(spent):.0f} runs on average, {ratio:.1f}x fewer than exhaustive with 2,000 runs each"
    )
    assert good >= 19
    assert ratio > fewer


def price_raw(prices, seed=3, failures=True) -> dict:
    """Candidates that differ only in the GPU-hour price, no electricity cost: cost_i = p_i G W."""
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["model"]["tokens"] = 4e8
    raw["failures"][0]["mtbf_hours"] = 8.0
    if not failures:
        raw["failures"] = []
        raw["stragglers"] = {"sigma": 0.0}
    raw["cost"] = {"electricity_usd_per_kwh": 0.0}
    raw["run"].update(runs=100, seed=seed, mode="fast")
    raw["sweep"] = {"cost.gpu_hour_usd": list(prices)}
    return raw


def test_designed_prices_closed_form():
    """Same runs, prices 2.3, 2.0, 2.004, 2.6, 3.0 USD/GPU h: mean cost is proportional to the price.

    Closed form: cost of run r = p_i G W_r (electricity priced 0), so the best is the
    lowest price (#1), #2 is 0.2 % worse (inside the 0.5 % zone, also a correct choice),
    the others are 15-50 % worse; and mean_i / mean_1 = p_i / p_1 over the same runs.
    """
    prices = (2.3, 2.0, 2.004, 2.6, 3.0)
    configs = scenario_from_dict(price_raw(prices)).configs
    for seed in range(5):
        result = select_best(configs, "cost", seed=seed, execution=QUIET)
        assert result.decided and result.best in (1, 2), result.reason
        assert result.pcs == pytest.approx(0.95)
        assert set(np.flatnonzero(result.eliminated_round == -1)) == {result.best}
    # The kernel rows do not depend on the price: every candidate ran the same runs, and
    # its mean cost is p_i G (mean wall time in h) (closed form, electricity priced 0).
    gpus = configs[0].parallelism.gpus
    for i, price in enumerate(prices):
        rows = result.rows[i]
        assert np.array_equal(rows, result.rows[1][: len(rows)])
        wall_h = rows[:, OUT_WALL_S] / 3600.0
        assert result.means[i] == pytest.approx(price * gpus * wall_h.mean(), rel=1e-12)


def test_deterministic_candidates_stop_after_the_first_stage():
    """No failures, no stragglers: every run is the same, S² = 0, so KN's N = 0 and it stops at n0."""
    prices = (2.5, 2.0, 2.2)
    configs = scenario_from_dict(price_raw(prices, failures=False)).configs
    result = select_best(configs, "cost", seed=1, first_runs=10, execution=QUIET)
    assert result.decided and result.best == 1
    assert result.runs.tolist() == [10, 10, 10] and result.stages == 1
    # Closed form: cost = p G W with the same deterministic W for all.
    assert result.means[0] / result.means[1] == pytest.approx(2.5 / 2.0, rel=1e-12)
    assert np.all(result.half_widths <= 1e-12 * result.means)  # round-off of identical runs only


def test_same_selection_for_any_chunking(tmp_path):
    configs = candidates()
    a = select_best(configs, "cost", seed=5, indifference=0.01, execution=QUIET)
    b = select_best(
        configs, "cost", seed=5, indifference=0.01, execution=ExecutionOptions(progress=False, chunk_runs=37)
    )
    _assert_same(a, b)


def _assert_same(a, b):
    assert (a.best, a.decided, a.reason, a.total_runs) == (b.best, b.decided, b.reason, b.total_runs)
    assert np.array_equal(a.runs, b.runs) and np.array_equal(a.eliminated_round, b.eliminated_round)
    assert np.array_equal(a.means, b.means)
    for i in a.rows:
        assert np.array_equal(a.rows[i], b.rows[i])


@pytest.mark.slow
def test_same_selection_on_dask():
    configs = candidates()
    a = select_best(configs, "cost", seed=5, indifference=0.01, execution=QUIET)
    b = select_best(configs, "cost", seed=5, indifference=0.01, execution=ExecutionOptions(progress=False, workers=2))
    _assert_same(a, b)


def test_resume_store_reuses_pieces(tmp_path):
    """A rerun loads the saved pieces; with some missing (an interrupted selection) it runs only those."""
    scenario = scenario_from_dict(space_raw(100, 5))
    configs = scenario.configs
    lines = []
    store = PieceStore(tmp_path / "plan.nc", scenario, 250, notify=lines.append)
    a = select_best(configs, "cost", seed=5, first_runs=10, execution=ExecutionOptions(progress=False, store=store))
    assert a.stages > 1 and not lines
    pieces = sorted(store.folder.glob("*.npz"))
    assert len(pieces) > len(configs)  # the first stage's and later stages' tasks
    again = ExecutionOptions(progress=False, store=store, notify=lines.append)
    b = select_best(configs, "cost", seed=5, first_runs=10, execution=again)
    assert _resumed(lines) == len(pieces)
    _assert_same(a, b)
    for piece in pieces[::2]:
        piece.unlink()
    lines.clear()
    c = select_best(configs, "cost", seed=5, first_runs=10, execution=again)
    assert _resumed(lines) == len(pieces) - len(pieces[::2])
    _assert_same(a, c)


def _resumed(lines: list[str]) -> int:
    """Tasks loaded from the store, from the per-stage "resuming: X of Y ..." lines."""
    return sum(int(m[1]) for line in lines if (m := re.match(r"resuming: (\d+) of \d+", line)))


def test_store_for_another_seed_is_refused(tmp_path):
    scenario = scenario_from_dict(space_raw(100, 5))
    store = PieceStore(tmp_path / "plan.nc", scenario, 250)
    with pytest.raises(ValueError, match="store: made for seed 5"):
        select_best(scenario.configs, "cost", seed=6, execution=ExecutionOptions(store=store))


def test_budget_exhausted_is_undecided_with_reason():
    configs = candidates()
    result = select_best(configs, "cost", seed=5, indifference=0.0002, max_runs=150, execution=QUIET)
    assert not result.decided
    assert "max_runs = 150" in result.reason and "runs in all" in result.reason
    survivors = np.flatnonzero(result.eliminated_round == -1)
    assert len(survivors) >= 2 and all(f"#{i}" in result.reason for i in survivors)
    assert result.runs.max() == 150
    assert 0.0 <= result.pcs <= 1.0
    total = select_best(configs, "cost", seed=5, indifference=0.0002, max_total_runs=1500, execution=QUIET)
    assert not total.decided and "max_total_runs = 1500" in total.reason
    assert total.total_runs <= 1500


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(objective="throughput"), "objective: expected one of"),
        (dict(objective={"cost": -1.0}), "weight of 'cost'"),
        (dict(objective={"ettr": 1.0}), "unknown output 'ettr'"),
        (dict(objective={"cost": 0.0}), "at least one weight"),
        (dict(alpha=0.0), "alpha: expected"),
        (dict(alpha=0.7), "alpha: expected"),
        (dict(indifference=0.0), "indifference: expected"),
        (dict(indifference=float("nan")), "indifference: expected"),
        (dict(first_runs=1), "first_runs: expected"),
        (dict(max_runs=50), "max_runs: expected"),
        (dict(max_total_runs=10), "max_total_runs: expected"),
        (dict(mode="slow"), "mode: expected"),
        (dict(seed=-1), "seed: expected"),
        (dict(seed=1.5), "seed: expected"),
        (dict(configs=[]), "configs: expected"),
        (dict(configs=["a"]), r"configs\[0\]: expected"),
        (dict(execution=ExecutionOptions(workers=0)), "workers: expected a whole number from 1"),
    ],
)
def test_bad_arguments_raise_one_clear_value_error(kwargs, message):
    args = dict(configs=candidates()[:2], objective="cost", seed=0)
    args.update(kwargs)
    configs, objective = args.pop("configs"), args.pop("objective")
    with pytest.raises(ValueError, match=message):
        select_best(configs, objective, **args)


def test_infeasible_candidate_is_refused(small_raw):
    small_raw["parallelism"]["tp"] = 3
    configs = scenario_from_dict(small_raw).configs
    with pytest.raises(ValueError, match=r"configs\[0\].*infeasible"):
        select_best(configs, "cost", seed=0)


def test_kn_constants_match_the_paper_formula():
    """Kim & Nelson (2001): eta = ((2 alpha / (k - 1))^(-2 / (n0 - 1)) - 1) / 2, h² = 2 eta (n0 - 1).

    Hand-computed: k = 2, alpha = 0.05, n0 = 11: 0.1^(-0.2) = 10^0.2 = 1.5848931924611136,
    eta = 0.2924465962305568, h² = 5.848931924611136.
    """
    eta, h2 = kn_constants(2, 11, 0.05)
    assert eta == pytest.approx(0.2924465962305568, rel=1e-12)
    assert h2 == pytest.approx(5.848931924611136, rel=1e-12)
    # k = 10, alpha = 0.05, n0 = 20: (0.1 / 9)^(-2/19) = exp(2 ln(90) / 19).
    eta, h2 = kn_constants(10, 20, 0.05)
    assert eta == pytest.approx((math.exp(2 * math.log(90) / 19) - 1) / 2, rel=1e-12)
    assert h2 == pytest.approx(19 * (math.exp(2 * math.log(90) / 19) - 1), rel=1e-12)


def test_single_candidate_and_weighted_objective():
    configs = candidates()[:1]
    result = select_best(configs, {"cost": 1.0, "wall_time": 10.0}, seed=2, first_runs=20, execution=QUIET)
    assert result.best == 0 and result.decided and result.pcs == 1.0 and result.total_runs == 20
    raw = space_raw(20, 2)
    del raw["sweep"]  # the first candidate alone: sync checkpoints every 5 iterations
    raw["checkpoint"] = {"strategy": "sync", "interval": {"iterations": INTERVALS[0]}}
    ds = simulate(scenario_from_dict(raw), progress=False)
    # Same seed, same runs 0..19: the weighted mean from simulate's outputs.
    expected = float((ds["cost"] + 10.0 * ds["wall_time"]).mean())
    assert result.means[0] == pytest.approx(expected, rel=1e-12)


def test_candidates_with_runs_cut_off_are_left_out():
    """32 GPUs take about twice as long as 64; with max_wall_days between the two, the
    32-GPU runs are cut off and their cost (a lower bound, 32 GPUs x the cut-off) would
    look cheapest. They are left out, and when every candidate is cut off nothing is decided."""
    raw = space_raw(100, 0)
    raw["sweep"] = {"parallelism.gpus": [32, 64]}
    raw["run"]["max_wall_days"] = 2.0 / 24.0  # 64 GPUs: 1.2-1.7 h, 32 GPUs: 2.3-2.8 h
    lines = []
    result = select_best(
        scenario_from_dict(raw).configs,
        "cost",
        seed=4,
        first_runs=20,
        execution=ExecutionOptions(progress=False, notify=lines.append),
    )
    assert result.means[0] < result.means[1]  # the truncated 32-GPU runs look cheaper ...
    assert result.best == 1 and result.decided  # ... but are not eligible
    assert result.eliminated_round.tolist() == [0, -1]
    assert any("#0 left out: runs cut off at run.max_wall_days" in line for line in lines)
    raw["run"]["max_wall_days"] = 1.0 / 24.0
    none = select_best(scenario_from_dict(raw).configs, "cost", seed=4, first_runs=20, execution=QUIET)
    assert not none.decided and "every remaining candidate has runs cut off" in none.reason


def test_bonferroni_pcs_estimate_closed_forms():
    """1 − Σ_l P(μ_b − μ_l > δ), P from the paired t: 1/2 when the mean difference is exactly δ.

    Closed forms: one rival whose paired difference X_b − X_l has mean δ (a symmetric
    sample): P = T(0) = 1/2, so PCS = 1/2; two such rivals: 0 (the bound is clipped);
    a rival worse by 100 standard errors: P ≈ 0, PCS ≈ 1.
    """
    rng = np.random.default_rng(0)
    noise = rng.normal(size=200)
    noise = np.concatenate([noise, -noise])  # d̄ exactly 0 before the shift
    best = 10.0 + rng.normal(size=400)
    delta = 0.05
    tied = best - (delta + noise)  # X_b − X_l = δ + noise: mean exactly δ
    assert bonferroni_pcs([best, tied], 0, delta) == pytest.approx(0.5, abs=1e-12)
    assert bonferroni_pcs([best, tied, tied], 0, delta) == 0.0
    far = best + 100 * np.std(noise, ddof=1) / math.sqrt(400) + noise
    assert bonferroni_pcs([best, far], 0, delta) == pytest.approx(1.0, abs=1e-12)


def test_optimize_intervals_are_resolved_first_and_returned():
    """interval = "optimize" is resolved as simulate does (grid on seed + 1) before the selection;
    the result's configs carry the fixed interval the rows were simulated with."""
    raw = space_raw(100, 0)
    raw["sweep"] = {"checkpoint.strategy": ["sync", "async"]}
    raw["checkpoint"]["interval"] = "optimize"
    configs = scenario_from_dict(raw).configs
    lines = []
    result = select_best(
        configs,
        "cost",
        seed=3,
        first_runs=10,
        max_runs=50,
        execution=ExecutionOptions(progress=False, notify=lines.append),
    )
    assert sum("optimized checkpoint interval" in line for line in lines) == 2
    assert all(cfg.checkpoint.interval.kind == "iterations" for cfg in result.configs)
    # The rows are those of the resolved configuration: simulate it directly for the same runs.
    rows, _, _ = simulate_config(result.configs[0], int(result.runs[0]), 3, "fast")
    assert np.array_equal(rows, result.rows[0])
