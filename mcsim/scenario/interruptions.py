"""The sections of a scenario about interruptions and their recovery: ``[[failures]]``, ``[restart]`` and
``[staffing]`` (the people a manual recovery waits for), ``[scheduler]`` (the batch system: job time limits,
queue waits, crashed jobs released late).

Each is a frozen dataclass (:func:`~mcsim.scenario.frozen.section`), each key a field made by
:func:`~mcsim.scenario.validation.param`, as the other sections in :mod:`mcsim.scenario.schema`, which
lists them among the scenario's tables. :data:`FAILURE_KINDS` names the kinds of failure class in the
kernel's code order, :data:`FLEET_KINDS` those whose rate is the fleet's; :data:`STAFF_TEAMS` and
:data:`WEEKDAYS` the values of ``staffing.team`` and ``staffing.working_days``, and the field kinds of
the calendar's keys (:class:`TimeZoneName`, :class:`LocalDateTime`, :class:`HourRange`, :class:`Weekdays`,
:class:`LocalDates`); :data:`QUEUE_LAWS` the sourced laws of the wait in a batch queue.

Defaults are assumptions unless ``docs/model.md`` ("Defaults and their sources") cites the publication
they are taken from.
"""

from __future__ import annotations

import datetime
import zoneinfo
from typing import Any

from mcsim.errors import ScenarioError
from mcsim.scenario.frozen import section
from mcsim.scenario.validation import MAX_GPUS, Durations, StateOrNumber, coerce_number, param, type_name

# The kinds of failure class (docs/model.md §3 "Kinds of interruption"), in the kernel's code order.
FAILURE_KINDS = ("fail_stop", "hang", "instability", "planned")
# The kinds of failure class whose rate is the fleet's (hardware.failure_rate_factor scales it): hardware
# and software faults; a training instability is the model's, a planned stop the operator's.
FLEET_KINDS = ("fail_stop", "hang")


@section
class RestartSection:
    from_parts: bool = param(
        False,
        kind=bool,
        doc="add the restart's parts below to every recovery (recovery_minutes is then detection and "
        "replacement, or the decision, alone); false: recovery_minutes is the whole restart, as measured",
    )
    # Defaults: ByteRobust (Wan et al., SOSP'25, arXiv 2509.16293) Table 7, restart times of jobs of
    # 2,048-16,384 GPUs, fitted linearly in the GPUs: a requeue (rescheduled) 441 s + 20.7 ms per GPU, an
    # in-place hot update 44 s + 1.26 ms per GPU; re-scheduling is their difference (docs/model.md §8).
    reschedule_s: float = param(
        397.0, ge=0, le=1e6, unit="s", doc="the job's nodes allocated again by the scheduler: fixed part"
    )
    reschedule_ms_per_gpu: float = param(19.5, ge=0, le=1e6, unit="ms", doc="... and this much per GPU in the job")
    process_start_s: float = param(
        44.0, ge=0, le=1e6, unit="s", doc="training processes started in place on the nodes (framework, state)"
    )
    communicator_ms_per_gpu: float = param(
        1.26,
        ge=0,
        le=1e6,
        unit="ms",
        doc="collective communicators set up again: this much per GPU in the job",
    )
    warmup_iterations: int = param(
        0, kind=int, ge=0, le=1_000_000_000, doc="iterations after a restart at reduced throughput (none published)"
    )
    warmup_throughput: float = param(0.5, ge=0.01, le=1, doc="the warm-up iterations' share of the steady throughput")
    # Abandoned restarts (docs/model.md §3), with or without from_parts; none by default (no published share).
    abandoned_share: float = param(0.0, ge=0, lt=1, doc="probability that a restart fails again within its first steps")
    abandoned_minutes: float = param(0.0, ge=0, le=1e6, unit="min", doc="mean time an abandoned attempt loses")
    abandoned_sigma: float = param(0.0, ge=0, le=3, doc="lognormal log-sd of that time (0: every one the mean)")


