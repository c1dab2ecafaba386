"""The step-time models: the time of one iteration of candidate layouts, in array form.

``compute.step_model = "aggregate"`` (docs/model.md §2, :func:`aggregate_step`): every FLOP at
one efficiency, ring all-reduces over the links, the 1F1B bubble.

``compute.step_model = "operators"`` (docs/model.md §2b, :func:`operator_step`), per candidate
layout: each operator of :mod:`mcsim.model.operators` at an efficiency that rises with its
size, the collectives the frameworks run at their bus bandwidth, and a pipeline whose stages
are the layers, the embedding and the output layer as they are placed, paced by the slowest
stage:

- Matrix operators: ``flops / (peak x efficiency x curve(flops))``; the curve is
  Calculon's matrix-efficiency table (Isaev et al., SC'23; its A100 and H100 system
  files give the same knots), interpolated in ``log(1 + GFLOP)``; ``compute.efficiency``
  scales it, the one knob a user who measured their throughput turns.
- Memory-bound operators: ``bytes / (HBM bandwidth x curve(bytes))``, Calculon's
  memory-efficiency table, evaluated per fused kernel (six per layer).
- Tensor parallelism: per layer and microbatch, 2 all-reduces forward and 2 backward
  (Megatron's f and g operators; Shoeybi et al. 2019, arXiv 1909.08053, §3), or with
  sequence parallelism 2 all-gathers and 2 reduce-scatters forward and backward plus
  the 2 all-gathers the backward repeats to form weight gradients (Korthikanti et al.
  2022, §4.2.2); full recomputation repeats the forward ones. A ring step of a
  reduce-scatter or all-gather moves ``(t-1)/t`` of the message.
- Pipeline: each microbatch crosses every virtual-stage boundary forward and backward
  with ``b s h / t`` elements (Narayanan et al. 2021, §4.1, scatter/gather);
  ``parallelism.overlap_pp`` hides a share of it.
- Data parallelism: the gradient all-reduce over ``d`` ranks; the hidden share
  ``parallelism.overlap_dp`` can hide it behind at most the backward pass of the last
  microbatch (gradients are reduced once per iteration, after accumulation).
- Pipeline schedule: with per-GPU microbatch times ``t_i`` (forward, backward,
  recomputation and exposed communication of the GPU's layers), the iteration's
  pipeline part is ``m max(t_i) + (sum(t_i) - max(t_i)) / v``; with equal stages this is
  Megatron's 1F1B bubble ``(p-1)/(v m)`` (Narayanan et al. 2021, §2.2), with unequal ones
  the slowest stage sets the pace and every other stage adds its fill and drain once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from mcsim.model import experts as moe_model
from mcsim.model import operators as ops
from mcsim.model.device_rates import (
    Link,
    data_parallel_exposed,
    gemm_seconds,
    memory_seconds,
    ring_step_bytes,
    ring_step_seconds,
)
from mcsim.model.layouts import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, Layouts, ParallelDegrees
from mcsim.model.pipeline_stages import StageLayers
from mcsim.scenario.config import Config
from mcsim.scenario.consistency import active_parameters, parameter_counts

MEMORY_KERNELS_PER_LAYER = 6  # two norms, two residual additions, the activation, softmax (+ dropout)


# The step-time models' typical error against published iteration times: layouts whose ideal
# iteration times are closer than this are ties as far as the model can tell (mcsim report).
# operators: the median |error| of the leave-one-out validation over its 51 cases, 5.95 %
# (docs/validation.md, "Step time"; tests/model/test_steptime.py keeps it at least that); aggregate:
# the median error of §2's one-efficiency model on published cases, 8 %, as assessed when the operator
# model was introduced.
STEP_TIME_ERROR = {"aggregate": 0.08, "operators": 0.0595}


def ring_allreduce_s(ranks: ArrayLike, nbytes: ArrayLike, bandwidth_gbps: ArrayLike, latency_s: float) -> np.ndarray:
    """Ring all-reduce time of the aggregate model: ``2(n-1)/n * bytes / bw + 2(n-1) * latency`` (0 for one
    rank); arrays."""
    ranks = np.asarray(ranks)
    n = np.maximum(ranks, 1)
    time = 2.0 * (n - 1) / n * np.asarray(nbytes) / (np.asarray(bandwidth_gbps) * 1e9) + 2.0 * (n - 1) * latency_s
    return np.where(ranks <= 1, 0.0, time)


def tp_ring_steps(recompute: np.ndarray, sequence_parallel: bool | np.ndarray) -> np.ndarray:
    """Reduce-scatter or all-gather steps per layer and microbatch (an all-reduce is two).

    Forward 4 (two all-reduces, or two all-gathers and two reduce-scatters); backward 4
    without sequence parallelism, 6 with it (the input all-gathers repeated for the
    weight gradients); full recomputation repeats the forward 4.
    """
    backward = np.where(sequence_parallel, 6.0, 4.0)
    return 4.0 + backward + np.where(recompute == RECOMPUTE_FULL, 4.0, 0.0)


@dataclass(frozen=True)
class LayerTimes:
    """One layer's times for one microbatch on one GPU, s (arrays over candidates)."""

    compute_s: np.ndarray  # forward + backward + recomputation
    forward_s: np.ndarray  # the forward part (the window that can hide a parameter all-gather)
    backward_s: np.ndarray  # the backward part (the window that can hide the DP reduction)
    tp_comm_s: np.ndarray  # exposed tensor-parallel communication
    tp_bytes: tuple[np.ndarray, np.ndarray]  # bytes this GPU sends for it, (within its node, across nodes)
    attention_s: np.ndarray  # the forward attention core (QK^T, AV and, unfused, softmax and dropout)


