"""Energy by phase, cost and carbon of each run (docs/model.md §5).

Per GPU, at core frequency f (x = f / f_max, gamma = ``power_freq_exponent``):

* computing: ``P_busy = P_idle + (P_tdp - P_idle) u x^gamma`` (u = ``busy_utilization``);
* waiting at a barrier (ranks that finished early, the pipeline bubble) or
  exchanging data: ``P_wait = P_idle + (P_tdp - P_idle) w x^gamma``
  (w = ``wait_power_fraction``);
* stalled for a checkpoint (copying the state out, computing nothing):
  ``P_ckpt = P_idle + (P_tdp - P_idle) c x^gamma`` (c = ``checkpoint_power_fraction``);
* recovering (allocated, idle): ``P_idle``;
* hung until the hang is detected (ranks blocked in a collective): ``P_wait``.

Within an iteration's compute phase (``compute_time * J * F``, the slowest rank's
time) the ranks compute a share ``busy_share = t_comp / (t_comp + bubble) *
E[X] / E[F]`` of the time on average (X one rank's factor, E[X] = e^{sigma^2/2};
F the slowest rank's) and wait the rest. Links cost pJ/bit for every byte moved;
storage costs ``storage_pj_per_bit`` for each checkpoint written or read; nodes
add ``node_overhead_w`` for the whole wall time; facility energy = IT x PUE.

The per-run breakdown (facility level) adds up to ``energy`` exactly:
compute + wait + checkpoint + recovery + lost + network + node.
``energy_gpu`` is the GPUs' own IT energy (no PUE, no links, storage or nodes),
to compare with studies that count GPUs only.

The same parts of the first-order expected run of candidate arrays (the planner's screen,
:mod:`mcsim.model.expected_runs`): :func:`expected_run_energy_j`, :func:`expected_run_cost_co2`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mcsim._lazy import lazy_module
from mcsim.kernels import interface as kernel
from mcsim.model.checkpointing import CheckpointPlan
from mcsim.model.stragglers import factor_law, straggler_sigma
from mcsim.model.strategies import STRATEGIES
from mcsim.model.workload import Workload, WorkloadArrays
from mcsim.scenario.catalog import gpu_hour_usd
from mcsim.scenario.config import Config

if TYPE_CHECKING:
    from scipy import special
else:  # SciPy at its first use: a command that simulates nothing never needs it
    special = lazy_module("scipy.special")

J_PER_MWH = 3.6e9
J_PER_KWH = 3.6e6
HOURS_PER_YEAR = 365.25 * 24.0
SECONDS_PER_YEAR = HOURS_PER_YEAR * 3600.0
BITS_PER_BYTE = 8.0
# The facility-level parts of `energy`, which add up to it.
ENERGY_PARTS = kernel.ENERGY_PARTS  # the facility energy by part, in the order the accounting sums them


@dataclass(frozen=True)
class PowerModel:
    """Per-GPU power by phase (W) and the compute share of an iteration's compute phase."""

    busy_w: float
    wait_w: float
    idle_w: float
    checkpoint_w: float  # stalled for a checkpoint
    busy_share: float  # share of the compute phase the ranks spend computing
    busy_share_episode: float  # ... while a slow-node episode is active
    iteration_s: float  # mean duration of an executed iteration (stragglers included)
    iteration_power_w: float  # mean per-GPU power over an executed iteration (stragglers included)


def phase_powers_w(tdp_w, idle_w, freq_mhz, freq_max_mhz, en) -> tuple:
    """Per-GPU power computing, waiting and stalled for a checkpoint, W (scalars or candidate arrays;
    ``en`` the energy section)."""
    scale = (freq_mhz / freq_max_mhz) ** en.power_freq_exponent
    headroom = tdp_w - idle_w
    busy = idle_w + headroom * en.busy_utilization * scale
    wait = idle_w + headroom * en.wait_power_fraction * scale
    checkpoint = idle_w + headroom * en.checkpoint_power_fraction * scale
    return busy, wait, checkpoint


def rank_factor_mean(sigma: float) -> float:
    """E[X] of one rank's lognormal straggler factor (median 1): ``exp(sigma^2 / 2)``."""
    return math.exp(0.5 * sigma**2)


def job_factor_mean(job_sigma: float) -> float:
    """E[max(1, e^{sZ})] of the per-run job factor."""
    return 0.5 + math.exp(0.5 * job_sigma**2) * special.ndtr(job_sigma)


def iteration_power_w(busy_w, wait_w, busy_share, phase_s, comm_s):
    """Mean per-GPU power over an executed iteration of compute phase ``phase_s`` and exposed comm ``comm_s``."""
    return (busy_w * busy_share * phase_s + wait_w * ((1 - busy_share) * phase_s + comm_s)) / (phase_s + comm_s)


