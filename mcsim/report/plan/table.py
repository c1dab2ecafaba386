"""What ``mcsim plan`` prints: the finalists against the recommendation, and the claim the plan makes.

:func:`plan_table` lists the recommendation, then the other finalists by their paired objective
against it, and the line of the recommendation with its probability of correct selection;
:func:`screen_claim` is the screen's part of that claim (what was never simulated, the closest, the
error the margin covered), which the plan report repeats.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from mcsim.io.units import format_readable
from mcsim.planning.dataset import layout_label
from mcsim.planning.pool import missed_text
from mcsim.planning.screen import KEPT
from mcsim.report.plan.calibration import pilot_bound, pilot_claim
from mcsim.report.plan.finalists import (
    equivalent_finalists,
    indifference_zone,
    objective_unit,
    ranked_finalists,
    recommended_finalist,
)
from mcsim.report.tables import borrowed_lines

LEFT_OUT = 12  # the rejection code of a candidate left out of a full pool (mcsim.planning.screen.REJECTIONS)


def plan_table(ds: xr.Dataset, rows: int = 8) -> str:
    """The recommendation, then the other finalists by their paired objective against it, as text."""
    unit = objective_unit(ds)
    reference = int(ds.attrs.get("reference_candidate", -1))
    own = (
        ""
        if reference < 0 or reference not in ds["finalist_candidate"].values
        else ", and the plan file's own layout (marked +)"
    )
    lines = [
        f"{int((ds['rejection'] == KEPT).sum())} finalists of {ds.sizes['candidate']:,} candidates "
        f"({ds.attrs['candidates_enumerated']:,} combinations searched){own}; objective {ds.attrs['objective']}"
        f"{f' [{unit[1]}]' if unit[1] else ''}, mean ± 95 % half-width over the runs simulated:"
    ]
    lines += [_finalist_line(ds, k, reference, unit[0]) for k in _table_order(ds, rows, reference)]
    lines.append(
        "  * on the Pareto front of wall time, cost and energy among the finalists"
        + ("; + the plan file's own layout" if own else "")
    )
    lines.append(_recommended_line(ds))
    near = equivalent_finalists(ds)
    if near:
        lines.append(_equivalent_line(ds, near, unit))
    lines += borrowed_lines(ds)  # what the plan file's scenario borrows ([provenance])
    claim = screen_claim(ds)
    return "\n".join([*lines, claim] if claim else lines)


def _table_order(ds: xr.Dataset, rows: int, reference: int) -> list[int]:
    """The finalists shown, in order: the ranked ones, then those dropped (they missed a constraint when
    simulated) by their objective, ``rows`` in all, and the plan file's own layout always."""
    ranked = ranked_finalists(ds)
    objective = ds["finalist_objective"].values
    rest = [k for k in np.argsort(np.where(np.isnan(objective), np.inf, objective), kind="stable") if k not in ranked]
    order = [*ranked, *rest][:rows]
    own_row = np.flatnonzero(ds["finalist_candidate"].values == reference)
    if own_row.size and int(own_row[0]) not in order:
        order.append(int(own_row[0]))
    return order


def _finalist_line(ds: xr.Dataset, k: int, reference: int, factor: float) -> str:
    """One finalist: mean ± half-width, screen estimate (times ``factor``: in the table's unit), runs,
    layout, marks (* Pareto, + own layout) and why it was dropped."""
    index = int(ds["finalist_candidate"][k])
    mark = (" *" if bool(ds["pareto"][k]) else "") + (" +" if index == reference else "")
    dropped = str(ds["finalist_dropped"].values[k])
    note = f" ({missed_text(dropped)})" if dropped else ""
    return (
        f"  {format_readable(float(ds['finalist_objective'][k]) * factor, 5)}"
        f" ± {format_readable(float(ds['finalist_half_width'][k]) * factor, 2)}"
        f"  screen {format_readable(float(ds['screen_objective'][index]) * factor, 5)}"
        f"  runs {int(ds['finalist_runs'][k]):,}"
        f"  {layout_label(ds, index)}{mark}{note}"
    )


