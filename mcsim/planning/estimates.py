"""The planner's screen: every candidate evaluated analytically, in arrays (docs/model.md §9).

Per candidate: the workload model (:func:`mcsim.workload.workload_arrays`:
iteration time and memory, exactly as ``mcsim run``), the checkpoint plan's
stall and interval (:mod:`mcsim.checkpointing`), the system MTBF of its size,
and a first-order expected wall time under Poisson failures (Daly 2006,
:func:`mcsim.model.reliability.expected_run_wall_s`), then energy, cost and CO2 from
the same phase powers as the simulation (:mod:`mcsim.energy`). Every rejected
candidate keeps its reason (:data:`REJECTIONS`). The finalists are the
candidates whose objective estimate is within ``margin`` of the best, at most
``plan.finalists`` of them; the Monte Carlo ranks them (:mod:`mcsim.planner`).

No Python loop runs per candidate: loops run over GPU sizes, strategies and
intervals (a few dozen groups at most).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
from scipy import special

from mcsim.model.checkpointing import (
    checkpoint_every,
    checkpoint_transfers,
    class_mtbf_hours,
    class_units,
    losing_classes,
    system_mtbf_s,
)
from mcsim.model.energy import (
    BITS_PER_BYTE,
    J_PER_KWH,
    J_PER_MWH,
    allocation_usd,
    co2_t,
    iteration_power_w,
    job_factor_mean,
    phase_powers_w,
    rank_factor_mean,
)
from mcsim.model.reliability import (
    expected_run_wall_s,
    run_wall_variance_s2,
    wall_quantile_s,
)
from mcsim.model.restart import restart_parts
from mcsim.model.stragglers import degradation_over_run, episode_active_share, factor_law
from mcsim.model.strategies import STRATEGIES
from mcsim.model.workload import (
    FREQUENCY,
    MEMORY,
    RECOMPUTE_CODES,
    STRUCTURAL,
    TIME_RESOLUTION_CODE,
    TOO_MANY_ITERATIONS,
    Layouts,
    WorkloadArrays,
    configuration_problem,
    workload_arrays,
)
from mcsim.planning.effects import (
    mean_recovery_s,
    recovery_s,
    with_spares,
    write_window,
    young_cluster_wall_s,
)
from mcsim.planning.plan import Candidates, Plan, gpu_specs
from mcsim.scenario.catalog import gpu_hour_usd
from mcsim.scenario.config import Config

# Rejection codes (the first one found is kept), in the order they are assigned but for the constraints: those
# known exactly (7, 8) first, then those estimated: 14 (the simulation's horizon), 9, 10 (a code added later
# keeps the earlier ones' numbers).
KEPT = 0
REJECTIONS = {
    KEPT: "",
    1: "layout: the workload model cannot run it",
    2: "frequency outside the GPU's clock range",
    3: "too many iterations",
    4: "iteration below the time resolution",
    5: "memory: does not fit in GPU memory",
    6: "checkpoint strategy or failure domain does not fit the size",
    7: "constraint: GPU count limits",
    8: "constraint: facility power cap",
    9: "constraint: deadline (screen estimate of the wall time's quantile beyond it by more than the margin)",
    10: "constraint: budget (screen estimate above it by more than the margin)",
    11: "dominated: objective beyond the margin of the best (screen estimate, or the recommendation's simulated mean)",
    12: "within the margin, but never simulated: the plan's pool of simulated candidates was full",
    13: "equivalent to another candidate: the same screen estimates (e.g. microbatch without a pipeline)",
    14: "run.max_wall_days: screen estimate beyond the simulation's horizon by more than the margin",
}
WORKLOAD_REJECTION = {FREQUENCY: 2, TOO_MANY_ITERATIONS: 3, TIME_RESOLUTION_CODE: 4, MEMORY: 5}
CONSTRAINT_CODES = {"max_wall_days": 14, "gpus": 7, "power": 8, "deadline": 9, "budget": 10}
DOMINATED, BEYOND_CAP, EQUIVALENT = 11, 12, 13


@dataclass(frozen=True)
class Screen:
    """Screen estimates per candidate (SI units) and the outcome."""

    iteration_time_s: np.ndarray  # ideal, exactly mcsim run's iteration_time
    memory_per_gpu_gb: np.ndarray  # exactly mcsim run's memory_per_gpu
    checkpoint_stall_s: np.ndarray
    checkpoint_every: np.ndarray  # iterations
    system_mtbf_s: np.ndarray
    power_mw: np.ndarray  # facility power while computing (all GPUs busy), MW
    wall_s: np.ndarray  # expected wall time (Daly)
    wall_quantile_s: np.ndarray  # its deadline_probability-quantile (gamma); NaN where ruled out before
    energy_j: np.ndarray  # facility
    cost_usd: np.ndarray
    co2_t: np.ndarray
    objective: np.ndarray  # in the objective's per-run units (h, MWh, USD, t)
    rejection: np.ndarray  # REJECTIONS code
    gap: np.ndarray  # objective / best - 1 (NaN where rejected before the ranking)
    finalists: np.ndarray  # candidate indices, best screen objective first (then the reference)
    reference: int = -1  # candidate index of the plan file's own [parallelism] layout (-1: none)
    # The pool (docs/model.md §9): candidates not ruled out exactly (structure, memory, GPU count, power)
    # and not equivalent to another, best screen objective first; and each candidate's largest relative
    # excess of its estimates over the estimated constraints (<= 0: meets them all by its estimates).
    ranking: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    excess: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))


def candidate_config(plan: Plan, cand: Candidates, index: int) -> Config:
    """The :class:`Config` of one candidate (for ``mcsim run`` and the simulation)."""
    base, search = plan.scenario.base, plan.search
    spec = gpu_specs(plan)[int(cand.gpu_type[index])]
    recompute = {code: name for name, code in RECOMPUTE_CODES.items()}[int(cand.recompute[index])]
    return dataclasses.replace(
        base,
        gpu=spec,
        hardware=dataclasses.replace(base.hardware, gpu=search.gpu_types[int(cand.gpu_type[index])]),
        parallelism=dataclasses.replace(
            base.parallelism,
            gpus=int(cand.gpus[index]),
            tp=int(cand.tp[index]),
            pp=int(cand.pp[index]),
            microbatch=int(cand.microbatch[index]),
            interleave=int(cand.interleave[index]),
            sequence_parallel=bool(cand.sequence_parallel[index]),
            cp=int(cand.cp[index]),
            zero_stage=int(cand.zero_stage[index]),
        ),
        model=dataclasses.replace(base.model, recompute=recompute),
        compute=dataclasses.replace(base.compute, freq_mhz=float(cand.freq_mhz[index])),
        checkpoint=dataclasses.replace(
            base.checkpoint,
            strategy=search.strategy[int(cand.strategy[index])],
            interval=search.interval[int(cand.interval[index])],
        ),
    )


def type_prices(plan: Plan) -> np.ndarray:
    """Rental price of each searched GPU type, USD/(GPU h), in ``search.gpu_types`` order.

    NaN where the type has no price (only under the ``owned`` cost model, which uses none).
    """
    cost = plan.scenario.base.cost
    prices = (gpu_hour_usd(cost, name) for name in plan.search.gpu_types)
    return np.array([np.nan if price is None else price for price in prices], dtype=np.float64)


def _gpu_field(plan: Plan, cand: Candidates, name: str) -> np.ndarray:
    return np.array([getattr(spec, name) for spec in gpu_specs(plan)], dtype=np.float64)[cand.gpu_type]


def layouts(plan: Plan, cand: Candidates) -> Layouts:
    """The workload model's :class:`~mcsim.workload.Layouts` of the candidates."""
    field = lambda name: _gpu_field(plan, cand, name)  # noqa: E731
    return Layouts(
        cand.gpus,
        cand.tp,
        cand.pp,
        cand.microbatch,
        cand.interleave,
        cand.recompute,
        cand.freq_mhz,
        field("peak_tflops"),
        field("memory_gb"),
        field("freq_min_mhz"),
        field("freq_max_mhz"),
        field("hbm_gbps"),
        field("fp8_tflops"),
        cand.sequence_parallel,
        cand.zero_stage,
        cand.cp,
    )


