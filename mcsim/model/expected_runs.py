"""Candidate runs' first-order expected wall time, energy, cost and CO2, analytically, in arrays (docs/model.md §9).

Per candidate (:class:`CandidateRuns`: a search's candidates as arrays, beside one base configuration),
each model module asked once where the data allow, in this order: its workload (iteration time and
memory, exactly as ``mcsim run``: :mod:`mcsim.model.workload`, once per distinct layout) and whether
its checkpoint strategy and failure domains fit its size (:mod:`mcsim.model.feasibility`); its
checkpoint plan (stall, background write, load, interval) and failure rates
(:mod:`mcsim.model.checkpointing`); its mean executed iteration time and phase powers
(:mod:`mcsim.model.stragglers`, :mod:`mcsim.model.energy`) and its restart's parts
(:mod:`mcsim.model.restart`); then a first-order expected wall time under Poisson failures (Daly 2006,
:mod:`mcsim.model.reliability`) with its ``deadline_probability``-quantile, the waits for repaired spare
nodes (:mod:`mcsim.model.spares`), and energy, cost and CO2 from the same phase powers as the
simulation (:mod:`mcsim.model.energy`). The planner's screen (:mod:`mcsim.planning.screen`) rules
candidates out and ranks them by these estimates.

Daly's estimate is corrected, to first order, for the effects the simulation models beyond it: the
wait for a checkpoint write or replica that outlasts the compute between checkpoints and the extra
rollback of a failure while it is in flight (:func:`write_window`), a recovery that is a law rather
than a fixed time (:func:`recovery_s`), planned stops (:func:`_planned_stretch`), instabilities that
roll back beyond the last checkpoint (:func:`_instability_rollback_s`), slow-node episodes and the
throughput degradation in the mean iteration time (:func:`_iteration_power`), here; the mean failure
rate over the run on a young or aged cluster (:func:`mcsim.model.reliability.young_cluster_wall_s`)
and the spare waits (:func:`mcsim.model.spares.wall_with_spares_by_size_s`) and the waits for a person
(:func:`_staff_waits_s`, :func:`mcsim.model.staffing.expected_staff_waits_s`) in the modules of their models.
Their measured errors against simulation are in docs/planning.md ("The screen's error per feature",
``benchmarks/bench_screen_features.py``).

No Python loop runs per candidate: loops run over GPU sizes, strategies and intervals (a few
dozen groups at most).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from mcsim._lazy import lazy_module
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
    expected_run_cost_co2,
    expected_run_energy_j,
    iteration_power_w,
    job_factor_mean,
    phase_powers_w,
    rank_factor_mean,
)
from mcsim.model.feasibility import FEASIBLE, configuration_problem
from mcsim.model.layouts import Layouts
from mcsim.model.reliability import (
    expected_run_wall_s,
    run_wall_variance_s2,
    summed_over_intervals,
    wall_quantile_s,
    young_cluster_wall_s,
)
from mcsim.model.restart import restart_parts
from mcsim.model.spares import wall_with_spares_by_size_s
from mcsim.model.staffing import expected_staff_waits_s
from mcsim.model.stragglers import degradation_over_run, episode_active_share, factor_law, straggler_sigma
from mcsim.model.strategies import STRATEGIES
from mcsim.model.workload import WorkloadArrays, workload_arrays
from mcsim.scenario.config import Config
from mcsim.scenario.interruptions import FailureClass
from mcsim.scenario.schema import Interval

if TYPE_CHECKING:
    from scipy import special
else:  # SciPy at its first use: a command that simulates nothing never needs it
    special = lazy_module("scipy.special")


@dataclass(frozen=True)
class CandidateRuns:
    """Candidate runs as arrays on one base configuration: per candidate its layout (the workload model's
    :class:`~mcsim.model.layouts.Layouts`, the GPU's fields with the scenario's overrides), checkpoint
    strategy and interval and GPU type; per GPU type the rest of its catalog fields and its rental price."""

    layouts: Layouts  # per candidate: size, parallelism, clock and the GPU's fields
    same_layout: np.ndarray  # per candidate, the index of a candidate with its layout (the workload is computed once)
    strategy: np.ndarray  # per candidate, index into strategies
    interval: np.ndarray  # per candidate, index into intervals
    gpu_type: np.ndarray  # per candidate, index into the per-type fields
    d2h_gbps: np.ndarray  # per GPU type: device-to-host bandwidth, GB/s
    tdp_w: np.ndarray  # per GPU type
    idle_w: np.ndarray  # per GPU type
    gpu_hour_usd: np.ndarray  # per GPU type: rental price, USD/(GPU h); NaN where none (the owned cost model)
    strategies: tuple[str, ...]  # checkpoint strategy names
    intervals: tuple[Interval, ...]  # checkpoint interval rules

    def __len__(self) -> int:
        return int(self.layouts.gpus.size)

    @property
    def gpus(self) -> np.ndarray:
        return self.layouts.gpus


@dataclass(frozen=True)
class ExpectedRuns:
    """Every candidate run's first-order estimates (SI units but where named)."""

    feasibility: np.ndarray  # the workload model's code (FEASIBLE where its layout can run)
    configuration_fits: np.ndarray  # bool: its checkpoint strategy and failure domains fit its size
    iteration_time_s: np.ndarray  # ideal, exactly mcsim run's iteration_time
    memory_per_gpu_gb: np.ndarray  # exactly mcsim run's memory_per_gpu
    checkpoint_stall_s: np.ndarray
    checkpoint_every: np.ndarray  # iterations
    system_mtbf_s: np.ndarray
    power_mw: np.ndarray  # facility power while computing (all GPUs busy), MW
    wall_s: np.ndarray  # expected wall time (Daly)
    wall_quantile_s: np.ndarray  # its deadline_probability-quantile (gamma); NaN where the run cannot run
    energy_j: np.ndarray  # facility
    cost_usd: np.ndarray
    co2_t: np.ndarray


