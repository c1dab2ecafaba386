"""Units of work of a simulation: (configuration, run chunk) tasks.

A task is a pure function of picklable inputs, so any backend (the local
thread pool of the Numba kernel, a dask cluster) can run it, and its result,
the kernel's output rows for runs ``start .. stop - 1``, depends on nothing
else: run r always draws from the streams of ``(seed, r)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .checkpointing import CheckpointPlan, checkpoint_plan
from .kernels import montecarlo as mc
from .scenario import Config
from .strategies import STRATEGIES
from .stragglers import factor_law
from .workload import Workload, workload

# A run with more failures than this is censored: a guard against parameters
# that would make one run take hours (Llama 3 saw 419 in 54 days).
MAX_FAILURES_PER_RUN = 1_000_000
DEFAULT_CHUNK_RUNS = 250
STRATEGY_CODES = {name: s.kernel_code for name, s in STRATEGIES.items()}


@dataclass(frozen=True)
class Task:
    """Runs ``start .. stop - 1`` of configuration ``config`` (flat index in the sweep)."""

    config: int
    start: int
    stop: int

    @property
    def name(self) -> str:
        """File-name-safe identifier."""
        return f"c{self.config}-r{self.start}-{self.stop}"


def plan_tasks(configs: list[int], runs: int, chunk_runs: int = DEFAULT_CHUNK_RUNS) -> list[Task]:
    """Tasks covering ``runs`` runs of each configuration in ``configs``, ``chunk_runs`` at a time."""
    if chunk_runs < 1:
        raise ValueError(f"chunk_runs must be >= 1, got {chunk_runs}")
    return [Task(c, start, min(runs, start + chunk_runs)) for c in configs for start in range(0, runs, chunk_runs)]


def run_params(cfg: Config, wl: Workload, plan: CheckpointPlan, mode: str) -> mc.RunParams:
    """The kernel's scalars for one feasible configuration."""
    st = cfg.stragglers
    ranks = float(cfg.parallelism.gpus)
    law = factor_law(ranks, st.sigma)
    episode_law = factor_law(ranks, st.sigma, floor=st.episode_slowdown)
    return mc.RunParams(
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


def run_task(cfg: Config, seed: int, mode: str, start: int, stop: int, threads: int | None = None) -> np.ndarray:
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
    """
    wl = workload(cfg)
    plan = checkpoint_plan(cfg, wl)
    params = run_params(cfg, wl, plan, mode)
    if threads is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    out = np.empty((stop - start, mc.N_OUT))
    mc.simulate_runs(params, plan.classes, seed, start, out)
    return out
