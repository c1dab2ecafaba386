"""Published iteration times of Megatron-style training, and the step-time model held against them.

``mcsim validate --step-time`` (and the tests) evaluate the operator step-time model
(docs/model.md §2b) on every published case below, with ``compute.efficiency`` fitted
leave-one-out: a case's prediction uses the efficiency that best fits the other cases
from the same source (least squares in log time), never itself. Layout comparisons
(several layouts of one model on one machine) are scored by the share of their pairs
the model orders as measured. ``docs/validation.md`` ("Step time") reports the errors.

Every case's shape, layout and measured figure comes from its source alone:

- ``narayanan2021``: Narayanan et al., SC'21 (arXiv 2104.04473), Table 1: achieved
  TFLOP/s per A100 with their eq. 3 FLOP count ``96 B s L h^2 (1 + s/6h + V/16Lh)``
  (so the measured iteration time is that count over GPUs x TFLOP/s); microbatch,
  interleaving, full recomputation and the DDP implementation from the paper's launch
  script (Megatron-LM ``examples/academic_paper_scripts/sc21/run_table_1.sh``); no
  sequence parallelism (it came later); vocabulary 51,200, sequence 2,048.
- ``korthikanti2022``: Korthikanti et al., MLSys 2023 (arXiv 2205.05198), Table 3
  (shapes, layouts) and Table 5 (iteration time with full recomputation, and with
  selective recomputation plus sequence parallelism); the same Selene machine.
- ``megatron_core_2024``: the Megatron-LM README's H100 weak-scaling table (Megatron-Core
  r0.8.0, July 2024): per-GPU TFLOP/s with Megatron's ``num_floating_point_operations``
  count, vocabulary 131,072, sequence 4,096, data-parallel 48. It states overlapped DP,
  TP and PP communication and the distributed optimizer (ZeRO stage 1: ``overlap-param-
  gather``); **assumed** (not stated): microbatch 1, no recomputation, no interleaving,
  sequence parallelism, fused attention.

- ``bigscience2022``: the BigScience BLOOM team's layout benchmark before training
  (bigscience-workshop/bigscience, ``train/tr11-176B-ml/chronicles-prequel.md``, tables of
  2022-02-25): one 181B model (72 layers, hidden 14,336, 64 heads, vocabulary 250,880,
  tied embeddings, sequence 2,048) on 48 nodes of Jean Zay; every timed row at the
  training batch that day, 17 layouts (TP, PP, DP, microbatch), seconds of the second
  iteration. Every case is one **layout comparison**. Stated: Megatron-DeepSpeed with
  DeepSpeed's pipeline engine, ZeRO stage 1, full recomputation; **assumed**: BF16 or FP16
  (the same A100 peak), no sequence parallelism, no fused attention (neither existed in
  that software), DeepSpeed's blocking pipeline transfers and gradient reduction after the
  pipeline (nothing overlapped). The layout TP 4, PP 12, DP 8, microbatch 2 was measured
  twice (110.48 s and 113.54 s); the case is their mean, and their 2.8 % spread is the
  benchmark's repeatability. The batch is 2,048 or 2,016 (a multiple of DP); the layouts
  are compared by time per sequence.
- ``bigscience2022_0221``: the same model, software and machine four days earlier (the same
  file, the two tables of 2022-02-21 with ``NHIDDEN=14336 / NLAYERS=72``): TP 8, PP 12 and 6,
  microbatch 1 to 8, batch 2,048, seven layouts, one **layout comparison**. A source of its
  own: on 2022-02-25 the team noted that the A100s' PCI Express and NUMA settings had been
  improved that day ("all TFLOPs have changed for the better (1-5%) - thus do not compare
  today's numbers to yesterday's"), so the two days get their own efficiency and are not
  compared with each other.

Machines: Selene, DGX A100 80GB (NVLink3 600 GB/s per GPU, both directions; 8 HDR
InfiniBand links of 25 GB/s per node, one per GPU); the H100 runs on DGX H100 (NVLink4
900 GB/s; 8 NDR links of 50 GB/s per node). Jean Zay: 8 A100 80GB per node with NVLink3
(600 GB/s) and 4 Omni-Path links per node (the BLOOM training README); 100 Gb/s each, 6.25
GB/s per GPU, is an assumption (as in ``scenarios/bloom-176b.toml``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np

from mcsim.model.steptime import STEP_TIME_ERROR
from mcsim.model.workload import layouts_of, workload_arrays
from mcsim.scenario.config import Config, load_scenario

EFFICIENCY_GRID = np.round(np.arange(0.30, 1.0005, 0.001), 3)

SELENE = {"hardware.gpu": "A100-80GB", "network.intra_gbps": 600.0, "network.inter_gbps": 25.0}
JEAN_ZAY = {"hardware.gpu": "A100-80GB", "network.intra_gbps": 600.0, "network.inter_gbps": 6.25}
DGX_H100 = {"hardware.gpu": "H100-SXM", "network.intra_gbps": 900.0, "network.inter_gbps": 50.0}


@dataclass(frozen=True)
class StepCase:
    """One published measurement: a model, its layout, its machine and its iteration time."""

    source: str
    name: str
    machine: dict
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    global_batch: int
    gpus: int
    tp: int
    pp: int
    microbatch: int
    interleave: int
    recompute: str
    sequence_parallel: bool
    overlap_dp: float
    overlap_tp: float
    overlap_pp: float
    fused_attention: bool
    zero_stage: int
    measured_s: float  # published iteration time, s (or derived from the published TFLOP/s, see the source)
    comparison: str = ""  # cases with the same label are layouts of one model on one machine
    tied_embeddings: bool = False  # the output layer shares the embedding's weights (BLOOM)


def _narayanan_time(layers: int, hidden: int, batch: int, gpus: int, tflops: float) -> float:
    """Iteration time from Table 1's TFLOP/s: their eq. 3 FLOPs over GPUs x TFLOP/s."""
    seq, vocab = 2048, 51200
    flops = 96.0 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
    return flops / (gpus * tflops * 1e12)