def layer_times(
    shape: ops.Shape,
    work: ops.LayerOps,
    b: np.ndarray,
    t: np.ndarray,
    recompute: np.ndarray,
    sequence_parallel: bool | np.ndarray,
    peak_flops: tuple[np.ndarray, np.ndarray],
    efficiency: float | np.ndarray,
    hbm: np.ndarray,
    tp_link: Link,
    overlap_tp: float | np.ndarray,
    fused_attention: bool = False,
    clock_ratio: float | np.ndarray = 1.0,
) -> LayerTimes:
    """Forward, backward and recomputation of one layer, and its tensor-parallel exchange.

    ``work`` is the layer's operators (:func:`mcsim.model.operators.layer_ops` of ``b`` and ``t``);
    ``peak_flops`` is (the linear layers' peak, the attention products' peak): FP8, where
    asked, runs the linear layers only (as Transformer Engine does); QK^T and AV stay BF16.
    """
    linear_peak, attention_peak = peak_flops
    # DVFS: matrix operators are compute-bound and slow down as f_max / f; memory-bound ones do not.
    gemm = [
        gemm_seconds(f, attention_peak if k in ops.SCORE_GEMMS else linear_peak, efficiency) * clock_ratio
        for k, f in enumerate(work.gemm_flops)
    ]
    attention_core = gemm[ops.SCORE_GEMMS[0]] + gemm[ops.SCORE_GEMMS[1]]
    if fused_attention:  # no s^2 tensor in memory; backward recomputes QK^T: 5 products, not 4
        memory = memory_seconds(work.memory_bytes - work.score_bytes, hbm, MEMORY_KERNELS_PER_LAYER - 1)
        forward = sum(gemm) + memory
        backward = 2.0 * forward + 0.5 * attention_core
        attention = attention_core
        scores = np.zeros_like(forward)  # already recomputed by the kernel
    else:
        forward = sum(gemm) + memory_seconds(work.memory_bytes, hbm, MEMORY_KERNELS_PER_LAYER)
        backward = 2.0 * forward
        attention = attention_core + memory_seconds(work.score_bytes, hbm, 2.0)
        scores = attention  # what selective recomputation repeats: the attention core
    recomputed = np.select([recompute == RECOMPUTE_FULL, recompute == RECOMPUTE_SELECTIVE], [forward, scores], 0.0)
    message = np.asarray(b, dtype=np.float64) * shape.seq_len * shape.hidden * ops.ELEMENT_BYTES
    steps = tp_ring_steps(recompute, sequence_parallel)
    tp_comm = steps * ring_step_seconds(t, message, tp_link) * (1.0 - overlap_tp)
    tp_intra, tp_inter = ring_step_bytes(t, message, tp_link)
    tp_bytes = (steps * tp_intra, steps * tp_inter)
    return LayerTimes(forward + backward + recomputed, forward, backward, tp_comm, tp_bytes, attention)