@section
class FailureClass:
    name: str = param(kind=str, doc="unique name, used in sweep keys")
    scope: str = param("gpu", kind=str, choices=("gpu", "node", "cluster"))
    shape: float = param(1.0, ge=0.05, le=20, doc="Weibull shape k")
    mtbf_hours: float = param(gt=0, le=1e9, unit="h", doc="mean time between failures of one unit")
    kind: str = param(
        "fail_stop",
        kind=str,
        choices=FAILURE_KINDS,
        doc="fail_stop (detected at once), hang (no progress until detected), instability (rolls back "
        "further), planned (a clean stop: maintenance, nothing rolled back)",
    )
    recovery_minutes: float = param(
        20.0,
        ge=0,
        le=1e6,
        unit="min",
        doc="mean detection + replacement + restart (instability: decision), before the load",
    )
    recovery_sigma: float = param(0.0, ge=0, le=3, doc="lognormal log-sd of the recovery time (0: every one the mean)")
    recovery_durations_minutes: tuple[float, ...] = param(
        (),
        kind=Durations,
        ge=0,
        le=1e6,
        unit="min",
        doc="measured recoveries (detection + replacement + restart): each recovery is one of them at random, "
        "instead of recovery_minutes",
    )
    manual_share: float = param(0.0, ge=0, le=1, doc="share of recoveries that need a person")
    manual_hours: float = param(0.0, ge=0, le=1e4, unit="h", doc="mean extra time of a recovery that needs a person")
    requeue_share: float = param(1.0, ge=0, le=1, doc="restart.from_parts: share of restarts by requeue, not in place")
    detection_minutes: float = param(
        0.0, ge=0, le=1e6, unit="min", doc="kind hang: time from the hang to its detection"
    )
    rollback_checkpoints: int = param(
        0, kind=int, ge=0, le=1_000_000, doc="kind instability: storage checkpoints rolled back beyond the last"
    )
    domain_nodes: int = param(
        1, kind=int, ge=1, le=MAX_GPUS, doc="scope node: nodes one event takes out (a rack, a leaf switch)"
    )
    repair_hours: float = param(
        24.0, ge=0, le=1e6, unit="h", doc="mean time until a failed node returns to the spare pool"
    )
    repair_sigma: float = param(0.0, ge=0, le=3, doc="lognormal log-sd of the repair time (0: every one repair_hours)")
    bad_replacement_share: float = param(
        0.0,
        ge=0,
        lt=1,
        doc="share of the units put in after a failure that are bad: they fail again after an exponential "
        "life of mean bad_replacement_hours (infant mortality of replacements)",
    )
    bad_replacement_hours: float = param(
        0.0, ge=0, le=1e6, unit="h", doc="mean life of a bad replacement (> 0 where bad_replacement_share is)"
    )
    initial_age: str | float = param(
        "stationary",
        kind=StateOrNumber,
        ge=0,
        le=1e9,
        unit="h",
        choices=("stationary", "new"),
        doc='units at job start: "stationary" (a cluster that has been running: '
        'first failures from the renewal process in equilibrium), "new" '
        "(all installed at t = 0), or every unit this many hours old",
    )


# --- [staffing]: the people a manual recovery waits for (docs/model.md §3 "Staffing") -------------------
# staffing.team: "none" (no calendar: a manual recovery costs manual_hours alone), "office" (a person at
# work in working hours only), "24/7" (always someone), in the kernel's code order.
STAFF_TEAMS = ("none", "office", "24/7")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # datetime.weekday() order
# A TOML date or date-time in the JSON Schema: JSON has no type for it, so a value of none of JSON's types.
_TOML_DATE = {"not": {"type": ["string", "number", "boolean", "array", "object", "null"]}}


class TimeZoneName:
    """Field kind: an IANA time zone name that the standard :mod:`zoneinfo` knows, e.g. ``"US/Pacific"``."""

    SWEEPABLE = False
    JSON_SCHEMA = {"type": "string"}

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> str:
        """The name, once :class:`zoneinfo.ZoneInfo` has found it."""
        expected = 'expected an IANA time zone name such as "UTC", "US/Pacific" or "Europe/Paris"'
        if not isinstance(value, str):
            raise ScenarioError(source, key, f"{expected}, got {type_name(value)}")
        try:
            zoneinfo.ZoneInfo(value)
        except (KeyError, ValueError, OSError):  # not found, not a name, not a file
            raise ScenarioError(source, key, f"{expected}, got {value!r}") from None
        return value


