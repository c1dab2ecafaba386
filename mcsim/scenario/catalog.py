"""GPU hardware catalog for the Monte Carlo cluster simulator.

Each entry of :data:`GPU_CATALOG` is a :class:`GpuSpec` describing one
datacenter GPU (SXM form factor unless stated otherwise). Units are carried in
the field names:

* ``*_tflops``  -- TFLOP/s (1e12 floating-point operations per second)
* ``*_gb``      -- gigabytes, decimal (1e9 bytes), as marketed
* ``*_w``       -- watts
* ``*_mhz``     -- megahertz
* ``*_gbps``    -- gigabytes per second (1e9 bytes/s), *not* gigabits

Every number cites its source, both in a comment beside the entry and in the
entry's ``sources`` string. Datasheet figures are vendor peaks; idle power and
host-link bandwidths are measured or derived effective values, and are labelled
as such. Any numeric field can be overridden from a scenario's ``[hardware]``
table (see :func:`gpu_field_names`).

:data:`GPU_PRICES` holds each type's published hourly rental price per GPU, USD/(GPU h),
for two rates (:data:`PRICE_RATES`): ``on_demand`` and ``reserved`` (a one-year
commitment). A rate that no source publishes is None, never a guess; a scenario then
gives the price (``cost.gpu_hour_usd_by_type``). docs/model.md §5 lists the sources.

A rented GPU of type T costs, in USD per GPU-hour (docs/model.md §5), the first of:

1. ``cost.gpu_hour_usd_by_type[T]``, the scenario's price for that type;
2. ``cost.gpu_hour_usd``, one price the scenario gives for every type;
3. the catalog's published price of T at the rate ``cost.price`` (``on_demand`` or
   ``reserved``; :data:`mcsim.scenario.catalog.GPU_PRICES`).

A type with none of the three cannot be rented: :func:`check_type_prices` refuses it. A
scenario or plan that compares several GPU types while one explicit ``gpu_hour_usd``
prices two or more of them is refused as well: its cost ranking would only restate that
one price.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from mcsim.errors import ScenarioError
from mcsim.scenario.frozen import hash_once

__all__ = [
    "GpuSpec",
    "GPU_CATALOG",
    "lookup_gpu",
    "gpu_field_names",
    "GpuPrice",
    "GPU_PRICES",
    "PRICE_RATES",
    "catalog_price",
    "gpu_hour_usd",
    "check_type_prices",
]


@hash_once
@dataclass(frozen=True)
class GpuSpec:
    """Static hardware description of one GPU.

    Attributes
    ----------
    peak_tflops : float
        Dense (no structured sparsity) BF16 tensor-core peak, TFLOP/s.
    memory_gb : float
        HBM capacity in decimal GB (1e9 bytes).
    tdp_w : float
        Board power limit / TDP, W.
    idle_w : float
        Idle power draw at 0 % utilisation, W.
    freq_max_mhz : float
        Maximum (boost) SM/graphics clock, MHz.
    freq_min_mhz : float
        Minimum settable SM/graphics clock, MHz.
    d2h_gbps : float
        Effective (not theoretical) device-to-host copy bandwidth per GPU,
        GB/s, over the host link (PCIe or NVLink-C2C).
    hbm_gbps : float
        HBM bandwidth, GB/s, datasheet peak (the operator step-time model's
        memory-bound operators run at a size-dependent fraction of it).
    fp8_tflops : float
        Dense FP8 tensor-core peak, TFLOP/s; 0 where the GPU has none
        (``compute.fp8`` is then refused).
    sources : str
        Short text naming the source of each number above.
    """

    peak_tflops: float
    memory_gb: float
    tdp_w: float
    idle_w: float
    freq_max_mhz: float
    freq_min_mhz: float
    d2h_gbps: float
    hbm_gbps: float
    fp8_tflops: float
    sources: str


# Effective host-link bandwidths (derived, not datasheet peaks):
# PCIe Gen4 x16 is 32 GB/s raw per direction, ~25 GB/s achieved in cudaMemcpy
# D2H with pinned memory; Gen5 x16 is 64 GB/s raw, ~50 GB/s achieved.
_PCIE_GEN4_EFF_GBPS = 25.0
_PCIE_GEN5_EFF_GBPS = 50.0
# NVLink-C2C: 900 GB/s total bidirectional = 450 GB/s per direction (GH200
# datasheet). Used as the D2H figure; sustained copies measure somewhat lower.
_NVLINK_C2C_PER_DIR_GBPS = 450.0

_A100_SOURCES = (
    "peak/TDP/boost: NVIDIA A100 Tensor Core GPU datasheet (2021), SXM4; "
    "min clock: nvidia-smi supported clocks (210 MHz; a EuroMLSys'26 DVFS "
    "study used 240-1410 MHz); idle: measured captures (public nvidia-smi "
    "logs, 55-65 W); d2h: derived, PCIe Gen4 x16 effective"
)

# The figures of a GPU type, in the order of GpuSpec's fields: peak_tflops, memory_gb, tdp_w, idle_w,
# freq_max_mhz, freq_min_mhz, d2h_gbps, hbm_gbps, fp8_tflops.
_Figures = tuple[float, float, float, float, float, float, float, float, float]
# Each type's figures: each row's comment cites them; _SOURCES below names the source of each in the
# entry itself.
_FIGURES: dict[str, _Figures] = {
    # NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB SXM4:
    # BF16 312 TFLOP/s dense (624 sparse), 400 W, 1410 MHz boost, HBM2 40 GB;
    # HBM 1,555 GB/s: A100 datasheet (2021), 40GB SXM; no FP8 tensor cores (A100 datasheet: FP16/BF16, TF32, INT8).
    "A100-40GB": (312.0, 40.0, 400.0, 60.0, 1410.0, 210.0, _PCIE_GEN4_EFF_GBPS, 1555.0, 0.0),
    # NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM4:
    # same compute/power/clocks as the 40 GB part, HBM2e 80 GB;
    # HBM 2,039 GB/s: A100 datasheet (2021), 80GB SXM; no FP8 tensor cores (A100 datasheet).
    "A100-80GB": (312.0, 80.0, 400.0, 60.0, 1410.0, 210.0, _PCIE_GEN4_EFF_GBPS, 2039.0, 0.0),
    # NVIDIA H100 Tensor Core GPU datasheet (2022/2023), H100 SXM5 80GB:
    # BF16 1979 TFLOP/s with sparsity -> 989 dense, up to 700 W, 1980 MHz max;
    # HBM 3.35 TB/s: H100 datasheet (2023), SXM5; FP8 3,958 TFLOP/s sparse / 2: H100 datasheet (2023), SXM5.
    "H100-SXM": (989.0, 80.0, 700.0, 80.0, 1980.0, 210.0, _PCIE_GEN5_EFF_GBPS, 3350.0, 1979.0),
    # NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM 141GB HBM3e:
    # same GH100 compute as H100 (BF16 1979 sparse -> 989 dense), up to 700 W;
    # HBM 4.8 TB/s: H200 datasheet (2024); FP8 3,958 TFLOP/s sparse / 2: H200 datasheet (2024).
    "H200": (989.0, 141.0, 700.0, 80.0, 1980.0, 210.0, _PCIE_GEN5_EFF_GBPS, 4800.0, 1979.0),
    # NVIDIA H800 SXM5 (2023), the export variant of the H100 SXM5 (same GH100 die): the H100's tensor
    # peaks (BF16 1979 sparse -> 989 dense, FP8 3958 sparse -> 1979 dense), 80 GB HBM3 at 3.35 TB/s and
    # up to 700 W; what differs is NVLink, 400 GB/s (both directions) against the H100's 900, and FP64.
    # NVLink is a network figure here as for every type: network.intra_gbps = 400
    # (docs/model.md §1; the schema's default 900 is the H100's).
    # Clocks and idle: as H100 SXM (same die). Used by DeepSeek-V2/V3 (arXiv 2405.04434, 2412.19437).
    "H800": (989.0, 80.0, 700.0, 80.0, 1980.0, 210.0, _PCIE_GEN5_EFF_GBPS, 3350.0, 1979.0),
    # NVIDIA GH200 Grace Hopper Superchip datasheet (2023), 96 GB HBM3 variant
    # (the 144 GB HBM3e variant is not modelled). Module power is configurable
    # 450-1000 W for CPU+GPU+memory; tdp_w=700 is an ASSUMED GPU share,
    # matching H100 SXM. NVLink-C2C 900 GB/s total = 450 GB/s per direction.
    # HBM 4 TB/s (96 GB HBM3): GH200 datasheet (2023); FP8 3,958 TFLOP/s sparse / 2: GH200 datasheet (2023).
    "GH200": (989.0, 96.0, 700.0, 96.0, 1980.0, 210.0, _NVLINK_C2C_PER_DIR_GBPS, 4000.0, 1979.0),
    # NVIDIA HGX B200 datasheet (2024/2025): FP16/BF16 4.5 PFLOPS per GPU with
    # sparsity -> 2250 TFLOP/s dense, up to 1000 W. Memory: the B200 package
    # carries 192 GB HBM3e (8 stacks), but HGX/DGX B200 systems expose 180 GB
    # per GPU (DGX B200 datasheet: 1,440 GB total for 8 GPUs; nvidia-smi
    # reports ~179 GB). We use 180 GB since it is what a training job can use.
    # HBM 8 TB/s: HGX B200 datasheet (2024); FP8 9 PFLOP/s sparse / 2: HGX B200 datasheet (2024).
    "B200": (2250.0, 180.0, 1000.0, 100.0, 1965.0, 210.0, _PCIE_GEN5_EFF_GBPS, 8000.0, 4500.0),
}

# Each type's sources, as the entry's ``sources`` text.
_SOURCES: dict[str, str] = {
    "A100-40GB": "memory 40 GB HBM2; " + _A100_SOURCES,
    "A100-80GB": "memory 80 GB HBM2e; " + _A100_SOURCES,
    "H100-SXM": "peak (1979 sparse / 2)/memory/TDP: NVIDIA H100 Tensor Core GPU datasheet (2023), SXM5; max clock: "
    "NVIDIA H100 spec (1980 MHz); min clock: nvidia-smi supported clocks; idle: measured captures (70-90 W); "
    "d2h: derived, PCIe Gen5 x16 effective",
    "H200": "peak (1979 sparse / 2)/memory/TDP: NVIDIA H200 Tensor Core GPU datasheet (2024), SXM; clocks: as H100 "
    "SXM (same GH100 die); idle: assumed equal to H100; d2h: derived, PCIe Gen5 x16 effective",
    "H800": "peak/FP8/memory/HBM/TDP: NVIDIA H800 SXM5 specification (2023; the H100 SXM5's figures, "
    "NVLink 400 GB/s instead of 900: set network.intra_gbps = 400); clocks: as H100 SXM (same GH100 die); "
    "idle: assumed equal to H100; d2h: derived, PCIe Gen5 x16 effective",
    "GH200": "peak/memory (96 GB HBM3)/C2C 900 GB/s: NVIDIA GH200 Grace Hopper Superchip datasheet (2023); tdp: "
    "assumption, 700 W GPU share of the 450-1000 W module; clocks: as H100 SXM; idle: measured captures "
    "(EuroMLSys'26 DVFS study, ~96 W); d2h: derived, NVLink-C2C per-direction peak",
    "B200": "peak (4.5 PF sparse / 2)/TDP: NVIDIA HGX B200 datasheet (2024); memory: DGX B200 datasheet (1,440 GB / "
    "8 GPUs = 180 GB usable of 192 GB physical); boost clock: approximate, from public spec listings; min clock: "
    "assumed like Hopper; idle: assumed ~100 W; d2h: derived, PCIe Gen5 x16 effective",
}

GPU_CATALOG: dict[str, GpuSpec] = {
    name: GpuSpec(*figures, sources=_SOURCES[name]) for name, figures in _FIGURES.items()
}


def lookup_gpu(name: str) -> GpuSpec:
    """Return the catalog entry for a GPU model.

    Parameters
    ----------
    name : str
        Exact catalog key, e.g. ``"H100-SXM"``.

    Returns
    -------
    GpuSpec
        The hardware description for ``name``.

    Raises
    ------
    KeyError
        If ``name`` is not in :data:`GPU_CATALOG`; the message lists the
        known names.
    """
    try:
        return GPU_CATALOG[name]
    except KeyError:
        known = ", ".join(sorted(GPU_CATALOG))
        raise KeyError(f"unknown GPU {name!r}; known GPUs: {known}") from None


def gpu_field_names() -> tuple[str, ...]:
    """Return the names of the numeric :class:`GpuSpec` fields.

    Returns
    -------
    tuple of str
        All field names except ``sources``, in declaration order; these are
        the keys a scenario's ``[hardware]`` table may override.
    """
    return tuple(f.name for f in fields(GpuSpec) if f.name != "sources")


@dataclass(frozen=True)
class GpuPrice:
    """Published hourly rental prices of one GPU type, USD per GPU-hour.

    Attributes
    ----------
    on_demand : float or None
        Pay-as-you-go list price, USD/(GPU h); None where no source publishes one.
    reserved : float or None
        List price under a one-year commitment, USD/(GPU h); None where no source publishes one.
    sources : str
        Where each number comes from and when it was read.
    """

    on_demand: float | None
    reserved: float | None
    sources: str


# The rates a scenario may choose (`cost.price`).
PRICE_RATES = ("on_demand", "reserved")

# AWS EC2 list prices, Linux, US East (N. Virginia), per instance-hour, divided by the
# instance's 8 GPUs. One provider and one date for every type, so that a plan across
# types compares the GPUs and not the providers. Source: the AWS Price List API as
# republished by instances.vantage.sh, snapshot of 2026-01-21 (repository tsaol/aws-gpu,
# data/<family>_instances.js, commit 77fcd9fe); "reserved" there is the 1-year Standard
# Reserved Instance, no upfront (yrTerm1Standard.noUpfront). AWS sells no Reserved
# Instances of p5, p5en and p6-b200 (Savings Plans and Capacity Blocks only), so those
# types have no reserved default.
_AWS_SOURCE = "AWS EC2 price list, us-east-1, Linux, via instances.vantage.sh (snapshot 2026-01-21)"
_GPUS_PER_INSTANCE = 8


def _per_gpu(instance_usd_per_hour: float) -> float:
    """USD per GPU-hour of an 8-GPU instance's hourly price."""
    return instance_usd_per_hour / _GPUS_PER_INSTANCE


