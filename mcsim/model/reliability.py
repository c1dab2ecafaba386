"""Daly's renewal estimate of a run's wall time under failures: the one home of the formula.

A run of ``iterations`` iterations checkpointed every ``every`` of them is a
sequence of segments: ``intervals - 1`` intervals of ``every`` iterations, each
followed by its checkpoint stall, and a last interval without a checkpoint.
Failures are taken as a Poisson process of the job's MTBF ``M`` and a restart
of ``R`` seconds (recovery plus checkpoint load; failures may strike during
restarts). A segment of ``x`` seconds without failures then takes on average
``M e^(R/M) (e^(x/M) - 1)`` (Daly 2006, "A higher order estimate of the optimum
checkpoint interval for restart dumps", Future Gener. Comput. Syst. 22(3),
eq. 13), and the run the sum over its segments.

Used by the run-time estimate (:func:`mcsim.model.run_estimate.estimate_run`) and
the planner's screen (:mod:`mcsim.planning.screen`). Scalars or arrays; seconds
throughout.

The renewal function of a Weibull law (the expected failures of a unit renewed at each failure)
is here too, with the one solver of its renewal equation (:func:`renewal_grid`): the screen's
failure rate of a young or aged cluster (:func:`expected_renewals`) and the failure-log fit's
table (:func:`renewal_function`, :mod:`mcsim.fitting`) both use it. With it, Daly's estimate at the
run's mean failure rate on a young or aged cluster (:func:`young_cluster_wall_s`, the fixed point
of the wall time and the failures it holds).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from mcsim._lazy import lazy_module

if TYPE_CHECKING:
    from scipy import special
else:
    special = lazy_module("scipy.special")


def expected_segment_s(segment_s: ArrayLike, restart_s: ArrayLike, mtbf_s: ArrayLike) -> float | np.ndarray:
    """Expected wall time to get ``segment_s`` of work (and its checkpoint) done under Poisson failures, s.

    Daly (2006, eq. 13): ``M e^(R/M) (e^(segment/M) - 1)`` with ``M`` the system MTBF and ``R`` the
    restart time (failures may strike during restarts); ``segment_s`` without failures (``M`` infinite
    or not positive). Scalars or arrays; inf where the exponentials overflow.
    """
    seg, restart, m = (np.asarray(x, dtype=np.float64) for x in (segment_s, restart_s, mtbf_s))
    finite = np.isfinite(m) & (m > 0)
    safe = np.where(finite, m, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        value = safe * np.exp(restart / safe) * np.expm1(seg / safe)
    out = np.where(finite, value, seg)
    return float(out) if out.ndim == 0 else out


def expected_run_wall_s(*run: ArrayLike) -> float | np.ndarray:
    """Expected wall time of a whole run, s: Daly's segment estimate (:func:`expected_segment_s`) summed over
    its intervals, ``(intervals - 1) E[every * iteration_s + stall_s] + E[last interval]``; not capped at
    any wall-time limit. ``run``: the arguments of :func:`summed_over_intervals` after ``per_segment``."""
    return summed_over_intervals(expected_segment_s, *run)


def summed_over_intervals(
    per_segment: Callable[[ArrayLike, ArrayLike, ArrayLike], float | np.ndarray],
    iterations: ArrayLike,
    every: ArrayLike,
    iteration_s: ArrayLike,
    stall_s: ArrayLike,
    restart_s: ArrayLike,
    mtbf_s: ArrayLike,
) -> float | np.ndarray:
    """A per-segment quantity of a run (its mean wall time, its variance) summed over its checkpoint intervals.

    Parameters
    ----------
    per_segment : callable
        ``(segment_s, restart_s, mtbf_s)``: the quantity of one segment of ``segment_s`` of work.
    iterations : int or ndarray of int
        Iterations of the run.
    every : int or ndarray of int
        Iterations between checkpoints (1 .. iterations).
    iteration_s : float or ndarray
        Mean wall time of one iteration without failures, s.
    stall_s : float or ndarray
        Training stall per checkpoint, s (none after the last interval).
    restart_s : float or ndarray
        Mean restart time after a failure (recovery plus checkpoint load), s.
    mtbf_s : float or ndarray
        Mean time between failures of the job, s (inf without failures).

    Returns
    -------
    float or ndarray
        ``(intervals - 1) per_segment(every * iteration_s + stall_s) + per_segment(last interval)``.
    """
    intervals, full_s, last_s = _intervals(iterations, every, iteration_s)
    full = per_segment(full_s + stall_s, restart_s, mtbf_s)
    # A run of one interval has no full ones: 0, not 0 x inf (NaN) where the segment's estimate overflowed.
    with np.errstate(invalid="ignore"):
        fulls = np.where(intervals > 1, (intervals - 1) * full, 0.0)
    total = fulls + per_segment(last_s, restart_s, mtbf_s)
    return float(total) if np.ndim(total) == 0 else total


def _intervals(
    iterations: ArrayLike, every: ArrayLike, iteration_s: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checkpoint intervals of a run (the last one may be shorter), a full interval's compute and the
    last one's, s."""
    iterations, every, iteration_s = np.asarray(iterations), np.asarray(every), np.asarray(iteration_s)
    intervals = -(-iterations // every)
    return intervals, every * iteration_s, (iterations - (intervals - 1) * every) * iteration_s


def segment_variance_s2(segment_s: ArrayLike, restart_s: ArrayLike, mtbf_s: ArrayLike) -> np.ndarray:
    """Variance of the wall time to get ``segment_s`` of work done under Poisson failures, s².

    The segment is tried until a try of ``segment_s`` seconds meets no failure: the number of
    failures ``K`` is geometric, ``E[K] = e^(x/M) - 1`` and ``Var[K] = e^(x/M) (e^(x/M) - 1)``, and
    each failure loses the work done since the try began, ``Y`` (exponential with mean ``M``
    truncated at ``x``), plus the restart ``R``. With ``K`` independent of the ``Y``'s (a compound
    geometric sum), ``Var = E[K] Var[Y] + Var[K] (E[Y] + R)²``. **First order:** the restart is
    taken as fixed and failures during it are left out (Daly's mean, :func:`expected_segment_s`,
    keeps them; the variance is used for a quantile, :func:`wall_quantile_s`). 0 without
    failures (``M`` infinite or not positive); inf where the exponentials overflow.
    """
    seg, restart, m = (np.asarray(x, dtype=np.float64) for x in (segment_s, restart_s, mtbf_s))
    finite = np.isfinite(m) & (m > 0)
    safe = np.where(finite, m, 1.0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x = seg / safe
        grown = np.expm1(x)  # e^x - 1 = E[K]
        failures_var = (grown + 1.0) * grown
        survive = np.exp(-x)
        lost_mean = safe - seg / grown  # E[Y] of the truncated exponential
        lost_square = (2.0 * safe**2 - survive * (seg**2 + 2.0 * seg * safe + 2.0 * safe**2)) / -np.expm1(-x)
        lost_var = np.maximum(lost_square - lost_mean**2, 0.0)
        value = grown * lost_var + failures_var * (lost_mean + restart) ** 2
    return np.where(finite & (seg > 0), value, 0.0)


def run_wall_variance_s2(*run: ArrayLike) -> float | np.ndarray:
    """Variance of a run's wall time from its failures, s²: the segments' variances (:func:`segment_variance_s2`)
    summed over its intervals (segments are independent under Poisson failures). ``run``: the arguments of
    :func:`summed_over_intervals` after ``per_segment``."""
    return summed_over_intervals(segment_variance_s2, *run)


def wall_quantile_s(floor_s: ArrayLike, mean_s: ArrayLike, variance_s2: ArrayLike, probability: float) -> np.ndarray:
    """The ``probability``-quantile of a wall time that is ``floor_s`` plus a positive excess, s.

    The excess (time lost to failures, restarts, slower job factors) is taken as gamma-distributed
    with the mean ``mean_s - floor_s`` and the variance ``variance_s2`` (two moments matched: the
    sum of a random number of positive losses is right-skewed, and a normal law would understate
    its upper quantiles when there are few failures). The mean where there is no excess or no
    variance; inf where the mean is.
    """
    floor, mean, var = (np.asarray(x, dtype=np.float64) for x in (floor_s, mean_s, variance_s2))
    excess = mean - floor
    usable = np.isfinite(mean) & np.isfinite(var) & (excess > 0) & (var > 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shape = np.where(usable, excess**2 / np.where(usable, var, 1.0), 1.0)
        scale = np.where(usable, var / np.where(usable, excess, 1.0), 0.0)
        quantile = floor + special.gammaincinv(shape, probability) * scale
    return np.where(usable, quantile, np.where(np.isfinite(var), mean, np.inf))


# The renewal function of a Weibull law: the one solver of the renewal equation, for the planner's
# screen (expected_renewals) and the failure-log fit's table (renewal_function, mcsim.fitting).
# Grid of the screen's renewal functions over [0, RENEWAL_SPAN_MEANS mean lifetimes]; beyond it the
# renewal function grows as its asymptote t / μ + (CV² − 1) / 2 does (Cox 1962, "Renewal Theory", §4.5).
RENEWAL_SPAN_MEANS = 20.0
_FINE_SPAN_MEANS = 0.5  # a finer grid for runs shorter than half a lifetime (the early renewals' curvature)
# renewal_function's grid: 40 steps per Weibull scale, at least 4,000 and at most 20,000, up to
# t/λ = 500 (a step <= λ/40); the asymptote beyond.
_STEPS_PER_SCALE, _MIN_STEPS, _MAX_STEPS = 40, 4000, 20000
_GRID_MAX = 500.0
# The screen's grids (expected_renewals): 4,000 steps over each span, whatever the shape (a grid of
# 20,000 steps costs ~25 times as much; at shape 0.05 it moves the screen's counts by 0.1 %).
_SCREEN_STEPS = 4000
_LOG_MAX = math.log(np.finfo(float).max)  # ~709.8: exp() of more overflows


def renewal_function(t_over_scale: float, shape: float) -> float:
    """Expected failures of one unit, new at time 0 and renewed at each failure, by time t.

    The renewal function ``M(t)`` of a Weibull law (shape ``k``, scale ``λ``), solved on a grid
    (:func:`renewal_grid`) for ``t/λ <= 500``; beyond, the key renewal theorem's
    ``t/μ + (cv² − 1)/2``. Checked against the Smith–Leadbetter series of ``M`` (shapes 1/2, 2
    and 3: within 4e-6 relative, ``tests/test_renewal.py``) and simulated renewal counts
    (``tests/test_fitting.py``, ``t/λ`` from 0.01 to 1000, ``k`` 0.5–3: within 4 standard errors,
    and within 1 % where the simulation resolves it). For ``k = 1`` it is ``t/λ``; for ``t ≪ λ``
    it is close to the first-failure part ``F(t) ≈ (t/λ)^k``.

    Parameters
    ----------
    t_over_scale : float
        Time over the Weibull scale, ``t/λ`` [-], >= 0 and finite.
    shape : float
        Weibull shape ``k`` [-], > 0.

    Returns
    -------
    float
        ``M(t)`` [failures per unit].
    """
    if not (math.isfinite(t_over_scale) and t_over_scale >= 0 and math.isfinite(shape) and shape > 0):
        raise ValueError(f"expected t/λ >= 0 and a shape > 0, got {t_over_scale} and {shape}")
    if t_over_scale == 0:
        return 0.0
    if t_over_scale > _GRID_MAX:
        # Key renewal theorem, second order (Smith 1954): M(t) ≈ t/μ + (cv² − 1)/2, μ and
        # cv² of the law with λ = 1; its share of M is small this far out except for very
        # heavy tails (k < 0.5), where it overstates M by a few per cent.
        log_mu = float(special.gammaln(1.0 + 1.0 / shape))
        cv2 = math.exp(min(float(special.gammaln(1.0 + 2.0 / shape)) - 2.0 * log_mu, _LOG_MAX)) - 1.0
        return t_over_scale / math.exp(log_mu) + 0.5 * (cv2 - 1.0)
    steps = int(min(max(_STEPS_PER_SCALE * t_over_scale, _MIN_STEPS), _MAX_STEPS))
    return float(renewal_grid(t_over_scale, shape, steps)[-1])


def renewal_grid(span_over_scale: float, shape: float, steps: int) -> np.ndarray:
    """The renewal function of a Weibull law (scale 1) on a uniform grid over ``[0, span_over_scale]``.

    ``M(t) = F(t) + ∫_0^t F(t − x) dM(x)`` with ``F(t) = 1 − exp(−t^k)``, by the Riemann–Stieltjes
    midpoint method of Xie (M. Xie, "On the solution of renewal-type integral equations",
    Communications in Statistics – Simulation and Computation 18(1), 1989, pp. 281–293) on ``n``
    steps of ``h``: ``M_i (1 − F_{1/2}) = F_i + Σ_{j<i} F_{i−j+1/2} ΔM_j − F_{1/2} M_{i−1}``. Its cost
    grows as ``n²``.

    Parameters
    ----------
    span_over_scale : float
        The grid's end over the Weibull scale [-], > 0.
    shape : float
        Weibull shape ``k`` [-], > 0.
    steps : int
        ``n``, the grid's steps.

    Returns
    -------
    np.ndarray
        ``M(i h)``, ``i = 0..n`` [failures per unit].
    """
    n = steps
    h = span_over_scale / n
    with np.errstate(under="ignore"):
        f_grid = -np.expm1(-((h * np.arange(n + 1)) ** shape))  # F(i h), i = 0..n
        f_mid = -np.expm1(-((h * (np.arange(n) + 0.5)) ** shape))  # F((j + 1/2) h), j = 0..n-1
    m = np.zeros(n + 1)
    dm = np.zeros(n + 1)
    reversed_mid = np.ascontiguousarray(f_mid[::-1])  # [n − i : n − 1] = F_{i−1/2}, ..., F_{3/2}
    for i in range(1, n + 1):
        conv = float(np.dot(reversed_mid[n - i : n - 1], dm[1:i])) if i > 1 else 0.0
        m[i] = (f_grid[i] + conv - f_mid[0] * m[i - 1]) / (1.0 - f_mid[0])
        dm[i] = m[i] - m[i - 1]
    return m


def expected_renewals(t_s: ArrayLike, shape: float, mtbf_s: float, initial_age: str | float) -> np.ndarray:
    """Expected failures of one unit in ``[0, t]`` whose lifetimes are Weibull (``shape``, mean ``mtbf_s``).

    ``initial_age``: ``"stationary"`` (the unit has run for long: ``t / mtbf_s`` exactly), ``"new"`` (an
    ordinary renewal process) or an age in hours (a delayed one: the first lifetime is the residual life
    at that age). Failed units are replaced by new ones. The renewal function is solved on a grid
    (:func:`renewal_grid`) up to :data:`RENEWAL_SPAN_MEANS` mean lifetimes, interpolated linearly
    within it, and continued by the asymptote's slope beyond. Used by the planner's screen for the
    mean failure rate of a run on a young or aged cluster (docs/model.md §9).
    """
    t = np.asarray(t_s, dtype=np.float64)
    if initial_age == "stationary" or shape == 1.0:
        return t / mtbf_s
    scale = mtbf_s / math.gamma(1.0 + 1.0 / shape)
    age = 0.0 if initial_age == "new" else float(initial_age) * 3600.0
    out = np.empty_like(t)
    coarse = t > _FINE_SPAN_MEANS * mtbf_s
    for span, where in ((_FINE_SPAN_MEANS, ~coarse), (RENEWAL_SPAN_MEANS, coarse)):
        if where.any():
            grid, solved = _renewal_on_grid(span * mtbf_s, shape, scale, age)
            beyond = solved[-1] + (t[where] - grid[-1]) / mtbf_s  # past the span: the asymptote's slope
            out[where] = np.where(t[where] <= grid[-1], np.interp(t[where], grid, solved), beyond)
    return out


@functools.lru_cache(maxsize=64)
def _renewal_on_grid(span_s: float, shape: float, scale_s: float, age_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The (delayed) renewal function on a uniform grid over ``[0, span_s]``: the grid and its values
    (cached: the screen asks for the same class's function many times; treat as read-only).

    A unit of age ``a`` at the start first fails after its residual life, of law
    ``G(t) = 1 − S(a + t)/S(a)``; then ``M_d(t) = G(t) + ∫_0^t G(t − x) dM(x)``, the same midpoint
    sums as :func:`renewal_grid`'s: ``M_d(t_i) = G_i + Σ_{j<=i} G_{i−j+1/2} ΔM_j``.
    """
    ordinary = renewal_grid(span_s / scale_s, shape, _SCREEN_STEPS)
    grid = np.linspace(0.0, span_s, ordinary.size)
    if age_s == 0.0:
        return grid, ordinary
    mid = 0.5 * (grid[:-1] + grid[1:])  # (j + 1/2) h
    with np.errstate(under="ignore"):
        first = -np.expm1((age_s / scale_s) ** shape - ((grid + age_s) / scale_s) ** shape)  # G(i h)
        first_mid = -np.expm1((age_s / scale_s) ** shape - ((mid + age_s) / scale_s) ** shape)  # G((j + 1/2) h)
    delayed = np.array(first)
    delayed[1:] += np.convolve(first_mid, np.diff(ordinary))[: ordinary.size - 1]
    return grid, delayed


# Choice: one mean rate over the whole run. Daly segments at the rate of each piece of the run
# (16 pieces in order) were 20-27 % pessimistic on the young-cluster space of
# benchmarks/bench_screen_features.py (the early failures of a young cluster come in bursts that
# mostly restart recoveries, which Poisson segments at the piece's rate overcount); the mean rate is
# 8.3 % pessimistic at worst there. The wall time T then solves T = Daly(T / failures in [0, T]): by bisection on log T
# (BISECTIONS halvings), since passes of that fixed point oscillate where the rate falls steeply
# (Weibull shape 0.05: a finite T gives a rate at which no run ends, an endless one the stationary rate).
BISECTIONS = 60


def run_mtbf_s(
    classes: Sequence[tuple[np.ndarray, float, float, str | float]], wall_s: np.ndarray, mtbf_s: np.ndarray
) -> np.ndarray:
    """The job's mean time between failures over a run of ``wall_s``, s: ``wall / Σ units × expected
    failures of a unit in [0, wall]`` (:func:`expected_renewals`, each unit replaced when it fails);
    ``mtbf_s`` (the stationary one) where no failure is expected.

    ``classes``: ``(units per run, Weibull shape, a unit's MTBF s, initial_age)`` of every failure class
    that rolls work back.
    """
    horizon = np.where(np.isfinite(wall_s) & (wall_s > 0), wall_s, 0.0)
    failures = np.zeros(np.shape(mtbf_s))
    for units, shape, unit_mtbf_s, initial_age in classes:
        failures = failures + units * expected_renewals(horizon, shape, unit_mtbf_s, initial_age)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((horizon > 0) & (failures > 0), horizon / np.where(failures > 0, failures, 1.0), mtbf_s)


def young_cluster_wall_s(
    daly: Callable[[np.ndarray], np.ndarray],
    classes: Sequence[tuple[np.ndarray, float, float, str | float]],
    mtbf_s: np.ndarray,
    longest_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The expected wall time ``T`` with ``T = daly(run_mtbf_s(T))``, and that MTBF (s), on a cluster whose
    failure rate changes with age (:func:`run_mtbf_s` of ``classes``; ``mtbf_s`` the stationary MTBF).

    ``daly(mtbf)``: Daly's expected wall time at a job MTBF. Bisection on ``log T`` between the run
    without failures and ``longest_s``; inf where even that is too short. ``T − daly(run_mtbf(T))``
    falls as T grows when the rate falls with age (shape < 1) and rises slower than T otherwise, so
    the root is unique.
    """

    def excess(wall: np.ndarray) -> np.ndarray:  # positive where the wall time is too short to hold its failures
        with np.errstate(over="ignore", invalid="ignore"):
            return np.nan_to_num(daly(run_mtbf_s(classes, wall, mtbf_s)) - wall, nan=np.inf)

    low = np.log(daly(np.full(mtbf_s.size, np.inf)))
    high = np.full(mtbf_s.size, np.log(longest_s))
    endless = excess(np.exp(high)) > 0
    for _ in range(BISECTIONS):
        middle = 0.5 * (low + high)
        above = excess(np.exp(middle)) > 0  # the root is above the middle
        low, high = np.where(above, middle, low), np.where(above, high, middle)
    wall = np.where(endless, np.inf, np.exp(high))
    return wall, run_mtbf_s(classes, wall, mtbf_s)