def power_model(cfg: Config, wl: Workload) -> PowerModel:
    """Phase powers and shares of one feasible configuration."""
    gpu, en = cfg.gpu, cfg.energy
    busy, wait, checkpoint = phase_powers_w(gpu.tdp_w, gpu.idle_w, cfg.freq_mhz, gpu.freq_max_mhz, en)
    st, sigma = cfg.stragglers, straggler_sigma(cfg)
    law = factor_law(float(cfg.parallelism.gpus), sigma)
    rank_mean = rank_factor_mean(sigma)  # one rank's lognormal factor, median 1
    compute_share = wl.t_comp_s / wl.compute_time_s  # the rest of the compute phase is the bubble
    # E[X] <= E[F] exactly (F is the largest of the X); min() keeps the quadrature's last-digit
    # error from making the share exceed compute_share (G = 1, where E[X] = E[F]).
    busy_share = compute_share * min(1.0, rank_mean / law.mean)
    # In an episode one node's ranks compute `slowdown` times longer; the others wait for them.
    slow_share = cfg.hardware.gpus_per_node / cfg.parallelism.gpus
    episode_law = factor_law(float(cfg.parallelism.gpus), sigma, floor=st.episode_slowdown)
    busy_share_episode = compute_share * rank_mean * (1.0 + (st.episode_slowdown - 1.0) * slow_share) / episode_law.mean
    job_mean = job_factor_mean(st.job_sigma)  # E[max(1, e^{sZ})]
    phase = wl.compute_time_s * job_mean * law.mean
    iteration_power = iteration_power_w(busy, wait, busy_share, phase, wl.comm_time_s)
    # The bubble is waiting time in an episode too: the computing share is at most compute_share.
    return PowerModel(
        busy,
        wait,
        gpu.idle_w,
        checkpoint,
        busy_share,
        min(compute_share, busy_share_episode),
        phase + wl.comm_time_s,
        iteration_power,
    )


def ideal_iteration_energy_j(cfg: Config, wl: Workload, pm: PowerModel) -> float:
    """GPU energy of one ideal iteration (no stragglers), all GPUs, J.

    ``G [P_busy t_comp + P_wait (bubble + comm_time)]``.
    """
    return cfg.parallelism.gpus * (pm.busy_w * wl.t_comp_s + pm.wait_w * (wl.bubble_s + wl.comm_time_s))


def accounting_parameters(cfg: Config, wl: Workload, plan: CheckpointPlan, pm: PowerModel) -> np.ndarray:
    """The scalars of a feasible configuration that the per-run accounting reads
    (:func:`mcsim.kernels.interface.account_runs`: energy by part, cost, carbon, ETTR), by the names of
    :data:`mcsim.kernels.interface.PARAMS`.

    Products of scalars that the accounting forms before it meets a run's value are formed here,
    as the NumPy formulation did (``tests/naive_accounting.py``): a checkpoint copy's energy, the
    links' energy of an iteration, the capital cost, the embodied emissions of the GPUs held.
    """
    gpus, nodes, net = cfg.parallelism.gpus, cfg.nodes, cfg.network
    cost, carbon = cfg.cost, cfg.carbon
    rental = cost.model == "rental"
    values = dict(
        gpus=gpus,
        nodes=nodes,
        pue=cfg.energy.pue,
        busy_w=pm.busy_w,
        wait_w=pm.wait_w,
        idle_w=pm.idle_w,
        checkpoint_w=pm.checkpoint_w,
        busy_share=pm.busy_share,
        busy_share_episode=pm.busy_share_episode,
        iteration_w=pm.iteration_power_w,
        storage_j=plan.size_bytes * BITS_PER_BYTE * cfg.energy.storage_pj_per_bit * 1e-12,
        peer_j=plan.size_bytes * BITS_PER_BYTE * net.inter_pj_per_bit * 1e-12,
        peer_copies=STRATEGIES[cfg.checkpoint.strategy].peer_copies_per_checkpoint,
        load_s=plan.load_s,
        load_memory_s=plan.load_memory_s,
        bits_j=(wl.intra_bytes_per_gpu * net.intra_pj_per_bit + wl.inter_bytes_per_gpu * net.inter_pj_per_bit)
        * BITS_PER_BYTE
        * 1e-12
        * gpus,
        node_w=cfg.energy.node_overhead_w,
        rental=1.0 if rental else 0.0,
        gpu_hour_usd=gpu_hour_usd(cost, cfg.hardware.gpu) if rental else math.nan,
        capital_usd=math.nan if rental else gpus * cost.gpu_capex_usd + nodes * cost.node_capex_usd,
        amortization_h=math.nan if rental else cost.amortization_years * HOURS_PER_YEAR,
        usd_per_kwh=cost.electricity_usd_per_kwh,
        grid_g_per_kwh=carbon.grid_g_per_kwh,
        embodied_kg=carbon.embodied_kg_per_gpu * gpus,
        lifetime_s=carbon.lifetime_years * SECONDS_PER_YEAR,
        ideal_s=wl.ideal_time_s,
    )
    return np.array([values[name] for name in kernel.PARAMS], dtype=np.float64)