class LocalDateTime:
    """Field kind: a local date and time ``"YYYY-MM-DDTHH:MM"`` (a string or a TOML local date-time), or the
    same in UTC with a trailing ``Z``."""

    SWEEPABLE = False
    JSON_SCHEMA = {
        "anyOf": [{"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z?$"}, _TOML_DATE]
    }

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> str:
        """The date and time as ``"YYYY-MM-DDTHH:MM"`` (``...Z`` when given in UTC)."""
        if isinstance(value, datetime.datetime) and value.tzinfo is None and not value.second:
            return value.strftime("%Y-%m-%dT%H:%M")
        for form in ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%MZ"):
            try:
                return datetime.datetime.strptime(value, form).strftime(form)
            except (TypeError, ValueError):
                pass
        raise ScenarioError(
            source, key, f'expected a local date and time "YYYY-MM-DDTHH:MM" (or UTC: "...Z"), got {type_name(value)}'
        )


class HourRange:
    """Field kind: ``[begin, end]``, local hours of the day with ``0 <= begin < end <= 24``."""

    SWEEPABLE = False
    JSON_SCHEMA = {
        "type": "array",
        "items": {"type": "number", "minimum": 0, "maximum": 24},
        "minItems": 2,
        "maxItems": 2,
    }

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> tuple[float, float]:
        """The two hours, checked."""
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list) or len(value) != 2:
            raise ScenarioError(
                source, key, f"expected [begin, end], two hours of the day, e.g. [9, 17], got {type_name(value)}"
            )
        begin, end = (float(coerce_number(meta, v, source, f"{key}[{i}]", integer=False)) for i, v in enumerate(value))
        if not begin < end:
            raise ScenarioError(
                source, key, f"expected begin < end (working hours within one day), got [{begin:g}, {end:g}]"
            )
        return begin, end


class LocalDates:
    """Field kind: a list of local dates, TOML dates or ``"YYYY-MM-DD"`` strings, typed as ISO strings."""

    SWEEPABLE = False
    JSON_SCHEMA = {"type": "array", "items": {"anyOf": [{"type": "string", "format": "date"}, _TOML_DATE]}}
    MAX_ENTRIES = 100_000

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> tuple[str, ...]:
        """The dates as ``"YYYY-MM-DD"`` strings, in the file's order."""
        if isinstance(value, tuple):
            return value
        if not isinstance(value, list) or len(value) > cls.MAX_ENTRIES:
            raise ScenarioError(
                source, key, f'expected a list of dates, e.g. [2021-11-25, "2021-12-24"], got {type_name(value)}'
            )
        return tuple(cls._date(item, source, f"{key}[{i}]") for i, item in enumerate(value))

    @staticmethod
    def _date(item: Any, source: str, key: str) -> str:
        if isinstance(item, datetime.date) and not isinstance(item, datetime.datetime):
            return item.isoformat()
        if isinstance(item, str) and len(item) == 10:
            try:
                return datetime.date.fromisoformat(item).isoformat()
            except ValueError:
                pass
        raise ScenarioError(source, key, f"expected a date YYYY-MM-DD, got {type_name(item)}")


class Weekdays:
    """Field kind: a non-empty list of distinct days of :data:`WEEKDAYS`, e.g. ``["Mon", "Tue"]``."""

    SWEEPABLE = False
    JSON_SCHEMA = {"type": "array", "items": {"enum": list(WEEKDAYS)}, "minItems": 1, "uniqueItems": True}

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> tuple[str, ...]:
        """The days, in the file's order."""
        if isinstance(value, tuple):
            return value
        days = ", ".join(WEEKDAYS)
        if not isinstance(value, list) or not value:
            shown = "[] (a calendar with no working hours)" if value == [] else type_name(value)
            raise ScenarioError(source, key, f"expected a non-empty list of distinct days of {days}, got {shown}")
        for i, day in enumerate(value):
            if day not in WEEKDAYS:
                raise ScenarioError(source, f"{key}[{i}]", f"expected one of {days}, got {type_name(day)}")
        if len(set(value)) != len(value):
            raise ScenarioError(source, key, f"expected distinct days, got {value!r}")
        return tuple(value)


