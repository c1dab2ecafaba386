"""Fast mode, checkpoint strategies, stragglers beyond per-step noise, domains and spares.

Each expectation is derived in the test's comments from the model in docs/model.md
(closed forms) or compared between the two execution modes; seeds are fixed and
tolerances are 4 standard errors.
"""

from __future__ import annotations

import copy
import math

import naive
import numpy as np
import pytest
from builders import SMALL_SCENARIO, kernel_params, run_kernel
from scipy import integrate, optimize, special, stats

from mcsim.engine.simulate import simulate_config
from mcsim.kernels import interface as mc
from mcsim.scenario.config import scenario_from_dict


def _z(sample: np.ndarray, expected: float) -> float:
    return (sample.mean() - expected) / (sample.std(ddof=1) / math.sqrt(len(sample)))


def _scenario(**changes) -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    for key, value in changes.items():
        section, name = key.split("__")
        raw[section][name] = value
    return raw


FAST_EXACT_CASES = {
    # K = 3 iterations per block: below the fast threshold, drawn exactly in both modes
    "sync_short_interval": _scenario(checkpoint__interval={"iterations": 3}, stragglers__sigma=0.3),
    # K = 12 with sigma 0.3 on 64 ranks: fast uses the normal law for some blocks only
    "async_k12": _scenario(
        checkpoint__strategy="async", checkpoint__interval={"iterations": 12}, stragglers__sigma=0.3
    ),
    "async_long_blocks": _scenario(
        checkpoint__strategy="async", checkpoint__interval={"iterations": 400}, stragglers__sigma=0.1
    ),
    "episodes_and_job_factor": _scenario(
        stragglers__sigma=0.05,
        stragglers__job_sigma=0.05,
        stragglers__episode_rate_per_node_day=10.0,
        stragglers__episode_hours=0.2,
        stragglers__episode_slowdown=1.3,
    ),
    "in_memory_gockpt_mix": _scenario(
        checkpoint__strategy="in_memory", checkpoint__interval="young_daly", stragglers__sigma=0.1
    ),
    "gockpt": _scenario(checkpoint__strategy="gockpt", checkpoint__interval={"minutes": 10}, stragglers__sigma=0.1),
}


@pytest.mark.parametrize("name", list(FAST_EXACT_CASES))
def test_fast_and_exact_agree_in_distribution(name):
    raw = FAST_EXACT_CASES[name]
    raw["failures"][0]["mtbf_hours"] = 60.0  # system MTBF ~1 h: about one failure per run
    cfg = scenario_from_dict(raw).base
    exact, _, _ = simulate_config(cfg, 2000, 1, "exact")
    fast, _, _ = simulate_config(cfg, 2000, 2, "fast")  # independent seeds: a two-sample test
    a, b = exact[:, mc.OUT_WALL_S], fast[:, mc.OUT_WALL_S]
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 4 * se
    assert stats.ks_2samp(a, b).pvalue > 1e-3
    assert (exact[:, mc.OUT_FAILURES] > 0).mean() > 0.3


@pytest.mark.parametrize("n_ranks, sigma", [(16384, 0.01), (1, 0.1), (1, 0.3), (1024, 0.05), (131072, 0.03)])
def test_fast_min_block_follows_the_documented_w1_rule(n_ranks, sigma):
    # docs/model.md, "Execution modes": fast mode uses the normal law for blocks of
    # K >= ceil(E|Z^2-1|/6 * |skew_F| * std_F / (E[F] * 1e-4)). The moments are integrated
    # here in u (tests/naive.py), not in z as mcsim.stragglers does, and the Edgeworth
    # constant is integrated too, so a wrong moment, constant or tolerance fails this test.
    from mcsim.model.stragglers import factor_law

    mean, var, third = naive.max_lognormal_central_moments_u(n_ranks, sigma)
    std = math.sqrt(var)
    exact_k = naive.edgeworth_w1_constant() * abs(third / std**3) * std / (mean * 1e-4)
    assert abs(exact_k - round(exact_k)) > 1e-6  # not on an integer boundary: ceil is well defined
    assert factor_law(n_ranks, sigma).fast_min_block() == math.ceil(exact_k)


def test_fast_min_block_without_noise_is_one():
    # sigma = 0: every iteration takes exactly compute + comm, so any block is exact (K = 1).
    from mcsim.model.stragglers import factor_law

    assert factor_law(64, 0.0).fast_min_block() == 1


