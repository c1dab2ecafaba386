"""The deterministic workload model (docs/model.md §2), in array form.

Symbols: N params, L layers, h hidden, s seq_len, B global batch (sequences),
D tokens, G gpus, t tp, p pp, d = G/(t p) dp, b microbatch, v interleave,
m = B/(d b) microbatches per pipeline per iteration, I = ceil(D/(B s)).
All times in seconds, bytes in bytes, memory reported in GB (1e9 bytes).
The equations, with their sources, are written out in ``docs/model.md``.

The equations live once, in :func:`workload_arrays`, over numpy arrays of
candidate layouts (the planner's screen evaluates millions at once,
:mod:`mcsim.planning.screen`); :func:`workload` evaluates one configuration through it
with arrays of size one, so both give bit-identical numbers. For each training phase,
:func:`workload_arrays` asks each part of the model once, in this order: what the GPUs
compute (:mod:`mcsim.model.operators`, under the operator step model), the iteration's
time (:mod:`mcsim.model.steptime`), the memory per GPU (:mod:`mcsim.model.memory`) and the
feasibility checks (:mod:`mcsim.model.feasibility`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from mcsim.model.experts import moe_flops_per_sequence, moe_work
from mcsim.model.feasibility import (
    FEASIBLE,
    MAX_ITERATIONS,
    TOO_MANY_ITERATIONS,
    Checked,
    feasibility_codes,
    objection,
)
from mcsim.model.layouts import RECOMPUTE_CODES, Layouts, ParallelDegrees
from mcsim.model.memory import memory_per_gpu_gb
from mcsim.model.operators import layout_work
from mcsim.model.software import profile_of
from mcsim.model.steptime import aggregate_step, operator_step
from mcsim.scenario.config import Config
from mcsim.scenario.consistency import active_parameters


@dataclass(frozen=True)
class Workload:
    """Per-configuration quantities; timings are NaN when structurally infeasible."""

    feasible: bool
    infeasible_key: str  # scenario key the reason is about ("" when feasible)
    infeasible_reason: str  # "" when feasible
    iterations: int
    dp: int
    microbatches: int  # m, per pipeline per iteration
    model_flops: float  # per iteration, 6 N B s
    hardware_flops: float  # per iteration, with recomputation
    t_comp_s: float
    bubble_s: float
    tp_comm_s: float  # exposed
    pp_comm_s: float  # exposed
    dp_comm_s: float  # exposed
    memory_per_gpu_gb: float
    mfu_ideal: float
    intra_bytes_per_gpu: float = math.nan  # moved per iteration on the intra-node link (all, not only exposed)
    inter_bytes_per_gpu: float = math.nan  # ... on the inter-node link
    # Training phases (docs/model.md §2): (first iteration, compute s, comm s) of each; () for one phase.
    # With phases, the per-iteration fields above are their means over the iterations (memory: the largest).
    phases: tuple[tuple[float, float, float], ...] = ()

    def times_of_first(self, done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Compute and exposed communication time of the first ``done`` iterations (an array), s: each
        iteration at its phase's times (a censored run that stopped in a fast phase is not charged the
        mean of the slow ones)."""
        done = np.asarray(done, dtype=np.float64)
        if not self.phases:
            return done * self.compute_time_s, done * self.comm_time_s
        compute, comm = np.zeros_like(done), np.zeros_like(done)
        ends = [row[0] for row in self.phases[1:]] + [float(self.iterations)]
        for (start, compute_s, comm_s), end in zip(self.phases, ends, strict=True):
            count = np.clip(done - start, 0.0, end - start)
            compute, comm = compute + count * compute_s, comm + count * comm_s
        return compute, comm

    @property
    def phase_table(self) -> np.ndarray:
        """The kernel's phase table (``PH_*`` columns; no rows for one phase)."""
        return np.array(self.phases, dtype=np.float64).reshape(-1, 3)

    @property
    def compute_time_s(self) -> float:
        """t_comp + pipeline bubble: the part that scales with stragglers and frequency."""
        return self.t_comp_s + self.bubble_s

    @property
    def comm_time_s(self) -> float:
        """Exposed communication per iteration."""
        return self.tp_comm_s + self.pp_comm_s + self.dp_comm_s

    @property
    def iteration_time_s(self) -> float:
        """Ideal (failure- and straggler-free) iteration time."""
        return self.compute_time_s + self.comm_time_s

    @property
    def hfu_ideal(self) -> float:
        """Hardware FLOPs utilisation (recomputation counted): the MFU times hardware over model FLOPs."""
        return self.mfu_ideal * self.hardware_flops / self.model_flops

    @property
    def ideal_time_s(self) -> float:
        """Ideal training time, iterations x ideal iteration time."""
        return self.iterations * self.iteration_time_s