@section
class StaffingSection:
    team: str = param(
        "none",
        kind=str,
        choices=STAFF_TEAMS,
        doc="who answers a recovery that needs a person (failures.manual_share): none (no calendar), office "
        "(working hours only, on_call out of hours), 24/7",
    )
    time_zone: str = param(
        "UTC", kind=TimeZoneName, doc="IANA time zone of the team (its UTC offset at the start, held all the run)"
    )
    start: str = param(
        "2024-01-01T09:00", kind=LocalDateTime, doc="local date and time of the run's start, YYYY-MM-DDTHH:MM"
    )
    # Working hours 9-17 Monday to Friday: a stated assumption (an office day), not a published figure.
    working_hours: tuple[float, float] = param(
        (9.0, 17.0), kind=HourRange, ge=0, le=24, unit="h", doc="[begin, end] local hours of a working day"
    )
    working_days: tuple[str, ...] = param(WEEKDAYS[:5], kind=Weekdays, doc="the days of the week with working hours")
    holidays: tuple[str, ...] = param((), kind=LocalDates, doc="local dates with nobody at work, YYYY-MM-DD")
    on_call: bool = param(False, kind=bool, doc="team office: out of hours a person on call answers")
    # Google SRE book, ch. 11 "Being On-Call": 30 minutes for less time-critical services (5 for user-facing).
    on_call_response_minutes: float = param(
        30.0, ge=0, le=1e5, unit="min", doc="mean response time of the person on call"
    )
    on_call_response_sigma: float = param(0.0, ge=0, le=3, doc="its lognormal log-sd (0: every one the mean)")
    response_minutes: float = param(
        0.0, ge=0, le=1e5, unit="min", doc="mean response in working hours or of a 24/7 team (exponential)"
    )


# Defaults of the queue wait (docs/model.md §8 "Defaults and their sources"). A dedicated reservation (the
# next part already queued on an exclusive partition) starts at the scheduler's next pass: Slurm's
# slurm.conf(5) SchedulerParameters "sched_interval ... default value is 60 seconds", "bf_interval ...
# Default: 30"; Kokolis et al. (HPCA'25, arXiv 2410.21680) Observation 10 takes "1 minute" after each
# failure; BLOOM-176B's chained jobs on Jean Zay's reserved partition (bigscience tr11 README, job arrays
# %1) did the same. Its spread (log-sd 0.5) is an ASSUMPTION. A shared centre: no published mean wait of a
# multi-hundred-GPU job was found (Philly, Helios and Acme give CDF plots or raw traces only): mean 60 min,
# log-sd 1.5 are an ASSUMPTION, to be set from the centre's own accounting (sacct's Submit to Start).
QUEUE_RESERVATION_MINUTES = 1.0
QUEUE_RESERVATION_SIGMA = 0.5
QUEUE_SHARED_MINUTES = 60.0
QUEUE_SHARED_SIGMA = 1.5

# The laws of the wait in the batch queue before a new allocation (docs/model.md §3 "The batch system",
# §8 "Defaults and their sources"): (mean, min; lognormal log-sd). "none": no wait.
QUEUE_LAWS = {
    "none": (0.0, 0.0),
    "reservation": (QUEUE_RESERVATION_MINUTES, QUEUE_RESERVATION_SIGMA),
    "shared": (QUEUE_SHARED_MINUTES, QUEUE_SHARED_SIGMA),
}


@section
class SchedulerSection:
    time_limit_hours: float = param(
        0.0,
        ge=0,
        le=1e5,
        unit="h",
        doc="a chained job's part ends this long after training starts: it saves its progress, waits in the "
        "queue and restarts by full requeue (0: no limit)",
    )
    queue: str = param(
        "none",
        kind=str,
        choices=tuple(QUEUE_LAWS),
        doc="the wait in the batch queue before a new allocation (after a time-limit stop and a requeue "
        'restart): "none", "reservation" (a dedicated reservation) or "shared" (a shared centre)',
    )
    queue_wait_minutes: float | None = param(None, ge=0, le=1e6, unit="min", doc="its mean, instead of the law's")
    queue_wait_sigma: float | None = param(None, ge=0, le=3, doc="its lognormal log-sd, instead of the law's")
    release_share: float = param(
        0.0,
        ge=0,
        le=1,
        doc="share of fail-stop failures the batch system does not end: the job holds its allocation until "
        "the crash is noticed and it is released",
    )
    release_hours: float = param(0.0, ge=0, le=1e4, unit="h", doc="mean time until such a job is released")
    release_sigma: float = param(0.0, ge=0, le=3, doc="lognormal log-sd of that time (0: every one the mean)")

    def queue_law(self) -> tuple[float, float]:
        """The queue wait's mean (min) and lognormal log-sd: the law of ``queue``, overridden by the keys."""
        mean, sigma = QUEUE_LAWS[self.queue]
        mean = mean if self.queue_wait_minutes is None else self.queue_wait_minutes
        return mean, sigma if self.queue_wait_sigma is None else self.queue_wait_sigma
