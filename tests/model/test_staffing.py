"""The screen's mean wait for a person (mcsim.model.staffing, docs/model.md §3 "Staffing") against the
week written out by hand, and the calendar's columns."""

from __future__ import annotations

import numpy as np
import pytest

from mcsim.kernels import interface as mc
from mcsim.model.staffing import expected_staff_waits_s, mean_staff_wait_s, staff_columns
from mcsim.scenario.interruptions import StaffingSection

HOUR, WEEK = 3600.0, 7 * 86_400.0
OFFICE = StaffingSection(team="office")  # 9-17 Monday to Friday from Monday 2024-01-01 9:00


def test_whole_weeks_of_40_hours():
    # A week from Monday 9:00: four nights of 16 h and a weekend of 64 h with nobody at work; a request
    # arriving uniformly waits sum L^2 / 2 / 168 h = (4 x 16^2 + 64^2) / 2 / 168 = 15.238 h.
    spans = np.array([1.0, 4.0, 52.0]) * WEEK
    np.testing.assert_allclose(mean_staff_wait_s(OFFICE, spans), (4 * 16**2 + 64**2) / 2 / 168 * HOUR, rtol=1e-12)


def test_a_holiday_joins_two_nights():
    # Wednesday 2024-01-03 off: Tuesday 17:00 to Thursday 9:00 is 40 h (for two nights and a day).
    staffing = StaffingSection(team="office", holidays=("2024-01-03",))
    expected = (16**2 + 40**2 + 16**2 + 64**2) / 2 / 168 * HOUR
    assert mean_staff_wait_s(staffing, np.array([WEEK]))[0] == pytest.approx(expected, rel=1e-12)


def test_on_call_and_24_7_responses():
    # On call (30 min) out of hours, 128 of the 168 hours; no response in hours.
    on_call = StaffingSection(team="office", on_call=True, on_call_response_minutes=30.0)
    assert mean_staff_wait_s(on_call, np.array([WEEK]))[0] == pytest.approx(128 / 168 * 1800.0, rel=1e-12)
    # Within a partial span: from Monday 9:00 to Tuesday 9:00, 8 h in hours and 16 h out.
    partial = StaffingSection(team="office", on_call=True, on_call_response_minutes=30.0, response_minutes=6.0)
    assert mean_staff_wait_s(partial, np.array([24 * HOUR]))[0] == pytest.approx((16 * 1800.0 + 8 * 360.0) / 24)
    always = StaffingSection(team="24/7", response_minutes=10.0)
    np.testing.assert_array_equal(mean_staff_wait_s(always, np.array([HOUR, WEEK])), 600.0)
    np.testing.assert_array_equal(mean_staff_wait_s(StaffingSection(), np.array([WEEK])), 0.0)


def test_columns_of_the_calendar():
    # Saturday 2021-11-20 10:30 in US/Pacific; Thanksgiving Thursday and Friday merge into one interval
    # from 4 days 13.5 h after the start; a UTC start is converted with the zone's offset (PST, UTC-8).
    staffing = StaffingSection(
        team="office", time_zone="US/Pacific", start="2021-11-20T10:30", holidays=("2021-11-26", "2021-11-25")
    )
    columns = staff_columns(staffing, 2)
    assert columns["staff_team"].tolist() == [mc.STAFF_OFFICE] * 2
    assert columns["staff_offset_s"][0] == 5 * 86_400.0 + 10.5 * HOUR
    assert columns["staff_days"][0] == 0b11111
    begin = 4 * 86_400.0 + 13.5 * HOUR
    np.testing.assert_array_equal(columns["staff_holidays_s"], [[begin, begin + 2 * 86_400.0]] * 2)
    utc = staff_columns(StaffingSection(team="office", time_zone="US/Pacific", start="2021-11-20T18:30Z"), 1)
    assert utc["staff_offset_s"][0] == columns["staff_offset_s"][0]