def _by_group(keys: np.ndarray):
    """(value, indices) for every distinct value of ``keys``."""
    values, inverse = np.unique(keys, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(values.size + 1))
    for k, value in enumerate(values):
        yield value, order[bounds[k] : bounds[k + 1]]


def _layout_representatives(plan: Plan, cand: Candidates) -> np.ndarray | None:
    """Per candidate, the index of the candidate with its layout, strategy 0 and interval 0; None if not enumerated.

    The workload model does not read the checkpoint strategy or interval, and
    :func:`mcsim.planning.plan.enumerate_candidates` varies them (then the clock) fastest,
    so the candidate ``i - strategy * I * F - interval * F`` has the same layout, GPU type,
    recomputation, software and clock. A subset of candidates (the uncertain inputs'
    finalists) does not have that order: None.
    """
    n_freq = len(plan.search.freq_mhz) if plan.search.freq_mhz else 1
    per_strategy = len(plan.search.interval) * n_freq
    rep = np.arange(len(cand)) - cand.strategy * per_strategy - cand.interval * n_freq
    if rep.size == 0 or rep.min() < 0:
        return None
    same = (cand.strategy[rep] == 0) & (cand.interval[rep] == 0)
    for name in (
        "gpu_type",
        "gpus",
        "tp",
        "pp",
        "cp",
        "microbatch",
        "interleave",
        "recompute",
        "sequence_parallel",
        "zero_stage",
        "freq_mhz",
    ):
        same &= getattr(cand, name)[rep] == getattr(cand, name)
    return rep if bool(same.all()) else None


