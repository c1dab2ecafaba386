"""The text tables the command line prints: the summary of a result file and its sensitivity indices."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import xarray as xr

from mcsim.io.format import format_compact

# column title, variable, scale from the stored unit
_COLUMNS = (
    ("wall time [d]", "wall_time", 1 / 24),
    ("energy [MWh]", "energy", 1.0),
    ("cost [MUSD]", "cost", 1e-6),
    ("CO2 [t]", "co2", 1.0),
    ("failures", "n_failures", 1.0),
    ("ETTR", "ettr", 1.0),
)


def _pm(mean: float, half: float, scale: float) -> str:
    """``mean ± half`` in 4 and 2 significant digits; a half-width at the float round-off of
    the mean (identical runs: 1e-12 of it or less) prints as 0."""
    mean, half = mean * scale, half * scale
    if math.isfinite(half) and math.isfinite(mean) and abs(half) <= 1e-12 * abs(mean):
        half = 0.0
    return f"{format_compact(mean, 4)} ± {format_compact(half, 2) if half else '0'}"


def _sort_direction(name: str) -> float:
    from mcsim.io.variables import VARIABLES

    return -1.0 if VARIABLES[name].direction == "higher" else 1.0


def summary_table(ds: xr.Dataset, show_all: bool = False, sort: str | None = None) -> str:
    """Mean and 95 % confidence interval per configuration, as aligned text.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`mcsim.simulate` (checked by :func:`mcsim.summary.check_results`).
    show_all : bool
        Every configuration; otherwise, with more than ``MAX_TABLE_ROWS``, the 5 best and
        the 5 worst completed ones by ``sort`` (cost by default).
    sort : str, optional
        Per-run variable whose mean orders the rows, best first in its registered
        direction. Configurations with censored runs (values truncated at
        ``max_wall_days``) follow the completed ones, by completed share; infeasible
        ones come last.

    Raises
    ------
    ValueError
        ``sort`` is not a per-run variable.
    """
    from mcsim.analysis.summary import summarize
    from mcsim.io import variables
    from mcsim.io.format import format_coordinate
    from mcsim.io.variables import PER_RUN

    if sort is not None and sort not in PER_RUN:
        raise ValueError(f"--sort: expected a per-run variable ({', '.join(PER_RUN)}), got {sort!r}")
    stats = summarize(ds)
    sweep_dims = variables.sweep_dims(ds)
    draws = ds.sizes.get("draw", 0)
    key_name = sort or "cost"
    sign = _sort_direction(key_name)
    uncertain_columns = _uncertain_columns(key_name) if draws else []
    if draws:
        stats, decision_columns = _with_decisions(ds, stats, key_name)
        uncertain_columns += decision_columns
    header = ["configuration"] + [c[0] for c in _COLUMNS] + [c[0] for c in uncertain_columns] + ["completed"]
    entries = []  # (group, key, row): group 0 completed, 1 censored, 2 infeasible
    for index in np.ndindex(*(ds.sizes[d] for d in sweep_dims)):
        point = dict(zip(sweep_dims, index, strict=False))
        sel = stats.isel(point)
        if sweep_dims:
            label = " ".join(f"{d}={format_coordinate(ds[d].values[i])}" for d, i in point.items())
        else:
            label = ds.attrs.get("scenario_name", "scenario")
        if not bool(sel["feasible"].all()):
            entries.append((2, 0.0, [label, f"infeasible: {_infeasible_text(sel)}"]))
            continue
        row = [label]
        for _, name, scale in _COLUMNS:
            mean = float(sel[name].sel(stat="mean"))
            row.append(_pm(mean, float(sel[name].sel(stat="ci95_high")) - mean, scale))
        row += [cell(sel) for _, cell in uncertain_columns]
        share = float(sel["completed"].sel(stat="mean"))
        row.append(f"{share:.1%}" + (" *" if share < 1.0 else ""))
        if share < 1.0:
            entries.append((1, -share, row))
        else:
            entries.append((0, sign * float(sel[key_name].sel(stat="mean")), row))
    counts = [sum(1 for e in entries if e[0] == g) for g in range(3)]
    ranked = sorted(entries, key=lambda e: (e[0], e[1]))
    note = []
    if show_all or len(entries) <= MAX_TABLE_ROWS:
        shown = ranked if sort else entries
    else:
        done = [e for e in ranked if e[0] == 0]
        shown = done if len(done) <= 10 else done[:5] + done[-5:]
        left = len(entries) - len(shown)
        what = (
            f"the 5 best and the 5 worst by mean {key_name}"
            if len(done) > 10
            else f"the {len(done)} whose runs all completed, by mean {key_name}"
        )
        note = [
            f"{len(entries)} configurations ({counts[0]} completed, {counts[1]} with censored runs, "
            f"{counts[2]} infeasible): {what}; {left} not shown (--all shows every one; all are in the file)"
        ]
    rows = [e[2] for e in shown]
    widths = [max(len(r[k]) for r in [header] + [r for r in rows if len(r) == len(header)]) for k in range(len(header))]
    lines = note + ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)).rstrip()]
    for row in rows:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
            if len(row) == len(header)
            else "  ".join(row)
        )
    runs = ds.sizes["run"]
    if draws:
        lines.append(
            f"mean ± half-width of the 95 % confidence interval of the mean over {draws} parameter draws "
            f"x {runs} runs (from the spread of the draw means; seed {ds.attrs.get('seed')}, mode "
            f"{ds.attrs.get('mode')}); {key_name} 5-95 %: predictive interval over draws and runs; "
            f"epistemic: share of its variance due to the uncertain inputs "
            f"({ds.attrs.get('uncertain_inputs', '')}), the rest is chance within a draw"
            + (
                f"; P(best): share of draws in which its mean {key_name} over the draw's runs is the best, "
                f"regret: mean over draws of what it loses against the draw's best (docs/model.md)"
                if "p_best" in stats
                else ""
            )
        )
    else:
        lines.append(
            f"mean ± half-width of the 95 % confidence interval of the mean over {runs} runs "
            f"(seed {ds.attrs.get('seed')}, mode {ds.attrs.get('mode')})"
        )
    if counts[1]:
        lines.append(
            "* runs censored at max_wall_days: time, energy and cost are truncated (lower bounds), "
            "so the configuration is never ranked (best, Pareto front, report)"
        )
    lines += _breakdown_lines(stats, sweep_dims)
    return "\n".join(lines)


MAX_TABLE_ROWS = 16


def _infeasible_text(sel: xr.Dataset) -> str:
    """Why a configuration is infeasible (in how many draws, when it has draws)."""
    feasible = np.asarray(sel["feasible"].values, dtype=bool).ravel()
    reasons = [str(r) for r in np.asarray(sel["infeasible_reason"].values, dtype=object).ravel() if str(r)]
    reason = reasons[0] if reasons else "unknown"
    return reason if feasible.size == 1 else f"{reason} (in {int((~feasible).sum())} of {feasible.size} draws)"


def _uncertain_columns(name: str) -> list[tuple[str, Callable[[xr.Dataset], str]]]:
    """Columns of the summary table with parameter draws: ``name``'s predictive 5-95 % and epistemic share."""
    title, scale = next(((t, k) for t, n, k in _COLUMNS if n == name), (name, 1.0))
    unit = title[title.index("[") :] if "[" in title else ""
    base = title[: title.index("[")].strip() if "[" in title else title

    def interval(sel: xr.Dataset) -> str:
        low, high = (float(sel[name].sel(stat=s)) * scale for s in ("p5", "p95"))
        return f"{format_compact(low, 4)} to {format_compact(high, 4)}"

    def share(sel: xr.Dataset) -> str:
        value = float(sel[name].sel(stat="epistemic_share"))
        return f"{value:.0%}" if math.isfinite(value) else "-"

    return [(f"{base} 5-95 % {unit}".strip(), interval), (f"{base} epistemic", share)]