@dataclass(frozen=True)
class WorkloadArrays:
    """:class:`Workload`'s quantities per candidate, with a feasibility code per candidate.

    Values of candidates with a structural code (:data:`STRUCTURAL`) are meaningless.
    """

    code: np.ndarray
    iterations: np.ndarray
    dp: np.ndarray
    microbatches: np.ndarray
    model_flops: np.ndarray
    hardware_flops: np.ndarray
    t_comp_s: np.ndarray
    bubble_s: np.ndarray
    tp_comm_s: np.ndarray
    pp_comm_s: np.ndarray
    dp_comm_s: np.ndarray
    memory_per_gpu_gb: np.ndarray
    mfu_ideal: np.ndarray
    intra_bytes_per_gpu: np.ndarray
    inter_bytes_per_gpu: np.ndarray
    phase_table: np.ndarray | None = None  # (candidate x phase x 3), the kernel's phase tables; None: one phase

    @property
    def compute_time_s(self) -> np.ndarray:
        return self.t_comp_s + self.bubble_s

    @property
    def comm_time_s(self) -> np.ndarray:
        return self.tp_comm_s + self.pp_comm_s + self.dp_comm_s

    @property
    def iteration_time_s(self) -> np.ndarray:
        """Ideal iteration time: exactly :attr:`Workload.iteration_time_s`."""
        return self.compute_time_s + self.comm_time_s


# The float fields of a Workload that workload_arrays computes, in the Workload's order.
WORKLOAD_FLOATS = (
    "model_flops",
    "hardware_flops",
    "t_comp_s",
    "bubble_s",
    "tp_comm_s",
    "pp_comm_s",
    "dp_comm_s",
    "memory_per_gpu_gb",
    "mfu_ideal",
    "intra_bytes_per_gpu",
    "inter_bytes_per_gpu",
)


def phase_configs(cfg: Config) -> list[Config]:
    """``cfg`` as one configuration per training phase: the phase's tokens, global batch and sequence
    length in [model], no phases (``[cfg]`` itself when it has none)."""
    ph = cfg.phases
    if not ph.token_shares:
        return [cfg]
    none = dataclasses.replace(ph, token_shares=(), global_batch=(), seq_len=())
    return [
        dataclasses.replace(
            cfg,
            phases=none,
            model=dataclasses.replace(
                cfg.model,
                tokens=share * cfg.model.tokens,
                global_batch=ph.global_batch[i] if ph.global_batch else cfg.model.global_batch,
                seq_len=ph.seq_len[i] if ph.seq_len else cfg.model.seq_len,
            ),
        )
        for i, share in enumerate(ph.token_shares)
    ]


def _phases_combined(cfg: Config, parts: list[WorkloadArrays]) -> WorkloadArrays:
    """The phases' workloads as one: iterations summed, per-iteration quantities averaged over the
    iterations, memory the largest, MFU over the whole time, the first phase's failure code (in phase
    order), microbatches of the largest phase; with the kernel's phase table."""
    counts = np.stack([w.iterations for w in parts]).astype(np.float64)
    iterations = counts.sum(axis=0)
    weights = counts / iterations

    def mean(name: str) -> np.ndarray:
        return np.sum([w_i * getattr(w, name) for w_i, w in zip(weights, parts, strict=True)], axis=0)

    code = parts[0].code.copy()
    for w in parts[1:]:
        code = np.where(code == FEASIBLE, w.code, code)
    code = np.where((code == FEASIBLE) & (iterations > MAX_ITERATIONS), TOO_MANY_ITERATIONS, code)
    times = [w.iteration_time_s for w in parts]
    busy = np.sum([n * t for n, t in zip(counts, times, strict=True)], axis=0)
    with np.errstate(invalid="ignore"):
        mfu = np.sum([n * t * w.mfu_ideal for n, t, w in zip(counts, times, parts, strict=True)], axis=0) / busy
    table = np.stack(
        [np.stack([counts[:i].sum(axis=0), w.compute_time_s, w.comm_time_s], axis=-1) for i, w in enumerate(parts)],
        axis=1,
    )
    largest = int(np.argmax(cfg.phases.token_shares))
    averaged = {name: mean(name) for name in WORKLOAD_FLOATS if name not in ("memory_per_gpu_gb", "mfu_ideal")}
    return WorkloadArrays(
        code=code,
        iterations=iterations.astype(np.int64),
        dp=parts[0].dp,
        microbatches=parts[largest].microbatches,
        memory_per_gpu_gb=np.max([w.memory_per_gpu_gb for w in parts], axis=0),
        mfu_ideal=mfu,
        phase_table=table,
        **averaged,
    )


