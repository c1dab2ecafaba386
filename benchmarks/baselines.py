"""Baselines for the speed suite: what a user would write without mcsim.

These are deliberately plain implementations, one with NumPy and one with SimPy,
of the model that mcsim's kernel runs with synchronous checkpoints and a single
exponential failure class. They exist so that mcsim's speed can be measured
against equal work; they are not part of the package and are not optimised
beyond what a careful user would do.

Parameters (a dict, short keys)
-------------------------------
``I`` iterations, ``c`` compute time per iteration (s), ``m`` communication time
per iteration (s), ``G`` ranks, ``sigma`` lognormal shape of a rank's factor,
``K`` checkpoint every K iterations, ``C`` checkpoint stall (s), ``L`` checkpoint
load (s), ``U`` failing units, ``mtbf_s`` MTBF of ONE unit (s), ``R`` recovery
before the load (s), ``max_wall_s`` censoring time (s).

Semantics of one run
--------------------
* Wall-clock time ``t`` starts at 0. Each iteration takes ``c * M + m`` with
  ``M = max_i exp(sigma Z_i)`` over the ``G`` ranks, ``Z_i`` iid standard normal,
  drawn afresh every iteration.
* After every ``K`` iterations (not after the last one) a synchronous checkpoint
  stalls training for ``C`` seconds; it is durable when the stall ends.
* Failures form a Poisson process of rate ``U / mtbf_s`` over wall-clock time
  (during iterations, stalls and recoveries alike). A failure interrupts whatever
  is under way: progress goes back to the last durable checkpoint (a checkpoint
  whose stall was interrupted is not durable). Recovery then takes ``R + L``; a
  failure during recovery restarts it (the full ``R + L`` from that failure).
  Training resumes from the durable iteration count and the next checkpoint
  comes ``K`` iterations later.
* A run ends when ``I`` iterations are done (no final checkpoint), or is
  censored at ``max_wall_s``. Output per run: the wall time in seconds.

The NumPy baseline draws every rank factor of every iteration (mcsim's exact
mode); the SimPy baseline is event level and draws the sum of the factors of a
block of iterations between checkpoints from a normal law with the moments of
:func:`expected_max_factor` (mcsim's fast mode).
"""

from __future__ import annotations

import math

import numpy as np
import simpy
from scipy import integrate, special


def _unpack(params: dict):
    p = params
    return (
        int(p["I"]),
        float(p["c"]),
        float(p["m"]),
        int(round(float(p["G"]))),
        float(p["sigma"]),
        int(p["K"]),
        float(p["C"]),
        float(p["L"]),
        float(p["U"]),
        float(p["mtbf_s"]),
        float(p["R"]),
        float(p["max_wall_s"]),
    )


def expected_max_factor(G: float, sigma: float) -> tuple[float, float]:
    """Mean and variance of ``M = max_i exp(sigma Z_i)`` over ``G`` ranks, by quadrature.

    The maximum of ``G`` standard normals has density ``G phi(z) Phi(z)^(G-1)``,
    evaluated in log space with ``scipy.special.log_ndtr`` so it stays finite for
    any ``G``. The variance is integrated about the mean (no cancellation).
    """
    if sigma == 0.0:
        return 1.0, 0.0
    G = float(G)
    log_norm = math.log(G) - 0.5 * math.log(2.0 * math.pi)

    def density(z: float) -> float:
        return math.exp(log_norm - 0.5 * z * z + (G - 1.0) * special.log_ndtr(z))

    # Median of the maximum; the mass lies within a few units of it (the weight
    # exp(2 sigma z) of the second moment shifts it up by at most 2 sigma).
    center = float(-special.ndtri(-math.expm1(math.log(0.5) / G)))
    lo, hi = center - 12.0, center + 12.0 + 2.0 * sigma
    opts = dict(points=[center], limit=400, epsabs=0.0, epsrel=1e-11)
    mean = integrate.quad(lambda z: math.exp(sigma * z) * density(z), lo, hi, **opts)[0]
    var = integrate.quad(lambda z: (math.exp(sigma * z) - mean) ** 2 * density(z), lo, hi, **opts)[0]
    return float(mean), float(max(var, 0.0))


