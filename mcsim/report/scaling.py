"""Scaling figure: wall time, energy, cost and ETTR versus a sweep dimension (GPUs by default).

:func:`plot_scaling` draws one line per combination of the other sweep dimensions, the
mean over runs with a shaded 5-95 % band; :func:`scaling_dimension` says which sweep
dimension it is drawn against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import xarray as xr

from mcsim.analysis.ranking import best
from mcsim.io.format import format_coordinate
from mcsim.io.variables import SAMPLE_DIMS, sweep_dims
from mcsim.report import style

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType

MAX_LINES = 8  # plot_scaling: more combinations of the other dims than this -> one line
_PANELS = (("wall_time", "wall time"), ("energy", "energy"), ("cost", "cost"), ("ettr", "ETTR"))  # (variable, title)
_LINE_STYLES: tuple[LineStyleType, ...] = ("-", "--", ":", "-.")  # by the value of the second other dim
_MARKERS = ("o", "s", "^", "D")


def scaling_dimension(ds: xr.Dataset, x: str | None = None) -> str:
    """The sweep dimension a scaling figure is drawn against.

    ``x`` when given; otherwise ``gpus`` when swept, else the only sweep dimension.

    Raises
    ------
    ValueError
        ``x`` is not a sweep dimension, or none was named and there is no ``gpus`` nor a
        single sweep dimension to take.
    """
    dims = sweep_dims(ds)
    if x is None:
        if "gpus" in dims:
            return "gpus"
        if len(dims) == 1:
            return dims[0]
        if not dims:
            raise ValueError(
                "plot_scaling: the dataset has no sweep dimension to plot against "
                "(a single configuration; no gpus dimension)"
            )
        raise ValueError(
            f"plot_scaling: no gpus dimension; name the one to plot against with --x (x=...), one of {', '.join(dims)}"
        )
    if x not in dims:
        raise ValueError(
            f"plot_scaling: the dataset has no {x!r} dimension to plot against "
            f"(sweep dims: {', '.join(dims) or 'none, a single configuration'})"
        )
    return x


def plot_scaling(ds: xr.Dataset, x: str | None = None):
    """Wall time, energy, cost and ETTR versus the sweep dimension ``x``.

    One line per combination of the other sweep dims (the mean over runs, with a
    shaded 5–95 % band); when there are more than ``MAX_LINES`` combinations the
    other dims are fixed at the values of the cost-optimal configuration. ``x``
    defaults to ``gpus``, or to the only sweep dimension (:func:`scaling_dimension`).
    Infeasible configurations are marked with an x on the horizontal axis;
    configurations with runs censored at ``max_wall_days`` (values truncated) with a
    hollow marker.

    Raises
    ------
    ValueError
        When ``x`` is not a sweep dimension of ``ds``, or cannot be chosen.
    """
    x = scaling_dimension(ds, x)
    # a curve per parameter draw: each draw's scaling is its own line (its runs give the band)
    dims = sweep_dims(ds) + [d for d in SAMPLE_DIMS if d != "run" and d in ds["wall_time"].dims]
    plt = style.pyplot()
    others = [d for d in dims if d != x]
    combos, fixed_note = _line_combinations(ds, others)
    look = _line_look(ds, others, combos)
    xs = ds[x].values
    numeric = np.issubdtype(xs.dtype, np.number)
    positions = xs.astype(float) if numeric else np.arange(xs.size, dtype=float)
    marks = {"infeasible": False, "censored": False}
    with style.house_style():
        fig, axes = plt.subplots(2, 2, figsize=(11, 8.2), sharex=True, layout="constrained")
        handles = [_draw_combination(ds, axes, k, combo, look, positions, marks) for k, combo in enumerate(combos)]
        _label_panels(ds, axes)
        _label_x_axes(axes[1], x, xs, positions, numeric)
        _legend(fig, ds, handles, marks, " · ".join(others) if len(combos) > 1 else None, look.style_dim)
        style.figure_title(
            fig,
            f"Scaling with {'the number of GPUs' if x == 'gpus' else x}: {style.scenario_name(ds)}",
            f"mean (line) and 5–95 % band over {ds.sizes['run']} runs per configuration{fixed_note}",
        )
    return fig


class _LineLook(NamedTuple):
    """How the lines differ: colour by the largest other dim, line style by the next (at most 4 values)."""

    colour_dim: str | None
    style_dim: str | None
    colour_by_value: bool  # the colour follows the colour dim's value (no third dim varies along the lines)


def _line_look(ds: xr.Dataset, others: list[str], combos: list[dict]) -> _LineLook:
    """The dims that colour and style the lines of ``combos``."""
    colour_dim = max(others, key=lambda d: ds.sizes[d]) if others and len(combos) > 1 else None
    style_dim = next((d for d in others if d != colour_dim and ds.sizes[d] <= 4), None) if colour_dim else None
    colour_by_value = bool(colour_dim) and not [d for d in others if d not in (colour_dim, style_dim)]
    return _LineLook(colour_dim, style_dim, colour_by_value)


def _draw_combination(
    ds: xr.Dataset, axes, k: int, combo: dict, look: _LineLook, positions: np.ndarray, marks: dict[str, bool]
) -> tuple[int, int, Any]:
    """The ``k``-th combination's line on every panel; ``marks`` notes whether it has infeasible or censored
    points. Returns (colour index, style index, its legend entry)."""
    from matplotlib.lines import Line2D

    colour_index = ds[look.colour_dim].values.tolist().index(combo[look.colour_dim]) if look.colour_by_value else k
    colour = f"C{colour_index % 10}"
    style_index = ds[look.style_dim].values.tolist().index(combo[look.style_dim]) if look.style_dim else 0
    line_style, marker = _LINE_STYLES[style_index % 4], _MARKERS[style_index % 4]
    sub = ds.sel(combo) if combo else ds
    feasible = sub["feasible"].values.astype(bool) if "feasible" in sub else np.ones(positions.size, bool)
    censored = feasible & (sub["completed"].mean("run").values < 1.0 if "completed" in sub else False)
    marks["infeasible"] |= bool((~feasible).any())
    marks["censored"] |= bool(censored.any())
    for ax, (name, _) in zip(axes.flat, _PANELS, strict=False):
        values = sub[name].values.astype(float) * style.display_units(ds, name)[0]
        _draw_line(ax, positions, values, feasible, censored, colour, line_style, marker)
    line = Line2D(
        [],
        [],
        color=colour,
        linestyle=line_style,
        marker=marker,
        markersize=4,
        label=style.config_label(combo, "mean"),
    )
    return colour_index, style_index, line


def _legend(fig, ds: xr.Dataset, handles: list, marks: dict[str, bool], title: str | None, style_dim: str | None):
    """The figure's legend: the lines by colour and style, the band, the marks shown; one column per colour,
    its line styles one under the other."""
    from matplotlib.lines import Line2D

    band = Line2D([], [], color="0.5", alpha=0.3, linewidth=8, label="5–95 % of runs")
    rows = ds.sizes[style_dim] if style_dim else max(1, -(-len(handles) // 4))
    legend_handles = [h for _, _, h in sorted(handles, key=lambda item: item[:2])] + [band] + _mark_handles(marks)
    fig.legend(
        handles=legend_handles,
        loc="outside lower center",
        ncols=-(-len(legend_handles) // rows),
        title=title,
        frameon=False,
    )


def _line_combinations(ds: xr.Dataset, others: list[str]) -> tuple[list[dict], str]:
    """The combinations of the sweep dims ``others`` drawn as lines, and a note for the subtitle.

    Every combination when there are at most ``MAX_LINES``; otherwise only that of the
    cost-optimal configuration (the first combination when nothing can be ranked), with a
    note naming the fixed values ("" when all are drawn).
    """
    combos = style.sweep_points(ds, others)
    if len(combos) <= MAX_LINES:
        return combos, ""
    try:
        optimum = best(ds, "cost")["configuration"]
    except ValueError:  # nothing can be ranked (all censored): the first combination
        optimum = combos[0]
    fixed_note = (
        f"; {', '.join(f'{d}={optimum[d]}' for d in others)} fixed at the cost-optimal values "
        f"({len(combos)} combinations in the file)"
    )
    return [{d: optimum[d] for d in others}], fixed_note


def _draw_line(
    ax,
    positions: np.ndarray,
    values: np.ndarray,
    feasible: np.ndarray,
    censored: np.ndarray,
    colour: str,
    line_style: LineStyleType,
    marker: str,
) -> None:
    """One combination's mean line and 5–95 % band on one panel, with its censored and infeasible marks.

    ``values`` are per-run values in shown units, shape (len(positions), runs); statistics
    are taken over the feasible positions only. Censored positions get a hollow marker,
    infeasible ones an x on the horizontal axis.
    """
    mean, low, high = np.full((3, positions.size), np.nan)
    if feasible.any():  # statistics of feasible points only: no all-NaN slices
        runs = values[feasible]
        mean[feasible] = np.nanmean(runs, axis=-1)
        low[feasible], high[feasible] = np.nanpercentile(runs, (5, 95), axis=-1)
    ax.fill_between(positions, low, high, color=colour, alpha=0.15, linewidth=0)
    ax.plot(positions, mean, color=colour, linestyle=line_style, marker=marker, markersize=4, linewidth=1.6)
    if censored.any():
        ax.plot(
            positions[censored],
            mean[censored],
            linestyle="none",
            marker=marker,
            markersize=8,
            markerfacecolor="white",
            markeredgecolor=colour,
            zorder=4,
        )
    if (~feasible).any():
        ax.plot(
            positions[~feasible],
            np.zeros(int((~feasible).sum())),
            linestyle="none",
            marker="x",
            markersize=7,
            color=colour,
            clip_on=False,
            zorder=5,
            transform=ax.get_xaxis_transform(),
        )


def _label_panels(ds: xr.Dataset, axes) -> None:
    """Title and y label of each panel; a log y axis where its lines span more than a factor 20 (not ETTR)."""
    for ax, (name, title) in zip(axes.flat, _PANELS, strict=False):
        ax.set_title(title)
        ax.set_ylabel(style.axis_label(ds, name) if name != "ettr" else "ETTR (ideal time / wall time)")
        lines = np.concatenate(
            [np.asarray(line.get_ydata(), float) for line in ax.get_lines() if line.get_marker() != "x"]
        )
        if name != "ettr" and style.log_worthy(lines):
            ax.set_yscale("log")
            style.plain_log_axis(ax.yaxis)


def _label_x_axes(bottom_axes, x: str, xs: np.ndarray, positions: np.ndarray, numeric: bool) -> None:
    """Ticks at every value of ``x`` on the bottom panels; GPUs on a log-2 axis when all are positive."""
    from matplotlib.ticker import NullLocator

    for ax in bottom_axes:
        if x == "gpus" and numeric and np.all(positions > 0):
            ax.set_xscale("log", base=2)
        ax.set_xticks(positions)
        ax.set_xticklabels([f"{v:,.0f}" if numeric and float(v).is_integer() else format_coordinate(v) for v in xs])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel(f"{'GPUs' if x == 'gpus' else x}" + (" (log scale)" if ax.get_xscale() == "log" else ""))
        if len(xs) > 10:
            ax.tick_params(axis="x", labelrotation=30)


def _mark_handles(marks: dict[str, bool]) -> list:
    """Legend entries of the censored and infeasible marks, for those the figure shows."""
    from matplotlib.lines import Line2D

    handles = []
    if marks["censored"]:
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="o",
                markersize=8,
                markerfacecolor="white",
                markeredgecolor="0.3",
                label="runs censored at max_wall_days (values truncated)",
            )
        )
    if marks["infeasible"]:
        handles.append(
            Line2D([], [], linestyle="none", marker="x", markersize=7, color="0.3", label="infeasible (x on the axis)")
        )
    return handles
