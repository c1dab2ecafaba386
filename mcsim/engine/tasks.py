"""Units of work of a simulation: (configuration, run chunk) tasks.

A task is a pure function of picklable inputs, so any backend (the local
thread pool of the Numba kernel, a dask cluster) can run it, and its result,
the kernel's output rows for runs ``start .. stop - 1``, depends on nothing
else: run r always draws from the streams of ``(seed, r)``.

Two kinds of task share this one type: the runs that are reported, and the
grid points of the checkpoint interval optimiser (``interval = "optimize"``),
which run the configuration with a fixed interval (``optimize_every``
iterations) on the streams of ``seed + 1`` (so the reported runs are not the
ones the interval was tuned on). Both go through the same backends, progress
bar and resume store.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from mcsim.kernels import types as kernel
from mcsim.model.checkpointing import CheckpointPlan, checkpoint_plan
from mcsim.model.stragglers import factor_law
from mcsim.model.strategies import STRATEGIES
from mcsim.model.workload import Workload, workload
from mcsim.scenario.config import Config
from mcsim.scenario.schema import Interval

# A run with more failures than this is censored: a guard against parameters
# that would make one run take hours (Llama 3 saw 419 in 54 days).
MAX_FAILURES_PER_RUN = 1_000_000
DEFAULT_CHUNK_RUNS = 250
STRATEGY_CODES = {name: s.kernel_code for name, s in STRATEGIES.items()}


# The optimiser's grid points use the streams of seed + OPTIMIZE_SEED_OFFSET.
OPTIMIZE_SEED_OFFSET = 1


@dataclass(frozen=True)
class Task:
    """Runs ``start .. stop - 1`` of configuration ``config`` (flat index in the sweep).

    ``optimize_every`` (None for the reported runs) makes the task a grid point of
    the interval optimiser: the configuration with a checkpoint every
    ``optimize_every`` iterations, on the streams of ``seed + OPTIMIZE_SEED_OFFSET``.
    """

    config: int
    start: int
    stop: int
    optimize_every: int | None = None

    @property
    def name(self) -> str:
        """File-name-safe identifier, distinct for every distinct task."""
        if self.optimize_every is None:
            return f"c{self.config}-r{self.start}-{self.stop}"
        return f"c{self.config}-k{self.optimize_every}-r{self.start}-{self.stop}"

    @property
    def runs(self) -> int:
        """Number of runs."""
        return self.stop - self.start


def plan_tasks(
    configs: list[int], runs: int, chunk_runs: int = DEFAULT_CHUNK_RUNS, optimize_every: int | None = None
) -> list[Task]:
    """Tasks covering ``runs`` runs of each configuration in ``configs``, ``chunk_runs`` at a time."""
    if chunk_runs < 1:
        raise ValueError(f"chunk_runs must be >= 1, got {chunk_runs}")
    return [
        Task(c, start, min(runs, start + chunk_runs), optimize_every)
        for c in configs
        for start in range(0, runs, chunk_runs)
    ]


def with_fixed_interval(cfg: Config, every: int) -> Config:
    """``cfg`` with a checkpoint every ``every`` iterations (its own interval setting replaced)."""
    return dataclasses.replace(
        cfg, checkpoint=dataclasses.replace(cfg.checkpoint, interval=Interval("iterations", float(every)))
    )


def task_inputs(task: Task, cfg: Config, seed: int) -> tuple[Config, int]:
    """The configuration and seed a task's kernel calls use (``cfg``: its sweep configuration)."""
    if task.optimize_every is None:
        return cfg, seed
    return with_fixed_interval(cfg, task.optimize_every), task_seed(task, seed)