def allocation_usd(cost, gpu_hour_usd, gpus, nodes, hours):
    """Rental or amortised capital cost of an allocation held ``hours``, USD (scalars or arrays).

    Parameters
    ----------
    cost : CostSection
        The ``[cost]`` table: its ``model`` and, for ``owned``, the capital costs.
    gpu_hour_usd : float, ndarray or None
        Rental price of one GPU, USD/(GPU h) (per GPU type: :func:`mcsim.scenario.catalog.gpu_hour_usd`);
        unused by the ``owned`` model.
    gpus, nodes : int or ndarray
        GPUs and nodes held.
    hours : float or ndarray
        Hours held.
    """
    if cost.model == "rental":
        return gpus * hours * gpu_hour_usd
    capital = gpus * cost.gpu_capex_usd + nodes * cost.node_capex_usd
    return capital * hours / (cost.amortization_years * HOURS_PER_YEAR)


def co2_t(carbon, gpus, wall_s, energy_j) -> dict:
    """Operational and embodied emissions, tonnes CO2e (scalars or arrays; ``carbon`` the carbon section)."""
    operational = energy_j / J_PER_KWH * carbon.grid_g_per_kwh / 1e6
    lifetime_s = carbon.lifetime_years * SECONDS_PER_YEAR
    embodied = carbon.embodied_kg_per_gpu * gpus * wall_s / lifetime_s / 1e3
    return {"operational": operational, "embodied": embodied}


def expected_run_energy_j(
    cfg: Config, gpus, wl: WorkloadArrays, wall, iteration_s, every, stall, restart, active, mtbf, power, waiting
):
    """Facility energy of runs' first-order expected run (:mod:`mcsim.model.expected_runs`), J, and the
    facility power while computing, MW (arrays over runs of ``gpus`` GPUs and workload ``wl`` each).

    ``wall``: the expected wall time with every node present; ``stall``: checkpoint time per cycle,
    waits included (checkpoint power); ``restart``: recovery and load per failure, of which ``active``
    (the load and the restart's parts) at the checkpoint power and the rest idle; the rest of ``wall``
    beyond the useful iterations is lost work done again (computing); ``waiting``: the time waiting for
    repaired spare nodes on top (idle); ``power``: the per-GPU powers ``busy``, ``iteration`` (over an
    executed iteration), ``checkpoint`` and ``idle``, W."""
    en, net = cfg.energy, cfg.network
    nodes = gpus // cfg.hardware.gpus_per_node
    checkpoints = np.maximum(-(-wl.iterations // every) - 1, 0)
    stalled = checkpoints * stall
    failures = np.where(np.isfinite(mtbf), wall / mtbf, 0.0)
    recovering = failures * restart
    # One load and the restart's parts per interruption: the failures come in busy periods of e^{restart/M}
    # (docs/model.md §3, Takacs), so e^{-restart/M} interruptions a failure (to first order).
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        interruptions = failures * np.where(np.isfinite(mtbf), np.exp(-restart / mtbf), 1.0)
    loading = interruptions * np.minimum(active, restart)
    useful = wl.iterations * iteration_s
    lost = np.maximum(wall - useful - stalled - recovering, 0.0)
    gpu_j = gpus * (
        power.iteration * (useful + lost)
        + power.checkpoint * (stalled + loading)
        + power.idle * (recovering - loading + waiting)
    )
    bits_j = (
        (wl.intra_bytes_per_gpu * net.intra_pj_per_bit + wl.inter_bytes_per_gpu * net.inter_pj_per_bit)
        * BITS_PER_BYTE
        * 1e-12
        * gpus
        * wl.iterations
        * (1.0 + lost / np.where(useful > 0, useful, 1.0))
    )
    size = cfg.model.params * cfg.checkpoint.bytes_per_param
    storage_j = checkpoints * size * BITS_PER_BYTE * en.storage_pj_per_bit * 1e-12
    node_j = nodes * en.node_overhead_w * (wall + waiting)
    energy = en.pue * (gpu_j + bits_j + storage_j + node_j)
    power_mw = en.pue * (gpus * power.busy + nodes * en.node_overhead_w) / 1e6
    return energy, power_mw


def expected_run_cost_co2(
    cfg: Config, gpus: np.ndarray, gpu_hour_usd: np.ndarray, wall: np.ndarray, energy: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Expected cost, USD (allocation plus electricity), and emissions, t CO2e (operational plus embodied),
    of runs of ``gpus`` GPUs at ``gpu_hour_usd`` (per run), ``wall`` s and ``energy`` J each."""
    nodes = gpus // cfg.hardware.gpus_per_node
    cost = (
        allocation_usd(cfg.cost, gpu_hour_usd, gpus, nodes, wall / 3600.0)
        + energy / J_PER_KWH * cfg.cost.electricity_usd_per_kwh
    )
    co2 = co2_t(cfg.carbon, gpus, wall, energy)
    return cost, co2["operational"] + co2["embodied"]
