"""Trade-off figure: every feasible configuration at its mean of two outputs, the Pareto front labelled.

:func:`plot_pareto` draws each configuration at its mean (x, y) with 5-95 % bars, and
connects and labels the configurations on the front (:func:`mcsim.analysis.pareto_front`);
:func:`_place_labels` puts each label where it covers no other label, point or line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from mcsim.io.format import format_significant
from mcsim.io.variables import sweep_dims
from mcsim.report.style import (
    _check_variable,
    _completed,
    _feasible,
    _label,
    _log_worthy,
    _name,
    _plain_log_axis,
    _points,
    _pyplot,
    _runs_of,
    _scenario,
    _style,
    _title,
    _units,
    config_label,
)

if TYPE_CHECKING:
    from matplotlib.transforms import Bbox


def plot_pareto(ds: xr.Dataset, x: str = "wall_time", y: str = "cost"):
    """Every feasible configuration at its mean (x, y), 5–95 % bars, the Pareto front highlighted.

    The front comes from :func:`mcsim.analysis.pareto_front` (both objectives
    minimised, means over runs); its points are connected and labelled with
    their configuration and mean values.
    """
    from mcsim.analysis.ranking import pareto_front

    _check_variable(ds, x)
    _check_variable(ds, y)
    dims = sweep_dims(ds)
    points = [p for p in _points(ds, dims) if _feasible(ds, p)]
    if not points:
        raise ValueError("no feasible configuration in the dataset")
    plt = _pyplot()
    try:
        front = pareto_front(ds, (x, y))
    except ValueError:  # every feasible configuration has censored runs: none is ranked
        front = xr.zeros_like(ds["feasible"]) if "feasible" in ds else xr.DataArray(False)

    def stats(point, name):
        values = _runs_of(ds, point, name)
        return np.nanmean(values), np.nanpercentile(values, 5), np.nanpercentile(values, 95)

    table = np.array([[*stats(p, x), *stats(p, y)] for p in points])  # mx, x5, x95, my, y5, y95
    on_front = np.array([bool(front.sel(p)) if dims else bool(front) for p in points])
    censored = np.array([_completed(ds, p) < 1.0 for p in points])
    front_points = [p for p, f in zip(points, on_front, strict=False) if f]
    # coordinates shared by every front point go in the legend, the rest on each label
    shared = (
        {d: v for d, v in front_points[0].items() if len(front_points) > 1 and all(p[d] == v for p in front_points)}
        if front_points
        else {}
    )
    front_name = "Pareto front" + (f" (all {config_label(shared)})" if shared else "") if dims else "the configuration"
    groups = (
        (~on_front & ~censored, "0.55", 4, "other configurations", 2, None),
        (censored, "C1", 7, "runs censored at max_wall_days (values truncated; not ranked)", 2.5, "white"),
        (on_front, "C3", 6, front_name, 3, None),
    )
    with _style():
        fig, ax = plt.subplots(figsize=(10, 6.8), layout="constrained")
        for mask, colour, size, label, z, face in groups:
            if not mask.any():
                continue
            t = table[mask]
            alpha = 0.85 if z == 3 else 0.6
            # bars from the 5th to the 95th percentile, drawn as segments: with rare failures the mean
            # can lie outside that range, which errorbar (offsets from the mean) cannot show
            ax.hlines(t[:, 3], t[:, 1], t[:, 2], color=colour, linewidth=1.0, alpha=alpha, zorder=z)
            ax.vlines(t[:, 0], t[:, 4], t[:, 5], color=colour, linewidth=1.0, alpha=alpha, zorder=z)
            ax.plot(
                t[:, 1:3].ravel(),
                np.repeat(t[:, 3], 2),
                linestyle="none",
                marker="|",
                markersize=5,
                color=colour,
                alpha=alpha,
                zorder=z,
            )
            ax.plot(
                np.repeat(t[:, 0], 2),
                t[:, 4:6].ravel(),
                linestyle="none",
                marker="_",
                markersize=5,
                color=colour,
                alpha=alpha,
                zorder=z,
            )
            ax.plot(
                t[:, 0],
                t[:, 3],
                linestyle="none",
                marker="o",
                markersize=size,
                color=colour,
                alpha=alpha,
                label=label,
                zorder=z + 0.5,
                markerfacecolor=face or colour,
            )
        order = np.argsort(table[on_front, 0])
        ax.plot(table[on_front, 0][order], table[on_front, 3][order], color="C3", linewidth=1.5, zorder=3)
        for axis, column in ((ax.xaxis, (1, 2)), (ax.yaxis, (4, 5))):
            if _log_worthy(table[:, list(column)].ravel()):
                (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
                _plain_log_axis(axis)
        ax.set_xlabel(_label(ds, x) + " (mean, bars: 5–95 % of runs)")
        ax.set_ylabel(_label(ds, y) + " (mean, bars: 5–95 % of runs)")
        ax.legend(loc="upper right")
        x_unit, y_unit = _units(ds, x)[1], _units(ds, y)[1]
        labels = [
            (
                row[0],
                row[3],
                f"{config_label({d: v for d, v in p.items() if d not in shared}, _scenario(ds))}\n"
                f"({format_significant(row[0])} {x_unit}, {format_significant(row[3])} {y_unit})".replace(
                    " ,", ","
                ).replace(" )", ")"),
            )
            for p, row in zip(front_points, table[on_front], strict=False)
        ]
        ax.margins(x=0.06, y=0.12)
        # room for labels below and left of the front, where no configuration can be
        for get, put, scale in (
            (ax.get_xlim, ax.set_xlim, ax.get_xscale()),
            (ax.get_ylim, ax.set_ylim, ax.get_yscale()),
        ):
            low, high = get()
            put(low / (high / low) ** 0.08 if scale == "log" else low - 0.08 * (high - low), high)
        fig.canvas.draw()
        obstacles = [
            ax.transData.transform(np.column_stack([table[:, c], table[:, r]]))
            for c, r in ((0, 3), (1, 3), (2, 3), (0, 4), (0, 5))
        ]  # means and bar ends
        line = ax.transData.transform(np.column_stack([table[on_front, 0][order], table[on_front, 3][order]]))
        for a, b in zip(line[:-1], line[1:], strict=False):  # the front's segments, sampled every few pixels
            steps = max(2, int(np.hypot(*(b - a)) / 4))
            obstacles.append(a + np.linspace(0, 1, steps)[:, None] * (b - a))
        for t in table:  # the error bars, sampled
            for lo, hi, fixed in ((1, 2, 3), (4, 5, 0)):
                ends = [(t[lo], t[fixed]), (t[hi], t[fixed])] if fixed == 3 else [(t[fixed], t[lo]), (t[fixed], t[hi])]
                a, b = ax.transData.transform(ends)
                steps = max(2, int(np.hypot(*(b - a)) / 4))
                obstacles.append(a + np.linspace(0, 1, steps)[:, None] * (b - a))
        _place_labels(fig, ax, sorted(labels), np.concatenate(obstacles))
        n_all = len(_points(ds, dims))
        detail = (
            (
                f"{len(points)} feasible configurations, {int(on_front.sum())} on the front (means over "
                f"{ds.sizes['run']} runs; {_better_text(x, y)})"
            )
            if dims
            else (f"a single configuration: mean over {ds.sizes['run']} runs")
        )
        if censored.any():
            detail += f"; {int(censored.sum())} with runs censored at max_wall_days, never on the front"
        if n_all > len(points):
            detail += f"; {n_all - len(points)} infeasible not shown"
        _title(fig, f"Trade-off of {_name(x)} and {_name(y)}: {_scenario(ds)}", detail)
    return fig


def _better_text(x: str, y: str) -> str:
    from mcsim.io.variables import VARIABLES

    directions = [VARIABLES[n].direction if n in VARIABLES else None for n in (x, y)]
    if directions[0] == directions[1] and directions[0]:
        return f"{directions[0]} is better on both axes"
    return ", ".join(f"{d} {_name(n)} is better" for n, d in zip((x, y), directions, strict=False) if d)


def _place_labels(fig, ax, labels: list[tuple[float, float, str]], obstacles: np.ndarray) -> None:
    """Annotate points, each at the nearest spot clear of the other labels, points and lines.

    ``labels`` are (x, y, text) in data coordinates; ``obstacles`` is an (n, 2) array of
    display coordinates that no label may cover. Candidate spots are tried at growing
    distances, below and to the left first (nothing feasible lies below a Pareto front).
    """
    from matplotlib.text import Text

    fig.canvas.draw()  # runs the layout, so display coordinates are final
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    directions = ((0, -1), (-1, -1), (1, -1), (-1, 0), (1, 0), (0, 1), (-1, 1), (1, 1))
    candidates = [(r * dx, r * dy) for r in (10, 18, 30, 45, 65, 90) for dx, dy in directions]
    placed: list[Bbox] = []
    for px, py, text in labels:
        best = None
        for dx, dy in candidates:
            ha = "right" if dx < 0 else "left" if dx > 0 else "center"
            va = "top" if dy < 0 else "bottom" if dy > 0 else "center"
            note = ax.annotate(
                text,
                (px, py),
                xytext=(dx, dy),
                textcoords="offset points",
                ha=ha,
                va=va,
                fontsize=8,
                color="C3",
                zorder=5,
                linespacing=1.15,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
            )
            note.update_positions(renderer)
            box = Text.get_window_extent(note, renderer).padded(3)  # the text alone, not the leader line
            outside = not (
                box.x0 >= axes_box.x0 and box.x1 <= axes_box.x1 and box.y0 >= axes_box.y0 and box.y1 <= axes_box.y1
            )
            covered = int(
                np.sum(
                    (obstacles[:, 0] >= box.x0)
                    & (obstacles[:, 0] <= box.x1)
                    & (obstacles[:, 1] >= box.y0)
                    & (obstacles[:, 1] <= box.y1)
                )
            )
            score = 1000 * outside + 100 * sum(box.overlaps(other) for other in placed) + covered
            if best is None or score < best[0]:
                if best is not None:
                    best[1].remove()
                best = (score, note, box, (dx, dy))
            else:
                note.remove()
            if score == 0:
                break
        assert best is not None, "candidates is not empty"
        _, note, box, (dx, dy) = best
        note.remove()  # drawn again with a leader line, so no label is taken for a neighbour's
        note = ax.annotate(
            text,
            (px, py),
            xytext=(dx, dy),
            textcoords="offset points",
            ha=note.get_ha(),
            va=note.get_va(),
            fontsize=8,
            color="C3",
            zorder=5,
            linespacing=1.15,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
            arrowprops={"arrowstyle": "-", "color": "C3", "lw": 0.6, "shrinkA": 0, "shrinkB": 4},
        )
        note.set_in_layout(False)
        placed.append(box)
