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


def summary_table(
    ds: xr.Dataset,
    show_all: bool = False,
    sort: str | None = None,
    deadline: float | None = None,
    probability: float = 0.9,
) -> str:
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
    deadline : float, optional
        A deadline [days]: adds each configuration's probability of finishing within
        it (:func:`mcsim.analysis.prob_within`) and a line naming the cheapest
        configuration that does so with ``probability`` (or the closest one).
    probability : float
        Required probability of finishing within ``deadline``, in (0, 1).

    Raises
    ------
    ValueError
        ``sort`` is not a per-run variable, or ``deadline`` / ``probability`` out of range.
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
    deadline_lines: list[str] = []
    if deadline is not None:
        stats, deadline_column, deadline_lines = _with_deadline(ds, stats, deadline, probability)
        uncertain_columns += deadline_column
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
    lines += deadline_lines
    lines += _breakdown_lines(stats, sweep_dims)
    if layout := layout_note(ds):
        lines.append(layout)
    return "\n".join(lines)


def _with_deadline(
    ds: xr.Dataset, stats: xr.Dataset, days: float, probability: float
) -> tuple[xr.Dataset, list[tuple[str, Callable[[xr.Dataset], str]]], list[str]]:
    """``stats`` with the probability of finishing within ``days``, its column, and the line of the pick."""
    from mcsim.analysis.configurations import check_probability
    from mcsim.analysis.deadline import cheapest_within, prob_within
    from mcsim.errors import NoneQualifies
    from mcsim.io.format import format_coordinate

    probability = check_probability(probability)
    table = prob_within(ds, days)
    stats = stats.assign(p_within=table["p_within"])

    def p_within(sel: xr.Dataset) -> str:
        value = float(sel["p_within"])
        return f"{value:.1%}" if math.isfinite(value) else "-"

    try:
        pick = cheapest_within(ds, days, probability)
    except NoneQualifies as err:
        line = f"deadline {days:g} days: {err}"
    else:
        low, high = pick["p_within_ci95"]
        where = " ".join(f"{d}={format_coordinate(v)}" for d, v in pick["configuration"].items())
        line = (
            f"deadline {days:g} days: the cheapest configuration finishing in time with probability >= "
            f"{probability:g} is {where or 'the single configuration'} (probability {pick['p_within']:.3g}, "
            f"95 % interval {low:.3g} - {high:.3g}; mean cost {format_compact(pick['mean'] / 1e6, 4)} MUSD)"
        )
    return stats, [(f"P(<= {days:g} d)", p_within)], [line]


MAX_TABLE_ROWS = 16

# (table, key, label) of the choices a scenario fixes and `mcsim plan` searches
_LAYOUT_KEYS = (
    ("hardware", "gpu", "GPU"),
    ("parallelism", "gpus", "GPUs"),
    ("parallelism", "tp", "tp"),
    ("parallelism", "pp", "pp"),
    ("checkpoint", "strategy", "checkpoint strategy"),
    ("checkpoint", "interval", "checkpoint interval"),
)


def _layout_text(key: str, value: object) -> str:
    from mcsim.scenario.schema import Interval

    if key == "interval":
        try:
            return Interval.from_toml(value, {}, "", key).label
        except ValueError:
            return str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def layout_assumptions(ds: xr.Dataset) -> tuple[list[tuple[str, str]], list[str]] | None:
    """The layout a result answers for: ``([(label, value), ...] fixed, [labels swept])``.

    Read from the scenario the file records (``scenario_toml``, overrides applied): the
    GPU type, GPU count, tensor and pipeline degrees, checkpoint strategy and interval.
    A key the scenario leaves out has the schema's default. None when the file records
    no scenario.
    """
    import dataclasses
    import tomllib

    from mcsim.scenario.schema import SECTIONS

    try:
        raw = tomllib.loads(str(ds.attrs.get("scenario_toml", "")))
    except tomllib.TOMLDecodeError:
        return None
    if not raw:
        return None
    swept_keys = raw.get("sweep", {}) if isinstance(raw.get("sweep"), dict) else {}
    fixed, swept = [], []
    for table, key, label in _LAYOUT_KEYS:
        if f"{table}.{key}" in swept_keys:
            swept.append(label)
            continue
        value = raw.get(table, {}).get(key) if isinstance(raw.get(table), dict) else None
        if value is None:
            default = next((f.default for f in dataclasses.fields(SECTIONS[table]) if f.name == key), None)
            value = getattr(default, "label", default)
        if value is not None and value is not dataclasses.MISSING:
            fixed.append((label, _layout_text(key, value)))
    return fixed, swept


def layout_note(ds: xr.Dataset) -> str:
    """One line: the layout the result answers for (fixed by its scenario, not searched), and `mcsim plan`.

    Empty when the file records no scenario.
    """
    found = layout_assumptions(ds)
    if found is None:
        return ""
    fixed, swept = found
    text = "answers for the layout the scenario fixes: " + ", ".join(f"{label} {value}" for label, value in fixed)
    if swept:
        text += f" ({', '.join(swept)}: swept)"
    return (
        text + "; not searched: `mcsim plan` searches GPU counts, parallelism and checkpoint intervals "
        "under a deadline or budget (docs/planning.md)"
    )


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
    from mcsim.analysis.ranking import decision_table

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


def sensitivity_table(
    ds: xr.Dataset | None = None,
    output: str = "cost",
    *,
    result: xr.Dataset | None = None,
    resamples: int | None = None,
    progress: bool | None = None,
) -> str:
    """The inputs of a result with parameter draws, ranked by their Sobol indices, as text.

    ``result``: the indices (:func:`mcsim.analysis.sensitivity.sensitivity`) when already
    computed, else they are computed from ``ds`` with ``resamples`` and ``progress``.

    Raises
    ------
    ValueError
        No parameter draws, or ``output`` is not a per-run variable.
    """
    from mcsim.analysis.sensitivity import sensitivity
    from mcsim.io.format import format_coordinate

    if result is None:
        if ds is None:
            raise ValueError("give the dataset or its indices (result=)")
        result = sensitivity(ds, output, resamples=resamples, progress=progress)
    output = str(result.attrs["output"])
    sweep_dims = [d for d in result["rank"].dims if d != "input"]
    method = result.attrs["method"]
    names = ("S1", "ST") if method == "sobol" else ("S1", "delta")
    lines = []
    for index in np.ndindex(*(result.sizes[d] for d in sweep_dims)):
        point = result.isel(dict(zip(sweep_dims, index, strict=False)))
        label = " ".join(
            f"{d}={format_coordinate(result[d].values[i])}" for d, i in zip(sweep_dims, index, strict=False)
        )
        lines.append(f"{label or result.attrs.get('scenario_name', 'scenario')}:")
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
        f"[95 % bootstrap interval, {result.attrs.get('resamples', '?')} resamples]; 1 = most influential"
    )
    if result.attrs.get("correlated_inputs"):
        lines.append(
            f"correlated inputs: {', '.join(result.attrs['correlated_inputs'].split())}; each one's S1 and "
            "delta include the effect it carries through the others, so they overlap and do not add up"
        )
    return "\n".join(lines)
