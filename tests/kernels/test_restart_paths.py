"""Restart paths and abandoned restarts (docs/model.md §3 "Restart paths", "Abandoned restarts") against
closed forms.

Every run here has exactly one failure: one unit whose Weibull life has shape 50 and scale 500 s
(P(life < 370 s) = 0.74^50 ≈ 3e-7, P(life > 570 s) = e^{-1.14^50} ≈ 0), on a job of 520 one-second
iterations with a sync checkpoint every 100 (570 s without failures). The failure comes between
370 s and 570 s, the run then ends within about 400 s, before the new unit's first failure. The
recovery is never cut short, so each run's restart and abandoned-restart times are draws of the
laws the model states, whose means and variances are closed forms.
"""

from __future__ import annotations

import math

import numpy as np
from builders import kernel_params, run_kernel

from mcsim.kernels import interface as mc

RUNS = 20_000
RECOVERY_S, REQUEUE_S, IN_PLACE_S, LOAD_S = 20.0, 12.0, 3.0, 5.0
ONE_FAILURE = dict(iterations=520, checkpoint_every=100, load_s=LOAD_S, restart_s=REQUEUE_S)


def one_failure_class(**fields) -> list[tuple]:
    """The unit that fails once per run (module docstring), with the given kind fields."""
    return [(1, 50.0, 500.0, RECOVERY_S, 0, 1, 0.0, "new", fields)]


def assert_mean(values: np.ndarray, mean: float, sd: float, what: str) -> None:
    """``values``' mean within 4 standard errors (the law's ``sd`` over sqrt(n)) of ``mean``."""
    z = (values.mean() - mean) / (sd / math.sqrt(values.size))
    assert abs(z) < 4.0, f"{what}: mean {values.mean():.4f} against {mean:.4f} (z = {z:.2f})"


def test_every_run_fails_once():
    rows = run_kernel(kernel_params(**ONE_FAILURE), one_failure_class(), 2_000, seed=5)
    assert (rows[:, mc.OUT_FAILURES] == 1).all()
    # A requeue on every restart (requeue_share 1, the default): the parts are all there.
    assert np.allclose(rows[:, mc.OUT_RESTART_S], REQUEUE_S)
    assert (rows[:, mc.OUT_ABANDONED_S] == 0.0).all()


def test_restart_path_is_a_requeue_for_its_share():
    # A restart is a requeue (12 s) with probability 0.4, else in place (3 s): a two-point law of mean
    # 0.4 x 12 + 0.6 x 3 = 6.6 s and standard deviation sqrt(0.4 x 0.6) x 9 s.
    share = 0.4
    params = kernel_params(**ONE_FAILURE, restart_in_place_s=IN_PLACE_S)
    rows = run_kernel(params, one_failure_class(requeue_share=share), RUNS, seed=11)
    restart = rows[:, mc.OUT_RESTART_S]
    assert set(np.round(restart, 9)) == {REQUEUE_S, IN_PLACE_S}
    sd = math.sqrt(share * (1.0 - share)) * (REQUEUE_S - IN_PLACE_S)
    assert_mean(restart, share * REQUEUE_S + (1.0 - share) * IN_PLACE_S, sd, "restart time")
    # The recovery is the class's, the path's parts and the load.
    assert np.allclose(rows[:, mc.OUT_RECOVERY_S], RECOVERY_S + restart + LOAD_S)


def test_in_place_and_requeue_shares_at_the_ends():
    # Share 0: every restart in place; share 1: every one a requeue (no draw either way).
    params = kernel_params(**ONE_FAILURE, restart_in_place_s=IN_PLACE_S)
    for share, parts in ((0.0, IN_PLACE_S), (1.0, REQUEUE_S)):
        rows = run_kernel(params, one_failure_class(requeue_share=share), 500, seed=3)
        assert np.allclose(rows[:, mc.OUT_RESTART_S], parts)


def test_abandoned_restarts_are_a_geometric_sum():
    # A restart fails again with probability q = 0.25 and loses a lognormal time of mean 15 s (log-sd
    # 0.5), then its parts (12 s) and the load (5 s) are done again: N ~ Geometric, P(N = n) = q^n (1 - q),
    # abandoned attempts, each X = lost + 17 s, so the abandoned time S = X_1 + ... + X_N has
    # E[S] = E[N] E[X] and Var[S] = E[N] Var[X] + Var[N] E[X]^2 (E[N] = q/(1-q), Var[N] = q/(1-q)^2).
    q, lost_s, sigma = 0.25, 15.0, 0.5
    params = kernel_params(**ONE_FAILURE, abandon_share=q, abandon_s=lost_s, abandon_sigma=sigma)
    rows = run_kernel(params, one_failure_class(), RUNS, seed=17)
    assert (rows[:, mc.OUT_FAILURES] == 1).all()
    mean_n, var_n = q / (1.0 - q), q / (1.0 - q) ** 2
    mean_x, var_x = lost_s + REQUEUE_S + LOAD_S, lost_s**2 * math.expm1(sigma**2)
    abandoned = rows[:, mc.OUT_ABANDONED_S]
    assert_mean(abandoned, mean_n * mean_x, math.sqrt(mean_n * var_x + var_n * mean_x**2), "abandoned time")
    # The parts and the load are done once more per abandoned attempt: 12 (1 + N) and 5 (1 + N).
    assert_mean(rows[:, mc.OUT_RESTART_S], REQUEUE_S / (1.0 - q), REQUEUE_S * math.sqrt(var_n), "restart time")
    attempts = rows[:, mc.OUT_RESTART_S] / REQUEUE_S
    assert np.allclose(attempts, np.round(attempts)) and (np.round(attempts) > 1).any()
    assert np.allclose(rows[:, mc.OUT_LOAD_S], LOAD_S * attempts)
    # The abandoned time is part of the recovery, which is the class's, the parts and the load, and it.
    assert np.allclose(rows[:, mc.OUT_RECOVERY_S], RECOVERY_S + REQUEUE_S + LOAD_S + abandoned)


def test_abandoned_restarts_repeat_the_path_taken():
    # With both: an abandoned attempt repeats the restart's own path (in place or requeue), so the
    # restart time of a run is its path's parts times the attempts.
    params = kernel_params(**ONE_FAILURE, restart_in_place_s=IN_PLACE_S, abandon_share=0.5, abandon_s=10.0)
    rows = run_kernel(params, one_failure_class(requeue_share=0.5), 4_000, seed=23)
    restart = rows[:, mc.OUT_RESTART_S]
    load_attempts = rows[:, mc.OUT_LOAD_S] / LOAD_S
    per_attempt = restart / load_attempts
    assert np.allclose(np.minimum(abs(per_attempt - REQUEUE_S), abs(per_attempt - IN_PLACE_S)), 0.0)
    # Each abandoned attempt costs 10 s lost, its path's parts and the load.
    assert np.allclose(rows[:, mc.OUT_ABANDONED_S], (load_attempts - 1.0) * (10.0 + per_attempt + LOAD_S))
    assert (load_attempts > 1.5).any()