def test_in_memory_recovery_probability_matches_closed_form():
    # 4 nodes of 8 GPUs, exponential classes with tiny recovery so failures during
    # recovery are negligible (rate x recovery ~ 1e-6). A failure restores from memory
    # unless it is a 2-node domain event (its pair loses snapshot and replica together):
    # P(memory) = (gpu + node + cluster rates) / all rates, the rates being units / MTBF:
    # gpu 32/160 = 0.2 /h, node 4/20 = 0.2 /h, rack (2 domains) 2/5 = 0.4 /h, cluster 1/5 = 0.2 /h
    # -> P = 0.6 / 1.0 = 0.6.
    h = 3600.0
    classes = [
        (32, 1.0, 160 * h, 0.01, 1, 1, 0.0),
        (4, 1.0, 20 * h, 0.01, 1, 1, 0.0),
        (2, 1.0, 5 * h, 0.01, 2, 0, 0.0),
        (1, 1.0, 5 * h, 0.01, 0, 1, 0.0),
    ]
    # Snapshots every 5 iterations keep short the windows (at start and after a storage
    # restore) in which no replica exists yet and a memory-safe failure restores from storage.
    p = kernel_params(
        iterations=20000,
        checkpoint_every=5,
        checkpoint_stall_s=0.1,
        strategy=mc.STRATEGY_IN_MEMORY,
        replicate_s=0.5,
        checkpoint_write_s=20.0,
        persist_every=10,
        load_s=0.01,
        load_memory_s=0.01,
    )
    out = run_kernel(p, classes, runs=400, seed=3)
    n, k = out[:, mc.OUT_FAILURES].sum(), out[:, mc.OUT_MEMORY_RECOVERIES].sum()
    assert n > 2000
    expected = 0.6
    assert abs(k / n - expected) < 4 * math.sqrt(expected * (1 - expected) / n)


def test_in_memory_loses_less_than_async_at_same_interval():
    classes = [(64, 1.0, 64 * 3000.0, 30.0, 1, 1, 0.0)]
    base = dict(iterations=5000, checkpoint_every=100, checkpoint_stall_s=1.0, checkpoint_write_s=150.0)
    asyn = run_kernel(kernel_params(**base, is_async=True), classes, runs=500, seed=8)
    mem = run_kernel(
        kernel_params(**base, strategy=mc.STRATEGY_IN_MEMORY, replicate_s=2.0, persist_every=5, load_memory_s=1.0),
        classes,
        runs=500,
        seed=8,
    )
    # Same failure times (common random numbers), so the comparison is paired.
    loss_async = asyn[:, mc.OUT_LOST_S].sum() / asyn[:, mc.OUT_FAILURES].sum()
    loss_mem = mem[:, mc.OUT_LOST_S].sum() / mem[:, mc.OUT_FAILURES].sum()
    assert loss_mem < loss_async
    # Every failure of this class restores from memory, except those striking during a
    # recovery (counted as failures, not as separate recoveries).
    assert (
        0.95 * mem[:, mc.OUT_FAILURES].sum() <= mem[:, mc.OUT_MEMORY_RECOVERIES].sum() <= mem[:, mc.OUT_FAILURES].sum()
    )


EPISODES = dict(rate=3 / 3600.0, d=1800.0, slow=1.5)


def _p_active(t: float) -> float:
    # Episodes arrive at rate L over the job and last Exp(mean d); starting empty at t = 0
    # the number active is Poisson with mean L d (1 - e^{-t/d}) (M/M/infinity transient).
    rate, d = EPISODES["rate"], EPISODES["d"]
    return 1 - math.exp(-rate * d * (1 - math.exp(-t / d)))


def _episode_params(**kw):
    slow = EPISODES["slow"]
    return kernel_params(
        episode_rate_per_s=EPISODES["rate"],
        episode_mean_s=EPISODES["d"],
        episode_slowdown=slow,
        fast_min_block=1,
        factor_mean_episode=slow,
        factor_std_episode=0.0,
        fast_min_block_episode=1,
        **kw,
    )


