"""The text tables the command line prints: the summary of a result file and its sensitivity indices.

:func:`summary_table` (``mcsim summary``, and ``mcsim run`` after a run) prints one row per
configuration: the mean and 95 % CI half-width of each output (:data:`COLUMNS`), then the columns
that apply (with parameter draws: the predictive range, the epistemic share, P(best) and the
expected regret; with a deadline: the probability of finishing in time), and the completed share;
then notes, the energy breakdown, the layout the result answers for (:func:`layout_note`) and the values
the scenario borrows from another model, fleet or software (:func:`borrowed_lines`).
:func:`sensitivity_table` (``mcsim sensitivity``) ranks the uncertain inputs of each configuration.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import xarray as xr

from mcsim._lazy import lazy_module
from mcsim.analysis.configurations import check_probability
from mcsim.analysis.deadline import PROBABILITY, cheapest_within, prob_within
from mcsim.analysis.ranking import decision_table
from mcsim.analysis.sensitivity import disagreements, sensitivity
from mcsim.analysis.summary import summarize
from mcsim.errors import NoneQualifies
from mcsim.io.format import format_coordinate
from mcsim.io.units import format_readable, readable_unit
from mcsim.io.variables import PER_RUN, VARIABLES, sweep_dims
from mcsim.scenario.provenance import flat_provenance
from mcsim.scenario.schema import DEFAULT_STEP_MODEL, SECTIONS, Interval

if TYPE_CHECKING:
    from mcsim.model import energy
else:  # the energy model at the first table of a point: the command line's parser imports this module
    energy = lazy_module("mcsim.model.energy")

MAX_TABLE_ROWS = 16  # more configurations: the 5 best and the 5 worst (--all shows every one)
EXTREMES = 5  # ... this many at each end
BREAKDOWN_ROWS = 12  # configurations whose energy breakdown is printed, at most

# column title (its unit is added: the one its values read best in, mcsim.io.units.readable_unit), variable
COLUMNS = (
    ("wall time", "wall_time"),
    ("energy", "energy"),
    ("cost", "cost"),
    ("CO2", "co2"),
    ("failures", "n_failures"),
    ("ETTR", "ettr"),
)

# variable -> (factor from its stored unit, unit shown; "" for a number without a unit)
Units = dict[str, tuple[float, str]]

# a column that applies to some results only: its title, and its cell from a configuration's statistics
Column = tuple[str, Callable[[xr.Dataset], str]]

# the choices a scenario fixes and `mcsim plan` searches: dotted key, label
_LAYOUT_KEYS = {
    "hardware.gpu": "GPU",
    "parallelism.gpus": "GPUs",
    "parallelism.tp": "tp",
    "parallelism.pp": "pp",
    "checkpoint.strategy": "checkpoint strategy",
    "checkpoint.interval": "checkpoint interval",
}


class _Entry(NamedTuple):
    """A row of the summary table and where it sorts."""

    group: int  # 0: every run completed, 1: runs censored, 2: infeasible
    key: float  # the order within the group: the signed mean of the sort variable, or -completed share
    cells: list[str]


def _pm(mean: float, half: float, scale: float) -> str:
    """``mean ± half`` in 4 and 2 significant digits, thousands grouped; a half-width at the float
    round-off of the mean (identical runs: 1e-12 of it or less) prints as 0."""
    mean, half = mean * scale, half * scale
    if math.isfinite(half) and math.isfinite(mean) and abs(half) <= 1e-12 * abs(mean):
        half = 0.0
    return f"{format_readable(mean, 4)} ± {format_readable(half, 2) if half else '0'}"


def column_units(ds: xr.Dataset, stats: xr.Dataset, names: Sequence[str]) -> Units:
    """The unit each of ``names`` reads best in over the table's means (its ``units`` attribute in ``ds``,
    else the registered one): ``{"cost": (1e-6, "MUSD"), "ettr": (1.0, ""), ...}``."""
    units: Units = {}
    for name in names:
        stored = str(ds[name].attrs.get("units", VARIABLES[name].units if name in VARIABLES else ""))
        means = np.asarray(stats[name].sel(stat="mean").values, dtype=float).ravel()
        factor, shown = readable_unit(means, stored)
        units[name] = (factor, "" if shown == "1" else shown)
    return units


def _titled(title: str, unit: str) -> str:
    """A column title with its unit in brackets (none for a number without a unit)."""
    return f"{title} [{unit}]" if unit else title


def _sort_direction(name: str) -> float:
    """-1 for a variable where higher is better (rows sorted by its mean, highest first), else +1."""
    return -1.0 if VARIABLES[name].direction == "higher" else 1.0


def _point_label(coordinates: xr.Dataset, dims: Sequence[Hashable], index: tuple[int, ...]) -> str:
    """A configuration by the positions of its coordinates: ``gpus=1024 strategy=async`` ("" without dims)."""
    return " ".join(f"{d}={format_coordinate(coordinates[d].values[i])}" for d, i in zip(dims, index, strict=False))


def summary_table(
    ds: xr.Dataset,
    show_all: bool = False,
    sort: str | None = None,
    deadline: float | None = None,
    probability: float = PROBABILITY,
) -> str:
    """Mean and 95 % confidence interval per configuration, as aligned text.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`mcsim.simulate` (checked by :func:`mcsim.analysis.summary.check_results`).
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
        it (:func:`mcsim.analysis.deadline.prob_within`) and a line naming the cheapest
        configuration that does so with ``probability`` (or the closest one).
    probability : float
        Required probability of finishing within ``deadline``, in (0, 1).

    Raises
    ------
    ValueError
        ``sort`` is not a per-run variable, or ``deadline`` / ``probability`` out of range.
    """
    if sort is not None and sort not in PER_RUN:
        raise ValueError(f"--sort: expected a per-run variable ({', '.join(PER_RUN)}), got {sort!r}")
    key_name = sort or "cost"
    stats = summarize(ds)
    names = [name for _, name in COLUMNS]
    units = column_units(ds, stats, names if key_name in names else [*names, key_name])
    stats, columns, deadline_lines = _with_columns(ds, stats, units, key_name, deadline, probability)
    header = ["configuration"] + [_titled(t, units[n][1]) for t, n in COLUMNS] + [c[0] for c in columns]
    header.append("completed")
    entries = _entries(ds, stats, columns, key_name, units)
    counts = [sum(1 for e in entries if e.group == g) for g in range(3)]
    note, shown = _shown(entries, counts, show_all or len(entries) <= MAX_TABLE_ROWS, sort, key_name)
    lines = note + _aligned(header, [e.cells for e in shown])
    lines.append(_statistics_note(ds, stats, key_name))
    if counts[1]:
        lines.append(
            "* runs censored at max_wall_days: time, energy and cost are truncated (lower bounds), "
            "so the configuration is never ranked (best, Pareto front, report)"
        )
    lines += deadline_lines
    lines += _breakdown_lines(stats, sweep_dims(ds), units)
    return "\n".join(lines + scenario_notes(ds))


def scenario_notes(ds: xr.Dataset) -> list[str]:
    """The notes under the summary table about the scenario itself: what its layout leaves unsearched,
    what it borrows (``[provenance]``) and a missing vocabulary under the operator step model."""
    notes = [layout] if (layout := layout_note(ds)) else []
    notes += borrowed_lines(ds)
    return notes + ([vocabulary] if (vocabulary := vocabulary_note(ds)) else [])


def _with_columns(
    ds: xr.Dataset, stats: xr.Dataset, units: Units, name: str, deadline: float | None, probability: float
) -> tuple[xr.Dataset, list[Column], list[str]]:
    """``stats`` with what the columns beyond :data:`COLUMNS` read, those columns, and the line of the
    deadline's pick: with parameter draws, ``name``'s predictive range, epistemic share, P(best) and regret;
    with a deadline, the probability of finishing within it."""
    columns: list[Column] = []
    if ds.sizes.get("draw", 0):
        columns += _uncertain_columns(name, units[name])
        stats, decision_columns = _with_decisions(ds, stats, name, units[name])
        columns += decision_columns
    deadline_lines: list[str] = []
    if deadline is not None:
        stats, deadline_column, deadline_lines = _with_deadline(ds, stats, deadline, probability, units["cost"])
        columns += deadline_column
    return stats, columns, deadline_lines


def _entries(ds: xr.Dataset, stats: xr.Dataset, columns: list[Column], key_name: str, units: Units) -> list[_Entry]:
    """One entry per configuration, in the order of the sweep."""
    dims = sweep_dims(ds)
    sign = _sort_direction(key_name)
    entries = []
    for index in np.ndindex(*(ds.sizes[d] for d in dims)):
        sel = stats.isel(dict(zip(dims, index, strict=False)))
        label = _point_label(ds, dims, index) if dims else ds.attrs.get("scenario_name", "scenario")
        entries.append(_entry(sel, label, columns, key_name, sign, units))
    return entries


def _entry(sel: xr.Dataset, label: str, columns: list[Column], key_name: str, sign: float, units: Units) -> _Entry:
    """The row of one configuration's statistics ``sel``: infeasible, with censored runs, or completed."""
    if not bool(sel["feasible"].all()):
        return _Entry(2, 0.0, [label, f"infeasible: {_infeasible_text(sel)}"])
    row = [label]
    for _, name in COLUMNS:
        mean = float(sel[name].sel(stat="mean"))
        row.append(_pm(mean, float(sel[name].sel(stat="ci95_high")) - mean, units[name][0]))
    row += [cell(sel) for _, cell in columns]
    share = float(sel["completed"].sel(stat="mean"))
    row.append(f"{share:.1%}" + (" *" if share < 1.0 else ""))
    if share < 1.0:
        return _Entry(1, -share, row)
    return _Entry(0, sign * float(sel[key_name].sel(stat="mean")), row)


