"""Run-time estimates: the expected size of one run, and of a whole simulation, before it starts.

:func:`estimate_run` sizes the local backend's kernel calls and, summed by
:func:`time_estimate`, gives the estimate printed and checked against the time limit
(:func:`mcsim.scenario.limits.check_time`) before a run. Neither changes a result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np

from mcsim.kernels.interface import STRATEGY_ASYNC, STRATEGY_IN_MEMORY, STRATEGY_SYNC, FailureClasses, RunParams
from mcsim.model.checkpointing import mean_life_with_bad
from mcsim.model.reliability import expected_run_wall_s
from mcsim.model.stragglers import degradation_over_run
from mcsim.scenario.limits import TimeEstimate


class RunInputs(Protocol):
    """What an estimate reads of one configuration's kernel inputs (:class:`mcsim.model.preparation.KernelInputs`)."""

    @property
    def params(self) -> RunParams: ...

    @property
    def classes(self) -> FailureClasses: ...

    @property
    def system_mtbf_s(self) -> float: ...


# Seconds per kernel loop step of each kind, one thread. Calibrated (issue 42) against the process CPU time of
# whole `simulate()` calls of the shipped scenarios, one Numba thread, warm kernels, on the project's 2-core x86-64
# machine under load 3-4, by `benchmarks/bench_estimates.py`, which prints measured / estimated per case (CPU s):
#
#   case (mode, runs)                      estimated before   measured   measured / estimated
#                                                                         before     after
#   capacity-planning (fast, 2000)           12.7                0.78        0.06       0.81
#   llama3-405b (fast, 6000)                  7.3                1.35        0.19       0.84
#   opt-175b (fast, 40000)                    2.7                1.19        0.44       0.84
#   byterobust-dense (fast, 2000)          2793                  1.54        0.0006     1.31
#   deepseek-v3-pretraining (fast, 16000)     6.1                0.66        0.11       0.74
#   bloom-176b (exact, 200)                   6.2                1.63        0.26       1.08
#   llama3-405b (exact, 12)                   3.9                1.03        0.26       1.06
#
# The estimate was 2-16x pessimistic (the kernels got faster since the constants were set), and 1,600x for a
# checkpoint every iteration: it counted every checkpoint cycle, while fast mode's stretches
# (kernels/blocks.py) draw the cycles between two events at once. Now (one run of the benchmark, and a
# second: 0.67-1.26) every case is within 2x; tests/test_api.py checks a measured run within 10x both ways.
SECONDS_PER_ITERATION_STEP = 85e-9  # one iteration drawn on its own (350e-9 before issue 42)
SECONDS_PER_BLOCK = 15e-9  # one fast-mode block of iterations (100e-9 before this calibration)
SECONDS_PER_CHECKPOINT = 50e-9  # one walked checkpoint cycle's hooks (10e-9 before issue 42)
SECONDS_PER_FAILURE = 250e-9  # a failure and its recovery, restore included (600e-9 before issue 42)
# A run's fixed kernel cost (its start state, first failure times, row written): 0.66-0.79 us of thread time per
# run of the small test scenario with 8 to 4,096 units and about no failures (issue 42), whatever the units.
SECONDS_PER_RUN = 0.7e-6
STRETCH_Z = 8.0  # kernels/blocks.py's margin of a stretch, in standard deviations (not imported: numba-free here)
# Each reported run's outputs beyond the kernel's loop (its row, the accounting pass, the sweep's arrays, the
# dataset). Measured (issue 42): a two-configuration fast sweep whose runs are ~1 us of kernel each by the
# constants above took 1.75 us (2 x 1e5 runs) and 1.94 us (2 x 1e6 runs) more process CPU time per run than
# that, on the project's 2-core x86-64 machine (load ~12). Without it, `--runs 1e7` was announced as 4.9 s
# and ran past 44 s.
SECONDS_PER_RUN_OUTPUT = 2e-6