def layout_workload(plan: Plan, cand: Candidates) -> WorkloadArrays:
    """:func:`~mcsim.model.workload.workload_arrays` of every candidate, computed once per layout.

    Identical, element by element, to evaluating every candidate; the strategies and
    intervals of a plan multiply its candidates but not this work (docs/planning.md).
    """
    base = plan.scenario.base
    rep = _layout_representatives(plan, cand)
    if rep is None:
        return workload_arrays(base, layouts(plan, cand))
    unique = np.flatnonzero(rep == np.arange(len(cand)))
    lay = layouts(plan, cand)
    subset = type(lay)(*(getattr(lay, f.name)[unique] for f in dataclasses.fields(lay)))
    once = workload_arrays(base, subset)
    position = np.searchsorted(unique, rep)
    taken: dict[str, Any] = {}
    for f in dataclasses.fields(once):
        value = getattr(once, f.name)
        taken[f.name] = None if value is None else value[position]
    return type(once)(**taken)


def screen(plan: Plan, cand: Candidates) -> Screen:
    """Evaluate every candidate and choose the finalists (see the module docstring)."""
    base = plan.scenario.base
    wl = layout_workload(plan, cand)
    rejection = np.zeros(len(cand), dtype=np.int8)
    rejection[np.isin(wl.code, STRUCTURAL)] = 1
    for code, reason in WORKLOAD_REJECTION.items():
        rejection[(rejection == KEPT) & (wl.code == code)] = reason
    _configuration_problems(plan, cand, rejection)

    iteration_s = wl.iteration_time_s
    n = len(cand)
    stall, load, every = np.zeros(n), np.zeros(n), np.ones(n, dtype=np.int64)
    background = np.zeros(n)  # what the next checkpoint waits for after a stall: write (async) or replica
    mtbf = system_mtbf_s(base.failures, cand.gpus, base.hardware.gpus_per_node, wl.iterations * iteration_s)
    mtbf = np.broadcast_to(np.asarray(mtbf, dtype=np.float64), (n,)).copy()
    d2h = _gpu_field(plan, cand, "d2h_gbps")
    write_gbps, read_gbps, transfers = checkpoint_transfers(base, cand.gpus, d2h)
    read_gbps = cast(np.ndarray, read_gbps)  # cand.gpus is an array
    size = base.model.params * base.checkpoint.bytes_per_param
    for s_index, idx in _by_group(cand.strategy):
        strategy = STRATEGIES[plan.search.strategy[int(s_index)]]
        tr = type(transfers)(*(np.asarray(x)[idx] for x in transfers))
        timing = strategy.timings(base, iteration_s[idx], tr)
        stall[idx] = timing.stall_s
        background[idx] = {"sync": 0.0, "async": timing.write_s, "in_memory": timing.replicate_s}[strategy.kernel_hook]
        load[idx] = np.where(np.asarray(timing.load_memory_s) > 0, timing.load_memory_s, size / (read_gbps[idx] * 1e9))
    for i_index, idx in _by_group(cand.interval):
        every[idx] = checkpoint_every(
            plan.search.interval[int(i_index)], stall[idx], mtbf[idx], iteration_s[idx], wl.iterations[idx]
        )

    mean_iteration_s, power = _iteration_power(plan, cand, wl, mtbf)
    restart_parts_s = np.asarray(restart_parts(base.restart, cand.gpus, iteration_s).total_s)
    restart = _restart_s(base, cand, load, mtbf) + restart_parts_s
    cycle_stall, rollback = write_window(every, mean_iteration_s, stall, background)
    rollback = rollback + _instability_rollback_s(plan, cand, every, mean_iteration_s, wl.iterations)
    with np.errstate(over="ignore", invalid="ignore"):  # failures so frequent that no run ends: wall = inf,
        present, run_mtbf = young_cluster_wall_s(
            base,
            cand,
            lambda m: np.asarray(
                expected_run_wall_s(wl.iterations, every, mean_iteration_s, cycle_stall, restart + rollback, m)
            ),
            mtbf,
        )
        quantile = _wall_quantile_s(
            plan, wl, present, mean_iteration_s, every, cycle_stall, restart + rollback, run_mtbf, rejection == KEPT
        )
        running = present  # the planned stops' windows are idle time on top, as the spare waits
        if any(f.kind == "planned" for f in base.failures):
            stretch = _planned_stretch(base, restart_parts_s + size / (read_gbps * 1e9))
            present, quantile = present * stretch, quantile * stretch
        wall, quantile = with_spares(base, cand, present), with_spares(base, cand, quantile)
        energy, power_mw = _energy_j(
            plan,
            cand,
            wl,
            running,
            mean_iteration_s,
            every,
            cycle_stall,
            restart,
            load + restart_parts_s,
            run_mtbf,
            power,
            wall - running,
        )
    # (ruled out below: beyond run.max_wall_days; its energy and cost are then NaN or inf)
    hours = wall / 3600.0
    nodes = cand.gpus // base.hardware.gpus_per_node
    prices = type_prices(plan)
    cost = (
        allocation_usd(base.cost, prices[cand.gpu_type], cand.gpus, nodes, hours)
        + energy / J_PER_KWH * base.cost.electricity_usd_per_kwh
    )
    co2 = co2_t(base.carbon, cand.gpus, wall, energy)
    co2_total = co2["operational"] + co2["embodied"]
    estimates = {"cost": cost, "energy": energy / J_PER_MWH, "wall_time": hours, "co2": co2_total}
    objective = (
        estimates[plan.objective]
        if isinstance(plan.objective, str)
        else sum(w * estimates[k] for k, w in plan.objective.items())
    )
    exact = _constraints(plan, cand, rejection, power_mw)
    excess = constraint_excess(plan, wall, quantile, cost)
    _estimated_constraints(plan, rejection, wall, quantile, cost)
    gap, finalists, ranking = _finalists(
        plan, objective, rejection, exact, excess, (wall, energy, wl.memory_per_gpu_gb)
    )
    reference = reference_candidate(plan, cand)
    if (
        reference >= 0
        and finalists.size
        and reference not in finalists
        and rejection[reference] in (DOMINATED, BEYOND_CAP, EQUIVALENT)
    ):
        finalists = np.append(finalists, reference)  # simulated too, so the report can compare with it
    return Screen(
        iteration_s,
        wl.memory_per_gpu_gb,
        stall,
        every,
        mtbf,
        power_mw,
        wall,
        quantile,
        energy,
        cost,
        co2_total,
        objective,
        rejection,
        gap,
        finalists,
        reference,
        ranking,
        excess,
    )


