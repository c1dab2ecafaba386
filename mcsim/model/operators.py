"""What one transformer layer, the embedding and the output layer compute and move (docs/model.md §2b).

Per operator, for one microbatch of ``b`` sequences on one GPU of a tensor-parallel
group of ``t``: the FLOPs of each matrix operator and the bytes each memory-bound
operator reads and writes, forward pass. Arrays broadcast over candidates.
:func:`layout_work` gathers all of it for candidate layouts in one :class:`LayoutWork`,
the operator step-time model's input (:mod:`mcsim.model.steptime`).

Sources (their equations, counted operator by operator here):

- Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
  Using Megatron-LM" (SC'21, arXiv 2104.04473), §5.1 and Appendix: a layer's forward
  matrix FLOPs are ``24 B s h^2 (1 + s/6h)``, the output layer's ``2 B s h V``;
  backward is twice the forward; full recomputation adds one forward.
- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
  Models" (MLSys 2023, arXiv 2205.05198), §4: which operators exist, which tensors
  each stores, and which are replicated across the tensor-parallel group without
  sequence parallelism (layer norms, dropouts, residual additions).
- Grouped-query attention (Ainslie et al., EMNLP 2023, arXiv 2305.13245): the key and
  value projections have ``kv_heads`` heads of ``h / heads`` channels.
- Gated MLPs (SwiGLU; Shazeer 2020, arXiv 2002.05202): the first MLP matrix has two
  outputs of ``ffn_hidden``.

Bytes are those of BF16 tensors (2 bytes per element) plus 1 byte per element for a
dropout mask; a fused operator counts each input read once and each output written once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcsim.model.layouts import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, Layouts, ParallelDegrees
from mcsim.model.pipeline_stages import StageLayers, stage_layers_of
from mcsim.scenario.schema import ModelSection

ELEMENT_BYTES = 2.0  # BF16 activations
MASK_BYTES = 1.0  # a dropout mask, one byte per element
# Mixed-precision Adam, per parameter held by the GPU: read the FP32 gradient, the FP32
# master weight and the two FP32 moments (16 bytes), write the weight and the moments
# back (12) and the BF16 copy (2). State sizes: Rajbhandari et al., ZeRO (SC'20,
# arXiv 1910.02054), §3.1.
OPTIMIZER_BYTES_PER_PARAM = 30.0

# The matrix operators of a layer, in the order of :attr:`LayerOps.gemm_flops`.
LAYER_GEMMS = ("qkv", "scores", "attention_over_values", "projection", "mlp_in", "mlp_out")
SCORE_GEMMS = (1, 2)  # QK^T and AV: what selective recomputation recomputes


@dataclass(frozen=True)
class Shape:
    """A transformer's shape: hidden ``h``, heads, key/value heads, MLP width, vocabulary, sequence."""

    hidden: float
    heads: float
    kv_heads: float
    ffn_hidden: float
    vocab: float
    seq_len: float
    gated_mlp: bool
    dropout: bool