def _shown(
    entries: list[_Entry], counts: list[int], every: bool, sort: str | None, key_name: str
) -> tuple[list[str], list[_Entry]]:
    """(the note on what is left out, the entries shown): ``every`` one (ranked when ``sort`` is given,
    else in the sweep's order), or the best and worst completed ones by ``key_name``."""
    ranked = sorted(entries, key=lambda e: (e.group, e.key))
    if every:
        return [], ranked if sort else entries
    done = [e for e in ranked if e.group == 0]
    shown = done if len(done) <= 2 * EXTREMES else done[:EXTREMES] + done[-EXTREMES:]
    what = (
        f"the {EXTREMES} best and the {EXTREMES} worst by mean {key_name}"
        if len(done) > 2 * EXTREMES
        else f"the {len(done)} whose runs all completed, by mean {key_name}"
    )
    note = (
        f"{len(entries)} configurations ({counts[0]} completed, {counts[1]} with censored runs, "
        f"{counts[2]} infeasible): {what}; {len(entries) - len(shown)} not shown (--all shows every one; all are "
        "in the file)"
    )
    return [note], shown


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    """``header`` and ``rows`` in columns two spaces apart (a row of another length, an infeasible one, as it is)."""
    full = [header] + [r for r in rows if len(r) == len(header)]
    widths = [max(len(r[k]) for r in full) for k in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)).rstrip()]
    for row in rows:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
            if len(row) == len(header)
            else "  ".join(row)
        )
    return lines


