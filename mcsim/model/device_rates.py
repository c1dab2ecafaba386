"""What one operator or one collective costs on a GPU and its links (docs/model.md §2b): the operator
step-time model's rates, shared by the dense layers (:mod:`mcsim.model.steptime`) and the
mixture-of-experts layers (:mod:`mcsim.model.experts`).

- Matrix operators: ``flops / (peak x efficiency x curve(flops))``; memory-bound kernels:
  ``bytes / (HBM bandwidth x curve(bytes))``; the curves are Calculon's (Isaev et al., SC'23).
- Collectives: a :class:`Link` per group, and the reduce-scatter or all-gather step of a ring
  over it, NCCL's rings through every local GPU once the group leaves a node; what stays exposed
  of the data-parallel exchange by ZeRO stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Calculon's matrix efficiency by operator size (GFLOP -> fraction of peak) and memory
# efficiency by bytes moved (MB -> fraction of HBM bandwidth): systems/a100_80g.json and
# h100_80g_nvl8.json of github.com/calculon-ai/calculon (Isaev et al., "Calculon: a
# methodology and tool for high-level co-design of systems and large language models",
# SC'23). Calculon steps between the knots; mcsim interpolates in log(1 + size).
MATRIX_KNOTS_GFLOP = np.array([0.0, 1.0, 16.0, 128.0])
MATRIX_EFFICIENCY = np.array([0.1, 0.6, 0.9, 0.95])
MEMORY_KNOTS_MB = np.array([0.0, 1.0, 10.0, 100.0])
MEMORY_EFFICIENCY = np.array([0.3, 0.6, 0.75, 0.9])


def matrix_efficiency(gflop: np.ndarray) -> np.ndarray:
    """Fraction of peak a matrix operator of ``gflop`` GFLOP reaches (before ``compute.efficiency``)."""
    return np.interp(np.log1p(gflop), np.log1p(MATRIX_KNOTS_GFLOP), MATRIX_EFFICIENCY)


def memory_efficiency(megabytes: np.ndarray) -> np.ndarray:
    """Fraction of HBM bandwidth a memory-bound kernel moving ``megabytes`` MB reaches."""
    return np.interp(np.log1p(megabytes), np.log1p(MEMORY_KNOTS_MB), MEMORY_EFFICIENCY)


def gemm_seconds(flops: np.ndarray, peak_flops: np.ndarray, efficiency: float | np.ndarray) -> np.ndarray:
    """Time of one matrix operator, s."""
    return flops / (peak_flops * efficiency * matrix_efficiency(flops / 1e9))


def memory_seconds(nbytes: np.ndarray, hbm_bytes_per_s: np.ndarray, kernels: float = 1.0) -> np.ndarray:
    """Time of ``kernels`` memory-bound kernels moving ``nbytes`` in all, s."""
    return nbytes / (hbm_bytes_per_s * memory_efficiency(nbytes / kernels / 1e6))


@dataclass(frozen=True)
class Link:
    """A collective's link: bus bandwidth (bytes/s, after the collective efficiency), per-hop latency (s),
    and whether the group stays inside a node (its bytes count as intra-node traffic).

    A group that spans nodes with several members in each (``local_ranks`` > 1) runs NCCL's
    rings through every local GPU and NIC: ``bus_bytes_per_s`` is then the inter-node
    bandwidth per GPU and ``local_bus_bytes_per_s`` the intra-node one. ``local_ranks``
    None: a flat ring at ``bus_bytes_per_s`` (the pipeline's point-to-point transfers and
    ring attention, paced by their slowest hop).
    """

    bus_bytes_per_s: np.ndarray
    latency_s: float
    inside: bool | np.ndarray = True
    local_ranks: np.ndarray | None = None
    local_bus_bytes_per_s: float | np.ndarray | None = None


def ring_step_bytes(ranks: np.ndarray, nbytes: np.ndarray, link: Link) -> tuple[np.ndarray, np.ndarray]:
    """(intra-node, inter-node) bytes one GPU sends in a reduce-scatter or all-gather step of ``nbytes``.

    A ring over n ranks sends ``(n-1)/n`` of the bytes per GPU. With k members of the group in
    each node and more than one node, NCCL lays k rings (channels) node by node, each leaving
    a node through a different GPU's NIC (Jeaugey, "NCCL 2.0", GTC 2017; the nccl-tests
    performance notes): every ring edge carries ``(n-1)/n bytes / k``, a GPU's NIC one edge
    of them and its NVLink the other k-1. One node (k = n): every edge is inside it.
    """
    n = np.maximum(ranks, 1).astype(np.float64)
    flat = np.where(ranks <= 1, 0.0, (n - 1.0) / n * nbytes)
    if link.local_ranks is None:
        return np.where(link.inside, flat, 0.0), np.where(link.inside, 0.0, flat)
    k = np.clip(np.asarray(link.local_ranks, dtype=np.float64), 1.0, n)
    spans = k < n
    return np.where(spans, flat * (k - 1.0) / k, flat), np.where(spans, flat / k, 0.0)


def ring_step_seconds(ranks: np.ndarray, nbytes: np.ndarray, link: Link) -> np.ndarray:
    """One reduce-scatter or all-gather over a ring of ``ranks``, s (0 for 1 rank).

    Flat: ``(n-1)/n bytes/bw + (n-1) latency``. A group with several members in each of
    several nodes (:func:`ring_step_bytes`): NCCL pipelines the rings, so the step takes the
    slower of its NVLink and its NIC share, ``max(intra bytes / bw_intra, inter bytes /
    bw_inter) + (n-1) latency``. With one member per node this is the flat ring at the
    inter-node rate; with all in one node, the flat ring inside it.
    """
    n = np.maximum(ranks, 1).astype(np.float64)
    hops = (n - 1.0) * link.latency_s
    if link.local_ranks is None:
        seconds = (n - 1.0) / n * nbytes / link.bus_bytes_per_s + hops
        return np.where(ranks <= 1, 0.0, seconds)
    intra, inter = ring_step_bytes(ranks, nbytes, link)
    local_bw = link.local_bus_bytes_per_s if link.local_bus_bytes_per_s is not None else link.bus_bytes_per_s
    seconds = np.maximum(intra / local_bw, inter / link.bus_bytes_per_s) + hops
    return np.where(ranks <= 1, 0.0, seconds)


def _hidden(seconds: np.ndarray, window: np.ndarray, overlap: float | np.ndarray) -> np.ndarray:
    """What stays exposed of ``seconds`` of traffic when ``overlap`` of it may hide behind ``window`` of compute."""
    return seconds - np.minimum(overlap * seconds, window)


def data_parallel_exposed(
    zero_stage: np.ndarray,
    ring_step_s: np.ndarray,
    microbatches: np.ndarray,
    windows: tuple[np.ndarray, np.ndarray],
    overlap: float | np.ndarray,
) -> np.ndarray:
    """Exposed data-parallel traffic per iteration, s.

    ``ring_step_s`` is one reduce-scatter or all-gather of the GPU's gradients (or
    weights); ``windows`` the slowest stage's (forward, backward) time of one microbatch.

    - Stage 0: one all-reduce after accumulation, behind the last microbatch's backward.
    - Stage 1 (Megatron's distributed optimizer): a reduce-scatter behind the last
      backward, the updated weights' all-gather behind the next iteration's first forward.
    - Stage 2: a reduce-scatter per microbatch (gradients are not kept whole), each
      behind its backward, then the all-gather.
    - Stage 3 (FSDP): per microbatch, the weights gathered for the forward and again for
      the backward, and the gradients reduce-scattered: one step behind the forward, two
      behind the backward (Rajbhandari et al. 2020, §5; Zhao et al., PyTorch FSDP, VLDB
      2023, arXiv 2304.11277).
    """
    forward, backward = windows
    gather = _hidden(ring_step_s, forward, overlap)
    scatter = _hidden(ring_step_s, backward, overlap)
    by_stage = (
        _hidden(2.0 * ring_step_s, backward, overlap),
        scatter + gather,
        microbatches * scatter + gather,
        microbatches * (gather + _hidden(2.0 * ring_step_s, backward, overlap)),
    )
    return np.choose(np.asarray(zero_stage), by_stage)
