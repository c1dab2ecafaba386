"""Stage 2 of :func:`mcsim.simulate`: every configuration prepared once, into what the kernel runs.

For each simulated configuration: its workload (:mod:`mcsim.model.workload`), its
checkpoint plan (:mod:`mcsim.model.checkpointing`) and, when feasible, the kernel's
scalars (:class:`KernelInputs`). With draw tables (:mod:`mcsim.scenario.draws`) a sweep
configuration's D draws are evaluated together, on arrays over the draws
(:class:`DrawTable`), and simulated through one :class:`TableInputs`.

The stage's value is a :class:`Prepared`: plain lists by simulated configuration
(configurations, workloads, kernel inputs) that the time estimate and the output
derivation read, and :attr:`Prepared.rows`, the explicit mapping from a task's key
``(config, optimize_every)`` to the object that simulates its rows (a
:class:`RowSimulator`: :class:`KernelInputs` or :class:`TableInputs`, both
picklable). The backends get that mapping and the tasks, never a configuration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from mcsim.kernels import interface as kernel
from mcsim.model.block_law import DEGREE as BLOCK_LAW_DEGREE
from mcsim.model.block_law import ShortBlockLaw, short_block_law
from mcsim.model.checkpointing import (
    CheckpointPlan,
    checkpoint_every,
    checkpoint_plan,
    checkpoint_transfers,
    failure_classes,
    system_mtbf_s,
    workload_and_plan,
)
from mcsim.model.feasibility import FEASIBLE, configuration_problem
from mcsim.model.layouts import Layouts
from mcsim.model.restart import restart_overhead_s, restart_parts, scheduler_params
from mcsim.model.run_estimate import estimate_run
from mcsim.model.stragglers import factor_law, straggler_sigma
from mcsim.model.strategies import STRATEGIES, FloatOrArray
from mcsim.model.workload import WORKLOAD_FLOATS, Workload, layouts_of, phase_rows, workload, workload_arrays
from mcsim.scenario.config import Config, cached_per_configuration
from mcsim.scenario.draws import DrawPlan
from mcsim.scenario.schema import Interval

# A run with more failures than this is censored: a guard against parameters
# that would make one run take hours (Llama 3 saw 419 in 54 days).
MAX_FAILURES_PER_RUN = 1_000_000
STRATEGY_CODES = {name: s.kernel_code for name, s in STRATEGIES.items()}

# A task's key in :attr:`Prepared.rows`: (configuration, optimize_every) as in :class:`mcsim.engine.tasks.Task`.
TaskKey = tuple[int, int | None]


class RowSimulator(Protocol):
    """What simulates rows of one task key: the kernel inputs of a configuration or of a draw table.

    ``params``, ``classes`` and ``system_mtbf_s`` describe a (the longest) run, for sizing kernel calls
    (:func:`mcsim.model.run_estimate.estimate_run`).
    """

    @property
    def params(self) -> kernel.RunParams: ...

    @property
    def classes(self) -> kernel.FailureClasses: ...

    @property
    def system_mtbf_s(self) -> float: ...

    def simulate_rows(self, seed: int, start: int, stop: int, out: np.ndarray) -> None:
        """Kernel output of rows ``start .. stop - 1`` into ``out`` (``(stop - start, N_OUT)``)."""


@dataclass
class Prepared:
    """The prepared simulated configurations: the value of stage 2.

    Attributes
    ----------
    configs : list of Config
        The simulated configurations by flat index (a sweep's, or its (configuration, draw) pairs).
    workloads : list of Workload
        Their workloads.
    inputs : list of KernelInputs or None
        Their kernel inputs (None where infeasible): checkpoint plan and kernel scalars.
    rows : dict
        Task key ``(config, optimize_every)`` -> :class:`RowSimulator` of the task's rows. With draw
        tables ``config`` is the sweep configuration and the simulator runs its ``draws x runs`` rows.
    mode : {"fast", "exact"}
        Execution mode the kernel inputs were made for.
    """

    configs: list[Config]
    workloads: list[Workload]
    inputs: list[KernelInputs | None]
    rows: dict[TaskKey, RowSimulator]
    mode: str
    held: list[bool] | None = None  # by flat index: whether the part of the sweep simulated holds it

    @property
    def feasible(self) -> list[int]:
        """Flat indices of the feasible simulated configurations."""
        return [i for i, wl in enumerate(self.workloads) if wl.feasible]

    @property
    def simulated(self) -> list[int]:
        """The feasible configurations of the part of the sweep simulated (:attr:`held`; all without a part)."""
        held = self.held
        return [i for i in self.feasible if held is None or held[i]]

    @property
    def to_optimize(self) -> list[int]:
        """The simulated configurations whose checkpoint interval is optimised first (``interval = "optimize"``)."""
        return [i for i in self.simulated if self.configs[i].checkpoint.interval.kind == "optimize"]

    def plan(self, config: int) -> CheckpointPlan | None:
        """Checkpoint plan of configuration ``config`` (None where infeasible)."""
        inputs = self.inputs[config]
        return None if inputs is None else inputs.plan

    def grid_point(self, config: int, every: int) -> KernelInputs:
        """The kernel inputs of configuration ``config`` checkpointed every ``every`` iterations (an interval
        optimiser's grid point; its workload reused), added to :attr:`rows` under ``(config, every)``."""
        inputs = kernel_inputs(with_fixed_interval(self.configs[config], every), self.mode, self.workloads[config])
        self.rows[(config, every)] = inputs
        return inputs

    def fix_interval(self, config: int, every: int) -> None:
        """Replace configuration ``config`` by itself checkpointed every ``every`` iterations (an optimised
        interval), prepared again: a new configuration, workload and kernel inputs."""
        cfg = self.configs[config] = with_fixed_interval(self.configs[config], every)
        wl = self.workloads[config] = workload(cfg)
        inputs = self.inputs[config] = kernel_inputs(cfg, self.mode, wl)
        self.rows[(config, None)] = inputs


def prepare_draws(draws: DrawPlan, mode: str) -> Prepared:
    """Stage 2 of :func:`mcsim.simulate` for the simulated configurations of ``draws``: its draw tables, or
    each simulated configuration alone, restricted to the part of the sweep that ``draws`` simulates."""
    if draws.tabled:  # every configuration's draws evaluated together; tasks over its draws x runs rows
        sweep = draws.scenario.configs
        prepared = prepare_tables(sweep, draws.configs, draws.arrays, draws.first_runs, draws.runs, mode)
    else:
        prepared = prepare(draws.configs, mode)  # workload and plan: once per configuration
    prepared.held = draws.held
    return prepared


def prepare(configs: Sequence[Config], mode: str) -> Prepared:
    """Workload, checkpoint plan and kernel inputs of every configuration, each computed once.

    Parameters
    ----------
    configs : sequence of Config
        The simulated configurations (kept as the list :attr:`Prepared.configs`).
    mode : {"fast", "exact"}
        Execution mode.
    """
    configs = configs if isinstance(configs, list) else list(configs)
    workloads = [workload_and_plan(cfg)[0] for cfg in configs]
    inputs = [_kernel_inputs_of(cfg, mode) for cfg in configs]
    rows: dict[TaskKey, RowSimulator] = {(i, None): x for i, x in enumerate(inputs) if x is not None}
    return Prepared(configs, workloads, inputs, rows, mode)


@cached_per_configuration
def _kernel_inputs_of(cfg: Config, mode: str) -> KernelInputs | None:
    """The kernel inputs of ``cfg`` (None where infeasible), the same object for the same configuration and
    mode (:func:`mcsim.scenario.config.cached_per_configuration`): a plan prepares its growing list of
    candidates at every round, and its run estimates are kept per inputs object."""
    wl, plan = workload_and_plan(cfg)
    return None if plan is None else KernelInputs(run_params(cfg, wl, plan, mode), wl, plan)


def prepare_tables(
    sweep: Sequence[Config], configs: list[Config], arrays: list[Config], first_runs: np.ndarray, runs: int, mode: str
) -> Prepared:
    """The draw tables of every sweep configuration, as one :class:`Prepared`.

    Parameters
    ----------
    sweep : sequence of Config
        The sweep configurations.
    configs : list of Config
        The simulated (configuration, draw) pairs, draw ``d`` of sweep configuration ``flat`` at
        ``flat * D + d``, each with its drawn values set.
    arrays : list of Config
        Each sweep configuration with the drawn keys as arrays over the D draws.
    first_runs : ndarray of int
        Global run of each draw's run 0.
    runs, mode
        Runs per draw, execution mode.

    Entry ``flat * D + d`` of the lists is draw d of sweep configuration ``flat``; the rows of a
    task of sweep configuration ``flat`` are those of its :class:`TableInputs`.
    """
    count = len(first_runs)
    tables = [
        DrawTable(cfg, configs[flat * count : (flat + 1) * count], arrays[flat], mode) for flat, cfg in enumerate(sweep)
    ]
    rows: dict[TaskKey, RowSimulator] = {
        (flat, None): table_inputs(table, first_runs, runs) for flat, table in enumerate(tables) if table.feasible
    }
    workloads = [wl for table in tables for wl in table.workloads]
    inputs = [x for table in tables for x in table.inputs]
    return Prepared(configs, workloads, inputs, rows, mode)


def run_params(cfg: Config, wl: Workload, plan: CheckpointPlan, mode: str) -> kernel.RunParams:
    """The kernel's scalars for one feasible configuration."""
    st, sigma = cfg.stragglers, straggler_sigma(cfg)
    ranks = float(cfg.parallelism.gpus)
    law = factor_law(ranks, sigma)
    episode_law = factor_law(ranks, sigma, floor=st.episode_slowdown)
    short = short_block_law(ranks, sigma, plan.every_iterations) if mode == "fast" else None
    return kernel.RunParams(
        iterations=wl.iterations,
        compute_time_s=wl.compute_time_s,
        comm_time_s=wl.comm_time_s,
        n_ranks=ranks,
        sigma=sigma,
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
        restart_s=restart_overhead_s(cfg.restart, cfg.parallelism.gpus, wl.iteration_time_s),
        restart_in_place_s=float(restart_parts(cfg.restart, cfg.parallelism.gpus, wl.iteration_time_s).in_place_s),
        abandon_share=cfg.restart.abandoned_share,
        abandon_s=cfg.restart.abandoned_minutes * 60.0,
        abandon_sigma=cfg.restart.abandoned_sigma,
        **scheduler_params(cfg.scheduler),
        degradation_per_s=st.degradation_per_day / 86400.0,
        degradation_step_s=st.degradation_step_minutes * 60.0,
        degradation_max=st.degradation_max,
        short_block=0 if short is None else short.block,
        **{f"short_block_c{j}": c for j, c in enumerate(_short_coefficients(short))},
    )


def _short_coefficients(short: ShortBlockLaw | None) -> tuple[float, ...]:
    """The kernel's ``short_block_c*`` fields: the law's power series, or zeros."""
    return (0.0,) * (BLOCK_LAW_DEGREE + 1) if short is None else short.coefficients


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
        """Kernel output of runs ``start .. stop - 1`` into ``out`` (``out``: ``(stop - start, N_OUT)``)."""
        kernel.simulate_runs(self.params, self.classes, self.phases, seed, start, out)

    @property
    def phases(self) -> np.ndarray:
        """The kernel's phase table (no rows: one phase)."""
        return kernel.no_phases() if self.workload is None else self.workload.phase_table


def kernel_inputs(cfg: Config, mode: str, wl: Workload | None = None) -> KernelInputs:
    """Kernel scalars, workload and checkpoint plan of one feasible configuration.

    ``wl``: its workload when already computed (the checkpoint interval does not change it).
    """
    wl = workload(cfg) if wl is None else wl
    plan = checkpoint_plan(cfg, wl)
    return KernelInputs(run_params(cfg, wl, plan, mode), wl, plan)


def with_fixed_interval(cfg: Config, every: int) -> Config:
    """``cfg`` with a checkpoint every ``every`` iterations (its own interval setting replaced)."""
    return dataclasses.replace(
        cfg, checkpoint=dataclasses.replace(cfg.checkpoint, interval=Interval("iterations", float(every)))
    )


def _repeated(lay: Layouts, count: int) -> Layouts:
    """``lay`` (one layout) repeated ``count`` times."""
    return Layouts(*(np.repeat(getattr(lay, f.name), count) for f in dataclasses.fields(Layouts)))


def _column(values, count: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(values), (count,))


class DrawTable:
    """The D draws of one sweep configuration evaluated together (:mod:`mcsim.scenario.draws`).

    Parameters
    ----------
    cfg : Config
        The sweep configuration.
    configs : list of Config
        Its D draws, each with the drawn values set (:attr:`mcsim.scenario.draws.DrawPlan`).
    arrays : Config
        The sweep configuration with every drawn key as an array over the D draws.
    mode : {"fast", "exact"}
        Execution mode.
    """

    def __init__(self, cfg: Config, configs: list[Config], arrays: Config, mode: str) -> None:
        count = len(configs)
        self.configs = configs
        wa = workload_arrays(arrays, _repeated(layouts_of([cfg]), count))
        structural = configuration_problem(cfg) is not None
        self.workloads = [
            workload(self.configs[d]) if structural or wa.code[d] != FEASIBLE else _workload_at(wa, d)
            for d in range(count)
        ]
        self.inputs: list[KernelInputs | None] = [None] * count
        plans = _checkpoint_plans(arrays, self.configs, wa, count)
        for d, wl in enumerate(self.workloads):
            if wl.feasible:
                self.inputs[d] = KernelInputs(run_params(self.configs[d], wl, plans[d], mode), wl, plans[d])

    @property
    def feasible(self) -> list[int]:
        """The feasible draws."""
        return [d for d, inputs in enumerate(self.inputs) if inputs is not None]


def _workload_at(wa, d: int) -> Workload:
    """The :class:`Workload` of feasible draw ``d`` of ``wa`` (as :func:`mcsim.model.workload.workload` makes it)."""
    return Workload(
        True,
        "",
        "",
        int(wa.iterations[d]),
        int(wa.dp[d]),
        int(wa.microbatches[d]),
        phases=phase_rows(wa.phase_table, d),
        **{name: float(getattr(wa, name)[d]) for name in WORKLOAD_FLOATS},
    )


def _checkpoint_plans(arrays: Config, configs: list[Config], wa, count: int) -> list[CheckpointPlan]:
    """:func:`mcsim.model.checkpointing.checkpoint_plan` of every draw, the equations on arrays over the draws.

    ``arrays``: the configuration with the drawn keys as arrays; ``configs``: each draw's.
    Values of infeasible draws are meaningless (never used).
    """
    ck, gpus = arrays.checkpoint, arrays.parallelism.gpus
    size: FloatOrArray = arrays.model.params * ck.bytes_per_param
    write_gbps, read_gbps, transfers = checkpoint_transfers(arrays, gpus)
    timings = STRATEGIES[ck.strategy].timings(arrays, wa.iteration_time_s, transfers)
    stall, background, replicate, load_memory = (_column(x, count) for x in timings)
    with np.errstate(divide="ignore", invalid="ignore"):
        load = size / (read_gbps * 1e9)
        horizon = wa.iterations * wa.iteration_time_s
        mtbf = _column(system_mtbf_s(arrays.failures, gpus, arrays.hardware.gpus_per_node, horizon), count)
        every = _column(checkpoint_every(ck.interval, stall, mtbf, wa.iteration_time_s, wa.iterations), count)
    size, write_gbps, read_gbps, load = (_column(x, count) for x in (size, write_gbps, read_gbps, load))
    return [
        CheckpointPlan(
            float(size[d]),
            float(write_gbps[d]),
            float(read_gbps[d]),
            stall[d],
            background[d],
            replicate[d],
            float(load[d]),
            load_memory[d],
            int(every[d]),
            float(mtbf[d]),
            failure_classes(configs[d]),
        )
        for d in range(count)
    ]


@dataclasses.dataclass(frozen=True)
class TableInputs:
    """What the kernel needs for any rows of one configuration's ``draws x runs`` (picklable).

    Row ``q`` is run ``q % runs`` of draw ``q // runs``, on the streams of global run
    ``first_run[q // runs] + q % runs``. ``params``/``classes``/``system_mtbf_s`` are those
    of the draw with the longest estimated run (for sizing kernel calls).
    """

    table: kernel.RunParams
    classes_table: kernel.FailureClasses
    phases_table: np.ndarray
    first_run: np.ndarray
    runs: int
    params: kernel.RunParams
    classes: kernel.FailureClasses
    system_mtbf_s: float

    def simulate_rows(self, seed: int, start: int, stop: int, out: np.ndarray) -> None:
        """Kernel output of rows ``start .. stop - 1`` into ``out``."""
        rows = np.arange(start, stop, dtype=np.int64)
        draw = rows // self.runs
        kernel.simulate_runs_table(
            self.table, self.classes_table, self.phases_table, draw, self.first_run[draw] + rows % self.runs, seed, out
        )


def table_inputs(table: DrawTable, first_run: np.ndarray, runs: int) -> TableInputs:
    """The kernel inputs of ``table`` (infeasible draws: those of a feasible one, never run)."""
    filler = table.inputs[table.feasible[0]]
    assert filler is not None, "a feasible draw has kernel inputs"
    inputs = [filler if i is None else i for i in table.inputs]
    longest = max(inputs, key=lambda i: estimate_run(i).seconds)
    return TableInputs(
        kernel.params_table([i.params for i in inputs]),
        kernel.classes_table([i.classes for i in inputs]),
        kernel.phases_table([i.phases for i in inputs]),
        np.asarray(first_run, dtype=np.int64),
        runs,
        longest.params,
        longest.classes,
        longest.system_mtbf_s,
    )