def _with_decisions(
    ds: xr.Dataset, stats: xr.Dataset, name: str
) -> tuple[xr.Dataset, list[tuple[str, Callable[[xr.Dataset], str]]]]:
    """``stats`` with ``name``'s P(best) and expected regret over draws, and their columns (none when
    ``name`` cannot be ranked: no direction, or no configuration with all its runs completed)."""
    from mcsim.analysis.compare import decision_table

    try:
        table = decision_table(ds, name)
    except ValueError:
        return stats, []
    stats = stats.assign(p_best=table["p_best"], expected_regret=table["expected_regret"])
    title, scale = next(((t, k) for t, n, k in _COLUMNS if n == name), (name, 1.0))
    unit = title[title.index("[") :] if "[" in title else ""
    base = title[: title.index("[")].strip() if "[" in title else title

    def p_best(sel: xr.Dataset) -> str:
        value = float(sel["p_best"])
        return f"{value:.0%}" if math.isfinite(value) else "-"

    def regret(sel: xr.Dataset) -> str:
        value = float(sel["expected_regret"])
        return format_compact(value * scale, 3) if math.isfinite(value) else "-"

    return stats, [(f"P(best {base})", p_best), (f"{base} regret {unit}".strip(), regret)]


def _breakdown_lines(stats: xr.Dataset, sweep_dims: list[str]) -> list[str]:
    """Mean energy breakdown, cost and carbon split, per configuration (first 12)."""
    from mcsim.io.format import format_coordinate
    from mcsim.model.energy import ENERGY_PARTS

    if "energy_compute" not in stats or int(np.prod([stats.sizes[d] for d in sweep_dims])) > MAX_TABLE_ROWS:
        return []
    lines = ["energy breakdown [MWh] (facility; parts add up to the total), cost [MUSD] and CO2 [t] splits:"]
    shape = tuple(stats.sizes[d] for d in sweep_dims)
    for n, index in enumerate(np.ndindex(*shape)):
        if n == 12:
            lines.append(f"  ... {int(np.prod(shape)) - 12} more configurations in the file")
            break
        point = stats.isel(dict(zip(sweep_dims, index, strict=False))).sel(stat="mean")
        if not bool(point["feasible"].all()):  # all draws, with parameter draws
            continue
        label = (
            " ".join(f"{d}={format_coordinate(stats[d].values[i])}" for d, i in zip(sweep_dims, index, strict=False))
            or "all runs"
        )
        parts = "  ".join(f"{k} {format_compact(float(point[f'energy_{k}']), 4)}" for k in ENERGY_PARTS)
        lines.append(
            f"  {label}: {parts}  = {format_compact(float(point['energy']), 5)}"
            f"  (GPUs alone, IT: {format_compact(float(point['energy_gpu']), 4)})"
        )
        lines.append(
            f"  {' ' * len(label)}  cost allocation {format_compact(float(point['cost_allocation']) / 1e6, 4)}"
            f" + electricity {format_compact(float(point['cost_electricity']) / 1e6, 4)};"
            f" CO2 operational {format_compact(float(point['co2_operational']), 4)}"
            f" + embodied {format_compact(float(point['co2_embodied']), 4)}"
        )
    return lines


