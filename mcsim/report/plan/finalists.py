"""The simulated finalists of a plan compared with its recommendation, run by run (docs/model.md §9).

Run r of every finalist shares its random streams (common random numbers), so two finalists
are compared over the runs both simulated: their paired difference. Finalists leave the
selection at different stages, so their own means are over different runs and are not compared.
"""

from __future__ import annotations

import numpy as np
import xarray as xr


def recommended_finalist(ds: xr.Dataset) -> int:
    """Index along ``finalist`` of the recommendation."""
    return int(np.flatnonzero(ds["finalist_candidate"].values == int(ds["recommended"]))[0])


def paired_difference(ds: xr.Dataset, k: int, name: str = "objective") -> tuple[float, float, int]:
    """Mean of finalist ``k``'s per-run ``name`` minus the recommendation's over the runs both simulated
    (run r of every finalist shares its random streams, so the pair differs by the configuration alone),
    the recommendation's mean over those runs, and how many runs that is.

    Finalists are eliminated at different stages: their own means are over different runs, and comparing
    those would mix run-to-run noise into the difference (a runner-up could look better than the pick).
    """
    if name == "objective" and name not in ds:  # a plan file written before the per-run objective was kept
        name = str(ds.attrs["objective"])
        if name not in ds:  # a weighted objective: only each finalist's mean over its own runs is there
            means = ds["finalist_objective"].values
            return float(means[k] - means[recommended_finalist(ds)]), float(means[recommended_finalist(ds)]), 0
    other, best = ds[name].values[k], ds[name].values[recommended_finalist(ds)]
    both = np.isfinite(other) & np.isfinite(best)
    if not both.any():
        return np.nan, np.nan, 0
    return float(np.mean(other[both] - best[both])), float(np.mean(best[both])), int(both.sum())


def paired_half_width(ds: xr.Dataset, k: int) -> float:
    """Half-width of the normal 95 % interval of :func:`paired_difference` (objective units; NaN
    without per-run objectives or with fewer than two shared runs)."""
    name = "objective" if "objective" in ds else str(ds.attrs["objective"])
    if name not in ds:
        return np.nan
    other, best = ds[name].values[k], ds[name].values[recommended_finalist(ds)]
    both = np.isfinite(other) & np.isfinite(best)
    if both.sum() < 2:
        return np.nan
    return float(1.959964 * np.std(other[both] - best[both], ddof=1) / np.sqrt(both.sum()))


def indifference_zone(ds: xr.Dataset) -> float:
    """The selection's indifference zone δ in objective units: as the selection set it, or (a file
    written before it was kept, or a selection that never set it) indifference × |the recommendation's mean|."""
    delta = float(ds.attrs.get("indifference_zone", np.nan))
    if np.isfinite(delta) and delta > 0:
        return delta
    return float(ds.attrs["indifference"]) * abs(float(ds["finalist_objective"][recommended_finalist(ds)]))


def equivalent_finalists(ds: xr.Dataset) -> list[tuple[int, float, float]]:
    """The other simulated finalists that met the constraints and whose paired objective difference to
    the recommendation is within the indifference zone (:func:`indifference_zone`): ``(finalist,
    difference, half-width)``, closest first. The selection cannot tell these from the recommendation
    and does not try to: any of them is as good a choice within δ (issue 23, item 7)."""
    delta = indifference_zone(ds)
    near = []
    for k in ranked_finalists(ds)[1:]:
        diff = paired_difference(ds, int(k))[0]
        if np.isfinite(diff) and diff <= delta:
            near.append((int(k), diff, paired_half_width(ds, int(k))))
    return near


def ranked_finalists(ds: xr.Dataset) -> np.ndarray:
    """The recommendation, then the other finalists that met the constraints, by their paired objective
    difference to it (:func:`paired_difference`)."""
    best_f = recommended_finalist(ds)
    eligible = [k for k, d in enumerate(ds["finalist_dropped"].values) if not str(d) and k != best_f]
    gaps = [paired_difference(ds, k)[0] for k in eligible]
    order: np.ndarray | list[int] = (
        np.argsort(np.where(np.isfinite(gaps), gaps, np.inf), kind="stable") if eligible else []
    )
    return np.array([best_f, *(eligible[i] for i in order)], dtype=np.int64)
