"""Staffing: the ``[staffing]`` calendar as the kernel's columns, and the mean wait for a person in closed form.

A recovery that needs a person (a class's ``manual_share``) waits for one (docs/model.md §3 "Staffing"):
the response of a 24/7 team, or of an office team in its working hours; out of hours the on-call
response, or the time until the next working hour (weekends and holidays skipped) and then the response.
The local clock is the start's (``staffing.start`` in the team's ``time_zone``) plus the run's time: the
UTC offset is the start's, and daylight saving changes during the run are not followed.

:func:`staff_columns` turns the section into the ``staff_*`` columns of
:class:`~mcsim.kernels.interface.FailureClasses` (the same for every class); :func:`unstaffed_intervals`
lists the hours with nobody at work from the dates (an independent statement of the calendar the kernel
reads with its week arithmetic); :func:`mean_staff_wait_s` is the mean wait of a request arriving
uniformly over the run's span, and :func:`expected_staff_waits_s` the expected waits of a whole run, for the
planner's screen (:mod:`mcsim.model.expected_runs`).
"""

from __future__ import annotations

import datetime
import zoneinfo

import numpy as np

from mcsim.kernels.interface import STAFF_ALWAYS, STAFF_NONE, STAFF_OFFICE
from mcsim.scenario.interruptions import STAFF_TEAMS, WEEKDAYS, StaffingSection

TEAM_CODES = dict(zip(STAFF_TEAMS, (STAFF_NONE, STAFF_OFFICE, STAFF_ALWAYS), strict=True))
DAY_S = 86_400.0
PUSH_STEPS = 512  # the screen's grid of pushes of a run's end by the waits (at least 15 minutes a step)


def local_start(staffing: StaffingSection) -> datetime.datetime:
    """The run's start on the team's local clock (naive): ``start`` as given, or converted from UTC (a
    trailing ``Z``) with the time zone's offset at that instant."""
    if staffing.start.endswith("Z"):
        utc = datetime.datetime.strptime(staffing.start, "%Y-%m-%dT%H:%MZ").replace(tzinfo=datetime.UTC)
        return utc.astimezone(zoneinfo.ZoneInfo(staffing.time_zone)).replace(tzinfo=None)
    return datetime.datetime.strptime(staffing.start, "%Y-%m-%dT%H:%M")


def _seconds_since(start: datetime.datetime, day: datetime.date) -> float:
    """Local midnight of ``day`` in seconds since ``start`` (both on the local clock)."""
    return (datetime.datetime.combine(day, datetime.time()) - start).total_seconds()


def holiday_intervals_s(staffing: StaffingSection) -> np.ndarray:
    """The holidays as sorted, merged ``[from, until)`` pairs of seconds since the start, flat; those over
    before the start left out."""
    start = local_start(staffing)
    days = sorted({datetime.date.fromisoformat(d) for d in staffing.holidays})
    pairs: list[list[float]] = []
    for day in days:
        begin = _seconds_since(start, day)
        if begin + DAY_S <= 0.0:
            continue
        if pairs and pairs[-1][1] == begin:
            pairs[-1][1] = begin + DAY_S
        else:
            pairs.append([begin, begin + DAY_S])
    return np.array(pairs, dtype=np.float64).reshape(-1)


def staff_columns(staffing: StaffingSection, classes: int) -> dict[str, np.ndarray]:
    """The ``staff_*`` columns of FailureClasses for ``classes`` failure classes (each the team's)."""
    start = local_start(staffing)
    midnight = datetime.datetime.combine(start.date(), datetime.time())
    offset_s = start.weekday() * DAY_S + (start - midnight).total_seconds()
    holidays = holiday_intervals_s(staffing)
    width = max(2, holidays.size)
    padded = np.full(width, np.inf)
    padded[: holidays.size] = holidays
    days = sum(1 << WEEKDAYS.index(day) for day in staffing.working_days)

    def column(value: float, dtype: type = np.float64) -> np.ndarray:
        return np.full(classes, value, dtype=dtype)

    return {
        "staff_team": column(TEAM_CODES[staffing.team], np.int64),
        "staff_offset_s": column(offset_s),
        "staff_begin_s": column(staffing.working_hours[0] * 3600.0),
        "staff_end_s": column(staffing.working_hours[1] * 3600.0),
        "staff_days": column(days, np.int64),
        "staff_holidays_s": np.tile(padded, (classes, 1)),
        "staff_response_s": column(staffing.response_minutes * 60.0),
        "staff_on_call": column(int(staffing.on_call), np.int64),
        "staff_on_call_s": column(staffing.on_call_response_minutes * 60.0),
        "staff_on_call_sigma": column(staffing.on_call_response_sigma),
    }


