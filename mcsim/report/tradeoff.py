"""Trade-off figure: every feasible configuration at its mean of two outputs, the Pareto front labelled.

:func:`plot_pareto` draws each configuration at its mean (x, y) with 5-95 % bars, and
connects and labels the configurations on the front (:func:`mcsim.analysis.ranking.pareto_front`);
:func:`_place_labels` puts each label where it covers no other label, point or line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from mcsim.analysis.ranking import pareto_front
from mcsim.io.format import format_significant
from mcsim.io.variables import VARIABLES, sweep_dims
from mcsim.report import style

if TYPE_CHECKING:
    from matplotlib.transforms import Bbox

# A configuration's row of the figure's table: the means and the 5th and 95th percentiles of x and y.
MX, X5, X95, MY, Y5, Y95 = range(6)
# Offsets [points] of the spots a label is tried at, nearest first: below and to the left first, where
# nothing feasible lies below a Pareto front.
_DIRECTIONS = ((0, -1), (-1, -1), (1, -1), (-1, 0), (1, 0), (0, 1), (-1, 1), (1, 1))
_SPOTS = [(r * dx, r * dy) for r in (10, 18, 30, 45, 65, 90) for dx, dy in _DIRECTIONS]


def plot_pareto(ds: xr.Dataset, x: str = "wall_time", y: str = "cost"):
    """Every feasible configuration at its mean (x, y), 5–95 % bars, the Pareto front highlighted.

    The front comes from :func:`mcsim.analysis.ranking.pareto_front` (both objectives
    minimised, means over runs); its points are connected and labelled with
    their configuration and mean values.
    """
    style.check_variable(ds, x)
    style.check_variable(ds, y)
    dims = sweep_dims(ds)
    points = style.feasible_points(ds)
    plt = style.pyplot()
    front = _front(ds, x, y)
    table = np.array([[*_statistics(ds, p, x), *_statistics(ds, p, y)] for p in points])
    on_front = np.array([bool(front.sel(p)) if dims else bool(front) for p in points])
    censored = np.array([style.completed_at(ds, p) < 1.0 for p in points])
    front_points = [p for p, f in zip(points, on_front, strict=False) if f]
    shared = _shared(front_points)  # coordinates shared by every front point go in the legend, the rest on each label
    with style.house_style():
        fig, ax = plt.subplots(figsize=(10, 6.8), layout="constrained")
        _draw_groups(ax, table, on_front, censored, _front_name(shared, dims))
        order = np.argsort(table[on_front, MX])
        line = np.column_stack([table[on_front, MX][order], table[on_front, MY][order]])
        ax.plot(line[:, 0], line[:, 1], color="C3", linewidth=1.5, zorder=3)
        _axes(ax, ds, x, y, table)
        labels = _front_labels(ds, x, y, front_points, table[on_front], shared)
        _make_room(ax)
        fig.canvas.draw()
        _place_labels(fig, ax, sorted(labels), _obstacles(ax, table, line))
        title = f"Trade-off of {style.display_name(x)} and {style.display_name(y)}: {style.scenario_name(ds)}"
        style.figure_title(fig, title, _detail(ds, x, y, len(points), on_front, censored))
    return fig


def _front(ds: xr.Dataset, x: str, y: str) -> xr.DataArray:
    """The Pareto front of ``x`` and ``y``; none when every feasible configuration has censored runs (none is
    ranked)."""
    try:
        return pareto_front(ds, (x, y))
    except ValueError:
        return xr.zeros_like(ds["feasible"]) if "feasible" in ds else xr.DataArray(False)


def _statistics(ds: xr.Dataset, point: dict, name: str) -> tuple[float, float, float]:
    """The mean, 5th and 95th percentiles of ``name`` over the runs of ``point``, in shown units."""
    values = style.runs_of(ds, point, name)
    return np.nanmean(values), np.nanpercentile(values, 5), np.nanpercentile(values, 95)


def _shared(front_points: list[dict]) -> dict:
    """The coordinates every point of the front shares (none for a front of one point)."""
    if not front_points:
        return {}
    first = front_points[0]
    return {d: v for d, v in first.items() if len(front_points) > 1 and all(p[d] == v for p in front_points)}


def _front_name(shared: dict, dims: list[str]) -> str:
    """The front's legend entry, with the coordinates its points share."""
    if not dims:
        return "the configuration"
    return "Pareto front" + (f" (all {style.config_label(shared)})" if shared else "")


