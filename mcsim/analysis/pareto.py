"""Non-dominated sorting: which points no other point beats on every objective.

Used by :func:`mcsim.analysis.ranking.pareto_front`; all objectives are minimised here (the
analysis signs them by their direction first).
"""

from __future__ import annotations

import numpy as np

PARETO_BLOCK = 256  # rows compared at once by the k-objective Pareto sweep


def nondominated(values: np.ndarray) -> np.ndarray:
    """Rows of ``values`` (n points x k objectives, all minimised) that no other row dominates.

    Row q dominates row p when q <= p in every column and q < p in one; equal rows do not
    dominate each other. Rows with a NaN are never on the front. Sort-based for k <= 2
    (O(n log n)); for k > 2 a block sweep in lexicographic order, each block compared at
    once with itself and with the front found so far (a dominating row always sorts
    first, and dominance is transitive, so the front of the earlier rows is enough).
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError("values must be a 2-d array (points x objectives)")
    n, k = values.shape
    result = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(np.all(np.isfinite(values), axis=1))
    if rows.size == 0 or k == 0:
        return result
    finite = values[rows]
    if k == 1:
        result[rows] = finite[:, 0] == finite[:, 0].min()
    elif k == 2:
        result[rows] = _front_2d(finite[:, 0], finite[:, 1])
    else:
        result[rows] = _front_blocks(finite)
    return result


def _front_2d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Two objectives: sort by (x, y); a point is on the front when it has the lowest y of
    its x and a y below every y at smaller x."""
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    starts = np.flatnonzero(np.concatenate([[True], xs[1:] != xs[:-1]]))
    group = np.cumsum(np.concatenate([[True], xs[1:] != xs[:-1]])) - 1
    group_min = ys[starts][group]  # y sorted within a group: its first is its minimum
    running = np.minimum.accumulate(ys)
    before = np.concatenate([[np.inf], running[starts[1:] - 1]])[group]  # min y at smaller x
    front = np.empty(x.size, dtype=bool)
    front[order] = (ys == group_min) & (ys < before)
    return front


def _dominated_by(candidates: np.ndarray, others: np.ndarray) -> np.ndarray:
    """For each candidate row, whether some row of ``others`` dominates it."""
    if others.size == 0 or candidates.size == 0:
        return np.zeros(len(candidates), dtype=bool)
    le = np.ones((len(candidates), len(others)), dtype=bool)
    lt = np.zeros((len(candidates), len(others)), dtype=bool)
    for j in range(candidates.shape[1]):  # one 2-d comparison per objective: contiguous and fast
        column, other = candidates[:, j, None], others[None, :, j]
        le &= other <= column
        lt |= other < column
    return np.any(le & lt, axis=1)


def _front_blocks(values: np.ndarray) -> np.ndarray:
    order = np.lexsort(values.T[::-1])
    ordered = values[order]
    on_front = np.zeros(len(values), dtype=bool)
    front_rows = np.empty((0, values.shape[1]))
    for start in range(0, len(ordered), PARETO_BLOCK):
        block = ordered[start : start + PARETO_BLOCK]
        keep = ~_dominated_by(block, front_rows)  # most rows fall here, once a front exists
        survivors = block[keep]
        keep[keep] = ~_dominated_by(survivors, survivors)
        on_front[start : start + len(block)] = keep
        front_rows = np.concatenate([front_rows, block[keep]])
    result = np.empty(len(values), dtype=bool)
    result[order] = on_front
    return result
