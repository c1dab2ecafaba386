"""Shared builders for mcsim's tests."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from mcsim.kernels import montecarlo as mc

# A small, valid scenario: 64 GPUs, short training, one exponential GPU failure class.
SMALL_SCENARIO = {
    "name": "small",
    "model": {"params": 1.3e9, "layers": 24, "hidden": 2048, "seq_len": 2048, "tokens": 2e9,
              "global_batch": 512, "recompute": "selective"},
    "hardware": {"gpu": "A100-80GB", "gpus_per_node": 8},
    "parallelism": {"gpus": 64, "tp": 2, "pp": 2, "microbatch": 1},
    "compute": {"efficiency": 0.5},
    "stragglers": {"sigma": 0.05},
    "failures": [{"name": "gpu", "scope": "gpu", "shape": 1.0, "mtbf_hours": 2000.0,
                  "recovery_minutes": 10.0}],
    "checkpoint": {"strategy": "sync", "interval": {"iterations": 50}},
    "run": {"runs": 200, "seed": 7, "mode": "exact", "max_wall_days": 365.0},
}


@pytest.fixture
def small_raw() -> dict:
    """A fresh copy of the small scenario's tables."""
    return copy.deepcopy(SMALL_SCENARIO)


def kernel_params(**overrides) -> mc.RunParams:
    """RunParams of a simple configuration, with overrides."""
    values = dict(iterations=1000, compute_time_s=0.9, comm_time_s=0.1, n_ranks=1.0, sigma=0.0,
                  job_sigma=0.0, checkpoint_every=100, checkpoint_stall_s=10.0, checkpoint_write_s=0.0,
                  is_async=False, load_s=5.0, max_wall_s=1e9, max_failures=10**6, fast_min_block=0,
                  factor_mean=1.0, factor_std=0.0)
    values.update(overrides)
    return mc.RunParams(**values)


def run_kernel(params: mc.RunParams, classes: list[tuple[int, float, float, float]], runs: int,
               seed: int = 0, first_run: int = 0) -> np.ndarray:
    """Kernel output for failure classes given as (units, shape, scale_s, recovery_s)."""
    units = np.array([c[0] for c in classes], dtype=np.int64)
    shape = np.array([c[1] for c in classes], dtype=np.float64)
    scale = np.array([c[2] for c in classes], dtype=np.float64)
    recovery = np.array([c[3] for c in classes], dtype=np.float64)
    out = np.zeros((runs, mc.N_OUT))
    mc.simulate_runs(params, units, shape, scale, recovery, seed, first_run, out)
    return out
