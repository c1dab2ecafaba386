"""The mixture-of-experts layer (docs/model.md, "Mixture of experts"), in array form.

A MoE layer is attention (as in a dense layer), a router, ``shared_experts`` always-active experts
and ``experts`` routed experts of which each token goes to ``experts_per_token`` (k). This module
counts what the operator step model needs of it, per microbatch and GPU, forward pass: the
layer without its routed experts as a :class:`~mcsim.model.operators.LayerOps` (timed as a dense
layer is), the routed experts as ``E / ep`` GEMMs of one expert's size on the busiest rank, the
token dispatch and combine (all-to-alls over the expert-parallel group), the kernels a software
that loops over its local experts launches for them (their host time can exceed the GPU's), which
layers of each pipeline GPU are MoE layers, and the model FLOPs counted on the active parameters.

Sources:

- Megatron-Core MoE (NVIDIA, megatron/core/transformer/moe/README.md): expert parallelism inside the
  data-parallel ranks of a stage, expert tensor parallelism, the all-to-all token dispatcher
  (dispatch and combine, forward and backward), ``--moe-layer-freq``; its FLOP count
  (``num_floating_point_operations``) counts the routed experts k times per token, the shared ones
  and the router.
- DeepSeek-V3 (arXiv 2412.19437): shared and routed experts, first dense layers, 6 N_active D.
- DeepSpeed-MoE (microsoft/DeepSpeed, deepspeed/moe/experts.py, ``Experts.forward``), which
  Megatron-DeepSpeed runs: the dispatched tokens chunked over the local experts (``chunk``, views), a
  Python loop calling each expert's MLP on its chunk, the outputs joined by one ``torch.cat``; the
  expert MLP is Megatron-DeepSpeed's ``ParallelMLP`` (megatron/model/transformer.py): a GEMM to the
  (gated: doubled) width, the activation (SwiGLU: ``torch.chunk``, ``F.silu(x[0]) * x[1]``; else the
  fused bias-GELU), a GEMM back.
- Holistic Trace Analysis (facebookresearch/HolisticTraceAnalysis,
  docs/source/features/cuda_kernel_launch_stats.rst): "Usually, the launch time on the CPU side is
  between 5-20 microseconds" (``compute.kernel_launch_us``, mcsim/scenario/software.py).
- Wang et al., "Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts" (arXiv
  2408.15664), Table 2: the routed load's imbalance, MaxVio = max load / mean load - 1, over the
  validation set: auxiliary loss 0.72 (1B model) and 0.52 (3B), loss-free 0.04 and 0.04.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mcsim.model import operators as ops
from mcsim.model.device_rates import Link, gemm_seconds
from mcsim.model.layouts import RECOMPUTE_FULL, Layouts, ParallelDegrees
from mcsim.model.pipeline_stages import stage_layers
from mcsim.scenario.consistency import is_moe_layer, parameter_counts
from mcsim.scenario.schema import ModelSection

# The busiest expert's load over the mean, 1 + MaxVio_global, by model.router_balancing: Wang et al.
# 2024 (arXiv 2408.15664) Table 2, the mean of its 1B and 3B models (auxiliary loss: 0.72 and 0.52;
# loss-free: 0.04 and 0.04). Per training batch the imbalance is larger (their Figure 3, MaxVio_batch,
# not tabulated): these are lower ends.
EXPERT_IMBALANCE_DEFAULTS = {"aux-loss": 1.0 + (0.72 + 0.52) / 2.0, "loss-free": 1.04}
# Memory-bound kernels of a MoE layer: a dense layer's six and the permutation and unpermutation.
MOE_MEMORY_KERNELS = 8
# All-to-alls per MoE layer and microbatch: dispatch and combine forward, their gradients backward;
# full recomputation repeats the forward pair.
ALL_TO_ALLS = 4.0
# Kernels a software without a grouped expert GEMM (DeepSpeed-MoE's Experts.forward, see the sources)
# launches for the routed experts of one MoE layer and microbatch, per local expert, by (gated MLP):
# forward: the two GEMMs (the gated first matrix is one GEMM of width 2F, Megatron-DeepSpeed's
# dense_h_to_4h) and the activation, SwiGLU's SiLU and product (2; chunk is a view) or the fused
# bias-GELU (1); backward: a data- and a weight-gradient GEMM for each matrix (4) and the activation's
# backward, SwiGLU's product's two operand gradients, SiLU's backward and its chunk's gradient joined (4)
# or the fused GELU's (1). Per layer once more: the torch.cat of the experts' outputs (forward) and the
# gradient of their chunked input joined (backward). A lower bound: no bias-gradient reductions, no
# gradient accumulation kernels, no Python time between launches.
EXPERT_FORWARD_KERNELS = {True: 2.0 + 2.0, False: 2.0 + 1.0}
EXPERT_BACKWARD_KERNELS = {True: 4.0 + 4.0, False: 4.0 + 1.0}
LOOP_KERNELS_PER_LAYER = 1.0


def expert_imbalance(mdl: ModelSection) -> float:
    """The pace-setting expert load over the mean per step: ``model.expert_imbalance`` (its sourced
    default per ``router_balancing`` when 0, at most ``E / k``: an expert gets each token at most once),
    capped by the capacity factor where tokens are dropped."""
    most = mdl.experts / mdl.experts_per_token if mdl.experts_per_token else 1.0
    imbalance = mdl.expert_imbalance or min(EXPERT_IMBALANCE_DEFAULTS[mdl.router_balancing], most)
    return min(imbalance, mdl.expert_capacity_factor) if mdl.expert_capacity_factor > 0 else imbalance


def rank_imbalance(mdl: ModelSection, ep: np.ndarray) -> np.ndarray:
    """The busiest expert-parallel rank's routed tokens over the mean rank's (arrays over ``ep``).

    The busiest expert carries f times the mean load (:func:`expert_imbalance`), the other E - 1
    share the rest evenly; a rank holds n = E / ep experts, one of them the busiest:
    ``(f + (n - 1)(E - f)/(E - 1)) / n``: f with one expert per rank, 1 with every expert on each
    rank (ep = 1: each GPU routes its own tokens through all experts).
    """
    experts, f = float(mdl.experts), expert_imbalance(mdl)
    n = experts / np.asarray(ep, dtype=np.float64)
    if experts <= 1.0:
        return np.ones_like(n)
    return (f + (n - 1.0) * (experts - f) / (experts - 1.0)) / n


@dataclass(frozen=True)
class ExpertStages:
    """MoE layers on the pipeline GPUs of :class:`~mcsim.model.pipeline_stages.StageLayers` (arrays).

    ``middle`` is the MoE layers of its fullest other GPU; ``busiest_*`` the other GPU with the most
    MoE layers (ties: the most layers), which may set the pace instead.
    """

    first: np.ndarray
    last: np.ndarray
    middle: np.ndarray
    busiest_layers: np.ndarray
    busiest_moe: np.ndarray


def gpu_layer_kinds(mdl: ModelSection, stages: int, interleave: int) -> list[tuple[int, int]]:
    """(layers, MoE layers) of each of ``stages`` pipeline GPUs, chunk k of ``stages x interleave`` on
    GPU ``k mod stages`` (:func:`mcsim.model.pipeline_stages.gpu_layer_counts`' placement)."""
    counts = [[0, 0] for _ in range(stages)]
    start = 0
    for k, size in enumerate(stage_layers(mdl.layers, stages * interleave)):
        counts[k % stages][0] += size
        counts[k % stages][1] += sum(is_moe_layer(i, mdl) for i in range(start, start + size))
        start += size
    return [(n, moe) for n, moe in counts]


def expert_stages_of(mdl: ModelSection, pp: np.ndarray, interleave: np.ndarray) -> ExpertStages:
    """:class:`ExpertStages` per candidate (computed once per distinct ``(p, v)``)."""
    fields = [np.zeros(pp.shape, dtype=np.float64) for _ in range(5)]
    keys, inverse = np.unique(np.asarray(pp, dtype=np.int64) * 4096 + interleave, return_inverse=True)
    inverse = inverse.reshape(-1)
    for k, key in enumerate(keys):
        p, v = divmod(int(key), 4096)  # interleave <= 1024 (the schema's bound)
        kinds = gpu_layer_kinds(mdl, max(min(p, mdl.layers), 1), max(min(v, mdl.layers), 1))
        others = kinds[1:-1] or [(0, 0)]
        fullest = max(others)  # most layers, then most MoE layers
        busiest = max(others, key=lambda c: (c[1], c[0]))
        chosen = inverse == k
        for field, value in zip(fields, (kinds[0][1], kinds[-1][1], fullest[1], *busiest), strict=True):
            field[chosen] = value
    return ExpertStages(*fields)


@dataclass(frozen=True)
class MoeWork:
    """A MoE layer's forward work for one microbatch on one GPU, and where the MoE layers sit (arrays)."""

    layer: ops.LayerOps  # attention, router, shared experts and every memory-bound kernel
    routed_flops: tuple[np.ndarray, np.ndarray]  # the routed experts' two matrices on the busiest rank
    local_experts: np.ndarray  # E / ep: the GEMMs each matrix runs as
    all_to_all_bytes: np.ndarray  # one dispatch (or combine) of the busiest rank
    stages: ExpertStages
    tokens: np.ndarray  # T / t, the GPU's tokens entering the MoE layer
    moe_layers: int  # MoE layers of the model
    loop_kernels: tuple[np.ndarray, np.ndarray]  # (forward, backward) kernels of an expert loop, one microbatch


def moe_work(mdl: ModelSection, lay: Layouts, deg: ParallelDegrees, work: ops.LayoutWork) -> MoeWork:
    """The :class:`MoeWork` of candidate layouts of the mixture of experts ``mdl``.

    Tokens T = b s / cp per GPU, T / t of them entering the MoE layer on each GPU of a tensor-parallel
    group (Megatron-Core runs MoE with sequence parallelism). Router ``2 T h E / t``; shared experts
    a dense MLP of width ``S F``; routed experts ``T k rho / t`` tokens through the E / ep local
    experts (rho: :func:`rank_imbalance`), each GEMM of one expert's size; permutation and
    unpermutation ``(3k + 1) T h / t`` BF16 elements.
    """
    shape, h = work.shape, work.shape.hidden
    t = np.asarray(deg.tp, dtype=np.float64)
    tokens = np.asarray(work.sequences, dtype=np.float64) * shape.seq_len / t
    rho = rank_imbalance(mdl, deg.ep)
    gate = 2.0 if shape.gated_mlp else 1.0
    width, shared = float(mdl.expert_ffn_hidden), float(mdl.shared_experts) * float(mdl.expert_ffn_hidden)
    dense = work.layer
    attention = dense.gemm_flops[:4]
    router = 2.0 * tokens * h * mdl.experts
    shared_gemms = (2.0 * tokens * h * shared * gate, 2.0 * tokens * shared * h)
    routed_tokens = tokens * mdl.experts_per_token * rho
    routed = (2.0 * routed_tokens * h * width * gate, 2.0 * routed_tokens * width * h)
    dense_activation = (shape.ffn_hidden * (gate + 1.0)) * ops.ELEMENT_BYTES * tokens
    activation = (shared * tokens + width * routed_tokens) * (gate + 1.0) * ops.ELEMENT_BYTES
    permutation = (3.0 * mdl.experts_per_token + 1.0) * tokens * h * ops.ELEMENT_BYTES
    memory = dense.memory_bytes - dense_activation + activation + permutation
    layer = ops.LayerOps((*attention, router, *shared_gemms), memory, dense.score_bytes)
    return MoeWork(
        layer=layer,
        routed_flops=routed,
        local_experts=mdl.experts / np.asarray(deg.ep, dtype=np.float64),
        all_to_all_bytes=routed_tokens * h * ops.ELEMENT_BYTES,
        stages=expert_stages_of(mdl, deg.pp, deg.interleave),
        tokens=tokens,
        moe_layers=parameter_counts(mdl).moe_layers,
        loop_kernels=loop_kernels(mdl.experts / np.asarray(deg.ep, dtype=np.float64), shape.gated_mlp),
    )


def loop_kernels(local_experts: np.ndarray, gated: bool) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) kernels the routed experts of one MoE layer and microbatch launch when the
    software loops over its ``local_experts`` (E / ep): per expert :data:`EXPERT_FORWARD_KERNELS` and
    :data:`EXPERT_BACKWARD_KERNELS`, plus :data:`LOOP_KERNELS_PER_LAYER` each."""
    n = np.asarray(local_experts, dtype=np.float64)
    forward = n * EXPERT_FORWARD_KERNELS[gated] + LOOP_KERNELS_PER_LAYER
    return forward, n * EXPERT_BACKWARD_KERNELS[gated] + LOOP_KERNELS_PER_LAYER


def launch_wait_s(moe: MoeWork, routed_s: np.ndarray, recompute: np.ndarray, launch_s: float) -> np.ndarray:
    """Time the GPU waits for the host while the routed experts of one MoE layer and microbatch run as a
    loop of kernels, s (0 where the GPU is the slower).

    Kernels are launched asynchronously, so a sequence of them takes ``max(GPU time, kernels x
    launch_s)``: the wait is that minus the GPU time, forward (``routed_s``) and backward
    (``2 routed_s``); full recomputation repeats the forward's.
    """
    forward_kernels, backward_kernels = moe.loop_kernels
    forward = np.maximum(forward_kernels * launch_s - routed_s, 0.0)
    backward = np.maximum(backward_kernels * launch_s - 2.0 * routed_s, 0.0)
    return np.where(recompute == RECOMPUTE_FULL, 2.0, 1.0) * forward + backward


def routed_forward_s(
    moe: MoeWork, peak_flops: np.ndarray, efficiency: float | np.ndarray, clock_ratio: float | np.ndarray
) -> np.ndarray:
    """Forward time of the routed experts on the busiest rank, one microbatch, s: each matrix as E / ep
    GEMMs of one expert's size (the matrix-efficiency curve at that size: why EP raises efficiency)."""
    n = moe.local_experts
    return sum(n * gemm_seconds(flops / n, peak_flops, efficiency) for flops in moe.routed_flops) * clock_ratio


