"""A Markdown report of a result file: what was simulated, the best picks, figures.

:func:`write_report` writes ``README.md`` and the figures that apply
(``scaling.png`` when there is a ``gpus`` dimension or a single sweep dimension,
``cdf.png``, ``pareto.png``, ``breakdown.png``) into a folder, each file atomically.
The picks come from :mod:`mcsim.analysis`: :func:`~mcsim.analysis.best` of cost,
energy and wall time (a pick that differs from an earlier one is compared with it by
:func:`~mcsim.analysis.paired_difference`, and called equivalent when the CI of the
difference contains 0), :func:`~mcsim.analysis.pareto_front` of (wall time, cost) and, when a deadline is given
(``mcsim report --deadline DAYS [--probability P]``; none is invented),
:func:`~mcsim.analysis.cheapest_within` it, or the configuration that came closest.
Configurations with runs censored at ``max_wall_days`` are listed with their completed
share and never picked. "What was simulated" lists the overrides the result was made
with (``--set``, ``--runs``, ...; the file's ``scenario_overrides``) and the layout the
scenario fixes (GPU count, parallelism, checkpoint interval: not searched, see ``mcsim
plan``); the scenario's description is left out when an override may have made it stale.

A result with parameter draws (``run.draws``) is summarised over draws and runs
together (the predictive distribution; CIs of means from the spread of the draw
means), and gets a section "Decision under uncertainty": the robust choice on cost
(:func:`mcsim.robustness.robustness`), P(best) and expected regret of the leading
configurations, the pooled probability of meeting the deadline, and the input that
would change the choice, and a section "Which input matters most": the ranking of
the inputs by their sensitivity indices on cost at the best configuration, with the
tornado figure ``sensitivity.png`` (:mod:`mcsim.tornado`). Its other figures are drawn
from the draws and runs pooled per configuration (:func:`pooled_over_draws`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.analysis.compare import paired_difference
from mcsim.analysis.configurations import check_days, check_probability, completed_share, config_record, eligible
from mcsim.analysis.deadline import cheapest_within, prob_within
from mcsim.analysis.ranking import best, pareto_front
from mcsim.errors import NoneQualifies
from mcsim.io.atomic import write_atomic
from mcsim.io.format import format_coordinate, format_money, format_significant
from mcsim.io.variables import sweep_dims
from mcsim.report import plots
from mcsim.report.tables import layout_assumptions

PROBABILITY = 0.9  # cheapest_within: default required share of runs finishing in time

# variable, row title, factor from the stored unit
_QUANTITIES = (
    ("cost", "cost [MUSD]", 1e-6),
    ("energy", "energy [MWh]", 1.0),
    ("wall_time", "wall time [days]", 1 / 24),
)
_FIGURES = (
    (
        "scaling",
        "Scaling",
        "Mean wall time, energy, cost and ETTR against the number of GPUs (or the one swept dimension), with the "
        "5–95 % range over runs; an x on the axis marks an infeasible configuration, a hollow marker one with runs "
        "censored at the wall-time limit.",
    ),
    (
        "cdf",
        "Distribution of wall time",
        "Empirical distribution function of the wall time over runs, per configuration.",
    ),
    (
        "pareto",
        "Trade-off of wall time and cost",
        "Every feasible configuration at its mean, bars from the 5th to the 95th percentile; the Pareto front in red.",
    ),
    (
        "breakdown",
        "Where wall time and energy go",
        "Mean wall time and energy split into their parts, and the parts other than compute as shares.",
    ),
)


def _over(ds: xr.Dataset) -> str:
    """What the statistics of a configuration run over: 'runs' or 'draws and runs'."""
    return "draws and runs" if "draw" in ds.dims else "runs"


def pooled_over_draws(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each configuration's draws and runs as one ``run`` dimension (D x R runs).

    Per-run variables are reshaped (draw-major); per-configuration variables along
    ``draw`` are reduced: ``feasible`` to feasible in every draw, numbers to their mean
    over draws, text to the first draw's; the inputs' drawn values are left out. A result
    without draws is returned as it is. For figures, which show the predictive
    distribution of each configuration.
    """
    if "draw" not in ds.dims:
        return ds
    draws, runs = ds.sizes["draw"], ds.sizes["run"]
    variables: dict[Hashable, xr.Variable | xr.DataArray] = {}
    for name, var in ds.data_vars.items():
        if "draw" not in var.dims:
            variables[name] = var
            continue
        others = [d for d in var.dims if d not in ("draw", "run")]
        if not others and "run" not in var.dims:
            continue  # an input's drawn values
        if "run" in var.dims:
            values = var.transpose(*others, "draw", "run").values
            variables[name] = xr.Variable(
                (*others, "run"), values.reshape(values.shape[:-2] + (draws * runs,)), var.attrs
            )
        elif var.dtype == bool:
            variables[name] = var.all("draw").variable
        elif var.dtype.kind in "fiu":
            variables[name] = (
                var.mean("draw").variable.astype(var.dtype) if var.dtype.kind == "f" else var.isel(draw=0).variable
            )
        else:
            variables[name] = var.isel(draw=0).variable
    coords = {d: ds[d] for d in sweep_dims(ds)} | {"run": np.arange(draws * runs)}
    return xr.Dataset(variables, coords=coords, attrs=dict(ds.attrs))


