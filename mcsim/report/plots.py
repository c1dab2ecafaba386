"""Figures of simulation results: scaling, distributions, Pareto front, breakdowns.

Each function takes a dataset from :func:`mcsim.simulate` or
:func:`mcsim.open_results` (dims: sweep dims..., ``run``) and returns a
:class:`matplotlib.figure.Figure`; :func:`save_figure` writes one atomically.
Values are shown in the units a planner reads (wall time in days, cost in MUSD,
energy in MWh), converted from each variable's ``units`` attribute.

matplotlib is optional (``pip install 'mcsim[plot]'``) and imported only when a
figure is made; without it the functions raise
:class:`mcsim.backends.BackendUnavailable`. Without a display, the Agg backend
is used.

>>> import mcsim
>>> from mcsim import plots
>>> ds = mcsim.open_results("results/capacity-planning.nc")
>>> plots.save_figure(plots.plot_pareto(ds), "pareto.png")
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.engine.backends import BackendUnavailable
from mcsim.io.atomic import atomic_open
from mcsim.io.format import format_coordinate, format_significant
from mcsim.io.variables import SAMPLE_DIMS, sweep_dims

MAX_LINES = 8  # plot_scaling: more combinations of the other dims than this -> one line
MAX_CURVES = 10  # plot_cdf: more configurations -> this many, spread over the range of the mean
MAX_BARS = 16  # plot_breakdown: more configurations -> the 8 cheapest and the 8 dearest
MAX_TOTAL_RATIO = 10.0  # plot_breakdown: totals spread wider than this -> parts as shares of each total
DPI = 150

# stored unit -> the units it is shown in, preferred first: (factor from the stored unit, unit shown);
# a smaller unit is used only when values would be below 0.1 of the preferred one
_DISPLAY_UNITS = {
    "h": ((1 / 24, "days"), (1.0, "h"), (60.0, "min")),
    "USD": ((1e-6, "MUSD"), (1e-3, "kUSD"), (1.0, "USD")),
    "MWh": ((1.0, "MWh"), (1e3, "kWh")),
    "MW h": ((1.0, "MWh"), (1e3, "kWh")),  # the UDUNITS spelling stored since CF-1.10
    "t": ((1.0, "t CO$_2$e"), (1e3, "kg CO$_2$e")),
    "1": ((1.0, ""),),
}
_NAMES = {"wall_time": "wall time", "ettr": "ETTR", "co2": "CO$_2$", "n_failures": "failures"}

_STYLE = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "figure.titlesize": 12,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.framealpha": 0.9,
    "savefig.facecolor": "white",
    "figure.facecolor": "white",
    "axes.formatter.useoffset": False,
}

# components of wall time and energy: (label, colour); the same colour for the same kind of part
_TIME_PARTS = (
    ("ideal compute", "C0"),
    ("straggler", "C1"),
    ("checkpoint", "C2"),
    ("recovery", "C3"),
    ("lost (rolled back)", "C4"),
)
_ENERGY_PARTS = (
    ("energy_compute", "compute", "C0"),
    ("energy_wait", "wait and communication", "C1"),
    ("energy_checkpoint", "checkpoint", "C2"),
    ("energy_recovery", "recovery", "C3"),
    ("energy_lost", "lost (rolled back)", "C4"),
    ("energy_network", "network links", "C5"),
    ("energy_node", "node overhead", "C7"),
)


# --------------------------------------------------------------------------- helpers


def _pyplot():
    """matplotlib.pyplot, with the Agg backend when there is no display."""
    try:
        import matplotlib
    except ImportError as err:
        raise BackendUnavailable("plots need matplotlib: pip install 'mcsim[plot]'") from err
    headless = (
        sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd"))
        and not os.environ.get("DISPLAY")
        and not os.environ.get("WAYLAND_DISPLAY")
    )
    if headless and not os.environ.get("MPLBACKEND") and "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style():
    import matplotlib

    return matplotlib.rc_context(_STYLE)


def _check_variable(ds: xr.Dataset, name: str) -> None:
    if name not in ds or "run" not in ds[name].dims:
        per_run = sorted(v for v in ds.data_vars if "run" in ds[v].dims)
        raise ValueError(f"{name!r} is not a per-run variable of this dataset; expected one of {', '.join(per_run)}")


def _units(ds: xr.Dataset, name: str) -> tuple[float, str]:
    """Factor from the stored unit to the shown one, and the shown unit (days, MUSD, MWh)."""
    units = ds[name].attrs.get("units")
    if units is None:
        from mcsim.io.variables import VARIABLES

        units = VARIABLES[name].units if name in VARIABLES else ""
    ladder = _DISPLAY_UNITS.get(units, ((1.0, units),))
    values = np.abs(np.asarray(ds[name].values, dtype=float))
    largest = float(np.nanmax(values)) if np.isfinite(values).any() else np.nan
    for factor, shown in ladder:
        if not np.isfinite(largest) or largest * factor >= 0.1:
            return factor, shown
    return ladder[-1]


def _label(ds: xr.Dataset, name: str) -> str:
    """Axis label: name and unit, e.g. 'wall time [days]'."""
    unit = _units(ds, name)[1]
    text = _NAMES.get(name, name.replace("_", " "))
    return f"{text} [{unit}]" if unit else text


def _name(name: str) -> str:
    return _NAMES.get(name, name.replace("_", " "))


def _points(ds: xr.Dataset, dims: Sequence[str]) -> list[dict]:
    """Every combination of the coordinates of ``dims``, in C order."""
    return [
        dict(zip(dims, values, strict=False)) for values in itertools.product(*(ds[d].values.tolist() for d in dims))
    ]


def _value_text(dim: str, value) -> str:
    if dim == "gpus":
        return f"{value:,} GPUs"
    if isinstance(value, str):
        return value
    return f"{dim}={value:g}" if isinstance(value, float) else f"{dim}={value}"


def config_label(point: dict, fallback: str = "") -> str:
    """Short label of a configuration: '1,024 GPUs · gockpt · 30min'."""
    return " · ".join(_value_text(d, v) for d, v in point.items()) or fallback


def _runs_of(ds: xr.Dataset, point: dict, name: str) -> np.ndarray:
    """Per-run values of ``name`` at ``point``, in shown units."""
    return ds[name].sel(point).values.astype(float).ravel() * _units(ds, name)[0]


def _feasible(ds: xr.Dataset, point: dict) -> bool:
    return bool(ds["feasible"].sel(point).all()) if "feasible" in ds else True


def _scenario(ds: xr.Dataset) -> str:
    return str(ds.attrs.get("scenario_name", "mcsim results"))


def _select(ds: xr.Dataset, limit: int) -> tuple[list[dict], list[dict], str]:
    """Feasible configurations by mean cost; more than ``limit``: the cheapest and dearest halves.

    Returns (cheapest, dearest, note): ``dearest`` is empty when all are shown.
    """
    dims = sweep_dims(ds)
    points = _points(ds, dims)
    feasible = [p for p in points if _feasible(ds, p)]
    if not feasible:
        raise ValueError("no feasible configuration in the dataset")
    mean_cost = ds["cost"].mean([d for d in SAMPLE_DIMS if d in ds["cost"].dims])
    feasible.sort(key=lambda p: float(mean_cost.sel(p)))
    note = []
    if len(feasible) > limit:
        half = limit // 2
        note.append(
            f"{limit} of {len(feasible)} configurations: the {half} cheapest and the {half} dearest by mean cost"
        )
        cheap, dear = feasible[:half], feasible[-half:]
    else:
        cheap, dear = feasible, []
    if len(points) > len(feasible):
        note.append(f"{len(points) - len(feasible)} infeasible not shown")
    return cheap, dear, "; ".join(note)


def _log_worthy(values: np.ndarray, ratio: float = 20.0) -> bool:
    values = values[np.isfinite(values)]
    return values.size > 0 and values.min() > 0 and values.max() / values.min() > ratio


def _plain_log_axis(axis) -> None:
    """Log axis ticked at 1, 2, 5 x 10^k with plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _title(fig, what: str, detail: str) -> None:
    import textwrap

    width = int(fig.get_figwidth() * 10)  # characters of the 12-point subtitle that fit
    fig.suptitle(f"{what}\n" + textwrap.fill(detail, width, break_on_hyphens=False), fontsize=12)


