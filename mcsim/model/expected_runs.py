"""The screen's estimates: every candidate's expected run, analytically, in arrays (docs/model.md §9).

Per candidate, from its workload arrays (iteration time and memory, exactly as ``mcsim run``:
:func:`mcsim.planning.candidates.layout_workload`): the checkpoint
plan's stall and interval (:mod:`mcsim.model.checkpointing`), the system MTBF of its size, and a
first-order expected wall time under Poisson failures (Daly 2006,
:func:`mcsim.model.reliability.expected_run_wall_s`) with its ``deadline_probability``-quantile,
then energy, cost and CO2 from the same phase powers as the simulation (:mod:`mcsim.model.energy`).

Daly's estimate is corrected, to first order, for the effects the simulation models beyond it,
each in one function here: the wait for a checkpoint write or replica that outlasts the compute
between checkpoints and the extra rollback of a failure while it is in flight (:func:`write_window`),
the mean failure rate over the run on a young or aged cluster (:func:`young_cluster_wall_s`), the
waits for repaired spare nodes (:func:`with_spares`), a recovery that is a law rather than a fixed
time (:func:`recovery_s`), planned stops (:func:`_planned_stretch`), instabilities that roll back
beyond the last checkpoint (:func:`_instability_rollback_s`), and slow-node episodes and the
throughput degradation in the mean iteration time (:func:`_iteration_power`). Their measured
errors against simulation are in docs/planning.md ("The screen's error per feature",
``benchmarks/bench_screen_features.py``).

No Python loop runs per candidate: loops run over GPU sizes, strategies and intervals (a few
dozen groups at most).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NamedTuple, cast

import numpy as np
from scipy import special

from mcsim.model.checkpointing import (
    checkpoint_every,
    checkpoint_transfers,
    class_mtbf_hours,
    class_units,
    losing_classes,
    nodes_taken,
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
from mcsim.model.reliability import expected_renewals, expected_run_wall_s, run_wall_variance_s2, wall_quantile_s
from mcsim.model.restart import restart_parts
from mcsim.model.spares import wall_with_spares_s
from mcsim.model.stragglers import degradation_over_run, episode_active_share, factor_law
from mcsim.model.strategies import STRATEGIES
from mcsim.model.workload import WorkloadArrays
from mcsim.planning.candidates import Candidates, gpu_field
from mcsim.planning.plan_file import Plan, weighted_objective
from mcsim.scenario.catalog import gpu_hour_usd
from mcsim.scenario.config import Config
from mcsim.scenario.schema import FailureClass

# Choice: one mean rate over the whole run. Daly segments at the rate of each piece of the run
# (16 pieces in order) were 20-27 % pessimistic on the young-cluster space of
# benchmarks/bench_screen_features.py (the early failures of a young cluster come in bursts that
# mostly restart recoveries, which Poisson segments at the piece's rate overcount); the mean rate is
# 8.3 % pessimistic at worst there. The wall time T then solves T = Daly(T / failures in [0, T]): by bisection on log T
# (BISECTIONS halvings), since passes of that fixed point oscillate where the rate falls steeply
# (Weibull shape 0.05: a finite T gives a rate at which no run ends, an endless one the stationary rate).
BISECTIONS = 60


@dataclass(frozen=True)
class Estimates:
    """The screen's estimates per candidate (SI units but where named)."""

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


class _Checkpoints(NamedTuple):
    """Every candidate's checkpoint plan and failure rate, as the estimates read them."""

    mtbf_s: np.ndarray  # the job's stationary mean time between failures
    stall_s: np.ndarray  # training stall per checkpoint
    background_s: np.ndarray  # what the next checkpoint waits for after a stall: write (async) or replica
    load_s: np.ndarray  # checkpoint load on a restart
    every: np.ndarray  # checkpoint interval, iterations
    storage_load_s: np.ndarray  # the load from storage (a planned stop's)


def by_group(keys: np.ndarray) -> Iterator[tuple[Any, np.ndarray]]:
    """``(value, indices)`` for every distinct value of ``keys`` (a field of the candidates, or a key made
    of several), values ascending: the screen's loops run over these groups, never over candidates."""
    values, inverse = np.unique(keys, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(values.size + 1))
    for k, value in enumerate(values):
        yield value, order[bounds[k] : bounds[k + 1]]


