"""Which layers each pipeline GPU holds (docs/model.md §2b).

The model's layers are cut into ``p x v`` chunks (``p`` pipeline stages, ``v`` interleaved
chunks per GPU); uneven divisions give the outermost chunks one layer fewer, and chunk ``k``
sits on GPU ``k mod p`` (Megatron's interleaved placement). The first GPU also holds the
embedding, the last the output layer: the step-time model paces the pipeline by the slowest
of them and the memory model counts the fullest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StageLayers:
    """Layers on the first GPU, the last GPU and the fullest other GPU of a pipeline (arrays)."""

    first: np.ndarray
    last: np.ndarray
    middle: np.ndarray  # 0 when p <= 2


def stage_layers(layers: int, stages: int) -> list[int]:
    """Layers on each pipeline stage.

    When ``stages`` does not divide ``layers`` the stages that get one layer
    fewer are the outermost ones, first and last alternately (the first stage
    also holds the embedding, the last the output layer), as Llama 3 did
    (arXiv 2407.21783, §3.3.2).
    """
    per, extra = divmod(layers, stages)
    if extra == 0:
        return [per] * stages
    counts = [per + 1] * stages
    order = [i // 2 if i % 2 == 0 else stages - 1 - i // 2 for i in range(stages)]
    for stage in order[: stages - extra]:
        counts[stage] = per
    return counts


def gpu_layer_counts(layers: int, stages: int, interleave: int) -> list[int]:
    """Layers each of ``stages`` GPUs holds when the model is cut into ``stages x interleave`` chunks.

    Chunk k sits on GPU ``k mod stages`` (Megatron's interleaved placement); the
    chunks' sizes follow :func:`stage_layers` (outermost chunks
    one layer fewer when the division is uneven).
    """
    chunks = stage_layers(layers, stages * interleave)
    counts = [0] * stages
    for k, n in enumerate(chunks):
        counts[k % stages] += n
    return counts


def stage_layers_of(layers: int, pp: np.ndarray, interleave: np.ndarray) -> StageLayers:
    """:class:`StageLayers` per candidate (computed once per distinct ``(p, v)``)."""
    first = np.zeros(pp.shape, dtype=np.float64)
    last = np.zeros(pp.shape, dtype=np.float64)
    middle = np.zeros(pp.shape, dtype=np.float64)
    keys, inverse = np.unique(np.asarray(pp, dtype=np.int64) * 4096 + interleave, return_inverse=True)
    inverse = inverse.reshape(-1)
    for k, key in enumerate(keys):
        p, v = divmod(int(key), 4096)  # interleave <= 1024 (the schema's bound)
        counts = gpu_layer_counts(layers, max(min(p, layers), 1), max(min(v, layers), 1))
        chosen = inverse == k
        first[chosen] = counts[0]
        last[chosen] = counts[-1]
        middle[chosen] = max(counts[1:-1], default=0)
    return StageLayers(first, last, middle)