def _config_text(configuration: dict) -> str:
    return ", ".join(f"{d}={format_coordinate(v)}" for d, v in configuration.items()) or "the single configuration"


def _decimals(half_width: float) -> int:
    """Decimals that show two significant digits of ``half_width`` (0 to 6)."""
    if not math.isfinite(half_width) or half_width <= 0:
        return 3
    return int(min(6, max(0, 1 - math.floor(math.log10(half_width)))))


def _stats_row(record: dict, title: str, scale: float) -> str:
    mean, (low, high), p5, p95 = (
        record["mean"] * scale,
        tuple(v * scale for v in record["ci95"]),
        record["p5"] * scale,
        record["p95"] * scale,
    )
    d = _decimals((high - low) / 2)
    return f"| {title} | {mean:,.{d}f} | [{low:,.{d}f}, {high:,.{d}f}] | {p5:,.{d}f} – {p95:,.{d}f} |"


def _select(ds: xr.Dataset, configuration: dict) -> xr.Dataset:
    return ds.sel(configuration) if configuration else ds


def _config_table(ds: xr.Dataset, configuration: dict) -> list[str]:
    """Mean, 95 % CI of the mean and 5–95 % range of cost, energy and wall time at a configuration."""
    lines = [f"| quantity | mean | 95 % CI of the mean | 5–95 % of {_over(ds)} |", "|---|---:|---:|---:|"]
    for name, title, scale in _QUANTITIES:
        lines.append(_stats_row(config_record(ds, configuration, name), title, scale))
    return lines