def expert_link(intra_bytes_per_s: float, inter_bytes_per_s: float, latency_s: float, deg: ParallelDegrees, gpn: int):
    """(the expert-parallel group's :class:`~mcsim.model.device_rates.Link`, its ranks within one node).

    Megatron-Core lays the ep ranks inside the t cp d ranks of a stage at a stride of expert_tp: the
    group spans ``expert_tp x ep`` consecutive GPUs, ``gpn // expert_tp`` of its ranks per node once
    it leaves one.
    """
    span = deg.expert_tp * deg.ep
    inside = span <= gpn
    local = np.where(inside, deg.ep, np.clip(gpn // deg.expert_tp, 1, deg.ep))
    link = Link(np.where(inside, intra_bytes_per_s, inter_bytes_per_s), latency_s, inside, local, intra_bytes_per_s)
    return link, local


def all_to_all(moe: MoeWork, deg: ParallelDegrees, link: Link, local: np.ndarray) -> tuple[np.ndarray, ...]:
    """One all-to-all of the busiest rank: (seconds, bytes sent within its node, bytes sent across nodes).

    Each rank sends ``1/ep`` of its ``T k h`` elements to each other rank: ``(L - 1)/ep`` of them to
    the L - 1 others of its node over NVLink, ``(ep - L)/ep`` over its NIC, both at once:
    ``max(intra / bw_intra, inter / bw_inter) + latency`` (0 for ep = 1).
    """
    e = np.asarray(deg.ep, dtype=np.float64)
    intra = moe.all_to_all_bytes * (local - 1.0) / e
    inter = moe.all_to_all_bytes * (e - local) / e
    local_bw = link.local_bus_bytes_per_s if link.local_bus_bytes_per_s is not None else link.bus_bytes_per_s
    seconds = np.maximum(intra / local_bw, np.where(e > local, inter / link.bus_bytes_per_s, 0.0)) + link.latency_s
    return np.where(e > 1, seconds, 0.0), intra, inter


def all_to_alls(recompute: np.ndarray) -> np.ndarray:
    """All-to-alls per MoE layer and microbatch: 4, 6 with full recomputation."""
    return ALL_TO_ALLS + np.where(recompute == RECOMPUTE_FULL, 2.0, 0.0)


def active_forward_flops_per_sequence(mdl: ModelSection, shape: ops.Shape) -> tuple[float, float]:
    """(forward matrix FLOPs of one sequence, their routed experts' part) on the active parameters.

    Dense layers as :func:`mcsim.model.operators.layer_ops` counts them; a MoE layer's attention, its
    router ``2 s h E``, its shared experts and k routed experts per token, each an MLP of width F.
    """
    one = np.ones(1)
    dense = sum(float(g[0]) for g in ops.layer_ops(shape, one, one, True).gemm_flops)
    attention = sum(float(g[0]) for g in ops.layer_ops(shape, one, one, True).gemm_flops[:4])
    s, h, gate = shape.seq_len, shape.hidden, (3.0 if shape.gated_mlp else 2.0)
    expert = 2.0 * s * h * float(mdl.expert_ffn_hidden) * gate  # one expert's MLP, every token
    routed = mdl.experts_per_token * expert
    moe_layer = attention + 2.0 * s * h * mdl.experts + mdl.shared_experts * expert + routed
    moe_layers = parameter_counts(mdl).moe_layers
    forward = (mdl.layers - moe_layers) * dense + moe_layers * moe_layer
    return forward, moe_layers * routed


def rank_load_variation(mdl: ModelSection, ep: int) -> float:
    """How much of one expert's per-iteration load variation (``expert_imbalance_sigma``) a rank sees.

    A rank holds n = E / ep of the E experts, whose loads share a fixed whole (every token goes to k
    of them): the sum of n of E exchangeable parts with a fixed total has the relative variance of
    one part times ``(E - n) / ((E - 1) n)`` (sampling without replacement's finite-population
    correction). Its square root scales the log-sd: 1 with one expert per rank (ep = E), 0 with every
    expert on each rank (ep = 1: a GPU routes its own tokens through all of them, nobody waits).
    """
    experts = float(mdl.experts)
    if experts <= 1.0:
        return 0.0
    local = experts / float(ep)
    return math.sqrt(max(experts - local, 0.0) / ((experts - 1.0) * local))


def expert_share(mdl: ModelSection, shape: ops.Shape) -> float:
    """The routed experts' share of the model FLOPs (0 for a dense model): the share of an iteration's
    compute whose per-rank load varies with the routing (``expert_imbalance_sigma``)."""
    if mdl.experts == 0:
        return 0.0
    forward, routed = active_forward_flops_per_sequence(mdl, shape)
    logits = float(ops.logits_flops(shape, np.ones(1), np.ones(1))[0])
    return routed / (forward + logits)


def moe_flops_per_sequence(
    mdl: ModelSection, shape: ops.Shape, recompute: np.ndarray, fused_attention: bool
) -> tuple[float, np.ndarray]:
    """(model FLOPs of one sequence, what recomputation adds) of a mixture of experts, counted on the
    active parameters as :func:`mcsim.model.operators.model_flops_per_sequence` and
    :func:`~mcsim.model.operators.recompute_flops_per_sequence` count a dense model's: 3 x the forward
    matrix FLOPs; full recomputation repeats the active forward, selective the attention scores."""
    forward, _ = active_forward_flops_per_sequence(mdl, shape)
    logits = float(ops.logits_flops(shape, np.ones(1), np.ones(1))[0])
    dense_forward = mdl.layers * sum(float(g[0]) for g in ops.layer_ops(shape, np.ones(1), np.ones(1), True).gemm_flops)
    again = ops.recompute_flops_per_sequence(shape, mdl.layers, recompute, fused_attention)
    again = again + np.where(recompute == RECOMPUTE_FULL, forward - dense_forward, 0.0)
    return 3.0 * (forward + logits), again