@dataclass(frozen=True)
class StepTimes:
    """An iteration of the step models, split as :class:`mcsim.model.workload.WorkloadArrays` splits it (s, bytes)."""

    t_comp_s: np.ndarray  # operators: m x the slowest GPU's compute per microbatch, plus the optimizer step
    bubble_s: np.ndarray  # operators: the other stages' fill and drain, (sum - max) / v
    tp_comm_s: np.ndarray  # operators: m x the slowest GPU's exposed tensor-parallel time
    pp_comm_s: np.ndarray  # operators: m x the slowest GPU's exposed pipeline transfers
    dp_comm_s: np.ndarray  # exposed gradient reduction
    model_flops: np.ndarray  # per iteration, forward and backward, no recomputation
    hardware_flops: np.ndarray  # per iteration, with recomputation
    intra_bytes_per_gpu: np.ndarray  # sent per iteration by one GPU within its node
    inter_bytes_per_gpu: np.ndarray  # ... across nodes


@dataclass(frozen=True)
class GpuRates:
    """A candidate GPU's rates as the operator model uses them (arrays over candidates)."""

    peak_flops: np.ndarray  # FLOP/s
    linear_peak_flops: np.ndarray  # of QKV, projection and MLP: FP8's under compute.fp8 where the GPU has it
    hbm_bytes_per_s: np.ndarray
    clock_ratio: np.ndarray  # DVFS: f_max / f, the matrix operators' time multiplier at the chosen clock


def gpu_rates(cfg: Config, lay: Layouts) -> GpuRates:
    """The :class:`GpuRates` of the candidates' GPUs at their clocks."""
    peak_flops = lay.peak_tflops * 1e12
    # FP8, where asked and the GPU has it, runs the linear layers' matrix operators (§2b).
    linear_peak = np.where(lay.fp8_tflops > 0, lay.fp8_tflops * 1e12, peak_flops) if cfg.compute.fp8 else peak_flops
    return GpuRates(peak_flops, linear_peak, lay.hbm_gbps * 1e9, lay.freq_max_mhz / lay.freq_mhz)


@dataclass(frozen=True)
class Links:
    """The links of a layout's tensor-, context-, pipeline- and data-parallel groups."""

    tp: Link
    cp: Link
    pp: Link
    dp: Link


