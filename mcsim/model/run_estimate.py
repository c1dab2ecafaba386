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

from mcsim.kernels.interface import FailureClasses, RunParams
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


# Seconds per kernel loop step of each kind, one thread. Calibrated against the
# process CPU time of whole `simulate()` calls of the shipped scenarios, NUMBA_NUM_THREADS=1,
# warm kernel cache, on the project's 2-core x86-64 machine under load (measured once):
#
#   scenario (mode, runs)              estimated before  measured   measured / estimated
#                                                                    before    after
#   capacity-planning (fast, 200)        5.86 s            1.18 s    0.20      0.99
#   llama3-405b (fast, 1000)             4.71 s            1.13 s    0.24      0.96
#   llama3-405b (fast, 300)              1.41 s            0.26 s    0.18      0.74
#   bloom-176b (fast, 300)               0.04 s            0.01 s    0.24      0.9
#   llama3-405b (exact, 8)               2.64 s            3.68 s    1.40      1.40
#   bloom-176b (exact, 100)              3.10 s            2.60 s    0.84      0.84
#
# Exact mode (iterations drawn one at a time) was right; fast mode was 4-5x too pessimistic:
# a fast-mode block and the checkpoint that ends it cost ~25 ns together, not 130 ns.
# tests/test_api.py checks a measured run against the estimate within 10x both ways.
SECONDS_PER_ITERATION_STEP = 350e-9  # one iteration drawn on its own
SECONDS_PER_BLOCK = 15e-9  # one fast-mode block of iterations (100e-9 before this calibration)
SECONDS_PER_CHECKPOINT = 10e-9  # (30e-9 before this calibration)
SECONDS_PER_FAILURE = 600e-9  # a failure and its recovery, restore included
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
            self.iteration_steps * SECONDS_PER_ITERATION_STEP
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
    shapes, spares and stragglers are ignored, so the estimate is good to a
    factor of a few; it sizes the local backend's kernel calls (which are also
    timed) and the time estimate printed and checked before a run.
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
    if stepped:
        steps, blocks = done + rollback + episodes, 0.0
    else:
        steps, blocks = 0.0, intervals * share + failures + episodes
    return RunEstimate(wall_s, failures, steps, blocks, intervals * share)


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