def _megatron_core_time(layers: int, hidden: int, batch: int, gpus: int, tflops: float) -> float:
    """Iteration time from the README's TFLOP/s: Megatron's model FLOPs (no recomputation) over GPUs x TFLOP/s."""
    seq, vocab = 4096, 131072
    flops = 12.0 * batch * seq * layers * hidden**2 * ((1 + 1 + seq / hidden) + 4 + vocab / (2 * layers * hidden))
    return flops / (gpus * tflops * 1e12)


def _narayanan(name, heads, hidden, layers, tp, pp, gpus, batch, micro, interleave, torch_ddp, tflops):
    return StepCase(
        "narayanan2021", name, SELENE, layers, hidden, heads, 51200, 2048, batch, gpus, tp, pp, micro, interleave,
        "full", False, 1.0 if torch_ddp else 0.0, 0.0, 0.0, False, 0,
        _narayanan_time(layers, hidden, batch, gpus, tflops),
    )  # fmt: skip


def _korthikanti(name, heads, hidden, layers, pp, interleave, batch, micro, seconds, selective):
    return StepCase(
        "korthikanti2022", f"{name} {'selective+SP' if selective else 'full'}", SELENE, layers, hidden, heads,
        51200, 2048, batch, 8 * pp, 8, pp, micro, interleave, "selective" if selective else "full", selective,
        0.0, 0.0, 0.0, False, 0, seconds, comparison=f"korthikanti2022 {name}",
    )  # fmt: skip


def _megatron_core(name, heads, hidden, layers, tp, pp, batch, tflops):
    gpus = 48 * tp * pp
    return StepCase(
        "megatron_core_2024", name, DGX_H100, layers, hidden, heads, 131072, 4096, batch, gpus, tp, pp, 1, 1,
        "none", tp > 1, 1.0, 1.0, 1.0, True, 1, _megatron_core_time(layers, hidden, batch, gpus, tflops),
    )  # fmt: skip


