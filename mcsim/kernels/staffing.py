"""Staffing: how long a recovery that needs a person waits for one (docs/model.md §3 "Staffing").

A failure class's calendar is in its :class:`~mcsim.kernels.declarations.FailureClasses` columns
``staff_*``: the team (``STAFF_*`` of :mod:`mcsim.kernels.declarations`), the working week (the
start's local second of the week ``staff_offset_s``, a working day's hours ``staff_begin_s`` to
``staff_end_s``, the working days as bits ``staff_days``, Monday bit 0), the holidays as
``[from, until)`` intervals in seconds since the run's start (``staff_holidays_s``, pairs padded with
infinity), the response in working hours (exponential, mean ``staff_response_s``) and out of hours
(``staff_on_call`` set: lognormal, mean ``staff_on_call_s``, log-sd ``staff_on_call_sigma``).

:func:`next_staffed_s` is the calendar alone (no draws): the first time from ``t`` with a person at
work. :func:`staff_wait_s` is the whole wait of a manual recovery that needs a person from ``t``:
nothing without a team; the response for a 24/7 team or in working hours; out of hours the on-call
response, or the time until the next working hour and then the response. It draws from the recovery
stream only the responses whose mean is not zero.
"""

from __future__ import annotations

import math

from .accelerate import jit_inline
from .declarations import STAFF_ALWAYS, STAFF_NONE
from .normal import lognormal_mean_one
from .rng import uniform

DAY_S = 86_400.0
WEEK_S = 7.0 * DAY_S


@jit_inline
def _holiday_end(holidays, u):
    """The end of the holiday interval that holds time ``u``, s, or -1 when none does."""
    for i in range(0, holidays.shape[0] - 1, 2):
        if holidays[i] <= u < holidays[i + 1]:
            return holidays[i + 1]
    return -1.0


@jit_inline
def _to_next_begin_s(days, begin_s, day, second):
    """From second ``second`` of weekday ``day``, the time to the next working day's begin, s (inf: no
    working day)."""
    if (days >> day) & 1 and second < begin_s:
        return begin_s - second
    for ahead in range(1, 8):
        if (days >> ((day + ahead) % 7)) & 1:
            return ahead * DAY_S - second + begin_s
    return math.inf


@jit_inline
def next_staffed_s(fc, c, t):
    """The first time from ``t`` (s since the run's start) when class ``c``'s office team is at work: a
    working day, within its hours, not a holiday (the local clock is the start's plus ``t``)."""
    holidays = fc.staff_holidays_s[c]
    days, begin_s, end_s = fc.staff_days[c], fc.staff_begin_s[c], fc.staff_end_s[c]
    u = t
    for _ in range(holidays.shape[0] + 2):  # each turn leaves a holiday behind, or returns
        after = _holiday_end(holidays, u)
        if after >= 0.0:
            u = after
            continue
        local = (fc.staff_offset_s[c] + u) % WEEK_S
        day = int(local // DAY_S)
        second = local - day * DAY_S
        if (days >> day) & 1 and begin_s <= second < end_s:
            return u
        u += _to_next_begin_s(days, begin_s, day, second)
        after = _holiday_end(holidays, u)
        if after < 0.0:
            return u
        u = after
    return u


@jit_inline
def _response_s(mean_s, stream):
    """A response in working hours or of a 24/7 team: exponential of mean ``mean_s`` (0: none, no draw)."""
    if mean_s <= 0.0:
        return 0.0
    return -mean_s * math.log(uniform(stream))


@jit_inline
def staff_wait_s(fc, c, t, stream):
    """The time a recovery of class ``c`` that needs a person at ``t`` waits for one, s (draws from
    ``stream``: the responses whose mean is not zero)."""
    team = fc.staff_team[c]
    if team == STAFF_NONE:
        return 0.0
    if team == STAFF_ALWAYS:
        return _response_s(fc.staff_response_s[c], stream)
    staffed = next_staffed_s(fc, c, t)
    if staffed > t and fc.staff_on_call[c] == 1:
        sigma = fc.staff_on_call_sigma[c]
        if sigma > 0.0:
            return fc.staff_on_call_s[c] * lognormal_mean_one(stream, sigma)
        return fc.staff_on_call_s[c]
    return (staffed - t) + _response_s(fc.staff_response_s[c], stream)