def run_params(cfg: Config, wl: Workload, plan: CheckpointPlan, mode: str) -> kernel.RunParams:
    """The kernel's scalars for one feasible configuration."""
    st = cfg.stragglers
    ranks = float(cfg.parallelism.gpus)
    law = factor_law(ranks, st.sigma)
    episode_law = factor_law(ranks, st.sigma, floor=st.episode_slowdown)
    return kernel.RunParams(
        iterations=wl.iterations,
        compute_time_s=wl.compute_time_s,
        comm_time_s=wl.comm_time_s,
        n_ranks=ranks,
        sigma=st.sigma,
        job_sigma=st.job_sigma,
        strategy=STRATEGY_CODES[cfg.checkpoint.strategy],
        checkpoint_every=plan.every_iterations,
        checkpoint_stall_s=plan.stall_s,
        checkpoint_write_s=plan.write_s,
        replicate_s=plan.replicate_s,
        persist_every=cfg.checkpoint.in_memory_persist_every,
        load_s=plan.load_s,
        load_memory_s=plan.load_memory_s,
        episode_rate_per_s=st.episode_rate_per_node_day * cfg.nodes / 86400.0,
        episode_mean_s=st.episode_hours * 3600.0,
        episode_slowdown=st.episode_slowdown,
        spare_nodes=-1 if cfg.hardware.spare_nodes is None else cfg.hardware.spare_nodes,
        max_wall_s=cfg.run.max_wall_days * 86400.0,
        max_failures=MAX_FAILURES_PER_RUN,
        fast=mode == "fast",
        fast_min_block=law.fast_min_block(),
        factor_mean=law.mean,
        factor_std=law.std,
        fast_min_block_episode=episode_law.fast_min_block(),
        factor_mean_episode=episode_law.mean,
        factor_std_episode=episode_law.std,
    )


class KernelInputs(NamedTuple):
    """What one feasible configuration needs, prepared once per configuration.

    The kernel's scalars, and the workload and checkpoint plan they come from,
    which the time estimate and the output variables reuse (picklable: dask
    workers receive it with their tasks).
    """

    params: kernel.RunParams
    workload: Workload
    plan: CheckpointPlan

    @property
    def classes(self) -> kernel.FailureClasses:
        """Per-class arrays of the failure processes."""
        return self.plan.classes

    @property
    def system_mtbf_s(self) -> float:
        """1 / total failure rate, s (inf without failures)."""
        return self.plan.system_mtbf_s

    def simulate_rows(self, seed: int, start: int, stop: int, out: np.ndarray) -> None:
        """Kernel output of runs ``start .. stop - 1`` into ``out`` (the draw tables' rows have their own,
        :class:`mcsim.draws.TableInputs`)."""
        kernel.simulate_runs(self.params, self.classes, seed, start, out)


def kernel_inputs(cfg: Config, mode: str, wl: Workload | None = None) -> KernelInputs:
    """Kernel scalars, workload and checkpoint plan of one feasible configuration.

    ``wl``: its workload when already computed (the checkpoint interval does not change it).
    """
    wl = workload(cfg) if wl is None else wl
    plan = checkpoint_plan(cfg, wl)
    return KernelInputs(run_params(cfg, wl, plan, mode), wl, plan)


