"""The run loop against closed forms and invariants (fixed seeds, |z| < 4)."""

from __future__ import annotations

import math

import naive
import numpy as np
import pytest
from builders import kernel_params, run_kernel

from mcsim.kernels import interface as mc
from mcsim.model.stragglers import max_lognormal_moments


def _z(sample: np.ndarray, expected: float) -> float:
    return (sample.mean() - expected) / (sample.std(ddof=1) / math.sqrt(len(sample)))


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize(
    "every,stall,mtbf_s,units",
    [
        (100, 10.0, 300.0, 1),  # lambda s ~ 0.37 per segment: many failures
        (37, 2.0, 2.0e6, 4000),  # many units, each rare: superposed Poisson, rate 2e-3/s
        (1000, 0.0, 5000.0, 1),  # no intermediate checkpoint: one segment
    ],
)
def test_exponential_failures_sync_match_renewal_reward(fast, every, stall, mtbf_s, units):
    iterations, recovery, load = 1050, 40.0, 5.0
    p = kernel_params(iterations=iterations, checkpoint_every=every, checkpoint_stall_s=stall, load_s=load, fast=fast)
    out = run_kernel(p, [(units, 1.0, mtbf_s, recovery)], runs=4000, seed=11)
    assert np.all(out[:, mc.OUT_COMPLETED] == 1.0)
    # Expected value: renewal-reward closed form (tests/naive.py), system rate units / MTBF,
    # recovery R = class recovery + checkpoint load, iteration 0.9 + 0.1 s, no stragglers.
    expected = naive.renewal_reward_mean_wall_s(
        iterations, 1.0, min(every, iterations), stall, units / mtbf_s, recovery + load
    )
    assert abs(_z(out[:, mc.OUT_WALL_S], expected)) < 4


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("n_ranks,sigma,job_sigma", [(1, 0.2, 0.0), (1024, 0.05, 0.0), (131072, 0.02, 0.0)])
def test_no_failures_stragglers_mean_wall(fast, n_ranks, sigma, job_sigma):
    iterations, every, stall = 3000, 200, 3.0
    mean, var = max_lognormal_moments(n_ranks, sigma)
    p = kernel_params(
        iterations=iterations,
        n_ranks=float(n_ranks),
        sigma=sigma,
        checkpoint_every=every,
        checkpoint_stall_s=stall,
        fast=fast,
        fast_min_block=16,
        factor_mean=mean,
        factor_std=math.sqrt(var),
    )
    out = run_kernel(p, [], runs=2000, seed=5)
    # E[M] by quadrature in u (tests/naive.py); checkpoints after 200, 400, ..., 2800: 14 stalls.
    e_m = naive.max_lognormal_mean_u(n_ranks, sigma)
    expected = iterations * (0.9 * e_m + 0.1) + (iterations // every - 1) * stall
    assert abs(_z(out[:, mc.OUT_WALL_S], expected)) < 4
    assert np.all(out[:, mc.OUT_CHECKPOINTS] == iterations // every - 1)


@pytest.mark.parametrize("is_async,fast", [(False, False), (True, False), (False, True), (True, True)])
def test_time_decomposition_adds_up(is_async, fast):
    n_ranks, sigma = 512, 0.1
    mean, var = max_lognormal_moments(n_ranks, sigma)
    p = kernel_params(
        iterations=2000,
        n_ranks=float(n_ranks),
        sigma=sigma,
        job_sigma=0.05,
        checkpoint_every=60,
        checkpoint_stall_s=4.0,
        checkpoint_write_s=30.0 if is_async else 0.0,
        is_async=is_async,
        fast=fast,
        fast_min_block=16,
        factor_mean=mean,
        factor_std=math.sqrt(var),
    )
    out = run_kernel(p, [(64, 0.7, 64 * 1500.0, 20.0), (1, 1.5, 4000.0, 60.0)], runs=500, seed=3)
    done = out[:, mc.OUT_COMPLETED] == 1.0
    assert done.all()
    # wall = iterations x ideal + straggler + lost + checkpoint + recovery (docs/model.md)
    parts = (
        2000 * 1.0
        + out[:, mc.OUT_STRAGGLER_S]
        + out[:, mc.OUT_LOST_S]
        + out[:, mc.OUT_CHECKPOINT_S]
        + out[:, mc.OUT_RECOVERY_S]
    )
    np.testing.assert_allclose(parts, out[:, mc.OUT_WALL_S], rtol=1e-9)
    # GPUs computed for the useful iterations plus the rolled-back ones.
    np.testing.assert_allclose(
        out[:, mc.OUT_BUSY_S], 2000 + out[:, mc.OUT_STRAGGLER_S] + out[:, mc.OUT_LOST_S], rtol=1e-9
    )
    assert (out[:, mc.OUT_FAILURES] > 0).mean() > 0.5


def test_async_with_instant_write_equals_sync():
    # Durable the moment the stall ends: async must reproduce sync bit for bit.
    classes = [(8, 0.8, 8 * 900.0, 30.0)]
    sync = run_kernel(kernel_params(checkpoint_every=40), classes, runs=200, seed=4)
    asyn = run_kernel(
        kernel_params(checkpoint_every=40, is_async=True, checkpoint_write_s=0.0), classes, runs=200, seed=4
    )
    np.testing.assert_array_equal(sync, asyn)


def test_async_rollback_reaches_back_at_most_to_previous_durable_checkpoint():
    # Checkpoints every 50 one-second iterations; the async write takes 45 s after the stall, so
    # a failure in that window rolls back to the previous checkpoint. Rolled-back iteration
    # time per failure is then at most two intervals (100 s), and at most one (50 s) for sync.
    classes = [(1, 1.0, 800.0, 10.0)]
    base = dict(iterations=600, checkpoint_every=50, checkpoint_stall_s=1.0)
    sync = run_kernel(kernel_params(**base), classes, runs=2000, seed=9)
    asyn = run_kernel(kernel_params(**base, is_async=True, checkpoint_write_s=45.0), classes, runs=2000, seed=9)
    for out, bound in ((sync, 50.0), (asyn, 100.0)):
        one = out[:, mc.OUT_FAILURES] == 1
        assert one.sum() > 20
        assert out[one, mc.OUT_LOST_S].max() <= bound + 1e-9
    one = asyn[:, mc.OUT_FAILURES] == 1
    # ... and the durability window is real: some single failures lose more than one interval.
    assert (asyn[one, mc.OUT_LOST_S] > 50.0).any()


def test_mtbf_shorter_than_recovery_terminates_censored():
    # System MTBF 2 min, recovery 20 min: recovery almost never finishes. The run must stop
    # at max_wall (2 days), censored, in bounded time.
    max_wall = 2 * 86400.0
    p = kernel_params(max_wall_s=max_wall)
    out = run_kernel(p, [(1, 1.0, 120.0, 1200.0)], runs=50, seed=1)
    assert np.all(out[:, mc.OUT_COMPLETED] == 0.0)
    np.testing.assert_allclose(out[:, mc.OUT_WALL_S], max_wall)
    # About max_wall / MTBF failures (Poisson count, SE = sqrt(mean/runs))
    mean_failures = max_wall / 120.0
    assert abs(out[:, mc.OUT_FAILURES].mean() - mean_failures) < 4 * math.sqrt(mean_failures / 50)


def test_failure_cap_censors():
    p = kernel_params(max_failures=100)
    out = run_kernel(p, [(1, 1.0, 60.0, 1200.0)], runs=5, seed=1)
    assert np.all(out[:, mc.OUT_COMPLETED] == 0.0)
    assert np.all(out[:, mc.OUT_FAILURES] == 100)


def test_weibull_units_failure_count_matches_renewal_function():
    # No checkpoints matter here: count failures of 2000 Weibull(k=0.7) units over a fixed
    # horizon (max_wall, job never ends). For one unit with k != 1 the expected count is the
    # renewal function; estimate it independently by simulating each unit's renewals in numpy.
    horizon, k, scale = 5000.0, 0.7, 20000.0
    p = kernel_params(iterations=10**9, checkpoint_every=10**9, max_wall_s=horizon, load_s=0.0)
    out = run_kernel(p, [(2000, k, scale, 0.0)], runs=200, seed=2)
    counts = out[:, mc.OUT_FAILURES]
    rng = np.random.default_rng(0)
    ref_counts = []
    for _ in range(200):
        t = np.zeros(2000)
        n = 0
        alive = np.ones(2000, bool)
        while alive.any():
            t[alive] += scale * rng.weibull(k, alive.sum())
            alive &= t < horizon
            n += alive.sum()
        ref_counts.append(n)
    ref = np.array(ref_counts, float)
    se = math.sqrt(counts.var(ddof=1) / len(counts) + ref.var(ddof=1) / len(ref))
    assert abs(counts.mean() - ref.mean()) < 4 * se
