"""Published step times of mixture-of-experts training, as data for ``mcsim validate --moe``.

Each :class:`MoeCase` is one published measurement: a model's shape, its layout, its machine, its
software, and the iteration time the source gives or implies. Every value comes from the source
named on the case; a value no source gives is listed in the case's ``assumed`` with what was
taken. :mod:`mcsim.analysis.moe_validation` fits ``compute.efficiency`` leave-one-out per source
(as :mod:`mcsim.analysis.steptime_validation` does for dense models) and reports the errors
(docs/validation.md, "Mixture of experts", lists each figure and where it is in its source).

Sources (``MoeCase.source``):

- ``megatron_core_moe``: Megatron-Core's MoE README (NVIDIA/Megatron-LM,
  ``megatron/core/transformer/moe/README.md``): Mixtral 8x7B BF16 training at 468 TFLOP/s per H100
  "with MCore v0.9" (the 2025 README) and 438 "as of MCore v0.8" (the 2024-08 README). The layout
  is the README's "Reference Best Parallel Mapping" of Mixtral 8x7B (dropless, all-to-all, BF16):
  64 GPUs, sequence 4,096, TP 1, EP 8, PP 4, VP 8, microbatch 1, batch 256; DGX H100 (NVLink 4,
  8 x 400 Gb/s InfiniBand). The TFLOP/s are Megatron's ``num_floating_point_operations``
  (megatron/training/training.py, core_v0.8.0 and core_v0.9.0: the same MoE count), so the
  iteration time is that count over 64 x TFLOP/s (:func:`megatron_moe_flops`). The shape is the
  README's Mixtral example (32 layers, hidden 4,096, 32 heads, 8 query groups, SwiGLU width
  14,336, 8 experts, top-2, untied) with Mixtral's 32,000-token vocabulary; 46.7B parameters.
- ``megatron_bridge_h100``: NVIDIA NeMo Megatron-Bridge's performance summary on DGX-H100
  (NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md``, containers 25.11 and
  26.02): tokens per second per GPU with GPUs, precision, batch, microbatch, sequence, TP, PP, CP,
  VP and EP; "we force-balance the token distribution among experts and all benchmarks are
  token-dropless" (so ``expert_imbalance = 1``). Iteration time = batch x sequence / (GPUs x
  tokens/s/GPU). Shapes from each model's Hugging Face ``config.json``. The rows marked
  "tokendrop" (container 25.09) are left out: their capacity factor is not published.
- ``deepseek_h800``: DeepSeek's own runs on H800 (HAI-LLM): DeepSeek-V3 (arXiv 2412.19437:
  "180K H800 GPU hours" per trillion tokens, §1 and Table 1; PP 16, EP 64 over 8 nodes, ZeRO-1,
  no TP, §3.2; FP8, §3.3; 2,048 H800; batch 15,360 x 4,096 after the first 469B tokens, §4.2;
  NVLink 160 GB/s and InfiniBand 50 GB/s per GPU achieved, §3.2.2) and DeepSeek-V2 (arXiv
  2405.04434, §3.2.3: "172.8K GPU hours" per trillion tokens; PP 16 zero-bubble, EP 8, ZeRO-1,
  no TP, §3.1.3; batch 9,216 x 4,096, §3.1.2; token dropping in training, §2.2.4). A GPU-hours
  figure counts everything the run spent, restarts and stalls included; as a step time it is an
  upper bound the model should come out at or below. The iteration time is GPU-hours per token x
  batch tokens / GPUs.

What the operator model cannot express and the cases approximate (each named in ``assumed``):
DeepSeek's multi-head latent attention and Qwen3's and GPT-OSS's attention width (heads x 128 or
x 64, not the hidden size) are taken as attention of the hidden width; DeepSeek-V3's
multi-token-prediction module (one more layer and output head, about 2 % of the FLOPs) is left
out; GPT-OSS's sliding-window layers are counted as full attention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DGX_H100 = {"hardware.gpu": "H100-SXM", "network.intra_gbps": 900.0, "network.inter_gbps": 50.0}
# DeepSeek's H800 nodes: NVLink 400 GB/s both directions (NVIDIA H800 SXM5; catalog.py), 8 GPUs a node,
# one 400 Gb/s InfiniBand NIC per GPU, 50 GB/s (arXiv 2412.19437 §3.2.2).
DEEPSEEK_H800 = {"hardware.gpu": "H800", "network.intra_gbps": 400.0, "network.inter_gbps": 50.0}

SEQUENCE = 4096  # every case's sequence length (each source states 4,096 / 4K)


@dataclass(frozen=True)
class MoeShape:
    """A mixture-of-experts model's shape, as its source (config.json or paper) gives it."""

    params: float  # total parameters, as published
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int  # the dense layers' MLP width (the expert width where every layer is MoE)
    vocab: int
    experts: int
    experts_per_token: int
    expert_ffn_hidden: int
    shared_experts: int = 0
    first_dense_layers: int = 0


