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

Used by the run-time estimate (:func:`mcsim.engine.estimate.estimate_run`) and
the planner's screen (:mod:`mcsim.planning.screen`). Scalars or arrays; seconds
throughout.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


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


def expected_run_wall_s(
    iterations: ArrayLike,
    every: ArrayLike,
    iteration_s: ArrayLike,
    stall_s: ArrayLike,
    restart_s: ArrayLike,
    mtbf_s: ArrayLike,
) -> float | np.ndarray:
    """Expected wall time of a whole run, s: Daly's segment estimate summed over its intervals.

    Parameters
    ----------
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
        ``(intervals - 1) E[every * iteration_s + stall_s] + E[last interval]``, s; not capped
        at any wall-time limit.
    """
    iterations, every, iteration_s = np.asarray(iterations), np.asarray(every), np.asarray(iteration_s)
    intervals = -(-iterations // every)  # the last one may be shorter
    last_s = (iterations - (intervals - 1) * every) * iteration_s
    return (intervals - 1) * expected_segment_s(every * iteration_s + stall_s, restart_s, mtbf_s) + expected_segment_s(
        last_s, restart_s, mtbf_s
    )
