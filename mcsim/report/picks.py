"""The best configurations of a result report: the picks, the Pareto front, the cheapest within a deadline.

The picks are :func:`mcsim.analysis.ranking.best` of cost, energy and wall time: a pick that differs
from an earlier one is compared with it by :func:`mcsim.analysis.compare.paired_difference` and called
equivalent when the CI of the difference contains 0 (:func:`picks_section`). The Pareto front of
(wall time, cost) is :func:`mcsim.analysis.ranking.pareto_front` (:func:`pareto_section`). When a
deadline is given (``mcsim report --deadline DAYS [--probability P]``; none is invented), the
cheapest configuration that finishes within it, :func:`mcsim.analysis.deadline.cheapest_within`, or
the configuration that came closest (:func:`deadline_section`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from mcsim.analysis.compare import paired_difference
from mcsim.analysis.configurations import eligible
from mcsim.analysis.deadline import PROBABILITY, cheapest_within
from mcsim.analysis.ranking import pareto_front
from mcsim.errors import NoneQualifies
from mcsim.io.format import format_coordinate, format_significant
from mcsim.io.variables import sweep_dims
from mcsim.report.markdown import QUANTITIES, configuration_table, configuration_text, decimals, inert, over_text

PICKS = (
    ("Cost-optimal", "cost", "lowest mean cost"),
    ("Energy-optimal", "energy", "lowest mean energy"),
    ("Fastest", "wall_time", "lowest mean wall time"),
)
# variable -> (its name in a sentence, its unit, factor from the stored unit)
_SHOWN = {name: (title.split(" [")[0], title.split("[")[1].rstrip("]"), scale) for name, title, scale in QUANTITIES}
# the Pareto table's columns: variable, factor from the stored unit
_PARETO_COLUMNS = (("wall_time", 1 / 24), ("cost", 1e-6), ("energy", 1.0))


def _difference_text(ds: xr.Dataset, record: dict, other: dict, objective: str) -> str:
    """Paired difference of ``objective`` between two picks, and whether it is within the uncertainty."""
    diff = paired_difference(ds, record["configuration"], other["configuration"], objective)
    title, unit, scale = _SHOWN[objective]
    mean, (low, high) = diff["mean"] * scale, (v * scale for v in diff["ci95"])
    d = decimals((high - low) / 2)
    text = f"{title} {mean:+,.{d}f} {unit} [{low:+,.{d}f}, {high:+,.{d}f}]"
    if low <= 0.0 <= high:
        text += " — equivalent within the uncertainty (the 95 % CI of the paired difference contains 0)"
    return text


def picks_section(ds: xr.Dataset, records: dict) -> list[str]:
    """One subsection per pick; a pick that differs from an earlier one is compared with it on paired runs."""
    lines = []
    for k, (title, objective, meaning) in enumerate(PICKS):
        record = records[objective]
        earlier = [(t, o) for t, o, _ in PICKS[:k]]
        same = next((t for t, o in earlier if records[o]["configuration"] == record["configuration"]), None)
        lines += [
            f"### {title}: {configuration_text(record['configuration'])}",
            "",
            f"The {meaning}" + (f": the same configuration as the {same.lower()} one above." if same else "."),
            "",
        ]
        if not same:
            lines += configuration_table(ds, record["configuration"]) + [""]
            lines += _comparisons(ds, records, objective, earlier)
    return lines


def _comparisons(ds: xr.Dataset, records: dict, objective: str, earlier: list[tuple[str, str]]) -> list[str]:
    """The pick of ``objective`` against each different earlier pick, on the objectives of both."""
    lines: list[str] = []
    compared = []
    for other_title, other in earlier:
        configuration = records[other]["configuration"]
        if configuration == records[objective]["configuration"] or configuration in compared:
            continue
        compared.append(configuration)
        names = [objective] + [o for t, o in earlier if records[o]["configuration"] == configuration]
        parts = [_difference_text(ds, records[objective], records[other], name) for name in names]
        lines += [
            f"Against the {other_title.lower()} configuration ({configuration_text(configuration)}), mean of "
            "the paired differences over runs with its 95 % CI: " + "; ".join(parts) + ".",
            "",
        ]
    return lines


def pareto_section(ds: xr.Dataset) -> list[str]:
    """The section "Pareto front of wall time and cost": each configuration on it, fastest first."""
    front = pareto_front(ds, ("wall_time", "cost"))
    dims = sweep_dims(ds)
    points = [
        {d: ds[d].values[i].item() for d, i in zip(dims, index, strict=False)}
        for index in np.ndindex(*front.shape)
        if bool(front.values[index])
    ]
    rows = [_pareto_row(ds, p, dims) for p in points]
    header = ([inert(d) for d in dims] or ["configuration"]) + ["wall time [days]", "cost [MUSD]", "energy [MWh]"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(dims or [1]) + "---:|---:|---:|"]
    for _, cells in sorted(rows, key=lambda r: r[0]):
        lines.append("| " + " | ".join(cells if dims else ["the single configuration"] + cells) + " |")
    return [
        "## Pareto front of wall time and cost",
        "",
        f"The feasible configurations that no other beats on both mean wall time and mean cost "
        f"({len(rows)} of the {int(eligible(ds).sum())} feasible configurations whose runs all "
        "completed), fastest first; "
        f"mean (5th – 95th percentile over {over_text(ds)}).",
        "",
    ] + lines


def _pareto_row(ds: xr.Dataset, point: dict, dims: list[str]) -> tuple[float, list[str]]:
    """(mean wall time, the cells of the configuration's row) of the Pareto table."""
    one = ds.sel(point) if point else ds
    wall, cost, energy = (one[n].values.astype(float) * s for n, s in _PARETO_COLUMNS)
    ranges = [
        f"{format_significant(v.mean(), 4)} ({format_significant(np.percentile(v, 5), 4)} – "
        f"{format_significant(np.percentile(v, 95), 4)})"
        for v in (wall, cost)
    ]
    cells = [inert(format_coordinate(point[d])) for d in dims]
    return wall.mean(), cells + ranges + [format_significant(energy.mean())]


def deadline_section(ds: xr.Dataset, days: float | None, probability: float) -> list[str]:
    """The section "Cheapest configuration within a deadline" (a pointer to ``--deadline`` without one)."""
    lines = ["## Cheapest configuration within a deadline", ""]
    if days is None:
        return lines + [
            "No deadline given: `mcsim report FILE --deadline DAYS [--probability P]` (or "
            "`mcsim.report(..., deadline=DAYS)`) adds the cheapest configuration that finishes within DAYS "
            f"with probability at least P (default {PROBABILITY:g}).",
        ]
    pooled = ", counting the runs of all parameter draws together (the predictive probability)"
    lines += [
        f"Deadline D = {days:g} days (given). A configuration qualifies when at least {100 * probability:g} % of "
        "its runs complete within D (runs stopped at the wall-time limit count as late)"
        + (pooled if "draw" in ds.dims else "")
        + ".",
        "",
    ]
    try:
        pick = cheapest_within(ds, days, probability)
    except NoneQualifies as err:
        return lines + _none_qualifies(err, days, probability)
    share = _share_text(ds, pick, probability)
    lines += [
        f"The cheapest configuration that finishes within {days:g} days with probability ≥ {probability:g}: "
        f"**{configuration_text(pick['configuration'])}**; it finishes in time in {share}.",
        "",
    ]
    return lines + configuration_table(ds, pick["configuration"])


def _none_qualifies(err: NoneQualifies, days: float, probability: float) -> list[str]:
    """No configuration finishes in time: which came closest, with its probability."""
    lines = [f"**No configuration finishes within {days:g} days with probability ≥ {probability:g}.**"]
    if err.closest is not None:
        low, high = err.closest["p_within_ci95"]
        lines += [
            "",
            f"The closest is {configuration_text(err.closest['configuration'])}: it finishes in time with probability "
            f"{100 * err.closest['p_within']:.1f} % (95 % interval {100 * low:.1f} – {100 * high:.1f} %).",
        ]
    return lines


def _share_text(ds: xr.Dataset, pick: dict, probability: float) -> str:
    """The pick's share of runs finishing in time, with its interval (and, with draws, the share of draws)."""
    low, high = pick["p_within_ci95"]
    runs = ds.sizes["run"] * ds.sizes.get("draw", 1)
    share = (
        (f"all {runs:,} of its runs" if pick["p_within"] == 1.0 else f"{100 * pick['p_within']:.1f} % of its runs")
        + f" (95 % interval of the probability: {100 * low:.1f} – {100 * high:.1f} %, Wilson"
        + (", the draws as the independent units" if "draw" in ds.dims else "")
        + ")"
    )
    if "draw" in ds.dims:
        meet_low, meet_high = pick["draws_meeting_ci95"]
        share += (
            f", over the {ds.sizes['draw']:,} parameter draws and their runs; in "
            f"{100 * pick['draws_meeting']:.1f} % of the draws ({100 * meet_low:.1f} – {100 * meet_high:.1f} %) "
            f"its own probability reaches {probability:g}"
        )
    return share
