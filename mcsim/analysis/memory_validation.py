"""Published memory per GPU of Megatron-DeepSpeed layouts, and the memory model held against it.

``mcsim validate --memory`` (and tests/model/test_memory_validation.py) evaluate the memory
model (docs/model.md §2b, "Memory"; :mod:`mcsim.model.memory`) on every layout below with
the blocking pipeline engine (DeepSpeed's, which these runs used) and report model / measured.
The caching allocator's reserve (:data:`mcsim.model.memory.ALLOCATOR_RESERVE`), the model's
one fitted number, is fitted leave-one-out: a layout's prediction uses the reserve that best
fits the other measured layouts (least squares in log memory), never its own measurement.

Source: the BigScience BLOOM team's benchmarks before training (bigscience-workshop/bigscience,
``train/tr11-176B-ml/chronicles-prequel.md``), on Jean Zay's A100 80GB, Megatron-DeepSpeed
with DeepSpeed's pipeline engine, ZeRO stage 1, full recomputation, tied embeddings, sequence
2,048, "Mem" the most memory a GPU of the first node used (read with nvidia-smi, whose MiB
over 1,024 the source's GB are), "OOM" a layout that ran out of memory:

- ``bigscience2022``: the 181B model (72 layers, hidden 14,336, 64 heads), tables of
  2022-02-25, 15 layouts with a memory figure and 3 out of memory. TP 4, PP 12, DP 8,
  microbatch 2 was measured twice, 44 and 38 GB: both are kept, and the layout is within the
  tolerance when it is within it of either (the source's own repeat differs by 16 %). Also
  that day: hidden 12,288, 96 layers at TP 1, PP 48 (64 heads as the day's tables state).
- ``bigscience2022_0221``: the same 181B model on 2022-02-21, TP 8, PP 12 and 6, microbatch 1
  to 8.
- ``bigscience2022_0217``: hidden 14,400 on 2022-02-17 (BF16 table): 20B (8 layers, 32
  heads) on one node, 200B (80 layers, 96 heads) at DP 1 and 2; "VOCAB_LENGTH=250k", taken
  as BLOOM's padded 250,880.

Not encoded: the tables of 2022-02-28 onward, after the team moved to DeepSpeed's BF16
optimizer (FP32 gradient accumulation, 4 more bytes per parameter unsharded) and balanced the
embedding as a pipeline layer, neither of which the model has; the 2022-02-20 tables, whose
layer counts are not given per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcsim.analysis.steptime_validation import JEAN_ZAY, StepCase, case_config
from mcsim.model.memory import capacity_gb, memory_bytes
from mcsim.model.pipeline_stages import stage_layers_of
from mcsim.model.workload import layouts_of, parallel_degrees

GIB = 2**30
BYTES_PER_SOURCE_GB = GIB  # the source's GB are nvidia-smi's MiB / 1,024
GPU_MEMORY_GIB = 80.0  # A100 80GB
ENGINE = "blocking-1f1b"  # DeepSpeed's pipeline engine
TOLERANCE = 0.10  # model / measured within +-10 % on every measured layout
RESERVE_GRID = np.round(np.arange(1.0, 1.6005, 0.001), 3)


@dataclass(frozen=True)
class MemoryCase:
    """One published layout: its shape, layout and the memory it used (GB as published), or None for OOM."""

    source: str
    layers: int
    hidden: int
    heads: int
    tp: int
    pp: int
    dp: int
    microbatch: int
    global_batch: int
    measured: tuple[float, ...] | None  # every published reading of the layout; None: out of memory

    @property
    def name(self) -> str:
        """The layout as the tables write it."""
        shape = "" if (self.layers, self.hidden) == (72, 14336) else f"L{self.layers} h{self.hidden} "
        return f"{shape}TP{self.tp} PP{self.pp} DP{self.dp} mb{self.microbatch}"


def _case(source: str, tp: int, pp: int, dp: int, mb: int, batch: int, *measured: float, shape=(72, 14336, 64)):
    layers, hidden, heads = shape
    return MemoryCase(source, layers, hidden, heads, tp, pp, dp, mb, batch, measured or None)


OOM: tuple[float, ...] = ()
B25, B21, B17 = "bigscience2022", "bigscience2022_0221", "bigscience2022_0217"
MEMORY_CASES: tuple[MemoryCase, ...] = (
    # 2022-02-25 ("GBS Variations", "some more configs with lower PP", "Tweaking TP"): TP, PP, DP, mb, batch, GB.
    _case(B25, 8, 6, 8, 4, 2048, 55.0),
    _case(B25, 8, 6, 8, 6, 2016, 66.0),
    _case(B25, 8, 12, 4, 4, 2048, 49.0),
    _case(B25, 8, 8, 6, 4, 2016, 52.0),
    _case(B25, 8, 4, 12, 2, 2016, 53.0),
    _case(B25, 8, 4, 12, 4, 2016, 59.0),
    _case(B25, 8, 2, 24, 1, 2016, 65.0),
    _case(B25, 8, 2, 24, 2, 2016, 76.0),
    _case(B25, 4, 12, 8, 4, 2048, 60.0),
    _case(B25, 4, 12, 8, 2, 2048, 44.0, 38.0),
    _case(B25, 4, 6, 16, 4, 2048, 75.0),
    _case(B25, 4, 6, 16, 2, 2048, 57.0),
    _case(B25, 2, 12, 16, 2, 2048, 63.0),
    _case(B25, 2, 24, 8, 1, 2048, 44.0),
    _case(B25, 2, 24, 8, 2, 2048, 53.0),
    _case(B25, 1, 48, 8, 1, 2048, 58.0, shape=(96, 12288, 64)),
    _case(B25, 8, 1, 48, 1, 2016),
    _case(B25, 2, 6, 32, 2, 2048),
    _case(B25, 2, 6, 32, 1, 2048),
    # 2022-02-21 ("48 node contenders", NHIDDEN=14336 / NLAYERS=72).
    _case(B21, 8, 12, 4, 1, 2048, 29.0),
    _case(B21, 8, 12, 4, 2, 2048, 37.0),
    _case(B21, 8, 12, 4, 4, 2048, 49.0),
    _case(B21, 8, 12, 4, 8, 2048, 69.0),
    _case(B21, 8, 6, 8, 1, 2048, 38.0),
    _case(B21, 8, 6, 8, 2, 2048, 44.0),
    _case(B21, 8, 6, 8, 4, 2048, 56.0),
    # 2022-02-17 ("Best TFLOPs", bf16 table): NHIDDEN=14400, 20B on 1 node, 200B on 10 and 20.
    _case(B17, 8, 1, 1, 1, 2048, 68.0, shape=(8, 14400, 32)),
    _case(B17, 8, 10, 1, 1, 2048, 75.0, shape=(80, 14400, 96)),
    _case(B17, 8, 10, 2, 1, 2048, 53.0, shape=(80, 14400, 96)),
)


def _step_case(case: MemoryCase) -> StepCase:
    """The case as the step-time validation's scenario builder takes it (the time is not used)."""
    return StepCase(
        case.source, case.name, JEAN_ZAY, case.layers, case.hidden, case.heads, 250880, 2048, case.global_batch,
        case.tp * case.pp * case.dp, case.tp, case.pp, case.microbatch, 1, "full", False, 0.0, 0.0, 0.0, False, 1,
        1.0, tied_embeddings=True,
    )  # fmt: skip


