"""Energy by phase, DVFS, cost and carbon (docs/model.md §5), against hand values and closed forms."""

from __future__ import annotations

import copy
import math

import naive
import numpy as np
import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.model.energy import ENERGY_PARTS
from mcsim.model.workload import workload
from mcsim.scenario.config import load_scenario, scenario_from_dict

SCENARIOS = mcsim.reference_scenario_path().parent


def _ds(raw: dict) -> xr.Dataset:  # noqa: F821
    return mcsim.simulate(scenario_from_dict(raw, "test.toml"), progress=False)


@pytest.mark.parametrize("strategy", ["sync", "async", "in_memory"])
def test_breakdown_adds_up_to_energy(strategy):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["checkpoint"]["strategy"] = strategy
    raw["failures"][0]["mtbf_hours"] = 60.0
    raw["stragglers"].update(sigma=0.1, job_sigma=0.05)
    raw["run"]["runs"] = 100
    ds = _ds(raw)
    parts = sum(ds[f"energy_{k}"] for k in ENERGY_PARTS)
    np.testing.assert_allclose(parts, ds["energy"], rtol=1e-9)
    assert (ds["n_failures"] > 0).any() and (ds["energy_lost"] > 0).any() and (ds["energy_recovery"] > 0).any()
    for k in ENERGY_PARTS:
        assert np.all(ds[f"energy_{k}"] >= 0), k


def test_hand_computed_energy_tiny_deterministic():
    # One A100-80GB (idle 60 W, TDP 400 W, 312 TFLOP/s, 1410 MHz), 1 GPU per node, no
    # failures, sigma 0, no communication (tp = pp = dp = 1), efficiency 0.5.
    # F = 6 * 1e9 * 8 * 1024 = 4.9152e13 FLOPs; t_comp = 4.9152e13 / (312e12 * 0.5) = 0.315077 s;
    # I = 8 * 1024 * 100 / (8 * 1024) = 100 iterations -> wall = 31.5077 s, no checkpoints.
    # GPU at max frequency, u = 1: 400 W while computing -> 12,603.1 J; node overhead
    # 100 W x 31.5077 s = 3,150.8 J; PUE 1.5 -> 23,630.8 J.
    raw = {
        "name": "tiny",
        "model": {
            "params": 1e9,
            "layers": 2,
            "hidden": 1024,
            "seq_len": 1024,
            "tokens": 8 * 1024 * 100,
            "global_batch": 8,
            "recompute": "none",
        },
        "hardware": {"gpu": "A100-80GB", "gpus_per_node": 1},
        "parallelism": {"gpus": 1},
        "compute": {"efficiency": 0.5, "step_model": "aggregate"},  # §2: the closed form below
        "energy": {"pue": 1.5, "node_overhead_w": 100.0},
        "cost": {"gpu_hour_usd": 3.0, "electricity_usd_per_kwh": 0.2},
        "carbon": {"grid_g_per_kwh": 500.0, "embodied_kg_per_gpu": 1000.0, "lifetime_years": 4.0},
        "run": {"runs": 3},
    }
    ds = _ds(raw)
    wall_s = 100 * 4.9152e13 / (312e12 * 0.5)
    assert float(ds["wall_time"][0]) * 3600 == pytest.approx(wall_s, rel=1e-12)
    expected_j = 1.5 * (400.0 * wall_s + 100.0 * wall_s)
    assert float(ds["energy"][0]) * 3.6e9 == pytest.approx(expected_j, rel=1e-12)
    assert float(ds["energy_compute"][0]) * 3.6e9 == pytest.approx(1.5 * 400.0 * wall_s, rel=1e-12)
    assert float(ds["energy_node"][0]) * 3.6e9 == pytest.approx(1.5 * 100.0 * wall_s, rel=1e-12)
    assert float(ds["energy_wait"][0]) == 0.0 and float(ds["energy_network"][0]) == 0.0
    assert float(ds["energy_gpu"][0]) * 3.6e9 == pytest.approx(400.0 * wall_s, rel=1e-12)
    # cost: 1 GPU x wall_h x 3 USD + kWh x 0.2; co2: kWh x 500 g + 1000 kg x wall / 4 years
    kwh = expected_j / 3.6e6
    assert float(ds["cost"][0]) == pytest.approx(wall_s / 3600 * 3.0 + kwh * 0.2, rel=1e-12)
    assert float(ds["co2"][0]) == pytest.approx(kwh * 500 / 1e6 + 1000 * wall_s / (4 * 365.25 * 86400) / 1e3, rel=1e-12)
    assert float(ds["iteration_energy"]) == pytest.approx(400.0 * wall_s / 100, rel=1e-12)