def _links(cfg: Config, deg: ParallelDegrees) -> Links:
    """Tensor-, context-, pipeline- and data-parallel links (bus bandwidth after the collective efficiency)."""
    net = cfg.network
    latency_s = net.latency_us * 1e-6
    intra = net.intra_gbps * 1e9 * net.intra_bus_efficiency
    inter = net.inter_gbps * 1e9 * net.inter_bus_efficiency
    # Megatron's rank order (tp, cp, dp, pp): a group sits within a node while the ranks it
    # spans fit in one; pipeline neighbours are t cp d ranks apart, so only a job of one node
    # keeps its pipeline inside.
    t, c, d, gpn = deg.tp, deg.cp, deg.dp, cfg.hardware.gpus_per_node

    def flat(span: np.ndarray) -> Link:
        return Link(np.where(span <= gpn, intra, inter), latency_s, span <= gpn)

    def nccl(span: np.ndarray, stride: np.ndarray) -> Link:
        return dataclasses.replace(flat(span), local_ranks=np.maximum(gpn // stride, 1), local_bus_bytes_per_s=intra)

    # Tensor- and data-parallel collectives are NCCL's rings through every local GPU once the
    # group leaves a node, with as many members per node as fit at the group's stride: 1 for
    # TP; t for the gradients' group, the d x cp ranks that hold the same weights (in the
    # order tp, cp, dp they are t apart). Ring attention and pipeline transfers are flat.
    return Links(tp=nccl(t, np.ones_like(t)), cp=flat(t * c), pp=flat(t * c * deg.pp * d), dp=nccl(t * c * d, t))


def context_parallel_exposed(
    shape: ops.Shape, b: np.ndarray, t: np.ndarray, cp: np.ndarray, layer: LayerTimes, recompute: np.ndarray, link: Link
) -> tuple[np.ndarray, np.ndarray]:
    """Exposed ring attention of one layer and microbatch, s, and the bytes this GPU sends.

    Context parallelism (Megatron-Core; Liu et al., Ring Attention, arXiv 2310.01889):
    each GPU holds s/cp queries and passes its keys and values around the ring, 2 b s
    (h kv/a)/t elements of the whole sequence in (cp-1)/cp shares, overlapped with the
    attention blocks: forward one pass behind the forward attention core, backward the
    keys and values again and their gradients behind twice that; full recomputation
    repeats the forward pass.
    """
    kv_bytes = 2.0 * np.asarray(b, dtype=np.float64) * shape.seq_len * shape.hidden * shape.kv_heads / shape.heads
    step = ring_step_seconds(cp, kv_bytes * ops.ELEMENT_BYTES / t, link)
    forward = np.maximum(step - layer.attention_s, 0.0)
    backward = np.maximum(2.0 * step - 2.0 * layer.attention_s, 0.0)
    passes = np.where(recompute == RECOMPUTE_FULL, 2.0, 1.0)
    sent = np.where(cp > 1, (passes + 2.0) * (cp - 1.0) / cp * kv_bytes * ops.ELEMENT_BYTES / t, 0.0)
    return passes * forward + backward, sent


def operator_step(
    cfg: Config, lay: Layouts, deg: ParallelDegrees, work: ops.LayoutWork, moe: moe_model.MoeWork | None = None
) -> StepTimes:
    """The operator model's iteration for every candidate of ``lay`` (scenario constants from ``cfg``).

    ``work`` is what the candidates' GPUs compute (:func:`mcsim.model.operators.layout_work`), ``moe``
    what their MoE layers compute (:func:`mcsim.model.experts.moe_work`; None: a dense model).
    An absurd input (an efficiency near 0) makes times infinite; where that gives inf - inf
    or 0 x inf the time is infinite too (as in the aggregate model), never NaN.
    """
    rates = gpu_rates(cfg, lay)
    with np.errstate(invalid="ignore", over="ignore"):
        step = _operator_step(cfg, lay, deg, rates, work, moe)
    times = ("t_comp_s", "bubble_s", "tp_comm_s", "pp_comm_s", "dp_comm_s")
    return dataclasses.replace(
        step, **{name: np.where(np.isnan(getattr(step, name)), np.inf, getattr(step, name)) for name in times}
    )


def _operator_step(
    cfg: Config,
    lay: Layouts,
    deg: ParallelDegrees,
    rates: GpuRates,
    work: ops.LayoutWork,
    moe: moe_model.MoeWork | None,
) -> StepTimes:
    mdl, m = cfg.model, deg.microbatches
    links = _links(cfg, deg)
    microbatch = _microbatch_times(cfg, lay, deg, rates, work, links)
    if moe is None:
        pipeline = _pipeline(mdl.layers, deg, work.stages, microbatch)
        layer_comm = m * pipeline.slowest_layers * microbatch.layer_comm_s
    else:
        microbatch = _with_moe_layer(cfg, lay, deg, rates, work, links, moe, microbatch)
        pipeline = _moe_pipeline(mdl.layers, moe.moe_layers, deg, work.stages, moe.stages, microbatch)
        layer_comm = m * pipeline.comm_s
    optimizer, dp_exposed, grad_bytes = _data_parallel(cfg, lay, deg, rates, work, pipeline, links, moe)
    intra_bytes, inter_bytes = _traffic(cfg, lay, deg, microbatch, grad_bytes, links, moe)
    model_flops = np.full(deg.tp.shape, mdl.global_batch * work.model_flops_per_sequence)
    return StepTimes(
        t_comp_s=m * pipeline.compute_s + optimizer,
        bubble_s=pipeline.fill_s,
        tp_comm_s=layer_comm,
        pp_comm_s=m * microbatch.pp_comm_s,
        dp_comm_s=dp_exposed,
        model_flops=model_flops,
        hardware_flops=model_flops + mdl.global_batch * work.recompute_flops_per_sequence,
        intra_bytes_per_gpu=intra_bytes,
        inter_bytes_per_gpu=inter_bytes,
    )


@dataclass(frozen=True)
class _MicrobatchTimes:
    """One microbatch's times on the pipeline's GPUs, s, and what it sends (arrays over candidates)."""

    layer: LayerTimes
    layer_comm_s: np.ndarray  # exposed tensor- and context-parallel time of one layer
    embedding_s: np.ndarray  # the embedding, forward and backward (first GPU)
    logits_s: np.ndarray  # final norm, output layer and loss, forward and backward (last GPU)
    pp_comm_s: np.ndarray  # exposed pipeline transfers of one GPU
    transfer_bytes: np.ndarray  # one pipeline transfer
    cp_bytes: np.ndarray  # ring attention one GPU sends for one layer
    moe_layer: LayerTimes | None = None  # a MoE layer (None: a dense model)
    moe_comm_s: np.ndarray | float = 0.0  # its exposed tensor-, context- and expert-parallel time, host waits
    all_to_all_bytes: tuple[np.ndarray, np.ndarray] | None = None  # a MoE layer's, (within the node, across)


def _microbatch_times(
    cfg: Config, lay: Layouts, deg: ParallelDegrees, rates: GpuRates, work: ops.LayoutWork, links: Links
) -> _MicrobatchTimes:
    """Layer, embedding, output layer and pipeline transfer times of one microbatch."""
    par, shape, b, t = cfg.parallelism, work.shape, work.sequences, deg.tp
    eff, hbm, ratio = cfg.compute.efficiency, rates.hbm_bytes_per_s, rates.clock_ratio
    peaks, fused = (rates.linear_peak_flops, rates.peak_flops), bool(cfg.compute.fused_attention)
    sp = lay.sequence_parallel
    layer = layer_times(
        shape, work.layer, b, t, lay.recompute, sp, peaks, eff, hbm, links.tp, par.overlap_tp, fused, ratio
    )
    # Embedding on the first GPU; final norm, output layer and loss on the last (3x: forward, backward).
    embedding = np.where(shape.vocab > 0, 3.0 * memory_seconds(work.embedding_bytes, hbm), 0.0)
    logits_fwd = gemm_seconds(work.logits_flops, rates.peak_flops, eff) * ratio
    logits_fwd = logits_fwd + memory_seconds(work.logits_bytes, hbm, 2.0)
    logits = np.where(shape.vocab > 0, 3.0 * logits_fwd, 0.0)
    transfer = np.asarray(b, dtype=np.float64) * shape.seq_len * shape.hidden * ops.ELEMENT_BYTES / t
    hop = transfer / links.pp.bus_bytes_per_s + links.pp.latency_s
    pp_per_mb = np.where(deg.pp > 1, 2.0 * deg.interleave * hop * (1.0 - par.overlap_pp), 0.0)
    cp_comm, cp_bytes = context_parallel_exposed(shape, deg.microbatch, t, deg.cp, layer, lay.recompute, links.cp)
    return _MicrobatchTimes(layer, layer.tp_comm_s + cp_comm, embedding, logits, pp_per_mb, transfer, cp_bytes)


def _with_moe_layer(
    cfg: Config,
    lay: Layouts,
    deg: ParallelDegrees,
    rates: GpuRates,
    work: ops.LayoutWork,
    links: Links,
    moe: moe_model.MoeWork,
    mb: _MicrobatchTimes,
) -> _MicrobatchTimes:
    """``mb`` with a MoE layer's times (docs/model.md, "Mixture of experts"): attention, router, shared
    experts and memory-bound kernels as a dense layer's; the routed experts on the busiest rank, forward,
    twice that backward, once more under full recomputation; the exposed all-to-alls; without a grouped
    expert GEMM, the time the GPU waits for the host to launch the expert loop's kernels (counted with
    the exposed time, as waiting: :func:`mcsim.model.experts.launch_wait_s`)."""
    par, net, eff, ratio = cfg.parallelism, cfg.network, cfg.compute.efficiency, rates.clock_ratio
    peaks, fused, sp = (
        (rates.linear_peak_flops, rates.peak_flops),
        bool(cfg.compute.fused_attention),
        lay.sequence_parallel,
    )
    b, t, hbm = work.sequences, deg.tp, rates.hbm_bytes_per_s
    layer = layer_times(
        work.shape, moe.layer, b, t, lay.recompute, sp, peaks, eff, hbm, links.tp, par.overlap_tp, fused, ratio
    )
    routed = moe_model.routed_forward_s(moe, rates.linear_peak_flops, eff, ratio)
    again = np.where(lay.recompute == RECOMPUTE_FULL, routed, 0.0)
    layer = dataclasses.replace(
        layer,
        compute_s=layer.compute_s + 3.0 * routed + again,
        forward_s=layer.forward_s + routed,
        backward_s=layer.backward_s + 2.0 * routed,
    )
    intra = net.intra_gbps * 1e9 * net.intra_bus_efficiency
    inter = net.inter_gbps * 1e9 * net.inter_bus_efficiency
    link, local = moe_model.expert_link(intra, inter, net.latency_us * 1e-6, deg, cfg.hardware.gpus_per_node)
    seconds, intra_bytes, inter_bytes = moe_model.all_to_all(moe, deg, link, local)
    count = moe_model.all_to_alls(lay.recompute)
    exposed = count * seconds * (1.0 - par.overlap_ep)
    cp_comm = mb.layer_comm_s - mb.layer.tp_comm_s  # the same attention: the same ring
    if not cfg.compute.grouped_expert_gemm:  # a loop of expert GEMMs: the GPU may wait for the host's launches
        exposed = exposed + moe_model.launch_wait_s(moe, routed, lay.recompute, cfg.compute.kernel_launch_us * 1e-6)
    return dataclasses.replace(
        mb,
        moe_layer=layer,
        moe_comm_s=layer.tp_comm_s + cp_comm + exposed,
        all_to_all_bytes=(count * intra_bytes, count * inter_bytes),
    )


@dataclass(frozen=True)
class _Pipeline:
    """The pipeline paced by its slowest GPU (arrays over candidates)."""

    slowest_layers: np.ndarray  # layers on the slowest GPU
    compute_s: np.ndarray  # the slowest GPU's compute per microbatch
    fill_s: np.ndarray  # the other GPUs' fill and drain per iteration, (sum - max) / v
    windows: tuple[np.ndarray, np.ndarray]  # the slowest GPU's (forward, backward) of one microbatch
    comm_s: np.ndarray | float = 0.0  # a mixture of experts: the slowest GPU's exposed layer time per microbatch


def _pipeline(layers: int, deg: ParallelDegrees, stages: StageLayers, mb: _MicrobatchTimes) -> _Pipeline:
    """The slowest of the first, the last and the fullest other GPU, and the others' fill and drain."""
    p, layer, embedding, logits = deg.pp, mb.layer, mb.embedding_s, mb.logits_s
    per_layer = layer.compute_s + mb.layer_comm_s
    one_stage = p == 1
    first = stages.first * per_layer + embedding + np.where(one_stage, logits, 0.0)
    last = stages.last * per_layer + np.where(one_stage, 0.0, logits)
    middle = stages.middle * per_layer
    per_gpu = np.stack([first, last, middle]) + mb.pp_comm_s
    slowest = np.argmax(per_gpu, axis=0)
    t_max = np.take_along_axis(per_gpu, slowest[None], axis=0)[0]
    n_slowest = np.choose(slowest, [stages.first, stages.last, stages.middle])
    extra_compute = np.choose(
        slowest, [embedding + np.where(one_stage, logits, 0.0), np.where(one_stage, 0.0, logits), 0.0]
    )
    total = layers * per_layer + embedding + logits + p * mb.pp_comm_s
    windows = (n_slowest * layer.forward_s, n_slowest * layer.backward_s)
    return _Pipeline(n_slowest, n_slowest * layer.compute_s + extra_compute, (total - t_max) / deg.interleave, windows)


def _moe_pipeline(
    layers: int,
    moe_layers: int,
    deg: ParallelDegrees,
    stages: StageLayers,
    moe: moe_model.ExpertStages,
    mb: _MicrobatchTimes,
) -> _Pipeline:
    """:func:`_pipeline` with dense and MoE layers: the slowest of the first, the last, the fullest other GPU
    and the other GPU with the most MoE layers."""
    p, dense, layer, embedding, logits = deg.pp, mb.layer, mb.moe_layer, mb.embedding_s, mb.logits_s
    assert layer is not None
    one_stage = p == 1
    ends = (embedding + np.where(one_stage, logits, 0.0), np.where(one_stage, 0.0, logits), 0.0, 0.0)
    counts = (
        (stages.first, moe.first),
        (stages.last, moe.last),
        (stages.middle, moe.middle),
        (moe.busiest_layers, moe.busiest_moe),
    )

    def of(n: ArrayLike, moe_n: ArrayLike, dense_x: ArrayLike, moe_x: ArrayLike) -> np.ndarray:
        n, moe_n = np.asarray(n, dtype=np.float64), np.asarray(moe_n, dtype=np.float64)
        return (n - moe_n) * np.asarray(dense_x) + moe_n * np.asarray(moe_x)

    per_dense, per_moe = dense.compute_s + mb.layer_comm_s, layer.compute_s + mb.moe_comm_s
    per_gpu = np.stack([of(n, k, per_dense, per_moe) + end for (n, k), end in zip(counts, ends, strict=True)])
    per_gpu = per_gpu + mb.pp_comm_s
    slowest = np.argmax(per_gpu, axis=0)
    t_max = np.take_along_axis(per_gpu, slowest[None], axis=0)[0]
    n, k = (np.choose(slowest, [c[i] for c in counts]) for i in (0, 1))
    extra = np.choose(slowest, [np.broadcast_to(e, t_max.shape) for e in ends])
    total = of(np.float64(layers), np.float64(moe_layers), per_dense, per_moe) + embedding + logits + p * mb.pp_comm_s
    windows = (of(n, k, dense.forward_s, layer.forward_s), of(n, k, dense.backward_s, layer.backward_s))
    return _Pipeline(
        n,
        of(n, k, dense.compute_s, layer.compute_s) + extra,
        (total - t_max) / deg.interleave,
        windows,
        of(n, k, mb.layer_comm_s, mb.moe_comm_s),
    )


def _data_parallel(
    cfg: Config,
    lay: Layouts,
    deg: ParallelDegrees,
    rates: GpuRates,
    work: ops.LayoutWork,
    pipeline: _Pipeline,
    links: Links,
    moe: moe_model.MoeWork | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The optimizer step and the exposed data-parallel traffic per iteration, s, and the gradient bytes.

    A mixture of experts: the routed experts' parameters (R / (p ep expert_tp) per GPU) are reduced and
    sharded over the edp ranks that hold the same experts, the rest ((N - R) / (t p)) over dp x cp.
    """
    mdl, shape, t, p = cfg.model, work.shape, deg.tp, deg.pp
    routed = 0.0 if moe is None else parameter_counts(mdl).routed
    params_per_gpu = mdl.params / (t * p) if moe is None else (mdl.params - routed) / (t * p)
    d = deg.dp * deg.cp  # context-parallel ranks hold the same weights: they reduce and shard with the DP ones
    zero = lay.zero_stage
    updated = params_per_gpu / np.where(zero >= 1, d, 1)  # each rank updates its shard
    grad_bytes = ops.ELEMENT_BYTES * params_per_gpu
    dp_step = ring_step_seconds(d, grad_bytes, links.dp)
    if moe is not None:
        experts_per_gpu = routed / (p * deg.ep * deg.expert_tp)
        updated = updated + experts_per_gpu / np.where(zero >= 1, deg.edp, 1)
        dp_step = dp_step + ring_step_seconds(
            deg.edp, ops.ELEMENT_BYTES * experts_per_gpu, _expert_dp_link(cfg, deg, links)
        )
    optimizer = memory_seconds(ops.OPTIMIZER_BYTES_PER_PARAM * updated, rates.hbm_bytes_per_s)
    dp_exposed = data_parallel_exposed(zero, dp_step, deg.microbatches, pipeline.windows, cfg.parallelism.overlap_dp)
    # Tied embeddings on a pipeline: the first and last stage all-reduce the shared matrix's
    # gradient (V h / t parameters) after the backward pass (Shoeybi et al. 2019; Megatron's
    # embedding group), exposed, on the pipeline link between them.
    tied = bool(mdl.tied_embeddings) and shape.vocab > 0
    embedding_grad = ops.ELEMENT_BYTES * shape.vocab * shape.hidden / t
    dp_exposed = dp_exposed + np.where(
        tied & (p > 1), 2.0 * ring_step_seconds(np.full(t.shape, 2), embedding_grad, links.pp), 0.0
    )
    return optimizer, dp_exposed, grad_bytes


def _expert_dp_link(cfg: Config, deg: ParallelDegrees, links: Links) -> Link:
    """The link of the edp ranks that hold the same experts: ``expert_tp x ep`` apart in the t cp d ranks."""
    stride = deg.expert_tp * deg.ep
    return dataclasses.replace(links.dp, local_ranks=np.maximum(cfg.hardware.gpus_per_node // stride, 1))


def _traffic(
    cfg: Config,
    lay: Layouts,
    deg: ParallelDegrees,
    mb: _MicrobatchTimes,
    grad_bytes: np.ndarray,
    links: Links,
    moe: moe_model.MoeWork | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes one GPU sends per iteration, (within its node, across nodes)."""
    p, v, m, zero = deg.pp, deg.interleave, deg.microbatches, lay.zero_stage
    dp_steps = np.array([2.0, 2.0, 1.0, 0.0])[zero] + np.array([0.0, 0.0, 1.0, 3.0])[zero] * m
    dp_intra, dp_inter = ring_step_bytes(deg.dp * deg.cp, dp_steps * grad_bytes, links.dp)
    layer_microbatches = (cfg.model.layers / p) * m
    intra_bytes = dp_intra + layer_microbatches * mb.layer.tp_bytes[0]
    inter_bytes = dp_inter + layer_microbatches * mb.layer.tp_bytes[1]
    if moe is not None and mb.all_to_all_bytes is not None:
        experts_per_gpu = parameter_counts(cfg.model).routed / (p * deg.ep * deg.expert_tp)
        ep_intra, ep_inter = ring_step_bytes(
            deg.edp, dp_steps * ops.ELEMENT_BYTES * experts_per_gpu, _expert_dp_link(cfg, deg, links)
        )
        moe_microbatches = (moe.moe_layers / p) * m
        intra_bytes = intra_bytes + ep_intra + moe_microbatches * mb.all_to_all_bytes[0]
        inter_bytes = inter_bytes + ep_inter + moe_microbatches * mb.all_to_all_bytes[1]
    point_to_point = (
        (links.cp, layer_microbatches * mb.cp_bytes),
        (links.pp, np.where(p > 1, 2.0 * m * v * mb.transfer_bytes, 0.0)),
    )
    for link, nbytes in point_to_point:
        intra_bytes = intra_bytes + np.where(link.inside, nbytes, 0.0)
        inter_bytes = inter_bytes + np.where(link.inside, 0.0, nbytes)
    return intra_bytes, inter_bytes


def aggregate_step(cfg: Config, lay: Layouts, deg: ParallelDegrees) -> StepTimes:
    """§2's iteration (one efficiency for every FLOP) over candidates, split as the operator model splits it."""
    mdl, net = cfg.model, cfg.network
    N, L, h, s, B = mdl.params, mdl.layers, mdl.hidden, mdl.seq_len, mdl.global_batch
    G, t, p, b, v, c, d, m = deg.gpus, deg.tp, deg.pp, deg.microbatch, deg.interleave, deg.cp, deg.dp, deg.microbatches
    peak_flops = lay.peak_tflops * 1e12
    model_flops = np.full(G.shape, 6.0 * active_parameters(mdl) * B * s)  # 6 N_active B s (DeepSeek-V3)
    hardware_flops = np.select(
        [lay.recompute == RECOMPUTE_FULL, lay.recompute == RECOMPUTE_SELECTIVE],
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
    act_bytes = b.astype(np.float64) * (s / c) * h * ops.ELEMENT_BYTES  # this GPU's s/cp tokens
    # TP spans nodes when tp > gpus_per_node: it then runs on the inter-node link.
    tp_inside = t <= cfg.hardware.gpus_per_node
    tp_bw = np.where(tp_inside, net.intra_gbps, net.inter_gbps)
    tp_comm = (L / p) * m * 4 * ring_allreduce_s(t, act_bytes, tp_bw, latency_s) * (1 - cfg.parallelism.overlap_tp)
    pp_comm = np.where(p > 1, 2.0 * m * v * (act_bytes / (net.inter_gbps * 1e9) + latency_s), 0.0)
    grad_bytes = ops.ELEMENT_BYTES * N / (t * p)
    # Gradients are reduced over the data- and context-parallel ranks (both hold the same weights).
    dp_comm = ring_allreduce_s(d * c, grad_bytes, net.inter_gbps, latency_s) * (1 - cfg.parallelism.overlap_dp)
    # Bytes each GPU sends per iteration (a ring all-reduce sends 2(n-1)/n of the buffer).
    tp_bytes = (L / p) * m * 4 * np.where(t > 1, 2.0 * (t - 1) / t * act_bytes, 0.0)
    pp_bytes = np.where(p > 1, 2.0 * m * v * act_bytes, 0.0)
    dp_bytes = np.where(d * c > 1, 2.0 * (d * c - 1) / (d * c) * grad_bytes, 0.0)
    intra_bytes = np.where(tp_inside, tp_bytes, 0.0)
    inter_bytes = pp_bytes + dp_bytes + np.where(tp_inside, 0.0, tp_bytes)
    return StepTimes(t_comp, bubble, tp_comm, pp_comm, dp_comm, model_flops, hardware_flops, intra_bytes, inter_bytes)