def _censored_configs(ds: xr.Dataset) -> list[tuple[dict, float]]:
    """Feasible configurations with runs censored at max_wall_days, with their completed share."""
    share = completed_share(ds)
    dims = sweep_dims(ds)
    found = []
    for index in np.ndindex(*share.shape):
        value = float(share.values[index])
        if np.isfinite(value) and value < 1.0:
            found.append(({d: ds[d].values[i].item() for d, i in zip(dims, index, strict=False)}, value))
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
    dims = sweep_dims(ds)
    n_configs = int(np.prod([ds.sizes[d] for d in dims])) if dims else 1
    n_feasible = int(completed_share(ds).notnull().sum()) if "feasible" in ds else n_configs
    rows = [
        (
            "scenario",
            markdown_text(attrs.get("scenario_name", "?"))
            + (f" ({markdown_text(attrs['scenario_source'])})" if attrs.get("scenario_source") else ""),
        ),
        (
            "runs per configuration",
            f"{ds.sizes['run']:,}"
            + (
                f" in each of {ds.sizes['draw']:,} parameter draws ({attrs.get('design', '?')} design)"
                if "draw" in ds.dims
                else ""
            ),
        ),
        ("seed", str(attrs.get("seed", "?"))),
        ("mode", str(attrs.get("mode", "?"))),
        ("mcsim version", str(attrs.get("mcsim_version", "?"))),
        ("simulated on", str(attrs.get("created", "?"))),
    ]
    if source:
        rows.insert(1, ("result file", markdown_text(source)))
    if "draw" in ds.dims:
        rows.append(
            ("uncertain inputs", ", ".join(markdown_text(k) for k in str(attrs.get("uncertain_inputs", "")).split()))
        )
    for d in dims:
        rows.append((f"sweep: {d}", ", ".join(format_coordinate(v) for v in ds[d].values.tolist())))
    censored = _censored_configs(ds)
    rows.append(
        (
            "configurations",
            f"{n_configs} ({n_feasible} feasible"
            + (f", {len(censored)} of them with censored runs" if censored else "")
            + ")",
        )
    )
    overrides = [line for line in str(attrs.get("scenario_overrides", "")).splitlines() if line.strip()]
    if overrides:
        rows.insert(1, ("overrides", "; ".join(f"`{_code_text(o)}`" for o in overrides)))
    layout = layout_assumptions(ds)
    if layout is not None:
        fixed, swept = layout
        rows.append(
            (
                "layout (fixed by the scenario)",
                ", ".join(f"{label} {markdown_text(value)}" for label, value in fixed)
                + (f" ({', '.join(swept)}: swept)" if swept else ""),
            )
        )
    lines = ["## What was simulated", ""]
    description = _description(attrs)
    if description and not _stale(overrides):
        lines += [markdown_text(description, limit=2000), ""]
    elif description:
        lines += [
            "(The scenario file's description is not repeated: the overrides below change what it describes.)",
            "",
        ]
    lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if layout is not None:
        lines += [
            "",
            "These results answer for the layout above, as the scenario fixes it; nothing here searched "
            "for a better one. `mcsim plan` searches GPU counts, parallelism and checkpoint intervals under a "
            "deadline or a budget (docs/planning.md of mcsim's documentation).",
        ]
    if n_feasible < n_configs:
        reasons = sorted({markdown_text(r) for r in np.asarray(ds["infeasible_reason"].values).ravel() if str(r)})
        lines += [
            "",
            f"{n_configs - n_feasible} configurations cannot run and are left out of every pick: "
            + "; ".join(reasons[:5])
            + (" …" if len(reasons) > 5 else "")
            + ".",
        ]
    if censored:
        shown = "; ".join(f"{_config_text(p)}: {share:.1%} completed" for p, share in censored[:8])
        lines += [
            "",
            f"**{len(censored)} configuration{'s' if len(censored) > 1 else ''} did not complete all "
            "their runs** within "
            "`run.max_wall_days`: their wall time, energy and cost stop where the runs were cut off "
            "(lower bounds), so they are left out of every pick and never on the Pareto front. "
            f"Share of runs completed: {shown}" + (" …" if len(censored) > 8 else "") + ".",
        ]
    return lines


def _code_text(text: str, limit: int = 200) -> str:
    """``text`` for an inline code span: one line, no backtick, at most ``limit`` characters."""
    plain = "".join(" " if (ord(c) < 32 or 127 <= ord(c) < 160 or c == "`") else c for c in text)
    return plain[:limit] + ("…" if len(plain) > limit else "")


# overrides that leave a scenario's description true: the Monte Carlo settings and the text itself
_DESCRIPTION_SAFE = ("run.", "name ", "name=", "description ", "description=")


def _stale(overrides: list[str]) -> bool:
    """Whether an override may have made the scenario file's description stale.

    Every override but those of ``[run]`` (runs, seed, mode, draws: how it is simulated,
    not what) and of ``name`` may change what the description says; one of
    ``description`` replaces it, so it is fresh again.
    """
    if any(o.startswith(("description ", "description=")) for o in overrides):
        return False
    return any(not o.startswith(_DESCRIPTION_SAFE) for o in overrides)


def _description(attrs: dict) -> str:
    import tomllib

    try:
        return str(tomllib.loads(str(attrs.get("scenario_toml", ""))).get("description", ""))
    except (tomllib.TOMLDecodeError, TypeError):
        return ""