GPU_PRICES: dict[str, GpuPrice] = {
    # p4d.24xlarge (8 x A100 40GB SXM4): on-demand 21.957642 USD/h, 1-year RI no upfront
    # 13.921094 USD/h (snapshot 2026-01-21); on-demand also 2.7447 USD/(GPU h) in
    # datareceipts/data-receipts 109-gpu-pricing (retrieved 2026-11-09).
    "A100-40GB": GpuPrice(
        on_demand=_per_gpu(21.957642),
        reserved=_per_gpu(13.921094),
        sources=f"p4d.24xlarge: {_AWS_SOURCE}; 1-year Standard RI, no upfront",
    ),
    # p4de.24xlarge (8 x A100 80GB SXM4): on-demand 27.44705 USD/h, 1-year RI no upfront
    # 17.401365 USD/h (snapshot 2026-01-21).
    "A100-80GB": GpuPrice(
        on_demand=_per_gpu(27.44705),
        reserved=_per_gpu(17.401365),
        sources=f"p4de.24xlarge: {_AWS_SOURCE}; 1-year Standard RI, no upfront",
    ),
    # p5.48xlarge (8 x H100 SXM 80GB): on-demand 55.04 USD/h (snapshot 2026-01-21; the
    # June 2025 price cut; p5.4xlarge, one H100, is 6.88 USD/h). No Reserved Instances.
    "H100-SXM": GpuPrice(
        on_demand=_per_gpu(55.04),
        reserved=None,
        sources=f"p5.48xlarge: {_AWS_SOURCE}; no Reserved Instance offered",
    ),
    # p5en.48xlarge (8 x H200 141GB): on-demand 63.296 USD/h (snapshot 2026-01-21; the same
    # in dstack's `dstack offer` listing of 2026-08-06, dstackai/dstack pull request 4110).
    # p5e.48xlarge (also 8 x H200) has no public on-demand price. No Reserved Instances.
    "H200": GpuPrice(
        on_demand=_per_gpu(63.296),
        reserved=None,
        sources=f"p5en.48xlarge: {_AWS_SOURCE}; no Reserved Instance offered",
    ),
    # No provider of the catalog's source rents H800 (an export variant sold in China): no default. DeepSeek
    # priced its runs at an assumed 2 USD per H800 GPU-hour (arXiv 2412.19437, Table 1); a scenario that
    # uses that price gives it as cost.gpu_hour_usd_by_type = { H800 = 2.0 } and cites it.
    "H800": GpuPrice(
        on_demand=None,
        reserved=None,
        sources="no AWS instance (H800 is sold in China only); DeepSeek-V3's 2 USD/(GPU h) is an assumption of theirs",
    ),
    # AWS offers no GH200 instance. Other providers do (Lambda: 1.49 USD/h for one GH200,
    # SkyPilot catalog catalogs/v7/lambda/vms.csv, commit 11580132), but mixing providers
    # would make a plan across types compare providers; no default.
    "GH200": GpuPrice(
        on_demand=None,
        reserved=None,
        sources="no AWS instance; not sourced from the same provider as the other types",
    ),
    # p6-b200.48xlarge (8 x B200): on-demand 113.9328 USD/h (snapshot 2026-01-21).
    # No Reserved Instances.
    "B200": GpuPrice(
        on_demand=_per_gpu(113.9328),
        reserved=None,
        sources=f"p6-b200.48xlarge: {_AWS_SOURCE}; no Reserved Instance offered",
    ),
}
if set(GPU_PRICES) != set(GPU_CATALOG):  # one price entry per catalog type
    raise ImportError("GPU_PRICES and GPU_CATALOG name different GPU types")


