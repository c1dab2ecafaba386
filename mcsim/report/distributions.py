"""Per-configuration figures: distributions over runs (CDF) and where wall time and energy go.

:func:`plot_cdf` draws the empirical CDF of a variable, one curve per configuration
(at most ``MAX_CURVES``, spread over the range of the mean by
:func:`spread_configurations`); :func:`plot_breakdown` draws stacked bars of the parts
of wall time and energy (at most ``MAX_BARS`` configurations).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import xarray as xr

from mcsim.io.format import format_significant
from mcsim.io.variables import sweep_dims
from mcsim.model.energy import ENERGY_PARTS
from mcsim.report import style

MAX_CURVES = 10  # plot_cdf: more configurations -> this many, spread over the range of the mean
MAX_BARS = 16  # plot_breakdown: more configurations -> the 8 cheapest and the 8 dearest
MAX_TOTAL_RATIO = 10.0  # plot_breakdown: totals spread wider than this -> parts as shares of each total

# components of wall time and energy: (label, colour); the same colour for the same kind of part
_TIME_PARTS = (
    ("ideal compute", "C0"),
    ("straggler", "C1"),
    ("checkpoint", "C2"),
    ("recovery", "C3"),
    ("lost (rolled back)", "C4"),
)
# each part of the facility energy (mcsim.model.energy.ENERGY_PARTS, in its order): label, colour
_ENERGY_LOOK = {
    "compute": ("compute", "C0"),
    "wait": ("wait and communication", "C1"),
    "checkpoint": ("checkpoint", "C2"),
    "recovery": ("recovery", "C3"),
    "lost": ("lost (rolled back)", "C4"),
    "network": ("network links", "C5"),
    "node": ("node overhead", "C7"),
}
_ENERGY_PARTS = tuple((f"energy_{part}", *_ENERGY_LOOK[part]) for part in ENERGY_PARTS)  # variable, label, colour


class _Panel(NamedTuple):
    """A row of the breakdown figure: the parts of one total, per configuration."""

    title: str
    absolute_label: str  # the x label of the left panel
    share_label: str  # the x label of the right panel
    data: np.ndarray  # configurations x parts, in shown units
    parts: list[tuple[str, str]]  # label, colour of each part
    unit: str  # written after each total


def spread_configurations(ds: xr.Dataset, variable: str, limit: int) -> tuple[list[dict], str]:
    """Up to ``limit`` feasible configurations spread evenly over the range of the mean of ``variable``.

    With more configurations than ``limit``, those whose mean ranks nearest to ``limit``
    evenly spaced ranks from the lowest to the highest are chosen (the extremes always),
    so the curves differ instead of crowding at one end. Returns the configurations,
    lowest mean first, and a note ("" when all are shown).
    """
    points = style.feasible_points(ds)
    means = [float(np.nanmean(ds[variable].sel(p).values.astype(float))) for p in points]
    order = [points[i] for i in np.argsort(means, kind="stable")]
    note = []
    if len(order) > limit:
        ranks = np.unique(np.round(np.linspace(0, len(order) - 1, limit)).astype(int))
        order = [order[i] for i in ranks]
        name = style.display_name(variable)
        note.append(f"{len(order)} of {len(points)} configurations, spread evenly over the range of mean {name}")
    all_points = len(style.sweep_points(ds, sweep_dims(ds)))
    if all_points > len(points):
        note.append(f"{all_points - len(points)} infeasible not shown")
    return order, "; ".join(note)


def _configuration_label(ds: xr.Dataset, point: dict) -> str:
    """A configuration's label, with its completed share when it has censored runs."""
    return style.config_label(point, style.scenario_name(ds)) + style.censored_text(style.completed_at(ds, point))


def plot_cdf(ds: xr.Dataset, variable: str = "wall_time"):
    """Empirical CDF of ``variable`` over runs, one curve per configuration.

    At most ``MAX_CURVES`` curves: with more configurations, ones spread evenly over
    the range of the mean of ``variable`` (:func:`spread_configurations`). A
    configuration with runs censored at ``max_wall_days`` carries its completed share
    in the legend (its censored runs sit at their truncated values).
    """
    style.check_variable(ds, variable)
    points, note = spread_configurations(ds, variable, MAX_CURVES)
    plt = style.pyplot()
    runs = ds.sizes["run"]
    dims = sweep_dims(ds)
    with style.house_style():
        fig, ax = plt.subplots(figsize=(8.4, 6.0), layout="constrained")
        everything = []
        for k, point in enumerate(points):
            values = np.sort(style.runs_of(ds, point, variable))
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
                label=style.config_label(point, style.scenario_name(ds))
                + style.censored_text(style.completed_at(ds, point)),
            )
        if style.log_worthy(np.concatenate(everything)):
            ax.set_xscale("log")
            style.plain_log_axis(ax.xaxis)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(style.axis_label(ds, variable))
        ax.set_ylabel("fraction of runs ≤ x")
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.12),
            ncols=2 if len(points) > 3 else 1,
            frameon=False,
            title=(" · ".join(dims) + f" (lowest mean {style.display_name(variable)} first)") if dims else None,
        )
        censored = float(np.mean([1.0 - style.completed_at(ds, p) for p in points]))
        detail = f"{runs} runs" + (" per configuration" if dims else "")
        if note:
            detail += f"; {note}"
        if censored > 0:
            detail += f"; {censored:.1%} of runs censored at max_wall_days (at their truncated values)"
        style.figure_title(fig, f"Distribution of {style.display_name(variable)}: {style.scenario_name(ds)}", detail)
    return fig


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
    cheap, dear, note = style.cheapest_and_dearest(ds, MAX_BARS)
    plt = style.pyplot()
    points = cheap + dear
    n = len(points)
    with style.house_style():
        height = 2.2 + 2 * (0.9 + 0.27 * n)
        fig, axes = plt.subplots(
            2, 2, figsize=(13.5, height), sharey=True, layout="constrained", gridspec_kw={"width_ratios": (1.25, 1)}
        )
        positions = np.arange(n)
        for panel, (ax_abs, ax_share) in zip(_panels(ds, points), axes, strict=False):
            _draw_panel(panel, ax_abs, ax_share, positions)
            if dear:
                for ax in (ax_abs, ax_share):
                    ax.axhline(len(cheap) - 0.5, color="0.3", linestyle="--", linewidth=0.8)
        axes[0, 0].set_yticks(positions)
        axes[0, 0].set_yticklabels([_configuration_label(ds, p) for p in points])
        axes[0, 0].invert_yaxis()
        detail = (
            f"means over {ds.sizes['run']} runs per configuration, cheapest at the top"
            if len(points) > 1
            else f"means over {ds.sizes['run']} runs"
        )
        if note:
            detail += f"; {note} (dashed line between them)"
        style.figure_title(fig, f"Breakdown of wall time and energy: {style.scenario_name(ds)}", detail)
    return fig


