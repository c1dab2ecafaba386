"""The deterministic workload model (docs/model.md §2), in array form.

Symbols: N params, L layers, h hidden, s seq_len, B global batch (sequences),
D tokens, G gpus, t tp, p pp, d = G/(t p) dp, b microbatch, v interleave,
m = B/(d b) microbatches per pipeline per iteration, I = ceil(D/(B s)).
All times in seconds, bytes in bytes, memory reported in GB (1e9 bytes).
The equations, with their sources, are written out in ``docs/model.md``.

The equations live once, in :func:`workload_arrays`, over numpy arrays of
candidate layouts (the planner's screen evaluates millions at once,
:mod:`mcsim.screen`); :func:`workload` evaluates one configuration through it
with arrays of size one, so both give bit-identical numbers.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from mcsim.model import steptime
from mcsim.model.strategies import STRATEGIES
from mcsim.scenario.config import Config

BF16_BYTES = 2
# Guards that keep every run finite (docs/model.md §2): at most 1e10 iterations, and an
# iteration at least 2^-40 of max_wall, so t + iteration_time > t for all t <= max_wall
# (doubles carry 53 bits) and a run takes at most 2^40 steps.
MAX_ITERATIONS = 10**10
TIME_RESOLUTION = 2.0**-40
RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}

# Feasibility codes of workload_arrays, in the order they are checked (the first failure wins).
# Between PP_LAYERS and FREQUENCY the scalar workload() checks the checkpoint strategy and the
# failure domains (configuration-level checks; the screen checks them per group).
FEASIBLE = 0
NODE_MULTIPLE = 1  # parallelism.gpus: G not a multiple of gpus_per_node
TP_PP_DIVIDE = 2  # parallelism.tp: t p does not divide G
BATCH_DIVIDE = 3  # model.global_batch: d b does not divide B
PP_LAYERS = 4  # parallelism.pp: p > L
FREQUENCY = 5  # compute.freq_mhz outside the GPU's range
TOO_MANY_ITERATIONS = 6  # model.tokens
TIME_RESOLUTION_CODE = 7  # model.global_batch: iteration below the time resolution
MEMORY = 8  # parallelism: memory per GPU exceeds the GPU's
CP_SEQUENCE = 9  # parallelism.cp: cp does not divide seq_len (checked after TP_PP_DIVIDE)
INTERLEAVE_LAYERS = 10  # parallelism.interleave: p v > L, a virtual stage without a layer (after PP_LAYERS)
STRUCTURAL = (NODE_MULTIPLE, TP_PP_DIVIDE, CP_SEQUENCE, BATCH_DIVIDE, PP_LAYERS, INTERLEAVE_LAYERS)


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
class Layouts:
    """Candidate layouts as equal-length arrays (one element per candidate).

    GPU fields are the catalog entry's (with overrides); ``recompute`` holds
    :data:`RECOMPUTE_CODES`; ``freq_mhz`` the core clock in use, MHz.
    """

    gpus: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    microbatch: np.ndarray
    interleave: np.ndarray
    recompute: np.ndarray
    freq_mhz: np.ndarray
    peak_tflops: np.ndarray
    memory_gb: np.ndarray
    freq_min_mhz: np.ndarray
    freq_max_mhz: np.ndarray
    hbm_gbps: np.ndarray
    fp8_tflops: np.ndarray  # 0: the GPU has no FP8
    sequence_parallel: np.ndarray  # bool
    zero_stage: np.ndarray  # 0..3
    cp: np.ndarray  # context-parallel degree


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


def model_state_bytes_per_param(zero_stage: int | np.ndarray, dp: np.ndarray) -> np.ndarray:
    """Bytes of model state per parameter a GPU holds: BF16 weights and gradients, FP32 Adam state (12).

    Rajbhandari et al., ZeRO (SC'20, arXiv 1910.02054), §5: stage 1 shards the optimizer
    state over the d data-parallel ranks, stage 2 the gradients too, stage 3 (FSDP) the
    weights too. Stage 1 is Megatron's distributed optimizer, mcsim's default.
    """
    d = np.asarray(dp, dtype=np.float64)
    stage = np.asarray(zero_stage)
    weights = np.where(stage >= 3, 2.0 / d, 2.0)
    gradients = np.where(stage >= 2, 2.0 / d, 2.0)
    optimizer = np.where(stage >= 1, 12.0 / d, 12.0)
    return weights + gradients + optimizer


def ring_allreduce_s(ranks: ArrayLike, nbytes: ArrayLike, bandwidth_gbps: ArrayLike, latency_s: float) -> np.ndarray:
    """Ring all-reduce time: ``2(n-1)/n * bytes / bw + 2(n-1) * latency`` (0 for one rank); arrays."""
    ranks = np.asarray(ranks)
    n = np.maximum(ranks, 1)
    time = 2.0 * (n - 1) / n * np.asarray(nbytes) / (np.asarray(bandwidth_gbps) * 1e9) + 2.0 * (n - 1) * latency_s
    return np.where(ranks <= 1, 0.0, time)


def activation_bytes_per_layer(cfg: Config) -> float:
    """Activation memory of one layer and one microbatch on one GPU, bytes (see :func:`_activation_per_layer`)."""
    return float(
        _activation_per_layer(
            cfg.model,
            np.array([cfg.parallelism.microbatch]),
            np.array([cfg.parallelism.tp]),
            np.array([RECOMPUTE_CODES[cfg.model.recompute]]),
            cfg.parallelism.sequence_parallel,
            cfg.parallelism.cp,
        )[0]
    )


def _activation_per_layer(
    mdl,
    b: np.ndarray,
    t: np.ndarray,
    recompute: np.ndarray,
    sequence_parallel: bool | np.ndarray = True,
    cp: int | np.ndarray = 1,
) -> np.ndarray:
    """Activation memory of one layer and one microbatch on one GPU, bytes (arrays).

    Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
    Models" (MLSys 2023, arXiv 2205.05198), Table 2, with tensor and sequence
    parallelism: ``sbh(34 + 5as/h)/t`` without recomputation, ``34 sbh/t`` with
    selective recomputation, ``2 sbh/t`` (the layer input only) with full.
    Without dropout the two sbh-byte dropout masks and the as^2b-byte
    attention mask and 2as^2b-byte attention dropout output of their §4.1
    derivation are not stored: ``32 + 2as/h`` and ``32``.
    Without sequence parallelism (Table 2, "tensor parallel (baseline)") the
    ``10 sbh`` of the norms' inputs, the two matrix inputs after them and the two
    dropout masks (``8 sbh`` without dropout) are held whole on every GPU of the
    group: ``sbh(10 + 24/t + 5as/(ht))``, ``sbh(10 + 24/t)``, and ``2 sbh`` with full.
    With context parallelism a GPU holds its s/cp tokens' activations; the attention
    scores of those queries still span all s keys (the ``as/h`` terms keep s).
    """
    s, h = mdl.seq_len, mdl.hidden
    heads = mdl.heads or max(1, h // 128)
    base, attention = (34.0, 5.0) if mdl.dropout else (32.0, 2.0)
    t = np.asarray(t, dtype=np.float64)
    sbh = s / np.asarray(cp) * np.asarray(b, dtype=np.float64) * h
    with_sp = sbh * np.array([base + attention * heads * s / h, base, 2.0])[recompute] / t
    replicated = 10.0 if mdl.dropout else 8.0
    split = base - replicated
    scores = attention * heads * s / h
    per_split = np.array([split + scores, split, 0.0])[recompute]
    per_whole = np.array([replicated, replicated, 2.0])[recompute]
    return np.where(sequence_parallel, with_sp, sbh * (per_whole + per_split / t))


def peak_stage_microbatch_layers(layers: int, stages: ArrayLike, microbatches: ArrayLike) -> np.ndarray:
    """``max_i layers(i) * min(p - i, m)`` over the stages of :func:`mcsim.model.pipeline_stages.stage_layers` (arrays).

    Stage i (0-based) of p holds the activations of min(p - i, m) in-flight
    microbatches (1F1B). The in-flight count falls with i, so the maximum is at
    stage 0 or at the first stage with the larger layer count: with
    ``extra = L mod p > 0`` the ``p - extra`` outermost stages (first and last
    alternately) hold one layer fewer, so the first full stage is
    ``ceil((p - extra) / 2)``.
    """
    p = np.asarray(stages)
    per, extra = np.divmod(layers, p)
    first_full = (p - extra + 1) // 2
    at_first = per * np.minimum(p, microbatches)
    at_full = (per + 1) * np.minimum(p - first_full, microbatches)
    return np.where(extra == 0, at_first, np.maximum(at_first, at_full))


def peak_activation_bytes(cfg: Config, microbatches: int) -> float:
    """Activation memory of the fullest pipeline stage under 1F1B, bytes."""
    per_layer = activation_bytes_per_layer(cfg)
    return per_layer * int(
        peak_stage_microbatch_layers(cfg.model.layers, np.array([cfg.parallelism.pp]), np.array([microbatches]))[0]
    )


def _linear_peak_flops(cfg: Config, lay: Layouts, peak_flops: np.ndarray) -> np.ndarray:
    """Peak of the linear layers' matrix operators, FLOP/s: FP8's where asked and the GPU has it (§2b)."""
    if not cfg.compute.fp8:
        return peak_flops
    return np.where(lay.fp8_tflops > 0, lay.fp8_tflops * 1e12, peak_flops)


def _aggregate_step(
    cfg: Config,
    lay: Layouts,
    G: np.ndarray,
    t: np.ndarray,
    p: np.ndarray,
    b: np.ndarray,
    v: np.ndarray,
    c: np.ndarray,
    d: np.ndarray,
    m: np.ndarray,
    peak_flops: np.ndarray,
) -> steptime.StepTimes:
    """§2's iteration (one efficiency for every FLOP) over candidates, split as the operator model splits it."""
    mdl, net = cfg.model, cfg.network
    N, L, h, s, B = mdl.params, mdl.layers, mdl.hidden, mdl.seq_len, mdl.global_batch
    gpn = cfg.hardware.gpus_per_node
    model_flops = np.full(G.shape, 6.0 * N * B * s)
    hardware_flops = np.select(
        [lay.recompute == 2, lay.recompute == 1],
        # Selective: forward attention scores recomputed: QK^T and AV,
        # 2 s^2 h FLOPs each per sequence and layer.
        [model_flops * 4.0 / 3.0, model_flops + 4.0 * B * s * s * h * L],
        model_flops,
    )
    # DVFS: the compute-bound share of the compute time scales as f_max / f, the rest
    # (memory-bound kernels) does not.
    share = cfg.compute.freq_scaling_share
    slowdown = share * lay.freq_max_mhz / lay.freq_mhz + (1.0 - share)
    t_comp = hardware_flops / (G * peak_flops * cfg.compute.efficiency) * slowdown
    bubble = t_comp * (p - 1) / (v * m)

    latency_s = net.latency_us * 1e-6
    act_bytes = b.astype(np.float64) * (s / c) * h * BF16_BYTES  # this GPU's s/cp tokens
    # TP spans nodes when tp > gpus_per_node: it then runs on the inter-node link.
    tp_bw = np.where(t <= gpn, net.intra_gbps, net.inter_gbps)
    tp_comm = (L / p) * m * 4 * ring_allreduce_s(t, act_bytes, tp_bw, latency_s) * (1 - cfg.parallelism.overlap_tp)
    pp_comm = np.where(p > 1, 2.0 * m * v * (act_bytes / (net.inter_gbps * 1e9) + latency_s), 0.0)
    grad_bytes = BF16_BYTES * N / (t * p)
    # Gradients are reduced over the data- and context-parallel ranks (both hold the same weights).
    dp_comm = ring_allreduce_s(d * c, grad_bytes, net.inter_gbps, latency_s) * (1 - cfg.parallelism.overlap_dp)
    # Bytes each GPU sends per iteration (a ring all-reduce sends 2(n-1)/n of the buffer).
    tp_bytes = (L / p) * m * 4 * np.where(t > 1, 2.0 * (t - 1) / t * act_bytes, 0.0)
    pp_bytes = np.where(p > 1, 2.0 * m * v * act_bytes, 0.0)
    dp_bytes = np.where(d * c > 1, 2.0 * (d * c - 1) / (d * c) * grad_bytes, 0.0)
    intra_bytes = np.where(t <= gpn, tp_bytes, 0.0)
    inter_bytes = pp_bytes + dp_bytes + np.where(t > gpn, tp_bytes, 0.0)
    return steptime.StepTimes(
        t_comp_s=t_comp,
        bubble_s=bubble,
        tp_comm_s=tp_comm,
        pp_comm_s=pp_comm,
        dp_comm_s=dp_comm,
        model_flops=model_flops,
        hardware_flops=hardware_flops,
        intra_bytes_per_gpu=intra_bytes,
        inter_bytes_per_gpu=inter_bytes,
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
    if cfg.phases.token_shares:
        return _phases_combined(cfg, [_one_phase_arrays(c, lay) for c in phase_configs(cfg)])
    return _one_phase_arrays(cfg, lay)


def _one_phase_arrays(cfg: Config, lay: Layouts) -> WorkloadArrays:
    """:func:`workload_arrays` of a configuration with one phase."""
    mdl = cfg.model
    N, L, s, B, D = mdl.params, mdl.layers, mdl.seq_len, mdl.global_batch, mdl.tokens
    G, t, p, b, v = (np.asarray(x, dtype=np.int64) for x in (lay.gpus, lay.tp, lay.pp, lay.microbatch, lay.interleave))
    gpn = cfg.hardware.gpus_per_node
    iterations = math.ceil(D / (B * s))
    code = np.zeros(G.shape, dtype=np.int64)

    def flag(failed, which):
        code[(code == FEASIBLE) & failed] = which

    flag(G % gpn != 0, NODE_MULTIPLE)
    c = np.asarray(lay.cp, dtype=np.int64)
    flag(G % (t * p * c) != 0, TP_PP_DIVIDE)
    flag(s % c != 0, CP_SEQUENCE)
    d = np.maximum(G // (t * p * c), 1)
    flag(B % (d * b) != 0, BATCH_DIVIDE)
    flag(p > L, PP_LAYERS)
    flag(p * v > L, INTERLEAVE_LAYERS)
    m = np.maximum(B // (d * b), 1)
    flag(~((lay.freq_min_mhz <= lay.freq_mhz) & (lay.freq_mhz <= lay.freq_max_mhz)), FREQUENCY)
    if iterations > MAX_ITERATIONS:
        flag(np.ones(G.shape, dtype=bool), TOO_MANY_ITERATIONS)

    peak_flops = lay.peak_tflops * 1e12
    operators = cfg.compute.step_model == "operators"
    if operators:
        step = steptime.operator_step(
            cfg,
            steptime.Layout(
                gpus_per_node=gpn,
                tp=t,
                pp=p,
                dp=d,
                microbatch=b,
                microbatches=m,
                interleave=v,
                recompute=lay.recompute,
                sequence_parallel=lay.sequence_parallel,
                zero_stage=lay.zero_stage,
                cp=c,
                peak_flops=peak_flops,
                linear_peak_flops=_linear_peak_flops(cfg, lay, peak_flops),
                hbm_bytes_per_s=lay.hbm_gbps * 1e9,
                clock_ratio=lay.freq_max_mhz / lay.freq_mhz,
            ),
        )
        # The operators model places the embedding and the output layer on the end stages.
        params_held = steptime.params_held_per_gpu(mdl, t, p, v)
    else:
        step = _aggregate_step(cfg, lay, G, t, p, b, v, c, d, m, peak_flops)
        params_held = N / (t * p)
    model_flops, hardware_flops = step.model_flops, step.hardware_flops
    t_comp, bubble = step.t_comp_s, step.bubble_s
    tp_comm, pp_comm, dp_comm = step.tp_comm_s, step.pp_comm_s, step.dp_comm_s
    intra_bytes, inter_bytes = step.intra_bytes_per_gpu, step.inter_bytes_per_gpu

    state_bytes = params_held * model_state_bytes_per_param(lay.zero_stage, d * c)
    if cfg.compute.fp8:  # FP8 copies of the weights, 1 byte each, where the GPU computes in FP8
        held = params_held / np.where(lay.zero_stage >= 3, d * c, 1)
        state_bytes = state_bytes + np.where(lay.fp8_tflops > 0, held, 0.0)
    per_layer = _activation_per_layer(mdl, b, t, lay.recompute, lay.sequence_parallel, c)
    memory_gb = (state_bytes + per_layer * peak_stage_microbatch_layers(L, p, m)) / 1e9

    iteration_time = t_comp + bubble + tp_comm + pp_comm + dp_comm
    with np.errstate(over="ignore"):  # an absurdly long iteration (efficiency near 0): the MFU is 0, no warning
        if operators:  # model FLOPs with attention and the output layer
            mfu = model_flops / (G * peak_flops * iteration_time)
        else:
            mfu = 6.0 * N * D / (G * peak_flops * iterations * iteration_time)
    max_wall_s = cfg.run.max_wall_days * 86400.0
    # Below this, adding an iteration to the clock late in a run would not move it.
    flag(iteration_time < max_wall_s * TIME_RESOLUTION, TIME_RESOLUTION_CODE)
    flag(memory_gb > lay.memory_gb, MEMORY)
    return WorkloadArrays(
        code,
        np.full(G.shape, iterations, dtype=np.int64),
        d,
        m,
        model_flops,
        hardware_flops,
        t_comp,
        bubble,
        tp_comm,
        pp_comm,
        dp_comm,
        memory_gb,
        mfu,
        intra_bytes,
        inter_bytes,
    )


def layouts_of(cfgs: list[Config]) -> Layouts:
    """The :class:`Layouts` of configurations (one element each)."""

    def column(get, dtype):
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
    )


def _infeasible(key: str, reason: str, iterations: int = 0) -> Workload:
    nan = math.nan
    return Workload(False, key, reason, iterations, 0, 0, nan, nan, nan, nan, nan, nan, nan, nan, nan)


def _structural_reason(cfg: Config, code: int) -> tuple[str, str]:
    par, gpn = cfg.parallelism, cfg.hardware.gpus_per_node
    G, t, p, b = par.gpus, par.tp, par.pp, par.microbatch
    if code == NODE_MULTIPLE:
        return "parallelism.gpus", f"gpus = {G} is not a multiple of hardware.gpus_per_node = {gpn}"
    cp = par.cp
    if code == TP_PP_DIVIDE:
        if cp > 1:
            return "parallelism.tp", f"tp*pp*cp = {t}*{p}*{cp} = {t * p * cp} does not divide gpus = {G}"
        return "parallelism.tp", f"tp*pp = {t}*{p} = {t * p} does not divide gpus = {G}"
    if code == CP_SEQUENCE:
        return "parallelism.cp", f"cp = {cp} does not divide model.seq_len = {cfg.model.seq_len}"
    if code == BATCH_DIVIDE:
        d = G // (t * p * cp)
        return "model.global_batch", (
            f"global_batch = {cfg.model.global_batch} is not divisible by dp*microbatch = {d}*{b} = {d * b}"
        )
    if code == INTERLEAVE_LAYERS:
        v = par.interleave
        return "parallelism.interleave", (
            f"pp*interleave = {p}*{v} = {p * v} virtual stages exceed layers = {cfg.model.layers}"
        )
    return "parallelism.pp", f"pp = {p} exceeds layers = {cfg.model.layers}"


def configuration_problem(cfg: Config) -> tuple[str, str] | None:
    """The checkpoint strategy's or a failure domain's objection to ``cfg`` as (key, reason), or None."""
    strategy_problem = STRATEGIES[cfg.checkpoint.strategy].infeasible(cfg)
    if strategy_problem:
        return "checkpoint.strategy", strategy_problem
    nodes = cfg.parallelism.gpus // cfg.hardware.gpus_per_node
    for fclass in cfg.failures:
        if fclass.scope == "node" and nodes % fclass.domain_nodes:
            return (
                f"failures.{fclass.name}.domain_nodes",
                f"domain_nodes = {fclass.domain_nodes} does not divide the job's {nodes} nodes",
            )
    return None


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
    (the last 1,024): a sweep over checkpoint intervals and strategies shares a few workloads
    (issue 26 item 4). The arrays are shared: read them, never write. A configuration that holds
    arrays (parameter draws) is not hashable and is computed anew."""
    try:
        return _cached_arrays(_StepInputs(cfg, step_sections(cfg)))
    except TypeError:
        return workload_arrays(cfg, layouts_of([cfg]))


def workload(cfg: Config) -> Workload:
    """Evaluate the deterministic workload model of one configuration (through :func:`workload_arrays`)."""
    arrays = own_layout_arrays(cfg)
    code = int(arrays.code[0])
    iterations = int(arrays.iterations[0])
    if code in STRUCTURAL:
        return _infeasible(*_phase_reason(cfg, code), iterations)
    problem = configuration_problem(cfg)
    if problem:
        return _infeasible(*problem, iterations)
    if code == FREQUENCY:
        return _infeasible(
            "compute.freq_mhz",
            f"freq_mhz = {cfg.freq_mhz:g} is outside the {cfg.hardware.gpu}'s "
            f"range {cfg.gpu.freq_min_mhz:g}..{cfg.gpu.freq_max_mhz:g} MHz",
            iterations,
        )
    if code == TOO_MANY_ITERATIONS:
        return _infeasible(
            "model.tokens",
            f"{iterations:.3g} iterations (tokens / (global_batch * seq_len)) "
            f"exceed the supported {MAX_ITERATIONS:.0e}",
            iterations,
        )
    if code == TIME_RESOLUTION_CODE:
        max_wall_s = cfg.run.max_wall_days * 86400.0
        key, prefix, iteration_time = "model.global_batch", "", float(arrays.iteration_time_s[0])
        for i, phase in enumerate(phase_configs(cfg) if cfg.phases.token_shares else []):
            own = _one_phase_arrays(phase, layouts_of([phase]))
            if int(own.code[0]) == TIME_RESOLUTION_CODE:  # name the phase, with its own iteration time
                key, prefix, iteration_time = (
                    "phases.global_batch",
                    f"training phase {i + 1}: ",
                    float(own.iteration_time_s[0]),
                )
                break
        return _infeasible(
            key,
            f"{prefix}iteration time {iteration_time:.3g} s is below the time "
            f"resolution of a {cfg.run.max_wall_days:g}-day run "
            f"({max_wall_s * TIME_RESOLUTION:.3g} s); use larger batches "
            "or a shorter run.max_wall_days",
            iterations,
        )
    values = {name: float(getattr(arrays, name)[0]) for name in WORKLOAD_FLOATS}
    dp, m = int(arrays.dp[0]), int(arrays.microbatches[0])
    phases = phase_rows(arrays.phase_table, 0)
    if code == MEMORY:
        memory = values["memory_per_gpu_gb"]
        reason = f"memory per GPU {memory:.1f} GB exceeds the {cfg.hardware.gpu}'s {cfg.gpu.memory_gb:g} GB"
        configs = phase_configs(cfg)
        if len(configs) > 1:  # name the phase that needs it
            needs = [float(_one_phase_arrays(c, layouts_of([c])).memory_per_gpu_gb[0]) for c in configs]
            reason = f"training phase {int(np.argmax(needs)) + 1}: {reason}"
        return Workload(False, "parallelism", reason, iterations, dp, m, phases=phases, **values)
    return Workload(True, "", "", iterations, dp, m, phases=phases, **values)


def phase_rows(table: np.ndarray | None, index: int) -> tuple[tuple[float, float, float], ...]:
    """Candidate ``index``'s phase table as :attr:`Workload.phases` (``()`` for one phase)."""
    if table is None:
        return ()
    return tuple((float(r[0]), float(r[1]), float(r[2])) for r in table[index])


def _phase_reason(cfg: Config, code: int) -> tuple[str, str]:
    """The structural reason of ``code`` as (key, reason), naming the first phase that has it."""
    configs = phase_configs(cfg)
    if len(configs) == 1:
        return _structural_reason(cfg, code)
    for i, phase in enumerate(configs):
        if int(_one_phase_arrays(phase, layouts_of([phase])).code[0]) == code:
            key, reason = _structural_reason(phase, code)
            if key in ("model.global_batch", "model.seq_len") and getattr(cfg.phases, key.split(".")[1]):
                key = "phases." + key.split(".")[1]
            if cfg.phases.seq_len:  # the sequence length came from [phases]
                reason = reason.replace("model.seq_len", "phases.seq_len")
            return key, f"training phase {i + 1}: {reason}"
    return _structural_reason(cfg, code)