@pytest.mark.parametrize("gpu,expected_w", [("H100-SXM", 104.8), ("A100-80GB", 73.6)])
def test_checkpoint_stall_power_is_above_idle(gpu, expected_w):
    # Stalled for a checkpoint a GPU draws idle + 4 % of (TDP - idle) at full clock (docs/model.md §5):
    # H100 80 + 0.04 x 620 = 104.8 W, which Morrison et al. (ICLR 2025, arXiv 2503.05804) measured as
    # "just over 100 W, or about 15 % of maximum"; A100 60 + 0.04 x 340 = 73.6 W. The run's checkpoint
    # energy is that power times the stalled time, plus the storage writes (100 pJ/bit), times the PUE.
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["hardware"]["gpu"] = gpu
    raw["failures"] = []
    raw["energy"] = {"pue": 1.2}
    raw["run"]["runs"] = 2
    ds = _ds(raw)
    stalled_s = float(ds["checkpoint_time"][0]) * 3600.0
    writes = float(ds["iterations"]) // 50  # sync checkpoints every 50 iterations, none at the end
    writes -= 1 if int(ds["iterations"]) % 50 == 0 else 0
    size_bits = 1.3e9 * 14 * 8
    expected_j = 1.2 * (64 * expected_w * stalled_s + writes * size_bits * 100e-12)
    assert stalled_s > 0
    assert float(ds["energy_checkpoint"][0]) * 3.6e9 == pytest.approx(expected_j, rel=1e-9)


def test_barrier_waiting_energy_matches_expected_waiting_time():
    # 64 ranks, sigma 0.3, no exposed communication (tp = pp = 1, DP fully overlapped), no
    # failures, PUE 1. Per iteration each rank computes compute_time * X_i and waits
    # compute_time * (M - X_i): expected waiting rank-time per iteration
    # = G * compute_time * (E[M] - E[X]), E[X] = e^{sigma^2/2}, E[M] by quadrature (naive).
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["parallelism"].update(tp=1, pp=1, overlap_dp=1.0)
    raw["stragglers"]["sigma"] = 0.3
    raw["failures"] = []
    raw["energy"] = {"pue": 1.0}
    raw["run"].update(runs=400, mode="exact")
    scenario = scenario_from_dict(raw)
    cfg = scenario.base
    wl = workload(cfg)
    ds = mcsim.simulate(scenario, progress=False)
    e_m = naive.max_lognormal_mean_u(64, 0.3)
    wait_w = cfg.gpu.idle_w + 0.6 * (cfg.gpu.tdp_w - cfg.gpu.idle_w)  # default wait fraction 0.6, f = f_max
    expected_j = wait_w * 64 * wl.iterations * wl.compute_time_s * (e_m - math.exp(0.045))
    sample = ds["energy_wait"].values * 3.6e9
    assert wl.comm_time_s == 0.0
    assert abs(sample.mean() - expected_j) < 4 * sample.std(ddof=1) / math.sqrt(len(sample))


def _seed(name: str):
    ds = mcsim.simulate(load_scenario(SCENARIOS / f"dvfs-opt350m-{name}.toml", runs=2), progress=False)
    return ds["freq_mhz"].values, ds["iteration_time"].values, ds["iteration_energy"].values, ds["gpu_power"].values


