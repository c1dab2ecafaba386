"""Decisions under uncertainty (parameter draws of the uncertain inputs): P(best), expected regret, deadline
probability over draws and runs, the robust choice and the input that would change it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from mcsim.analysis import compare, configurations, deadline, decisions, ranking
from mcsim.analysis.robustness import robustness, split_groups
from mcsim.errors import NoneQualifies

DRAWS = 100
RUNS = 4


def _designed(a_of_x, b_of_x, draws: int = DRAWS, runs: int = RUNS, wall=None) -> xr.Dataset:
    """A hand-built result with draws, in the shape mcsim writes: configurations A and B.

    Input x takes the midpoints (d + 0.5) / D of D equal cells of [0, 1]; input y is a
    permutation of the same points with no effect on anything. The cost of a
    configuration in draw d is ``f(x_d)`` plus run offsets that add up to zero within the
    draw and are the same in both configurations (common random numbers), so the mean
    over the draw's runs is exactly f(x_d).
    """
    x = (np.arange(draws) + 0.5) / draws
    y = x[(np.arange(draws) * 37) % draws]  # 37 is prime to 100: a permutation, unrelated to x
    offsets = np.linspace(-0.01, 0.01, runs)
    cost = np.stack([f(x)[:, None] + offsets[None, :] for f in (a_of_x, b_of_x)])
    wall_time = np.full(cost.shape, 24.0) if wall is None else wall
    ds = xr.Dataset(
        {
            "cost": (("config", "draw", "run"), cost, {"units": "USD"}),
            "wall_time": (("config", "draw", "run"), wall_time, {"units": "h"}),
            "completed": (("config", "draw", "run"), np.ones(cost.shape, bool)),
            "feasible": (("config", "draw"), np.ones(cost.shape[:2], bool)),
            "x": ("draw", x, {"units": "1"}),
            "y": ("draw", y, {"units": "h"}),
        },
        coords={"config": ["A", "B"], "draw": np.arange(draws), "run": np.arange(runs)},
    )
    ds.attrs.update(draws=draws, design="sobol", uncertain_inputs="x y")
    return ds


@pytest.fixture
def kinked():
    # A costs x, B costs 0.3: A is best exactly in the draws with x < 0.3
    return _designed(lambda x: x, lambda x: np.full_like(x, 0.3))


def test_p_best_and_regret_match_the_closed_form(kinked):
    table = ranking.decision_table(kinked, "cost")
    # On the design, x < 0.3 in 30 of the 100 draws: P(best A) = 0.3, P(best B) = 0.7 exactly.
    np.testing.assert_allclose(table.p_best.values, [0.3, 0.7], atol=1e-12)
    # Regret of A: E[max(x - 0.3, 0)] = (1 - 0.3)^2 / 2 = 0.245; of B: E[max(0.3 - x, 0)] = 0.3^2 / 2 = 0.045.
    # The midpoint rule integrates these piecewise-linear functions exactly (the kink at 0.3
    # is a cell boundary), so the design gives the integrals to round-off.
    np.testing.assert_allclose(table.expected_regret.values, [0.245, 0.045], atol=1e-12)
    assert table.expected_regret.attrs["units"] == "USD"
    # Wilson interval of 30 successes in 100 draws (Wilson 1927, the formula in analysis' docstring)
    low, high = decisions.wilson_interval(30, 100)
    assert (float(table.p_best_ci95_low[0]), float(table.p_best_ci95_high[0])) == pytest.approx((low, high))
    assert 0.21 < low < 0.3 < high < 0.40
    # paired run noise is zero (same offsets in both): every draw is won clearly
    np.testing.assert_allclose(table.p_best_clear.values, table.p_best.values)
    # regret interval: normal over draws, mean +- 1.96 sd / sqrt(D) of the per-draw regrets
    x = kinked.x.values
    per_draw = np.maximum(0.3 - x, 0.0)
    half = 1.959964 * per_draw.std(ddof=1) / math.sqrt(DRAWS)
    assert float(table.expected_regret_ci95_high[1]) == pytest.approx(0.045 + half, rel=1e-6)


def test_direction_higher_is_better(kinked):
    ettr = kinked.cost.rename("ettr")
    ds = kinked.assign(ettr=ettr)  # higher is better: A (x) wins where x > 0.3, 70 of the draws
    table = ranking.decision_table(ds, "ettr")
    np.testing.assert_allclose(table.p_best.values, [0.7, 0.3], atol=1e-12)
    np.testing.assert_allclose(table.expected_regret.values, [0.045, 0.245], atol=1e-12)


def test_best_adds_p_best_and_regret_of_the_pick(kinked):
    record = ranking.best(kinked, "cost")
    assert record["configuration"] == {"config": "B"}
    assert record["p_best"] == pytest.approx(0.7) and record["expected_regret"] == pytest.approx(0.045)
    assert record["draws"] == DRAWS and record["runs"] == DRAWS * RUNS
    # the CI of the mean comes from the draw means (all 0.3 for B: zero width)
    assert record["ci95"] == pytest.approx((0.3, 0.3))
    a = configurations.config_record(kinked, {"config": "A"}, "cost")
    half = 1.959964 * kinked.x.values.std(ddof=1) / math.sqrt(DRAWS)  # A's draw means are x
    assert a["ci95"][1] - a["mean"] == pytest.approx(half, rel=1e-6)
    assert ranking.best(kinked, "cost")["configuration"] == {"config": "B"}


def test_prob_better_pairs_draws_and_runs(kinked):
    # pooled over (draw, run) pairs with the same offsets: A beats B in the 30 draws with x < 0.3
    p, ci, n = compare.prob_better(kinked, {"config": "A"}, {"config": "B"}, "cost")
    assert (p, n) == (pytest.approx(0.3), DRAWS * RUNS)
    q, (low, high), draws = compare.prob_better_by_draw(kinked, {"config": "A"}, {"config": "B"}, "cost")
    assert (q, draws) == (pytest.approx(0.3), DRAWS)
    assert (low, high) == pytest.approx(decisions.wilson_interval(30, 100))
    # unpaired (run order reversed in B) the pooled estimate would differ: pairing is by (draw, run)
    shuffled = kinked.copy(deep=True)
    shuffled["cost"].values[1] = shuffled["cost"].values[1][:, ::-1] + np.linspace(-0.5, 0.5, RUNS)
    assert compare.prob_better(shuffled, {"config": "A"}, {"config": "B"}, "cost").probability != pytest.approx(0.3)
    diff = compare.paired_difference(kinked, {"config": "A"}, {"config": "B"}, "cost")
    # CI from the spread of the per-draw mean differences x_d - 0.3
    half = 1.959964 * kinked.x.values.std(ddof=1) / math.sqrt(DRAWS)
    assert diff["mean"] == pytest.approx(0.2) and diff["ci95"][1] - diff["mean"] == pytest.approx(half, rel=1e-6)
    assert diff["draws"] == DRAWS


def test_noise_within_a_draw_is_not_counted_as_a_clear_win():
    # A and B equal in expectation in every draw, runs independent noise: P(best) ~ 0.5 each,
    # but almost no draw is won by more than 1.96 standard errors (about 5 % by chance, two-sided).
    rng = np.random.default_rng(3)
    ds = _designed(lambda x: np.zeros_like(x), lambda x: np.zeros_like(x), runs=20)
    ds["cost"].values[:] = rng.normal(0.0, 1.0, ds["cost"].shape)
    table = ranking.decision_table(ds, "cost")
    assert float(table.p_best.sum()) == pytest.approx(1.0)
    assert float(table.p_best_clear.sum()) < 0.15  # ~0.05 expected; binomial(100, 0.05): P(> 15) < 1e-4


def test_refusals(kinked):
    plain = kinked.isel(draw=0, drop=True)
    with pytest.raises(ValueError, match="no parameter draws"):
        ranking.decision_table(plain, "cost")
    with pytest.raises(ValueError, match="no parameter draws"):
        robustness(plain, "cost")
    with pytest.raises(ValueError, match="groups"):
        robustness(kinked, "cost", groups=1)
    with pytest.raises(ValueError):
        ranking.decision_table(kinked.assign(n_memory_recoveries=kinked.cost), "n_memory_recoveries")


# ---------------------------------------------------------------- deadlines


def test_pooled_deadline_probability_designed_exactly():
    # draw d (of 10) has its first d runs (of 10) within the deadline (1 day), the rest at 5 days:
    # pooled P = mean(d) / 10 = 0.45; draws whose own probability is >= 0.7: d in {7, 8, 9}: 0.3
    draws, runs = 10, 10
    wall = np.where(np.arange(runs)[None, :] < np.arange(draws)[:, None], 24.0, 120.0)
    ds = _designed(lambda x: x, lambda x: x + 1, draws=draws, runs=runs, wall=np.stack([wall, wall]))
    table = deadline.prob_within(ds, days=2.0, probability=0.7)
    np.testing.assert_allclose(table.p_within.values, [0.45, 0.45])
    np.testing.assert_allclose(table.draws_meeting.values, [0.3, 0.3])
    # cheapest_within uses the pooled probability and says so
    pick = deadline.cheapest_within(ds, 2.0, 0.4)
    assert pick["configuration"] == {"config": "A"} and pick["p_within"] == pytest.approx(0.45)
    assert pick["probability_basis"].startswith("predictive") and pick["draws_meeting"] is not None
    with pytest.raises(NoneQualifies) as caught:  # 0.45 < 0.5, although 5 draws reach 0.5
        deadline.cheapest_within(ds, 2.0, 0.5)
    assert caught.value.closest["p_within"] == pytest.approx(0.45)  # A and B tie; A is the cheaper
    assert caught.value.closest["configuration"] == {"config": "A"}


def test_pooled_deadline_probability_matches_the_lomax_closed_form():
    # Wall time W | rate ~ Exponential(rate), rate ~ Gamma(a = 3, rate b = 2 days) across draws:
    # P(W <= t) = 1 - (b / (b + t))^a (Lomax), here t = 1 day: 1 - (2/3)^3 = 0.7037.
    rng = np.random.default_rng(11)
    draws, runs, a, b, t = 400, 50, 3.0, 2.0, 1.0
    rate = rng.gamma(a, 1 / b, draws)
    wall = rng.exponential(1 / rate[:, None], (draws, runs)) * 24.0
    ds = _designed(lambda x: x, lambda x: x, draws=draws, runs=runs, wall=np.stack([wall, wall]))
    table = deadline.prob_within(ds, days=t, probability=0.8)
    exact = 1 - (b / (b + t)) ** a
    per_draw = (wall <= t * 24.0).mean(axis=1)
    se = per_draw.std(ddof=1) / math.sqrt(draws)  # draws are the independent units
    assert abs(float(table.p_within[0]) - exact) < 4 * se
    low, high = float(table.p_within_ci95_low[0]), float(table.p_within_ci95_high[0])
    # the interval has the width of the draws-as-clusters standard error, not the naive binomial one
    assert (high - low) / 2 == pytest.approx(1.959964 * se, rel=0.1)
    assert (high - low) / 2 > 2 * 1.959964 * math.sqrt(exact * (1 - exact) / (draws * runs))
    # share of draws whose own probability 1 - exp(-rate t) is >= 0.8: P(rate >= -ln(0.2) / t),
    # a gamma tail; the per-draw estimate from 50 runs blurs it a little, hence 4 SE plus 0.03
    from scipy import stats

    tail = stats.gamma(a, scale=1 / b).sf(-math.log(0.2) / t)
    assert abs(float(table.draws_meeting[0]) - tail) < 4 * math.sqrt(tail * (1 - tail) / draws) + 0.03


def test_without_draws_prob_within_is_the_share_of_runs(kinked):
    plain = kinked.isel(draw=0, drop=True)
    plain["wall_time"].values[0, :3] = 100.0
    table = deadline.prob_within(plain, days=2.0)
    np.testing.assert_allclose(table.p_within.values, [0.25, 1.0])
    assert "probability_basis" not in deadline.cheapest_within(plain, 2.0, 0.9)


# ---------------------------------------------------------------- robustness


def test_robustness_names_the_input_that_flips_the_decision(kinked):
    record = robustness(kinked, "cost")
    assert record["choice"]["configuration"] == {"config": "B"}
    assert record["choice"]["expected_regret"] == pytest.approx(0.045)
    assert [leader["configuration"] for leader in record["leaders"]] == [{"config": "B"}, {"config": "A"}]
    first, second = record["inputs"]
    assert record["changing_input"] == "x" and first["input"] == "x" and first["changes"] and first["clear"]
    # below the median of x (x < 0.5) A's mean cost is 0.25 < 0.3: A wins; above, B.
    low, high = first["groups"]
    assert low["best"] == {"config": "A"} and high["best"] == {"config": "B"}
    # B loses 0.3 - 0.25 = 0.05 in the lower half, nothing in the upper: value of information 0.025
    assert low["pick_regret"] == pytest.approx(0.05) and high["pick_regret"] == pytest.approx(0.0)
    assert first["value_of_information"] == pytest.approx(0.025)
    # y has no effect: B wins both of its halves (A's mean there is about 0.5) and learning it is worth 0
    assert second["input"] == "y" and not second["changes"] and second["value_of_information"] == 0.0
    assert all(part["best"] == {"config": "B"} for part in second["groups"])


def test_robustness_on_terciles(kinked):
    record = robustness(kinked, "cost", groups=3)
    x = next(item for item in record["inputs"] if item["input"] == "x")
    # terciles of 100 draws: 34, 33, 33; A wins the lowest (mean x = 0.17 < 0.3) only
    assert [part["draws"] for part in x["groups"]] == [34, 33, 33]
    assert [part["best"]["config"] for part in x["groups"]] == ["A", "B", "B"]


def test_split_groups_are_equal_count_parts():
    values = np.array([5.0, 1.0, 3.0, 3.0, 2.0, 4.0])
    np.testing.assert_array_equal(split_groups(values, 2), [1, 0, 0, 1, 0, 1])
    assert np.bincount(split_groups(np.arange(7.0), 3)).tolist() == [3, 2, 2]


def test_report_sentence_names_the_changing_input(kinked):
    from mcsim.report.uncertainty import _changing_text

    text = _changing_text(robustness(kinked, "cost"))
    # B is the robust choice; below the median of x (0.495, the largest x of the lower half) A is better
    assert "Which input would change it: x" in text and "below 0.495" in text and "config=A" in text
    assert "y" not in text.split("save")[1]  # y is worth nothing: not listed as the next input


# ---------------------------------------------------------------- hostile arguments: one-line errors


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda ds: deadline.cheapest_within(ds, days=-1), r"days: expected a finite number of days > 0, got -1"),
        (lambda ds: deadline.cheapest_within(ds, days=math.nan), r"days: .* got nan"),
        (lambda ds: deadline.cheapest_within(ds, days=math.inf), r"days: .* got inf"),
        (lambda ds: deadline.cheapest_within(ds, days="3"), r"days: .* got '3'"),
        (lambda ds: deadline.cheapest_within(ds, days=2, probability=2), r"probability: expected a number in \(0, 1\)"),
        (lambda ds: deadline.cheapest_within(ds, days=2, probability=90), r"not a percentage: 0\.9 for 90 %"),
        (lambda ds: deadline.cheapest_within(ds, days=2, probability=0), r"probability: .* got 0"),
        (lambda ds: deadline.prob_within(ds, days=-3), r"days: .* got -3"),
        (lambda ds: deadline.prob_within(ds, days=2, probability=-0.1), r"probability: .* got -0\.1"),
        (lambda ds: robustness(ds, "cost", groups=2.5), r"groups: expected a whole number from 2 to .* got 2\.5"),
        (lambda ds: robustness(ds, "cost", groups=True), r"groups: .* got True"),
    ],
)
def test_hostile_arguments_are_refused_in_one_line(kinked, call, match):
    with pytest.raises(ValueError, match=match) as caught:
        call(kinked)
    assert "\n" not in str(caught.value)


def test_robustness_of_a_file_opened_with_xarray_open_dataset(kinked, tmp_path):
    # documented as equivalent to open_results: text coordinates come back as Python objects
    import mcsim

    path = mcsim.write_results(kinked, tmp_path / "k.nc")
    with xr.open_dataset(path) as opened:
        assert opened["config"].dtype == object  # the case that raised AttributeError (str has no .item())
        found = robustness(opened.load(), "cost")
    expected = robustness(kinked, "cost")
    assert found["choice"]["configuration"] == expected["choice"]["configuration"] == {"config": "B"}
    assert found["changing_input"] == expected["changing_input"] == "x"
    assert found["choice"]["expected_regret"] == pytest.approx(expected["choice"]["expected_regret"])