class _Checkpoints(NamedTuple):
    """Every candidate's checkpoint plan and failure rates, as the estimates read them."""

    mtbf_s: np.ndarray  # the job's stationary mean time between failures
    stall_s: np.ndarray  # training stall per checkpoint
    background_s: np.ndarray  # what the next checkpoint waits for after a stall: write (async) or replica
    load_s: np.ndarray  # checkpoint load on a restart
    every: np.ndarray  # checkpoint interval, iterations
    storage_load_s: np.ndarray  # the load from storage (a planned stop's)
    # (class, its units per candidate, a unit's MTBF with its bad replacements s) of every class that rolls
    # work back (all but planned stops), and, with a spare pool, of every class as the pool reads it:
    # (units, unit MTBF s, nodes a failure takes out, mean repair s, its log-sd).
    losing: tuple[tuple[FailureClass, np.ndarray, float], ...]
    repairs: tuple[tuple[np.ndarray, float, int, float, float], ...]


def by_group(keys: np.ndarray) -> Iterator[tuple[Any, np.ndarray]]:
    """``(value, indices)`` for every distinct value of ``keys`` (a field of the candidates, or a key made
    of several), values ascending: the estimates' loops run over these groups, never over candidates."""
    values, inverse = np.unique(keys, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(values.size + 1))
    for k, value in enumerate(values):
        yield value, order[bounds[k] : bounds[k + 1]]


