"""A Markdown report of a result file: what was simulated, the best picks, figures.

:func:`write_report` writes ``README.md`` and the figures that apply
(``scaling.png`` when there is a ``gpus`` dimension or a single sweep dimension,
``cdf.png``, ``pareto.png``, ``breakdown.png``) into a folder, each file atomically.
The picks come from :mod:`mcsim.analysis`: :func:`~mcsim.analysis.best` of cost,
energy and wall time (a pick that differs from an earlier one is compared with it by
:func:`~mcsim.analysis.paired_difference`, and called equivalent when the CI of the
difference contains 0), :func:`~mcsim.analysis.pareto_front` of (wall time, cost) and
:func:`~mcsim.analysis.cheapest_within` a deadline. Configurations with runs censored
at ``max_wall_days`` are listed with their completed share and never picked.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import xarray as xr

from . import analysis, plots
from .atomic import write_atomic
from .summary import format_coordinate

PROBABILITY = 0.9       # cheapest_within: required share of runs finishing in time
DEADLINE_FACTOR = 2.0   # deadline = this x the median wall time of the fastest configuration

# variable, row title, factor from the stored unit
_QUANTITIES = (("cost", "cost [MUSD]", 1e-6), ("energy", "energy [MWh]", 1.0),
               ("wall_time", "wall time [days]", 1 / 24))
_FIGURES = (
    ("scaling", "Scaling",
     "Mean wall time, energy, cost and ETTR against the number of GPUs (or the one swept dimension), with the "
     "5–95 % range over runs; an x on the axis marks an infeasible configuration, a hollow marker one with runs "
     "censored at the wall-time limit."),
    ("cdf", "Distribution of wall time",
     "Empirical distribution function of the wall time over runs, per configuration."),
    ("pareto", "Trade-off of wall time and cost",
     "Every feasible configuration at its mean, bars from the 5th to the 95th percentile; the Pareto front "
     "in red."),
    ("breakdown", "Where wall time and energy go",
     "Mean wall time and energy split into their parts, and the parts other than compute as shares."),
)


def _sweep_dims(ds: xr.Dataset) -> list[str]:
    return [d for d in ds["wall_time"].dims if d != "run"]


def _config_text(configuration: dict) -> str:
    return ", ".join(f"{d}={format_coordinate(v)}" for d, v in configuration.items()) or "the single configuration"


def _sig(value: float, digits: int = 3) -> str:
    """``digits`` significant digits, trailing zeros kept (5.60, 168, 1.07); thousands grouped."""
    return f"{value:#.{digits}g}".rstrip(".") if abs(value) < 10 ** digits else f"{value:,.0f}"


def _decimals(half_width: float) -> int:
    """Decimals that show two significant digits of ``half_width`` (0 to 6)."""
    if not math.isfinite(half_width) or half_width <= 0:
        return 3
    return int(min(6, max(0, 1 - math.floor(math.log10(half_width)))))


def _stats_row(record: dict, title: str, scale: float) -> str:
    mean, (low, high), p5, p95 = (record["mean"] * scale, tuple(v * scale for v in record["ci95"]),
                                  record["p5"] * scale, record["p95"] * scale)
    d = _decimals((high - low) / 2)
    return f"| {title} | {mean:,.{d}f} | [{low:,.{d}f}, {high:,.{d}f}] | {p5:,.{d}f} – {p95:,.{d}f} |"


def _select(ds: xr.Dataset, configuration: dict) -> xr.Dataset:
    return ds.sel(configuration) if configuration else ds


def _config_table(ds: xr.Dataset, configuration: dict) -> list[str]:
    """Mean, 95 % CI of the mean and 5–95 % range of cost, energy and wall time at a configuration."""
    lines = ["| quantity | mean | 95 % CI of the mean | 5–95 % of runs |", "|---|---:|---:|---:|"]
    for name, title, scale in _QUANTITIES:
        lines.append(_stats_row(analysis.config_record(ds, configuration, name), title, scale))
    return lines


def _censored_configs(ds: xr.Dataset) -> list[tuple[dict, float]]:
    """Feasible configurations with runs censored at max_wall_days, with their completed share."""
    share = analysis.completed_share(ds)
    dims = _sweep_dims(ds)
    found = []
    for index in np.ndindex(*share.shape):
        value = float(share.values[index])
        if np.isfinite(value) and value < 1.0:
            found.append(({d: ds[d].values[i].item() for d, i in zip(dims, index)}, value))
    return found


_MARKDOWN_SPECIAL = "\\`*_{}[]<>()#+-.!|~$&"


def markdown_text(text: object, limit: int = 300) -> str:
    """``text`` (a scenario's name, description, a path: user input) as inert Markdown.

    Control characters and line breaks become spaces, every character with a Markdown
    or HTML meaning is backslash-escaped, and the result is cut to ``limit`` characters,
    so scenario text can neither format nor link nor inject HTML into the report.
    """
    plain = "".join(" " if (ord(c) < 32 or 127 <= ord(c) < 160) else c for c in str(text))
    if len(plain) > limit:
        plain = plain[:limit] + "…"
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in plain)


def _what(ds: xr.Dataset, source: str | None) -> list[str]:
    attrs = ds.attrs
    dims = _sweep_dims(ds)
    n_configs = int(np.prod([ds.sizes[d] for d in dims])) if dims else 1
    n_feasible = int(ds["feasible"].sum()) if "feasible" in ds else n_configs
    rows = [("scenario", markdown_text(attrs.get("scenario_name", "?"))
                         + (f" ({markdown_text(attrs['scenario_source'])})" if attrs.get("scenario_source") else "")),
            ("runs per configuration", f"{ds.sizes['run']:,}"),
            ("seed", str(attrs.get("seed", "?"))),
            ("mode", str(attrs.get("mode", "?"))),
            ("mcsim version", str(attrs.get("mcsim_version", "?"))),
            ("simulated on", str(attrs.get("created", "?")))]
    if source:
        rows.insert(1, ("result file", markdown_text(source)))
    for d in dims:
        rows.append((f"sweep: {d}", ", ".join(format_coordinate(v) for v in ds[d].values.tolist())))
    censored = _censored_configs(ds)
    rows.append(("configurations", f"{n_configs} ({n_feasible} feasible"
                 + (f", {len(censored)} of them with censored runs" if censored else "") + ")"))
    lines = ["## What was simulated", ""]
    description = _description(attrs)
    if description:
        lines += [markdown_text(description, limit=2000), ""]
    lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if n_feasible < n_configs:
        reasons = sorted({markdown_text(r) for r in np.asarray(ds["infeasible_reason"].values).ravel() if str(r)})
        lines += ["", f"{n_configs - n_feasible} configurations cannot run and are left out of every pick: "
                  + "; ".join(reasons[:5]) + (" …" if len(reasons) > 5 else "") + "."]
    if censored:
        shown = "; ".join(f"{_config_text(p)}: {share:.1%} completed" for p, share in censored[:8])
        lines += ["", f"**{len(censored)} configuration{'s' if len(censored) > 1 else ''} did not complete all "
                  "their runs** within "
                  "`run.max_wall_days`: their wall time, energy and cost stop where the runs were cut off "
                  "(lower bounds), so they are left out of every pick and never on the Pareto front. "
                  f"Share of runs completed: {shown}" + (" …" if len(censored) > 8 else "") + "."]
    return lines


def _description(attrs: dict) -> str:
    import tomllib

    try:
        return str(tomllib.loads(str(attrs.get("scenario_toml", ""))).get("description", ""))
    except (tomllib.TOMLDecodeError, TypeError):
        return ""


def _pareto_table(ds: xr.Dataset) -> list[str]:
    front = analysis.pareto_front(ds, ("wall_time", "cost"))
    dims = _sweep_dims(ds)
    points = [{d: ds[d].values[i].item() for d, i in zip(dims, index)}
              for index in np.ndindex(*front.shape) if bool(front.values[index])]
    rows = []
    for p in points:
        one = _select(ds, p)
        wall, cost, energy = (one[n].values.astype(float) * s for n, s in
                              (("wall_time", 1 / 24), ("cost", 1e-6), ("energy", 1.0)))
        rows.append((wall.mean(), [format_coordinate(p[d]) for d in dims]
                     + [f"{_sig(v.mean(), 4)} ({_sig(np.percentile(v, 5), 4)} – {_sig(np.percentile(v, 95), 4)})"
                        for v in (wall, cost)] + [_sig(energy.mean())]))
    header = (dims or ["configuration"]) + ["wall time [days]", "cost [MUSD]", "energy [MWh]"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(dims or [1]) + "---:|---:|---:|"]
    for _, cells in sorted(rows, key=lambda r: r[0]):
        lines.append("| " + " | ".join(cells if dims else ["the single configuration"] + cells) + " |")
    return ["## Pareto front of wall time and cost", "",
            f"The feasible configurations that no other beats on both mean wall time and mean cost "
            f"({len(rows)} of the {int(analysis.eligible(ds).sum())} feasible configurations whose runs all "
            "completed), fastest first; "
            "mean (5th – 95th percentile over runs).", ""] + lines


def _deadline(ds: xr.Dataset, fastest: dict) -> list[str]:
    median_days = float(np.median(_select(ds, fastest["configuration"])["wall_time"].values)) / 24
    days = float(f"{DEADLINE_FACTOR * median_days:.3g}")
    lines = ["## Cheapest configuration within a deadline", "",
             f"Deadline D = {days:g} days: {DEADLINE_FACTOR:g} × the median wall time of the fastest configuration "
             f"({_config_text(fastest['configuration'])}, median {median_days:.3g} days), rounded to three "
             f"significant digits. A configuration qualifies when at least {100 * PROBABILITY:g} % of its runs "
             "complete within D (runs stopped at the wall-time limit count as late).", ""]
    pick = analysis.cheapest_within(ds, days, PROBABILITY)
    if pick is None:
        lines.append(f"**No configuration finishes within {days:g} days with probability ≥ {PROBABILITY:g}.**")
        return lines
    low, high = pick["p_within_ci95"]
    share = ((f"all {ds.sizes['run']:,} of its runs" if pick["p_within"] == 1.0 else
              f"{100 * pick['p_within']:.1f} % of its runs")
             + f" (95 % interval of the probability: {100 * low:.1f} – {100 * high:.1f} %, Wilson)")
    lines += [f"The cheapest configuration that finishes within {days:g} days with probability ≥ {PROBABILITY:g}: "
              f"**{_config_text(pick['configuration'])}**; it finishes in time in {share}.", ""]
    lines += _config_table(ds, pick["configuration"])
    return lines


_PICKS = (("Cost-optimal", "cost", "lowest mean cost"), ("Energy-optimal", "energy", "lowest mean energy"),
          ("Fastest", "wall_time", "lowest mean wall time"))
_SHOWN = {name: (title.split(" [")[0], title.split("[")[1].rstrip("]"), scale) for name, title, scale in _QUANTITIES}


def _difference_text(ds: xr.Dataset, record: dict, other: dict, objective: str) -> str:
    """Paired difference of ``objective`` between two picks, and whether it is within the uncertainty."""
    diff = analysis.paired_difference(ds, record["configuration"], other["configuration"], objective)
    title, unit, scale = _SHOWN[objective]
    mean, (low, high) = diff["mean"] * scale, (v * scale for v in diff["ci95"])
    d = _decimals((high - low) / 2)
    text = f"{title} {mean:+,.{d}f} {unit} [{low:+,.{d}f}, {high:+,.{d}f}]"
    if low <= 0.0 <= high:
        text += " — equivalent within the uncertainty (the 95 % CI of the paired difference contains 0)"
    return text


def _picks(ds: xr.Dataset, records: dict) -> list[str]:
    """One subsection per pick; a pick that differs from an earlier one is compared with it on paired runs."""
    lines = []
    for k, (title, objective, meaning) in enumerate(_PICKS):
        record = records[objective]
        earlier = [(t, o) for t, o, _ in _PICKS[:k]]
        same = next((t for t, o in earlier if records[o]["configuration"] == record["configuration"]), None)
        lines += [f"### {title}: {_config_text(record['configuration'])}", "", f"The {meaning}"
                  + (f": the same configuration as the {same.lower()} one above." if same else "."), ""]
        if same:
            continue
        lines += _config_table(ds, record["configuration"]) + [""]
        compared = []
        for other_title, other in earlier:
            configuration = records[other]["configuration"]
            if configuration == records[objective]["configuration"] or configuration in compared:
                continue
            compared.append(configuration)
            names = [objective] + [o for t, o in earlier if records[o]["configuration"] == configuration]
            parts = [_difference_text(ds, record, records[other], name) for name in names]
            lines += [f"Against the {other_title.lower()} configuration ({_config_text(configuration)}), mean of "
                      "the paired differences over runs with its 95 % CI: " + "; ".join(parts) + ".", ""]
    return lines


def report_markdown(ds: xr.Dataset, figures: list[str], source: str | None = None) -> str:
    """The report's Markdown; ``figures`` are the names (without .png) of the figures beside it."""
    name = ds.attrs.get("scenario_name", "mcsim results")
    runs = ds.sizes["run"]
    lines = [f"# mcsim report: {markdown_text(name)}", "",
             f"Monte Carlo results over {runs:,} runs per configuration. Means carry the 95 % confidence "
             "interval of the mean (normal approximation); ranges are the 5th and 95th percentiles over runs. "
             "Runs share their random streams across configurations (common random numbers).", ""]
    lines += _what(ds, source) + [""]
    lines += ["## Best configurations", ""]
    try:
        records = {objective: analysis.best(ds, objective) for _, objective, _ in _PICKS}
    except ValueError as err:
        records = None
        lines += [f"**No configuration can be ranked**: {err}.", ""]
    if records is not None:
        lines += _picks(ds, records)
        lines += _pareto_table(ds) + [""]
        lines += _deadline(ds, records["wall_time"]) + [""]
    lines += ["## Figures", ""]
    for key, title, caption in _FIGURES:
        if key in figures:
            lines += [f"### {title}", "", f"![{title}]({key}.png)", "", caption, ""]
    if "scaling" not in figures:
        lines += ["(No scaling figure: the file has no `gpus` sweep dimension nor a single sweep dimension.)", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(ds: xr.Dataset, folder: str | Path, source: str | None = None) -> list[Path]:
    """Write ``README.md`` and the figures into ``folder`` (created if needed); returns the paths.

    Every figure and the text are made before anything is written, so an error
    (matplotlib missing, no feasible configuration) leaves the folder untouched.
    """
    made = {}
    try:
        try:
            x = plots.scaling_dimension(ds)
        except ValueError:
            x = None
        if x is not None:
            made["scaling"] = plots.plot_scaling(ds, x)
        made["cdf"] = plots.plot_cdf(ds, "wall_time")
        made["pareto"] = plots.plot_pareto(ds, "wall_time", "cost")
        made["breakdown"] = plots.plot_breakdown(ds)
        text = report_markdown(ds, list(made), source)
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = [plots.save_figure(fig, folder / f"{key}.png") for key, fig in made.items()]
        write_atomic(folder / "README.md", text)
        return written + [folder / "README.md"]
    finally:
        if made:
            import matplotlib.pyplot as plt
            for fig in made.values():
                plt.close(fig)