def workload_arrays(cfg: Config, lay: Layouts) -> WorkloadArrays:
    """The workload model over candidate layouts; scenario constants from ``cfg``.

    ``cfg`` supplies the model, network, overlaps, compute efficiency,
    ``gpus_per_node`` and ``max_wall_days``; ``lay`` everything a candidate varies.
    With training phases, each phase is evaluated as its own configuration and the
    results combined (:func:`_phases_combined`).
    """
    parts = [_one_phase_arrays(phase, lay) for phase in phase_configs(cfg)]
    return _phases_combined(cfg, parts) if cfg.phases.token_shares else parts[0]


def _one_phase_arrays(cfg: Config, lay: Layouts) -> WorkloadArrays:
    """:func:`workload_arrays` of a configuration with one phase."""
    mdl = cfg.model
    s, B, D = mdl.seq_len, mdl.global_batch, mdl.tokens
    iterations = math.ceil(D / (B * s))
    deg = parallel_degrees(lay, B)
    operators = cfg.compute.step_model == "operators"
    if operators:
        work = layout_work(mdl, lay, deg, bool(cfg.compute.fused_attention))
        moe = None
        if mdl.experts:  # a mixture of experts: its MoE layers, its FLOPs on the active parameters
            model_flops, recomputed = moe_flops_per_sequence(
                mdl, work.shape, lay.recompute, cfg.compute.fused_attention
            )
            work = dataclasses.replace(
                work, model_flops_per_sequence=model_flops, recompute_flops_per_sequence=recomputed
            )
            moe = moe_work(mdl, lay, deg, work)
        step, stages = operator_step(cfg, lay, deg, work, moe), work.stages
    else:
        step, stages = aggregate_step(cfg, lay, deg), None
    # The operators model places the embedding and the output layer on the end stages.
    # The pipeline engine decides the activations in flight and the framework's buffers: the software
    # profile's (compute.software; docs/model.md §2b, "Software profiles").
    memory_gb = memory_per_gpu_gb(cfg, lay, deg, stages, profile_of(cfg).pipeline_engine)
    iteration_time = step.t_comp_s + step.bubble_s + step.tp_comm_s + step.pp_comm_s + step.dp_comm_s
    G, peak_flops = deg.gpus, lay.peak_tflops * 1e12
    with np.errstate(over="ignore"):  # an absurdly long iteration (efficiency near 0): the MFU is 0, no warning
        if operators:  # model FLOPs with attention and the output layer
            mfu = step.model_flops / (G * peak_flops * iteration_time)
        else:
            mfu = 6.0 * active_parameters(mdl) * D / (G * peak_flops * iterations * iteration_time)
    return WorkloadArrays(
        feasibility_codes(cfg, lay, deg, iterations, iteration_time, memory_gb),
        np.full(G.shape, iterations, dtype=np.int64),
        deg.dp,
        deg.microbatches,
        step.model_flops,
        step.hardware_flops,
        step.t_comp_s,
        step.bubble_s,
        step.tp_comm_s,
        step.pp_comm_s,
        step.dp_comm_s,
        memory_gb,
        mfu,
        step.intra_bytes_per_gpu,
        step.inter_bytes_per_gpu,
    )