def sensitivity_table(ds: xr.Dataset, output: str = "cost") -> str:
    """The inputs of a result with parameter draws, ranked by their Sobol indices, as text.

    Raises
    ------
    ValueError
        No parameter draws, or ``output`` is not a per-run variable.
    """
    from mcsim.analysis.sensitivity import sensitivity
    from mcsim.io.format import format_coordinate

    result = sensitivity(ds, output)
    sweep_dims = [d for d in result["rank"].dims if d != "input"]
    method = result.attrs["method"]
    names = ("S1", "ST") if method == "sobol" else ("S1", "delta")
    lines = []
    for index in np.ndindex(*(result.sizes[d] for d in sweep_dims)):
        point = result.isel(dict(zip(sweep_dims, index, strict=False)))
        label = " ".join(
            f"{d}={format_coordinate(result[d].values[i])}" for d, i in zip(sweep_dims, index, strict=False)
        )
        lines.append(f"{label or ds.attrs.get('scenario_name', 'scenario')}:")
        order = np.argsort(point["rank"].values)
        width = max(len(str(k)) for k in point["input"].values)
        for i in order:
            cells = [
                f"{n} {float(point[n][i]):.3f} [{float(point[f'{n}_low'][i]):.3f}, {float(point[f'{n}_high'][i]):.3f}]"
                for n in names
            ]
            lines.append(
                f"  {int(point['rank'][i])}. {str(point['input'].values[i]).ljust(width)}  " + "  ".join(cells)
            )
    how = (
        "first-order (S1) and total (ST) Sobol indices from the Saltelli design"
        if method == "sobol"
        else f"first-order index (S1) and delta measure from the given {result.attrs['design']} draws "
        '(a total index needs run.design = "saltelli")'
    )
    lines.append(
        f"{how} of the mean {output} per draw over {result.attrs['draws']} draws, "
        "[95 % bootstrap interval]; 1 = most influential"
    )
    if result.attrs.get("correlated_inputs"):
        lines.append(
            f"correlated inputs: {', '.join(result.attrs['correlated_inputs'].split())}; each one's S1 and "
            "delta include the effect it carries through the others, so they overlap and do not add up"
        )
    return "\n".join(lines)