@dataclass(frozen=True)
class MoeCase:
    """One published MoE measurement and the scenario keys that describe it."""

    source: str
    name: str
    shape: MoeShape
    measured_s: float  # the iteration time the source gives or implies, s
    keys: tuple[tuple[str, Any], ...]  # layout, machine and software as scenario keys
    assumed: tuple[str, ...] = field(default=())  # what no source gives, and the value taken


MIXTRAL_8X7B = MoeShape(46.7e9, 32, 4096, 32, 8, 14336, 32000, 8, 2, 14336)
# Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B config.json (head_dim 128, untied, SwiGLU, every layer MoE)
QWEN3_30B_A3B = MoeShape(30.5e9, 48, 2048, 32, 4, 768, 151936, 128, 8, 768)
QWEN3_235B_A22B = MoeShape(235e9, 94, 4096, 64, 4, 1536, 151936, 128, 8, 1536)
# openai/gpt-oss-120b config.json (36 layers, hidden 2,880, 64 heads x 64, 8 KV heads, 128 experts, top-4,
# expert width 2,880, vocabulary 201,088); 116.8B parameters (the gpt-oss model card)
GPT_OSS_120B = MoeShape(116.8e9, 36, 2880, 64, 8, 2880, 201088, 128, 4, 2880)
# arXiv 2412.19437 §4.2 and deepseek-ai/DeepSeek-V3 config.json (dense width 18,432, vocabulary 129,280)
DEEPSEEK_V3 = MoeShape(671e9, 61, 7168, 128, 128, 18432, 129280, 256, 8, 2048, 1, 3)
# arXiv 2405.04434 §3.1.2 and deepseek-ai/DeepSeek-V2 config.json (dense width 12,288, vocabulary 102,400)
DEEPSEEK_V2 = MoeShape(236e9, 60, 5120, 128, 128, 12288, 102400, 160, 6, 1536, 2, 1)


def megatron_moe_flops(shape: MoeShape, batch: int, seq: int = SEQUENCE) -> float:
    """Megatron's model FLOPs of one iteration (``num_floating_point_operations``, core_v0.8.0 and v0.9.0).

    ``12 B s L h^2 [(1 + g/a + s/h) + (F/h) k 3/2 + V / (2 L h)]`` for a SwiGLU MoE with every layer
    MoE, g query groups, a heads, F the expert width, k the top-k and V the vocabulary (32,000 is
    already a multiple of 128, so Megatron's padding leaves it).
    """
    h, layers = shape.hidden, shape.layers
    attention = 1.0 + shape.kv_heads / shape.heads + seq / h
    mlp = shape.expert_ffn_hidden / h * shape.experts_per_token * 1.5
    logit = shape.vocab / (2.0 * layers * h)
    return 12.0 * batch * seq * layers * h * h * (attention + mlp + logit)


