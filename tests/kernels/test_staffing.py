"""Staffing (docs/model.md §3 "Staffing"): the wait for a person against closed forms and the calendar.

The statistical test runs one failure a run: a single unit, exponential life of mean M = 1000 h, on a
job of one-hour iterations far longer than any run (the failure guard ends the run after the first
recovery). Every recovery needs a person from an office team at work 9-17 Monday to Friday (40 hours
of the week's 168), the run starting on a Monday at 9:00; nothing else takes time but a 5 s load.
The failure comes at T ~ Exp(M); the wait for a person is the gap g(T) to the next working hour, cut
short when the new unit fails first (after X ~ Exp(M)), so its mean is
E[min(g(T), X)] = int_0^inf e^{-t/M}/M M (1 - e^{-g(t)/M}) dt, integrated here from g written out
from the calendar's definition (the kernel's week arithmetic is not used).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import failure_classes, kernel_params, run_kernel

from mcsim.kernels import interface as mc
from mcsim.kernels.staffing import next_staffed_s
from mcsim.model.staffing import staff_columns, unstaffed_intervals
from mcsim.scenario.interruptions import StaffingSection

HOUR, DAY, WEEK = 3600.0, 86_400.0, 7 * 86_400.0
MTBF_S = 1000 * HOUR
MONDAY_0900 = 9 * HOUR  # the start: local seconds since Monday 00:00
OFFICE = dict(staff_team=mc.STAFF_OFFICE, staff_offset_s=MONDAY_0900, manual_share=1.0, manual_s=0.0)


def gap_to_working_hour_s(t: np.ndarray) -> np.ndarray:
    """Time from ``t`` (s since a Monday 9:00 start) to the next moment of 9-17 Monday to Friday, s."""
    local = (MONDAY_0900 + t) % WEEK
    day, second = local // DAY, local % DAY
    working = (day < 5) & (second >= 9 * HOUR) & (second < 17 * HOUR)
    # The next 9:00 of a working day: today's if before 9 on a working day, else the next working day's.
    today = (day < 5) & (second < 9 * HOUR)
    days_ahead = np.where(day < 4, 1, 7 - day)  # Mon-Thu: tomorrow; Fri, Sat, Sun: Monday
    gap = np.where(today, 9 * HOUR - second, days_ahead * DAY - second + 9 * HOUR)
    return np.where(working, 0.0, gap)


def test_mean_wait_of_one_poisson_failure_against_the_integral():
    params = kernel_params(iterations=100_000, compute_time_s=HOUR, comm_time_s=0.0, max_failures=1)
    rows = run_kernel(params, [(1, 1.0, MTBF_S, 0.0, 0, 1, 0.0, "new", OFFICE)], 4_000, seed=43)
    assert (rows[:, mc.OUT_FAILURES] == 1).all()
    waits = rows[:, mc.OUT_STAFF_WAIT_S]
    # Midpoints of one-minute steps: the gap is linear between the hours where it jumps (all on the grid).
    step = 60.0
    t = np.arange(0.0, 40 * MTBF_S, step) + step / 2
    expected = float(np.sum(np.exp(-t / MTBF_S) * (1.0 - np.exp(-gap_to_working_hour_s(t) / MTBF_S))) * step)
    z = (waits.mean() - expected) / (waits.std(ddof=1) / math.sqrt(waits.size))
    assert abs(z) < 4.0, f"mean wait {waits.mean() / HOUR:.3f} h against {expected / HOUR:.3f} h (z = {z:.2f})"
    # About the week's mean gap of a uniform arrival, (4 x 16^2 + 64^2) / 2 / 168 = 15.24 h, less the cuts.
    assert 14 * HOUR < expected < 15.24 * HOUR
    # The wait is part of the recovery: the recovery is the wait and the load (or the wait cut short).
    assert (rows[:, mc.OUT_RECOVERY_S] >= waits).all()


def test_no_team_waits_nothing_and_draws_nothing():
    # team none (the default) with a person's share: no wait, and the same runs as without the fields set.
    params = kernel_params(iterations=2_000, max_failures=50)
    classes = [(1, 1.0, 300.0, 20.0, 0, 1, 0.0, "new", dict(manual_share=0.5, manual_s=60.0))]
    plain = run_kernel(params, classes, 200, seed=7)
    fields = dict(staff_offset_s=3 * DAY, staff_response_s=99.0, staff_holidays_s=[(0.0, 1e6)])
    calendar = run_kernel(params, [classes[0][:8] + ({**classes[0][8], **fields},)], 200, seed=7)
    assert (plain[:, mc.OUT_STAFF_WAIT_S] == 0.0).all()
    np.testing.assert_array_equal(plain, calendar)


def test_24_7_team_waits_its_exponential_response():
    # A 24/7 team answers after an exponential response of mean 30 s whatever the hour: one failure a run
    # (a unit that fails between 370 and 570 s, as in test_restart_paths.py, whose replacement lives as long:
    # a wait is cut short with probability e^{-370/30} < 1e-5), the wait's mean and sd 30 s.
    fields = dict(manual_share=1.0, staff_team=mc.STAFF_ALWAYS, staff_response_s=30.0)
    params = kernel_params(iterations=520, max_failures=1)
    rows = run_kernel(params, [(1, 50.0, 500.0, 20.0, 0, 1, 0.0, "new", fields)], 10_000, seed=3)
    waits = rows[:, mc.OUT_STAFF_WAIT_S]
    z = (waits.mean() - 30.0) / (30.0 / math.sqrt(waits.size))
    assert abs(z) < 4.0, f"mean response {waits.mean():.1f} s (z = {z:.2f})"
    assert np.allclose(rows[:, mc.OUT_RECOVERY_S], waits + 20.0 + 5.0)  # the wait, the recovery, the load


def test_kernel_calendar_equals_the_dates_calendar():
    # A team in US/Pacific from Saturday 2021-11-20 10:30, with Thanksgiving and the day after and the
    # Christmas-New Year break off: the kernel's next working moment (week arithmetic on the columns) is
    # the end of the unstaffed hours the model lists from the dates, at any time of the run.
    staffing = StaffingSection(
        team="office",
        time_zone="US/Pacific",
        start="2021-11-20T10:30",
        working_hours=(8.5, 17.0),
        holidays=("2021-11-25", "2021-11-26", *(f"2021-12-{d}" for d in range(24, 32)), "2022-01-01"),
    )
    fc = failure_classes([(1, 1.0, 1.0, 0.0, 0, 1, 0.0, "new", {})])
    fc = fc._replace(**staff_columns(staffing, 1))
    begins, ends = unstaffed_intervals(staffing, 60 * DAY)
    times = np.random.default_rng(5).uniform(0.0, 60 * DAY, 3_000)
    for t in np.concatenate([times, begins, ends, ends - 1e-3]):
        inside = (begins <= t) & (t < ends)
        expected = ends[inside][0] if inside.any() else t
        assert next_staffed_s(fc, 0, t) == pytest.approx(expected, abs=1e-6), t  # the week arithmetic: ulps
    # Thanksgiving week: nobody from Wednesday 17:00 to Monday 8:30 (four nights and days, 111.5 h).
    thanksgiving = (begins <= 5 * DAY) & (5 * DAY < ends)
    assert (ends - begins)[thanksgiving][0] == 111.5 * HOUR