def test_episodes_only_iterations_by_horizon():
    # No failures, sigma 0, 1-s iterations (0.9 compute + 0.1 comm), compute slowed by
    # s = 1.5 while any episode is active. Iterations completed by a horizon H (the run is
    # censored there): E = int_0^H [(1 - P_a(t)) / 1.0 + P_a(t) / (0.9 s + 0.1)] dt, up to
    # the iteration granularity (state read at each iteration's start).
    horizon = 20 * 3600.0
    p = _episode_params(iterations=10**9, checkpoint_every=10**9, max_wall_s=horizon)
    out = run_kernel(p, [], runs=1000, seed=4)
    active = integrate.quad(_p_active, 0, horizon, limit=200)[0]
    expected = (horizon - active) / 1.0 + active / (0.9 * EPISODES["slow"] + 0.1)
    assert abs(_z(out[:, mc.OUT_ITERATIONS_DONE], expected)) < 4
    assert np.all(out[:, mc.OUT_STRAGGLER_TRANSIENT_S] == 0.0)  # sigma 0: all straggling is persistent


@pytest.mark.parametrize("fast", [False, True])
def test_episodes_only_mean_wall_time(fast):
    # I iterations: pathwise a W - b A(W) = I with a = 1/1.0 s, b = a - 1/(0.9 s + 0.1) and
    # A(W) the active time before W. Taking E[A(W)] ~ int_0^{E W} P_a(t) dt (W is a
    # stopping time; the error is second order, well under the 4-SE tolerance here) gives
    # E[W] as the root w of  w - b int_0^w P_a = I.
    iterations = 50000
    b = 1.0 - 1.0 / (0.9 * EPISODES["slow"] + 0.1)
    expected = optimize.brentq(
        lambda w: w - b * integrate.quad(_p_active, 0, w, limit=200)[0] - iterations, iterations, 3 * iterations
    )
    p = _episode_params(iterations=iterations, checkpoint_every=10**9, fast=fast)
    out = run_kernel(p, [], runs=2000, seed=4)
    assert abs(_z(out[:, mc.OUT_WALL_S], expected)) < 4


def test_restart_ends_episodes():
    # Episodes that never end on their own (mean 1e9 s) but restarts every ~2000 s: the
    # job then runs slowed only between an episode's arrival and the next failure. With
    # failures cluster-wide every 2000 s on average and episodes every 500 s, much of the
    # time is unslowed; without failures nearly all of it is slowed.
    common = dict(
        iterations=20000,
        checkpoint_every=10,
        checkpoint_stall_s=0.0,
        load_s=0.0,
        episode_rate_per_s=1 / 500.0,
        episode_mean_s=1e9,
        episode_slowdown=3.0,
    )
    no_fail = run_kernel(kernel_params(**common), [], runs=50, seed=1)
    with_fail = run_kernel(kernel_params(**common), [(1, 1.0, 2000.0, 0.0)], runs=50, seed=1)
    slowed_share = lambda out: out[:, mc.OUT_STRAGGLER_PERSISTENT_S] / (0.9 * 2.0 * out[:, mc.OUT_ITERATIONS_DONE])  # noqa: E731
    assert slowed_share(no_fail).mean() > 0.95
    assert slowed_share(with_fail).mean() < 0.9


def test_job_factor_mean_and_redraw():
    # No failures: wall = I (0.9 J + 0.1) + stalls with J = max(1, e^{sZ}) drawn once;
    # E[J] = P(Z<0) + e^{s^2/2} Phi(s) = 0.5 + e^{s^2/2} Phi(s).
    s = 0.2
    p = kernel_params(iterations=500, job_sigma=s, checkpoint_every=10**6)
    out = run_kernel(p, [], runs=4000, seed=6)
    e_j = 0.5 + math.exp(s * s / 2) * special.ndtr(s)
    assert abs(_z(out[:, mc.OUT_WALL_S], 500 * (0.9 * e_j + 0.1))) < 4
    np.testing.assert_allclose(out[:, mc.OUT_STRAGGLER_TRANSIENT_S], 0.0)
    # With failures J is redrawn at each restart: the surviving iterations' persistent
    # straggling is no longer a single J per run, so it varies less across runs.
    failing = run_kernel(
        p._replace(checkpoint_every=5, checkpoint_stall_s=0.0), [(1, 1.0, 60.0, 1.0)], runs=4000, seed=6
    )
    assert (failing[:, mc.OUT_FAILURES] > 5).mean() > 0.9
    assert failing[:, mc.OUT_STRAGGLER_PERSISTENT_S].std() < 0.5 * out[:, mc.OUT_STRAGGLER_PERSISTENT_S].std()