def _bigscience(tp, pp, dp, micro, batch, seconds, source="bigscience2022"):
    return StepCase(
        source, f"TP{tp} PP{pp} DP{dp} mb{micro}", JEAN_ZAY, 72, 14336, 64, 250880, 2048, batch, 384, tp, pp,
        micro, 1, "full", False, 0.0, 0.0, 0.0, False, 1, seconds, comparison=f"{source} 181B",
        tied_embeddings=True,
    )  # fmt: skip


STEP_CASES: tuple[StepCase, ...] = (
    # Narayanan et al. 2021, Table 1 (TFLOP/s per GPU) and run_table_1.sh (microbatch, interleaving, DDP).
    _narayanan("1.7B", 24, 2304, 24, 1, 1, 32, 512, 16, 1, True, 137),
    _narayanan("3.6B", 32, 3072, 30, 2, 1, 64, 512, 16, 1, True, 138),
    _narayanan("7.5B", 32, 4096, 36, 4, 1, 128, 512, 16, 1, True, 142),
    _narayanan("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 8, 1, True, 135),
    _narayanan("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 4, 1, False, 138),
    _narayanan("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 2, 3, False, 140),
    _narayanan("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 2, 2, False, 148),
    _narayanan("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 1, 2, False, 155),
    _narayanan("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 1, 3, False, 163),
    _narayanan("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 1, 1, False, 163),
    # Korthikanti et al. 2022, Table 3 (layouts) and Table 5 (seconds per iteration).
    _korthikanti("22B", 64, 6144, 48, 1, 1, 4, 4, 1.42, False),
    _korthikanti("22B", 64, 6144, 48, 1, 1, 4, 4, 1.10, True),
    _korthikanti("175B", 96, 12288, 96, 8, 3, 64, 1, 18.13, False),
    _korthikanti("175B", 96, 12288, 96, 8, 3, 64, 1, 13.75, True),
    _korthikanti("530B", 128, 20480, 105, 35, 3, 280, 1, 49.05, False),
    _korthikanti("530B", 128, 20480, 105, 35, 3, 280, 1, 37.83, True),
    _korthikanti("1T", 160, 25600, 128, 64, 1, 512, 1, 94.42, False),
    _korthikanti("1T", 160, 25600, 128, 64, 1, 512, 1, 71.49, True),
    # Megatron-LM README (Megatron-Core r0.8.0, H100): heads, hidden, layers, TP, PP, batch, TFLOP/s per GPU.
    _megatron_core("1.7B", 16, 2048, 24, 1, 1, 192, 408.8),
    _megatron_core("7.1B", 32, 4096, 30, 2, 1, 192, 465.9),
    _megatron_core("16B", 48, 6144, 32, 4, 1, 192, 489.1),
    _megatron_core("32B", 56, 7168, 48, 8, 1, 192, 459.6),
    _megatron_core("70B", 64, 8192, 84, 8, 2, 384, 419.7),
    _megatron_core("119B", 80, 10240, 92, 8, 4, 768, 420.5),
    _megatron_core("177B", 96, 12288, 96, 8, 6, 1152, 432.8),
    _megatron_core("314B", 128, 16384, 96, 8, 8, 1536, 474.4),
    _megatron_core("462B", 144, 18432, 112, 8, 16, 3072, 459.9),
    # BigScience, chronicles-prequel.md, 2022-02-25: TP, PP, DP, microbatch, batch, seconds per iteration.
    _bigscience(8, 6, 8, 4, 2048, 114.11),
    _bigscience(8, 6, 8, 6, 2016, 123.57),
    _bigscience(8, 12, 4, 4, 2048, 117.07),
    _bigscience(8, 12, 4, 2, 2048, 128.82),
    _bigscience(8, 8, 6, 4, 2016, 113.16),
    _bigscience(8, 4, 12, 2, 2016, 125.52),
    _bigscience(8, 4, 12, 4, 2016, 114.81),
    _bigscience(8, 2, 24, 1, 2016, 145.45),
    _bigscience(8, 2, 24, 2, 2016, 136.13),
    _bigscience(4, 12, 8, 4, 2048, 111.89),
    _bigscience(4, 12, 8, 2, 2048, (110.48 + 113.54) / 2.0),  # measured twice: their mean
    _bigscience(4, 6, 16, 4, 2048, 117.11),
    _bigscience(4, 6, 16, 2, 2048, 111.71),
    _bigscience(2, 12, 16, 2, 2048, 112.50),
    _bigscience(2, 24, 8, 1, 2048, 119.53),
    _bigscience(2, 24, 8, 2, 2048, 122.75),
    _bigscience(4, 24, 4, 1, 2048, 130.60),
    # BigScience, chronicles-prequel.md, 2022-02-21 (NHIDDEN=14336 / NLAYERS=72): the same fields.
    _bigscience(8, 12, 4, 1, 2048, 143.31, "bigscience2022_0221"),
    _bigscience(8, 12, 4, 2, 2048, 134.02, "bigscience2022_0221"),
    _bigscience(8, 12, 4, 4, 2048, 123.69, "bigscience2022_0221"),
    _bigscience(8, 12, 4, 8, 2048, 129.26, "bigscience2022_0221"),
    _bigscience(8, 6, 8, 1, 2048, 139.82, "bigscience2022_0221"),
    _bigscience(8, 6, 8, 2, 2048, 131.02, "bigscience2022_0221"),
    _bigscience(8, 6, 8, 4, 2048, 121.48, "bigscience2022_0221"),
)

# The one layout BigScience measured twice differs by this much (113.54 s / 110.48 s - 1):
# pairs of layouts closer than this were not resolved by the measurement.
REPEATABILITY = 0.028


# Each source's software profile (mcsim/scenario/software.py): the default step model (operators)
# with that profile, the case's own keys (overlaps, sequence parallelism, fused attention, ZeRO stage,
# as its source states them) over the profile's.
SOURCE_SOFTWARE = {
    "narayanan2021": "megatron-lm-2021",
    "korthikanti2022": "megatron-lm-2022",
    "megatron_core_2024": "megatron-core-2024",
    "bigscience2022": "megatron-deepspeed-2022",
    "bigscience2022_0221": "megatron-deepspeed-2022",
    # the memory validation's 2022-02-17 table (mcsim/analysis/memory_validation.py): the same software
    "bigscience2022_0217": "megatron-deepspeed-2022",
}


def case_config(case: StepCase) -> Config:
    """The scenario of a case: the shipped reference scenario with the case's model, layout, machine and software."""
    tables = 1.0 if case.tied_embeddings else 2.0  # the embedding, and the output layer unless tied
    params = 12.0 * case.layers * case.hidden**2 + tables * case.vocab * case.hidden
    overrides = {
        **case.machine,
        "compute.software": SOURCE_SOFTWARE[case.source],
        "model.params": params,
        "model.layers": case.layers,
        "model.hidden": case.hidden,
        "model.heads": case.heads,
        # GPT shapes (every source's): multi-head attention, a GeLU MLP of 4 h (not the reference scenario's shape)
        "model.kv_heads": case.heads,
        "model.gated_mlp": False,
        "model.ffn_hidden": 4 * case.hidden,
        "model.vocab": case.vocab,
        "model.seq_len": case.seq_len,
        "model.global_batch": case.global_batch,
        "model.tokens": float(case.global_batch * case.seq_len),
        "model.recompute": case.recompute,
        "parallelism.gpus": case.gpus,
        "parallelism.tp": case.tp,
        "parallelism.pp": case.pp,
        "parallelism.microbatch": case.microbatch,
        "parallelism.interleave": case.interleave,
        "parallelism.sequence_parallel": case.sequence_parallel,
        "parallelism.overlap_dp": case.overlap_dp,
        "parallelism.overlap_tp": case.overlap_tp,
        "parallelism.overlap_pp": case.overlap_pp,
        "compute.fused_attention": case.fused_attention,
        "parallelism.zero_stage": case.zero_stage,
        "model.tied_embeddings": case.tied_embeddings,
        "hardware.memory_gb": 1e6,  # the published runs fit; memory is not what is validated here
    }
    return load_scenario(overrides=overrides).base


def iteration_times(case: StepCase, efficiencies: np.ndarray = EFFICIENCY_GRID) -> np.ndarray:
    """The model's iteration time of ``case`` at each ``compute.efficiency``, s."""
    return config_iteration_times(case_config(case), efficiencies, f"{case.source} {case.name}")


def config_iteration_times(cfg: Config, efficiencies: np.ndarray = EFFICIENCY_GRID, label: str = "") -> np.ndarray:
    """The model's iteration time of the configuration ``cfg`` at each ``compute.efficiency``, s.

    Raises
    ------
    ValueError
        When the model calls the layout infeasible (its workload code, named with ``label``).
    """
    lay = layouts_of([cfg])
    count = efficiencies.size
    repeated = type(lay)(*(np.repeat(getattr(lay, f.name), count) for f in dataclasses.fields(lay)))
    # An array where a scalar is declared: the workload model broadcasts every scenario number (as for draws).
    compute = dataclasses.replace(cfg.compute, efficiency=efficiencies)  # type: ignore[arg-type]
    swept = dataclasses.replace(cfg, compute=compute)
    arrays = workload_arrays(swept, repeated)
    if int(arrays.code.max()) != 0:  # a published layout the model calls infeasible is a bug in the case
        raise ValueError(f"{label}: infeasible (workload code {int(arrays.code.max())})")
    return arrays.iteration_time_s


def best_on_grid(log_errors: np.ndarray) -> int:
    """The grid point (column) whose squared log errors, summed over the cases (rows), are least."""
    return int(np.argmin((log_errors**2).sum(axis=0)))


def leave_one_out_points(log_errors: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each case's grid point fitted to the other cases of its group, never itself.

    Parameters
    ----------
    log_errors : np.ndarray, shape (cases, grid points)
        log(model time / measured time) of every case at every point of the parameter grid
        (one knob, or several flattened into one axis).
    groups : np.ndarray, shape (cases,)
        The group of each case (a source: one software and machine); only a case's own group is fitted.
    """
    index = np.arange(len(groups))
    return np.array([best_on_grid(log_errors[(groups == groups[i]) & (index != i)]) for i in index], dtype=int)


class MeasuredCase(Protocol):
    """What a leave-one-out fit reads of a validation case: its measured time and its source."""

    @property
    def measured_s(self) -> float: ...

    @property
    def source(self) -> str: ...


CaseT = TypeVar("CaseT", bound=MeasuredCase)


@dataclass(frozen=True)
class CaseResult(Generic[CaseT]):
    """A case's leave-one-out prediction (a dense case of :data:`STEP_CASES` or a MoE case)."""

    case: CaseT
    efficiency: float  # fitted on the other cases of the same source
    predicted_s: float

    @property
    def ratio(self) -> float:
        """Predicted over measured time."""
        return self.predicted_s / self.case.measured_s


def fitted_leave_one_out(
    cases: Sequence[CaseT], times: Callable[[CaseT], np.ndarray], grid: np.ndarray = EFFICIENCY_GRID
) -> list[CaseResult[CaseT]]:
    """Each case predicted with the efficiency fitted to the other cases of its source (software and machine).

    Parameters
    ----------
    cases : sequence of cases
        Each with ``measured_s`` (s) and ``source``.
    times : callable
        A case's model iteration times at every point of ``grid``, s.
    grid : np.ndarray
        The ``compute.efficiency`` values fitted over (default :data:`EFFICIENCY_GRID`).
    """
    curves = np.array([times(c) for c in cases])
    log_error = np.log(curves / np.array([c.measured_s for c in cases])[:, None])
    best = leave_one_out_points(log_error, np.array([c.source for c in cases]))
    return [CaseResult(c, float(grid[best[i]]), float(curves[i, best[i]])) for i, c in enumerate(cases)]


def leave_one_out(cases: tuple[StepCase, ...] = STEP_CASES) -> list[CaseResult[StepCase]]:
    """Each dense case predicted with the efficiency fitted to the other cases of its source."""
    return fitted_leave_one_out(cases, iteration_times)


def _per_sequence(measured: bool, r: CaseResult) -> float:
    """Seconds per sequence, measured or predicted: layouts of one comparison may differ in batch."""
    return (r.case.measured_s if measured else r.predicted_s) / r.case.global_batch


def ordered_pairs(results: list[CaseResult], resolved_only: bool = False) -> tuple[int, int]:
    """(pairs ordered as measured, pairs) over every comparison's pairs of layouts, by time per sequence.

    With ``resolved_only``, only the pairs whose measured times differ by more than
    :data:`REPEATABILITY` (the ones the measurement itself orders). Pairs measured equal are
    left out; a pair the model predicts equal counts as not ordered.
    """
    compared = [r for r in results if r.case.comparison]
    return pairs_in_order(
        np.array([_per_sequence(True, r) for r in compared]),
        np.array([_per_sequence(False, r) for r in compared]),
        np.array([r.case.comparison for r in compared]),
        REPEATABILITY if resolved_only else None,
    )


def pairs_in_order(
    measured: np.ndarray, predicted: np.ndarray, groups: np.ndarray, resolved: float | None = None
) -> tuple[int, int]:
    """(pairs the prediction orders as measured, pairs) over the pairs of cases within each group.

    Parameters
    ----------
    measured, predicted : np.ndarray
        Each case's measured and predicted time per unit of work (s per sequence or per token).
    groups : np.ndarray
        Each case's group: only cases of one group are compared.
    resolved : float, optional
        Count only the pairs whose measured times differ by more than this share (the ones
        the measurement itself orders); None: every pair. Pairs measured equal are left out;
        a pair predicted equal counts as not ordered.
    """
    right = total = 0
    for i in range(len(measured)):
        for j in range(i + 1, len(measured)):
            if groups[i] != groups[j] or measured[i] == measured[j]:  # no order to reproduce
                continue
            if resolved is not None and max(measured[i], measured[j]) / min(measured[i], measured[j]) - 1 <= resolved:
                continue
            total += 1  # a predicted tie orders nothing: it counts as wrong
            right += bool(predicted[i] != predicted[j] and (predicted[i] < predicted[j]) == (measured[i] < measured[j]))
    return right, total


TOLERANCE = 0.10  # every case within +-10 % of its measured time
ORDERED_SHARE = 0.90  # and at least 90 % of the comparisons' resolved pairs ordered as measured

# Why a source misses the targets, for the sources the model is known to miss (docs/validation.md,
# "Step time"): such a source is reported OUTSIDE (known) and does not fail the command; the tests
# pin that it is still outside, so a change that brings it within has its reason removed.
_SIZE_TREND = (
    "one efficiency per source cannot follow the trend with model size: its smallest models run slower "
    "and its largest faster than the model says (Calculon's curve depends on an operator's FLOPs, not its "
    "shape; per-kernel overheads weigh most in small kernels)"
)
_HOST_COST = (
    "a host cost per layer and microbatch (about 12 ms at TP 8) that no source quantifies, which "
    "Megatron-DeepSpeed's many small kernels pay: not modelled (it would be a second fitted knob), so the "
    "layouts are not ordered as measured and the shallow pipelines run slower than the model says"
)
KNOWN_MISSES = {
    "narayanan2021": _SIZE_TREND,
    "megatron_core_2024": _SIZE_TREND,
    "bigscience2022": _HOST_COST,
    "bigscience2022_0221": _HOST_COST,
}


def source_passes(results: list[CaseResult]) -> bool:
    """Whether every case is within :data:`TOLERANCE` and the pairs are ordered as :data:`ORDERED_SHARE` asks."""
    right, total = ordered_pairs(results, resolved_only=True)
    within = all(abs(r.ratio - 1.0) <= TOLERANCE for r in results)
    return within and (total == 0 or right >= ORDERED_SHARE * total)


def by_source(results: list[CaseResult[CaseT]]) -> dict[str, list[CaseResult[CaseT]]]:
    """The results grouped by source, in the order of their cases."""
    groups: dict[str, list[CaseResult[CaseT]]] = {}
    for r in results:
        groups.setdefault(r.case.source, []).append(r)
    return groups


def median_error(results: list[CaseResult]) -> float:
    """The median |model / measured - 1| over ``results``."""
    return float(np.median([abs(r.ratio - 1.0) for r in results]))


def step_times_pass(results: list[CaseResult]) -> bool:
    """The exit status of ``mcsim validate --step-time`` as a truth value.

    True when every source meets the targets (:func:`source_passes`) or misses them for its
    recorded reason (:data:`KNOWN_MISSES`), and the median error over all cases is at most the
    near-tie threshold the planner's report uses (:data:`mcsim.model.steptime.STEP_TIME_ERROR`),
    which therefore follows the validation's error.
    """
    sources_ok = all(source_passes(mine) or source in KNOWN_MISSES for source, mine in by_source(results).items())
    return sources_ok and median_error(results) <= STEP_TIME_ERROR["operators"]


def verdict_lines(results: list[CaseResult]) -> list[str]:
    """One line per source (within the targets, outside for its recorded reason, or outside) and the threshold's."""
    lines = []
    for source, mine in by_source(results).items():
        if source_passes(mine):
            lines.append(f"{source}: within the targets")
        elif source in KNOWN_MISSES:
            lines.append(f"{source}: OUTSIDE (known): {KNOWN_MISSES[source]}")
        else:
            lines.append(f"{source}: OUTSIDE")
    median = median_error(results)
    threshold = STEP_TIME_ERROR["operators"]
    relation = "within" if median <= threshold else "ABOVE"
    lines.append(
        f"all {len(results)} cases: median |error| {median:.2%}, {relation} the near-tie threshold of "
        f"mcsim report ({threshold:.2%}, mcsim.model.steptime.STEP_TIME_ERROR)"
    )
    return lines


def step_time_table(results: list[CaseResult]) -> str:
    """The results as a text table, one case a line, then the errors per source."""
    lines = [f"{'source':<20} {'case':<22} {'measured s':>11} {'model s':>9} {'ratio':>6} {'eff':>6}"]
    for r in results:
        lines.append(
            f"{r.case.source:<20} {r.case.name:<22} {r.case.measured_s:>11.3f} {r.predicted_s:>9.3f} "
            f"{r.ratio:>6.3f} {r.efficiency:>6.3f}"
        )
    for source in dict.fromkeys(r.case.source for r in results):
        errors = np.array([abs(r.ratio - 1.0) for r in results if r.case.source == source])
        lines.append(f"{source}: {errors.size} cases, median |error| {np.median(errors):.1%}, worst {errors.max():.1%}")
    for source in dict.fromkeys(r.case.source for r in results if r.case.comparison):
        mine = [r for r in results if r.case.source == source]
        (right, total), (resolved_right, resolved) = ordered_pairs(mine), ordered_pairs(mine, resolved_only=True)
        lines.append(
            f"{source} layout comparisons: {right} of {total} pairs ordered as measured "
            f"({resolved_right} of {resolved} pairs measured more than {REPEATABILITY:.1%} apart)"
        )
    return "\n".join(lines)