def reference_candidate(plan: Plan, cand: Candidates) -> int:
    """Index of the candidate that is the plan file's own ``[parallelism]`` layout (its GPU type, size,
    recompute, strategy, interval and clock too), or -1 when the file names none or it is not searched."""
    if not plan.has_reference:
        return -1
    base, search = plan.scenario.base, plan.search
    par = base.parallelism
    try:
        gpu_type = search.gpu_types.index(base.hardware.gpu)
        strategy = search.strategy.index(base.checkpoint.strategy)
        interval = search.interval.index(base.checkpoint.interval)
    except ValueError:
        return -1
    match = (
        (cand.gpu_type == gpu_type)
        & (cand.gpus == par.gpus)
        & (cand.tp == par.tp)
        & (cand.pp == par.pp)
        & (cand.microbatch == par.microbatch)
        & (cand.interleave == par.interleave)
        & (cand.recompute == RECOMPUTE_CODES[base.model.recompute])
        & (cand.sequence_parallel == par.sequence_parallel)
        & (cand.zero_stage == par.zero_stage)
        & (cand.cp == par.cp)
        & (cand.strategy == strategy)
        & (cand.interval == interval)
        & (cand.freq_mhz == base.freq_mhz)
    )
    found = np.flatnonzero(match)
    return int(found[0]) if found.size else -1


