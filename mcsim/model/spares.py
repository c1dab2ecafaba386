"""A spare-node pool's first-order effect on the wall time: the job runs only while enough nodes are there.

With ``hardware.spare_nodes = S`` the job holds its nodes and ``S`` spares. Every failure that takes
nodes (a GPU failure its node, a node or domain event its ``domain_nodes`` nodes) sends them to repair
for the class's ``repair_hours``; the job runs while the nodes under repair number at most ``S``, and
otherwise waits for them (docs/model.md §4). Failures go on while it waits, so the nodes under repair
at time ``t`` are the compound-Poisson count ``K(t) = Σ_c d_c N_c``, ``N_c`` Poisson of mean
``λ_c E[min(t, R_c)]`` (events of class ``c`` at rate ``λ_c``, ``d_c`` nodes each, repaired after
``R_c``, fixed or lognormal with ``repair_sigma``: an M/G/∞ queue per class, empty at the start;
:func:`in_repair_s`). The job progresses at the rate
``A(t) = P(K(t) <= S)``, so a run that needs ``W`` seconds with every node present takes the ``T``
with ``∫_0^T A(t) dt = W``. Used by the model's first-order expected runs
(:mod:`mcsim.model.expected_runs`, for the planner's screen), which give ``W`` by Daly's estimate, once per
job size (:func:`wall_with_spares_by_size_s`); seconds throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from mcsim._lazy import lazy_module

if TYPE_CHECKING:
    from scipy import special, stats
else:  # imported at first use: importing scipy.stats costs ~0.5 s, and most plans have no spares
    stats = lazy_module("scipy.stats")
    special = lazy_module("scipy.special")  # SciPy at its first use: a command that simulates nothing never needs it

# Points of the grid over [0, the longest repair] on which A(t) is integrated (the trapezoid rule).
_GRID_POINTS = 257
# Above this many spares P(K <= S) is taken from the normal law of K (continuity-corrected).
_EXACT_SPARES = 256


# A lognormal repair law is integrated up to this many log-sds above its median's log (its 99.9 %
# quantile); beyond, the count under repair is taken as stationary.
_REPAIR_Z = 3.09


def in_repair_s(t_s: np.ndarray, repair_s: float, sigma: float) -> np.ndarray:
    """``E[min(t, R)]``, s: the expected number under repair at ``t`` per event a second (an M/G/inf queue,
    empty at 0). ``R`` is ``repair_s``, or lognormal of that mean and log-sd ``sigma``:
    ``E[R; R < t] + t P(R >= t) = m Phi(z - sigma) + t (1 - Phi(z))``, ``z = (ln t - mu) / sigma``,
    ``mu = ln m - sigma^2 / 2``."""
    t = np.asarray(t_s, dtype=np.float64)
    if sigma == 0.0 or repair_s == 0.0:
        return np.minimum(t, repair_s)
    mu = np.log(repair_s) - 0.5 * sigma * sigma
    with np.errstate(divide="ignore"):
        z = (np.log(t) - mu) / sigma
    return repair_s * special.ndtr(z - sigma) + t * (1.0 - special.ndtr(z))


def _longest_s(repair_s: float, sigma: float) -> float:
    """How long until the count under repair is (about) stationary: the repair, or its law's 99.9 % quantile."""
    return repair_s * float(np.exp(_REPAIR_Z * sigma - 0.5 * sigma * sigma)) if sigma > 0 else repair_s


def nodes_available(t_s: np.ndarray, classes: Sequence[tuple[float, int, float, float]], spares: int) -> np.ndarray:
    """``P(K(t) <= spares)`` at the times ``t_s``.

    ``classes``: ``(events per s, nodes per event, mean repair s, repair log-sd)`` of every class that
    takes nodes.
    """
    t = np.asarray(t_s, dtype=np.float64)
    means = [(rate * in_repair_s(t, repair_s, sigma), nodes) for rate, nodes, repair_s, sigma in classes]
    if spares > _EXACT_SPARES:
        mean = sum(m * d for m, d in means)
        sd = np.sqrt(sum(m * d * d for m, d in means))
        return np.where(sd > 0, stats.norm.cdf((spares + 0.5 - mean) / np.where(sd > 0, sd, 1.0)), 1.0)
    pmf = np.zeros((t.size, spares + 1))
    pmf[:, 0] = 1.0
    counts = np.arange(spares + 1)
    for m, d in means:
        single = np.zeros_like(pmf)
        reach = counts[: spares // d + 1]
        single[:, reach * d] = stats.poisson.pmf(reach[None, :], m[:, None])
        pmf = np.stack([np.convolve(a, b)[: spares + 1] for a, b in zip(pmf, single, strict=True)])
    return np.minimum(pmf.sum(axis=1), 1.0)


def wall_with_spares_s(
    wall_s: ArrayLike, classes: Sequence[tuple[float, int, float, float]], spares: int | None
) -> np.ndarray:
    """The wall time ``T`` of runs that need ``wall_s`` with every node present (see the module docstring).

    ``spares`` None (unlimited, the default) or no class taking nodes: ``wall_s`` itself. inf where the
    pool is never enough once repairs have reached their stationary state (``A = 0``).
    """
    wall = np.asarray(wall_s, dtype=np.float64)
    classes = [c for c in classes if c[0] > 0 and c[1] > 0]
    if spares is None or not classes:
        return wall
    longest = max(_longest_s(repair_s, sigma) for _, _, repair_s, sigma in classes)
    grid = np.linspace(0.0, longest, _GRID_POINTS)
    available = nodes_available(grid, classes, spares)
    done = np.concatenate([[0.0], np.cumsum(0.5 * (available[1:] + available[:-1]) * np.diff(grid))])
    stationary = float(available[-1])
    within = np.interp(wall, done, grid) if done[-1] > 0 else np.zeros_like(wall)
    with np.errstate(divide="ignore", invalid="ignore"):
        beyond = longest + (wall - done[-1]) / stationary if stationary > 0 else np.full_like(wall, np.inf)
    return np.where(wall <= done[-1], within, beyond)


def wall_with_spares_by_size_s(
    walls_s: tuple[np.ndarray, ...],
    gpus: np.ndarray,
    classes: Sequence[tuple[np.ndarray, float, int, float, float]],
    spares: int | None,
) -> tuple[np.ndarray, ...]:
    """Each of ``walls_s`` (wall times of runs on ``gpus`` GPUs each, every node present) stretched by the waits
    for repaired spare nodes: :func:`wall_with_spares_s` once per job size (unchanged without a spare pool).

    ``classes``: per failure class ``(units per run, a unit's mean time between failures s, nodes one
    failure takes out, mean repair s, repair log-sd)``.
    """
    if spares is None:
        return walls_s
    out = tuple(np.array(wall_s, dtype=np.float64) for wall_s in walls_s)
    for size in np.unique(gpus):
        idx = np.flatnonzero(gpus == size)
        at_size = [
            (float(units[idx[0]]) / unit_mtbf_s, nodes, repair_s, sigma)
            for units, unit_mtbf_s, nodes, repair_s, sigma in classes
        ]
        for wall in out:
            wall[idx] = wall_with_spares_s(wall[idx], at_size, spares)
    return out
