"""Energy, cost and carbon of each run from its time components (SPEC §4.5).

This is the first, simple power model (issue 2; the energy issue refines it):

* A GPU draws its busy power while it executes iterations (useful and later
  rolled back), ``P_busy = P_idle + (P_tdp - P_idle) (f/f_max)^gamma``, and its
  idle power the rest of the time (checkpoint stalls, recovery).
* Every node adds ``node_overhead_w`` for the whole wall time.
* Facility energy = IT energy x PUE.

``gamma`` = :data:`BUSY_POWER_FREQ_EXPONENT`, see ``docs/model.md``.
"""

from __future__ import annotations

import numpy as np

from .scenario import Config

# Exponent of busy power in the frequency ratio. Dynamic power goes as f V^2
# and V falls with f over the DVFS range, giving 2-3 (SPEC §4.5 "about 2-3");
# 2.5 is the middle of that range (assumption, see docs/model.md).
BUSY_POWER_FREQ_EXPONENT = 2.5
J_PER_MWH = 3.6e9
J_PER_KWH = 3.6e6
SECONDS_PER_YEAR = 365.25 * 86400.0


def busy_power_w(cfg: Config) -> float:
    """Busy power of one GPU at the configured frequency, W."""
    gpu = cfg.gpu
    ratio = cfg.freq_mhz / gpu.freq_max_mhz
    return gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * ratio**BUSY_POWER_FREQ_EXPONENT


def run_energy_j(cfg: Config, wall_s: np.ndarray, busy_s: np.ndarray) -> np.ndarray:
    """Facility energy of each run, J."""
    gpus = cfg.parallelism.gpus
    gpu_j = gpus * (busy_power_w(cfg) * busy_s + cfg.gpu.idle_w * (wall_s - busy_s))
    node_j = cfg.nodes * cfg.energy.node_overhead_w * wall_s
    return (gpu_j + node_j) * cfg.energy.pue


def run_cost_usd(cfg: Config, wall_s: np.ndarray, energy_j: np.ndarray) -> np.ndarray:
    """Allocation plus electricity: ``G wall_h gpu_hour_usd + kWh electricity_usd_per_kwh``."""
    allocation = cfg.parallelism.gpus * wall_s / 3600.0 * cfg.cost.gpu_hour_usd
    return allocation + energy_j / J_PER_KWH * cfg.cost.electricity_usd_per_kwh


def run_co2_t(cfg: Config, wall_s: np.ndarray, energy_j: np.ndarray) -> np.ndarray:
    """Operational plus embodied emissions, tonnes CO2e.

    ``kWh * grid_g_per_kwh / 1e6 + embodied_kg_per_gpu * G * wall / lifetime / 1e3``.
    """
    operational = energy_j / J_PER_KWH * cfg.carbon.grid_g_per_kwh / 1e6
    lifetime_s = cfg.carbon.lifetime_years * SECONDS_PER_YEAR
    embodied = cfg.carbon.embodied_kg_per_gpu * cfg.parallelism.gpus * wall_s / lifetime_s / 1e3
    return operational + embodied