def expected_runs(base: Config, runs: CandidateRuns, deadline_probability: float) -> ExpectedRuns:
    """Every candidate's estimates (the module docstring); the wall time's ``deadline_probability``-quantile
    only where the candidate can run (its gamma quantile is the costliest part of the estimates)."""
    wl = layout_workload(base, runs)
    fits = configuration_fits(base, runs)
    ck = _checkpoints(base, runs, wl)
    mean_iteration_s, power = _iteration_power(base, runs, wl, ck.mtbf_s)
    parts = restart_parts(base.restart, runs.gpus, wl.iteration_time_s)
    # The restart's parts per failure: a requeue's less re-scheduling for the restarts in place.
    restart_parts_s = np.asarray(parts.total_s) - _class_mean(ck, lambda f: 1.0 - f.requeue_share) * parts.reschedule_s
    restart = _restart_s(ck) + restart_parts_s
    if base.restart.abandoned_share > 0.0:
        # A restart is checked once per interruption, not per failure: a failure during the recovery
        # (probability 1 - e^{-recovery/M}, Takacs) hands its restart on to the next incident.
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            reached = np.where(np.isfinite(ck.mtbf_s), np.exp(-restart / ck.mtbf_s), 1.0)
        restart = restart + reached * abandoned_restarts_s(base, restart_parts_s + ck.load_s)
    cycle_stall, rollback = write_window(ck.every, mean_iteration_s, ck.stall_s, ck.background_s)
    rollback = rollback + _instability_rollback_s(base, runs, ck, mean_iteration_s, wl.iterations)
    lost = restart + rollback
    live = (wl.code == FEASIBLE) & fits
    with np.errstate(over="ignore", invalid="ignore"):  # failures so frequent that no run ends: wall = inf,
        floor, job_spread = _job_factor_floor(base, wl, mean_iteration_s, ck.every, cycle_stall)
        planned = any(f.kind == "planned" for f in base.failures)
        stretch = _planned_stretch(base, parts, ck.storage_load_s) if planned else None
        present, run_mtbf = _present_wall_s(
            base,
            ck,
            lambda m: np.asarray(expected_run_wall_s(wl.iterations, ck.every, mean_iteration_s, cycle_stall, lost, m)),
        )
        # The wall time's quantile (docs/model.md §9): its floor plus a gamma-distributed excess of Daly's mean
        # and the failures' renewal variance plus the job factor's, drawn again after every restart.
        failures_var = run_wall_variance_s2(wl.iterations, ck.every, mean_iteration_s, cycle_stall, lost, run_mtbf)
        pieces = 1.0 + np.where(
            np.isfinite(run_mtbf) & (run_mtbf > 0), present / np.where(run_mtbf > 0, run_mtbf, 1.0), 0.0
        )
        quantile = np.full(live.shape, np.nan)  # NaN where the candidate cannot run (no check reads it there)
        low, mean, variance = (
            np.broadcast_to(x, live.shape)[live] for x in (floor, present, failures_var + job_spread / pieces)
        )
        quantile[live] = wall_quantile_s(low, mean, variance, deadline_probability)
        running = present  # the planned stops' windows are idle time on top, as the spare waits
        if base.staffing.team != "none":  # ... and the waits for a person
            failure_free = np.asarray(
                summed_over_intervals(
                    lambda segment, *_: segment, wl.iterations, ck.every, mean_iteration_s, cycle_stall, lost, run_mtbf
                )
            )
            waits = _staff_waits_s(base, ck, (present, failure_free), run_mtbf, restart)
            present, quantile = present + waits, quantile + waits
        if base.scheduler.time_limit_hours > 0 or base.scheduler.queue != "none" or base.scheduler.release_share > 0:
            # ... and the batch system's (the job parts' clock runs through the in-place waits for a person)
            waits = _batch_waits_s(base, ck, parts, present, restart, run_mtbf, mean_iteration_s)
            present, quantile = present + waits, quantile + waits
        if stretch is not None:
            present, quantile = present * stretch, quantile * stretch
        wall, quantile = wall_with_spares_by_size_s(
            (present, quantile), runs.gpus, ck.repairs, base.hardware.spare_nodes
        )
        energy, power_mw = expected_run_energy_j(
            base, runs.gpus, wl, running, mean_iteration_s, ck.every, cycle_stall, restart,
            _with_abandoned(base, ck.load_s + restart_parts_s), run_mtbf, power, wall - running,
        )  # fmt: skip
    # (beyond run.max_wall_days the screen rules a candidate out; its energy and cost are then NaN or inf)
    cost, co2 = expected_run_cost_co2(base, runs.gpus, runs.gpu_hour_usd[runs.gpu_type], wall, energy)
    return ExpectedRuns(
        wl.code, fits, wl.iteration_time_s, wl.memory_per_gpu_gb, ck.stall_s, ck.every, ck.mtbf_s, power_mw, wall,
        quantile, energy, cost, co2,
    )  # fmt: skip


