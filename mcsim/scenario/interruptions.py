"""The sections of a scenario about interruptions and their recovery: ``[[failures]]``, ``[restart]`` and
``[scheduler]`` (the batch system: job time limits, queue waits, crashed jobs released late).

Each is a frozen dataclass (:func:`~mcsim.scenario.frozen.section`), each key a field made by
:func:`~mcsim.scenario.validation.param`, as the other sections in :mod:`mcsim.scenario.schema`, which
lists them among the scenario's tables. :data:`FAILURE_KINDS` names the kinds of failure class in the
kernel's code order, :data:`FLEET_KINDS` those whose rate is the fleet's, :data:`QUEUE_LAWS` the
sourced laws of the wait in a batch queue.

Defaults are assumptions unless ``docs/model.md`` ("Defaults and their sources") cites the publication
they are taken from.
"""

from __future__ import annotations

from mcsim.scenario.frozen import section
from mcsim.scenario.validation import MAX_GPUS, Durations, StateOrNumber, param

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