def _statistics_note(ds: xr.Dataset, stats: xr.Dataset, key_name: str) -> str:
    """What the table's statistics are over (runs, or draws and runs), with the seed and mode."""
    runs, draws = ds.sizes["run"], ds.sizes.get("draw", 0)
    if not draws:
        return (
            f"mean ± half-width of the 95 % confidence interval of the mean over {runs} runs "
            f"(seed {ds.attrs.get('seed')}, mode {ds.attrs.get('mode')})"
        )
    return (
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


def _with_deadline(
    ds: xr.Dataset, stats: xr.Dataset, days: float, probability: float, cost_unit: tuple[float, str]
) -> tuple[xr.Dataset, list[Column], list[str]]:
    """``stats`` with the probability of finishing within ``days``, its column, and the line of the pick."""
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
            f"95 % interval {low:.3g} - {high:.3g}; mean cost {format_readable(pick['mean'] * cost_unit[0], 4)} "
            f"{cost_unit[1]})"
        )
    return stats, [(f"P(<= {days:g} d)", p_within)], [line]


def _layout_text(key: str, value: object) -> str:
    """A layout value as the table shows it: a checkpoint interval by its label, whole numbers with commas."""
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
    try:
        raw = tomllib.loads(str(ds.attrs.get("scenario_toml", "")))
    except tomllib.TOMLDecodeError:
        return None
    if not raw:
        return None
    swept_keys = raw.get("sweep", {}) if isinstance(raw.get("sweep"), dict) else {}
    fixed, swept = [], []
    for dotted, label in _LAYOUT_KEYS.items():
        if dotted in swept_keys:
            swept.append(label)
            continue
        table, key = dotted.split(".")
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


def borrowed_lines(ds: xr.Dataset) -> list[str]:
    """The scenario's ``[provenance]``: what its values borrow from another model, fleet or software.

    Read from the scenario the file records (``scenario_toml``); empty when it declares none.
    """
    try:
        raw = tomllib.loads(str(ds.attrs.get("scenario_toml", "")))
    except tomllib.TOMLDecodeError:
        return []
    table = raw.get("provenance")
    if not isinstance(table, dict) or not table:
        return []
    return ["borrowed (the scenario's [provenance]): the answer rests on these values measured elsewhere"] + [
        f"  {key}: {text}" for key, text in flat_provenance(table)
    ]


