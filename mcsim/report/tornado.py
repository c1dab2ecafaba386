"""Tornado figure of the sensitivity indices: which uncertain input matters most.

:func:`plot_sensitivity` draws, for one configuration of a result with parameter
draws, a pair of horizontal bars per uncertain input, most influential at the top (the
ranking of :func:`mcsim.analysis.sensitivity.sensitivity`): with a Saltelli design the total
index ``ST`` (the ranking) as the upper bar and the first-order index ``S1`` below it; with any
other design ``S1`` (the ranking) as the upper bar and the moment-independent ``delta``, the
second opinion, below it; each with its 95 % bootstrap interval. Each input is labelled with its
unit and the 5-95 % range of its draws.

The configuration shown is the one :func:`mcsim.analysis.ranking.best` picks on the output
(the robust choice: best mean over draws and runs), the one a planner would buy; a
result without a sweep has only one. ``mcsim plot --kind sensitivity`` and ``mcsim
report`` (section "Which input matters most") use it.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from mcsim.analysis.ranking import best
from mcsim.analysis.sensitivity import sensitivity
from mcsim.io.format import format_significant
from mcsim.io.variables import sweep_dims
from mcsim.report import style

_INDEX_TEXT = {"ST": "total Sobol index ST", "S1": "first-order index S1", "delta": "delta (moment-independent)"}


def chosen_configuration(ds: xr.Dataset, output: str = "cost") -> dict:
    """The sweep point whose indices are shown: ``best``'s pick on ``output``, else the first feasible one.

    Returns ``{}`` for a result without sweep dims.
    """
    dims = sweep_dims(ds)
    if not dims:
        return {}
    try:
        return dict(best(ds, output)["configuration"])
    except ValueError:  # no direction (e.g. n_failures) or nothing eligible: the first feasible point
        feasible = ds["feasible"].all("draw") if "feasible" in ds else xr.ones_like(ds["wall_time"].isel(draw=0, run=0))
        for index in np.ndindex(*feasible.shape):
            if bool(feasible.values[index]):
                return {d: feasible[d].values[i].item() for d, i in zip(feasible.dims, index, strict=False)}
        raise ValueError("no feasible configuration in the dataset") from None


def point_sensitivity(
    ds: xr.Dataset,
    output: str = "cost",
    point: dict | None = None,
    *,
    resamples: int | None = None,
    progress: bool | None = None,
) -> tuple[dict, xr.Dataset]:
    """The configuration shown (default :func:`chosen_configuration`) and its indices.

    :func:`mcsim.analysis.sensitivity.sensitivity` of that one configuration only (the bootstrap
    intervals of the delta method take seconds per configuration), with its ``resamples``
    and ``progress``.
    """
    point = chosen_configuration(ds, output) if point is None else point
    return point, sensitivity(ds.sel(point) if point else ds, output, resamples=resamples, progress=progress)


def _indices(result: xr.Dataset) -> tuple[str, str]:
    """(the index the bars rank by, the index drawn below it): (ST, S1) or (S1, delta)."""
    return ("ST", "S1") if result.attrs["ranked_by"] == "ST" else ("S1", "delta")


def ranking(ds: xr.Dataset, result: xr.Dataset, point: dict) -> list[dict]:
    """The inputs at ``point``, most influential first: key, unit, 5-95 % range of the draws, indices.

    ``result`` holds the indices of ``point`` (:func:`point_sensitivity`) or of every
    configuration. Each row: ``input``, ``rank``, ``units``, ``p5``, ``p95`` (of the drawn
    values), ``rank_delta``, ``delta_disagrees`` and, for each of ``S1``, ``ST`` and ``delta``,
    ``(value, low, high)``.
    """
    at = result.sel({d: v for d, v in point.items() if d in result.dims})
    rows = []
    for i in np.argsort(at["rank"].values, kind="stable"):
        key = str(at["input"].values[i])
        values = np.asarray(ds[key].values, dtype=float)
        row = {
            "input": key,
            "rank": int(at["rank"].values[i]),
            "units": str(ds[key].attrs.get("units", "")),
            "p5": float(np.percentile(values, 5)),
            "p95": float(np.percentile(values, 95)),
            "rank_delta": int(at["rank_delta"].values[i]),
            "delta_disagrees": bool(at["delta_disagrees"].values[i]),
        }
        for name in ("S1", "ST", "delta"):
            row[name] = tuple(float(at[f"{name}{s}"].values[i]) for s in ("", "_low", "_high"))
        rows.append(row)
    return rows


def _input_label(row: dict) -> str:
    unit = "" if row["units"] in ("", "1") else f" [{row['units']}]"
    low, high = (format_significant(float(f"{row[q]:.3g}")) for q in ("p5", "p95"))
    return f"{row['input']}{unit}\ndrawn 5–95 %: {low} – {high}"


def plot_sensitivity(
    ds: xr.Dataset,
    output: str = "cost",
    point: dict | None = None,
    result: xr.Dataset | None = None,
    *,
    resamples: int | None = None,
    progress: bool | None = None,
):
    """Tornado figure of the sensitivity indices of ``output`` at one configuration.

    Parameters
    ----------
    ds : xarray.Dataset
        A result with parameter draws.
    output : str
        The per-run variable whose mean per draw the indices explain (default ``cost``).
    point : dict, optional
        The configuration (sweep coordinates); default :func:`chosen_configuration`.
    result : xarray.Dataset, optional
        The indices of ``output`` at ``point`` (:func:`point_sensitivity`), when already computed.
    resamples, progress : optional
        Bootstrap resamples and progress bar of the indices, when they are computed here
        (:func:`mcsim.analysis.sensitivity.sensitivity`).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        No parameter draws, or ``output`` is not a per-run variable.
    mcsim.errors.BackendUnavailable
        Without matplotlib.
    """
    if result is None:
        point, result = point_sensitivity(ds, output, point, resamples=resamples, progress=progress)
    elif point is None:  # indices given for every configuration: show the default one
        point = chosen_configuration(ds, output)
    plt = style.pyplot()
    rows = ranking(ds, result, point)
    main, first = _indices(result)
    positions = np.arange(len(rows))
    with style.house_style():
        fig, ax = plt.subplots(figsize=(8.5, 2.2 + 0.62 * len(rows)), layout="constrained")
        for name, offset, colour in ((main, -0.19, "C0"), (first, 0.19, "C1")):
            _index_bars(ax, rows, name, positions + offset, colour)
        _index_axes(ax, rows, (main, first), positions, output)
        ax.legend(loc="lower right")
        detail = _detail(ds, result, point, output, main)
        style.figure_title(fig, f"Which uncertain input matters most: {style.scenario_name(ds)}", detail)
    return fig


def _detail(ds: xr.Dataset, result: xr.Dataset, point: dict, output: str, main: str) -> str:
    """The subtitle: the configuration shown, the draws and runs, the ranking, a warning on correlated inputs."""
    where = f"{style.config_label(point)} (best mean {output.replace('_', ' ')}): " if point else ""
    detail = (
        f"{where}{ds.sizes['draw']:,} draws × {ds.sizes['run']:,} runs ({result.attrs['design']} "
        f"design); inputs ranked by {main}, most influential at the top"
    )
    if result.attrs.get("correlated_inputs"):
        correlated = ", ".join(result.attrs["correlated_inputs"].split())
        detail += f"; correlated inputs ({correlated}) overlap and do not add up"
    return detail


def _index_bars(ax, rows: list[dict], name: str, positions: np.ndarray, colour: str) -> None:
    """The bars of one index, one per input, with their 95 % bootstrap intervals."""
    value = np.array([row[name][0] for row in rows])
    low = np.array([row[name][1] for row in rows])
    high = np.array([row[name][2] for row in rows])
    shown = np.nan_to_num(value)
    ax.barh(
        positions,
        shown,
        height=0.36,
        color=colour,
        label=f"{_INDEX_TEXT[name]}, 95 % bootstrap interval",
    )
    ax.errorbar(
        shown,
        positions,
        xerr=np.nan_to_num(np.vstack([value - low, high - value])),
        fmt="none",
        ecolor="0.15",
        elinewidth=1.0,
        capsize=3,
    )


def _index_axes(ax, rows: list[dict], names: tuple[str, str], positions: np.ndarray, output: str) -> None:
    """The inputs' labels, most influential at the top; the x axis from 0 (or the lowest bound) to the
    highest bound of the intervals."""
    ax.axvline(0.0, color="0.3", linewidth=0.8)
    ax.set_yticks(positions)
    ax.set_yticklabels([_input_label(row) for row in rows], fontsize=8)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(
        f"sensitivity index of the mean {output.replace('_', ' ')} per draw [1]"
        + (" (share of its variance over draws)" if names[0] == "ST" else "")
    )
    upper = max([1e-9] + [row[name][2] for row in rows for name in names if np.isfinite(row[name][2])])
    lower = min([0.0] + [row[name][1] for row in rows for name in names if np.isfinite(row[name][1])])
    ax.set_xlim(lower - 0.02, min(1.05, upper * 1.1 + 0.02))


__all__ = ["chosen_configuration", "point_sensitivity", "ranking", "plot_sensitivity"]