# --------------------------------------------------------------------------- figures


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
    plt = _pyplot()
    from matplotlib.lines import Line2D

    others = [d for d in dims if d != x]
    combos = _points(ds, others)
    fixed_note = ""
    if len(combos) > MAX_LINES:
        from mcsim.analysis.compare import best

        try:
            optimum = best(ds, "cost")["configuration"]
        except ValueError:  # nothing can be ranked (all censored): the first combination
            optimum = combos[0]
        combos = [{d: optimum[d] for d in others}]
        fixed_note = (
            f"; {', '.join(f'{d}={optimum[d]}' for d in others)} fixed at the cost-optimal values "
            f"({len(_points(ds, others))} combinations in the file)"
        )
    # colour by the largest other dim, line style by the next (when it has at most 4 values)
    colour_dim = max(others, key=lambda d: ds.sizes[d]) if others and len(combos) > 1 else None
    style_dim = next((d for d in others if d != colour_dim and ds.sizes[d] <= 4), None) if colour_dim else None
    styles = ("-", "--", ":", "-.")
    markers = ("o", "s", "^", "D")

    xs = ds[x].values
    numeric = np.issubdtype(xs.dtype, np.number)
    positions = xs.astype(float) if numeric else np.arange(xs.size, dtype=float)
    panels = (("wall_time", "wall time"), ("energy", "energy"), ("cost", "cost"), ("ettr", "ETTR"))
    marks = {"infeasible": False, "censored": False}
    with _style():
        fig, axes = plt.subplots(2, 2, figsize=(11, 8.2), sharex=True, layout="constrained")
        handles = []
        for k, combo in enumerate(combos):
            if colour_dim and not [d for d in others if d not in (colour_dim, style_dim)]:
                colour_index = ds[colour_dim].values.tolist().index(combo[colour_dim])
            else:
                colour_index = k
            colour = f"C{colour_index % 10}"
            style_index = ds[style_dim].values.tolist().index(combo[style_dim]) if style_dim else 0
            line_style, marker = styles[style_index % 4], markers[style_index % 4]
            sub = ds.sel(combo) if combo else ds
            feasible = sub["feasible"].values.astype(bool) if "feasible" in sub else np.ones(xs.size, bool)
            censored = feasible & (sub["completed"].mean("run").values < 1.0 if "completed" in sub else False)
            marks["infeasible"] |= bool((~feasible).any())
            marks["censored"] |= bool(censored.any())
            for ax, (name, _) in zip(axes.flat, panels, strict=False):
                values = sub[name].values.astype(float) * _units(ds, name)[0]
                mean, low, high = np.full((3, xs.size), np.nan)
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
            handles.append(
                (
                    colour_index,
                    style_index,
                    Line2D(
                        [],
                        [],
                        color=colour,
                        linestyle=line_style,
                        marker=marker,
                        markersize=4,
                        label=config_label(combo, "mean"),
                    ),
                )
            )
        for ax, (name, title) in zip(axes.flat, panels, strict=False):
            ax.set_title(title)
            ax.set_ylabel(_label(ds, name) if name != "ettr" else "ETTR (ideal time / wall time)")
            lines = np.concatenate(
                [np.asarray(line.get_ydata(), float) for line in ax.get_lines() if line.get_marker() != "x"]
            )
            if name != "ettr" and _log_worthy(lines):
                ax.set_yscale("log")
                _plain_log_axis(ax.yaxis)
        for ax in axes[1]:
            if x == "gpus" and numeric and np.all(positions > 0):
                ax.set_xscale("log", base=2)
            ax.set_xticks(positions)
            ax.set_xticklabels([f"{v:,.0f}" if numeric and float(v).is_integer() else format_coordinate(v) for v in xs])
            ax.xaxis.set_minor_locator(plt.NullLocator())
            ax.set_xlabel(f"{'GPUs' if x == 'gpus' else x}" + (" (log scale)" if ax.get_xscale() == "log" else ""))
            if len(xs) > 10:
                ax.tick_params(axis="x", labelrotation=30)
        band = Line2D([], [], color="0.5", alpha=0.3, linewidth=8, label="5–95 % of runs")
        extra = []
        if marks["censored"]:
            extra.append(
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
            extra.append(
                Line2D(
                    [], [], linestyle="none", marker="x", markersize=7, color="0.3", label="infeasible (x on the axis)"
                )
            )
        title = " · ".join(others) if len(combos) > 1 else None
        # legend columns: one per colour, its line styles one under the other
        rows = ds.sizes[style_dim] if style_dim else max(1, -(-len(handles) // 4))
        handles = [h for _, _, h in sorted(handles, key=lambda item: item[:2])] + [band] + extra
        fig.legend(
            handles=handles, loc="outside lower center", ncols=-(-len(handles) // rows), title=title, frameon=False
        )
        _title(
            fig,
            f"Scaling with {'the number of GPUs' if x == 'gpus' else x}: {_scenario(ds)}",
            f"mean (line) and 5–95 % band over {ds.sizes['run']} runs per configuration{fixed_note}",
        )
    return fig


def _completed(ds: xr.Dataset, point: dict) -> float:
    """Share of the runs of ``point`` that completed (1 when the dataset does not say)."""
    return float(ds["completed"].sel(point).values.mean()) if "completed" in ds else 1.0


def _censored_text(share: float) -> str:
    return f" ({share:.0%} completed)" if share < 1.0 else ""


def spread_configurations(ds: xr.Dataset, variable: str, limit: int) -> tuple[list[dict], str]:
    """Up to ``limit`` feasible configurations spread evenly over the range of the mean of ``variable``.

    With more configurations than ``limit``, those whose mean ranks nearest to ``limit``
    evenly spaced ranks from the lowest to the highest are chosen (the extremes always),
    so the curves differ instead of crowding at one end. Returns the configurations,
    lowest mean first, and a note ("" when all are shown).
    """
    dims = sweep_dims(ds)
    points = [p for p in _points(ds, dims) if _feasible(ds, p)]
    if not points:
        raise ValueError("no feasible configuration in the dataset")
    means = [float(np.nanmean(ds[variable].sel(p).values.astype(float))) for p in points]
    order = [points[i] for i in np.argsort(means, kind="stable")]
    note = []
    if len(order) > limit:
        ranks = np.unique(np.round(np.linspace(0, len(order) - 1, limit)).astype(int))
        order = [order[i] for i in ranks]
        note.append(
            f"{len(order)} of {len(points)} configurations, spread evenly over the range of mean {_name(variable)}"
        )
    all_points = len(_points(ds, dims))
    if all_points > len(points):
        note.append(f"{all_points - len(points)} infeasible not shown")
    return order, "; ".join(note)


def plot_cdf(ds: xr.Dataset, variable: str = "wall_time"):
    """Empirical CDF of ``variable`` over runs, one curve per configuration.

    At most ``MAX_CURVES`` curves: with more configurations, ones spread evenly over
    the range of the mean of ``variable`` (:func:`spread_configurations`). A
    configuration with runs censored at ``max_wall_days`` carries its completed share
    in the legend (its censored runs sit at their truncated values).
    """
    _check_variable(ds, variable)
    points, note = spread_configurations(ds, variable, MAX_CURVES)
    plt = _pyplot()
    runs = ds.sizes["run"]
    dims = sweep_dims(ds)
    with _style():
        fig, ax = plt.subplots(figsize=(8.4, 6.0), layout="constrained")
        everything = []
        for k, point in enumerate(points):
            values = np.sort(_runs_of(ds, point, variable))
            values = values[np.isfinite(values)]
            everything.append(values)
            y = np.arange(1, values.size + 1) / max(values.size, 1)
            ax.step(
                np.concatenate([values[:1], values]),
                np.concatenate([[0.0], y]),
                where="post",
                color=f"C{k % 10}",
                linestyle="-" if k < 10 else (0, (4, 2)),
                linewidth=1.8,
                label=config_label(point, _scenario(ds)) + _censored_text(_completed(ds, point)),
            )
        if _log_worthy(np.concatenate(everything)):
            ax.set_xscale("log")
            _plain_log_axis(ax.xaxis)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(_label(ds, variable))
        ax.set_ylabel("fraction of runs ≤ x")
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.12),
            ncols=2 if len(points) > 3 else 1,
            frameon=False,
            title=(" · ".join(dims) + f" (lowest mean {_name(variable)} first)") if dims else None,
        )
        censored = float(np.mean([1.0 - _completed(ds, p) for p in points]))
        detail = f"{runs} runs" + (" per configuration" if dims else "")
        if note:
            detail += f"; {note}"
        if censored > 0:
            detail += f"; {censored:.1%} of runs censored at max_wall_days (at their truncated values)"
        _title(fig, f"Distribution of {_name(variable)}: {_scenario(ds)}", detail)
    return fig


def plot_pareto(ds: xr.Dataset, x: str = "wall_time", y: str = "cost"):
    """Every feasible configuration at its mean (x, y), 5–95 % bars, the Pareto front highlighted.

    The front comes from :func:`mcsim.analysis.pareto_front` (both objectives
    minimised, means over runs); its points are connected and labelled with
    their configuration and mean values.
    """
    from mcsim.analysis.compare import pareto_front

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
                f"({format_significant(row[0])} {x_unit}, "
                f"{format_significant(row[3])} {y_unit})".replace(" ,", ",").replace(" )", ")"),
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
    placed = []
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


def plot_breakdown(ds: xr.Dataset):
    """Where wall time and energy go, per configuration (means over runs).

    Left: stacked bars in days and MWh. Right: the same parts other than ideal
    compute (time) and compute (energy), as a share of the total, so small
    overheads stay readable. When the totals differ by more than ``MAX_TOTAL_RATIO``,
    the left panels show each configuration's parts as shares of its own total (the
    total written at the bar's end), so small configurations do not shrink to slivers.
    At most ``MAX_BARS`` configurations (the 8 cheapest and the 8 dearest by mean
    cost); one with censored runs carries its completed share in its label.
    """
    cheap, dear, note = _select(ds, MAX_BARS)
    plt = _pyplot()
    points = cheap + dear
    day, time_unit = _units(ds, "wall_time")
    energy_factor, energy_unit = _units(ds, "energy")

    def mean(point, name):
        return float(np.nanmean(ds[name].sel(point).values.astype(float)))

    time_rows, energy_rows = [], []
    for point in points:
        wall, lost, ckpt, rec, strag = (
            mean(point, n) * day
            for n in ("wall_time", "lost_time", "checkpoint_time", "recovery_time", "straggler_time")
        )
        time_rows.append([wall - lost - ckpt - rec - strag, strag, ckpt, rec, lost])
        energy_rows.append([mean(point, name) * energy_factor for name, _, _ in _ENERGY_PARTS])
    time_rows, energy_rows = np.array(time_rows), np.array(energy_rows)
    labels = [config_label(p, _scenario(ds)) + _censored_text(_completed(ds, p)) for p in points]
    n = len(points)
    rows = [
        (
            "Where wall time goes",
            f"mean wall time [{time_unit}]",
            "time other than ideal compute [% of wall time]",
            time_rows,
            [(label, colour) for label, colour in _TIME_PARTS],
            {"days": "d"}.get(time_unit, time_unit),
        ),
        (
            "Where energy goes",
            f"mean energy [{energy_unit}]",
            "energy other than compute [% of total energy]",
            energy_rows,
            [(label, colour) for _, label, colour in _ENERGY_PARTS],
            energy_unit,
        ),
    ]
    with _style():
        height = 2.2 + 2 * (0.9 + 0.27 * n)
        fig, axes = plt.subplots(
            2, 2, figsize=(13.5, height), sharey=True, layout="constrained", gridspec_kw={"width_ratios": (1.25, 1)}
        )
        positions = np.arange(n)
        for (title, absolute_label, share_label, data, parts, unit), (ax_abs, ax_share) in zip(
            rows, axes, strict=False
        ):
            totals = data.sum(axis=1)
            shares = 100 * data / totals[:, None]
            # totals over more than a factor MAX_TOTAL_RATIO: a linear axis would shrink the small
            # configurations to slivers, so each bar shows its own parts as shares of its total
            relative = _log_worthy(totals, MAX_TOTAL_RATIO)
            if relative:
                absolute_label = (
                    absolute_label.replace("mean ", "share of mean ").split(" [")[0]
                    + " [% of each configuration's total; total at the bar end]"
                )
            for ax, values, first in ((ax_abs, shares if relative else data, 0), (ax_share, shares, 1)):
                left = np.zeros(n)
                for k in range(first, len(parts)):
                    label, colour = parts[k]
                    ax.barh(
                        positions,
                        values[:, k],
                        left=left,
                        color=colour,
                        height=0.7,
                        label=label,
                        edgecolor="white",
                        linewidth=0.4,
                    )
                    left += values[:, k]
                ends = left
                texts = (
                    [f"{format_significant(t)} {unit}" for t in totals]
                    if first == 0
                    else [f"{s:.2g} %" if s < 10 else f"{s:.0f} %" for s in ends]
                )
                for pos, end, text in zip(positions, ends, texts, strict=False):
                    ax.text(end, pos, " " + text, va="center", ha="left", fontsize=8)
                ax.set_xlim(0, ends.max() * (1.35 if relative and first == 0 else 1.18) if ends.max() > 0 else 1)
                ax.grid(axis="y", visible=False)
            ax_abs.set_title(title)
            ax_abs.set_xlabel(absolute_label)
            ax_share.set_title(title.replace("Where", "Overheads: where") + " (share)")
            ax_share.set_xlabel(share_label)
            handles, names = ax_abs.get_legend_handles_labels()
            ax_share.legend(handles, names, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
            if dear:
                for ax in (ax_abs, ax_share):
                    ax.axhline(len(cheap) - 0.5, color="0.3", linestyle="--", linewidth=0.8)
        axes[0, 0].set_yticks(positions)
        axes[0, 0].set_yticklabels(labels)
        axes[0, 0].invert_yaxis()
        detail = (
            f"means over {ds.sizes['run']} runs per configuration, cheapest at the top"
            if len(points) > 1
            else f"means over {ds.sizes['run']} runs"
        )
        if note:
            detail += f"; {note} (dashed line between them)"
        _title(fig, f"Breakdown of wall time and energy: {_scenario(ds)}", detail)
    return fig


def figure_format(path: str | Path) -> str:
    """The image format that ``path``'s suffix names (``png`` when it has none).

    Raises
    ------
    ValueError
        The suffix names no format matplotlib can write (e.g. ``.nc``, ``.txt``).
    BackendUnavailable
        matplotlib is not installed.
    """
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError as err:
        raise BackendUnavailable("plots need matplotlib: pip install 'mcsim[plot]'") from err
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix not in formats:
        raise ValueError(
            f"expected a file name ending in an image format ({', '.join(sorted(formats))}), got .{suffix}"
        )
    return suffix


def save_figure(fig, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` atomically in the format its suffix names; returns the path.

    PNG (150 dpi) when the name has no suffix; any format matplotlib writes
    (png, pdf, svg, jpg, ...) by suffix; another suffix raises ``ValueError``
    (:func:`figure_format`). Written through :func:`mcsim.atomic.atomic_open`:
    a temporary file in the destination folder (created if needed), renamed
    over ``path`` only once complete.
    """
    path = Path(path)
    fmt = figure_format(path)
    with atomic_open(path) as handle:
        fig.savefig(handle, format=fmt, dpi=DPI)
    return path