def test_seed_single_gpu_energy_valley():
    # EuroMLSys'26 seed: on one GPU, energy per iteration is valley-shaped over 240-1410 MHz
    # while power falls and iteration time rises monotonically as the clock goes down.
    f, t, e, p = _seed("1gpu")
    assert np.all(np.diff(f) > 0)
    assert 0 < int(np.argmin(e)) < len(f) - 1
    assert np.all(np.diff(t) < 0) and np.all(np.diff(p) > 0)


def test_seed_parallel_configurations_crossover():
    f, t_dp, e_dp, _ = _seed("dp4")
    f2, t_pp, e_pp, _ = _seed("pp2")
    assert np.array_equal(f, f2)
    # At maximum frequency the faster configuration (data-parallel) uses less energy.
    assert t_dp[-1] < t_pp[-1] and e_dp[-1] < e_pp[-1]
    # Pipeline-parallel loses less time per MHz of down-clocking ...
    assert (t_pp[0] - t_pp[-1]) / (f[-1] - f[0]) < (t_dp[0] - t_dp[-1]) / (f[-1] - f[0])
    # ... and below some frequency its energy per iteration is lower: a crossover.
    assert e_pp[0] < e_dp[0]
    crossings = np.flatnonzero(np.diff(np.sign(e_pp - e_dp)))
    assert len(crossings) == 1


def test_dvfs_scales_compute_share_only():
    raw = copy.deepcopy(SMALL_SCENARIO)
    base = workload(scenario_from_dict(raw).base)
    raw["compute"].update(freq_mhz=705.0, freq_scaling_share=0.6)  # half the A100's 1410 MHz
    slow = workload(scenario_from_dict(raw).base)
    # t_comp x (0.6 * 1410/705 + 0.4) = 1.6 t_comp; bubble scales with it; communication does not.
    assert slow.t_comp_s == pytest.approx(1.6 * base.t_comp_s, rel=1e-12)
    assert slow.bubble_s == pytest.approx(1.6 * base.bubble_s, rel=1e-12)
    assert slow.comm_time_s == pytest.approx(base.comm_time_s, rel=1e-12)


@pytest.mark.parametrize("model", ["rental", "owned"])
def test_cost_and_co2_formulas_exact(model):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["cost"] = {
        "model": model,
        "gpu_hour_usd": 2.5,
        "electricity_usd_per_kwh": 0.1,
        "gpu_capex_usd": 30000.0,
        "node_capex_usd": 80000.0,
        "amortization_years": 4.0,
    }
    raw["carbon"] = {"grid_g_per_kwh": 300.0, "embodied_kg_per_gpu": 200.0, "lifetime_years": 6.0}
    ds = _ds(raw)
    hours, kwh = ds["wall_time"], ds["energy"] * 1000.0
    if model == "rental":
        allocation = 64 * hours * 2.5
    else:  # (64 GPUs x 30,000 + 8 nodes x 80,000) USD over 4 years of 8,766 h
        allocation = (64 * 30000.0 + 8 * 80000.0) * hours / (4 * 8766.0)
    np.testing.assert_allclose(ds["cost_allocation"], allocation, rtol=1e-12)
    np.testing.assert_allclose(ds["cost_electricity"], kwh * 0.1, rtol=1e-12)
    np.testing.assert_allclose(ds["cost"], ds["cost_allocation"] + ds["cost_electricity"], rtol=1e-12)
    np.testing.assert_allclose(ds["co2_operational"], kwh * 300.0 / 1e6, rtol=1e-12)
    np.testing.assert_allclose(ds["co2_embodied"], 200.0 * 64 * hours / (6 * 8766.0) / 1e3, rtol=1e-12)
    np.testing.assert_allclose(ds["co2"], ds["co2_operational"] + ds["co2_embodied"], rtol=1e-12)


