"""What an iteration's time depends on besides its own draw: the training phase, the job factor, slow-node
episodes and the throughput degradation (docs/model.md §4).

An iteration takes ``c J D F + comm``: ``c`` and ``comm`` are the compute and exposed communication
times of the current training phase (the run's phase table, or :class:`RunParams`' iteration times;
:func:`enter_phase`), ``J`` is the job-level factor drawn at the start and after every restart
(:func:`job_factor`), ``D`` the throughput degradation of the current attempt (:func:`degradation_at`:
constant over steps, at most its maximum, back to 1 at every restart, :func:`begin_attempt`), and
``F`` the slowest of ``n_ranks`` lognormal rank factors, or ``max(M, slowdown)`` while a slow-node
episode is active. Episodes arrive as a Poisson process and last exponential times
(:func:`episodes_at`); a restart ends them.

Each function here reads or changes the slots of the run's state (:mod:`mcsim.kernels.workspace`)
that hold these conditions; the block and stretch advances (:mod:`mcsim.kernels.blocks`) stop where
any of them changes, so that a block's iterations all run under the same ones.
"""

from __future__ import annotations

import math

import numpy as np

from .accelerate import jit_inline
from .declarations import N_PH, PH_COMM_S, PH_COMPUTE_S, PH_START
from .normal import ndtri_acklam
from .rng import uniform
from .workspace import (
    K_PHASE_END,
    K_PHASES,
    N_X,
    P_DONE,
    PT_NOW,
    X_ATTEMPT_START,
    X_COMM,
    X_COMPUTE,
    X_DEGRADE,
    X_DEGRADE_NEXT,
    X_EPISODE_NEXT,
    X_EPISODE_UNTIL,
    X_JOB,
    X_PHASE_START,
    X_T,
)


@jit_inline
def job_factor(state, job_sigma):
    """The job-level factor ``J`` of an attempt: lognormal of log-sd ``job_sigma``, at least 1 (1 when
    ``job_sigma`` is 0, without a draw)."""
    if job_sigma == 0.0:
        return 1.0
    return max(1.0, math.exp(job_sigma * ndtri_acklam(uniform(state))))


@jit_inline
def exponential(state):
    """An Exp(1) draw from the stream ``state``."""
    return -math.log(uniform(state))


@jit_inline
def iteration_terms(x):
    """The terms of an iteration's time ``c J D F + comm`` under the current conditions: ``(c, J D, comm)``."""
    return x[X_COMPUTE], x[X_JOB] * x[X_DEGRADE], x[X_COMM]


@jit_inline
def factor_law(p, active):
    """The law of the rank factor ``F`` in fast mode, in an episode (``active``) or not: its mean and
    standard deviation, and the shortest block drawn at once with the normal law of its sum."""
    if active:
        return p.factor_mean_episode, p.factor_std_episode, p.fast_min_block_episode
    return p.factor_mean, p.factor_std, p.fast_min_block


@jit_inline
def episodes_at(p, x, ep_stream):
    """Episode change: process the arrivals up to now; returns ``(active, next change time)``."""
    t = x[X_T]
    while x[X_EPISODE_NEXT] <= t:
        x[X_EPISODE_UNTIL] = max(x[X_EPISODE_UNTIL], x[X_EPISODE_NEXT] + p.episode_mean_s * exponential(ep_stream))
        x[X_EPISODE_NEXT] += exponential(ep_stream) / p.episode_rate_per_s
    active = x[X_EPISODE_UNTIL] > t
    transition = x[X_EPISODE_UNTIL] if active else x[X_EPISODE_NEXT]
    return active, transition


@jit_inline
def enter_phase(p, x, k, done):
    """Phase change: the phase of the progress ``done`` (after a phase's last block, or a rollback)
    sets the iteration times (``X_COMPUTE``, ``X_COMM``) and where it begins and ends
    (``X_PHASE_START``, ``K_PHASE_END``). Only runs with a phase table call it."""
    k[K_PHASE_END] = p.iterations
    for j in range(k[K_PHASES]):
        row = N_X + N_PH * j
        if x[row + PH_START] > done:
            if x[row + PH_START] < p.iterations:  # padded rows begin at infinity
                k[K_PHASE_END] = int(x[row + PH_START])
            return
        x[X_PHASE_START] = x[row + PH_START]
        x[X_COMPUTE] = x[row + PH_COMPUTE_S]
        x[X_COMM] = x[row + PH_COMM_S]