def estimate(plan: Plan, cand: Candidates, wl: WorkloadArrays, live: np.ndarray) -> Estimates:
    """Every candidate's estimates (the module docstring); the wall time's quantile only where ``live``
    (not ruled out before: no later check reads it elsewhere, and its gamma quantile is the costliest
    part of the screen)."""
    base = plan.scenario.base
    ck = _checkpoints(plan, cand, wl)
    mean_iteration_s, power = _iteration_power(plan, cand, wl, ck.mtbf_s)
    restart_parts_s = np.asarray(restart_parts(base.restart, cand.gpus, wl.iteration_time_s).total_s)
    restart = _restart_s(base, cand, ck.load_s) + restart_parts_s
    cycle_stall, rollback = write_window(ck.every, mean_iteration_s, ck.stall_s, ck.background_s)
    rollback = rollback + _instability_rollback_s(plan, cand, ck.every, mean_iteration_s, wl.iterations)
    lost = restart + rollback
    with np.errstate(over="ignore", invalid="ignore"):  # failures so frequent that no run ends: wall = inf,
        present, run_mtbf = young_cluster_wall_s(
            base,
            cand,
            lambda m: np.asarray(expected_run_wall_s(wl.iterations, ck.every, mean_iteration_s, cycle_stall, lost, m)),
            ck.mtbf_s,
        )
        quantile = _wall_quantile_s(plan, wl, present, mean_iteration_s, ck.every, cycle_stall, lost, run_mtbf, live)
        running = present  # the planned stops' windows are idle time on top, as the spare waits
        if any(f.kind == "planned" for f in base.failures):
            stretch = _planned_stretch(base, restart_parts_s + ck.storage_load_s)
            present, quantile = present * stretch, quantile * stretch
        wall, quantile = with_spares(base, cand, present), with_spares(base, cand, quantile)
        energy, power_mw = _energy_j(
            plan, cand, wl, running, mean_iteration_s, ck.every, cycle_stall, restart,
            ck.load_s + restart_parts_s, run_mtbf, power, wall - running,
        )  # fmt: skip
    # (ruled out by the screen: beyond run.max_wall_days; its energy and cost are then NaN or inf)
    cost, co2 = _cost_co2(plan, cand, wall, energy)
    outputs = {"cost": cost, "energy": energy / J_PER_MWH, "wall_time": wall / 3600.0, "co2": co2}
    return Estimates(
        wl.iteration_time_s, wl.memory_per_gpu_gb, ck.stall_s, ck.every, ck.mtbf_s, power_mw, wall, quantile,
        energy, cost, co2, weighted_objective(outputs, plan.objective_weights),
    )  # fmt: skip


def _checkpoints(plan: Plan, cand: Candidates, wl: WorkloadArrays) -> _Checkpoints:
    """Every candidate's checkpoint stall, background write, load and interval (per strategy and per
    interval rule), and its job's MTBF."""
    base = plan.scenario.base
    strategies, intervals = list(by_group(cand.strategy)), list(by_group(cand.interval))
    d2h = gpu_field(plan, cand, "d2h_gbps")
    iteration_s = wl.iteration_time_s
    n = len(cand)
    stall, load, every, background = np.zeros(n), np.zeros(n), np.ones(n, dtype=np.int64), np.zeros(n)
    mtbf = system_mtbf_s(base.failures, cand.gpus, base.hardware.gpus_per_node, wl.iterations * iteration_s)
    mtbf = np.broadcast_to(np.asarray(mtbf, dtype=np.float64), (n,)).copy()
    _, read_gbps, transfers = checkpoint_transfers(base, cand.gpus, d2h)
    read_gbps = cast(np.ndarray, read_gbps)  # cand.gpus is an array
    size = base.model.params * base.checkpoint.bytes_per_param
    for s_index, idx in strategies:
        strategy = STRATEGIES[plan.search.strategy[int(s_index)]]
        timing = strategy.timings(base, iteration_s[idx], type(transfers)(*(np.asarray(x)[idx] for x in transfers)))
        stall[idx] = timing.stall_s
        background[idx] = {"sync": 0.0, "async": timing.write_s, "in_memory": timing.replicate_s}[strategy.kernel_hook]
        load[idx] = np.where(np.asarray(timing.load_memory_s) > 0, timing.load_memory_s, size / (read_gbps[idx] * 1e9))
    for i_index, idx in intervals:
        every[idx] = checkpoint_every(
            plan.search.interval[int(i_index)], stall[idx], mtbf[idx], iteration_s[idx], wl.iterations[idx]
        )
    return _Checkpoints(mtbf, stall, background, load, every, size / (read_gbps * 1e9))