def _draw_groups(ax, table: np.ndarray, on_front: np.ndarray, censored: np.ndarray, front_name: str) -> None:
    """The configurations at their means with 5–95 % bars: the others in grey, those with censored runs
    hollow, the front's in red on top."""
    groups = (
        (~on_front & ~censored, "0.55", 4, "other configurations", 2, None),
        (censored, "C1", 7, "runs censored at max_wall_days (values truncated; not ranked)", 2.5, "white"),
        (on_front, "C3", 6, front_name, 3, None),
    )
    for mask, colour, size, label, z, face in groups:
        if mask.any():
            _draw_group(ax, table[mask], colour, size, label, z, face)


def _draw_group(ax, t: np.ndarray, colour: str, size: float, label: str, z: float, face: str | None) -> None:
    """One group of configurations (rows ``t`` of the table): bars, their end ticks, the means."""
    alpha = 0.85 if z == 3 else 0.6
    # bars from the 5th to the 95th percentile, drawn as segments: with rare failures the mean
    # can lie outside that range, which errorbar (offsets from the mean) cannot show
    ax.hlines(t[:, MY], t[:, X5], t[:, X95], color=colour, linewidth=1.0, alpha=alpha, zorder=z)
    ax.vlines(t[:, MX], t[:, Y5], t[:, Y95], color=colour, linewidth=1.0, alpha=alpha, zorder=z)
    ends = {"linestyle": "none", "markersize": 5, "color": colour, "alpha": alpha, "zorder": z}
    ax.plot(t[:, X5 : X95 + 1].ravel(), np.repeat(t[:, MY], 2), marker="|", **ends)
    ax.plot(np.repeat(t[:, MX], 2), t[:, Y5 : Y95 + 1].ravel(), marker="_", **ends)
    ax.plot(
        t[:, MX],
        t[:, MY],
        linestyle="none",
        marker="o",
        markersize=size,
        color=colour,
        alpha=alpha,
        label=label,
        zorder=z + 0.5,
        markerfacecolor=face or colour,
    )


