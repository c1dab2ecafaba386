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
from dataclasses import dataclass

import numpy as np

from .kernels.montecarlo import FailureClasses
from .kernels.renewal import START_AGED, START_NEW, START_STATIONARY
from .schema import FailureClass
from .scenario import Config
from .strategies import STRATEGIES, Transfers
from .workload import Workload


@dataclass(frozen=True)
class CheckpointPlan:
    """Checkpoint timings and failure-process parameters of one configuration."""

    size_bytes: float            # S = N * bytes_per_param
    write_gbps: float            # W = min(nodes * write_gbps_per_node, storage_gbps)
    read_gbps: float
    stall_s: float               # training stands still per checkpoint (or snapshot)
    write_s: float               # storage durability after the stall (0 for sync)
    replicate_s: float           # in_memory: snapshot restorable after the stall (0 otherwise)
    load_s: float                # checkpoint load from storage on recovery
    load_memory_s: float         # in_memory: snapshot load from the peer's memory
    every_iterations: int        # checkpoint after this many iterations
    system_mtbf_s: float         # 1 / sum(units / MTBF) over all classes (inf without classes)
    classes: FailureClasses      # per-class arrays for the kernel


def daly_interval_s(stall_s: float, mtbf_s: float) -> float:
    """Daly's (2006, eq. 37) optimum compute time between checkpoints.

    ``tau = sqrt(2CM) [1 + (1/3) sqrt(C/2M) + (1/9) (C/2M)] - C`` for ``C < 2M``,
    else ``M``; Young's (1974) ``sqrt(2CM)`` is its first-order term.
    """
    if not math.isfinite(mtbf_s):
        return math.inf
    c, m = stall_s, mtbf_s
    if c >= 2.0 * m:
        return m
    ratio = c / (2.0 * m)
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - c


def failure_units(cfg: Config, fclass: FailureClass) -> int:
    """Units of a failure class: G GPUs, nodes / domain_nodes domains, or 1 cluster."""
    if fclass.scope == "gpu":
        return cfg.parallelism.gpus
    if fclass.scope == "node":
        return cfg.nodes // fclass.domain_nodes
    return 1


def failure_classes(cfg: Config) -> FailureClasses:
    """Kernel arrays of the failure classes of one configuration.

    A GPU failure takes out its node (one spare needed) and leaves the CPU
    memory of every node intact; a node or domain event takes out
    ``domain_nodes`` nodes, and an in-memory snapshot survives it only when one
    node is lost (its replica lives on the peer node, docs/model.md §3); a
    cluster-scope event (software, fabric) takes out no node. Each class's
    units start as its ``initial_age`` says (docs/model.md §4 "Failure processes").
    """
    failures = cfg.failures
    shape = np.array([f.shape for f in failures], dtype=np.float64)
    mtbf_s = np.array([f.mtbf_hours * 3600.0 for f in failures], dtype=np.float64)
    nodes_taken = {"gpu": lambda f: 1, "node": lambda f: f.domain_nodes, "cluster": lambda f: 0}
    return FailureClasses(
        units=np.array([failure_units(cfg, f) for f in failures], dtype=np.int64),
        shape=shape,
        scale_s=mtbf_s / np.array([math.gamma(1.0 + 1.0 / k) for k in shape], dtype=np.float64),
        recovery_s=np.array([f.recovery_minutes * 60.0 for f in failures], dtype=np.float64),
        nodes_taken=np.array([nodes_taken[f.scope](f) for f in failures], dtype=np.int64),
        memory_ok=np.array([0 if f.scope == "node" and f.domain_nodes > 1 else 1 for f in failures],
                           dtype=np.int64),
        repair_s=np.array([f.repair_hours * 3600.0 for f in failures], dtype=np.float64),
        start=np.array([start_state(f.initial_age) for f in failures], dtype=np.int64),
        age_s=np.array([0.0 if isinstance(f.initial_age, str) else f.initial_age * 3600.0 for f in failures],
                       dtype=np.float64),
    )


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
    write_gbps = min(cfg.nodes * ck.write_gbps_per_node, ck.storage_gbps)
    read_gbps = min(cfg.nodes * ck.read_gbps_per_node, ck.storage_gbps)
    storage_write_s = size / (write_gbps * 1e9)
    copy_s = size / cfg.parallelism.gpus / (cfg.gpu.d2h_gbps * 1e9)  # each GPU's shard to host memory
    # One node's shard to its peer over the node's inter-node links.
    peer_s = size / cfg.nodes / (cfg.hardware.gpus_per_node * cfg.network.inter_gbps * 1e9)
    stall, background, replicate, load_memory = STRATEGIES[ck.strategy].timings(
        cfg, wl, Transfers(storage_write_s, copy_s, peer_s))
    load = size / (read_gbps * 1e9)

    classes = failure_classes(cfg)
    rate = sum(units / (f.mtbf_hours * 3600.0) for units, f in zip(classes.units, cfg.failures))
    system_mtbf = 1.0 / rate if rate > 0 else math.inf

    iteration_s = wl.iteration_time_s
    interval = ck.interval
    if interval.kind == "iterations":
        every = int(interval.value)
    else:
        # "optimize" is resolved by simulation before the runs (mcsim.optimize); Daly's
        # estimate stands in wherever a plan is needed without it.
        seconds = interval.value * 60.0 if interval.kind == "minutes" else daly_interval_s(stall, system_mtbf)
        every = wl.iterations if not math.isfinite(seconds) else int(round(seconds / iteration_s))
    every = max(1, min(every, wl.iterations))
    return CheckpointPlan(size, write_gbps, read_gbps, stall, background, replicate, load, load_memory,
                          every, system_mtbf, classes)
