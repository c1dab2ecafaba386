"""Kinds of interruption and recovery laws (docs/model.md §3 "Kinds of interruption", §4) against closed forms.

The expected values come from a Markov chain written here from the model's statement, not
from the kernel: with deterministic iterations (no stragglers), sync checkpoints every K
iterations and one Poisson stream of events (rate r), the run's state after each restart is
the index j of its last durable checkpoint. From j the run needs a segment of S_j = K tau + C
(the last one K tau: no checkpoint at the end); it survives it with probability
p_j = exp(-r S_j), else an event strikes after E[T | T < S_j] = 1/r - S_j (1 - p_j)^-1 p_j,
the run goes back to checkpoint max(0, j - n) (n = ``rollback_checkpoints``, 0 but for an
instability) and recovers for rho seconds. So the expected time to the end from j,

    h_j = p_j (S_j + h_{j+1}) + (1 - p_j) (E[T | T < S_j] + rho + h_{max(0, j - n)}),  h_J = 0,

is a linear system, and so is the expected number of events g_j (with 1 per interruption,
plus those during recovery for fail-stop failures). A recovery of X seconds (the class's
law plus the load) is restarted by a fail-stop failure during it: with a fixed X (a fresh X
each time) rho = (1 - phi) / (r phi) with phi = E[exp(-r X)] and 1 / phi failures per
interruption (the number of attempts is geometric); a hang or an instability during a
recovery is dropped, so then rho = E[X] and one event per interruption. phi is integrated
here by quadrature over the lognormal law (the rule of before, which the tests below show the
kernel no longer follows). With a law the recovery already under way is not cut short
(docs/model.md §3): after a failure at t the incidents' recovery ends at max(its end, t + X'),
then the load. The recovery is then the busy period of an M/G/inf queue begun by the first
event (arrivals at rate r, each busy for its X plus the load L), of mean
rho = (e^{r (E[X] + L)} - 1) / r with e^{r (E[X] + L)} events (Takacs 1962; e.g. Ross,
*Stochastic Processes*, 2nd ed., §2.3 for the M/G/inf queue): only the law's mean matters.
Each simulated mean must lie within 4 standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr
from builders import kernel_params, run_kernel
from scipy import integrate, stats

from mcsim.analysis.summary import check_results
from mcsim.cli.main import main
from mcsim.io.variables import LATER_VARIABLES
from mcsim.kernels import interface as mc
from mcsim.scenario.toml import dumps_toml

TAU = 1.0  # s per iteration (0.9 compute + 0.1 communication, no stragglers)
K = 20  # iterations per checkpoint
SEGMENTS = 12  # the run: 240 iterations
STALL = 4.0  # sync checkpoint stall, s
LOAD = 5.0  # storage load, s
RUNS = 4000


def chain(rate: float, rollback: int, rho: float, failures_per_interruption: float) -> tuple[float, float]:
    """Expected wall time and number of events of the run described in the module docstring."""
    n = SEGMENTS
    a_h, b_h = np.eye(n), np.zeros(n)
    a_g, b_g = np.eye(n), np.zeros(n)
    for j in range(n):
        segment = K * TAU + (STALL if j < n - 1 else 0.0)
        survive = math.exp(-rate * segment)
        strike = 1.0 / rate - segment * survive / (1.0 - survive)  # E[T | T < S]
        back = max(0, j - rollback)
        if j + 1 < n:
            a_h[j, j + 1] -= survive
            a_g[j, j + 1] -= survive
        a_h[j, back] -= 1.0 - survive
        a_g[j, back] -= 1.0 - survive
        b_h[j] = survive * segment + (1.0 - survive) * (strike + rho)
        b_g[j] = (1.0 - survive) * failures_per_interruption
    return float(np.linalg.solve(a_h, b_h)[0]), float(np.linalg.solve(a_g, b_g)[0])


def lognormal_laplace(mean_s: float, sigma: float, rate: float) -> float:
    """E[exp(-rate X)] for X = mean_s exp(sigma Z - sigma^2 / 2), Z standard normal (quadrature)."""
    if sigma == 0.0:
        return math.exp(-rate * mean_s)

    def integrand(z: float) -> float:
        return math.exp(-rate * mean_s * math.exp(sigma * z - sigma * sigma / 2.0)) * stats.norm.pdf(z)

    value, _ = integrate.quad(integrand, -12.0, 12.0, epsabs=1e-13, limit=200)
    return value


def simulate(event: dict, mode_fast: bool = False, runs: int = RUNS, seed: int = 11) -> np.ndarray:
    """Kernel rows of the run above with one cluster-scope event class (exponential) ``event``."""
    params = kernel_params(
        iterations=SEGMENTS * K, checkpoint_every=K, checkpoint_stall_s=STALL, load_s=LOAD, max_wall_s=1e9
    )
    if mode_fast:
        params = params._replace(fast=True, fast_min_block=1)
    fields = {k: v for k, v in event.items() if k not in ("mtbf_s", "recovery_s")}
    classes = [(1, 1.0, event["mtbf_s"], event["recovery_s"], 0, 1, 0.0, "new", fields)]
    return run_kernel(params, classes, runs, seed=seed)


def assert_mean(values: np.ndarray, expected: float, what: str) -> None:
    se = values.std(ddof=1) / math.sqrt(values.size)
    z = (values.mean() - expected) / se
    assert abs(z) < 4.0, f"{what}: simulated {values.mean():.6g} +- {se:.3g}, closed form {expected:.6g} (z = {z:.2f})"


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
@pytest.mark.parametrize("rollback", [0, 1, 3])
def test_instabilities_roll_back_as_the_chain_says(rollback, fast):
    # Rate chosen so that a run sees a few instabilities (~0.3 per segment): rollbacks matter.
    mtbf, decision = 80.0, 30.0
    rows = simulate(
        dict(mtbf_s=mtbf, recovery_s=decision, kind=mc.KIND_INSTABILITY, rollback_checkpoints=rollback), fast
    )
    wall, events = chain(1.0 / mtbf, rollback, decision + LOAD, 1.0)
    assert rows[:, mc.OUT_COMPLETED].all()
    assert_mean(rows[:, mc.OUT_WALL_S], wall, "wall time")
    assert_mean(rows[:, mc.OUT_INSTABILITIES], events, "instabilities")
    # Every event is an instability, and all the time lost to them is charged to them.
    np.testing.assert_array_equal(rows[:, mc.OUT_INSTABILITIES], rows[:, mc.OUT_FAILURES])
    np.testing.assert_allclose(
        rows[:, mc.OUT_INSTABILITY_S], rows[:, mc.OUT_LOST_S] + rows[:, mc.OUT_RECOVERY_S], rtol=1e-12
    )


def test_rollback_costs_more_than_the_last_checkpoint():
    # The chain's own check that rolling back further costs time (so the tests above can tell).
    assert chain(1 / 80.0, 3, 35.0, 1.0)[0] > chain(1 / 80.0, 1, 35.0, 1.0)[0] * 1.05


def test_hangs_are_detected_after_the_timeout():
    mtbf, detect, recovery = 120.0, 40.0, 15.0
    rows = simulate(dict(mtbf_s=mtbf, recovery_s=recovery, kind=mc.KIND_HANG, detect_s=detect))
    wall, events = chain(1.0 / mtbf, 0, detect + recovery + LOAD, 1.0)
    assert_mean(rows[:, mc.OUT_WALL_S], wall, "wall time")
    assert_mean(rows[:, mc.OUT_HANGS], events, "hangs")
    # Every hang is hung for the whole timeout (nothing else interrupts it here).
    np.testing.assert_allclose(rows[:, mc.OUT_HANG_DETECTION_S], detect * rows[:, mc.OUT_HANGS], rtol=1e-12)
    np.testing.assert_allclose(rows[:, mc.OUT_HANG_S], rows[:, mc.OUT_LOST_S] + rows[:, mc.OUT_RECOVERY_S], rtol=1e-12)


@pytest.mark.parametrize("sigma,share", [(1.0, 0.0), (0.0, 0.25), (0.8, 0.25)])
def test_recovery_law_restarted_by_failures(sigma, share):
    # Fail-stop failures during a recovery: the recovery under way goes on, a fresh draw may end
    # later, the load starts again: an M/G/inf busy period (module docstring).
    mtbf, recovery, manual = 100.0, 20.0, 60.0
    rate = 1.0 / mtbf
    rows = simulate(
        dict(mtbf_s=mtbf, recovery_s=recovery, recovery_sigma=sigma, manual_share=share, manual_s=manual),
        seed=23,
    )
    busy = math.exp(rate * (recovery + share * manual + LOAD))  # M/G/inf busy period (module docstring)
    wall, events = chain(rate, 0, (busy - 1.0) / rate, busy)
    assert_mean(rows[:, mc.OUT_WALL_S], wall, "wall time")
    assert_mean(rows[:, mc.OUT_FAILURES], events, "failures")
    # The chain can tell this rule from a fresh draw replacing the recovery under way (the rule of
    # before: rho = (1 - phi) / (r phi)): more than 1.5 % apart here.
    phi = math.exp(-rate * LOAD) * lognormal_laplace(recovery, sigma, rate)
    phi *= 1.0 - share + share * lognormal_laplace(manual, sigma, rate)
    assert abs(chain(rate, 0, (1.0 - phi) / (rate * phi), 1.0 / phi)[0] / wall - 1) > 0.015


def test_recovery_law_mean_is_the_recovery_minutes():
    # Without failures during recoveries (a hang's are dropped), the recovery per interruption
    # is the law's mean: recovery_s + share x manual_s (the lognormal has mean 1 by construction).
    mtbf, recovery, manual, share = 150.0, 20.0, 60.0, 0.25
    rows = simulate(
        dict(
            mtbf_s=mtbf,
            recovery_s=recovery,
            kind=mc.KIND_HANG,
            detect_s=1.0,
            recovery_sigma=1.2,
            manual_share=share,
            manual_s=manual,
        ),
        runs=8000,
    )
    per_event = (rows[:, mc.OUT_RECOVERY_S] - rows[:, mc.OUT_HANGS] * (1.0 + LOAD)).sum() / rows[:, mc.OUT_HANGS].sum()
    # The ratio of sums: its standard error from the per-run residuals (delta method).
    hangs = rows[:, mc.OUT_HANGS]
    residual = rows[:, mc.OUT_RECOVERY_S] - hangs * (1.0 + LOAD) - per_event * hangs
    se = residual.std(ddof=1) * math.sqrt(len(hangs)) / hangs.sum()
    expected = recovery + share * manual
    assert abs(per_event - expected) < 4.0 * se, f"{per_event} +- {se} against {expected}"


def test_fixed_recoveries_draw_nothing():
    # A class without a law draws no recovery numbers: the runs are those of before the laws
    # (same streams), so a run is bit-identical whatever the recovery stream would give.
    base = simulate(dict(mtbf_s=100.0, recovery_s=20.0), runs=50)
    again = simulate(dict(mtbf_s=100.0, recovery_s=20.0, manual_share=0.0, recovery_sigma=0.0), runs=50)
    np.testing.assert_array_equal(base, again)
    drawn = simulate(dict(mtbf_s=100.0, recovery_s=20.0, recovery_sigma=0.5), runs=50)
    assert not np.array_equal(base[:, mc.OUT_RECOVERY_S], drawn[:, mc.OUT_RECOVERY_S])


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
def test_planned_stops_keep_the_progress(fast):
    # No checkpoints at all (the interval is the whole run): a fail-stop failure would start the
    # run over, a planned stop keeps every whole iteration, so each stop loses less than one
    # iteration (the one it interrupts; fast mode keeps the whole iterations of its block).
    iterations, mtbf, window = 2000, 400.0, 60.0
    params = kernel_params(iterations=iterations, checkpoint_every=10**9, load_s=LOAD)
    params = params._replace(fast=True, fast_min_block=1) if fast else params
    rows = run_kernel(params, [(1, 1.0, mtbf, window, 0, 1, 0.0, "new", dict(kind=mc.KIND_PLANNED))], RUNS, seed=5)
    stops = rows[:, mc.OUT_PLANNED_STOPS]
    assert rows[:, mc.OUT_COMPLETED].all() and stops.mean() > 3.0
    assert (rows[:, mc.OUT_LOST_S] < stops * TAU + 1e-9).all()
    # Each stop is down for the window and the load, nothing else recovers here.
    np.testing.assert_allclose(rows[:, mc.OUT_RECOVERY_S], stops * (window + LOAD), rtol=1e-12)
    np.testing.assert_allclose(rows[:, mc.OUT_PLANNED_S], rows[:, mc.OUT_LOST_S] + rows[:, mc.OUT_RECOVERY_S])
    # Stops arrive while the job runs (those during a window are dropped): by the Poisson
    # compensator, E[stops] = E[running time] / MTBF, running time = wall - recovery.
    running = rows[:, mc.OUT_WALL_S] - rows[:, mc.OUT_RECOVERY_S]
    assert_mean(stops - running / mtbf, 0.0, "stops less running time / MTBF")


def test_instability_after_planned_saves_rolls_back_on_the_checkpoint_grid():
    # Checkpoints every K = 100 iterations, planned stops about every 30 s (shape 20): the last
    # durable point is usually a planned stop's save, off the grid. One checkpoint back is then the
    # grid point below it, so an instability loses less than K + 1 iterations (d - K would be a
    # point never written, K or more back). Found by review.
    params = kernel_params(iterations=3000, checkpoint_every=100, checkpoint_stall_s=1.0, load_s=1.0)
    classes = [
        (1, 20.0, 30.0 / math.gamma(1.05), 2.0, 0, 1, 0.0, "stationary", dict(kind=mc.KIND_PLANNED)),
        (1, 1.0, 400.0, 5.0, 0, 1, 0.0, "new", dict(kind=mc.KIND_INSTABILITY, rollback_checkpoints=1)),
    ]
    rows = run_kernel(params, classes, 300, seed=3)
    assert rows[:, mc.OUT_PLANNED_STOPS].mean() > 50 and rows[:, mc.OUT_INSTABILITIES].sum() > 100
    recovery = rows[:, mc.OUT_INSTABILITIES] * (5.0 + 1.0)  # decision and load, when nothing strikes during
    lost = (rows[:, mc.OUT_INSTABILITY_S] - recovery).sum() / rows[:, mc.OUT_INSTABILITIES].sum()
    assert lost < 101.0 * TAU, lost


def test_events_dropped_in_recoveries_count_towards_the_failure_guard():
    # Hangs every second, each detected after 100 s: nearly every hang falls in a recovery and is
    # dropped. The guard (here 200 events) still ends the run, censored. Found by review.
    params = kernel_params(iterations=10**6, max_failures=200)
    rows = run_kernel(params, [(1, 1.0, 1.0, 10.0, 0, 1, 0.0, "new", dict(kind=mc.KIND_HANG, detect_s=100.0))], 5)
    assert not rows[:, mc.OUT_COMPLETED].any()
    assert (rows[:, mc.OUT_HANGS] < 200).all() and (rows[:, mc.OUT_HANGS] >= 1).all()


def test_files_without_the_later_variables_are_still_results(tmp_path, small_raw):
    # A result written before the interruptions had causes (no per-cause variables) is still summarised
    # and reported.
    scenario = tmp_path / "s.toml"
    small_raw["run"]["runs"] = 20
    scenario.write_text(dumps_toml(small_raw))
    out = tmp_path / "new.nc"
    assert main(["run", str(scenario), "-o", str(out)]) == 0
    with xr.open_dataset(out) as ds:
        old = ds.drop_vars(sorted(LATER_VARIABLES)).load()
    check_results(old)  # no exception
    old.to_netcdf(tmp_path / "old.nc")
    assert main(["summary", str(tmp_path / "old.nc")]) == 0


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
def test_restart_parts_lengthen_every_recovery(fast):
    # A restart's parts (docs/model.md §3 "The cost of a restart") add r seconds to every recovery
    # attempt, between the class's recovery R and the load L: the recovery of X = R + r + L is
    # restarted by failures during it, so rho = (1 - phi) / (r_f phi), phi = exp(-r_f X) (module
    # docstring). Each failure begins one attempt, and an attempt cut at U ~ Exp(r_f) spends
    # |[R, R + r] & [0, min(U, X)]| in the restart, of mean (exp(-r_f R) - exp(-r_f (R + r))) / r_f;
    # so E[restart time] = E[failures] x that (Wald).
    mtbf, recovery, restart = 100.0, 20.0, 15.0
    rate = 1.0 / mtbf
    params = kernel_params(
        iterations=SEGMENTS * K, checkpoint_every=K, checkpoint_stall_s=STALL, load_s=LOAD, restart_s=restart
    )
    params = params._replace(fast=True, fast_min_block=1) if fast else params
    rows = run_kernel(params, [(1, 1.0, mtbf, recovery, 0, 1, 0.0, "new")], RUNS, seed=31)
    phi = math.exp(-rate * (recovery + restart + LOAD))
    wall, events = chain(rate, 0, (1.0 - phi) / (rate * phi), 1.0 / phi)
    per_attempt = (math.exp(-rate * recovery) - math.exp(-rate * (recovery + restart))) / rate
    assert_mean(rows[:, mc.OUT_WALL_S], wall, "wall time")
    assert_mean(rows[:, mc.OUT_FAILURES], events, "failures")
    assert_mean(rows[:, mc.OUT_RESTART_S], events * per_attempt, "restart time")
    # The restart is part of the recovery.
    assert (rows[:, mc.OUT_RESTART_S] <= rows[:, mc.OUT_RECOVERY_S] + 1e-9).all()


def test_restart_parts_change_the_wall_time_the_chain_can_tell():
    # The chain's own check that 15 s more per recovery moves the expected wall time by more than
    # the test's tolerance (4 standard errors of 4,000 runs, about 1 % here).
    rate = 1.0 / 100.0
    without = chain(rate, 0, (math.exp(rate * (20.0 + LOAD)) - 1.0) / rate, math.exp(rate * (20.0 + LOAD)))[0]
    with_parts = chain(rate, 0, (math.exp(rate * (35.0 + LOAD)) - 1.0) / rate, math.exp(rate * (35.0 + LOAD)))[0]
    assert with_parts > without * 1.05


def bad_replacement_failures(mtbf_s: float, share: float, bad_mean_s: float, horizon_s: float) -> float:
    """E[failures in [0, horizon]] of one unit whose replacements are bad with probability ``share``.

    Exponential lives make the unit in service a two-state Markov chain (docs/model.md §3, "Bad
    replacements"): a good unit (failure rate 1/M) or a bad one (1/m_b); at each failure the next unit
    is bad with probability q. Generator Q = [[-q/M, q/M], [(1-q)/m_b, -(1-q)/m_b]], start good, so
    E[N(T)] = int_0^T e_good^T e^{Qt} r dt with r = (1/M, 1/m_b): the top-right block of
    expm([[Q, r], [0, 0]] T) (Van Loan's integral of a matrix exponential)."""
    from scipy.linalg import expm

    q, m, mb = share, mtbf_s, bad_mean_s
    a = np.zeros((3, 3))
    a[:2, :2] = [[-q / m, q / m], [(1 - q) / mb, -(1 - q) / mb]]
    a[:2, 2] = [1 / m, 1 / mb]
    return float(expm(a * horizon_s)[0, 2])


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
def test_bad_replacements_fail_as_the_markov_chain_says(fast):
    # One GPU (exponential lives of mean 500 s); 30 % of its replacements are bad (mean life 30 s);
    # every run is censored at 3,000 s (an endless run), so the failures counted are the unit's in
    # [0, 3000 s], recoveries included.
    mtbf, share, bad, horizon = 500.0, 0.3, 30.0, 3000.0
    params = kernel_params(iterations=10**9, checkpoint_every=10**6, load_s=1.0, max_wall_s=horizon)
    params = params._replace(fast=True, fast_min_block=8) if fast else params
    gpu = (1, 1.0, mtbf, 5.0, 1, 1, 0.0, "new", dict(bad_share=share, bad_mean_s=bad))
    rows = run_kernel(params, [gpu], RUNS, seed=41)
    assert not rows[:, mc.OUT_COMPLETED].any()
    expected = bad_replacement_failures(mtbf, share, bad, horizon)
    assert_mean(rows[:, mc.OUT_FAILURES], expected, "failures")
    # The chain can tell: without bad replacements a Poisson stream gives T / M = 6.
    assert expected > 1.3 * horizon / mtbf


MEASURED_S = [5.0, 12.0, 30.0, 140.0]  # measured recoveries, s (a long tail: one in four takes 140 s)


def test_measured_recoveries_restarted_by_failures():
    # Each recovery is one of the measured ones at random (docs/model.md §3 "Recovery as a law"), and
    # the busy period as for a law.
    mtbf = 100.0
    rate = 1.0 / mtbf
    rows = simulate(dict(mtbf_s=mtbf, recovery_s=float(np.mean(MEASURED_S)), durations_s=MEASURED_S), seed=29)
    measured = np.array(MEASURED_S)
    busy = math.exp(rate * (measured.mean() + LOAD))  # M/G/inf busy period (module docstring)
    wall, events = chain(rate, 0, (busy - 1.0) / rate, busy)
    assert_mean(rows[:, mc.OUT_WALL_S], wall, "wall time")
    assert_mean(rows[:, mc.OUT_FAILURES], events, "failures")
    # The chain can tell this rule from a fresh pick replacing the recovery under way (the rule of
    # before: phi = mean(exp(-r x_i)) exp(-r LOAD), rho = (1 - phi) / (r phi)).
    phi = math.exp(-rate * LOAD) * float(np.mean(np.exp(-rate * measured)))
    assert abs(chain(rate, 0, (1.0 - phi) / (rate * phi), 1.0 / phi)[0] / wall - 1) > 0.01


def test_measured_recoveries_are_picked_uniformly():
    # Hangs are never restarted (one in a recovery is dropped), so each recovery is exactly one pick:
    # recovery - detection - load per hang is one of the list, each a quarter of the time.
    rows = simulate(
        dict(
            mtbf_s=150.0, recovery_s=float(np.mean(MEASURED_S)), kind=mc.KIND_HANG, detect_s=1.0, durations_s=MEASURED_S
        ),
        runs=8000,
    )
    hangs = rows[:, mc.OUT_HANGS]
    picked = rows[:, mc.OUT_RECOVERY_S] - hangs * (1.0 + LOAD)
    per_event = picked.sum() / hangs.sum()
    residual = picked - per_event * hangs
    se = residual.std(ddof=1) * math.sqrt(len(hangs)) / hangs.sum()
    assert abs(per_event - np.mean(MEASURED_S)) < 4.0 * se, (per_event, se)
    # Runs with one hang took exactly one of the list.
    one = hangs == 1
    assert one.sum() > 100
    assert set(np.round(picked[one], 9)) <= set(MEASURED_S)
    assert len(set(np.round(picked[one], 9))) == len(MEASURED_S)