def _configuration_problems(plan: Plan, cand: Candidates, rejection: np.ndarray) -> None:
    """Strategy and failure-domain objections, checked once per (strategy, size)."""
    base = plan.scenario.base
    key = cand.strategy.astype(np.int64) * (1 << 40) + cand.gpus
    for value, idx in _by_group(key):
        strategy, gpus = divmod(int(value), 1 << 40)
        cfg = dataclasses.replace(
            base,
            parallelism=dataclasses.replace(base.parallelism, gpus=gpus),
            checkpoint=dataclasses.replace(base.checkpoint, strategy=plan.search.strategy[strategy]),
        )
        if configuration_problem(cfg):
            rejection[idx[rejection[idx] == KEPT]] = 6


def _iteration_power(plan: Plan, cand: Candidates, wl, mtbf: np.ndarray) -> tuple[np.ndarray, SimpleNamespace]:
    """Mean executed iteration time (stragglers' expected factors, slow-node episodes, the throughput
    degradation's mean, :func:`mcsim.model.stragglers.degradation_added_share`) and mean per-GPU
    power over it.

    During an episode the slowest rank's factor is ``max(M, slowdown)``; episodes are active a share
    ``a`` of the running time (:func:`mcsim.model.stragglers.episode_active_share`), so the mean
    iteration time is the time-weighted ``1 / ((1 − a) / t + a / t_episode)`` (fewer iterations run
    in an episode). The power stays that of the iteration outside episodes (first order).
    """
    base = plan.scenario.base
    st = base.stragglers
    law_mean, episode_mean = np.ones(len(cand)), np.ones(len(cand))
    for gpus, idx in _by_group(cand.gpus):  # one quadrature per size
        law_mean[idx] = factor_law(float(gpus), st.sigma).mean
        if st.episode_rate_per_node_day > 0:
            episode_mean[idx] = factor_law(float(gpus), st.sigma, floor=st.episode_slowdown).mean
    busy, wait, checkpoint = phase_powers_w(
        _gpu_field(plan, cand, "tdp_w"),
        _gpu_field(plan, cand, "idle_w"),
        cand.freq_mhz,
        _gpu_field(plan, cand, "freq_max_mhz"),
        base.energy,
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        degraded = 1.0 + degradation_over_run(
            st.degradation_per_day / 86400.0, st.degradation_max, mtbf, wl.iterations * wl.iteration_time_s
        )
        busy_share = wl.t_comp_s / wl.compute_time_s * np.minimum(1.0, rank_factor_mean(st.sigma) / law_mean)
        phase = wl.compute_time_s * job_factor_mean(st.job_sigma) * degraded * law_mean
        power = iteration_power_w(busy, wait, busy_share, phase, wl.comm_time_s)
    iteration_s = phase + wl.comm_time_s
    if st.episode_rate_per_node_day > 0:
        rate = st.episode_rate_per_node_day * (cand.gpus // base.hardware.gpus_per_node) / 86400.0
        active = episode_active_share(rate, st.episode_hours * 3600.0, mtbf)
        in_episode = wl.compute_time_s * job_factor_mean(st.job_sigma) * degraded * episode_mean + wl.comm_time_s
        with np.errstate(invalid="ignore", divide="ignore"):
            iteration_s = 1.0 / ((1.0 - active) / iteration_s + active / in_episode)
    return iteration_s, SimpleNamespace(
        busy=busy, wait=wait, iteration=power, idle=_gpu_field(plan, cand, "idle_w"), checkpoint=checkpoint
    )


def _class_mean(base: Config, cand: Candidates, per_event, scale: float = 1.0) -> np.ndarray:
    """Rate-weighted mean over the failure classes that roll work back (planned stops apart:
    :func:`_planned_stretch`) of ``per_event(failure_class) * scale`` (scalar or array)."""
    classes = losing_classes(base.failures)
    rates = [class_units(f, cand.gpus, base.hardware.gpus_per_node) / (class_mtbf_hours(f) * 3600.0) for f in classes]
    if not rates:
        return np.zeros(len(cand))
    total = sum(rates)
    weighted = sum(r * per_event(f) * scale for r, f in zip(rates, classes, strict=False))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), 0.0)


