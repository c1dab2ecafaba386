"""Checkpoint and failure plan of one configuration (docs/model.md §3).

Turns the scenario's checkpoint and failure tables into the numbers the
kernel needs: checkpoint size and bandwidths, the training stall and the
background write per checkpoint, the load time on recovery, the Weibull
scale of every failure class and the checkpoint interval in iterations
(fixed, or Daly's 2006 higher-order optimum). Everything in seconds unless
the name says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from mcsim.kernels.interface import (
    KIND_FAIL_STOP,
    KIND_HANG,
    KIND_INSTABILITY,
    KIND_PLANNED,
    START_AGED,
    START_NEW,
    START_STATIONARY,
    FailureClasses,
)
from mcsim.model.staffing import staff_columns
from mcsim.model.strategies import STRATEGIES, FloatOrArray, Transfers
from mcsim.model.workload import Workload, workload
from mcsim.scenario.config import Config, cached_per_configuration
from mcsim.scenario.interruptions import FAILURE_KINDS, FailureClass, StaffingSection
from mcsim.scenario.schema import Interval


@dataclass(frozen=True)
class CheckpointPlan:
    """Checkpoint timings and failure-process parameters of one configuration."""

    size_bytes: float  # S = N * bytes_per_param
    write_gbps: float  # W = min(nodes * write_gbps_per_node, storage_gbps)
    read_gbps: float
    stall_s: float  # training stands still per checkpoint (or snapshot)
    write_s: float  # storage durability after the stall (0 for sync)
    replicate_s: float  # in_memory: snapshot restorable after the stall (0 otherwise)
    load_s: float  # checkpoint load from storage on recovery
    load_memory_s: float  # in_memory: snapshot load from the peer's memory
    every_iterations: int  # checkpoint after this many iterations
    system_mtbf_s: float  # 1 / sum(units / MTBF) over all classes (inf without classes)
    classes: FailureClasses  # per-class arrays for the kernel


def daly_interval_s(stall_s: FloatOrArray, mtbf_s: FloatOrArray) -> float | np.ndarray:
    """Daly's (2006, eq. 37) optimum compute time between checkpoints (scalars or arrays).

    ``tau = sqrt(2CM) [1 + (1/3) sqrt(C/2M) + (1/9) (C/2M)] - C`` for ``C < 2M``,
    else ``M``; Young's (1974) ``sqrt(2CM)`` is its first-order term; inf without failures.
    """
    c, m = np.asarray(stall_s, dtype=np.float64), np.asarray(mtbf_s, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ratio = c / (2.0 * m)
        tau = np.sqrt(2.0 * c * m) * (1.0 + np.sqrt(ratio) / 3.0 + ratio / 9.0) - c
    out = np.where(~np.isfinite(m), np.inf, np.where(c >= 2.0 * m, m, tau))
    return float(out) if out.ndim == 0 else out


def checkpoint_every(
    interval: Interval, stall_s: FloatOrArray, mtbf_s: FloatOrArray, iteration_s: FloatOrArray, iterations: FloatOrArray
) -> int | np.ndarray:
    """Checkpoint interval in iterations (scalars or arrays), between 1 and ``iterations``.

    Fixed iterations as given; fixed minutes, or Daly's optimum (``young_daly``, and
    ``optimize`` wherever a plan is needed before the simulation resolves it,
    :mod:`mcsim.engine.optimize`), rounded to whole iterations; every iteration's worth
    (no checkpoint) without failures.
    """
    iterations = np.asarray(iterations)
    if interval.kind == "iterations":
        every = np.full(np.shape(iteration_s), float(int(interval.value)))
    else:
        seconds = (
            np.broadcast_to(interval.value * 60.0, np.shape(iteration_s))
            if interval.kind == "minutes"
            else daly_interval_s(stall_s, mtbf_s)
        )
        with np.errstate(invalid="ignore", over="ignore"):
            steps = np.rint(np.minimum(seconds / np.asarray(iteration_s), 2.0**62))
            every = np.where(np.isfinite(seconds), steps, iterations)
    every = np.maximum(1, np.minimum(every, iterations)).astype(np.int64)
    return int(every) if every.ndim == 0 else every


def losing_classes(failures: tuple[FailureClass, ...]) -> tuple[FailureClass, ...]:
    """The failure classes whose events roll work back: all but planned stops (docs/model.md §3)."""
    return tuple(f for f in failures if f.kind != "planned")


def mean_life_with_bad(mean_life: Any, bad_share: Any, bad_mean_life: Any) -> Any:
    """Mean life of a unit that is a bad replacement (mean ``bad_mean_life``) with probability ``bad_share``,
    else a new one (mean ``mean_life``): ``(1 - bad_share) mean_life + bad_share bad_mean_life``, in the
    units given (scalars or arrays; docs/model.md §3 "Bad replacements")."""
    return (1.0 - bad_share) * mean_life + bad_share * bad_mean_life


def class_mtbf_hours(fclass: FailureClass, horizon_s: Any = None) -> Any:
    """A unit's mean time between failures with its bad replacements counted, h (scalar or array).

    A failure brings a bad replacement with probability ``q = bad_replacement_share``, which fails
    after an exponential life of mean ``m_b``; over a job of ``T`` seconds (``horizon_s``) a
    failure at a uniform time finds the job still running when its bad replacement fails with
    probability ``h = 1 - (m_b / T)(1 - e^{-T / m_b})``, so the mean life is ``(1 - q h) M + q h
    m_b`` (``M = mtbf_hours``): ``(1 - q) M + q m_b`` when the job is much longer than a bad
    life (the stationary renewal process; ``horizon_s`` None), about ``M`` when much shorter.
    Exactly ``M`` without bad replacements. The kernel draws the lives themselves; this is for
    the first-order estimates (Daly's M, the planner's screen; docs/model.md §3 "Bad
    replacements")."""
    q = fclass.bad_replacement_share
    if q == 0.0:
        return fclass.mtbf_hours
    bad_h = fclass.bad_replacement_hours
    fails: Any = 1.0
    if horizon_s is not None:
        ratio = np.asarray(horizon_s, dtype=np.float64) / 3600.0 / bad_h
        with np.errstate(divide="ignore", invalid="ignore"):
            fails = np.where(ratio > 0, 1.0 + np.expm1(-ratio) / np.where(ratio > 0, ratio, 1.0), 0.0)
    return mean_life_with_bad(fclass.mtbf_hours, q * fails, bad_h)


def system_mtbf_s(
    failures: tuple[FailureClass, ...], gpus: FloatOrArray, gpus_per_node: int, horizon_s: Any = None
) -> float | np.ndarray:
    """Mean time between the events that roll work back (planned stops left out), ``1 / sum(units / MTBF)``,
    s (scalars or arrays; inf without such classes): Daly's M. ``horizon_s``: the job's length, for the
    bad replacements' first-order rate (:func:`class_mtbf_hours`; None: the stationary one)."""
    rate: Any = 0.0
    for fclass in losing_classes(failures):
        rate = rate + class_units(fclass, gpus, gpus_per_node) / (class_mtbf_hours(fclass, horizon_s) * 3600.0)
    rate = np.asarray(rate, dtype=np.float64)
    with np.errstate(divide="ignore"):
        mtbf = np.where(rate > 0, 1.0 / rate, np.inf)
    return float(mtbf) if mtbf.ndim == 0 else mtbf


def class_units(fclass: FailureClass, gpus: FloatOrArray, gpus_per_node: int) -> FloatOrArray:
    """Units of a failure class (scalars or arrays): G GPUs, nodes / domain_nodes domains, or 1 cluster."""
    if fclass.scope == "gpu":
        return gpus
    if fclass.scope == "node":
        return (gpus // gpus_per_node) // fclass.domain_nodes
    return 1 + 0 * gpus


def checkpoint_transfers(
    cfg: Config, gpus: FloatOrArray, d2h_gbps: FloatOrArray | None = None
) -> tuple[FloatOrArray, FloatOrArray, Transfers]:
    """Write and read bandwidths (GB/s) and the :class:`Transfers` of one checkpoint (scalars or arrays).

    ``gpus`` (and the GPU's ``d2h_gbps``, default ``cfg``'s) may be candidate arrays; the rest
    comes from ``cfg``.
    """
    ck = cfg.checkpoint
    size = cfg.model.params * ck.bytes_per_param
    d2h = cfg.gpu.d2h_gbps if d2h_gbps is None else d2h_gbps
    nodes = gpus // cfg.hardware.gpus_per_node
    write_gbps = np.minimum(nodes * ck.write_gbps_per_node, ck.storage_gbps)
    read_gbps = np.minimum(nodes * ck.read_gbps_per_node, ck.storage_gbps)
    storage_write_s = size / (write_gbps * 1e9)
    copy_s = size / gpus / (d2h * 1e9)  # each GPU's shard to host memory
    # One node's shard to its peer over the node's inter-node links.
    peer_s = size / nodes / (cfg.hardware.gpus_per_node * cfg.network.inter_gbps * 1e9)
    return write_gbps, read_gbps, Transfers(storage_write_s, copy_s, peer_s)


# The kernel's code of each kind of failure class (``failures.*.kind``, docs/model.md §3).
KIND_CODES = {
    "fail_stop": KIND_FAIL_STOP,
    "hang": KIND_HANG,
    "instability": KIND_INSTABILITY,
    "planned": KIND_PLANNED,
}
if tuple(KIND_CODES) != FAILURE_KINDS:
    raise ImportError(
        f"mcsim.model.checkpointing: kernel kinds {tuple(KIND_CODES)} against the schema's {FAILURE_KINDS}"
    )


def nodes_taken(fclass: FailureClass) -> int:
    """Nodes one failure of the class takes out (to repair, when a spare pool is modelled): a GPU failure
    its node, a node or domain event its ``domain_nodes`` nodes, a cluster event none."""
    return {"gpu": 1, "node": fclass.domain_nodes, "cluster": 0}[fclass.scope]


def failure_classes(cfg: Config) -> FailureClasses:
    """Kernel arrays of the failure classes of one configuration.

    A GPU failure takes out its node (one spare needed) and leaves the CPU
    memory of every node intact; a node or domain event takes out
    ``domain_nodes`` nodes, and an in-memory snapshot survives it only when one
    node is lost (its replica lives on the peer node, docs/model.md §3); a
    cluster-scope event (software, fabric) takes out no node. Each class's
    units start as its ``initial_age`` says (docs/model.md §4 "Failure processes").

    Computed once for each distinct classes and cluster shape (the configurations of a sweep over
    anything else have the same), and copied for each call: every caller gets arrays of its own, as
    before the cache (writing into one configuration's must not change another's; read-only arrays
    would give the kernels a second compiled type).
    """
    shared = _failure_classes(cfg.failures, cfg.parallelism.gpus, cfg.hardware.gpus_per_node, cfg.staffing)
    return FailureClasses(*(np.array(values, copy=True) for values in shared))


@cached_per_configuration
def _failure_classes(
    failures: tuple[FailureClass, ...], gpus: int, gpus_per_node: int, staffing: StaffingSection
) -> FailureClasses:
    """:func:`failure_classes` of the classes ``failures`` on ``gpus`` GPUs, ``gpus_per_node`` a node, their
    recoveries that need a person waiting as ``staffing`` says."""

    def column(value: Callable[[FailureClass], float], dtype: type = np.float64) -> np.ndarray:
        return np.array([value(f) for f in failures], dtype=dtype)

    shape = column(lambda f: f.shape)
    mtbf_s = column(lambda f: f.mtbf_hours * 3600.0)
    return FailureClasses(
        units=column(lambda f: int(class_units(f, gpus, gpus_per_node)), np.int64),
        shape=shape,
        scale_s=mtbf_s / np.array([math.gamma(1.0 + 1.0 / k) for k in shape], dtype=np.float64),
        recovery_s=column(lambda f: f.recovery_minutes * 60.0),
        nodes_taken=column(nodes_taken, np.int64),
        # An in-memory snapshot survives a node or domain event only when it takes one node.
        memory_ok=column(lambda f: 0 if f.scope == "node" and f.domain_nodes > 1 else 1, np.int64),
        repair_s=column(lambda f: f.repair_hours * 3600.0),
        start=column(lambda f: start_state(f.initial_age), np.int64),
        age_s=column(lambda f: 0.0 if isinstance(f.initial_age, str) else f.initial_age * 3600.0),
        kind=column(lambda f: KIND_CODES[f.kind], np.int64),
        detect_s=column(lambda f: f.detection_minutes * 60.0),
        rollback_checkpoints=column(lambda f: f.rollback_checkpoints, np.int64),
        recovery_sigma=column(lambda f: f.recovery_sigma),
        manual_share=column(lambda f: f.manual_share),
        manual_s=column(lambda f: f.manual_hours * 3600.0),
        bad_share=column(lambda f: f.bad_replacement_share),
        bad_mean_s=column(lambda f: f.bad_replacement_hours * 3600.0),
        repair_sigma=column(lambda f: f.repair_sigma),
        **_durations(failures),
        requeue_share=column(lambda f: f.requeue_share),
        **staff_columns(staffing, len(failures)),
    )


def _durations(failures: tuple[FailureClass, ...]) -> dict[str, np.ndarray]:
    """The classes' measured recoveries as one padded 2-D array (s) and their counts."""
    width = max([1] + [len(f.recovery_durations_minutes) for f in failures])
    durations = np.zeros((len(failures), width))
    for c, f in enumerate(failures):
        durations[c, : len(f.recovery_durations_minutes)] = np.array(f.recovery_durations_minutes) * 60.0
    counts = np.array([len(f.recovery_durations_minutes) for f in failures], dtype=np.int64)
    return {"durations_s": durations, "durations_count": counts}


def start_state(initial_age: str | float) -> int:
    """Kernel code of a class's ``initial_age``: stationary, new, or a fixed age (hours)."""
    if initial_age == "stationary":
        return START_STATIONARY
    if initial_age == "new":
        return START_NEW
    return START_AGED


def checkpoint_plan(cfg: Config, wl: Workload) -> CheckpointPlan:
    """Evaluate checkpoint costs, failure laws and the interval of one feasible configuration."""
    ck = cfg.checkpoint
    size = cfg.model.params * ck.bytes_per_param
    write_gbps, read_gbps, transfers = checkpoint_transfers(cfg, cfg.parallelism.gpus)
    write_gbps, read_gbps = float(write_gbps), float(read_gbps)
    stall, background, replicate, load_memory = STRATEGIES[ck.strategy].timings(cfg, wl.iteration_time_s, transfers)
    load = size / (read_gbps * 1e9)
    classes = failure_classes(cfg)
    system_mtbf = system_mtbf_s(cfg.failures, cfg.parallelism.gpus, cfg.hardware.gpus_per_node, wl.ideal_time_s)
    every = checkpoint_every(ck.interval, stall, system_mtbf, wl.iteration_time_s, wl.iterations)
    # One configuration's scalars in, scalars out (the equations return arrays only for array inputs).
    return CheckpointPlan(
        size,
        write_gbps,
        read_gbps,
        cast(float, stall),
        cast(float, background),
        cast(float, replicate),
        load,
        cast(float, load_memory),
        cast(int, every),
        cast(float, system_mtbf),
        classes,
    )


@cached_per_configuration
def workload_and_plan(cfg: Config) -> tuple[Workload, CheckpointPlan | None]:
    """The workload of ``cfg`` and its checkpoint plan (None where infeasible), each configuration once per
    process (:func:`mcsim.scenario.config.cached_per_configuration`): a plan's selection prepares its
    growing list of candidates again at every round and asks for their outputs stage after stage,
    which would otherwise evaluate each candidate's workload and plan again every time. Both are
    immutable, so callers share them."""
    wl = workload(cfg)
    return wl, checkpoint_plan(cfg, wl) if wl.feasible else None