def _megatron_core(version: str, tflops: float) -> MoeCase:
    batch, gpus = 256, 64
    keys = {
        **DGX_H100,
        "parallelism.gpus": gpus,
        "parallelism.tp": 1,
        "parallelism.ep": 8,
        "parallelism.pp": 4,
        "parallelism.interleave": 8,  # VP 8
        "parallelism.microbatch": 1,
        "model.global_batch": batch,
        "parallelism.overlap_ep": 0.0,  # EP all-to-all overlap came with MCore v0.14 (the README's "What's New")
    }
    seconds = megatron_moe_flops(MIXTRAL_8X7B, batch) / (gpus * tflops * 1e12)
    assumed = (
        "the README's reference mapping of Mixtral 8x7B is the layout of the TFLOP/s figure",
        "no recomputation (the README's example sets none)",
        "expert_imbalance 1.0 (dropless; the README says imbalance settles after a few hundred steps)",
    )
    return MoeCase("megatron_core_moe", f"Mixtral 8x7B MCore {version}", MIXTRAL_8X7B, seconds, _items(keys), assumed)


def _bridge(container: str, name: str, shape: MoeShape, layout: tuple, tokens_per_gpu_s: float) -> MoeCase:
    gpus, fp8, batch, micro, tp, pp, vp, ep = layout
    keys = {
        **DGX_H100,
        "parallelism.gpus": gpus,
        "parallelism.tp": tp,
        "parallelism.pp": pp,
        "parallelism.interleave": vp,
        "parallelism.ep": ep,
        "parallelism.microbatch": micro,
        "model.global_batch": batch,
        "compute.fp8": fp8,
    }
    assumed = ("no recomputation", "overlap_ep 0 (the table does not say)")
    seconds = batch * SEQUENCE / (gpus * tokens_per_gpu_s)
    return MoeCase("megatron_bridge_h100", f"{name} ({container})", shape, seconds, _items(keys), assumed)


def _deepseek(name: str, shape: MoeShape, layout: tuple, gpu_hours_per_t: float, fp8: bool, balancing: str) -> MoeCase:
    gpus, ep, batch, overlap_ep = layout
    keys = {
        **DEEPSEEK_H800,
        "parallelism.gpus": gpus,
        "parallelism.tp": 1,
        "parallelism.pp": 16,
        "parallelism.interleave": 1,  # DualPipe / zero-bubble: one stage per GPU
        "parallelism.ep": ep,
        "parallelism.overlap_ep": overlap_ep,
        "parallelism.microbatch": 1,
        "model.global_batch": batch,
        "model.recompute": "selective",  # V2 §3.1.3 "a portion of the operators are recomputed"; V3 §3.2.3
        "compute.fp8": fp8,
        "model.router_balancing": balancing,
    }
    seconds = gpu_hours_per_t * 3600.0 / 1e12 * batch * SEQUENCE / gpus
    return MoeCase("deepseek_h800", name, shape, seconds, _items(keys), _DEEPSEEK_ASSUMED[name])


_DEEPSEEK_ASSUMED = {
    "DeepSeek-V3": (
        "overlap_ep 1.0 (DualPipe: 'near-full computation-communication overlap', §3.2.1)",
        "microbatch 1; DualPipe taken as Megatron's 1F1B schedule",
        "the run's average over the batch ramp (3,072 to 15,360 over 469B of 14.8T tokens) taken at 15,360",
        "MLA as attention of the hidden width; the MTP module left out",
    ),
    "DeepSeek-V2": (
        "1,024 GPUs (DP 64): the paper gives no GPU count",
        "BF16 (the paper states no FP8 training)",
        "overlap_ep 0 (only the shared experts' compute overlaps the all-to-all, §3.1.3)",
        "token dropping (device-level capacity 1.0, §2.2.4) not modelled; microbatch 1",
        "MLA as attention of the hidden width",
    ),
}


def _items(keys: dict) -> tuple[tuple[str, Any], ...]:
    return tuple(keys.items())


