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
from typing import NamedTuple

import numpy as np

from mcsim.kernels.interface import STAFF_ALWAYS, STAFF_NONE, STAFF_OFFICE
from mcsim.scenario.interruptions import STAFF_TEAMS, WEEKDAYS, StaffingSection

TEAM_CODES = dict(zip(STAFF_TEAMS, (STAFF_NONE, STAFF_OFFICE, STAFF_ALWAYS), strict=True))
DAY_S = 86_400.0
FAILURE_QUANTILES = 16  # the time of a stretch's first request, as so many quantiles
PUSH_STEPS = 512  # the screen's grid of moves of a run's end by its waits and failures (at least 30 minutes a step)
MASS_FLOOR = 1e-7  # a run's share of a move below which the screen drops it
ROWS_AT_ONCE = 16  # runs whose grids are computed together (memory: their moves times the quantiles)


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
    staffing: StaffingSection,
    span_s: np.ndarray,
    requests: np.ndarray,
    rate_per_s: np.ndarray,
    failure_cost_s: np.ndarray | float = 0.0,
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
    the run's mean span without waits, ``T0`` of training and stalls plus the failures' cost; the run's end
    moves with the requests (:func:`_first_request_waits_s`): each adds ``failure_cost_s`` (``c = M (1 - T0 /
    span)``, the span's mean cost of one failure) to the run's end, and an hour in a stretch without one
    takes ``mu c`` off; the waits of the stretches before one move its end on. Without ``failure_cost_s``
    the end moves by the waits alone."""
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
    mu = np.where(finite & (np.asarray(rate_per_s) > 0.0), rate_per_s, 0.0)
    cost = np.where(finite, np.broadcast_to(failure_cost_s, span.shape), 0.0)
    limit = 2.0 * float(span.max()) if span.size else 0.0
    while True:  # the waits push the run's end on: list the stretches far enough
        begins, ends = unstaffed_intervals(staffing, limit)
        total, pushed = np.zeros_like(span), 0.0
        shape = _grid_shape(ends - begins, span, mu, cost)
        by_span = np.lexsort((mu, span))  # runs alike together: their moves hold mass in the same columns
        for rows in np.array_split(by_span, max(1, -(-span.size // ROWS_AT_ONCE))):  # memory: rows x moves x quantiles
            total[rows], reached = _first_request_waits_s(begins, ends, span[rows], (mu[rows], cost[rows]), shape)
            pushed = max(pushed, reached)
        if float(span.max() + pushed) <= ends[-1] if span.size else True:
            return total + response
        limit = 2.0 * float(span.max() + pushed)


def _grid_shape(gaps: np.ndarray, span: np.ndarray, mu: np.ndarray, cost: np.ndarray) -> tuple[float, int, int]:
    """The grid of moves of the runs' ends: its step, s (:data:`PUSH_STEPS` over the stretches' hours and
    the requests' moves, at least 30 minutes), the index of no move, and its width: from the requests' whole
    cost back (``mu c span``) to every stretch waited and that cost twice on."""
    back = float(np.max(mu * cost * span, initial=0.0))
    on = float(np.sum(gaps)) + 2.0 * back + 4.0 * float(np.max(cost, initial=0.0))
    step = max(1800.0, (on + back) / PUSH_STEPS)
    zero = int(np.ceil(back / step))
    return step, zero, zero + int(on // step) + 2


class _PushGrid(NamedTuple):
    """Runs as mixtures over moves of their end (``push``, s, on a grid of ``step``): ``mass`` by run and move;
    only the moves that hold mass (:meth:`window`) are computed."""

    push: np.ndarray
    step: float
    mass: np.ndarray

    def window(self) -> slice:
        """The moves that hold mass (below :data:`MASS_FLOOR` of a run, dropped)."""
        held = np.flatnonzero(self.mass.max(axis=0) > MASS_FLOOR) if self.mass.size else np.zeros(1, dtype=np.int64)
        return slice(int(held[0]), int(held[-1]) + 1) if held.size else slice(0, 1)

    def moved(self, at: slice, weights: np.ndarray, shifts_s: np.ndarray) -> np.ndarray:
        """The whole grid's mass after the mass ``weights[k]`` of the moves ``at`` moved on by ``shifts_s[k]``
        (each ``(k, run, move of at)``, broadcast), kept on the grid: shared between the two moves either side
        of its target in proportion to the distance (the mean move exact)."""
        n, width = self.mass.shape
        target = np.clip(np.arange(at.start, at.stop) + shifts_s / self.step, 0.0, width - 1.0)
        below = np.minimum(np.floor(target), width - 2.0)
        above = target - below
        index = (np.arange(n)[:, None] * width + below.astype(np.int64)).ravel()
        weights = np.broadcast_to(weights, target.shape)
        flat = np.bincount(index, weights=(weights * (1.0 - above)).ravel(), minlength=n * width)
        flat += np.bincount(index + 1, weights=(weights * above).ravel(), minlength=n * width)
        return flat.reshape(n, width)


def _first_request_waits_s(
    begins: np.ndarray,
    ends: np.ndarray,
    span: np.ndarray,
    requests: tuple[np.ndarray, np.ndarray],
    shape: tuple[float, int, int],
) -> tuple[np.ndarray, float]:
    """The expected waits of the first requests of the stretches ``[begins, ends)`` (in order) of runs of
    mean span ``span`` without waits (``requests``: their rate while training ``mu`` and the span each adds
    ``c``, by run), and the largest move of their end reached, s.

    Each run is a mixture of moves of its end (:class:`_PushGrid` of :func:`_grid_shape`); each stretch
    splits each move into the runs that wait and those that do not (:func:`_stretch_waits_s`). The failures
    of the working hours move a run's end by ``c (k - lambda E)`` (``k`` Poisson of mean ``lambda E``, ``E``
    the hours it trains there): mean 0, a spread of about ``c`` that changed the screen by 0.15 % at most on
    the benchmark's staffing spaces, left out (0.47 % at worst on ``staffing`` rather than 0.34 %)."""
    step, zero, width = shape
    mass = np.zeros((span.size, width))
    mass[:, zero] = 1.0
    grid = _PushGrid((np.arange(width) - zero) * step, step, mass)
    total = np.zeros_like(span)
    worked_from = 0.0
    for a, b in zip(begins, ends, strict=True):
        at = grid.window()
        if float(span.max(initial=0.0)) + grid.push[at.stop - 1] <= worked_from:
            break  # every run ended before the working hours ahead: no stretch reached any more
        waits, grid = _stretch_waits_s(grid, at, span, (a, b), requests)
        total += waits
        worked_from = b
    return total, float(max(grid.push[grid.window().stop - 1], 0.0)) if span.size else 0.0