def vocabulary_note(ds: xr.Dataset) -> str:
    """One line when the operator step model ran without a vocabulary: the output layer is not counted.

    ``model.vocab = 0`` (its default) leaves the embedding and the output layer out of the
    iteration time and the memory (docs/model.md §2b); a result says so rather than
    under-count silently. Empty when the file records no scenario, or the scenario gives a
    vocabulary, or it runs the aggregate model (whose FLOPs are ``6 N`` per token, tables included).
    """
    try:
        raw = tomllib.loads(str(ds.attrs.get("scenario_toml", "")))
    except tomllib.TOMLDecodeError:
        return ""
    model, compute = (raw.get(name, {}) for name in ("model", "compute"))
    if not raw or not isinstance(model, dict) or not isinstance(compute, dict):
        return ""
    swept = raw.get("sweep", {}) if isinstance(raw.get("sweep"), dict) else {}
    step_model = compute.get("step_model", DEFAULT_STEP_MODEL)
    if step_model != "operators" or model.get("vocab", 0) or "model.vocab" in swept:
        return ""
    return (
        "* model.vocab not given: the embedding and the output layer are not modelled (their time and "
        "memory are left out of the iteration); give model.vocab to count them"
    )


def _infeasible_text(sel: xr.Dataset) -> str:
    """Why a configuration is infeasible (in how many draws, when it has draws)."""
    feasible = np.asarray(sel["feasible"].values, dtype=bool).ravel()
    reasons = [str(r) for r in np.asarray(sel["infeasible_reason"].values, dtype=object).ravel() if str(r)]
    reason = reasons[0] if reasons else "unknown"
    return reason if feasible.size == 1 else f"{reason} (in {int((~feasible).sum())} of {feasible.size} draws)"


def _title_parts(name: str, unit: tuple[float, str]) -> tuple[str, str, float]:
    """``name``'s column title without its unit, the unit in brackets ("" without one), and its scale."""
    base = next((t for t, n in COLUMNS if n == name), name)
    return base, f"[{unit[1]}]" if unit[1] else "", unit[0]


def _uncertain_columns(name: str, unit: tuple[float, str]) -> list[Column]:
    """Columns of the summary table with parameter draws: ``name``'s predictive 5-95 % and epistemic share."""
    base, unit_text, scale = _title_parts(name, unit)

    def interval(sel: xr.Dataset) -> str:
        low, high = (float(sel[name].sel(stat=s)) * scale for s in ("p5", "p95"))
        return f"{format_readable(low, 4)} to {format_readable(high, 4)}"

    def share(sel: xr.Dataset) -> str:
        value = float(sel[name].sel(stat="epistemic_share"))
        return f"{value:.0%}" if math.isfinite(value) else "-"

    return [(f"{base} 5-95 % {unit_text}".strip(), interval), (f"{base} epistemic", share)]


def _with_decisions(
    ds: xr.Dataset, stats: xr.Dataset, name: str, unit: tuple[float, str]
) -> tuple[xr.Dataset, list[Column]]:
    """``stats`` with ``name``'s P(best) and expected regret over draws, and their columns (none when
    ``name`` cannot be ranked: no direction, or no configuration with all its runs completed)."""
    try:
        table = decision_table(ds, name)
    except ValueError:
        return stats, []
    stats = stats.assign(p_best=table["p_best"], expected_regret=table["expected_regret"])
    base, unit_text, scale = _title_parts(name, unit)

    def p_best(sel: xr.Dataset) -> str:
        value = float(sel["p_best"])
        return f"{value:.0%}" if math.isfinite(value) else "-"

    def regret(sel: xr.Dataset) -> str:
        value = float(sel["expected_regret"])
        return format_readable(value * scale, 3) if math.isfinite(value) else "-"

    return stats, [(f"P(best {base})", p_best), (f"{base} regret {unit_text}".strip(), regret)]


def _breakdown_lines(stats: xr.Dataset, dims: list[str], units: Units) -> list[str]:
    """Mean energy breakdown, cost and carbon split, per configuration (the first :data:`BREAKDOWN_ROWS`),
    in the units of the table's energy, cost and CO2 columns."""
    if "energy_compute" not in stats or int(np.prod([stats.sizes[d] for d in dims])) > MAX_TABLE_ROWS:
        return []
    lines = [
        f"energy breakdown [{units['energy'][1]}] (facility; parts add up to the total), cost "
        f"[{units['cost'][1]}] and CO2 [{units['co2'][1]}] splits:"
    ]
    shape = tuple(stats.sizes[d] for d in dims)
    for n, index in enumerate(np.ndindex(*shape)):
        if n == BREAKDOWN_ROWS:
            lines.append(f"  ... {int(np.prod(shape)) - BREAKDOWN_ROWS} more configurations in the file")
            break
        point = stats.isel(dict(zip(dims, index, strict=False))).sel(stat="mean")
        if bool(point["feasible"].all()):  # all draws, with parameter draws
            lines += _breakdown_of(point, _point_label(stats, dims, index) or "all runs", units)
    return lines


