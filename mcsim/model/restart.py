"""The cost of a restart from its parts (docs/model.md §3 "The cost of a restart").

Every interruption ends with the job started again. With ``restart.from_parts = true`` a restart
costs, on top of the failure class's own recovery (detection and replacement, or the decision) and
the checkpoint load (:mod:`mcsim.model.checkpointing`):

* ``reschedule_s + reschedule_ms_per_gpu x G``: the scheduler allocates the job's nodes again, a
  time that grows with the number of GPUs ``G`` in the job;
* ``process_start_s``: container image, dependencies and the framework start on every node;
* ``communicator_ms_per_gpu x G``: the collective communicators are set up again;
* the warm-up: ``warmup_iterations`` iterations at ``warmup_throughput`` of the steady throughput,
  which take ``warmup_iterations x T x (1 / warmup_throughput - 1)`` longer than at the steady
  throughput (``T`` the ideal iteration time).

The kernel adds the sum to every recovery as time without progress; the warm-up iterations
themselves count as ordinary iterations (first order: a failure during the warm-up loses the
warm-up's progress a little earlier or later than it would in a real run). With
``from_parts = false`` (the default) a class's ``recovery_minutes`` is the whole restart, as the
published end-to-end recovery figures measure it, and the parts add nothing. Seconds throughout;
the functions take scalars or candidate arrays. :func:`scheduler_params` gives the kernel the batch
system's time limit, queue law and release law (docs/model.md §3 "The batch system").
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from mcsim.model.strategies import FloatOrArray
from mcsim.scenario.interruptions import RestartSection, SchedulerSection


class RestartParts(NamedTuple):
    """The parts of one restart beyond the class's recovery and the checkpoint load, s."""

    reschedule_s: FloatOrArray
    process_start_s: FloatOrArray
    communicator_s: FloatOrArray
    warmup_s: FloatOrArray  # extra time of the warm-up iterations over the steady throughput

    @property
    def total_s(self) -> FloatOrArray:
        """The restart's time without progress, s."""
        return self.reschedule_s + self.process_start_s + self.communicator_s + self.warmup_s

    @property
    def in_place_s(self) -> FloatOrArray:
        """An in-place restart's time without progress (hot spare, same allocation: no re-scheduling), s."""
        return self.process_start_s + self.communicator_s + self.warmup_s


def restart_parts(restart: RestartSection, gpus: FloatOrArray, iteration_s: FloatOrArray) -> RestartParts:
    """The parts of a restart of a job of ``gpus`` GPUs and ideal iteration time ``iteration_s`` (s).

    All zero when ``restart.from_parts`` is false (the class's recovery is the whole restart).
    """
    zero = 0.0 * np.asarray(gpus, dtype=np.float64) * np.asarray(iteration_s, dtype=np.float64)
    if not restart.from_parts:
        return RestartParts(zero, zero, zero, zero)
    slowdown = 1.0 / restart.warmup_throughput - 1.0
    return RestartParts(
        zero + restart.reschedule_s + restart.reschedule_ms_per_gpu * 1e-3 * np.asarray(gpus, dtype=np.float64),
        zero + restart.process_start_s,
        zero + restart.communicator_ms_per_gpu * 1e-3 * np.asarray(gpus, dtype=np.float64),
        zero + restart.warmup_iterations * np.asarray(iteration_s, dtype=np.float64) * slowdown,
    )


def restart_overhead_s(restart: RestartSection, gpus: int, iteration_s: float) -> float:
    """One restart's time without progress beyond the class's recovery and the load, s (a scalar): a full
    requeue's (an in-place restart's: :attr:`RestartParts.in_place_s`)."""
    return float(restart_parts(restart, gpus, iteration_s).total_s)


def scheduler_params(scheduler: SchedulerSection) -> dict[str, float]:
    """The kernel's fields of the batch system (``RunParams.time_limit_s`` ... ``release_sigma``), seconds;
    no time limit is an infinite one."""
    queue_minutes, queue_sigma = scheduler.queue_law()
    limit_h = scheduler.time_limit_hours
    return dict(
        time_limit_s=limit_h * 3600.0 if limit_h > 0 else math.inf,
        queue_s=queue_minutes * 60.0,
        queue_sigma=queue_sigma,
        release_share=scheduler.release_share,
        release_s=scheduler.release_hours * 3600.0,
        release_sigma=scheduler.release_sigma,
    )