def _axes(ax, ds: xr.Dataset, x: str, y: str, table: np.ndarray) -> None:
    """Log axes where the bars span more than a factor 20, the axis labels, the legend."""
    for axis, columns in ((ax.xaxis, [X5, X95]), (ax.yaxis, [Y5, Y95])):
        if style.log_worthy(table[:, columns].ravel()):
            (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
            style.plain_log_axis(axis)
    ax.set_xlabel(style.axis_label(ds, x) + " (mean, bars: 5–95 % of runs)")
    ax.set_ylabel(style.axis_label(ds, y) + " (mean, bars: 5–95 % of runs)")
    ax.legend(loc="upper right")


def _front_labels(
    ds: xr.Dataset, x: str, y: str, front_points: list[dict], rows: np.ndarray, shared: dict
) -> list[tuple[float, float, str]]:
    """(x, y, text) of each front point's label: its coordinates but the shared ones, and its means."""
    x_unit, y_unit = style.display_units(ds, x)[1], style.display_units(ds, y)[1]
    return [
        (
            row[MX],
            row[MY],
            f"{style.config_label({d: v for d, v in p.items() if d not in shared}, style.scenario_name(ds))}\n"
            f"({format_significant(row[MX])} {x_unit}, {format_significant(row[MY])} {y_unit})".replace(
                " ,", ","
            ).replace(" )", ")"),
        )
        for p, row in zip(front_points, rows, strict=False)
    ]


def _make_room(ax) -> None:
    """Margins, and room for labels below and left of the front, where no configuration can be."""
    ax.margins(x=0.06, y=0.12)
    for get, put, scale in (
        (ax.get_xlim, ax.set_xlim, ax.get_xscale()),
        (ax.get_ylim, ax.set_ylim, ax.get_yscale()),
    ):
        low, high = get()
        put(low / (high / low) ** 0.08 if scale == "log" else low - 0.08 * (high - low), high)


def _sampled(ax, start: tuple[float, float], end: tuple[float, float]) -> np.ndarray:
    """The segment from ``start`` to ``end`` (data coordinates) as display points every few pixels."""
    a, b = ax.transData.transform([start, end])
    steps = max(2, int(np.hypot(*(b - a)) / 4))
    return a + np.linspace(0, 1, steps)[:, None] * (b - a)


def _obstacles(ax, table: np.ndarray, line: np.ndarray) -> np.ndarray:
    """Display points no label may cover: the means, the bars' ends, the front's segments and the bars."""
    obstacles = [
        ax.transData.transform(np.column_stack([table[:, c], table[:, r]]))
        for c, r in ((MX, MY), (X5, MY), (X95, MY), (MX, Y5), (MX, Y95))
    ]
    obstacles += [_sampled(ax, a, b) for a, b in zip(line[:-1], line[1:], strict=False)]
    for t in table:
        obstacles.append(_sampled(ax, (t[X5], t[MY]), (t[X95], t[MY])))
        obstacles.append(_sampled(ax, (t[MX], t[Y5]), (t[MX], t[Y95])))
    return np.concatenate(obstacles)


def _detail(ds: xr.Dataset, x: str, y: str, feasible: int, on_front: np.ndarray, censored: np.ndarray) -> str:
    """The subtitle: configurations shown and on the front, what the means are over, what is left out."""
    n_all = len(style.sweep_points(ds, sweep_dims(ds)))
    runs = ds.sizes["run"]
    if sweep_dims(ds):
        detail = (
            f"{feasible} feasible configurations, {int(on_front.sum())} on the front (means over "
            f"{runs} runs; {_better_text(x, y)})"
        )
    else:
        detail = f"a single configuration: mean over {runs} runs"
    if censored.any():
        detail += f"; {int(censored.sum())} with runs censored at max_wall_days, never on the front"
    if n_all > feasible:
        detail += f"; {n_all - feasible} infeasible not shown"
    return detail


def _better_text(x: str, y: str) -> str:
    """Which direction is better on each axis, in a few words."""
    directions = [VARIABLES[n].direction if n in VARIABLES else None for n in (x, y)]
    if directions[0] == directions[1] and directions[0]:
        return f"{directions[0]} is better on both axes"
    return ", ".join(f"{d} {style.display_name(n)} is better" for n, d in zip((x, y), directions, strict=False) if d)


def _annotate(ax, text: str, xy: tuple[float, float], offset: tuple[float, float], **arrow):
    """A red label of ``text`` at ``offset`` [points] from ``xy``, aligned away from it; ``arrow``: its
    ``arrowprops``, when it has a leader line."""
    dx, dy = offset
    return ax.annotate(
        text,
        xy,
        xytext=offset,
        textcoords="offset points",
        ha="right" if dx < 0 else "left" if dx > 0 else "center",
        va="top" if dy < 0 else "bottom" if dy > 0 else "center",
        fontsize=8,
        color="C3",
        zorder=5,
        linespacing=1.15,
        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
        **arrow,
    )


def _place_labels(fig, ax, labels: list[tuple[float, float, str]], obstacles: np.ndarray) -> None:
    """Annotate points, each at the nearest spot clear of the other labels, points and lines.

    ``labels`` are (x, y, text) in data coordinates; ``obstacles`` is an (n, 2) array of
    display coordinates that no label may cover. Candidate spots are tried at growing
    distances, below and to the left first (nothing feasible lies below a Pareto front).
    """
    fig.canvas.draw()  # runs the layout, so display coordinates are final
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    placed: list[Bbox] = []
    for px, py, text in labels:
        note, box, offset = _best_spot(ax, renderer, axes_box, (px, py), text, obstacles, placed)
        note.remove()  # drawn again with a leader line, so no label is taken for a neighbour's
        note = _annotate(
            ax,
            text,
            (px, py),
            offset,
            arrowprops={"arrowstyle": "-", "color": "C3", "lw": 0.6, "shrinkA": 0, "shrinkB": 4},
        )
        note.set_in_layout(False)
        placed.append(box)


def _best_spot(ax, renderer, axes_box, xy, text: str, obstacles: np.ndarray, placed: list):
    """(the label drawn at the first spot of least cost, its box, its offset): the first spot that costs
    nothing, else the cheapest (cost: outside the axes 1000, each label it overlaps 100, each obstacle 1)."""
    from matplotlib.text import Text

    best = None
    for offset in _SPOTS:
        note = _annotate(ax, text, xy, offset)
        note.update_positions(renderer)
        box = Text.get_window_extent(note, renderer).padded(3)  # the text alone, not the leader line
        score = 1000 * _outside(box, axes_box) + 100 * sum(box.overlaps(other) for other in placed)
        score += _covered(box, obstacles)
        if best is None or score < best[0]:
            if best is not None:
                best[1].remove()
            best = (score, note, box, offset)
        else:
            note.remove()
        if score == 0:
            break
    assert best is not None, "_SPOTS is not empty"
    return best[1:]


def _outside(box, axes_box) -> bool:
    """Whether ``box`` reaches outside ``axes_box``."""
    return not (box.x0 >= axes_box.x0 and box.x1 <= axes_box.x1 and box.y0 >= axes_box.y0 and box.y1 <= axes_box.y1)


def _covered(box, obstacles: np.ndarray) -> int:
    """How many of the ``obstacles`` (display points) lie in ``box``."""
    x, y = obstacles[:, 0], obstacles[:, 1]
    return int(np.sum((x >= box.x0) & (x <= box.x1) & (y >= box.y0) & (y <= box.y1)))