def test_domain_events_rate_and_nodes():
    # 64 nodes in racks of 4: 16 domains, MTBF 100 h per rack -> 0.16 events / h; over a
    # 500-h censored horizon, Poisson mean 80 events.
    raw = _scenario(parallelism__gpus=512, model__global_batch=512)
    raw["failures"] = [
        {"name": "rack", "scope": "node", "domain_nodes": 4, "mtbf_hours": 100.0, "recovery_minutes": 1.0}
    ]
    raw["run"]["max_wall_days"] = 500 / 24
    raw["model"]["tokens"] = 1e15  # never finishes: censored at the horizon
    cfg = scenario_from_dict(raw).base
    out, _, plan = simulate_config(cfg, 200, 1, "fast")
    assert list(plan.classes.units) == [16] and list(plan.classes.nodes_taken) == [4]
    assert list(plan.classes.memory_ok) == [0]
    assert abs(out[:, mc.OUT_FAILURES].mean() - 80.0) < 4 * math.sqrt(80.0 / 200)


def test_no_spares_wait_for_repair_renewal_reward():
    # spare_nodes = 0: every node failure waits for its own repair (R = 1000 s) before the
    # recovery (40 s) and load (5 s); a failure during that time restarts all of it, so the
    # renewal-reward closed form holds with recovery R + 40 + 5.
    p = kernel_params(iterations=1050, spare_nodes=0)
    out = run_kernel(p, [(1, 1.0, 3000.0, 40.0, 1, 1, 1000.0)], runs=4000, seed=12)
    expected = naive.renewal_reward_mean_wall_s(1050, 1.0, 100, 10.0, 1 / 3000.0, 1000.0 + 45.0)
    assert abs(_z(out[:, mc.OUT_WALL_S], expected)) < 4
    # ... and the waiting is reported: about R per failure (less when censored by a new failure)
    waited = out[:, mc.OUT_SPARE_WAIT_S].sum() / out[:, mc.OUT_FAILURES].sum()
    assert 0.6 * 1000 < waited <= 1000 + 1e-9


def test_spares_cover_failures_when_plenty():
    classes = [(64, 1.0, 64 * 2000.0, 40.0, 1, 1, 36000.0)]
    plenty = run_kernel(kernel_params(iterations=3000, spare_nodes=1000), classes, runs=300, seed=2)
    unlimited = run_kernel(kernel_params(iterations=3000), classes, runs=300, seed=2)
    one = run_kernel(kernel_params(iterations=3000, spare_nodes=1), classes, runs=300, seed=2)
    np.testing.assert_array_equal(plenty, unlimited)
    assert np.all(plenty[:, mc.OUT_SPARE_WAIT_S] == 0)
    # One spare with 10-h repairs: a second failure within 10 h of the first must wait.
    assert one[:, mc.OUT_SPARE_WAIT_S].sum() > 0
    assert one[:, mc.OUT_WALL_S].mean() > plenty[:, mc.OUT_WALL_S].mean()


def test_llama3_table5_taxonomy_in_reference_scenario():
    from mcsim.scenario.config import load_scenario

    failures = load_scenario().base.failures
    names = {f.name for f in failures}
    assert {"faulty_gpu", "gpu_hbm3", "software_bug", "network_switch_cable", "host_maintenance"} <= names
    # Counts in 54 days: sum over classes of units * 1296 h / MTBF = 419 (Table 5)
    units = {"gpu": 16384, "node": 2048, "cluster": 1}
    total = sum(units[f.scope] * 1296.0 / f.mtbf_hours for f in failures)
    assert total == pytest.approx(419, rel=2e-3)


def test_in_memory_without_a_replica_restores_from_storage():
    # Review finding: before any snapshot has been replicated there is nothing in peer
    # memory to restore; such recoveries must load from storage.
    p = kernel_params(
        iterations=3000, checkpoint_every=10**6, strategy=mc.STRATEGY_IN_MEMORY, replicate_s=1.0, load_memory_s=1.0
    )
    out = run_kernel(p, [(8, 1.0, 8 * 2000.0, 10.0)], runs=200, seed=1)
    assert out[:, mc.OUT_FAILURES].sum() > 100
    assert out[:, mc.OUT_MEMORY_RECOVERIES].sum() == 0
    assert out[:, mc.OUT_STORAGE_LOADS].sum() == out[:, mc.OUT_FAILURES].sum()