def _panels(ds: xr.Dataset, points: list[dict]) -> list[_Panel]:
    """The rows of the breakdown figure: the parts of wall time and of energy, per configuration."""
    day, time_unit = style.display_units(ds, "wall_time")
    energy_factor, energy_unit = style.display_units(ds, "energy")

    def mean(point: dict, name: str) -> float:
        return float(np.nanmean(ds[name].sel(point).values.astype(float)))

    time_rows: list[list[float]] = []
    energy_rows: list[list[float]] = []
    for point in points:
        wall, lost, ckpt, rec, strag = (
            mean(point, n) * day
            for n in ("wall_time", "lost_time", "checkpoint_time", "recovery_time", "straggler_time")
        )
        time_rows.append([wall - lost - ckpt - rec - strag, strag, ckpt, rec, lost])
        energy_rows.append([mean(point, name) * energy_factor for name, _, _ in _ENERGY_PARTS])
    return [
        _Panel(
            "Where wall time goes",
            f"mean wall time [{time_unit}]",
            "time other than ideal compute [% of wall time]",
            np.array(time_rows),
            list(_TIME_PARTS),
            {"days": "d"}.get(time_unit, time_unit),
        ),
        _Panel(
            "Where energy goes",
            f"mean energy [{energy_unit}]",
            "energy other than compute [% of total energy]",
            np.array(energy_rows),
            [(label, colour) for _, label, colour in _ENERGY_PARTS],
            energy_unit,
        ),
    ]


def _draw_panel(panel: _Panel, ax_abs, ax_share, positions: np.ndarray) -> None:
    """One row: the parts stacked (left; as shares of each total when the totals differ by more than
    ``MAX_TOTAL_RATIO``), and the parts other than the first as shares of the total (right)."""
    totals = panel.data.sum(axis=1)
    shares = 100 * panel.data / totals[:, None]
    # totals over more than a factor MAX_TOTAL_RATIO: a linear axis would shrink the small
    # configurations to slivers, so each bar shows its own parts as shares of its total
    relative = style.log_worthy(totals, MAX_TOTAL_RATIO)
    absolute_label = panel.absolute_label
    if relative:
        absolute_label = (
            absolute_label.replace("mean ", "share of mean ").split(" [")[0]
            + " [% of each configuration's total; total at the bar end]"
        )
    ends = _stacked(ax_abs, shares if relative else panel.data, panel.parts, 0, positions)
    _end_texts(ax_abs, positions, ends, [f"{format_significant(t)} {panel.unit}" for t in totals], relative)
    ends = _stacked(ax_share, shares, panel.parts, 1, positions)
    _end_texts(ax_share, positions, ends, [f"{s:.2g} %" if s < 10 else f"{s:.0f} %" for s in ends], False)
    ax_abs.set_title(panel.title)
    ax_abs.set_xlabel(absolute_label)
    ax_share.set_title(panel.title.replace("Where", "Overheads: where") + " (share)")
    ax_share.set_xlabel(panel.share_label)
    handles, names = ax_abs.get_legend_handles_labels()
    ax_share.legend(handles, names, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)


def _stacked(ax, values: np.ndarray, parts: list[tuple[str, str]], first: int, positions: np.ndarray) -> np.ndarray:
    """Horizontal bars of the parts from ``first`` on, stacked; returns where each bar ends."""
    left = np.zeros(len(positions))
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
    return left


def _end_texts(ax, positions: np.ndarray, ends: np.ndarray, texts: list[str], wide: bool) -> None:
    """``texts`` at the bars' ends, room for them on the x axis (more when ``wide``), no horizontal grid."""
    for pos, end, text in zip(positions, ends, texts, strict=False):
        ax.text(end, pos, " " + text, va="center", ha="left", fontsize=8)
    ax.set_xlim(0, ends.max() * (1.35 if wide else 1.18) if ends.max() > 0 else 1)
    ax.grid(axis="y", visible=False)