@jit_inline
def load_phases(p, phases, x, k):
    """The run's phase table into the tail of ``x`` (``K_PHASES`` rows), and its first phase entered."""
    k[K_PHASES] = phases.shape[0]
    for j in range(phases.shape[0]):
        for col in range(N_PH):
            x[N_X + N_PH * j + col] = phases[j, col]
    enter_phase(p, x, k, 0.0)


@jit_inline
def ideal_s(p, x, k, iterations):
    """Ideal time of the first ``iterations`` iterations of a run with a phase table, s."""
    total = 0.0
    for j in range(k[K_PHASES]):
        row = N_X + N_PH * j
        end = x[row + N_PH + PH_START] if j + 1 < k[K_PHASES] else np.inf
        end = min(end, float(p.iterations), iterations)
        if end > x[row + PH_START]:
            total += (end - x[row + PH_START]) * (x[row + PH_COMPUTE_S] + x[row + PH_COMM_S])
    return total


@jit_inline
def begin_attempt(p, x, t):
    """An attempt begins at ``t`` (the start, or a restart): the throughput degradation starts again."""
    x[X_ATTEMPT_START] = t
    x[X_DEGRADE] = 1.0
    x[X_DEGRADE_NEXT] = t if p.degradation_per_s > 0.0 else np.inf


@jit_inline
def degradation_at(p, x):
    """Degradation change: the factor on compute time of the step of the attempt now; returns the time
    it next changes (inf when it has reached its maximum, or without degradation).

    Step ``j`` of an attempt that began at ``t_a`` is ``[t_a + j S, t_a + (j + 1) S)``; its factor is
    ``1 + min(r (j + 1/2) S, D)`` (the linear degradation ``r`` at mid-step, at most ``D``).
    """
    t = x[X_T]
    if x[X_DEGRADE_NEXT] > t:
        return x[X_DEGRADE_NEXT]
    step, t_a = p.degradation_step_s, x[X_ATTEMPT_START]
    j = math.floor((t - t_a) / step)
    while t_a + (j + 1.0) * step <= t:  # rounding: the step whose end is after now
        j += 1.0
    added = p.degradation_per_s * (j + 0.5) * step
    if added >= p.degradation_max:
        x[X_DEGRADE] = 1.0 + p.degradation_max
        x[X_DEGRADE_NEXT] = np.inf
    else:
        x[X_DEGRADE] = 1.0 + added
        x[X_DEGRADE_NEXT] = t_a + (j + 1.0) * step
    return x[X_DEGRADE_NEXT]


@jit_inline
def conditions_now(p, x, k, pts, ep_stream, has_phases):
    """The conditions at the run's time and progress: the phase entered when the progress left the
    current one (``has_phases``: the run has a phase table), the episodes' arrivals processed, and the
    degradation's step; returns ``(episode active, time of the next change of episode or degradation)``."""
    if has_phases and not x[X_PHASE_START] <= pts[PT_NOW, P_DONE] < k[K_PHASE_END]:
        enter_phase(p, x, k, pts[PT_NOW, P_DONE])
    active, transition = episodes_at(p, x, ep_stream)
    if p.degradation_per_s > 0.0:
        transition = min(transition, degradation_at(p, x))
    return active, transition


@jit_inline
def start_conditions(p, phases, x, k, job_stream, ep_stream):
    """The conditions at t = 0: the first phase (of ``phases``, the run's phase table, or ``p``'s
    iteration times when it has no rows), the first attempt and its job factor, the first episode's
    arrival (never without episodes)."""
    x[X_COMPUTE] = p.compute_time_s
    x[X_COMM] = p.comm_time_s
    k[K_PHASE_END] = p.iterations
    if phases.shape[0] > 0:
        load_phases(p, phases, x, k)
    begin_attempt(p, x, 0.0)
    x[X_JOB] = job_factor(job_stream, p.job_sigma)
    x[X_EPISODE_NEXT] = np.inf
    if p.episode_rate_per_s > 0.0:
        x[X_EPISODE_NEXT] = exponential(ep_stream) / p.episode_rate_per_s
