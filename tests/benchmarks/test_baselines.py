"""The speed suite's NumPy and SimPy baselines simulate the same model as mcsim's kernel.

The baselines live in ``benchmarks/baselines.py`` (not a package module); they are
loaded from the file so that the source tree is not put on ``sys.path`` (its
``mcsim/`` folder would shadow the installed package).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import naive
import numpy as np
import pytest
from builders import kernel_params, run_kernel
from scipy import stats

from mcsim.kernels import interface as mc
from mcsim.model.stragglers import factor_law

pytest.importorskip("simpy")

_SPEC = importlib.util.spec_from_file_location(
    "mcsim_benchmark_baselines", Path(__file__).parents[2] / "benchmarks" / "baselines.py"
)
baselines = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(baselines)

BASE = dict(I=200, c=0.9, m=0.1, G=1, sigma=0.0, K=20, C=2.0, L=3.0, U=10, mtbf_s=500.0, R=10.0, max_wall_s=1e9)
CASES = {
    # ~3 failures a run (rate 0.02/s), some during recoveries; sigma = 0 has a closed form.
    "many_failures": BASE,
    # Stragglers on, G = 16 ranks, fewer failures.
    "stragglers": dict(BASE, I=300, G=16, sigma=0.2, K=25, C=3.0, L=5.0, U=4, mtbf_s=2000.0, R=20.0),
    # Many failures and stragglers, censored at max_wall_s in about half of the runs.
    "censored": dict(BASE, G=8, sigma=0.1, max_wall_s=400.0),
}
BASELINE_RUNS = 400
MCSIM_RUNS = 4000


def mcsim_wall(p: dict, fast: bool, runs: int = MCSIM_RUNS, seed: int = 11) -> np.ndarray:
    """mcsim's wall times for the baseline parameters (sync checkpoints, one exponential class)."""
    law = factor_law(p["G"], p["sigma"])
    params = kernel_params(
        iterations=p["I"],
        compute_time_s=p["c"],
        comm_time_s=p["m"],
        n_ranks=float(p["G"]),
        sigma=p["sigma"],
        checkpoint_every=p["K"],
        checkpoint_stall_s=p["C"],
        load_s=p["L"],
        max_wall_s=p["max_wall_s"],
        fast=fast,
        fast_min_block=1,
        factor_mean=law.mean,
        factor_std=law.std,
    )
    out = run_kernel(params, [(p["U"], 1.0, p["mtbf_s"], p["R"])], runs, seed=seed)
    return out[:, mc.OUT_WALL_S]


def renewal_mean_wall(p: dict) -> float:
    """Renewal-reward expected wall time for sigma = 0 (no censoring)."""
    lam = p["U"] / p["mtbf_s"]
    it = p["c"] + p["m"]

    def f(s: float) -> float:
        return math.expm1(lam * s) * math.exp(lam * (p["R"] + p["L"])) / lam

    n_full = math.ceil(p["I"] / p["K"]) - 1
    last = p["I"] - n_full * p["K"]
    return n_full * f(p["K"] * it + p["C"]) + f(last * it)


def z_score(a: np.ndarray, b: np.ndarray) -> float:
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return (a.mean() - b.mean()) / se


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", ["numpy", "simpy"])
def test_baseline_matches_mcsim(name, case):
    p = CASES[case]
    wall = baselines.BASELINES[name](p, BASELINE_RUNS, 3)
    assert wall.shape == (BASELINE_RUNS,)
    assert np.all(wall > 0.0) and np.all(wall <= p["max_wall_s"])
    # NumPy draws every rank factor (exact mode); SimPy draws block sums (fast mode).
    ref = mcsim_wall(p, fast=(name == "simpy"))
    z = z_score(wall, ref)
    assert abs(z) < 4.0, f"{name} {case}: {wall.mean():.2f} vs mcsim {ref.mean():.2f} (z = {z:.2f})"
    if p["max_wall_s"] < 1e9:
        censored, ref_censored = np.mean(wall >= p["max_wall_s"]), np.mean(ref >= p["max_wall_s"])
        assert 0.1 < ref_censored < 0.9
        se = math.sqrt(ref_censored * (1 - ref_censored) * (1 / wall.size + 1 / ref.size))
        assert abs(censored - ref_censored) < 4 * se


@pytest.mark.parametrize("name", ["numpy", "simpy"])
def test_baseline_matches_renewal_reward(name):
    p = CASES["many_failures"]
    assert p["sigma"] == 0.0
    wall = baselines.BASELINES[name](p, BASELINE_RUNS, 5)
    expected = renewal_mean_wall(p)
    se = wall.std(ddof=1) / math.sqrt(wall.size)
    assert abs(wall.mean() - expected) < 4 * se, f"{name}: {wall.mean():.2f} vs {expected:.2f} +- {se:.2f}"
    # The kernel agrees with the same closed form (a check of the comparison itself).
    ref = mcsim_wall(p, fast=False)
    assert abs(ref.mean() - expected) < 4 * ref.std(ddof=1) / math.sqrt(ref.size)


def test_no_failures_no_stragglers_is_deterministic():
    p = dict(BASE, mtbf_s=1e30, I=95)
    expected = 95 * (p["c"] + p["m"]) + (95 // p["K"]) * p["C"]
    for name, fn in baselines.BASELINES.items():
        np.testing.assert_allclose(fn(p, 3, 0), expected, rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0])
def test_expected_max_factor_closed_forms(sigma):
    # G = 1: M = exp(sigma Z), lognormal: E = e^(s^2/2), Var = e^(s^2) (e^(s^2) - 1).
    mean, var = baselines.expected_max_factor(1, sigma)
    assert mean == pytest.approx(math.exp(sigma**2 / 2), rel=1e-9)
    assert var == pytest.approx(math.exp(sigma**2) * math.expm1(sigma**2), rel=1e-7)
    # G = 2: E[exp(t max(Z1, Z2))] = 2 e^(t^2/2) Phi(t / sqrt 2) (the larger of two iid
    # normals: 2 E[e^(t Z1) 1{Z2 < Z1}] = 2 e^(t^2/2) P(Z2 < Z1 + t)); t = sigma and 2 sigma.
    first = 2 * math.exp(sigma**2 / 2) * stats.norm.cdf(sigma / math.sqrt(2))
    second = 2 * math.exp(2 * sigma**2) * stats.norm.cdf(2 * sigma / math.sqrt(2))
    mean, var = baselines.expected_max_factor(2, sigma)
    assert mean == pytest.approx(first, rel=1e-9)
    assert var == pytest.approx(second - first**2, rel=1e-6)


@pytest.mark.parametrize("G, sigma", [(8, 0.2), (1024, 0.05), (1e6, 0.3)])
def test_expected_max_factor_matches_quadrature_in_u(G, sigma):
    # tests/naive.py integrates M(u) = exp(sigma Phi^-1(u^(1/G))) over u in (0, 1), a
    # different variable and integrand from the baseline's density of the maximum in z.
    mean, var = baselines.expected_max_factor(G, sigma)
    ref_mean, ref_var, _ = naive.max_lognormal_central_moments_u(G, sigma)
    assert mean == pytest.approx(ref_mean, rel=1e-9)
    assert var == pytest.approx(ref_var, rel=1e-6)