def shape_of(mdl: ModelSection) -> Shape:
    """The :class:`Shape` of a scenario's ``[model]`` table."""
    heads = mdl.heads or max(1, mdl.hidden // 128)
    return Shape(
        hidden=float(mdl.hidden),
        heads=float(heads),
        kv_heads=float(mdl.kv_heads or heads),
        ffn_hidden=float(mdl.ffn_hidden or 4 * mdl.hidden),
        vocab=float(mdl.vocab),
        seq_len=float(mdl.seq_len),
        gated_mlp=bool(mdl.gated_mlp),
        dropout=bool(mdl.dropout),
    )


@dataclass(frozen=True)
class LayerOps:
    """One layer's forward work for one microbatch on one GPU (arrays over candidates).

    ``gemm_flops[k]`` is the FLOPs of matrix operator ``LAYER_GEMMS[k]``;
    ``memory_bytes`` the bytes of the memory-bound operators (norms, softmax,
    dropouts, activation function, residual additions); ``score_bytes`` the part of
    them that selective recomputation repeats (softmax and attention dropout).
    """

    gemm_flops: tuple[np.ndarray, ...]
    memory_bytes: np.ndarray
    score_bytes: np.ndarray


def layer_ops(shape: Shape, microbatch: np.ndarray, tp: np.ndarray, sequence_parallel: bool | np.ndarray) -> LayerOps:
    """Forward FLOPs and bytes of one layer, one microbatch, one GPU.

    Parameters
    ----------
    shape : Shape
        The model's shape.
    microbatch : array of int
        b, sequences per microbatch.
    tp : array of int
        t, the tensor-parallel degree (matrices and heads are split t ways).
    sequence_parallel : bool or array of bool
        Whether the operators outside attention and MLP run on 1/t of the sequence
        (Korthikanti et al. §4.2.2); without it every GPU of the group repeats them.
    """
    h, s = shape.hidden, shape.seq_len
    tokens = np.asarray(microbatch, dtype=np.float64) * s
    t = np.asarray(tp, dtype=np.float64)
    kv_width = h * shape.kv_heads / shape.heads
    mlp_in_width = shape.ffn_hidden * (2.0 if shape.gated_mlp else 1.0)
    gemm = (
        2.0 * tokens * h * (h + 2.0 * kv_width) / t,
        2.0 * tokens * s * h / t,
        2.0 * tokens * s * h / t,
        2.0 * tokens * h * h / t,
        2.0 * tokens * h * mlp_in_width / t,
        2.0 * tokens * shape.ffn_hidden * h / t,
    )
    # Elements of an h-wide activation on this GPU: 1/t of them with sequence parallelism.
    hidden_elements = tokens * h / np.where(sequence_parallel, t, 1.0)
    score_elements = tokens * s * shape.heads / t
    layer_norms = 2.0 * (2.0 * ELEMENT_BYTES) * hidden_elements  # two norms, read + write
    # Residual additions after attention and MLP (bias + dropout + add, fused): read the
    # branch and the residual, write the sum, and a mask when there is dropout.
    per_residual = 3.0 * ELEMENT_BYTES + (MASK_BYTES if shape.dropout else 0.0)
    residuals = 2.0 * per_residual * hidden_elements
    softmax = 2.0 * ELEMENT_BYTES * score_elements  # fused scale, mask and softmax
    attention_dropout = (2.0 * ELEMENT_BYTES + MASK_BYTES) * score_elements if shape.dropout else 0.0
    activation = (mlp_in_width + shape.ffn_hidden) * ELEMENT_BYTES * tokens / t  # GeLU or SwiGLU
    score_bytes = softmax + attention_dropout
    return LayerOps(gemm, layer_norms + residuals + activation + score_bytes, score_bytes)


def logits_flops(shape: Shape, microbatch: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Forward FLOPs of the output layer (``2 b s h V / t``), one microbatch, one GPU."""
    tokens = np.asarray(microbatch, dtype=np.float64) * shape.seq_len
    return 2.0 * tokens * shape.hidden * shape.vocab / np.asarray(tp, dtype=np.float64)


def logits_bytes(shape: Shape, microbatch: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Forward bytes of the vocabulary-parallel cross-entropy and the final norm, one microbatch, one GPU.

    The loss reads the logits twice (maximum, then exponentials and their sum) and
    writes the softmax once; the final layer norm reads and writes one activation.
    """
    tokens = np.asarray(microbatch, dtype=np.float64) * shape.seq_len
    t = np.asarray(tp, dtype=np.float64)
    return 3.0 * ELEMENT_BYTES * tokens * shape.vocab / t + 2.0 * ELEMENT_BYTES * tokens * shape.hidden


def embedding_bytes(shape: Shape, microbatch: np.ndarray) -> np.ndarray:
    """Forward bytes of the embedding look-up (gather a row per token, add the position), one microbatch."""
    tokens = np.asarray(microbatch, dtype=np.float64) * shape.seq_len
    return 3.0 * ELEMENT_BYTES * tokens * shape.hidden


def layer_params(shape: Shape) -> float:
    """Parameters of one layer: attention, MLP, two norms (weights and biases)."""
    h = shape.hidden
    kv_width = h * shape.kv_heads / shape.heads
    attention = h * (h + 2.0 * kv_width) + h * h
    mlp = h * shape.ffn_hidden * (3.0 if shape.gated_mlp else 2.0)
    return attention + mlp + 4.0 * h


def model_flops_per_sequence(shape: Shape, layers: float) -> float:
    """Model FLOPs of one sequence, forward and backward, no recomputation.

    ``3 x`` the forward matrix FLOPs: the layers' and the output layer's. This is
    Megatron-LM's count (``num_floating_point_operations``; Narayanan et al. eq. 3
    without its recomputation pass), the numerator of the MFU.
    """
    one = np.ones(1)
    ops = layer_ops(shape, one, one, True)
    forward = layers * sum(float(g[0]) for g in ops.gemm_flops) + float(logits_flops(shape, one, one)[0])
    return 3.0 * forward


def recompute_flops_per_sequence(
    shape: Shape, layers: int, recompute: np.ndarray, fused_attention: bool = False
) -> np.ndarray:
    """Matrix FLOPs recomputation adds per sequence.

    A layer forward (full) or QK^T and AV (selective); with fused attention the kernel's
    backward recomputes QK^T whatever the policy, and selective recomputation adds nothing.
    """
    one = np.ones(1)
    work = layer_ops(shape, one, one, True)
    forward = layers * sum(float(g[0]) for g in work.gemm_flops)
    scores = layers * sum(float(work.gemm_flops[k][0]) for k in SCORE_GEMMS)
    if fused_attention:
        in_kernel = layers * float(work.gemm_flops[SCORE_GEMMS[0]][0])
        return in_kernel + np.where(recompute == RECOMPUTE_FULL, forward, 0.0)
    return np.select([recompute == RECOMPUTE_FULL, recompute == RECOMPUTE_SELECTIVE], [forward, scores], 0.0)


@dataclass(frozen=True)
class LayoutWork:
    """What the GPUs of candidate layouts compute and move, and where the layers sit (arrays over candidates).

    With context parallelism a GPU holds ``b s / cp`` tokens of its microbatch: the operators
    count tokens as ``b s``, so ``sequences = b / cp`` stands for them (exactly b when cp = 1).
    """

    shape: Shape
    sequences: np.ndarray  # b / cp, the microbatch's share of one GPU, in sequences
    layer: LayerOps  # one layer, one microbatch, one GPU
    embedding_bytes: np.ndarray  # the embedding look-up, one microbatch
    logits_flops: np.ndarray  # the output layer, one microbatch, one GPU
    logits_bytes: np.ndarray  # the final norm and the cross-entropy, one microbatch, one GPU
    model_flops_per_sequence: float  # forward and backward, no recomputation
    recompute_flops_per_sequence: np.ndarray  # what recomputation adds
    stages: StageLayers  # layers on the first, last and fullest other pipeline GPU


def layout_work(mdl: ModelSection, lay: Layouts, degrees: ParallelDegrees, fused_attention: bool) -> LayoutWork:
    """The :class:`LayoutWork` of candidate layouts of the model ``mdl``, forward pass per microbatch."""
    shape = shape_of(mdl)
    b, t = degrees.microbatch / degrees.cp, degrees.tp
    return LayoutWork(
        shape=shape,
        sequences=b,
        layer=layer_ops(shape, b, t, lay.sequence_parallel),
        embedding_bytes=embedding_bytes(shape, b),
        logits_flops=logits_flops(shape, b, t),
        logits_bytes=logits_bytes(shape, b, t),
        model_flops_per_sequence=model_flops_per_sequence(shape, mdl.layers),
        recompute_flops_per_sequence=recompute_flops_per_sequence(shape, mdl.layers, lay.recompute, fused_attention),
        stages=stage_layers_of(mdl.layers, degrees.pp, degrees.interleave),
    )