def _pareto_table(ds: xr.Dataset) -> list[str]:
    front = pareto_front(ds, ("wall_time", "cost"))
    dims = sweep_dims(ds)
    points = [
        {d: ds[d].values[i].item() for d, i in zip(dims, index, strict=False)}
        for index in np.ndindex(*front.shape)
        if bool(front.values[index])
    ]
    rows = []
    for p in points:
        one = _select(ds, p)
        wall, cost, energy = (
            one[n].values.astype(float) * s for n, s in (("wall_time", 1 / 24), ("cost", 1e-6), ("energy", 1.0))
        )
        rows.append(
            (
                wall.mean(),
                [format_coordinate(p[d]) for d in dims]
                + [
                    f"{format_significant(v.mean(), 4)} ({format_significant(np.percentile(v, 5), 4)} – "
                    f"{format_significant(np.percentile(v, 95), 4)})"
                    for v in (wall, cost)
                ]
                + [format_significant(energy.mean())],
            )
        )
    header = (dims or ["configuration"]) + ["wall time [days]", "cost [MUSD]", "energy [MWh]"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(dims or [1]) + "---:|---:|---:|"]
    for _, cells in sorted(rows, key=lambda r: r[0]):
        lines.append("| " + " | ".join(cells if dims else ["the single configuration"] + cells) + " |")
    return [
        "## Pareto front of wall time and cost",
        "",
        f"The feasible configurations that no other beats on both mean wall time and mean cost "
        f"({len(rows)} of the {int(eligible(ds).sum())} feasible configurations whose runs all "
        "completed), fastest first; "
        f"mean (5th – 95th percentile over {_over(ds)}).",
        "",
    ] + lines


def _deadline(ds: xr.Dataset, days: float | None, probability: float) -> list[str]:
    """The section "Cheapest configuration within a deadline" (a pointer to ``--deadline`` without one)."""
    lines = ["## Cheapest configuration within a deadline", ""]
    if days is None:
        return lines + [
            "No deadline given: `mcsim report FILE --deadline DAYS [--probability P]` (or "
            "`mcsim.report(..., deadline=DAYS)`) adds the cheapest configuration that finishes within DAYS "
            f"with probability at least P (default {PROBABILITY:g}).",
        ]
    lines += [
        f"Deadline D = {days:g} days (given). A configuration qualifies when at least {100 * probability:g} % of "
        "its runs complete within D (runs stopped at the wall-time limit count as late)"
        + (
            ", counting the runs of all parameter draws together (the predictive probability)"
            if "draw" in ds.dims
            else ""
        )
        + ".",
        "",
    ]
    try:
        pick = cheapest_within(ds, days, probability)
    except NoneQualifies as err:
        lines.append(f"**No configuration finishes within {days:g} days with probability ≥ {probability:g}.**")
        if err.closest is not None:
            low, high = err.closest["p_within_ci95"]
            lines += [
                "",
                f"The closest is {_config_text(err.closest['configuration'])}: it finishes in time with probability "
                f"{100 * err.closest['p_within']:.1f} % (95 % interval {100 * low:.1f} – {100 * high:.1f} %).",
            ]
        return lines
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
    lines += [
        f"The cheapest configuration that finishes within {days:g} days with probability ≥ {probability:g}: "
        f"**{_config_text(pick['configuration'])}**; it finishes in time in {share}.",
        "",
    ]
    lines += _config_table(ds, pick["configuration"])
    return lines


_PICKS = (
    ("Cost-optimal", "cost", "lowest mean cost"),
    ("Energy-optimal", "energy", "lowest mean energy"),
    ("Fastest", "wall_time", "lowest mean wall time"),
)
_SHOWN = {name: (title.split(" [")[0], title.split("[")[1].rstrip("]"), scale) for name, title, scale in _QUANTITIES}