def layout_workload(base: Config, runs: CandidateRuns) -> WorkloadArrays:
    """:func:`~mcsim.model.workload.workload_arrays` of every candidate, computed once per layout
    (``runs.same_layout``).

    Identical, element by element, to evaluating every candidate; the strategies and
    intervals of a plan multiply its candidates but not this work (docs/planning.md).
    """
    rep, lay = runs.same_layout, runs.layouts
    unique = np.flatnonzero(rep == np.arange(len(runs)))
    subset = type(lay)(*(getattr(lay, f.name)[unique] for f in dataclasses.fields(lay)))
    once = workload_arrays(base, subset)
    position = np.searchsorted(unique, rep)
    taken: dict[str, Any] = {}
    for f in dataclasses.fields(once):
        value = getattr(once, f.name)
        taken[f.name] = None if value is None else value[position]
    return type(once)(**taken)


def configuration_fits(base: Config, runs: CandidateRuns) -> np.ndarray:
    """Per candidate, whether its checkpoint strategy and failure domains fit its size
    (:func:`mcsim.model.feasibility.configuration_problem`), checked once per (strategy, size)."""
    fits = np.ones(len(runs), dtype=bool)
    key = runs.strategy.astype(np.int64) * (1 << 40) + runs.gpus
    for value, idx in by_group(key):
        strategy, gpus = divmod(int(value), 1 << 40)
        cfg = dataclasses.replace(
            base,
            parallelism=dataclasses.replace(base.parallelism, gpus=gpus),
            checkpoint=dataclasses.replace(base.checkpoint, strategy=runs.strategies[strategy]),
        )
        if configuration_problem(cfg):
            fits[idx] = False
    return fits


def _checkpoints(base: Config, runs: CandidateRuns, wl: WorkloadArrays) -> _Checkpoints:
    """Every candidate's checkpoint stall, background write, load and interval (per strategy and per
    interval rule), and its job's MTBF."""
    strategies, intervals = list(by_group(runs.strategy)), list(by_group(runs.interval))
    d2h_gbps = runs.d2h_gbps[runs.gpu_type]
    iteration_s = wl.iteration_time_s
    n = len(runs)
    stall, load, every, background = np.zeros(n), np.zeros(n), np.ones(n, dtype=np.int64), np.zeros(n)
    mtbf = system_mtbf_s(base.failures, runs.gpus, base.hardware.gpus_per_node, wl.iterations * iteration_s)
    mtbf = np.broadcast_to(np.asarray(mtbf, dtype=np.float64), (n,)).copy()
    _, read_gbps, transfers = checkpoint_transfers(base, runs.gpus, d2h_gbps)
    read_gbps = cast(np.ndarray, read_gbps)  # runs.gpus is an array
    size = base.model.params * base.checkpoint.bytes_per_param
    for s_index, idx in strategies:
        strategy = STRATEGIES[runs.strategies[int(s_index)]]
        timing = strategy.timings(base, iteration_s[idx], type(transfers)(*(np.asarray(x)[idx] for x in transfers)))
        stall[idx] = timing.stall_s
        background[idx] = {"sync": 0.0, "async": timing.write_s, "in_memory": timing.replicate_s}[strategy.kernel_hook]
        load[idx] = np.where(np.asarray(timing.load_memory_s) > 0, timing.load_memory_s, size / (read_gbps[idx] * 1e9))
    for i_index, idx in intervals:
        every[idx] = checkpoint_every(
            runs.intervals[int(i_index)], stall[idx], mtbf[idx], iteration_s[idx], wl.iterations[idx]
        )
    # The failure classes' units per candidate, once per kind of unit (a class's scope and domain: the
    # classes of one kind share the array), and a unit's MTBF (the spare pool's only with a pool).
    kinds = {(f.scope, f.domain_nodes): f for f in base.failures}
    units = {
        kind: cast(np.ndarray, class_units(f, runs.gpus, base.hardware.gpus_per_node)) for kind, f in kinds.items()
    }
    pooled = base.failures if base.hardware.spare_nodes is not None else ()
    losing = tuple(
        (f, units[f.scope, f.domain_nodes], float(class_mtbf_hours(f)) * 3600.0) for f in losing_classes(base.failures)
    )
    repairs = tuple(
        (
            units[f.scope, f.domain_nodes],
            float(class_mtbf_hours(f)) * 3600.0,
            nodes_taken(f),
            f.repair_hours * 3600.0,
            f.repair_sigma,
        )
        for f in pooled
    )
    return _Checkpoints(mtbf, stall, background, load, every, size / (read_gbps * 1e9), losing, repairs)