def _stretch_waits_s(
    grid: _PushGrid, at: slice, span: np.ndarray, stretch: tuple[float, float], requests: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, _PushGrid]:
    """The expected waits of the first request of the stretch ``[a, b)`` by run, and the mixture after.

    A run that reaches the stretch with its end ``span + push`` (moving back by ``mu c`` an hour while it
    trains without a request) trains ``D = min((span + push - a) / (1 + mu c), L)`` there; one that fails at
    ``x < D`` (:data:`FAILURE_QUANTILES` quantiles of ``x``) waits ``L - x`` and its end moves on by
    ``L - x + c - mu c x``; one that does not moves back by ``mu c D``."""
    begin, end = stretch
    length = end - begin
    m, c = requests[0][:, None], requests[1][:, None]
    into = np.clip((span[:, None] + grid.push[at] - begin) / (1.0 + m * c), 0.0, length)
    survive = np.exp(-m * into)
    with np.errstate(invalid="ignore", divide="ignore"):
        inverse = np.where(m > 0.0, 1.0 / np.where(m > 0.0, m, 1.0), 0.0)
        wait = np.where(m > 0.0, length * (1.0 - survive) - inverse + survive * (into + inverse), 0.0)
        u = (np.arange(FAILURE_QUANTILES)[:, None, None] + 0.5) / FAILURE_QUANTILES  # x's, each as likely
        x = np.where(m > 0.0, -np.log1p(-u * (1.0 - survive)) * inverse, 0.0)
    mass = grid.mass[:, at]
    moved = mass * (1.0 - survive)
    weights = np.concatenate([(mass - moved)[None], np.broadcast_to(moved / FAILURE_QUANTILES, x.shape)])
    after = grid.moved(at, weights, np.concatenate([(-m * c * into)[None], length - x + c - m * c * x]))
    return (mass * wait).sum(axis=1), grid._replace(mass=after)


def _staffed_share(staffing: StaffingSection, span: np.ndarray) -> np.ndarray:
    """The share of ``[0, span]`` in working hours (1 where the span is not a positive finite time)."""
    finite = np.isfinite(span) & (span > 0.0)
    begins, ends = unstaffed_intervals(staffing, float(span[finite].max()) if finite.any() else 0.0)
    unstaffed = np.zeros_like(span)
    for a, b in zip(begins, ends, strict=True):
        unstaffed += np.minimum(b, span) - np.minimum(a, span)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(finite, 1.0 - unstaffed / np.where(finite, span, 1.0), 1.0)
