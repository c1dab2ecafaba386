"""Candidate layouts as arrays: the records the parts of the workload model share (docs/model.md §2).

The planner's screen evaluates millions of layouts at once, a simulation one at a time; both
hand the workload model a :class:`Layouts` (one element per candidate: its parallelism and its
GPU), and the model derives each candidate's :class:`ParallelDegrees` from it once per training
phase (:func:`mcsim.model.workload.parallel_degrees`) for its parts to share: what the GPUs
compute, the step time, the memory and the feasibility checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# ``model.recompute`` as the arrays hold it.
RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL = 0, 1, 2
RECOMPUTE_CODES = {"none": RECOMPUTE_NONE, "selective": RECOMPUTE_SELECTIVE, "full": RECOMPUTE_FULL}


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
    ep: np.ndarray  # expert-parallel degree (1 for a dense model)
    expert_tp: np.ndarray  # expert tensor-parallel degree


@dataclass(frozen=True)
class ParallelDegrees:
    """How each candidate splits the model and the batch over its GPUs (int64 arrays).

    ``dp``, ``microbatches`` and ``edp`` are at least 1 even where the division fails (the
    feasibility checks flag those candidates). The expert-parallel ranks lie inside the
    ``t cp d`` ranks of a pipeline stage (Megatron-Core's layout): ``expert_tp x ep`` of them
    hold the whole set of experts, ``edp`` such groups hold the same experts.
    """

    gpus: np.ndarray  # G
    tp: np.ndarray  # t
    pp: np.ndarray  # p
    cp: np.ndarray  # context-parallel degree
    dp: np.ndarray  # d = G / (t p cp)
    microbatch: np.ndarray  # b, sequences per microbatch
    microbatches: np.ndarray  # m = B / (d b), per pipeline per iteration
    interleave: np.ndarray  # v, model chunks per pipeline GPU
    ep: np.ndarray  # e, expert-parallel degree
    expert_tp: np.ndarray  # expert tensor-parallel degree
    edp: np.ndarray  # expert data-parallel degree t cp d / (expert_tp e), at least 1