class RunEstimate(NamedTuple):
    """Expected size of one run, from a renewal argument (Daly 2006)."""

    wall_s: float  # expected wall time, capped at max_wall
    failures: float  # expected failures
    iteration_steps: float  # iterations drawn one at a time (reruns after failures included)
    blocks: float  # fast-mode blocks
    checkpoints: float

    @property
    def events(self) -> float:
        """Kernel loop steps of all kinds."""
        return self.iteration_steps + self.blocks + self.checkpoints + self.failures

    @property
    def seconds(self) -> float:
        """Estimated kernel time of one run on one thread, s."""
        return (
            SECONDS_PER_RUN
            + self.iteration_steps * SECONDS_PER_ITERATION_STEP
            + self.blocks * SECONDS_PER_BLOCK
            + self.checkpoints * SECONDS_PER_CHECKPOINT
            + self.failures * SECONDS_PER_FAILURE
        )


# The estimates of the kernel inputs asked about, by identity (the inputs kept beside, so that an id is
# never reused while its entry stands), all dropped when 1,024 are held: the time estimate and the
# backend ask for each configuration's, and a plan's selection for its candidates' round after round
# (computing them again was a measurable share of a 1,000-configuration sweep's overhead).
_RECENT: dict[int, tuple[RunInputs, RunEstimate]] = {}
_RECENT_SIZE = 1024


def estimate_run(inputs: RunInputs) -> RunEstimate:
    """Order-of-magnitude estimate of one run's wall time and kernel work (:func:`_estimate_run`), kept per
    kernel inputs object (one configuration's, a small immutable tuple) until 1,024 are kept, then all
    dropped; a draw table's is computed each time (its tables are not kept alive)."""
    if not isinstance(inputs, tuple):  # a draw table (tables over draws can be large): not kept
        return _estimate_run(inputs)
    kept = _RECENT.get(id(inputs))
    if kept is not None and kept[0] is inputs:
        return kept[1]
    estimate = _estimate_run(inputs)
    if len(_RECENT) >= _RECENT_SIZE:
        _RECENT.clear()
    _RECENT[id(inputs)] = (inputs, estimate)
    return estimate


def _estimate_run(inputs: RunInputs) -> RunEstimate:
    """Order-of-magnitude estimate of one run's wall time and kernel work.

    Failures are taken as a Poisson process of the job's MTBF ``M`` with the
    rate-weighted mean restart time ``R`` (recovery plus load): an interval of
    ``tau`` compute seconds and a checkpoint stall ``C`` then takes
    ``M e^(R/M) (e^((tau + C)/M) - 1)`` on average (Daly 2006,
    :func:`mcsim.model.reliability.expected_run_wall_s`). Weibull
    shapes, spares and stragglers are ignored. In fast mode the checkpoint cycles
    between two events are drawn as one stretch, so only a few cycles per event are
    walked (:func:`_stretches`, :func:`_stretch_tail_cycles`). Within 2x of the measured
    time on the shipped scenarios (``benchmarks/bench_estimates.py``); it sizes the local
    backend's kernel calls (which are also timed) and the time estimate printed and
    checked before a run.
    """
    p, fc = inputs.params, inputs.classes
    iterations = max(1, p.iterations)
    every = max(1, min(p.checkpoint_every, iterations))
    mtbf = inputs.system_mtbf_s
    ideal_s = iterations * (p.compute_time_s + p.comm_time_s)
    degraded = 1.0 + float(degradation_over_run(p.degradation_per_s, p.degradation_max, mtbf, ideal_s))
    iteration_s = p.compute_time_s * p.factor_mean * degraded + p.comm_time_s
    intervals = math.ceil(iterations / every)
    restart_s = 0.0
    mean_life_s = fc.scale_s * np.array([math.gamma(1 + 1 / k) for k in fc.shape])
    mean_life_s = mean_life_with_bad(mean_life_s, fc.bad_share, fc.bad_mean_s)  # stationary: every replacement
    rates = fc.units / mean_life_s  # events per s
    if math.isfinite(mtbf) and mtbf > 0:
        restart_s = float(np.sum(rates * fc.recovery_s) / np.sum(rates)) + p.restart_s + p.load_s
    uncapped = float(expected_run_wall_s(iterations, every, iteration_s, p.checkpoint_stall_s, restart_s, mtbf))
    wall_s = min(p.max_wall_s, uncapped)
    share = wall_s / uncapped if uncapped > 0 else 1.0
    # Every event counts (planned stops too, which mtbf leaves out), up to the failure guard.
    failures = min(float(p.max_failures), wall_s * float(np.sum(rates)))
    stepped = not (p.fast and (every >= p.fast_min_block or every == p.short_block))
    done = iterations * share
    rollback = failures * min(every / 2.0, mtbf / iteration_s if iteration_s > 0 else every)
    episodes = 2.0 * p.episode_rate_per_s * wall_s
    if p.degradation_per_s > 0.0:  # the degradation's steps cut blocks as episodes do (at most this many)
        episodes += wall_s / p.degradation_step_s
    walked = intervals * share  # checkpoint cycles the loop goes through one by one
    if _stretches(p, every, iteration_s):
        # Fast mode's stretches: between two events, one draw for the whole cycles, then a tail of cycles and
        # the one the event interrupts walked (kernels/blocks.py); the cost follows the events, not the cycles.
        walked = min(walked, (failures + episodes + 1.0) * (_stretch_tail_cycles(p) + 2.0))
        done, rollback = min(done, walked * every), 0.0
    if stepped:
        steps, blocks = done + rollback + episodes, 0.0
    else:
        steps, blocks = 0.0, walked + failures + episodes
    return RunEstimate(wall_s, failures, steps, blocks, walked)


