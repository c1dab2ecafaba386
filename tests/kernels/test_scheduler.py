"""The batch system (docs/model.md §3 "The batch system") against closed forms.

Without failures a run of N one-second iterations (no stragglers, no checkpoint stall) under a time
limit of H seconds is cut into parts of H: it stops floor(N / H) times (N not a multiple of H), each
stop saved at an iteration's end (H whole seconds: nothing lost), and every stop costs the queue
wait, the requeue's parts and a storage load. The laws of the queue and release waits are checked
by their means (|z| < 4 against the standard error of the law's sd).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import kernel_params, run_kernel

from mcsim.kernels import interface as mc

NO_FAILURES = [(1, 1.0, 1e15, 60.0)]  # a unit that never fails within a run
QUEUE_S, REQUEUE_S, LOAD_S = 300.0, 40.0, 5.0


def assert_mean(values: np.ndarray, mean: float, sd: float, what: str) -> None:
    """``values``' mean within 4 standard errors (``sd`` over sqrt(n)) of ``mean``."""
    z = (values.mean() - mean) / (sd / math.sqrt(values.size))
    assert abs(z) < 4.0, f"{what}: mean {values.mean():.4f} against {mean:.4f} (z = {z:.2f})"


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
@pytest.mark.parametrize("iterations, limit_s", [(10_500, 1000.0), (7_300, 2400.0), (999, 1000.0)])
def test_stops_and_wall_time_without_failures(fast, iterations, limit_s):
    params = kernel_params(
        iterations=iterations,
        checkpoint_stall_s=0.0,
        fast=fast,
        time_limit_s=limit_s,
        queue_s=QUEUE_S,
        restart_s=REQUEUE_S,
        load_s=LOAD_S,
    )
    rows = run_kernel(params, NO_FAILURES, 3, seed=2)
    stops = math.floor(iterations / limit_s)
    assert (rows[:, mc.OUT_TIME_LIMIT_STOPS] == stops).all()
    assert (rows[:, mc.OUT_FAILURES] == 0).all()
    down = stops * (QUEUE_S + REQUEUE_S + LOAD_S)
    assert np.allclose(rows[:, mc.OUT_WALL_S], iterations + down, rtol=1e-12)
    assert np.allclose(rows[:, mc.OUT_RECOVERY_S], down, rtol=1e-12)
    assert np.allclose(rows[:, mc.OUT_QUEUE_WAIT_S], stops * QUEUE_S, rtol=1e-12)
    assert np.allclose(rows[:, mc.OUT_RESTART_S], stops * REQUEUE_S, rtol=1e-12)
    assert np.allclose(rows[:, mc.OUT_LOAD_S], stops * LOAD_S, rtol=1e-12)
    assert (rows[:, mc.OUT_LOST_S] == 0.0).all()
    assert (rows[:, mc.OUT_STORAGE_LOADS] == stops).all()
    assert (rows[:, mc.OUT_COMPLETED] == 1).all()


def test_a_stop_between_iterations_loses_the_partial_one():
    # 1.5 s iterations, a 100 s limit: each part ends 1/3 into its 67th iteration (0.5 s lost) and saves
    # the 66 done; the next part starts on them. 200 iterations: 66 + 66 + 66 + 2, three stops.
    params = kernel_params(
        iterations=200, compute_time_s=1.4, checkpoint_stall_s=0.0, time_limit_s=100.0, restart_s=REQUEUE_S
    )
    rows = run_kernel(params, NO_FAILURES, 2, seed=3)
    assert (rows[:, mc.OUT_TIME_LIMIT_STOPS] == 3).all()
    assert np.allclose(rows[:, mc.OUT_LOST_S], 3 * 1.0, rtol=1e-9)
    assert np.allclose(rows[:, mc.OUT_WALL_S], 200 * 1.5 + 3 * 1.0 + 3 * (REQUEUE_S + 5.0), rtol=1e-12)


def test_checkpoints_keep_their_grid_across_stops():
    # A sync checkpoint every 100 iterations (10 s): a stop saves the progress off the grid, the next
    # checkpoint is at the next multiple of 100; the checkpoints are those of the run without limits.
    params = kernel_params(iterations=1000, time_limit_s=333.0, restart_s=REQUEUE_S)
    free = run_kernel(kernel_params(iterations=1000), NO_FAILURES, 1, seed=4)
    rows = run_kernel(params, NO_FAILURES, 1, seed=4)
    assert rows[0, mc.OUT_CHECKPOINTS] == free[0, mc.OUT_CHECKPOINTS] == 9
    stops = rows[0, mc.OUT_TIME_LIMIT_STOPS]
    assert stops == math.floor((1000 + 90 - 1) / 333)  # training and checkpoints, less the lost partials
    assert rows[0, mc.OUT_STORAGE_WRITES] == 9 + stops
    identity = rows[0, mc.OUT_ITERATIONS_DONE] + rows[0, mc.OUT_LOST_S] + rows[:, mc.OUT_CHECKPOINT_S][0]
    assert rows[0, mc.OUT_WALL_S] == pytest.approx(identity + rows[0, mc.OUT_RECOVERY_S], rel=1e-12)