def catalog_price(name: str, rate: str) -> float | None:
    """The catalog's hourly price of GPU type ``name`` at ``rate``, USD/(GPU h).

    Parameters
    ----------
    name : str
        Catalog key, e.g. ``"H100-SXM"``.
    rate : str
        One of :data:`PRICE_RATES`.

    Returns
    -------
    float or None
        The published price, or None where no source gives one.
    """
    return getattr(GPU_PRICES[name], rate)


def gpu_hour_usd(cost: Any, gpu: str) -> Any:
    """The rental price of one GPU of type ``gpu``, USD/(GPU h).

    Parameters
    ----------
    cost : CostSection
        The scenario's ``[cost]`` table. ``gpu_hour_usd`` may be an array over parameter
        draws (uncertain inputs); it is then returned as it is.
    gpu : str
        Catalog name of the GPU type.

    Returns
    -------
    float, ndarray or None
        The price, or None when neither the scenario nor the catalog gives one.
    """
    by_type = dict(cost.gpu_hour_usd_by_type)
    if gpu in by_type:
        return by_type[gpu]
    if cost.gpu_hour_usd is not None:
        return cost.gpu_hour_usd
    return catalog_price(gpu, cost.price)


def check_type_prices(
    cost: Any, gpu_types: Sequence[str], source: str, *, flat_varied: bool = False, compared: str = ""
) -> None:
    """Refuse GPU types without a price, and one explicit price across compared types.

    Parameters
    ----------
    cost : CostSection
        The scenario's ``[cost]`` table (only the ``rental`` model is checked: ``owned``
        takes its capital cost from ``gpu_capex_usd``).
    gpu_types : sequence of str
        The GPU types the scenario or plan prices (distinct catalog names).
    source : str
        The file, for the error message.
    flat_varied : bool
        Whether ``cost.gpu_hour_usd`` is swept or uncertain (so set, though not in the table).
    compared : str
        What compares the types (``search.gpu_types``, ``the sweep over hardware.gpu``), for
        the message; empty when only one type is priced.

    Raises
    ------
    ScenarioError
        Naming ``cost.gpu_hour_usd_by_type`` (a type without a price) or ``cost.gpu_hour_usd``.
    """
    if cost.model != "rental":
        return
    named = dict(cost.gpu_hour_usd_by_type)
    flat = cost.gpu_hour_usd is not None or flat_varied
    for gpu in gpu_types:
        if gpu not in named and not flat and catalog_price(gpu, cost.price) is None:
            raise ScenarioError(
                source,
                "cost.gpu_hour_usd_by_type",
                f"the catalog has no published {cost.price} price for {gpu} (docs/model.md §5); give one, e.g. "
                f"cost.gpu_hour_usd_by_type = {{ {gpu} = ... }} (USD/(GPU h))",
            )
    by_flat = [gpu for gpu in gpu_types if gpu not in named]
    if flat and len(by_flat) > 1:
        raise ScenarioError(
            source,
            "cost.gpu_hour_usd",
            f"one price for every GPU type, but {compared or 'the scenario'} compares {', '.join(by_flat)}: "
            "the cost ranking would only restate that price; remove cost.gpu_hour_usd (each type then "
            f'costs its catalog rate, cost.price = "{cost.price}") or give each type its price in '
            "cost.gpu_hour_usd_by_type",
        )
