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
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import special


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
    return (intervals - 1) * per_segment(full_s + stall_s, restart_s, mtbf_s) + per_segment(last_s, restart_s, mtbf_s)


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


# Grid of the renewal equation over [0, RENEWAL_SPAN_MEANS mean lifetimes]; beyond it the renewal
# function grows as its asymptote t / μ + (CV² − 1) / 2 does (Cox 1962, "Renewal Theory", §4.5).
RENEWAL_SPAN_MEANS = 20.0
_FINE_SPAN_MEANS = 0.5  # a finer grid for runs shorter than half a lifetime (the early renewals' curvature)
_RENEWAL_POINTS = 2001


def expected_renewals(t_s: ArrayLike, shape: float, mtbf_s: float, initial_age: str | float) -> np.ndarray:
    """Expected failures of one unit in ``[0, t]`` whose lifetimes are Weibull (``shape``, mean ``mtbf_s``).

    ``initial_age``: ``"stationary"`` (the unit has run for long: ``t / mtbf_s`` exactly), ``"new"`` (an
    ordinary renewal process) or an age in hours (a delayed one: the first lifetime is the residual life
    at that age). Failed units are replaced by new ones. The renewal function is solved from the renewal
    equation ``M(t) = G(t) + ∫ M(t − x) dF(x)`` on a uniform grid (trapezoidal Riemann–Stieltjes sums,
    Xie 1989, "On the solution of renewal-type integral equations", Commun. Stat. Simul. 18(1)), up to
    :data:`RENEWAL_SPAN_MEANS` mean lifetimes and by the asymptote beyond. Used by the planner's screen
    for the mean failure rate of a run on a young or aged cluster (docs/model.md §9).
    """
    import math

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
    (cached: the screen asks for the same class's function many times; treat as read-only)."""
    grid = np.linspace(0.0, span_s, _RENEWAL_POINTS)
    lifetime = -np.expm1(-((grid / scale_s) ** shape))  # F
    ordinary = _renewal_solution(lifetime, lifetime)
    if age_s == 0.0:
        return grid, ordinary
    first = -np.expm1((age_s / scale_s) ** shape - ((grid + age_s) / scale_s) ** shape)  # G: residual life
    return grid, _convolved(first, ordinary)


def _renewal_solution(first: np.ndarray, lifetime: np.ndarray) -> np.ndarray:
    """``M`` on the grid with ``M(t) = first(t) + ∫ M(t − x) dF(x)``, ``M(0) = 0``.

    ``M_i = first_i + Σ_{j=1..i} ΔF_j (M_{i−j+1} + M_{i−j}) / 2``; the ``j = 1`` term holds ``M_i``
    itself, which is solved for.
    """
    d_f = np.diff(lifetime)
    m = np.zeros_like(first)
    for i in range(1, m.size):
        known = np.sum(d_f[:i] * (m[i:0:-1] + m[i - 1 :: -1]))  # m[i] is still 0 here
        m[i] = (first[i] + 0.5 * known) / (1.0 - 0.5 * d_f[0])
    return m


def _convolved(first: np.ndarray, ordinary: np.ndarray) -> np.ndarray:
    """The delayed renewal function ``M_d(t) = G(t) + ∫ M(t − x) dG(x)`` on the grid (``first`` = G)."""
    d_g = np.diff(first)
    out = np.array(first, dtype=np.float64)
    for i in range(1, out.size):
        out[i] += 0.5 * np.sum(d_g[:i] * (ordinary[i:0:-1] + ordinary[i - 1 :: -1]))
    return out