def test_lognormal_queue_wait_has_its_mean():
    # Ten stops a run, each a lognormal wait of mean 300 s and log-sd 0.8: a run's sum has mean 3000 s and
    # variance 10 x 300^2 (e^0.64 - 1).
    sigma = 0.8
    params = kernel_params(
        iterations=10_500, checkpoint_stall_s=0.0, time_limit_s=1000.0, queue_s=QUEUE_S, queue_sigma=sigma
    )
    rows = run_kernel(params, NO_FAILURES, 4000, seed=6)
    assert (rows[:, mc.OUT_TIME_LIMIT_STOPS] == 10).all()
    sd = math.sqrt(10.0) * QUEUE_S * math.sqrt(math.exp(sigma * sigma) - 1.0)
    assert_mean(rows[:, mc.OUT_QUEUE_WAIT_S], 10 * QUEUE_S, sd, "queue wait")
    assert np.allclose(rows[:, mc.OUT_WALL_S], 10_500 + rows[:, mc.OUT_QUEUE_WAIT_S] + 10 * (5.0), rtol=1e-12)


# One failure a run (as tests/kernels/test_restart_paths.py): a unit of Weibull shape 50, scale 500 s, on
# 520 one-second iterations with a sync checkpoint every 100: it fails between 370 s and 570 s, once.
ONE_FAILURE = dict(iterations=520, checkpoint_every=100, load_s=LOAD_S, restart_s=REQUEUE_S)
RECOVERY_S = 20.0


def one_failure_class(**fields) -> list[tuple]:
    return [(1, 50.0, 500.0, RECOVERY_S, 0, 1, 0.0, "new", fields)]


def test_a_requeue_restart_waits_in_the_queue_an_in_place_one_does_not():
    # Requeue share 0.3 (12 s parts against 3 s in place): the queue wait (fixed 100 s) follows the class's
    # recovery on the requeues only; the share of runs that waited is binomial.
    share, queue_s = 0.3, 100.0
    params = kernel_params(**dict(ONE_FAILURE, restart_s=12.0), restart_in_place_s=3.0, queue_s=queue_s)
    rows = run_kernel(params, one_failure_class(requeue_share=share), 20_000, seed=8)
    assert (rows[:, mc.OUT_FAILURES] == 1).all()
    queued = rows[:, mc.OUT_QUEUE_WAIT_S]
    assert set(np.round(queued, 9)) == {0.0, queue_s}
    assert ((queued > 0) == (rows[:, mc.OUT_RESTART_S] == 12.0)).all()
    assert_mean((queued > 0).astype(float), share, math.sqrt(share * (1 - share)), "share queued")
    assert np.allclose(rows[:, mc.OUT_RECOVERY_S], RECOVERY_S + queued + rows[:, mc.OUT_RESTART_S] + LOAD_S)


def test_release_wait_for_its_share_of_fail_stop_failures():
    # Half the failures hold the job a lognormal time of mean 30 s (log-sd 0.5) before the recovery: the
    # wait's mean per run is 0.5 x 30 s, its variance 0.5 x 30^2 e^0.25 - (0.5 x 30)^2.
    share, mean, sigma = 0.5, 30.0, 0.5
    params = kernel_params(**ONE_FAILURE, release_share=share, release_s=mean, release_sigma=sigma)
    rows = run_kernel(params, one_failure_class(), 20_000, seed=9)
    assert (rows[:, mc.OUT_FAILURES] == 1).all()
    held = rows[:, mc.OUT_RELEASE_WAIT_S]
    sd = math.sqrt(share * mean * mean * math.exp(sigma * sigma) - (share * mean) ** 2)
    assert_mean(held, share * mean, sd, "release wait")
    assert np.allclose(rows[:, mc.OUT_RECOVERY_S], held + RECOVERY_S + REQUEUE_S + LOAD_S)


def test_release_share_one_holds_every_failure_and_hangs_never():
    params = kernel_params(**ONE_FAILURE, release_share=1.0, release_s=100.0)
    rows = run_kernel(params, one_failure_class(), 50, seed=10)
    assert np.allclose(rows[:, mc.OUT_RELEASE_WAIT_S], 100.0)
    hang = one_failure_class(kind=mc.KIND_HANG, detect_s=30.0)
    rows = run_kernel(params, hang, 50, seed=10)
    assert (rows[:, mc.OUT_RELEASE_WAIT_S] == 0.0).all()


def test_without_the_batch_system_nothing_is_drawn():
    # The defaults (no limit, no queue, no release) give the run of the parameters without the fields.
    base = kernel_params(**ONE_FAILURE)
    fields = dict(time_limit_s=math.inf, queue_s=0.0, queue_sigma=0.0, release_share=0.0)
    rows = run_kernel(base, one_failure_class(requeue_share=0.5), 200, seed=12)
    again = run_kernel(kernel_params(**ONE_FAILURE, **fields), one_failure_class(requeue_share=0.5), 200, seed=12)
    assert np.array_equal(rows, again)
    for column in (mc.OUT_TIME_LIMIT_STOPS, mc.OUT_QUEUE_WAIT_S, mc.OUT_RELEASE_WAIT_S):
        assert (rows[:, column] == 0.0).all()