def _difference_text(ds: xr.Dataset, record: dict, other: dict, objective: str) -> str:
    """Paired difference of ``objective`` between two picks, and whether it is within the uncertainty."""
    diff = paired_difference(ds, record["configuration"], other["configuration"], objective)
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
        lines += [
            f"### {title}: {_config_text(record['configuration'])}",
            "",
            f"The {meaning}" + (f": the same configuration as the {same.lower()} one above." if same else "."),
            "",
        ]
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
            lines += [
                f"Against the {other_title.lower()} configuration ({_config_text(configuration)}), mean of "
                "the paired differences over runs with its 95 % CI: " + "; ".join(parts) + ".",
                "",
            ]
    return lines


def _p_text(p: float, ci: tuple[float, float]) -> str:
    return f"{100 * p:.0f} % ({100 * ci[0]:.0f} – {100 * ci[1]:.0f} %)"


def decision_section(
    ds: xr.Dataset, days: float | None, objective: str = "cost", probability: float = PROBABILITY
) -> list[str]:
    """ "Decision under uncertainty": the robust choice on ``objective``, its P(best) and expected
    regret, the leading configurations, the pooled probability of finishing within ``days``
    (when a deadline is given) and the input that would change the choice
    (:func:`mcsim.robustness.robustness`)."""
    from mcsim.analysis.robustness import robustness

    found = robustness(ds, objective)
    choice, units, draws = found["choice"], found["units"], found["draws"]
    lines = [
        "## Decision under uncertainty",
        "",
        f"Over the {draws:,} parameter draws of the uncertain inputs, each configuration's {objective} in a "
        f"draw is its mean over the draw's {ds.sizes['run']:,} runs. P(best) is the share of draws in which a "
        "configuration is the best (95 % Wilson interval over draws); its regret in a draw is what it loses "
        "against that draw's best, and the expected regret is the mean over draws. The robust choice is the "
        "configuration of least expected regret.",
        "",
        f"**Robust choice on {objective}: {_config_text(choice['configuration'])}**: best in "
        f"{_p_text(choice['p_best'], choice['p_best_ci95'])} of the draws, expected regret "
        f"{format_money(choice['expected_regret'], units)} (95 % CI up to "
        f"{format_money(choice['expected_regret_ci95'][1], units)}).",
        "",
        "| configuration | P(best) | 95 % interval | won beyond the runs' noise | expected regret |",
        "|---|---:|---:|---:|---:|",
    ]
    for leader in found["leaders"]:
        low, high = leader["p_best_ci95"]
        lines.append(
            f"| {_config_text(leader['configuration'])} | {100 * leader['p_best']:.1f} % | "
            f"{100 * low:.1f} – {100 * high:.1f} % | {100 * leader['p_best_clear']:.1f} % | "
            f"{format_money(leader['expected_regret'], units)} |"
        )
    lines += [
        "",
        '("won beyond the runs\' noise": draws won by more than 1.96 standard errors of the paired '
        "difference to the runner-up; the rest of P(best) was decided within the Monte Carlo noise.)",
        "",
    ]
    if days is not None:
        within = prob_within(ds, days, probability)
        one = within.sel(choice["configuration"]) if choice["configuration"] else within
        interval = (float(one["p_within_ci95_low"]), float(one["p_within_ci95_high"]))
        lines += [
            f"The robust choice finishes within {days:g} days with probability "
            f"{_p_text(float(one['p_within']), interval)}, pooled over draws and runs; in "
            f"{100 * float(one['draws_meeting']):.0f} % of the draws its own probability reaches {probability:g}.",
            "",
        ]
    lines += [_changing_text(found)]
    return lines