def _iteration_power(
    base: Config, runs: CandidateRuns, wl: WorkloadArrays, mtbf: np.ndarray
) -> tuple[np.ndarray, SimpleNamespace]:
    """Mean executed iteration time (stragglers' expected factors, slow-node episodes, the throughput
    degradation's mean, :func:`mcsim.model.stragglers.degradation_added_share`) and mean per-GPU
    power over it.

    During an episode the slowest rank's factor is ``max(M, slowdown)``; episodes are active a share
    ``a`` of the running time (:func:`mcsim.model.stragglers.episode_active_share`), so the mean
    iteration time is the time-weighted ``1 / ((1 − a) / t + a / t_episode)`` (fewer iterations run
    in an episode). The power stays that of the iteration outside episodes (first order).
    """
    st = base.stragglers
    law_mean, episode_mean, rank_mean = np.ones(len(runs)), np.ones(len(runs)), np.ones(len(runs))
    ep = np.asarray(runs.layouts.ep, dtype=np.int64)  # a mixture of experts' sigma depends on ep
    span = int(ep.max(initial=1)) + 1
    for key, idx in by_group(np.asarray(runs.gpus, dtype=np.int64) * span + ep):
        gpus, sigma = key // span, straggler_sigma(base, int(key % span))  # one quadrature per size and ep
        law_mean[idx], rank_mean[idx] = factor_law(float(gpus), sigma).mean, rank_factor_mean(sigma)
        if st.episode_rate_per_node_day > 0:
            episode_mean[idx] = factor_law(float(gpus), sigma, floor=st.episode_slowdown).mean
    with np.errstate(invalid="ignore", divide="ignore"):
        degraded = 1.0 + degradation_over_run(
            st.degradation_per_day / 86400.0, st.degradation_max, mtbf, wl.iterations * wl.iteration_time_s
        )
    if st.episode_rate_per_node_day > 0:
        rate = st.episode_rate_per_node_day * (runs.gpus // base.hardware.gpus_per_node) / 86400.0
        active = episode_active_share(rate, st.episode_hours * 3600.0, mtbf)
    lay, idle_w = runs.layouts, runs.idle_w[runs.gpu_type]
    busy, wait, checkpoint = phase_powers_w(
        runs.tdp_w[runs.gpu_type], idle_w, lay.freq_mhz, lay.freq_max_mhz, base.energy
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        busy_share = wl.t_comp_s / wl.compute_time_s * np.minimum(1.0, rank_mean / law_mean)
        phase = wl.compute_time_s * job_factor_mean(st.job_sigma) * degraded * law_mean
        power = iteration_power_w(busy, wait, busy_share, phase, wl.comm_time_s)
    iteration_s = phase + wl.comm_time_s
    if st.episode_rate_per_node_day > 0:
        in_episode = wl.compute_time_s * job_factor_mean(st.job_sigma) * degraded * episode_mean + wl.comm_time_s
        with np.errstate(invalid="ignore", divide="ignore"):
            iteration_s = 1.0 / ((1.0 - active) / iteration_s + active / in_episode)
    return iteration_s, SimpleNamespace(busy=busy, wait=wait, iteration=power, idle=idle_w, checkpoint=checkpoint)


def _class_mean(ck: _Checkpoints, per_event, scale: float = 1.0) -> np.ndarray:
    """Rate-weighted mean over the failure classes that roll work back (planned stops apart:
    :func:`_planned_stretch`) of ``per_event(failure_class) * scale`` (scalar or array)."""
    classes = [f for f, _, _ in ck.losing]
    rates = [units / unit_mtbf_s for _, units, unit_mtbf_s in ck.losing]
    if not rates:
        return np.zeros(ck.mtbf_s.size)
    total = sum(rates)
    weighted = sum(r * per_event(f) * scale for r, f in zip(rates, classes, strict=False))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), 0.0)