def test_expected_waits_of_a_stretch_against_a_direct_simulation():
    # From Friday 17:00, the weekend's 64 h with nobody at work, a run of 8 h of training (it ends by
    # Monday 17:00 whether it waits or not), requests at mu = 1 / 20 h while it trains: the first one
    # within the run's 8 h waits until Monday 9:00. Drawn here with NumPy: x ~ Exp(mu), wait 64 h - x
    # when x < 8 h; the screen's closed form within 4 standard errors.
    staffing = StaffingSection(team="office", start="2024-01-05T17:00")
    mu = 1.0 / (20 * HOUR)
    x = np.random.default_rng(11).exponential(1.0 / mu, 200_000)
    waits = np.where(x < 8 * HOUR, 64 * HOUR - x, 0.0)
    expected = expected_staff_waits_s(staffing, np.array([8 * HOUR]), np.array([0.4]), np.array([mu]))[0]
    assert abs(waits.mean() - expected) < 4 * waits.std() / np.sqrt(waits.size)
    # A response in hours adds the requests' count times its mean.
    answered = StaffingSection(team="office", start="2024-01-05T17:00", response_minutes=10.0)
    with_response = expected_staff_waits_s(answered, np.array([8 * HOUR]), np.array([0.4]), np.array([mu]))[0]
    assert with_response == pytest.approx(expected + 0.4 * 600.0)


def _simulated_walls_s(t0_s: float, mtbf_s: float, restart_s: float, runs: int, seed: int) -> np.ndarray:
    """Runs of ``t0_s`` of work from Monday 2024-01-01 9:00 (9-17 Monday to Friday, Wednesday a holiday: the
    stretches with nobody at work written out here), every failure (exponential, mean ``mtbf_s``, while
    training or recovering; no work lost) waiting for the next working hour out of hours and then recovering
    for ``restart_s`` (a failure during it begins again). Every run steps one draw at a time, in NumPy."""
    begins = np.array([8, 32, 104, 128, 152, 200], dtype=np.float64) * HOUR  # Mon 17:00, Tue 17:00, Thu ...
    ends = np.array([24, 72, 120, 144, 216, 240], dtype=np.float64) * HOUR  # ... Tue 9:00, Thu 9:00 (Wed off) ...
    rng = np.random.default_rng(seed)
    t, work = np.zeros(runs), np.zeros(runs)
    recovering, done = np.zeros(runs, dtype=bool), np.zeros(runs, dtype=bool)
    while not done.all():
        draw = rng.exponential(mtbf_s, runs)
        training, active = ~recovering & ~done, recovering & ~done
        finished = training & (work + draw >= t0_s)
        t += np.where(finished, t0_s - work, 0.0)
        done |= finished
        trained, recovered = training & ~finished, active & (draw >= restart_s)
        work += np.where(trained, draw, 0.0)
        t += np.where(trained | (active & ~recovered), draw, 0.0) + np.where(recovered, restart_s, 0.0)
        failed = trained | (active & ~recovered)
        stretch = np.searchsorted(ends, t, side="right")
        inside = failed & (stretch < ends.size) & (begins[np.minimum(stretch, ends.size - 1)] <= t)
        t += np.where(inside, ends[np.minimum(stretch, ends.size - 1)] - t, 0.0)
        recovering = (recovering & ~recovered) | trained
    return t


@pytest.mark.parametrize(("t0_h", "mtbf_h"), [(23.0, 23.4), (11.5, 11.7), (46.0, 46.9)])
def test_expected_waits_of_runs_whose_end_moves_with_their_failures(t0_h, mtbf_h):
    # The staffing space's three sizes (bench_screen_features.py). Without work lost, Daly's span is
    # T0 e^{R/M} (every failure costs M (e^{R/M} - 1) with the failures during its recovery), T0 / M failed
    # attempts, each failure c = M (1 - T0 / span). The screen's wall time within 0.75 % (its first order)
    # plus 4 standard errors of the runs drawn here (1.3 %); a screen that moved the run's end by the
    # waits alone was 3.6 % short at 23.4 h and 2.3 % over at 11.7 h.
    t0, mtbf, restart = t0_h * HOUR, mtbf_h * HOUR, 1.5 * HOUR
    walls = _simulated_walls_s(t0, mtbf, restart, 100_000, seed=43)
    span = t0 * np.exp(restart / mtbf)
    cost = mtbf * (1.0 - t0 / span)
    waits = expected_staff_waits_s(
        StaffingSection(team="office", holidays=("2024-01-03",)),
        np.array([span]),
        np.array([t0 / mtbf]),
        np.array([1.0 / mtbf]),
        np.array([cost]),
    )[0]
    error = (span + waits) / walls.mean() - 1.0
    assert abs(error) < 0.0075 + 4.0 * walls.std() / np.sqrt(walls.size) / walls.mean()