def numpy_baseline(params: dict, runs: int, seed: int) -> np.ndarray:
    """Wall times of ``runs`` runs, vectorised over runs with NumPy (every rank drawn).

    One loop step advances every active run by one iteration: a
    ``(runs_active, G)`` matrix of rank factors is drawn and its row maximum taken
    (the maximum of ``exp(sigma Z)`` is ``exp(sigma max Z)``, so the exponential is
    applied after the maximum). Failure times are exponential inter-arrival times
    per run. Iterations, checkpoint stalls and recoveries that a failure cuts short
    are handled with masks; the loop over recovery restarts is vectorised over the
    runs that are recovering.
    """
    iterations, c, m, G, sigma, K, C, L, U, mtbf_s, R, max_wall = _unpack(params)
    rng = np.random.default_rng(seed)
    lam = U / mtbf_s
    scale = 1.0 / lam if lam > 0.0 else np.inf

    t = np.zeros(runs)
    done = np.zeros(runs, np.int64)  # iterations completed and not rolled back
    durable = np.zeros(runs, np.int64)  # iteration count of the last durable checkpoint
    next_fail = rng.exponential(scale, runs) if lam > 0.0 else np.full(runs, np.inf)
    active = np.arange(runs)  # indices of runs still going

    def recover(idx: np.ndarray) -> None:
        """Runs ``idx`` failed at ``next_fail``: roll back, recover, censor."""
        t[idx] = next_fail[idx]
        done[idx] = durable[idx]
        rec = idx
        while rec.size:
            next_fail[rec] = t[rec] + rng.exponential(scale, rec.size)
            end = t[rec] + (R + L)
            again = (next_fail[rec] < end) & (next_fail[rec] < max_wall)
            t[rec] = np.where(again, next_fail[rec], np.minimum(end, max_wall))
            rec = rec[again]

    while active.size:
        n = active.size
        if sigma > 0.0:
            M = np.exp(sigma * rng.standard_normal((n, G)).max(axis=1))
        else:
            M = np.ones(n)
        end = t[active] + (c * M + m)
        nf = next_fail[active]
        horizon = np.minimum(nf, max_wall)
        ok = end <= horizon
        # Iterations that complete.
        good = active[ok]
        t[good] = end[ok]
        done[good] += 1
        # Checkpoint after iteration `done` (not after the last one).
        ck = good[(done[good] % K == 0) & (done[good] < iterations)]
        stall_end = t[ck] + C
        stall_ok = stall_end <= np.minimum(next_fail[ck], max_wall)
        t[ck[stall_ok]] = stall_end[stall_ok]
        durable[ck[stall_ok]] = done[ck[stall_ok]]
        # Interrupted: in an iteration or in a stall, by a failure or by max_wall_s.
        cut = np.concatenate([active[~ok], ck[~stall_ok]])
        failed = cut[next_fail[cut] <= max_wall]
        censored = cut[next_fail[cut] > max_wall]
        t[censored] = max_wall
        if failed.size:
            recover(failed)
        running = (done[active] < iterations) & (t[active] < max_wall)
        active = active[running]
    return t


def simpy_baseline(params: dict, runs: int, seed: int) -> np.ndarray:
    """Wall times of ``runs`` runs as a discrete-event simulation with SimPy (event level).

    All runs are processes of one environment, run until ``max_wall_s``. Each run
    has a training process, which runs the block of iterations up to the next
    checkpoint as one timeout of ``c S + K' m`` with ``S ~ N(K' E[M], K' Var[M])``
    (clipped at 0), then the checkpoint stall; and a failure process, which
    interrupts the training process after exponential inter-arrival times. The
    interrupted training process rolls back to the durable checkpoint and
    recovers; a failure during the recovery interrupts it and restarts it.
    """
    iterations, c, m, G, sigma, K, C, L, U, mtbf_s, R, max_wall = _unpack(params)
    rng = np.random.default_rng(seed)
    lam = U / mtbf_s
    mean_m, var_m = expected_max_factor(G, sigma)
    std_m = math.sqrt(var_m)
    wall = np.full(runs, max_wall)
    env = simpy.Environment()

    def training(run: int, state: dict):
        done = 0
        durable = 0
        recovering = False
        while done < iterations:
            try:
                if recovering:
                    yield env.timeout(R + L)
                    recovering = False
                    continue
                block = min(K, iterations - done)  # done is at a checkpoint here
                s = block * mean_m
                if std_m > 0.0:
                    s += math.sqrt(block) * std_m * rng.standard_normal()
                yield env.timeout(c * max(s, 0.0) + block * m)
                done += block
                if done < iterations:
                    yield env.timeout(C)
                    durable = done
            except simpy.Interrupt:
                done = durable
                recovering = True
        wall[run] = env.now
        if state["failures"] is not None and state["failures"].is_alive:
            state["failures"].interrupt()  # the run is over: stop its failure process

    def failures(victim: simpy.Process):
        try:
            while True:
                yield env.timeout(rng.exponential(1.0 / lam))
                if victim.is_alive:
                    victim.interrupt()
        except simpy.Interrupt:
            return

    for run in range(runs):
        state = {"failures": None}
        proc = env.process(training(run, state))
        if lam > 0.0:
            state["failures"] = env.process(failures(proc))
    env.run(until=max_wall)
    return wall


BASELINES = {"numpy": numpy_baseline, "simpy": simpy_baseline}