def _changing_text(found: dict) -> str:
    """One or two sentences: which input would change the robust choice, and what knowing it is worth."""
    units = found["units"]
    changing = next((item for item in found["inputs"] if item["changes"]), None)
    if changing is None:
        return (
            "**No single input changes the choice**: split at each uncertain input's median, the robust "
            "choice stays the best in both halves."
        )
    parts = [p for p in changing["groups"] if p["best"] != found["choice"]["configuration"]]
    part = max(parts, key=lambda p: p["pick_regret"])
    side = "below" if part is changing["groups"][0] else "above"
    edge = part["range"][1] if side == "below" else part["range"][0]
    low, high = part["pick_regret_ci95"]
    text = (
        f"**Which input would change it: {markdown_text(changing['input'])}.** In the draws with "
        f"{markdown_text(changing['input'])} {side} {format_significant(edge)} "
        f"{markdown_text(changing['units']) if changing['units'] not in ('', '1') else ''}".rstrip()
        + f", {_config_text(part['best'])} is better on average; the robust choice loses "
        f"{format_money(part['pick_regret'], units)} there "
        f"(95 % CI {format_money(low, units)} to {format_money(high, units)}"
        + ("" if low > 0 else ", which includes 0: the change may be noise")
        + "). "
        f"Knowing which side of its median it falls on before choosing would save "
        f"{format_money(changing['value_of_information'], units)} on average"
    )
    others = [item["input"] for item in found["inputs"] if item is not changing and item["value_of_information"] > 0]
    return text + (f"; next: {', '.join(markdown_text(o) for o in others[:3])}." if others else ".")


def sensitivity_section(ds: xr.Dataset, found: tuple[dict, xr.Dataset] | str, figures: list[str]) -> list[str]:
    """ "Which input matters most": the ranking of the inputs at the chosen configuration, the figure.

    ``found``: :func:`mcsim.tornado.point_sensitivity` of cost, or why there is none.
    """
    from mcsim.report.tornado import ranking

    lines = ["## Which input matters most", ""]
    if isinstance(found, str):
        return lines + [f"No ranking: {markdown_text(found)}.", ""]
    point, result = found
    output = result.attrs["output"]
    main = "ST" if result.attrs["method"] == "sobol" else "delta"
    how = (
        "total (ST) and first-order (S1) Sobol indices from the Saltelli design"
        if main == "ST"
        else f"the moment-independent delta and the first-order index S1 from the given {result.attrs['design']} "
        'draws (a total index needs run.design = "saltelli")'
    )
    where = f" at {_config_text(point)} (the best mean {output.replace('_', ' ')})" if point else ""
    lines += [
        f"How much of the spread of the mean {output.replace('_', ' ')} per draw{where} each uncertain input "
        f"explains, over {ds.sizes['draw']:,} draws: {how}, with 95 % bootstrap intervals; ranked by {main}.",
        "",
        f"| rank | input | drawn 5–95 % | {main} [95 % CI] | S1 [95 % CI] |",
        "|---|---|---|---|---|",
    ]
    for row in ranking(ds, result, point):
        unit = "" if row["units"] in ("", "1") else f" {markdown_text(row['units'])}"
        cells = [f"{v:.2f} [{lo:.2f}, {hi:.2f}]" for v, lo, hi in (row[main], row["S1"])]
        lines.append(
            f"| {row['rank']} | {markdown_text(row['input'])} | "
            f"{format_significant(row['p5'])} – {format_significant(row['p95'])}{unit} "
            f"| {cells[0]} | {cells[1]} |"
        )
    if result.attrs.get("correlated_inputs"):
        lines += [
            "",
            "Correlated inputs ("
            + ", ".join(markdown_text(k) for k in result.attrs["correlated_inputs"].split())
            + "): each one's indices include the effect it carries through the others; they overlap and do "
            "not add up.",
        ]
    if "sensitivity" in figures:
        lines += ["", "![Which input matters most](sensitivity.png)"]
    return lines + [""]


def _point_sensitivity(
    ds: xr.Dataset, resamples: int | None = None, progress: bool | None = None
) -> tuple[dict, xr.Dataset] | str:
    """The indices of cost at the chosen configuration, or why there are none."""
    from mcsim.report.tornado import point_sensitivity

    try:
        return point_sensitivity(ds, "cost", resamples=resamples, progress=progress)
    except ValueError as err:
        return str(err)