def unstaffed_intervals(staffing: StaffingSection, span_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The office team's hours with nobody at work from the start to at least ``span_s``: ``(begin, end)``
    arrays of seconds since the start, disjoint and ascending; the last ends at the first working hour
    after ``span_s`` (the calendar has one: a working day repeats every week, a holiday list ends)."""
    start = local_start(staffing)
    first, last = staffing.working_hours
    working = {WEEKDAYS.index(day) for day in staffing.working_days}
    holidays = {datetime.date.fromisoformat(d) for d in staffing.holidays}
    begins, ends = [], []
    free_from = 0.0  # nobody at work from here ...
    day = start.date()
    while True:
        if day.weekday() in working and day not in holidays:
            at = _seconds_since(start, day)
            shift = (at + first * 3600.0, at + last * 3600.0)
            if shift[1] > 0.0:
                if shift[0] > free_from:  # ... until this shift begins
                    begins.append(free_from)
                    ends.append(shift[0])
                free_from = max(free_from, shift[1])
                if shift[0] >= span_s:
                    break
        day += datetime.timedelta(days=1)
    return np.array(begins), np.array(ends)


def mean_staff_wait_s(staffing: StaffingSection, span_s: np.ndarray) -> np.ndarray:
    """The mean wait for a person of a recovery that needs one, arriving uniformly over ``[0, span_s]``, s
    (an array of spans).

    For an office team without on call, the mean time to the next working hour, ``(1/S) sum (b - a)^2 / 2``
    over the hours with nobody at work ``[a, b)`` (clipped to the span: ``((b - a')^2 - (b - b')^2) / 2``),
    plus the response; with on call, the on-call response times the share of the span out of hours plus the
    response times the share in hours; for a 24/7 team the response alone."""
    span = np.asarray(span_s, dtype=np.float64)
    response_s = staffing.response_minutes * 60.0
    if staffing.team == "none":
        return np.zeros_like(span)
    if staffing.team == "24/7":
        return np.full_like(span, response_s)
    finite = np.isfinite(span) & (span > 0.0)
    longest = float(span[finite].max()) if finite.any() else 0.0
    begins, ends = unstaffed_intervals(staffing, longest)
    gap_integral = np.zeros_like(span)
    unstaffed = np.zeros_like(span)
    for a, b in zip(begins, ends, strict=True):  # a few per week of the longest span
        low, high = np.minimum(a, span), np.minimum(b, span)
        gap_integral += ((b - low) ** 2 - (b - high) ** 2) / 2.0
        unstaffed += high - low
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.where(finite, gap_integral / np.where(finite, span, 1.0), 0.0)
        off_share = np.where(finite, unstaffed / np.where(finite, span, 1.0), 0.0)
    if staffing.on_call:
        return off_share * staffing.on_call_response_minutes * 60.0 + (1.0 - off_share) * response_s
    return gap + response_s


def expected_staff_waits_s(
    staffing: StaffingSection, span_s: np.ndarray, requests: np.ndarray, rate_per_s: np.ndarray
) -> np.ndarray:
    """The expected waits for a person over a run of span ``span_s`` (s, an array) with ``requests``
    recoveries that need one, arriving at ``rate_per_s`` while the job trains, s.

    Every request waits for the response (in hours, or of a 24/7 team); out of hours an office team's
    request waits for the person on call, or, without one, until the next working hour. Then only the
    first request of a stretch ``[a, b)`` with nobody at work waits: the job does not train until ``b``,
    so no later request comes in that stretch. With requests at rate ``mu`` while training and the run
    ending ``D`` into the stretch (``D = b - a`` when it goes on past it), the stretch's expected wait is
    ``int_0^D mu e^{-mu x} (b - a - x) dx = L (1 - e^{-mu D}) - 1/mu + e^{-mu D} (D + 1/mu)``, ``L = b - a``
    (``L - (1 - e^{-mu L}) / mu``: less than the ``mu L^2 / 2`` of requests spread uniformly). ``span_s`` is
    the run's span without waits; the waits of the stretches before one move its end on
    (:func:`_first_request_waits_s`)."""
    span = np.asarray(span_s, dtype=np.float64)
    response = np.asarray(requests, dtype=np.float64) * staffing.response_minutes * 60.0
    if staffing.team != "office":
        return response if staffing.team == "24/7" else np.zeros_like(span)
    if staffing.on_call:
        off_share = 1.0 - _staffed_share(staffing, span)
        on_call_s = staffing.on_call_response_minutes * 60.0
        return np.asarray(requests) * (off_share * on_call_s + (1.0 - off_share) * staffing.response_minutes * 60.0)
    finite = np.isfinite(span) & (span > 0.0)
    span = np.where(finite, span, 0.0)
    mu = np.where(np.asarray(rate_per_s) > 0.0, rate_per_s, np.nan)
    limit = float(span.max()) if span.size else 0.0
    while True:  # the waits push the run's end on: list the stretches far enough
        begins, ends = unstaffed_intervals(staffing, limit)
        total, pushed = _first_request_waits_s(begins, ends, span, mu)
        if float(span.max() + pushed) <= ends[-1] if span.size else True:
            return total + response
        limit = float(span.max() + pushed)


def _first_request_waits_s(
    begins: np.ndarray, ends: np.ndarray, span: np.ndarray, mu: np.ndarray
) -> tuple[np.ndarray, float]:
    """The expected waits of the first requests of the stretches ``[begins, ends)`` (in order) of runs of
    span ``span`` without waits (requests at ``mu`` while training), and the largest push reached, s.

    Each run is a mixture of pushes (its end moved on by the waits so far) on a grid of
    :data:`PUSH_STEPS` steps: a stretch splits each push into the runs that wait (probability
    ``1 - e^{-mu D}``, pushed on by the wait's conditional mean) and those that do not."""
    step = max(900.0, float(np.sum(ends - begins)) / PUSH_STEPS)
    width = int(np.sum(ends - begins) // step) + 2
    push = np.arange(width) * step
    mass = np.zeros((span.size, width))
    mass[:, 0] = 1.0
    rows = np.arange(span.size)[:, None] * width
    total = np.zeros_like(span)
    for a, b in zip(begins, ends, strict=True):
        length = b - a
        into = np.clip(span[:, None] + push - a, 0.0, length)
        survive = np.exp(-mu[:, None] * into)
        wait = np.nan_to_num(length * (1.0 - survive) - 1.0 / mu[:, None] + survive * (into + 1.0 / mu[:, None]))
        total += (mass * wait).sum(axis=1)
        moved = mass * (1.0 - survive)
        with np.errstate(invalid="ignore", divide="ignore"):
            shift = np.where(moved > 0.0, np.rint(wait / np.where(survive < 1.0, 1.0 - survive, 1.0) / step), 0)
        target = np.minimum(np.arange(width) + shift.astype(np.int64), width - 1)
        mass = np.nan_to_num(mass - moved) + np.bincount(
            (rows + target).ravel(), weights=np.nan_to_num(moved).ravel(), minlength=mass.size
        ).reshape(mass.shape)
    reached = np.flatnonzero(mass.max(axis=0) > 1e-9) if mass.size else np.array([0])
    return total, float(push[reached[-1]]) if reached.size else 0.0


def _staffed_share(staffing: StaffingSection, span: np.ndarray) -> np.ndarray:
    """The share of ``[0, span]`` in working hours (1 where the span is not a positive finite time)."""
    finite = np.isfinite(span) & (span > 0.0)
    begins, ends = unstaffed_intervals(staffing, float(span[finite].max()) if finite.any() else 0.0)
    unstaffed = np.zeros_like(span)
    for a, b in zip(begins, ends, strict=True):
        unstaffed += np.minimum(b, span) - np.minimum(a, span)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(finite, 1.0 - unstaffed / np.where(finite, span, 1.0), 1.0)