def _cost_co2(plan: Plan, cand: Candidates, wall: np.ndarray, energy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected cost, USD (allocation plus electricity), and emissions, t CO2e (operational plus embodied)."""
    base = plan.scenario.base
    prices = type_prices(plan)[cand.gpu_type]
    nodes = cand.gpus // base.hardware.gpus_per_node
    cost = (
        allocation_usd(base.cost, prices, cand.gpus, nodes, wall / 3600.0)
        + energy / J_PER_KWH * base.cost.electricity_usd_per_kwh
    )
    co2 = co2_t(base.carbon, cand.gpus, wall, energy)
    return cost, co2["operational"] + co2["embodied"]


def type_prices(plan: Plan) -> np.ndarray:
    """Rental price of each searched GPU type, USD/(GPU h), in ``search.gpu_types`` order.

    NaN where the type has no price (only under the ``owned`` cost model, which uses none).
    """
    cost = plan.scenario.base.cost
    prices = (gpu_hour_usd(cost, name) for name in plan.search.gpu_types)
    return np.array([np.nan if price is None else price for price in prices], dtype=np.float64)


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
    for gpus, idx in by_group(cand.gpus):  # one quadrature per size
        law_mean[idx] = factor_law(float(gpus), st.sigma).mean
        if st.episode_rate_per_node_day > 0:
            episode_mean[idx] = factor_law(float(gpus), st.sigma, floor=st.episode_slowdown).mean
    busy, wait, checkpoint = phase_powers_w(
        gpu_field(plan, cand, "tdp_w"),
        gpu_field(plan, cand, "idle_w"),
        cand.freq_mhz,
        gpu_field(plan, cand, "freq_max_mhz"),
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
        busy=busy, wait=wait, iteration=power, idle=gpu_field(plan, cand, "idle_w"), checkpoint=checkpoint
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


def _restart_s(base: Config, cand: Candidates, load: np.ndarray) -> np.ndarray:
    """Rate-weighted mean recovery of the failure classes plus the checkpoint load, s: a recovery (its
    law's mean, :func:`recovery_s`) and, for hangs, the detection time."""
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
    False (ruled out before: no later check reads it there, and its gamma quantile, computed for every
    candidate, took half the screen's time).

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


def ages_matter(base: Config) -> bool:
    """Whether a failure class's rate changes over the run (Weibull, not stationary at the start)."""
    return any(f.shape != 1.0 and f.initial_age != "stationary" for f in base.failures)


def expected_failures(base: Config, cand: Candidates, t_s: np.ndarray) -> np.ndarray:
    """Expected failures of the job in ``[0, t_s]`` (every class, its units replaced when they fail)."""
    failures = np.zeros(len(cand))
    for f in losing_classes(base.failures):
        units = class_units(f, cand.gpus, base.hardware.gpus_per_node)
        failures = failures + units * expected_renewals(
            t_s, f.shape, float(class_mtbf_hours(f)) * 3600.0, f.initial_age
        )
    return failures


def run_mtbf_s(base: Config, cand: Candidates, wall_s: np.ndarray, mtbf_s: np.ndarray) -> np.ndarray:
    """The job's mean time between failures over a run of ``wall_s``: ``wall / Σ units × expected
    failures of a unit in [0, wall]`` (:func:`mcsim.model.reliability.expected_renewals`); ``mtbf_s``
    (the stationary one) when every class is stationary or exponential, or no failure is expected."""
    if not ages_matter(base):
        return mtbf_s
    horizon = np.where(np.isfinite(wall_s) & (wall_s > 0), wall_s, 0.0)
    failures = expected_failures(base, cand, horizon)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((horizon > 0) & (failures > 0), horizon / np.where(failures > 0, failures, 1.0), mtbf_s)


def young_cluster_wall_s(
    base: Config, cand: Candidates, daly: Callable[[np.ndarray], np.ndarray], mtbf_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The expected wall time ``T`` with ``T = daly(run_mtbf_s(T))``, and that MTBF (s).

    ``daly(mtbf)``: Daly's expected wall time at a job MTBF. Bisection on ``log T`` between the run
    without failures and twice the simulation's horizon (``run.max_wall_days``); inf where even that
    is too short. ``T − daly(run_mtbf(T))`` falls as T grows when the rate falls with age (shape < 1)
    and rises slower than T otherwise, so the root is unique.
    """
    if not ages_matter(base):
        return daly(mtbf_s), mtbf_s
    low = np.log(daly(np.full(len(cand), np.inf)))
    high = np.full(len(cand), np.log(2.0 * base.run.max_wall_days * 86400.0))
    endless = _excess(base, cand, daly, np.exp(high), mtbf_s) > 0
    for _ in range(BISECTIONS):
        middle = 0.5 * (low + high)
        above = _excess(base, cand, daly, np.exp(middle), mtbf_s) > 0  # the root is above the middle
        low, high = np.where(above, middle, low), np.where(above, high, middle)
    wall = np.where(endless, np.inf, np.exp(high))
    return wall, run_mtbf_s(base, cand, wall, mtbf_s)


def _excess(base: Config, cand: Candidates, daly, wall_s: np.ndarray, mtbf_s: np.ndarray) -> np.ndarray:
    """``daly(run_mtbf(T)) − T``: positive where the wall time ``T`` is too short to hold its failures."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.nan_to_num(daly(run_mtbf_s(base, cand, wall_s, mtbf_s)) - wall_s, nan=np.inf)


def with_spares(base: Config, cand: Candidates, wall_s: np.ndarray) -> np.ndarray:
    """``wall_s`` (every node present) stretched by the waits for repaired spare nodes
    (:func:`mcsim.model.spares.wall_with_spares_s`; unchanged without a spare pool)."""
    spares = base.hardware.spare_nodes
    if spares is None:
        return wall_s
    out = np.array(wall_s, dtype=np.float64)
    for gpus in np.unique(cand.gpus):
        idx = np.flatnonzero(cand.gpus == gpus)
        classes = [
            (
                float(class_units(f, int(gpus), base.hardware.gpus_per_node)) / (float(class_mtbf_hours(f)) * 3600.0),
                nodes_taken(f),
                f.repair_hours * 3600.0,
                f.repair_sigma,
            )
            for f in base.failures
        ]
        out[idx] = wall_with_spares_s(out[idx], classes, spares)
    return out


def mean_recovery_s(fclass: FailureClass) -> float:
    """A class's mean recovery before the load, s: ``recovery_minutes`` plus a person's share of ``manual_hours``."""
    return fclass.recovery_minutes * 60.0 + fclass.manual_share * fclass.manual_hours * 3600.0


def fixed_recovery(fclass: FailureClass) -> bool:
    """Whether every recovery of the class is ``recovery_minutes`` (no law, no list, no person)."""
    return fclass.recovery_sigma == 0.0 and fclass.manual_share == 0.0 and not fclass.recovery_durations_minutes


def recovery_s(fclass: FailureClass) -> float:
    """A class's recovery (before the load) as Daly's estimate sees it, s: its mean, whatever its law.

    A failure during a recovery does not cut the recovery under way short (docs/model.md §3): training
    restarts once every incident's own recovery, then the restart's parts and the load, are done. The
    recovery is then the busy period of an M/G/inf queue begun by the first incident (arrivals at the
    job's failure rate ``1/M``, each busy for its draw ``X`` plus the parts and the load ``L``), whose
    mean is ``M (e^{(E[X] + L)/M} - 1)`` with ``e^{(E[X] + L)/M}`` incidents (Takacs 1962): Daly's cost
    of a fixed recovery of ``E[X]``, exactly. Only the mean of the law matters.
    """
    return mean_recovery_s(fclass)


def write_window(every, iteration_s, stall, background) -> tuple[np.ndarray, np.ndarray]:
    """Checkpoint time per cycle and extra loss per failure of a write (or replica) in flight, s.

    After a checkpoint's stall the state is durable (async, gockpt) or restorable from the peer
    (in_memory) only ``background`` seconds later, and the next checkpoint waits for it: a cycle
    of ``every`` iterations of mean length ``iteration_s`` is ``stall + max(every × iteration_s,
    background)``, so the stall per cycle grows by the wait ``max(0, background − every ×
    iteration_s)``. A failure while the write is in flight rolls back one cycle more: with failures
    uniform over a cycle of length ``L = stall + max(compute, background)`` that happens with
    probability ``background / L`` and costs the previous cycle's compute and stall again (its wait
    not: after a restart no write is in flight), so ``background (compute + stall) / L`` more per
    failure on average, carried as part of the restart (``background`` itself when the compute
    covers the write).
    """
    compute = every * iteration_s
    wait = np.maximum(background - compute, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cycle = stall + np.maximum(compute, background)
        rollback = np.where(cycle > 0, background * (compute + stall) / np.where(cycle > 0, cycle, 1.0), 0.0)
    return stall + wait, rollback