def _restart_s(base: Config, cand: Candidates, load: np.ndarray, mtbf: np.ndarray) -> np.ndarray:
    """Rate-weighted mean recovery of the failure classes plus the checkpoint load, s: a recovery (its
    law's mean, :func:`mcsim.planning.effects.recovery_s`) and, for hangs, the detection time."""
    return _class_mean(base, cand, lambda f: recovery_s(f) / 60.0 + f.detection_minutes, 60.0) + load


def _planned_stretch(base: Config, restart_load_s: np.ndarray) -> np.ndarray:
    """Factor on the wall time for planned stops (cluster scope), ``1 / (1 - down share)``.

    A class's stops renew in wall time (mean gap ``M``); a stop is down ``D`` (its window, the
    restart's parts and a storage load: ``restart_load_s``), and one whose gap from the previous
    stop is shorter than ``D`` falls in that window and is dropped, so about ``(1 - F(D)) / M``
    stops a second are taken, each down ``D`` (``F`` the Weibull law of a gap): ``1 + D / M`` to
    first order for the exponential law, exactly ``M / (M - D)`` for a periodic one. docs/model.md §9.
    """
    down = np.zeros_like(restart_load_s)
    for f in base.failures:
        if f.kind == "planned":
            mtbf_s = f.mtbf_hours * 3600.0
            stop_s = mean_recovery_s(f) + restart_load_s
            scale_s = mtbf_s / math.gamma(1.0 + 1.0 / f.shape)
            down = down + stop_s * np.exp(-((stop_s / scale_s) ** f.shape)) / mtbf_s
    with np.errstate(divide="ignore"):
        return np.where(down < 1.0, 1.0 / (1.0 - np.minimum(down, 1.0)), np.inf)


def _instability_rollback_s(
    plan: Plan, cand: Candidates, every: np.ndarray, iteration_s: np.ndarray, iterations: np.ndarray
) -> np.ndarray:
    """Rate-weighted mean time an event rolls back beyond the last checkpoint, s: an instability's
    ``rollback_checkpoints`` storage checkpoints of ``every`` iterations (``every x persist_every`` for
    in_memory), done again at the mean iteration time; at most half the run's iterations (first order:
    the progress at an event is about uniform over the run, and the start bounds every rollback)."""
    base = plan.scenario.base
    in_memory = np.array([STRATEGIES[name].kernel_hook == "in_memory" for name in plan.search.strategy])
    step = every * np.where(in_memory[cand.strategy], base.checkpoint.in_memory_persist_every, 1)
    return _class_mean(
        base,
        cand,
        lambda f: (
            np.minimum(f.rollback_checkpoints * step, iterations / 2.0) * iteration_s
            if f.kind == "instability"
            else 0.0
        ),
    )