def _breakdown_of(point: xr.Dataset, label: str, units: Units) -> list[str]:
    """The energy of one configuration by part, its cost split and its CO2 split, in ``units`` of the
    table's energy, cost and CO2 columns."""

    def shown(name: str, quantity: str, digits: int = 4) -> str:
        return format_readable(float(point[name]) * units[quantity][0], digits)

    parts = "  ".join(f"{k} {shown(f'energy_{k}', 'energy')}" for k in energy.ENERGY_PARTS)
    return [
        f"  {label}: {parts}  = {shown('energy', 'energy', 5)}  (GPUs alone, IT: {shown('energy_gpu', 'energy')})",
        f"  {' ' * len(label)}  cost allocation {shown('cost_allocation', 'cost')}"
        f" + electricity {shown('cost_electricity', 'cost')};"
        f" CO2 operational {shown('co2_operational', 'co2')} + embodied {shown('co2_embodied', 'co2')}",
    ]


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
    if result is None:
        if ds is None:
            raise ValueError("give the dataset or its indices (result=)")
        result = sensitivity(ds, output, resamples=resamples, progress=progress)
    dims = [d for d in result["rank"].dims if d != "input"]
    main = str(result.attrs["ranked_by"])
    names = ("ST", "S1", "delta") if main == "ST" else ("S1", "delta")
    lines = []
    for index in np.ndindex(*(result.sizes[d] for d in dims)):
        label = _point_label(result, dims, index)
        lines.append(f"{label or result.attrs.get('scenario_name', 'scenario')}:")
        lines += _ranked_inputs(result.isel(dict(zip(dims, index, strict=False))), names)
    return "\n".join(lines + _sensitivity_notes(result))


def _ranked_inputs(point: xr.Dataset, names: tuple[str, ...]) -> list[str]:
    """The inputs of one configuration, most influential first, each with its indices and their intervals and
    delta's rank; then the inputs without a detectable effect and where delta contradicts the ranking."""
    width = max(len(str(k)) for k in point["input"].values)
    main = names[0]
    lines = []
    for i in np.argsort(point["rank"].values, kind="stable"):
        cells = [
            f"{n} {float(point[n][i]):.3f} [{float(point[f'{n}_low'][i]):.3f}, {float(point[f'{n}_high'][i]):.3f}]"
            for n in names
        ]
        lines.append(
            f"  {int(point['rank'][i])}. {str(point['input'].values[i]).ljust(width)}  "
            + "  ".join(cells)
            + f"  (delta rank {int(point['rank_delta'][i])})"
        )
    null = [str(k) for k, low in zip(point["input"].values, point[f"{main}_low"].values, strict=True) if low <= 0.0]
    if null:
        lines.append(f"  no detectable effect ({main}'s interval contains 0): {', '.join(null)}")
    for above, below in disagreements(point):
        lines.append(
            f"  delta disagrees: it puts {below} above {above}, whose {main} interval lies wholly above {below}'s"
        )
    return lines


def _sensitivity_notes(result: xr.Dataset) -> list[str]:
    """Which indices the table shows and over what, and a warning when inputs are correlated."""
    how = (
        "total (ST) and first-order (S1) Sobol indices from the Saltelli design, ranked by ST"
        if result.attrs["ranked_by"] == "ST"
        else f"first-order index (S1) from the given {result.attrs['design']} draws, ranked by S1 "
        '(a total index needs run.design = "saltelli")'
    )
    lines = [
        f"{how}, and the moment-independent delta as a second opinion, of the mean {result.attrs['output']} per "
        f"draw over {result.attrs['draws']} draws, [95 % bootstrap interval, {result.attrs.get('resamples', '?')} "
        "resamples]; 1 = most influential. Delta is biased upward with few draws: an input without effect "
        "still gets a few hundredths"
    ]
    if result.attrs.get("correlated_inputs"):
        lines.append(
            f"correlated inputs: {', '.join(result.attrs['correlated_inputs'].split())}; each one's S1 and "
            "delta include the effect it carries through the others, so they overlap and do not add up"
        )
    return lines