def parallel_degrees(lay: Layouts, global_batch: int) -> ParallelDegrees:
    """The :class:`ParallelDegrees` of ``lay`` for a global batch of ``global_batch`` sequences."""
    G, t, p, b, v = (np.asarray(x, dtype=np.int64) for x in (lay.gpus, lay.tp, lay.pp, lay.microbatch, lay.interleave))
    c, e, et = (np.asarray(x, dtype=np.int64) for x in (lay.cp, lay.ep, lay.expert_tp))
    d = np.maximum(G // (t * p * c), 1)
    m = np.maximum(global_batch // (d * b), 1)
    edp = np.maximum(t * c * d // (et * e), 1)
    return ParallelDegrees(
        gpus=G, tp=t, pp=p, cp=c, dp=d, microbatch=b, microbatches=m, interleave=v, ep=e, expert_tp=et, edp=edp
    )


def layouts_of(cfgs: list[Config]) -> Layouts:
    """The :class:`Layouts` of configurations (one element each)."""

    def column(get: Callable[[Config], object], dtype: DTypeLike) -> np.ndarray:
        return np.array([get(c) for c in cfgs], dtype=dtype)

    return Layouts(
        column(lambda c: c.parallelism.gpus, np.int64),
        column(lambda c: c.parallelism.tp, np.int64),
        column(lambda c: c.parallelism.pp, np.int64),
        column(lambda c: c.parallelism.microbatch, np.int64),
        column(lambda c: c.parallelism.interleave, np.int64),
        column(lambda c: RECOMPUTE_CODES[c.model.recompute], np.int64),
        column(lambda c: c.freq_mhz, np.float64),
        column(lambda c: c.gpu.peak_tflops, np.float64),
        column(lambda c: c.gpu.memory_gb, np.float64),
        column(lambda c: c.gpu.freq_min_mhz, np.float64),
        column(lambda c: c.gpu.freq_max_mhz, np.float64),
        column(lambda c: c.gpu.hbm_gbps, np.float64),
        column(lambda c: c.gpu.fp8_tflops, np.float64),
        column(lambda c: c.parallelism.sequence_parallel, np.bool_),
        column(lambda c: c.parallelism.zero_stage, np.int64),
        column(lambda c: c.parallelism.cp, np.int64),
        column(lambda c: c.parallelism.ep, np.int64),
        column(lambda c: c.parallelism.expert_tp, np.int64),
    )


@dataclass(frozen=True, eq=False)
class _StepInputs:
    """A configuration as the step model sees it: equal and hashed by :func:`step_sections` alone."""

    cfg: Config
    sections: tuple

    def __hash__(self) -> int:
        return hash(self.sections)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StepInputs) and self.sections == other.sections


def step_sections(cfg: Config) -> tuple:
    """The sections of ``cfg`` that :func:`workload_arrays` reads: model, phases, hardware, GPU,
    parallelism, compute, network and run (tested: it computes the same with every other section
    unreadable)."""
    return (cfg.model, cfg.phases, cfg.hardware, cfg.gpu, cfg.parallelism, cfg.compute, cfg.network, cfg.run)


@functools.lru_cache(maxsize=1024)
def _cached_arrays(inputs: _StepInputs) -> WorkloadArrays:
    return workload_arrays(inputs.cfg, layouts_of([inputs.cfg]))


def own_layout_arrays(cfg: Config) -> WorkloadArrays:
    """:func:`workload_arrays` of ``cfg``'s own layout, each distinct :func:`step_sections` once per process
    (the last 1,024): a sweep over checkpoint intervals and strategies shares a few workloads, which
    it would otherwise evaluate once per configuration. The arrays are shared: read them, never
    write. A configuration that holds arrays (parameter draws) is not hashable and is computed anew."""
    try:
        return _cached_arrays(_StepInputs(cfg, step_sections(cfg)))
    except TypeError:
        return workload_arrays(cfg, layouts_of([cfg]))


def workload(cfg: Config) -> Workload:
    """Evaluate the deterministic workload model of one configuration (through :func:`workload_arrays`)."""
    arrays = own_layout_arrays(cfg)
    iterations, dp, m = int(arrays.iterations[0]), int(arrays.dp[0]), int(arrays.microbatches[0])
    values = {name: float(getattr(arrays, name)[0]) for name in WORKLOAD_FLOATS}
    phases = phase_rows(arrays.phase_table, 0)
    whole = _checked(cfg, arrays)
    phase_checks = _checked_phases(whole)
    problem = objection(whole, phase_checks)
    if problem is None:
        return Workload(True, "", "", iterations, dp, m, phases=phases, **values)
    if problem.timed:
        return Workload(False, problem.key, problem.reason, iterations, dp, m, phases=phases, **values)
    nan = math.nan
    return Workload(False, problem.key, problem.reason, iterations, 0, 0, nan, nan, nan, nan, nan, nan, nan, nan, nan)


def _checked(cfg: Config, arrays: WorkloadArrays) -> Checked:
    """The only candidate of ``arrays``, ``cfg``'s workload, as the feasibility objections read it."""
    return Checked(
        cfg,
        int(arrays.code[0]),
        int(arrays.iterations[0]),
        float(arrays.iteration_time_s[0]),
        float(arrays.memory_per_gpu_gb[0]),
    )


def _checked_phases(whole: Checked) -> list[Checked]:
    """The training phases of an infeasible configuration, each checked on its own (to name the phase an
    objection is about); ``[whole]`` for a feasible one or one without phases."""
    cfg = whole.cfg
    if whole.code == FEASIBLE or not cfg.phases.token_shares:
        return [whole]
    return [_checked(c, _one_phase_arrays(c, layouts_of([c]))) for c in phase_configs(cfg)]


def phase_rows(table: np.ndarray | None, index: int) -> tuple[tuple[float, float, float], ...]:
    """Candidate ``index``'s phase table as :attr:`Workload.phases` (``()`` for one phase)."""
    if table is None:
        return ()
    return tuple((float(r[0]), float(r[1]), float(r[2])) for r in table[index])