def test_episode_energy_charges_waiting_ranks_at_wait_power():
    # Review finding: during a slow-node episode only that node's ranks compute longer; the
    # others wait. With sigma 0, no failures, no communication and an episode active from
    # early on to the end (mean 1e5 h), each iteration has G ranks computing c plus one
    # node's 8 ranks computing (s - 1) c more, and G - 8 ranks waiting (s - 1) c:
    # E_compute = P_busy c I (G + 8 (s - 1)), E_wait = P_wait c I (s - 1) (G - 8), up to the
    # minutes before the first episode (arrivals 10 / node-day over 8 nodes).
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["parallelism"].update(tp=1, pp=1, overlap_dp=1.0)
    raw["model"]["tokens"] = 3e11
    raw["stragglers"] = {"sigma": 0.0, "episode_rate_per_node_day": 10.0, "episode_hours": 1e5, "episode_slowdown": 1.5}
    raw["failures"] = []
    raw["energy"] = {"pue": 1.0}
    raw["run"]["runs"] = 50
    scenario = scenario_from_dict(raw)
    cfg, wl = scenario.base, workload(scenario.base)
    ds = mcsim.simulate(scenario, progress=False)
    busy_w, wait_w = cfg.gpu.tdp_w, cfg.gpu.idle_w + 0.6 * (cfg.gpu.tdp_w - cfg.gpu.idle_w)
    c, n = wl.compute_time_s, wl.iterations
    assert n * c > 50 * 3600  # a long run: the episode-free start is a small share
    compute = float(ds["energy_compute"].mean()) * 3.6e9
    wait = float(ds["energy_wait"].mean()) * 3.6e9
    assert compute == pytest.approx(busy_w * c * n * (64 + 8 * 0.5), rel=0.03)
    assert wait == pytest.approx(wait_w * c * n * 0.5 * (64 - 8), rel=0.05)


def test_recovery_energy_by_state_down_restarting_hung():
    # Power by state (docs/model.md §5): during a recovery the GPUs are down (idle,
    # A100 60 W) until the restart's parts and the checkpoint load (load_time), which draw the checkpoint power
    # (A100 60 + 0.04 x 340 = 73.6 W: reading the state back, the mirror of Morrison et al.'s
    # measured checkpoint phase); hung ranks draw the waiting power (60 + 0.6 x 340 = 264 W). Sync
    # checkpoints: every recovery attempt (n_failures of them) starts one load from storage.
    from mcsim.model.checkpointing import checkpoint_plan

    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = [
        {"name": "gpu", "scope": "gpu", "shape": 1.0, "mtbf_hours": 60.0, "recovery_minutes": 10.0},
        {"name": "hang", "kind": "hang", "scope": "node", "mtbf_hours": 20.0, "detection_minutes": 10.0},
    ]
    raw["restart"] = {"from_parts": True}
    raw["energy"] = {"pue": 1.2}
    raw["run"]["runs"] = 50
    scenario = scenario_from_dict(raw, "test.toml")
    ds = mcsim.simulate(scenario, progress=False)
    load_s = checkpoint_plan(scenario.base, workload(scenario.base)).load_s
    recovery = ds["recovery_time"].values * 3600.0
    hung = ds["hang_detection_time"].values * 3600.0
    loading = ds["load_time"].values * 3600.0  # the kernel's time in loads (cut short ones included)
    assert (loading <= ds["n_failures"].values * load_s * (1 + 1e-12)).all()
    restarting = ds["restart_time"].values * 3600.0 + loading
    down = recovery - hung - restarting
    # Reads: a checkpoint's bytes per load at 100 pJ/bit, in the share of the loads' time that ran.
    started = ds["n_failures"].values
    share = np.where(started > 0, loading / np.maximum(started * load_s, 1e-300), 0.0)
    reads_j = started * 1.3e9 * 14 * 8 * 100e-12 * np.minimum(share, 1.0)
    expected_j = 1.2 * (64 * (60.0 * down + 73.6 * restarting + 264.0 * hung) + reads_j)
    assert (restarting > 0).any() and (down > 0).any() and (hung > 0).any()
    np.testing.assert_allclose(ds["energy_recovery"].values * 3.6e9, expected_j, rtol=1e-9)
