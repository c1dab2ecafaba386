"""Memory per GPU of candidate layouts: model state and activations (docs/model.md §2).

A GPU holds the model state of the parameters it keeps (BF16 weights and gradients, FP32 Adam
state, sharded by the ZeRO stage; FP8 copies of the weights under ``compute.fp8``) and the
activations of the microbatches in flight on its pipeline stage under 1F1B (Korthikanti et
al.'s per-layer counts). Reported in GB (1e9 bytes); arrays over candidates.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mcsim.model.layouts import RECOMPUTE_CODES, Layouts, ParallelDegrees
from mcsim.model.pipeline_stages import StageLayers
from mcsim.scenario.config import Config
from mcsim.scenario.schema import ModelSection

# The memory model (§2, Korthikanti et al.'s formulas plus the model state) against measured
# memory: BigScience's 181B benchmark on 80 GB A100s (docs/validation.md, "Memory") used 1.15
# to 1.49 times what the model counts (framework buffers, allocator, the recomputed layer).
# mcsim report widens the recommendation's memory by this range (tests/model/test_steptime.py
# keeps it the validation's).
MEMORY_MEASURED_OVER_MODEL = (1.15, 1.49)


def memory_per_gpu_gb(cfg: Config, lay: Layouts, deg: ParallelDegrees, stages: StageLayers | None) -> np.ndarray:
    """Memory per GPU of every candidate, GB: the model state of the GPU that holds the most parameters plus
    the activations of the fullest pipeline stage.

    ``stages``: the layers each pipeline GPU holds, under the operator model, which places the
    embedding and the output layer on the end stages (:func:`params_held_per_gpu`); None: the
    aggregate model's even spread of the parameters, N / (t p).
    """
    mdl = cfg.model
    t, p, c, d = deg.tp, deg.pp, deg.cp, deg.dp
    params_held = mdl.params / (t * p) if stages is None else params_held_per_gpu(mdl, t, p, stages)
    state_bytes = params_held * model_state_bytes_per_param(lay.zero_stage, d * c)
    if cfg.compute.fp8:  # FP8 copies of the weights, 1 byte each, where the GPU computes in FP8
        held = params_held / np.where(lay.zero_stage >= 3, d * c, 1)
        state_bytes = state_bytes + np.where(lay.fp8_tflops > 0, held, 0.0)
    per_layer = _activation_per_layer(mdl, deg.microbatch, t, lay.recompute, lay.sequence_parallel, c)
    return (state_bytes + per_layer * peak_stage_microbatch_layers(mdl.layers, p, deg.microbatches)) / 1e9


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
