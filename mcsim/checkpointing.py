"""Checkpoint and failure plan of one configuration (SPEC §4.2-4.3).

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

from .scenario import Config
from .workload import Workload


@dataclass(frozen=True)
class CheckpointPlan:
    """Checkpoint timings and failure-process parameters of one configuration."""

    size_bytes: float            # S = N * bytes_per_param
    write_gbps: float            # W = min(nodes * write_gbps_per_node, storage_gbps)
    read_gbps: float
    stall_s: float               # training stands still per checkpoint
    write_s: float               # async: background write after the stall (0 for sync)
    load_s: float                # checkpoint load on every recovery
    every_iterations: int        # checkpoint after this many iterations
    system_mtbf_s: float         # 1 / sum(units / MTBF) over all classes (inf without classes)
    units: np.ndarray            # int64, units per failure class
    shape: np.ndarray            # Weibull shape k per class
    scale_s: np.ndarray          # Weibull scale lambda = MTBF / Gamma(1 + 1/k), s
    recovery_s: np.ndarray       # recovery before the load, per class


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


def failure_units(cfg: Config, scope: str) -> int:
    """Units of a failure scope: G GPUs, G/gpus_per_node nodes, or 1 cluster."""
    return {"gpu": cfg.parallelism.gpus, "node": cfg.nodes, "cluster": 1}[scope]


def checkpoint_plan(cfg: Config, wl: Workload) -> CheckpointPlan:
    """Evaluate checkpoint costs, failure laws and the interval of one feasible configuration."""
    ck = cfg.checkpoint
    size = cfg.model.params * ck.bytes_per_param
    write_gbps = min(cfg.nodes * ck.write_gbps_per_node, ck.storage_gbps)
    read_gbps = min(cfg.nodes * ck.read_gbps_per_node, ck.storage_gbps)
    write_s = size / (write_gbps * 1e9)
    if ck.strategy == "sync":
        stall, background = write_s, 0.0
    else:  # async: each GPU copies its shard to host memory, then storage is written behind
        stall = size / cfg.parallelism.gpus / (cfg.gpu.d2h_gbps * 1e9) + ck.async_overhead_s
        background = write_s
    load = size / (read_gbps * 1e9)

    units = np.array([failure_units(cfg, f.scope) for f in cfg.failures], dtype=np.int64)
    shape = np.array([f.shape for f in cfg.failures], dtype=np.float64)
    mtbf_s = np.array([f.mtbf_hours * 3600.0 for f in cfg.failures], dtype=np.float64)
    scale = mtbf_s / np.array([math.gamma(1.0 + 1.0 / k) for k in shape], dtype=np.float64)
    recovery = np.array([f.recovery_minutes * 60.0 for f in cfg.failures], dtype=np.float64)
    rate = float(np.sum(units / mtbf_s)) if len(units) else 0.0
    system_mtbf = 1.0 / rate if rate > 0 else math.inf

    iteration_s = wl.iteration_time_s
    interval = ck.interval
    if interval.kind == "iterations":
        every = int(interval.value)
    else:
        seconds = interval.value * 60.0 if interval.kind == "minutes" else daly_interval_s(stall, system_mtbf)
        every = wl.iterations if not math.isfinite(seconds) else int(round(seconds / iteration_s))
    every = max(1, min(every, wl.iterations))
    return CheckpointPlan(size, write_gbps, read_gbps, stall, background, load, every, system_mtbf,
                          units, shape, scale, recovery)