def _staff_waits_s(
    base: Config, ck: _Checkpoints, spans: tuple[np.ndarray, np.ndarray], run_mtbf: np.ndarray, restart
) -> np.ndarray:
    """The expected waits for a person over a run, s (docs/model.md §3 "Staffing", §9), on top of Daly's wall
    time (``spans``: Daly's ``present`` and the run's time without failures ``T0``; the restart ``restart``
    per failure, failures every ``run_mtbf``).

    The recoveries opened by failures while training are Daly's failed attempts, ``present / (M e^{R/M})``
    (each segment's ``e^{S/M} - 1``); a rate-weighted ``manual_share`` of them needs a person
    (:func:`mcsim.model.staffing.expected_staff_waits_s`: the responses, and the first request of each
    stretch with nobody at work waiting for its end, the run's end moved on by the waits before and by the
    failures that ask for a person, each ``c = M (1 - T0 / present)`` of span). A wait is added
    outside Daly's exponential: a failure during the wait for a person does not lengthen it."""
    present, failure_free = spans
    share = _class_mean(ck, lambda f: f.manual_share)
    finite = np.isfinite(run_mtbf) & (run_mtbf > 0)
    safe = np.where(finite, run_mtbf, 1.0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        requests = np.where(finite, present / (safe * np.exp(restart / safe)), 0.0) * share
        cost = np.where(finite & (present > 0), safe * (1.0 - failure_free / present), 0.0)
    rate = np.where(finite, share / safe, 0.0)
    span = np.where(np.isfinite(present), np.minimum(present, base.run.max_wall_days * 86400.0), 0.0)
    cost = np.where(np.isfinite(cost) & (cost > 0), cost, 0.0)
    return expected_staff_waits_s(base.staffing, span, requests, rate, cost)


def _restart_s(ck: _Checkpoints) -> np.ndarray:
    """Rate-weighted mean recovery of the failure classes plus the checkpoint load, s: a recovery (its
    law's mean, :func:`recovery_s`) and, for hangs, the detection time."""
    return _class_mean(ck, lambda f: recovery_s(f) / 60.0 + f.detection_minutes, 60.0) + ck.load_s


def abandoned_restarts_s(base: Config, restart_load_s: Any) -> Any:
    """Mean time abandoned restarts add to one restart, s (``restart_load_s``: the restart's parts and the
    load, done again after each): a restart fails again with probability ``q = abandoned_share``, so
    ``q / (1 - q)`` abandoned attempts precede the one that holds (geometric), each losing
    ``abandoned_minutes`` and then the parts and the load again (docs/model.md §3 "Abandoned restarts")."""
    q = base.restart.abandoned_share
    if q == 0.0:
        return 0.0
    return q / (1.0 - q) * (base.restart.abandoned_minutes * 60.0 + restart_load_s)


def _batch_waits_s(
    base: Config,
    ck: _Checkpoints,
    parts: Any,
    present: np.ndarray,
    restart: np.ndarray,
    run_mtbf: np.ndarray,
    iteration_s: np.ndarray,
) -> np.ndarray:
    """Mean time the batch queue and the job parts' time limit add to the wall time ``present``, s
    (docs/model.md §3 "The batch system", §9).

    A failure during a queue wait is the pool's, not the job's (dropped), and one during a crashed job's
    hold leaves it held: the waits are added, not restarted. About ``present e^{-R/M} / M`` recoveries
    (``M`` the run's MTBF, ``R`` a failure's recovery: a failure that falls in a recovery opens none)
    each wait ``rho Q e^{P/M}`` (``rho`` the share of restarts by requeue, ``Q`` the queue's mean; a
    failure during the restart after it, its parts and load ``P``, requeues again) and, opened by a
    fail-stop failure (their rate-weighted share), ``release_share`` times the mean hold. The parts'
    clock runs ``present (1 - rho R / M)`` of the run; their stops at the limit are
    :func:`limit_stops`'s. Each stop waits ``Q`` and is down for a full requeue's parts, a storage load,
    half an iteration and the abandoned restarts after them; a failure during that (probability about
    its length over ``M``) adds a failure's recovery."""
    sch = base.scheduler
    queue_s = sch.queue_law()[0] * 60.0
    rho = _class_mean(ck, lambda f: f.requeue_share)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        finite = np.isfinite(run_mtbf) & (run_mtbf > 0)
        per_failure = np.where(finite, 1.0 / np.where(finite, run_mtbf, 1.0), 0.0)  # failures a second
        held_s = _class_mean(ck, lambda f: float(f.kind == "fail_stop")) * sch.release_share * sch.release_hours
        recoveries = present * per_failure * np.exp(-restart * per_failure)  # those a failure opens
        # A failure during the restart after the queue (its parts and the load) requeues it: e^{P/M} waits.
        again = np.exp((np.asarray(parts.total_s) + ck.load_s) * per_failure)
        waits = recoveries * (rho * queue_s * again + held_s * 3600.0)
        if sch.time_limit_hours <= 0:
            return waits
        limit_s = sch.time_limit_hours * 3600.0
        requeue_load_s = np.asarray(parts.total_s) + ck.storage_load_s
        down_s = requeue_load_s + iteration_s / 2.0 + abandoned_restarts_s(base, requeue_load_s)
        rate = rho * per_failure
        stops = limit_stops(present * (1.0 - rate * restart), limit_s, rate)
    return waits + stops * (queue_s + down_s * (1.0 + per_failure * restart))


def limit_stops(clocked_s: Any, limit_s: float, rate: Any) -> Any:
    """Expected stops at the time limit ``H = limit_s`` in ``T = clocked_s`` seconds of the parts' clock, when
    requeue failures (which begin a new part) come as a Poisson process of ``rate`` a second.

    A part that begins at ``u`` stops at ``u + H`` when no failure comes before (probability
    ``q = e^{-rate H}``); parts begin at 0, at failures (density ``rate``) and at stops, so the stops'
    density is ``s(t) = q (delta(t - H) + rate + s(t - H))`` for ``t >= H``, and their number by ``T`` is
    ``sum_{k=1}^{K} q^k (1 + rate (T - k H))``, ``K = floor(T / H)``: ``floor(T / H)`` without failures.
    In closed form with ``A = sum q^k`` and ``B = sum k q^k`` (geometric sums)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        count = np.floor(np.asarray(clocked_s, dtype=float) / limit_s)
        x = np.asarray(rate, dtype=float) * limit_s
        q = np.exp(-x)
        small = x < 1e-9  # q = 1 to rounding: the sums' limits
        one_q = np.where(small, 1.0, -np.expm1(-x))
        q_k = q**count
        a = np.where(small, count, q * (1.0 - q_k) / one_q)
        b = np.where(small, count * (count + 1.0) / 2.0, q * (1.0 - (count + 1.0) * q_k + count * q_k * q) / one_q**2)
        return np.where(count >= 1, a * (1.0 + rate * clocked_s) - rate * limit_s * b, 0.0)


def _with_abandoned(base: Config, restart_load_s: np.ndarray) -> np.ndarray:
    """The restart's parts and the load per restart with those of its abandoned attempts, s."""
    q = base.restart.abandoned_share
    return restart_load_s if q == 0.0 else restart_load_s * (1.0 + q / (1.0 - q))


def _planned_stretch(base: Config, parts: Any, storage_load_s: np.ndarray) -> np.ndarray:
    """Factor on the wall time for planned stops (cluster scope), ``1 / (1 - down share)``.

    A class's stops renew in wall time (mean gap ``M``); a stop is down ``D`` (its window, the
    restart's parts of its path, a storage load and the abandoned restarts' time: ``parts``, the
    :class:`~mcsim.model.restart.RestartParts`, and ``storage_load_s``), and one whose gap from the previous
    stop is shorter than ``D`` falls in that window and is dropped, so about ``(1 - F(D)) / M``
    stops a second are taken, each down ``D`` (``F`` the Weibull law of a gap): ``1 + D / M`` to
    first order for the exponential law, exactly ``M / (M - D)`` for a periodic one. docs/model.md §9.
    """
    down = np.zeros_like(storage_load_s)
    for f in base.failures:
        if f.kind == "planned":
            mtbf_s = f.mtbf_hours * 3600.0
            restart_load_s = np.asarray(parts.total_s) - (1.0 - f.requeue_share) * parts.reschedule_s + storage_load_s
            stop_s = mean_recovery_s(f) + restart_load_s + abandoned_restarts_s(base, restart_load_s)
            scale_s = mtbf_s / math.gamma(1.0 + 1.0 / f.shape)
            down = down + stop_s * np.exp(-((stop_s / scale_s) ** f.shape)) / mtbf_s
    with np.errstate(divide="ignore"):
        return np.where(down < 1.0, 1.0 / (1.0 - np.minimum(down, 1.0)), np.inf)


def _instability_rollback_s(
    base: Config, runs: CandidateRuns, ck: _Checkpoints, iteration_s: np.ndarray, iterations: np.ndarray
) -> np.ndarray:
    """Rate-weighted mean time an event rolls back beyond the last checkpoint, s: an instability's
    ``rollback_checkpoints`` storage checkpoints of ``every`` iterations (``every x persist_every`` for
    in_memory), done again at the mean iteration time; at most half the run's iterations (first order:
    the progress at an event is about uniform over the run, and the start bounds every rollback)."""
    in_memory = np.array([STRATEGIES[name].kernel_hook == "in_memory" for name in runs.strategies])
    step = ck.every * np.where(in_memory[runs.strategy], base.checkpoint.in_memory_persist_every, 1)
    return _class_mean(
        ck,
        lambda f: (
            np.minimum(f.rollback_checkpoints * step, iterations / 2.0) * iteration_s
            if f.kind == "instability"
            else 0.0
        ),
    )


def _job_factor_floor(base: Config, wl: WorkloadArrays, iteration_s, every, stall) -> tuple[np.ndarray, np.ndarray]:
    """The wall time's floor, s (every iteration at the job factor's least, 1, no failure), and the job
    factor's variance of the whole run's compute, s² (per piece of the run the factor is drawn for).

    The ``deadline_probability``-quantile of the wall time (docs/model.md §9) is the floor plus a
    gamma-distributed excess whose mean is Daly's expected wall time less the floor and whose variance
    is the failures' renewal variance (:func:`mcsim.model.reliability.run_wall_variance_s2`) plus the job
    factor's, drawn at the start and after every restart (so over ``1 + failures`` pieces of the run).
    """
    st = base.stragglers
    job_mean = job_factor_mean(st.job_sigma)
    job_square = 0.5 + math.exp(2.0 * st.job_sigma**2) * float(special.ndtr(2.0 * st.job_sigma))
    phase_s = (iteration_s - wl.comm_time_s) / job_mean  # the compute phase at job factor 1
    spread = (wl.iterations * phase_s) ** 2 * max(job_square - job_mean**2, 0.0)
    checkpoints = np.maximum(-(-wl.iterations // every) - 1, 0)
    return wl.iterations * (phase_s + wl.comm_time_s) + checkpoints * stall, spread


def ages_matter(base: Config) -> bool:
    """Whether a failure class's rate changes over the run (Weibull, not stationary at the start)."""
    return any(f.shape != 1.0 and f.initial_age != "stationary" for f in base.failures)


def _present_wall_s(
    base: Config, ck: _Checkpoints, daly: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The expected wall time with every node present, s (``daly(mtbf)``: Daly's at a job MTBF), and the
    job's MTBF over the run, s: the stationary one, or on a young or aged cluster the mean over the run
    (:func:`mcsim.model.reliability.young_cluster_wall_s`; its first ``2 run.max_wall_days``)."""
    if not ages_matter(base):
        return daly(ck.mtbf_s), ck.mtbf_s
    classes = [(units, f.shape, unit_mtbf_s, f.initial_age) for f, units, unit_mtbf_s in ck.losing]
    return young_cluster_wall_s(daly, classes, ck.mtbf_s, 2.0 * base.run.max_wall_days * 86400.0)


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
