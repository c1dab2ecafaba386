"""Memory per GPU of candidate layouts, as a GPU's memory counter reads it (docs/model.md §2).

A GPU holds the model state of the parameters it keeps (BF16 weights, gradients and FP32 Adam
state, sharded by the ZeRO stage, with the gradients' precision of the pipeline engine's
framework; FP8 copies of the weights under ``compute.fp8``), the activations of the
microbatches its pipeline engine keeps in flight (Korthikanti et al.'s per-layer counts), the
working set of the layer being recomputed, and what real GPUs hold beyond the formulas: the
framework's gradient bucket, the caching allocator's reserve over what tensors use, the CUDA
context, cuBLAS's workspace and NCCL's buffers. Each figure below cites its source.
Reported in GB (1e9 bytes); arrays over candidates. The GPU's own capacity is in GiB
(:data:`CATALOG_GB_BYTES`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from mcsim.model.experts import expert_stages_of, rank_imbalance
from mcsim.model.layouts import RECOMPUTE_CODES, Layouts, ParallelDegrees
from mcsim.model.pipeline_stages import StageLayers
from mcsim.scenario.config import Config
from mcsim.scenario.consistency import parameter_counts
from mcsim.scenario.schema import ModelSection
from mcsim.scenario.software import PIPELINE_ENGINES

# The pipeline engines (the software profile's ``pipeline_engine``): Megatron-LM's schedule,
# 1F1B with optional interleaving, which frees a stage's output once sent (Megatron-Core's
# ``deallocate_output_tensor``) and keeps FP32 main gradients; DeepSpeed's PipelineEngine
# (Megatron-DeepSpeed, BLOOM), blocking 1F1B without interleaving, which keeps each in-flight
# microbatch's stage output in its pipe buffers and 16-bit gradients with ZeRO's FP32 partition.
# The names are declared once, with the profiles (mcsim.scenario.software).
DEFAULT_PIPELINE_ENGINE = PIPELINE_ENGINES[0]

MIB = 2**20
# The GPU memory of the hardware catalog and of datasheets is binary: an A100 80GB shows
# 81,920 MiB total in nvidia-smi (80 GiB), and BigScience's per-layout figures below are
# nvidia-smi's MiB over 1,024 (docs/validation.md, "Memory").
CATALOG_GB_BYTES = 2**30
# CUDA context and the kernels' images: 1,573 MiB on an A100 40GB, measured by BigScience with
# ``torch.ones(1).cuda()`` and nvidia-smi (bigscience-workshop/bigscience,
# train/tr11-176B-ml/chronicles-prequel.md, "40GB A100 takes 1573MiB for cuda kernels"; 1,271 MiB
# on a V100 32GB). Borrowed for every GPU type.
CUDA_CONTEXT_BYTES = 1573 * MIB
# cuBLAS workspace: PyTorch's default CUBLAS_WORKSPACE_CONFIG ":4096:8", eight 4,096 KiB
# workspaces (PyTorch docs, "Reproducibility" and "CUDA semantics: cuBLAS workspaces").
CUBLAS_WORKSPACE_BYTES = 8 * 4 * MIB
# NCCL: each channel of a ring keeps a FIFO of NCCL_BUFFSIZE (default 4 MiB, NCCL docs,
# "Environment variables") per connection, two connections per ring channel whatever the
# scale, memory linear in the channels (NCCL maintainers, NVIDIA/nccl issues #864 and #986).
# Assumed (not published per run): 16 channels and four communicators (tensor, pipeline, data
# parallel, the embedding group).
NCCL_BUFFER_BYTES = 4 * 2 * 16 * 4 * MIB
# DeepSpeed ZeRO stage 1/2 reduces gradients through a bucket of ``reduce_bucket_size``
# elements, default 5e8 (DeepSpeed config docs, "zero_optimization"), in 16-bit: 1 GB, held
# by the blocking engine's framework (BLOOM's ds_config sets only the stage).
DEEPSPEED_REDUCE_BUCKET_BYTES = 5e8 * 2.0
# PyTorch's caching allocator reserves more than its tensors use (block rounding, segments
# split and cached, fragmentation; nvidia-smi counts what is reserved), by the framework's
# allocation pattern. No published figure fixes the ratio for a training run. DeepSpeed's
# (``blocking-1f1b``): the memory model's one fitted number, fitted to BigScience's per-layout
# measurements (mcsim/analysis/memory_validation.py, leave-one-out errors in docs/validation.md,
# "Memory"); every other figure is from its source alone. Megatron-LM's (``interleaved-1f1b``):
# no per-layout measurement was found; 1 (no reserve) is an assumption, and the largest that
# lets Llama 3 405B's published layout fit (TP 8, PP 16, 8K sequences, no recomputation,
# FSDP sharding optimizer state and gradients, on 80 GB H100s; Llama 3 report, §3.3.2: Meta
# profiled its allocations and freed each stage's inputs and outputs): at 1.20 the model would
# refuse a layout that ran.
ALLOCATOR_RESERVE = {"interleaved-1f1b": 1.0, "blocking-1f1b": 1.20}
# The memory model's error against those measurements, leave-one-out, as model / measured
# (docs/validation.md, "Memory"): the planner keeps 1 - the lower end free by default, and
# mcsim report widens the recommendation's memory by the range (measured = model / ratio).
# tests/model/test_memory_validation.py keeps both the validation's.
MEMORY_MODEL_OVER_MEASURED = (0.92, 1.08)


def memory_per_gpu_gb(
    cfg: Config,
    lay: Layouts,
    deg: ParallelDegrees,
    stages: StageLayers | None,
    pipeline_engine: str = DEFAULT_PIPELINE_ENGINE,
) -> np.ndarray:
    """Memory per GPU of every candidate as nvidia-smi would read it, GB (1e9 bytes).

    ``(allocated x ALLOCATOR_RESERVE[engine] + fixed) / 1e9`` with :func:`memory_bytes`'s two parts.
    ``pipeline_engine``: one of :data:`PIPELINE_ENGINES` (the software profile's).
    """
    allocated, fixed = memory_bytes(cfg, lay, deg, stages, pipeline_engine)
    return (allocated * ALLOCATOR_RESERVE[pipeline_engine] + fixed) / 1e9


def memory_bytes(
    cfg: Config,
    lay: Layouts,
    deg: ParallelDegrees,
    stages: StageLayers | None,
    pipeline_engine: str = DEFAULT_PIPELINE_ENGINE,
) -> tuple[np.ndarray, float]:
    """(bytes the caching allocator's tensors use, bytes held outside it) per GPU of every candidate.

    Tensors: the model state of the GPU that holds the most parameters, the activations the
    engine keeps in flight on the fullest pipeline stage, the recomputed layer's working set
    and, under the blocking engine, DeepSpeed's reduce bucket. Outside: the CUDA context,
    cuBLAS's workspace and NCCL's buffers.

    ``stages``: the layers each pipeline GPU holds, under the operator model, which places the
    embedding and the output layer on the end stages (:func:`params_held_per_gpu`); None: the
    aggregate model's even spread of the parameters, N / (t p).
    """
    if pipeline_engine not in PIPELINE_ENGINES:
        raise ValueError(f"pipeline engine {pipeline_engine!r}: expected one of {PIPELINE_ENGINES}")
    blocking = pipeline_engine == "blocking-1f1b"
    t, p, c, d = deg.tp, deg.pp, deg.cp, deg.dp
    routed = parameter_counts(cfg.model).routed if cfg.model.experts else 0.0
    # A mixture of experts: the layers' other parameters as a dense model's, its routed experts below.
    mdl = dataclasses.replace(cfg.model, params=cfg.model.params - routed) if routed else cfg.model
    params_held = mdl.params / (t * p) if stages is None else params_held_per_gpu(mdl, t, p, stages)
    state_bytes = params_held * model_state_bytes_per_param(lay.zero_stage, d * c, pipeline_engine)
    if cfg.compute.fp8:  # FP8 copies of the weights, 1 byte each, where the GPU computes in FP8
        held = params_held / np.where(lay.zero_stage >= 3, d * c, 1)
        state_bytes = state_bytes + np.where(lay.fp8_tflops > 0, held, 0.0)
    if routed:
        state_bytes = state_bytes + _expert_state_bytes(cfg, lay, deg, stages, pipeline_engine)
    sp, b = lay.sequence_parallel, deg.microbatch
    activation = _activation_per_layer(mdl, b, t, lay.recompute, sp, c)
    whole_layer = _activation_per_layer(mdl, b, t, np.zeros_like(lay.recompute), sp, c)  # nothing recomputed
    if routed:  # the MoE layers' activations beyond a dense layer's, spread over the layers
        activation = activation + _moe_activation_per_layer(cfg.model, deg, lay.recompute, sp)
        whole_layer = whole_layer + _moe_activation_per_layer(cfg.model, deg, np.zeros_like(lay.recompute), sp)
    stage_output = _activation_per_layer(mdl, b, t, np.full_like(lay.recompute, 2), sp, c)  # the layer input
    interleave = np.ones_like(p) if blocking else deg.interleave
    in_flight = activation * peak_stage_microbatch_layers(mdl.layers, p, deg.microbatches, interleave)
    if blocking:  # DeepSpeed's pipe buffers keep each in-flight microbatch's stage output
        in_flight = in_flight + stage_output * pipe_buffers(p, deg.microbatches)
    allocated = state_bytes + in_flight + (whole_layer - activation)  # + the recomputed layer's rest
    if blocking:
        allocated = allocated + DEEPSPEED_REDUCE_BUCKET_BYTES
    return allocated, float(CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES + NCCL_BUFFER_BYTES)


def _expert_state_bytes(
    cfg: Config, lay: Layouts, deg: ParallelDegrees, stages: StageLayers | None, pipeline_engine: str
) -> np.ndarray:
    """Model state of the routed experts one GPU holds, bytes: the most MoE layers of a pipeline GPU
    (an even share, ``moe_layers / p``, under the aggregate model) x ``E / ep`` experts x one expert's
    parameters / expert_tp, sharded by the ZeRO stage over the edp ranks that hold the same experts
    (docs/model.md, "Mixture of experts")."""
    mdl = cfg.model
    counts = parameter_counts(mdl)
    if stages is None:
        moe_layers = counts.moe_layers / np.asarray(deg.pp, dtype=np.float64)
    else:
        on = expert_stages_of(mdl, deg.pp, deg.interleave)
        moe_layers = np.maximum.reduce([on.first, on.last, on.middle, on.busiest_moe])
    held = moe_layers * mdl.experts * counts.one_expert / (deg.ep * deg.expert_tp)
    state = held * model_state_bytes_per_param(lay.zero_stage, deg.edp, pipeline_engine)
    if cfg.compute.fp8:
        state = state + np.where(lay.fp8_tflops > 0, held / np.where(lay.zero_stage >= 3, deg.edp, 1), 0.0)
    return state


def _moe_activation_per_layer(
    mdl: ModelSection, deg: ParallelDegrees, recompute: np.ndarray, sequence_parallel: bool | np.ndarray
) -> np.ndarray:
    """What a MoE layer stores beyond Korthikanti et al.'s dense layer, bytes, averaged over the layers.

    Korthikanti's count holds ``18 sbh`` for a 4h MLP (its input, the activation function's input and
    output, BF16). A MoE layer holds per token its input ``2h`` and its shared experts' ``2 S F (g+1)``
    (g = 2 gated, 1 not), and per routed token (k rho per token, rho the busiest rank's load,
    :func:`mcsim.model.experts.rank_imbalance`) its permuted input ``2h`` and ``2 F (g+1)``: the
    difference, on the GPU's ``s b / (cp t)`` tokens, unless the layer is recomputed whole.
    """
    h, width, gate = float(mdl.hidden), float(mdl.expert_ffn_hidden), 2.0 if mdl.gated_mlp else 1.0
    rho = rank_imbalance(mdl, deg.ep)
    shared = 2.0 * h + 2.0 * mdl.shared_experts * width * (gate + 1.0) - 18.0 * h
    per_token = shared + mdl.experts_per_token * rho * (2.0 * h + 2.0 * width * (gate + 1.0))
    t = np.asarray(deg.tp, dtype=np.float64)
    tokens = mdl.seq_len / np.asarray(deg.cp) * np.asarray(deg.microbatch, dtype=np.float64)
    share = parameter_counts(mdl).moe_layers / mdl.layers
    split = np.where(sequence_parallel, t, 1.0)
    return np.where(recompute == RECOMPUTE_CODES["full"], 0.0, share * tokens * per_token / split)


def capacity_gb(catalog_gb: ArrayLike) -> np.ndarray:
    """A GPU's memory in GB (1e9 bytes) from its catalog figure, which is binary (:data:`CATALOG_GB_BYTES`)."""
    return np.asarray(catalog_gb, dtype=np.float64) * (CATALOG_GB_BYTES / 1e9)


def params_held_per_gpu(mdl: ModelSection, t: np.ndarray, p: np.ndarray, stages: StageLayers) -> np.ndarray:
    """The most parameters one GPU holds, for the memory of the fullest GPU (arrays).

    The embedding (V h) sits on the first stage and the output layer (V h, a copy of the
    embedding when they are tied; Shoeybi et al. 2019, the embedding group) on the last:
    ``(layers on the GPU x (N - E) / L + V h [+ V h]) / t``, with E = V h tied or 2 V h
    untied the part of ``model.params`` N that is not in the layers. Without a vocabulary
    (``model.vocab = 0``) the parameters are spread evenly, N / (t p), as §2 has it. ``stages``: the
    layers on the first, last and fullest other GPU
    (:func:`mcsim.model.pipeline_stages.stage_layers_of`).
    """
    t = np.asarray(t, dtype=np.float64)
    if mdl.vocab <= 0:
        return mdl.params / (t * np.asarray(p, dtype=np.float64))
    table = float(mdl.vocab) * float(mdl.hidden)
    outside = table * (1.0 if mdl.tied_embeddings else 2.0)
    per_layer = max(mdl.params - outside, 0.0) / mdl.layers
    one_stage = np.asarray(p) == 1
    first = stages.first * per_layer + table + np.where(one_stage & (not mdl.tied_embeddings), table, 0.0)
    last = stages.last * per_layer + np.where(one_stage, 0.0, table)
    return np.maximum.reduce([first, last, stages.middle * per_layer]) / t


def model_state_bytes_per_param(
    zero_stage: int | np.ndarray, dp: np.ndarray, pipeline_engine: str = DEFAULT_PIPELINE_ENGINE
) -> np.ndarray:
    """Bytes of model state per parameter a GPU holds, by ZeRO stage and the engine's framework.

    Megatron-LM (``interleaved-1f1b``): BF16 weights (2), FP32 main gradients (4), FP32 master
    weights and Adam moments (12); DeepSpeed (``blocking-1f1b``): 16-bit weights and gradients
    (2 + 2), FP32 master weights, Adam moments and the gradient partition (16). Megatron-LM's
    distributed optimizer guide (docs, "Distributed Optimizer") gives both: 6 + 12/d ("bf16
    param, fp32 grads") and 4 + 16/d ("fp16 param, fp16 grads") at stage 1, 18 and 20 without
    sharding. Rajbhandari et al., ZeRO (SC'20, arXiv 1910.02054), §5: stage 1 shards the
    optimizer's part over the d data-parallel ranks, stage 2 the gradients too, stage 3 (FSDP)
    the weights too. Stage 1 is Megatron's distributed optimizer, mcsim's default.
    """
    d = np.asarray(dp, dtype=np.float64)
    stage = np.asarray(zero_stage)
    gradient, optimizer = (2.0, 16.0) if pipeline_engine == "blocking-1f1b" else (4.0, 12.0)
    weights = np.where(stage >= 3, 2.0 / d, 2.0)
    gradients = np.where(stage >= 2, gradient / d, gradient)
    optimizers = np.where(stage >= 1, optimizer / d, optimizer)
    return weights + gradients + optimizers


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
    mdl: ModelSection,
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


def peak_stage_microbatch_layers(
    layers: int, stages: ArrayLike, microbatches: ArrayLike, interleave: ArrayLike = 1
) -> np.ndarray:
    """``max_i layers(i) * in_flight(i)`` over the stages of :func:`mcsim.model.pipeline_stages.stage_layers` (arrays).

    Stage i (0-based) of p holds the activations of ``in_flight(i)`` microbatches' worth of
    its layers: min(p - i, m) under 1F1B (Narayanan et al., SC'21, §2.2.1; DeepSpeed's
    ``TrainSchedule`` and Megatron's ``forward_backward_pipelining_without_interleaving``:
    p - i - 1 warm-up forwards plus the one in steady state). With v > 1 interleaved chunks
    Megatron runs ``2 (p - i - 1) + (v - 1) p`` warm-up forwards of chunks of layers(i) / v
    layers (``forward_backward_pipelining_with_interleaving``), at most m v of them, so
    in_flight(i) = min(2 (p - i - 1) + (v - 1) p + 1, m v) / v: at stage 0 that is
    p (1 + (p - 1) / (p v)), Korthikanti et al.'s (arXiv 2205.05198) §4.2.3 factor.
    The in-flight count falls with i, so the maximum is at stage 0 or at the first stage with
    the larger layer count: with ``extra = L mod p > 0`` the ``p - extra`` outermost stages
    (first and last alternately) hold one layer fewer, so the first full stage is
    ``ceil((p - extra) / 2)``.
    """
    p = np.asarray(stages)
    v = np.asarray(interleave)
    m = np.asarray(microbatches)
    per, extra = np.divmod(layers, p)
    first_full = (p - extra + 1) // 2

    def in_flight(i: np.ndarray) -> np.ndarray:
        plain = np.minimum(p - i, m)
        chunks = np.minimum(2 * (p - i - 1) + (v - 1) * p + 1, m * v) / np.maximum(v, 1)
        return np.where(v > 1, chunks, plain)

    at_first = per * in_flight(np.zeros_like(p))
    at_full = (per + 1) * in_flight(first_full)
    return np.where(extra == 0, at_first, np.maximum(at_first, at_full))


def pipe_buffers(stages: ArrayLike, microbatches: ArrayLike) -> np.ndarray:
    """The pipe buffers of DeepSpeed's first stage, each keeping one microbatch's stage output (arrays).

    DeepSpeed's ``TrainSchedule.num_pipe_buffers``: ``max(2, min(p - i, m))`` at stage i
    (deepspeed/runtime/pipe/schedule.py), the most at stage 0; none without a pipeline (p = 1).
    """
    p = np.asarray(stages)
    return np.where(p > 1, np.maximum(2, np.minimum(p, np.asarray(microbatches))), 0)