def _energy_j(plan: Plan, cand: Candidates, wl, wall, iteration_s, every, stall, restart, active, mtbf, power, waiting):
    """Facility energy of the expected run, J, and the facility power while computing, MW.

    ``wall``: the expected wall time with every node present; ``stall``: checkpoint time per cycle,
    waits included (checkpoint power); ``restart``: recovery and load per failure, of which ``active``
    (the load and the restart's parts) at the checkpoint power and the rest idle; the rest of ``wall``
    beyond the useful iterations is lost work done again (computing); ``waiting``: the time waiting for
    repaired spare nodes on top (idle)."""
    base = plan.scenario.base
    en, net = base.energy, base.network
    gpus = cand.gpus
    nodes = gpus // base.hardware.gpus_per_node
    checkpoints = np.maximum(-(-wl.iterations // every) - 1, 0)
    stalled = checkpoints * stall
    failures = np.where(np.isfinite(mtbf), wall / mtbf, 0.0)
    recovering = failures * restart
    # One load and the restart's parts per interruption: the failures come in busy periods of e^{restart/M}
    # (docs/model.md §3, Takacs), so e^{-restart/M} interruptions a failure (to first order).
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        interruptions = failures * np.where(np.isfinite(mtbf), np.exp(-restart / mtbf), 1.0)
    loading = interruptions * np.minimum(active, restart)
    useful = wl.iterations * iteration_s
    lost = np.maximum(wall - useful - stalled - recovering, 0.0)
    gpu_j = gpus * (
        power.iteration * (useful + lost)
        + power.checkpoint * (stalled + loading)
        + power.idle * (recovering - loading + waiting)
    )
    bits_j = (
        (wl.intra_bytes_per_gpu * net.intra_pj_per_bit + wl.inter_bytes_per_gpu * net.inter_pj_per_bit)
        * BITS_PER_BYTE
        * 1e-12
        * gpus
        * wl.iterations
        * (1.0 + lost / np.where(useful > 0, useful, 1.0))
    )
    size = base.model.params * base.checkpoint.bytes_per_param
    storage_j = checkpoints * size * BITS_PER_BYTE * en.storage_pj_per_bit * 1e-12
    node_j = nodes * en.node_overhead_w * (wall + waiting)
    energy = en.pue * (gpu_j + bits_j + storage_j + node_j)
    power_mw = en.pue * (gpus * power.busy + nodes * en.node_overhead_w) / 1e6
    return energy, power_mw


def _wall_quantile_s(plan: Plan, wl, wall, iteration_s, every, stall, restart, mtbf, live) -> np.ndarray:
    """The ``deadline_probability``-quantile of the wall time, s (docs/model.md §9); NaN where ``live`` is
    False (ruled out before: no later check reads it there; its gamma quantile was half the screen's time,
    issue 26 item 5).

    The wall time is its floor (every iteration at the job factor's least, 1, no failure) plus a
    gamma-distributed excess whose mean is Daly's expected wall time less the floor and whose variance
    is the failures' renewal variance (:func:`mcsim.model.reliability.run_wall_variance_s2`) plus the job
    factor's, drawn at the start and after every restart (so over ``1 + failures`` pieces of the run).
    """
    base = plan.scenario.base
    st = base.stragglers
    failures_var = run_wall_variance_s2(wl.iterations, every, iteration_s, stall, restart, mtbf)
    job_mean = job_factor_mean(st.job_sigma)
    job_square = 0.5 + math.exp(2.0 * st.job_sigma**2) * float(special.ndtr(2.0 * st.job_sigma))
    phase_s = (iteration_s - wl.comm_time_s) / job_mean  # the compute phase at job factor 1
    pieces = 1.0 + np.where(np.isfinite(mtbf) & (mtbf > 0), wall / np.where(mtbf > 0, mtbf, 1.0), 0.0)
    job_var = (wl.iterations * phase_s) ** 2 * max(job_square - job_mean**2, 0.0) / pieces
    checkpoints = np.maximum(-(-wl.iterations // every) - 1, 0)
    floor = wl.iterations * (phase_s + wl.comm_time_s) + checkpoints * stall
    shape = np.shape(live)
    floor, wall, variance = (np.broadcast_to(x, shape)[live] for x in (floor, wall, failures_var + job_var))
    quantile = np.full(shape, np.nan)
    quantile[live] = wall_quantile_s(floor, wall, variance, plan.constraints.deadline_probability)
    return quantile


def _constraints(plan: Plan, cand: Candidates, rejection, power_mw) -> np.ndarray:
    """Rule out the candidates that fail a constraint known exactly (GPU count, power cap); returns the
    mask of those that pass them and every structural check (the pool's candidates)."""
    c = plan.constraints
    checks = [("gpus", (cand.gpus < c.min_gpus) | (cand.gpus > c.max_gpus))]
    if c.power_mw is not None:
        checks.append(("power", power_mw > c.power_mw))
    for name, failed in checks:
        rejection[(rejection == KEPT) & failed] = CONSTRAINT_CODES[name]
    return rejection == KEPT


def constraint_excess(plan: Plan, wall_s: np.ndarray, quantile_s: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Each candidate's largest relative excess of its screen estimates over the constraints the screen
    estimates: the simulation's horizon (mean wall time against ``run.max_wall_days``), the deadline (the
    wall time's ``deadline_probability``-quantile against ``deadline_days``) and the budget (mean cost against
    ``budget_usd``). <= 0: meets them all by its estimates; inf where an estimate is not finite."""
    c = plan.constraints
    excess = wall_s / (plan.scenario.base.run.max_wall_days * 86400.0) - 1.0
    if c.deadline_days is not None:
        excess = np.maximum(excess, quantile_s / (c.deadline_days * 86400.0) - 1.0)
    if c.budget_usd is not None:
        excess = np.maximum(excess, cost / c.budget_usd - 1.0)
    return np.where(np.isnan(excess), np.inf, excess)


def _estimated_constraints(plan: Plan, rejection: np.ndarray, wall_s, quantile_s, cost) -> None:
    """Rule out the candidates whose estimates exceed a constraint by more than the margin, naming the
    first: the simulation's horizon, the deadline (on the wall time's quantile), the budget."""
    c, margin = plan.constraints, plan.margin
    checks = [("max_wall_days", wall_s > plan.scenario.base.run.max_wall_days * 86400.0 * (1.0 + margin))]
    if c.deadline_days is not None:
        checks.append(("deadline", quantile_s > c.deadline_days * 86400.0 * (1.0 + margin)))
    if c.budget_usd is not None:
        checks.append(("budget", cost > c.budget_usd * (1.0 + margin)))
    for name, failed in checks:
        rejection[(rejection == KEPT) & failed] = CONSTRAINT_CODES[name]


def _finalists(
    plan: Plan,
    objective: np.ndarray,
    rejection: np.ndarray,
    exact: np.ndarray,
    excess: np.ndarray,
    tie_keys: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gaps, the first finalists and the pool's ranking (docs/model.md §9).

    The ranking: every candidate that passes the exact checks, one of each set of equal estimates
    (the one with the least memory per GPU), best screen objective first. The gap of a candidate that may
    meet the constraints (excess within the margin) is measured against the best of those that meet them
    by their estimates (so a candidate just beyond a constraint, likely to be dropped when simulated,
    rules no other out); the finalists are those within the margin of it, at most ``plan.finalists``.
    """
    gap = np.full(objective.shape, np.nan)
    eligible = np.flatnonzero(exact)
    wall, energy, memory = (key[eligible] for key in tie_keys)
    order = eligible[np.lexsort((memory, energy, wall, objective[eligible]))]
    same = np.zeros(order.size, dtype=bool)
    same[1:] = (
        (objective[order][1:] == objective[order][:-1])
        & (tie_keys[0][order][1:] == tie_keys[0][order][:-1])
        & (tie_keys[1][order][1:] == tie_keys[1][order][:-1])
    )
    duplicates = order[same]
    rejection[duplicates[rejection[duplicates] == KEPT]] = EQUIVALENT
    ranking = order[~same]
    kept = ranking[rejection[ranking] == KEPT]
    if kept.size == 0:
        return gap, kept, ranking
    meets = kept[excess[kept] <= 0]
    best = objective[meets if meets.size else kept].min()
    if best > 0:
        gap[kept] = objective[kept] / best - 1.0
    else:  # an objective of 0 (co2 on a zero-carbon grid): the others are infinitely far, the ties at 0
        gap[kept] = np.where(objective[kept] == best, 0.0, np.inf)
    rejection[kept[gap[kept] > plan.margin]] = DOMINATED
    within = kept[gap[kept] <= plan.margin]
    rejection[within[plan.finalists :]] = BEYOND_CAP
    return gap, within[: plan.finalists], ranking


def binding_constraint(rejection: np.ndarray) -> str:
    """The constraint that rejected the most candidates that fit in memory, or ""."""
    counts = {name: int(np.sum(rejection == code)) for name, code in CONSTRAINT_CODES.items()}
    name, count = max(counts.items(), key=lambda kv: kv[1])
    return name if count else ""
