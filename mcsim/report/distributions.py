"""Per-configuration figures: distributions over runs (CDF) and where wall time and energy go.

:func:`plot_cdf` draws the empirical CDF of a variable, one curve per configuration
(at most ``MAX_CURVES``, spread over the range of the mean by
:func:`spread_configurations`); :func:`plot_breakdown` draws stacked bars of the parts
of wall time and energy (at most ``MAX_BARS`` configurations).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from mcsim.io.format import format_significant
from mcsim.io.variables import sweep_dims
from mcsim.report.style import (
    _censored_text,
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
    _select,
    _style,
    _title,
    _units,
    config_label,
)

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
_ENERGY_PARTS = (
    ("energy_compute", "compute", "C0"),
    ("energy_wait", "wait and communication", "C1"),
    ("energy_checkpoint", "checkpoint", "C2"),
    ("energy_recovery", "recovery", "C3"),
    ("energy_lost", "lost (rolled back)", "C4"),
    ("energy_network", "network links", "C5"),
    ("energy_node", "node overhead", "C7"),
)


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

    time_rows: list[list[float]] = []
    energy_rows: list[list[float]] = []
    for point in points:
        wall, lost, ckpt, rec, strag = (
            mean(point, n) * day
            for n in ("wall_time", "lost_time", "checkpoint_time", "recovery_time", "straggler_time")
        )
        time_rows.append([wall - lost - ckpt - rec - strag, strag, ckpt, rec, lost])
        energy_rows.append([mean(point, name) * energy_factor for name, _, _ in _ENERGY_PARTS])
    time_table, energy_table = np.array(time_rows), np.array(energy_rows)
    labels = [config_label(p, _scenario(ds)) + _censored_text(_completed(ds, p)) for p in points]
    n = len(points)
    rows = [
        (
            "Where wall time goes",
            f"mean wall time [{time_unit}]",
            "time other than ideal compute [% of wall time]",
            time_table,
            [(label, colour) for label, colour in _TIME_PARTS],
            {"days": "d"}.get(time_unit, time_unit),
        ),
        (
            "Where energy goes",
            f"mean energy [{energy_unit}]",
            "energy other than compute [% of total energy]",
            energy_table,
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