def memory_parts(case: MemoryCase) -> tuple[float, float]:
    """(bytes in the allocator's tensors, bytes outside it) of the case's fullest GPU.

    As :func:`mcsim.model.memory.memory_bytes` counts them, under the blocking engine.
    """
    cfg = case_config(_step_case(case))
    lay = layouts_of([cfg])
    deg = parallel_degrees(lay, cfg.model.global_batch)
    stages = stage_layers_of(cfg.model.layers, deg.pp, deg.interleave)
    allocated, fixed = memory_bytes(cfg, lay, deg, stages, ENGINE)
    return float(allocated[0]), fixed


@dataclass(frozen=True)
class MemoryResult:
    """A layout's leave-one-out prediction."""

    case: MemoryCase
    reserve: float  # fitted on the other measured layouts
    model_gb: float  # 1e9 bytes

    @property
    def measured_gb(self) -> tuple[float, ...]:
        """The published readings in 1e9 bytes (none: out of memory)."""
        return tuple(m * BYTES_PER_SOURCE_GB / 1e9 for m in self.case.measured or ())

    @property
    def ratio(self) -> float:
        """Model over the nearest published reading (NaN for a layout that ran out of memory)."""
        ratios = [self.model_gb / m for m in self.measured_gb]
        return min(ratios, key=lambda r: abs(np.log(r))) if ratios else float("nan")

    @property
    def refused(self) -> bool:
        """The model puts the layout above the GPU's memory."""
        return self.model_gb > float(capacity_gb(GPU_MEMORY_GIB))