class PreparedConfigs(Sequence):
    """A sweep's configurations with their workloads and kernel inputs, each computed once.

    The time estimate, every task of a configuration (the interval optimiser's grid
    points each once) and the output variables use the same entry. It is a sequence
    of the configurations themselves, so a backend that is given it in place of the
    configuration list runs the same tasks and may reuse the inputs. ``configs`` is
    read at every lookup: an entry is reused while the configuration at its index
    is the same object, and recomputed once after it is replaced (an optimised
    interval).
    """

    def __init__(self, configs: Sequence[Config], mode: str) -> None:
        self.configs, self.mode = configs, mode
        self._workloads: dict[int, tuple[Config, Workload]] = {}
        self._inputs: dict[tuple[int, int | None], tuple[Config, KernelInputs]] = {}

    @classmethod
    def of(cls, configs: Sequence[Config], mode: str) -> PreparedConfigs:
        """``configs`` itself when it is prepared for ``mode``, else a new preparation of it."""
        if isinstance(configs, cls) and configs.mode == mode:
            return configs
        return cls(configs, mode)

    def __getitem__(self, config):
        return self.configs[config]

    def __len__(self) -> int:
        return len(self.configs)

    def workload(self, config: int) -> Workload:
        """Workload of configuration ``config`` (flat index)."""
        cfg = self.configs[config]
        held = self._workloads.get(config)
        if held is None or held[0] is not cfg:
            held = self._workloads[config] = (cfg, workload(cfg))
        return held[1]

    def inputs(self, config: int, optimize_every: int | None = None) -> KernelInputs:
        """Kernel inputs of feasible configuration ``config`` (a checkpoint every ``optimize_every``
        iterations when given: a grid point of the interval optimiser)."""
        cfg = self.configs[config]
        held = self._inputs.get((config, optimize_every))
        if held is None or held[0] is not cfg:
            fixed = cfg if optimize_every is None else with_fixed_interval(cfg, optimize_every)
            held = self._inputs[(config, optimize_every)] = (
                cfg,
                kernel_inputs(fixed, self.mode, self.workload(config)),
            )
        return held[1]

    def of_task(self, task: Task) -> KernelInputs:
        """Kernel inputs of ``task`` (its configuration, with its grid point's interval if any)."""
        return self.inputs(task.config, task.optimize_every)


def task_seed(task: Task, seed: int) -> int:
    """Seed of a task's kernel calls: the scenario's, or seed + OPTIMIZE_SEED_OFFSET for a grid point."""
    return seed if task.optimize_every is None else seed + OPTIMIZE_SEED_OFFSET