def report_markdown(
    ds: xr.Dataset,
    figures: list[str],
    source: str | None = None,
    sensitivity: tuple[dict, xr.Dataset] | str | None = None,
    deadline: float | None = None,
    probability: float = PROBABILITY,
) -> str:
    """The report's Markdown; ``figures`` are the names (without .png) of the figures beside it.

    With parameter draws, ``sensitivity`` is :func:`mcsim.tornado.point_sensitivity` of cost
    (computed when not given) for the section "Which input matters most". ``deadline``
    [days] and ``probability`` (in (0, 1)) are the question of the section "Cheapest
    configuration within a deadline"; without a deadline it says how to ask it.
    """
    if deadline is not None:
        deadline = check_days(deadline)
    probability = check_probability(probability)
    name = ds.attrs.get("scenario_name", "mcsim results")
    runs = ds.sizes["run"]
    if "draw" in ds.dims:
        intro = (
            f"Monte Carlo results over {ds.sizes['draw']:,} parameter draws of the uncertain inputs × "
            f"{runs:,} runs per draw, per configuration. Means carry the 95 % confidence interval of the "
            "mean from the spread of the draw means (the draws are the independent units); ranges are the "
            "5th and 95th percentiles over draws and runs (the predictive interval: input uncertainty and "
            "chance). Draw d has the same input values and random streams in every configuration, so "
            "comparisons pair (draw, run)."
        )
    else:
        intro = (
            f"Monte Carlo results over {runs:,} runs per configuration. Means carry the 95 % confidence "
            "interval of the mean (normal approximation); ranges are the 5th and 95th percentiles over runs. "
            "Runs share their random streams across configurations (common random numbers)."
        )
    lines = [f"# mcsim report: {markdown_text(name)}", "", intro, ""]
    lines += _what(ds, source) + [""]
    lines += ["## Best configurations", ""]
    try:
        records = {objective: best(ds, objective) for _, objective, _ in _PICKS}
    except ValueError as err:
        records = None
        lines += [f"**No configuration can be ranked**: {err}.", ""]
    if records is not None:
        lines += _picks(ds, records)
        lines += _pareto_table(ds) + [""]
        lines += _deadline(ds, deadline, probability) + [""]
        if "draw" in ds.dims:
            lines += decision_section(ds, deadline, probability=probability) + [""]
    if "draw" in ds.dims:
        lines += sensitivity_section(ds, _point_sensitivity(ds) if sensitivity is None else sensitivity, figures)
    lines += ["## Figures", ""]
    for key, title, caption in _FIGURES:
        if key in figures:
            lines += [f"### {title}", "", f"![{title}]({key}.png)", "", caption, ""]
    if "scaling" not in figures:
        lines += ["(No scaling figure: the file has no `gpus` sweep dimension nor a single sweep dimension.)", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(
    ds: xr.Dataset,
    folder: str | Path,
    source: str | None = None,
    *,
    deadline: float | None = None,
    probability: float = PROBABILITY,
    resamples: int | None = None,
    progress: bool | None = None,
) -> list[Path]:
    """Write ``README.md`` and the figures into ``folder`` (created if needed); returns the paths.

    Every figure and the text are made before anything is written, so an error
    (matplotlib missing, no feasible configuration, a deadline out of range) leaves the
    folder untouched. ``deadline`` [days] and ``probability``: see :func:`report_markdown`;
    ``resamples`` and ``progress``: those of the sensitivity indices
    (:func:`mcsim.analysis.sensitivity.sensitivity`), with parameter draws.
    """
    if deadline is not None:
        deadline = check_days(deadline)
    probability = check_probability(probability)
    made = {}
    shown = pooled_over_draws(ds)  # figures: each configuration's draws and runs together
    try:
        try:
            x = plots.scaling_dimension(shown)
        except ValueError:
            x = None
        if x is not None:
            made["scaling"] = plots.plot_scaling(shown, x)
        made["cdf"] = plots.plot_cdf(shown, "wall_time")
        made["pareto"] = plots.plot_pareto(shown, "wall_time", "cost")
        made["breakdown"] = plots.plot_breakdown(shown)
        found = _point_sensitivity(ds, resamples, progress) if "draw" in ds.dims else None
        if isinstance(found, tuple):
            from mcsim.report.tornado import plot_sensitivity

            made["sensitivity"] = plot_sensitivity(ds, "cost", *found)
        text = report_markdown(ds, list(made), source, found, deadline, probability)
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