def _stretch_tail_cycles(p: RunParams) -> int:
    """Cycles walked one by one before each event in a fast-mode stretch (kernels/blocks.py ``_stretch_tail``)."""
    if p.strategy == STRATEGY_SYNC:
        return 0
    return 1 if p.strategy != STRATEGY_IN_MEMORY else 2 * max(1, p.persist_every)


def _stretches(p: RunParams, every: int, iteration_s: float) -> bool:
    """Whether fast mode advances whole stretches of checkpoint cycles between events: its write (or
    replication) does not overlap the block by less than 8 standard deviations (kernels/blocks.py
    ``_stretch_cycles``; in_memory's durability condition is not checked here)."""
    if not p.fast:
        return False
    write = {STRATEGY_SYNC: 0.0, STRATEGY_ASYNC: p.checkpoint_write_s}.get(p.strategy, p.replicate_s)
    block_mean = every * iteration_s
    block_std = p.compute_time_s * math.sqrt(every) * p.factor_std
    return write <= block_mean - STRETCH_Z * block_std or write >= block_mean + STRETCH_Z * block_std


def time_estimate(
    inputs: Sequence[RunInputs | None],
    feasible: list[int],
    to_optimize: list[int],
    runs: int,
    grid_runs: int,
    parallelism: int,
) -> TimeEstimate:
    """Estimated kernel time of every task, the optimiser's grid points included, and the time of
    gathering each reported run's outputs (:data:`SECONDS_PER_RUN_OUTPUT`).

    Parameters
    ----------
    inputs : sequence of RunInputs or None
        Kernel inputs by flat configuration index (``Prepared.inputs``; None where infeasible).
    feasible : list of int
        The configurations simulated (flat indices).
    to_optimize : list of int
        Those whose interval is optimised first.
    runs : int
        Runs per configuration.
    grid_runs : int
        Runs of one interval search, every grid point (:mod:`mcsim.engine.optimize`: every grid point).
    parallelism : int
        Runs simulated at the same time (the backend's).
    """
    cpu_s, longest = 0.0, 0.0
    optimized = set(to_optimize)
    for i in feasible:
        config_inputs = inputs[i]
        assert config_inputs is not None, "a feasible configuration has kernel inputs"
        run_s = estimate_run(config_inputs).seconds
        cpu_s += run_s * (runs + (grid_runs if i in optimized else 0))
        longest = max(longest, run_s)
    cpu_s += len(feasible) * runs * SECONDS_PER_RUN_OUTPUT
    return TimeEstimate(cpu_s, parallelism, longest)
