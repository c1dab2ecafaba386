"""The scenario schema: every TOML key, its type, bounds, default and unit, once.

Each section of a scenario file is a frozen dataclass below (:func:`~mcsim.scenario.frozen.section`),
each key a field made by :func:`~mcsim.scenario.validation.param`; the one validator
(:mod:`mcsim.scenario.validation`) checks a table against them. The scenario's own field kinds
are here too: :class:`Interval` (a checkpoint interval) and :class:`PricesByType` (a price per GPU
type); so are the lookups of a dotted key's declaration (:func:`field_meta`, :func:`key_meta`) and
the check of a ``[run]`` value given outside the file (:func:`run_option`).

Defaults are assumptions unless ``docs/model.md`` ("Defaults and their sources")
cites the publication they are taken from.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from mcsim.errors import ScenarioError
from mcsim.scenario.catalog import GPU_CATALOG, PRICE_RATES
from mcsim.scenario.frozen import section
from mcsim.scenario.interruptions import FailureClass, RestartSection, SchedulerSection, StaffingSection
from mcsim.scenario.software import DEFAULT_SOFTWARE, KERNEL_LAUNCH_US, SOFTWARE_PROFILES
from mcsim.scenario.toml import format_number
from mcsim.scenario.validation import (
    MAX_GPUS,
    Counts,
    Shares,
    coerce_number,
    coerce_value,
    is_integral,
    is_number,
    param,
    type_name,
)

# The checkpoint strategies a scenario may name; mcsim.model.strategies holds one record for each
# (and checks at import that its names are these).
CHECKPOINT_STRATEGIES = ("sync", "async", "gockpt", "in_memory")
# The defaults the software profiles' defaults depend on (mcsim/scenario/software.py): the step model
# and the GPU type of a scenario that does not name them.
DEFAULT_STEP_MODEL = "operators"
DEFAULT_GPU = "H100-SXM"

# How a mixture-of-experts router balances its experts' load (model.router_balancing): an auxiliary
# loss, or DeepSeek's loss-free bias (Wang et al. 2024, arXiv 2408.15664).
ROUTER_BALANCING = ("aux-loss", "loss-free")


@dataclass(frozen=True)
class Interval:
    """A checkpoint interval: ``young_daly``, ``optimize``, fixed ``minutes`` or fixed ``iterations``."""

    kind: str
    value: float = 0.0

    @property
    def label(self) -> str:
        """Readable coordinate label: ``young_daly``, ``60min``, ``500it``."""
        if self.kind in ("young_daly", "optimize"):
            return self.kind
        number = format_number(self.value)
        return f"{number}min" if self.kind == "minutes" else f"{number}it"

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> Interval:
        """The interval a TOML value names (an :class:`Interval` passes through)."""
        return value if isinstance(value, Interval) else _coerce_interval(value, source, key)


class PricesByType:
    """Field kind: a table of catalog GPU types to numbers within the field's bounds.

    ``{ H100-SXM = 3.1, B200 = 5.0 }`` is typed as ``(("H100-SXM", 3.1), ("B200", 5.0))``
    (hashable, in the file's order). It cannot be swept (:data:`SWEEPABLE`).
    """

    SWEEPABLE = False

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> tuple[tuple[str, float], ...]:
        """The (GPU type, number) pairs a TOML table names (a tuple of pairs passes through)."""
        if isinstance(value, tuple):
            return value
        if not isinstance(value, dict):
            raise ScenarioError(
                source,
                key,
                f"expected a table of GPU type = number, e.g. {{ H100-SXM = 3.1 }}, got {type_name(value)}",
            )
        pairs = []
        for name, number in value.items():
            if name not in GPU_CATALOG:
                raise ScenarioError(
                    source, f"{key}.{name}", f"unknown GPU type; expected one of {', '.join(GPU_CATALOG)}"
                )
            pairs.append((name, float(coerce_number(meta, number, source, f"{key}.{name}", integer=False))))
        return tuple(pairs)


@section
class ModelSection:
    params: float = param(gt=0, le=1e15, unit="parameters", doc="N, model parameters")
    layers: int = param(kind=int, ge=1, le=100_000, doc="L, transformer layers")
    hidden: int = param(kind=int, ge=1, le=10_000_000, doc="h, hidden size")
    heads: int = param(
        0, kind=int, ge=0, le=1_000_000, doc="attention heads a; 0 means hidden/128 (for activation memory)"
    )
    seq_len: int = param(kind=int, ge=1, le=100_000_000, unit="tokens", doc="s, sequence length")
    tokens: float = param(gt=0, le=1e18, unit="tokens", doc="D, training tokens")
    global_batch: int = param(kind=int, ge=1, le=1_000_000_000, unit="sequences", doc="B, sequences per iteration")
    recompute: str = param(
        "selective", kind=str, choices=("none", "selective", "full"), doc="activation recomputation policy"
    )
    dropout: bool = param(True, kind=bool, doc="trained with dropout (its masks take activation memory)")
    vocab: int = param(
        0, kind=int, ge=0, le=100_000_000, unit="tokens", doc="V, vocabulary; 0: no embedding or output layer modelled"
    )
    ffn_hidden: int = param(0, kind=int, ge=0, le=100_000_000, doc="MLP width; 0 means 4 x hidden")
    kv_heads: int = param(0, kind=int, ge=0, le=1_000_000, doc="key/value heads (grouped-query attention); 0: heads")
    gated_mlp: bool = param(False, kind=bool, doc="gated MLP (SwiGLU): the first MLP matrix has two outputs")
    tied_embeddings: bool = param(
        False, kind=bool, doc="input embedding and output layer share weights (their gradients meet across stages)"
    )
    # Mixture of experts (docs/model.md, "Mixture of experts"); experts = 0: a dense model, every key below
    # at its default.
    experts: int = param(0, kind=int, ge=0, le=1_000_000, doc="routed experts per MoE layer; 0: a dense model")
    experts_per_token: int = param(
        0, kind=int, ge=0, le=1_000_000, doc="routed experts each token goes to (top-k); >= 1 with experts"
    )
    shared_experts: int = param(0, kind=int, ge=0, le=1_000_000, doc="always-active experts per MoE layer")
    expert_ffn_hidden: int = param(
        0, kind=int, ge=0, le=100_000_000, doc="one expert's MLP width (gated as gated_mlp); > 0 with experts"
    )
    first_dense_layers: int = param(
        0, kind=int, ge=0, le=100_000, doc="dense layers (MLP of ffn_hidden) before the first MoE layer"
    )
    moe_layer_interval: int = param(
        1, kind=int, ge=1, le=100_000, doc="after the dense ones, every n-th layer is MoE (Megatron --moe-layer-freq)"
    )
    router_balancing: str = param(
        "aux-loss",
        kind=str,
        choices=ROUTER_BALANCING,
        doc="how the router balances the experts' load; sets expert_imbalance's default",
    )
    expert_imbalance: float = param(
        0.0,
        ge=0,
        le=1e6,
        doc="busiest expert's tokens / the mean, per step (>= 1); 0: the default of router_balancing",
    )
    expert_imbalance_sigma: float = param(
        0.0, ge=0, le=5, doc="per-iteration log-sd of a rank's expert load (adds to the stragglers' sigma)"
    )
    expert_capacity_factor: float = param(
        0.0, ge=0, le=1e6, doc="tokens above capacity x mean are dropped (>= 1); 0: no token dropping"
    )


@section
class HardwareSection:
    gpu: str = param(DEFAULT_GPU, kind=str, choices=tuple(GPU_CATALOG), doc="catalog entry")
    gpus_per_node: int = param(8, kind=int, ge=1, le=1024, doc="GPUs per node")
    spare_nodes: int | None = param(
        None, kind=int, ge=0, le=MAX_GPUS, doc="hot spare nodes; unset: unlimited (recovery as given)"
    )
    failure_rate_factor: float = param(
        1.0,
        gt=0,
        le=1000,
        doc="this fleet's rate of fail-stop failures and hangs against the classes' (their mtbf_hours divided "
        "by it); fleets of the same hardware differ about 3x (docs/model.md §3)",
    )
    peak_tflops: float | None = param(None, gt=0, le=1e6, unit="TFLOP/s", doc="override")
    memory_gb: float | None = param(None, gt=0, le=1e6, unit="GB", doc="override")
    tdp_w: float | None = param(None, gt=0, le=1e5, unit="W", doc="override")
    idle_w: float | None = param(None, ge=0, le=1e5, unit="W", doc="override")
    freq_max_mhz: float | None = param(None, gt=0, le=1e5, unit="MHz", doc="override")
    freq_min_mhz: float | None = param(None, gt=0, le=1e5, unit="MHz", doc="override")
    d2h_gbps: float | None = param(None, gt=0, le=1e6, unit="GB/s", doc="override")
    hbm_gbps: float | None = param(None, ge=1, le=1e6, unit="GB/s", doc="override")
    fp8_tflops: float | None = param(None, ge=0, le=1e6, unit="TFLOP/s", doc="override (0: no FP8)")


@section
class ParallelismSection:
    gpus: int = param(kind=int, ge=1, le=MAX_GPUS, doc="G, GPUs in the job")
    tp: int = param(1, kind=int, ge=1, le=MAX_GPUS, doc="tensor-parallel degree")
    pp: int = param(1, kind=int, ge=1, le=MAX_GPUS, doc="pipeline-parallel degree")
    microbatch: int = param(1, kind=int, ge=1, le=1_000_000, unit="sequences", doc="b")
    interleave: int = param(1, kind=int, ge=1, le=1024, doc="v, virtual stages per GPU")
    overlap_dp: float = param(0.8, ge=0, le=1, doc="hidden share of the DP exchange")
    overlap_tp: float = param(0.0, ge=0, le=1, doc="hidden share of the TP exchange")
    overlap_pp: float = param(0.0, ge=0, le=1, doc="hidden share of the pipeline transfers (operators model)")
    cp: int = param(1, kind=int, ge=1, le=MAX_GPUS, doc="context-parallel degree: each sequence split over cp GPUs")
    ep: int = param(1, kind=int, ge=1, le=MAX_GPUS, doc="expert-parallel degree: the routed experts split over ep GPUs")
    expert_tp: int = param(
        1, kind=int, ge=1, le=MAX_GPUS, doc="expert tensor-parallel degree (Megatron --expert-tensor-parallel-size)"
    )
    overlap_ep: float = param(0.0, ge=0, le=1, doc="hidden share of the expert all-to-alls (operators model)")
    zero_stage: int = param(
        1, kind=int, ge=0, le=3, doc="ZeRO stage: 0 none, 1 optimizer states, 2 + gradients, 3 + parameters (FSDP)"
    )
    sequence_parallel: bool = param(
        True, kind=bool, doc="sequence parallelism (Korthikanti et al. 2022): activations and norms split t ways"
    )


@section
class ComputeSection:
    efficiency: float = param(0.5, gt=0, le=1, doc="achieved fraction of peak at max frequency")
    freq_mhz: float | None = param(None, gt=0, le=1e5, unit="MHz", doc="GPU core frequency; default: the GPU's maximum")
    step_model: str = param(
        DEFAULT_STEP_MODEL,
        kind=str,
        choices=("aggregate", "operators"),
        doc="iteration time: per operator (docs/model.md §2b), or one efficiency for all FLOPs (§2)",
    )
    software: str = param(
        DEFAULT_SOFTWARE,
        kind=str,
        choices=tuple(SOFTWARE_PROFILES),
        doc="software generation whose defaults (overlaps, sequence parallelism, fused attention, "
        "efficiency) the operators model takes for the keys not given (mcsim/scenario/software.py)",
    )
    fp8: bool = param(False, kind=bool, doc="FP8 matrix operators at the GPU's FP8 peak (operators model)")
    fused_attention: bool = param(
        False, kind=bool, doc="fused (flash) attention: no s^2 scores in memory, QK^T recomputed in backward"
    )
    freq_scaling_share: float = param(
        1.0, ge=0, le=1, doc="share of compute time that scales as 1/f (the rest is memory-bound)"
    )
    grouped_expert_gemm: bool = param(True, kind=bool, doc="MoE: local experts as one grouped GEMM (false: a loop)")
    kernel_launch_us: float = param(KERNEL_LAUNCH_US, gt=0, le=1e6, unit="us", doc="host time per kernel launch")


@section
class NetworkSection:
    intra_gbps: float = param(900.0, gt=0, le=1e6, unit="GB/s", doc="per GPU within a node")
    inter_gbps: float = param(50.0, gt=0, le=1e6, unit="GB/s", doc="per GPU across nodes")
    intra_pj_per_bit: float = param(1.3, ge=0, le=1e6, unit="pJ/bit")
    inter_pj_per_bit: float = param(20.0, ge=0, le=1e6, unit="pJ/bit")
    latency_us: float = param(5.0, ge=0, le=1e6, unit="us", doc="per message hop")
    intra_bus_efficiency: float = param(
        0.325,
        ge=0.01,
        le=1,
        doc="collective bus bandwidth / intra_gbps (operators model; Calculon's 0.65 of one direction)",
        # intra_gbps counts both directions
    )
    inter_bus_efficiency: float = param(
        0.9, ge=0.01, le=1, doc="collective bus bandwidth / inter_gbps (operators model; Calculon)"
    )


@section
class PhasesSection:
    """Training phases (docs/model.md §2 "Training phases"): none given, one phase from [model]."""

    token_shares: tuple[float, ...] = param(
        (), kind=Shares, gt=0, le=1, doc="each phase's share of model.tokens, in training order (they sum to 1)"
    )
    global_batch: tuple[int, ...] = param(
        (),
        kind=Counts,
        ge=1,
        le=1_000_000_000,
        unit="sequences",
        doc="each phase's global batch (e.g. a batch ramp-up); none: model.global_batch in every phase",
    )
    seq_len: tuple[int, ...] = param(
        (),
        kind=Counts,
        ge=1,
        le=100_000_000,
        unit="tokens",
        doc="each phase's sequence length (e.g. long-context stages); none: model.seq_len in every phase",
    )


@section
class StragglerSection:
    sigma: float = param(0.0, ge=0, le=5, doc="lognormal shape of per-rank, per-iteration factor")
    job_sigma: float = param(0.0, ge=0, le=5, doc="lognormal shape of the per-run factor")
    episode_rate_per_node_day: float = param(
        0.0, ge=0, le=10, unit="1/(node day)", doc="slow-node episodes; each arrival costs kernel work"
    )
    episode_hours: float = param(2.0, gt=0, le=1e5, unit="h")
    episode_slowdown: float = param(1.3, ge=1, le=1e3)
    degradation_per_day: float = param(
        0.0,
        ge=0,
        le=100,
        unit="1/day",
        doc="compute time added per day since the last restart, a share (a restart resets it; 0: none)",
    )
    degradation_max: float = param(1.0, ge=0, le=100, doc="... at most this share")
    degradation_step_minutes: float = param(
        60.0,
        ge=0.01,  # 0.6 s: a step far below the clock's resolution late in a run would never advance it
        le=1e6,
        unit="min",
        doc="... constant over steps this long (its value mid-step); each costs kernel work",
    )


@section
class CheckpointSection:
    strategy: str = param("async", kind=str, choices=CHECKPOINT_STRATEGIES)
    interval: Interval = param(Interval("young_daly"), kind=Interval)
    bytes_per_param: float = param(14.0, gt=0, le=1e3, unit="B", doc="persisted bytes per parameter (ZeRO §3.1: ~14)")
    write_gbps_per_node: float = param(10.0, gt=0, le=1e6, unit="GB/s")
    read_gbps_per_node: float = param(20.0, gt=0, le=1e6, unit="GB/s")
    storage_gbps: float = param(1000.0, gt=0, le=1e7, unit="GB/s", doc="aggregate storage cap")
    async_overhead_s: float = param(
        1.3, ge=0, le=1e5, unit="s", doc="fixed stall per async save beyond the copy (GoCkpt)"
    )
    gockpt_stall_fraction: float = param(
        0.133, gt=0, le=1, doc="gockpt stall as a fraction of async's (GoCkpt: -86.7 %)"
    )
    gockpt_overlap_iterations: int = param(
        0, kind=int, ge=0, le=1_000_000, doc="iterations the gockpt transfer spans; 0: derived"
    )
    in_memory_persist_every: int = param(
        8, kind=int, ge=1, le=1_000_000, doc="in_memory: persist every n-th snapshot to storage"
    )
    optimize_objective: str = param(
        "wall_time",
        kind=str,
        choices=("wall_time", "energy", "cost"),
        doc='interval = "optimize": the mean to minimise',
    )


@section
class EnergySection:
    pue: float = param(1.1, ge=1, le=5)
    node_overhead_w: float = param(2500.0, ge=0, le=1e6, unit="W", doc="per node, while allocated")
    busy_utilization: float = param(
        1.0, gt=0, le=1, doc="u: share of (TDP - idle) drawn while computing at max frequency"
    )
    wait_power_fraction: float = param(
        0.6, ge=0, le=1, doc="share of (TDP - idle) drawn waiting at a barrier or exchanging"
    )
    checkpoint_power_fraction: float = param(
        0.04,
        ge=0,
        le=1,
        doc="share of (TDP - idle) drawn stalled for a checkpoint (an H100 draws ~105 W then: Morrison et al. 2025)",
    )
    power_freq_exponent: float = param(2.5, ge=1, le=4, doc="gamma: busy power above idle goes as (f/f_max)^gamma")
    storage_pj_per_bit: float = param(100.0, ge=0, le=1e6, unit="pJ/bit", doc="storage energy per bit written or read")


@section
class CostSection:
    model: str = param(
        "rental",
        kind=str,
        choices=("rental", "owned"),
        doc="rental: GPU-hours at gpu_hour_usd; owned: capital amortised over amortization_years",
    )
    price: str = param(
        "on_demand",
        kind=str,
        choices=PRICE_RATES,
        doc="rental: which catalog rate a GPU type costs when no price is given (docs/model.md §5)",
    )
    gpu_hour_usd: float | None = param(
        None,
        ge=0,
        le=1e6,
        unit="USD/(GPU h)",
        doc="rental: one price for every GPU type not in gpu_hour_usd_by_type; unset: the catalog's rate",
    )
    gpu_hour_usd_by_type: tuple[tuple[str, float], ...] = param(
        (),
        kind=PricesByType,
        ge=0,
        le=1e6,
        unit="USD/(GPU h)",
        doc="rental: the price of each named GPU type, e.g. { H100-SXM = 3.1 }; wins over gpu_hour_usd",
    )
    electricity_usd_per_kwh: float = param(0.08, ge=0, le=1e3, unit="USD/kWh")
    gpu_capex_usd: float = param(25000.0, ge=0, le=1e8, unit="USD", doc="owned: purchase price per GPU")
    node_capex_usd: float = param(
        50000.0,
        ge=0,
        le=1e9,
        unit="USD",
        doc="owned: per node, without its GPUs (CPUs, memory, NICs, chassis, network share)",
    )
    amortization_years: float = param(5.0, gt=0, le=100, unit="years")


@section
class CarbonSection:
    grid_g_per_kwh: float = param(380.0, ge=0, le=1e4, unit="gCO2e/kWh")
    embodied_kg_per_gpu: float = param(150.0, ge=0, le=1e6, unit="kgCO2e")
    lifetime_years: float = param(5.0, gt=0, le=100, unit="years")


@section
class RunSection:
    runs: int = param(1000, kind=int, ge=1, le=10_000_000)
    seed: int = param(0, kind=int, ge=0, le=2**63 - 1)
    mode: str = param("fast", kind=str, choices=("fast", "exact"))
    max_wall_days: float = param(3650.0, gt=0, le=36_500, unit="d")
    draws: int = param(
        0,
        kind=int,
        ge=0,
        le=1_000_000,
        doc="parameter draws of the [uncertain] inputs, each run `runs` times; 0: no uncertainty",
    )
    design: str = param(
        "sobol",
        kind=str,
        choices=("sobol", "lhs", "saltelli"),
        doc="design of the draws: scrambled Sobol, Latin hypercube, or Saltelli (Sobol indices)",
    )


# TOML table name -> section class, in file order.
SECTIONS: dict[str, type] = {
    "model": ModelSection,
    "phases": PhasesSection,
    "hardware": HardwareSection,
    "parallelism": ParallelismSection,
    "compute": ComputeSection,
    "network": NetworkSection,
    "stragglers": StragglerSection,
    "checkpoint": CheckpointSection,
    "restart": RestartSection,
    "staffing": StaffingSection,
    "scheduler": SchedulerSection,
    "energy": EnergySection,
    "cost": CostSection,
    "carbon": CarbonSection,
    "run": RunSection,
}
REQUIRED_SECTIONS = ("model", "parallelism")
RUN_KEYS = tuple(f.name for f in dataclasses.fields(RunSection))
TOP_LEVEL_KEYS = ("name", "description", "failures", "sweep", "uncertain", "provenance", *SECTIONS)
# The tables a plan file adds to a scenario (mcsim/plan.py reads them; `mcsim run` refuses them).
PLAN_TABLES = ("search", "constraints", "plan")


def _coerce_interval(value: Any, source: str, key: str) -> Interval:
    expected = 'expected "young_daly", "optimize", { minutes = M } or { iterations = K }'
    if value in ("young_daly", "optimize"):
        return Interval(value)
    if isinstance(value, dict) and len(value) == 1:
        ((kind, number),) = value.items()
        if kind == "minutes" and is_number(number) and math.isfinite(number) and 0 < number <= 1e7:
            return Interval("minutes", float(number))
        if kind == "iterations" and is_integral(number) and 1 <= number <= 1e12:
            return Interval("iterations", float(int(number)))
    raise ScenarioError(source, key, f"{expected}, got {type_name(value)}")


def field_meta(section: str, name: str) -> dict | None:
    """Metadata of ``section.name`` (``section`` may be ``failures``), or None."""
    cls = FailureClass if section == "failures" else SECTIONS.get(section)
    if cls is None:
        return None
    for fld in dataclasses.fields(cls):
        if fld.name == name:
            return dict(fld.metadata)
    return None


def key_meta(key: str) -> dict | None:
    """Metadata of the dotted scenario key ``key`` (``section.name`` or ``failures.<class>.name``), or None."""
    parts = key.split(".")
    return field_meta(parts[0], parts[-1]) if len(parts) == (3 if parts[0] == "failures" else 2) else None


def run_option(name: str, value: Any, source: str) -> Any:
    """Check a value given for ``run.<name>`` outside the file (``--runs``, ``runs=``), typed.

    Errors name ``source`` (the option), not the scenario file.
    """
    meta = field_meta("run", name)
    if meta is None:
        raise ScenarioError(source, f"run.{name}", f"unknown key; expected one of {', '.join(RUN_KEYS)}")
    return coerce_value(meta, value, source, f"run.{name}")