def run_kernel(inputs: KernelInputs, seed: int, start: int, stop: int, threads: int | None = None) -> np.ndarray:
    """Kernel output rows ``(stop - start, N_OUT)`` for runs (or draw-table rows) ``start .. stop - 1``.

    The runs are split into one contiguous slice per Numba thread
    (``numba.get_num_threads()``, or ``threads``), each simulated by the serial
    kernel on its own thread (the kernel releases the GIL): a run depends only on
    its index, so the split never changes a result. A plain thread split rather
    than a ``prange`` kernel: compiling Numba's parallel loop cost about a fifth of
    the kernels' compile time, for no speed.
    """
    if threads is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    out = np.empty((stop - start, kernel.N_OUT))
    workers = min(numba.get_num_threads(), stop - start)
    if workers <= 1:
        inputs.simulate_rows(seed, start, stop, out)
        return out
    size = -(-(stop - start) // workers)
    futures = [
        _kernel_threads().submit(inputs.simulate_rows, seed, start + a, min(stop, start + a + size), out[a : a + size])
        for a in range(size, stop - start, size)
    ]
    try:
        inputs.simulate_rows(seed, start, start + size, out[:size])  # this thread's share
    finally:
        for future in futures:
            future.result()
    return out


@functools.lru_cache(maxsize=1)
def _kernel_threads() -> ThreadPoolExecutor:
    """The threads that run kernel slices beside the caller's (one fewer than Numba's maximum)."""
    return ThreadPoolExecutor(max_workers=max(1, numba.config.NUMBA_NUM_THREADS - 1), thread_name_prefix="mcsim-kernel")


def run_task(
    cfg: Config,
    seed: int,
    mode: str,
    start: int,
    stop: int,
    threads: int | None = None,
    inputs: KernelInputs | None = None,
) -> np.ndarray:
    """Kernel output rows ``(stop - start, N_OUT)`` of one feasible configuration.

    Parameters
    ----------
    cfg : Config
        The configuration (must be feasible).
    seed : int
        Scenario seed.
    mode : {"fast", "exact"}
        Execution mode.
    start, stop : int
        Global run indices ``start .. stop - 1``.
    threads : int, optional
        Numba threads for this call (dask workers use 1 each).
    inputs : KernelInputs, optional
        ``kernel_inputs(cfg, mode)`` when already prepared (then ``cfg`` is not read).
    """
    return run_kernel(kernel_inputs(cfg, mode) if inputs is None else inputs, seed, start, stop, threads)


def execute(
    task: Task, cfg: Config | None, seed: int, mode: str, threads: int | None = None, inputs: KernelInputs | None = None
) -> np.ndarray:
    """Kernel output rows of ``task`` in one call (``cfg``: its sweep configuration).

    ``inputs``: the task's prepared kernel inputs (:meth:`PreparedConfigs.of_task`, its grid
    point's interval applied); ``cfg`` is then not read and may be None.
    """
    if inputs is None:
        cfg, seed = task_inputs(task, cfg, seed)
        return run_task(cfg, seed, mode, task.start, task.stop, threads)
    return run_kernel(inputs, task_seed(task, seed), task.start, task.stop, threads)


# Seconds per kernel loop step of each kind, one thread (measured on a 2-core x86-64
# machine over the shipped and test scenarios; benchmarks/ times the real runs).
SECONDS_PER_ITERATION_STEP = 350e-9  # one iteration drawn on its own
SECONDS_PER_BLOCK = 100e-9  # one fast-mode block of iterations
SECONDS_PER_CHECKPOINT = 30e-9
SECONDS_PER_FAILURE = 600e-9  # a failure and its recovery, restore included


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


def _expected_segment_s(segment_s: float, restart_s: float, mtbf_s: float) -> float:
    """Expected time to get ``segment_s`` of work done under Poisson failures (Daly 2006)."""
    exponent = (restart_s + segment_s) / mtbf_s
    if exponent > 700:
        return math.inf
    return mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1(segment_s / mtbf_s)


def estimate_run(inputs: KernelInputs) -> RunEstimate:
    """Order-of-magnitude estimate of one run's wall time and kernel work.

    Failures are taken as a Poisson process of the job's MTBF ``M`` with the
    rate-weighted mean restart time ``R`` (recovery plus load): an interval of
    ``tau`` compute seconds and a checkpoint stall ``C`` then takes
    ``M e^(R/M) (e^((tau + C)/M) - 1)`` on average (Daly 2006). Weibull
    shapes, spares and stragglers are ignored, so the estimate is good to a
    factor of a few; it sizes the local backend's kernel calls (which are also
    timed) and the time estimate printed and checked before a run.
    """
    p, fc = inputs.params, inputs.classes
    iterations = max(1, p.iterations)
    every = max(1, min(p.checkpoint_every, iterations))
    iteration_s = p.compute_time_s * p.factor_mean + p.comm_time_s
    intervals = math.ceil(iterations / every)
    last_s = (iterations - (intervals - 1) * every) * iteration_s  # the last interval: no checkpoint after it
    segments = ((intervals - 1, every * iteration_s + p.checkpoint_stall_s), (1, last_s))
    mtbf = inputs.system_mtbf_s
    if math.isfinite(mtbf) and mtbf > 0:
        rates = fc.units / (fc.scale_s * np.array([math.gamma(1 + 1 / k) for k in fc.shape]))
        restart_s = float(np.sum(rates * fc.recovery_s) / np.sum(rates)) + p.load_s
        uncapped = sum(n * _expected_segment_s(x, restart_s, mtbf) for n, x in segments)
    else:
        uncapped = sum(n * x for n, x in segments)
    wall_s = min(p.max_wall_s, uncapped)
    share = wall_s / uncapped if uncapped > 0 else 1.0
    failures = min(float(p.max_failures), wall_s / mtbf) if math.isfinite(mtbf) and mtbf > 0 else 0.0
    stepped = not (p.fast and every >= p.fast_min_block)
    done = iterations * share
    rollback = failures * min(every / 2.0, mtbf / iteration_s if iteration_s > 0 else every)
    episodes = 2.0 * p.episode_rate_per_s * wall_s
    if stepped:
        steps, blocks = done + rollback + episodes, 0.0
    else:
        steps, blocks = 0.0, intervals * share + failures + episodes
    return RunEstimate(wall_s, failures, steps, blocks, intervals * share)