MOE_CASES: tuple[MoeCase, ...] = (
    # Megatron-Core MoE README: Mixtral 8x7B BF16 on 64 H100, TFLOP/s per GPU by MCore version.
    _megatron_core("v0.8", 438.0),
    _megatron_core("v0.9", 468.0),
    # Megatron-Bridge performance summary, DGX-H100: (GPUs, FP8, GBS, MBS, TP, PP, VP, EP), tokens/s/GPU.
    _bridge("25.11", "GPT-OSS 120B BF16", GPT_OSS_120B, (64, False, 512, 4, 1, 4, 1, 8), 5630.0),
    _bridge("26.02", "GPT-OSS 120B BF16", GPT_OSS_120B, (64, False, 1280, 1, 1, 4, 1, 8), 5993.0),
    _bridge("25.11", "Qwen3-30B-A3B FP8", QWEN3_30B_A3B, (16, True, 512, 2, 1, 2, 24, 8), 5275.0),
    _bridge("26.02", "Qwen3-30B-A3B FP8", QWEN3_30B_A3B, (16, True, 1024, 1, 1, 2, 12, 8), 5113.0),
    _bridge("25.11", "Qwen3-235B-A22B FP8", QWEN3_235B_A22B, (256, True, 2048, 1, 2, 8, 4, 32), 1575.0),
    _bridge("26.02", "Qwen3-235B-A22B FP8", QWEN3_235B_A22B, (256, True, 8192, 1, 2, 8, 4, 32), 1633.0),
    # DeepSeek on H800: (GPUs, EP, batch in sequences, overlap_ep), GPU-hours per trillion tokens, FP8, the router's
    # balancing (V3 §2.1.2: auxiliary-loss-free; V2 §2.2.3: expert-, device- and communication-level losses).
    _deepseek("DeepSeek-V3", DEEPSEEK_V3, (2048, 64, 15360, 1.0), 180e3, True, "loss-free"),
    _deepseek("DeepSeek-V2", DEEPSEEK_V2, (1024, 8, 9216, 0.0), 172.8e3, False, "aux-loss"),
)


# Each source's software profile (mcsim/scenario/software.py): Megatron-Core's for every source (HAI-LLM has
# none of its own; its overlaps and recomputation are the case's keys), the case's keys over it.
SOURCE_SOFTWARE = {
    "megatron_core_moe": "megatron-core-2024",
    "megatron_bridge_h100": "megatron-core-2024",
    "deepseek_h800": "megatron-core-2024",
}


def case_keys(case: MoeCase) -> dict[str, Any]:
    """The scenario keys of ``case``: its shape, layout, machine and software over the reference scenario's."""
    shape = case.shape
    keys: dict[str, Any] = {
        "compute.software": SOURCE_SOFTWARE[case.source],
        "model.params": shape.params,
        "model.layers": shape.layers,
        "model.hidden": shape.hidden,
        "model.heads": shape.heads,
        "model.kv_heads": shape.kv_heads,
        "model.ffn_hidden": shape.ffn_hidden,
        "model.gated_mlp": True,  # SwiGLU in every model here
        "model.vocab": shape.vocab,
        "model.tied_embeddings": False,
        "model.seq_len": SEQUENCE,
        "model.recompute": "none",
        "model.experts": shape.experts,
        "model.experts_per_token": shape.experts_per_token,
        "model.expert_ffn_hidden": shape.expert_ffn_hidden,
        "model.shared_experts": shape.shared_experts,
        "model.first_dense_layers": shape.first_dense_layers,
        "parallelism.zero_stage": 1,  # Megatron's distributed optimizer; DeepSeek's ZeRO-1
        "compute.fused_attention": True,
        "hardware.memory_gb": 1e6,  # the published runs fit; memory is not what is validated here
    }
    if case.source in ("megatron_bridge_h100", "megatron_core_moe"):
        keys["model.expert_imbalance"] = 1.0  # force-balanced (Megatron-Bridge) / dropless, settled (assumed)
    keys.update(dict(case.keys))
    batch = int(keys["model.global_batch"])
    keys["model.tokens"] = float(batch * SEQUENCE)
    keys["parallelism.sequence_parallel"] = int(keys["parallelism.tp"]) > 1
    return keys


# Why the shipped deepseek-v3-pretraining misses DeepSeek-V3's 2,664K GPU-hours (mcsim validate; docs/validation.md,
# "Mixture of experts").
DEEPSEEK_V3_GPU_HOURS_MISS = (
    "the scenario borrows Megatron-Core's H100 efficiency (0.594): with it the model runs DeepSeek's layout faster "
    "than DeepSeek's GPU-hours say (~2.24M, -16 %), although its full recomputation is a cost the run did not pay; "
    "DeepSeek's own runs fit 0.35-0.38 (mcsim validate --moe, deepseek_h800), their GPU-hours counting every overhead"
)