def _recommended_line(ds: xr.Dataset) -> str:
    """The recommendation, its probability of correct selection and whether the selection was decided."""
    selection_decided = bool(ds.attrs.get("selection_decided", bool(ds["decided"])))
    decided = (
        "decided" if bool(ds["decided"]) else "NOT decided" + ("" if selection_decided else " within the run budget")
    )
    simulated = f" among the {int(ds.attrs['candidates_simulated'])} simulated" if "pool_closed" in ds.attrs else ""
    return (
        f"recommended: {layout_label(ds, int(ds['recommended']))}; P(correct selection) "
        f"{'>= ' if selection_decided else '~ '}{float(ds['pcs']):.3f} ({decided}){simulated}; "
        f"{ds.attrs['selection_reason']}"
    )


def _equivalent_line(ds: xr.Dataset, near: list[tuple[int, float, float]], unit: tuple[float, str]) -> str:
    """The first three finalists within the indifference zone, with their paired objective difference
    (in the table's ``unit``)."""
    factor, shown = unit

    def signed(value: float) -> str:
        return ("+" if value >= 0 else "") + format_readable(value * factor, 4)

    return (
        f"equivalent within the indifference zone ({format_readable(indifference_zone(ds) * factor, 4)}"
        f"{f' {shown}' if shown else ''}): "
        + "; ".join(f"{layout_label(ds, int(ds['finalist_candidate'][k]))} ({signed(diff)})" for k, diff, _ in near[:3])
        + (f"; and {len(near) - 3} more (mcsim report)" if len(near) > 3 else "")
    )


def screen_claim(ds: xr.Dataset) -> str:
    """One line: the screen's part of the claim (what was never simulated, the closest, the error the margin
    covered; docs/model.md §9, "Pool"); "" for files written before the pool."""
    if "pool_closed" not in ds.attrs:
        return ""
    a = ds.attrs
    gap = float(a["closest_never_simulated_gap"])
    closest = (
        f" (the closest screen estimate {100 * gap:+.2g} % against the recommendation's simulated mean)"
        if np.isfinite(gap)
        else ""
    )
    line = (
        f"screen's part: {int(a['candidates_simulated'])} candidates simulated, "
        f"{int(a['candidates_never_simulated']):,} never simulated{closest}; {_margin_text(ds)}{pilot_claim(ds)}"
    )
    if not int(a["pool_closed"]):
        line += (
            f"; NOT decided: the pool of {int(a['pool_size'])} simulated candidates was full while "
            f"{int(a['candidates_left_out'])} never simulated could be better by their screen estimates "
            f"(rejection code {LEFT_OUT}; the closest: {_closest_left_out(ds)}): raise plan.pool"
        )
    return line


def _margin_text(ds: xr.Dataset) -> str:
    """Whether the screen's margin covered the screen error measured (on the simulated candidates and by the
    pilot), or how far the plan widened it."""
    a = ds.attrs
    errors = ", ".join(
        f"{name} {100 * float(a[key]):.2g} %"
        for name, key in (
            ("objective", "screen_error"),
            ("deadline", "screen_error_deadline"),
            ("budget", "screen_error_budget"),
        )
        if np.isfinite(float(a.get(key, np.nan)))
    )
    pilot = pilot_bound(ds)
    if np.isfinite(pilot):
        errors += f"{', ' if errors else ''}the pilot's error bound {100 * pilot:.2g} %"
    margin, used = float(a["margin"]), float(a["screen_margin_used"])
    if used <= margin:
        return f"the {100 * margin:g} % margin covered the measured screen error ({errors or 'none measured'})"
    return (
        f"the measured screen error ({errors}) exceeded the {100 * margin:g} % margin: the plan widened it to "
        f"{100 * used:.3g} % and simulated the candidates that could then be better"
    )


def _closest_left_out(ds: xr.Dataset, shown: int = 3) -> str:
    """The ``shown`` candidates left out of the full pool of least screen objective, each with its gap to the
    recommendation's simulated mean."""
    left = np.flatnonzero(ds["rejection"].values == LEFT_OUT)
    objective = ds["screen_objective"].values
    best = float(ds["finalist_objective"][recommended_finalist(ds)])
    closest = left[np.argsort(objective[left], kind="stable")][:shown]
    return "; ".join(
        f"{layout_label(ds, int(i))} ({100 * (objective[i] / best - 1):+.2g} %)" if best else layout_label(ds, int(i))
        for i in closest
    )