def leave_one_out(cases: tuple[MemoryCase, ...] = MEMORY_CASES) -> list[MemoryResult]:
    """Each layout predicted with the reserve fitted to the other measured layouts (every reading counts)."""
    parts = [memory_parts(c) for c in cases]
    results = []
    for i, case in enumerate(cases):
        errors = np.zeros_like(RESERVE_GRID)
        for j, (other, (allocated, fixed)) in enumerate(zip(cases, parts, strict=True)):
            if j == i or other.measured is None:
                continue
            model = (allocated * RESERVE_GRID + fixed) / 1e9
            for reading in other.measured:
                errors += np.log(model / (reading * BYTES_PER_SOURCE_GB / 1e9)) ** 2
        reserve = float(RESERVE_GRID[int(np.argmin(errors))])
        allocated, fixed = parts[i]
        results.append(MemoryResult(case, reserve, (allocated * reserve + fixed) / 1e9))
    return results


def memory_passes(results: list[MemoryResult]) -> bool:
    """Every measured layout within :data:`TOLERANCE`, every out-of-memory layout refused, none that ran refused."""
    measured = [r for r in results if r.case.measured is not None]
    within = all(abs(r.ratio - 1.0) <= TOLERANCE for r in measured)
    out_refused = all(r.refused for r in results if r.case.measured is None)
    return within and out_refused and not any(r.refused for r in measured)


def memory_band(results: list[MemoryResult]) -> tuple[float, float]:
    """The leave-one-out model / measured over the measured layouts: (lowest, highest)."""
    ratios = [r.ratio for r in results if r.case.measured is not None]
    return min(ratios), max(ratios)


def memory_table(results: list[MemoryResult]) -> str:
    """The comparison as text: one layout a line, then the band and the out-of-memory verdicts."""
    capacity = float(capacity_gb(GPU_MEMORY_GIB))
    lines = [f"{'source':<20} {'layout':<28} {'measured GB':>12} {'model GB':>9} {'ratio':>6} {'reserve':>7}"]
    for r in results:
        shown = "OOM" if r.case.measured is None else "/".join(f"{m:.1f}" for m in r.measured_gb)
        ratio = "refused" if r.case.measured is None and r.refused else f"{r.ratio:.3f}"
        row = f"{r.case.source:<20} {r.case.name:<28} {shown:>12} {r.model_gb:>9.1f} {ratio:>6} {r.reserve:>7.3f}"
        lines.append(row)
    low, high = memory_band(results)
    measured = [r for r in results if r.case.measured is not None]
    out = [r for r in results if r.case.measured is None]
    lines.append(
        f"memory: {len(measured)} measured layouts, model / measured {low:.3f} to {high:.3f} "
        f"({sum(abs(r.ratio - 1) <= TOLERANCE for r in measured)} within +-{TOLERANCE:.0%}); "
        f"{sum(r.refused for r in out)} of {len(out)} out-of-memory layouts refused, "
        f"{sum(r.refused for r in measured)} that ran refused (capacity {capacity:.1f} GB = {GPU_MEMORY_GIB:g} GiB)"
    )
    return "\n".join(lines)
