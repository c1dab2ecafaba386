"""Markdown of a result report: the pieces its sections are written with, and "What was simulated".

The pieces: user text made inert (:func:`markdown_text`, :func:`code_text`), a configuration as
text (:func:`configuration_text`), and the table of cost, energy and wall time at a configuration
(:func:`configuration_table`: the mean with the 95 % CI of the mean, and the 5-95 % range).

The section "What was simulated" (:func:`what_section`) lists the overrides the result was made
with (``--set``, ``--runs``, ...; the file's ``scenario_overrides``) and the layout the scenario
fixes (GPU count, parallelism, checkpoint interval: not searched, see ``mcsim plan``); the
scenario's description is left out when an override may have made it stale. Configurations with
runs censored at ``max_wall_days`` are listed with their completed share: they are never picked.
"""

from __future__ import annotations

import math
import re
import tomllib

import numpy as np
import xarray as xr

from mcsim.analysis.configurations import completed_share, config_record
from mcsim.io.format import format_coordinate
from mcsim.io.units import readable_unit
from mcsim.io.variables import VARIABLES, sweep_dims
from mcsim.report.tables import layout_assumptions

# variable, row title, factor from the stored unit
QUANTITIES = (
    ("cost", "cost [MUSD]", 1e-6),
    ("energy", "energy [MWh]", 1.0),
    ("wall_time", "wall time [days]", 1 / 24),
)

_MARKDOWN_SPECIAL = "\\`*_{}[]<>()#+-.!|~$&"
# text shown as it is: no character that makes Markdown or HTML anywhere in a line, and none that
# starts a block (a heading, a list, a quote) first
_PLAIN_TEXT = re.compile(r"(?![#>+=!_-])[^\\`*\[\]<>|~$&{}\x00-\x1f\x7f-\x9f]*")

# overrides that leave a scenario's description true: the Monte Carlo settings and the text itself
_DESCRIPTION_SAFE = ("run.", "name ", "name=", "description ", "description=")

CENSORED_SHOWN = 8  # configurations with censored runs named in the section, at most
REASONS_SHOWN = 5  # reasons of infeasibility named, at most


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


def inert(text: object, limit: int = 2000) -> str:
    """``text`` unchanged when it is plain (:data:`_PLAIN_TEXT`: none of ``\\ ` * [ ] < > | ~ $ & { }``,
    no control character, and no ``# > + = ! _ -`` first), else :func:`markdown_text`: text read from
    a file (a plan's GPU types, reasons, names) shown as it is when harmless, never as Markdown or HTML."""
    text = str(text)
    return text if _PLAIN_TEXT.fullmatch(text) and len(text) <= limit else markdown_text(text, limit)


# attributes read as data, never shown as they are (TOML, lists of names, provenance)
_DATA_ATTRS = frozenset(
    {
        "scenario_toml",
        "scenario_overrides",
        "uncertain_inputs",
        "correlated_inputs",
        "history",
        "shard_parts",
        "sweep_dims",
    }
)


def inert_dataset(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with every text attribute shown in a report (not :data:`_DATA_ATTRS`) and every text
    variable and coordinate made :func:`inert`, for a report of a file anyone may have written."""
    out = ds.copy()
    out.attrs = {k: inert(v) if isinstance(v, str) and k not in _DATA_ATTRS else v for k, v in ds.attrs.items()}
    for name, var in ds.variables.items():
        if var.dtype.kind in "OUS" and var.size:
            values = np.array([inert(v) for v in np.asarray(var.values).ravel()], dtype=object)
            out[name] = var.copy(data=values.reshape(var.shape).astype(str))
    return out


def code_text(text: str, limit: int = 200) -> str:
    """``text`` for an inline code span: one line, no backtick, at most ``limit`` characters."""
    plain = "".join(" " if (ord(c) < 32 or 127 <= ord(c) < 160 or c == "`") else c for c in text)
    return plain[:limit] + ("…" if len(plain) > limit else "")


def configuration_text(configuration: dict) -> str:
    """A configuration as ``gpus=1,024, strategy=async`` (or "the single configuration"), each part :func:`inert`."""
    return (
        ", ".join(inert(f"{d}={format_coordinate(v)}") for d, v in configuration.items()) or "the single configuration"
    )


def over_text(ds: xr.Dataset) -> str:
    """What the statistics of a configuration run over: 'runs' or 'draws and runs'."""
    return "draws and runs" if "draw" in ds.dims else "runs"


def percent_text(p: float, ci: tuple[float, float]) -> str:
    """A probability and its interval in whole percent: ``42 % (30 – 55 %)``."""
    return f"{100 * p:.0f} % ({100 * ci[0]:.0f} – {100 * ci[1]:.0f} %)"


def decimals(half_width: float) -> int:
    """Decimals that show two significant digits of ``half_width`` (0 to 6)."""
    if not math.isfinite(half_width) or half_width <= 0:
        return 3
    return int(min(6, max(0, 1 - math.floor(math.log10(half_width)))))


def _stats_row(record: dict, title: str, scale: float) -> str:
    """One row of :func:`configuration_table`: mean, its 95 % CI and the 5–95 % range, in ``scale`` units."""
    mean, (low, high), p5, p95 = (
        record["mean"] * scale,
        tuple(v * scale for v in record["ci95"]),
        record["p5"] * scale,
        record["p95"] * scale,
    )
    d = decimals((high - low) / 2)
    return f"| {title} | {mean:,.{d}f} | [{low:,.{d}f}, {high:,.{d}f}] | {p5:,.{d}f} – {p95:,.{d}f} |"


def configuration_table(ds: xr.Dataset, configuration: dict) -> list[str]:
    """Mean, 95 % CI of the mean and 5–95 % range of cost, energy and wall time at a configuration, each in
    the unit its mean reads best in (:func:`mcsim.io.units.readable_unit`)."""
    lines = [f"| quantity | mean | 95 % CI of the mean | 5–95 % of {over_text(ds)} |", "|---|---:|---:|---:|"]
    for name, title, _ in QUANTITIES:
        record = config_record(ds, configuration, name)
        stored = str(ds[name].attrs.get("units", VARIABLES[name].units))
        scale, unit = readable_unit([record["mean"]], stored)  # 1.07 USD, not 1.07e-06 MUSD
        lines.append(_stats_row(record, f"{title.split(' [')[0]} [{'days' if unit == 'd' else unit}]", scale))
    return lines


def censored_configurations(ds: xr.Dataset) -> list[tuple[dict, float]]:
    """Feasible configurations with runs censored at max_wall_days, with their completed share."""
    share = completed_share(ds)
    dims = sweep_dims(ds)
    found = []
    for index in np.ndindex(*share.shape):
        value = float(share.values[index])
        if np.isfinite(value) and value < 1.0:
            found.append(({d: ds[d].values[i].item() for d, i in zip(dims, index, strict=False)}, value))
    return found


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
    """The description of the scenario the result records ("" when there is none or it cannot be read)."""
    try:
        return str(tomllib.loads(str(attrs.get("scenario_toml", ""))).get("description", ""))
    except (tomllib.TOMLDecodeError, TypeError):
        return ""


def what_section(ds: xr.Dataset, source: str | None) -> list[str]:
    """The section "What was simulated": the scenario's description, a table of what the result holds
    (scenario, overrides, file, runs, seed, sweep, configurations, layout) and notes on the configurations
    left out of every pick (infeasible, or with censored runs)."""
    overrides = [line for line in str(ds.attrs.get("scenario_overrides", "")).splitlines() if line.strip()]
    layout = layout_assumptions(ds)
    censored = censored_configurations(ds)
    dims = sweep_dims(ds)
    n_configs = int(np.prod([ds.sizes[d] for d in dims])) if dims else 1
    n_feasible = int(completed_share(ds).notnull().sum()) if "feasible" in ds else n_configs
    rows = (
        _result_rows(ds, source, overrides)
        + [(f"sweep: {inert(d)}", ", ".join(inert(format_coordinate(v)) for v in ds[d].values.tolist())) for d in dims]
        + [("configurations", _configurations_text(n_configs, n_feasible, censored))]
        + _layout_rows(layout)
    )
    lines = ["## What was simulated", ""] + _description_lines(ds.attrs, overrides)
    lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if layout is not None:
        lines += [
            "",
            "These results answer for the layout above, as the scenario fixes it; nothing here searched "
            "for a better one. `mcsim plan` searches GPU counts, parallelism and checkpoint intervals under a "
            "deadline or a budget (docs/planning.md of mcsim's documentation).",
        ]
    if n_feasible < n_configs:
        lines += _infeasible_note(ds, n_configs - n_feasible)
    if censored:
        lines += _censored_note(censored)
    return lines


def _description_lines(attrs: dict, overrides: list[str]) -> list[str]:
    """The scenario's description, or why it is not repeated (an override may have made it stale)."""
    description = _description(attrs)
    if description and not _stale(overrides):
        return [markdown_text(description, limit=2000), ""]
    if description:
        return [
            "(The scenario file's description is not repeated: the overrides below change what it describes.)",
            "",
        ]
    return []


def _result_rows(ds: xr.Dataset, source: str | None, overrides: list[str]) -> list[tuple[str, str]]:
    """The rows of the scenario, its overrides, the file and how it was simulated (runs, draws, seed, mode)."""
    attrs = ds.attrs
    rows = [
        (
            "scenario",
            markdown_text(attrs.get("scenario_name", "?"))
            + (f" ({markdown_text(attrs['scenario_source'])})" if attrs.get("scenario_source") else ""),
        ),
        *([("overrides", "; ".join(f"`{code_text(o)}`" for o in overrides))] if overrides else []),
        *([("result file", markdown_text(source))] if source else []),
        *_parameter_rows(attrs),
        ("runs per configuration", f"{ds.sizes['run']:,}" + _draws_text(ds)),
        ("seed", str(attrs.get("seed", "?"))),
        ("mode", str(attrs.get("mode", "?"))),
        ("mcsim version", str(attrs.get("mcsim_version", "?"))),
        ("simulated on", str(attrs.get("created", "?"))),
    ]
    if "draw" in ds.dims:
        keys = str(attrs.get("uncertain_inputs", "")).split()
        rows.append(("uncertain inputs", ", ".join(markdown_text(k) for k in keys)))
    return rows


def _parameter_rows(attrs: dict) -> list[tuple[str, str]]:
    """``model parameters``: ``671B (37.6B active)`` for a mixture of experts, ``70.6B`` for a dense model
    (none for a file written before the attributes were, or when a sweep changes them)."""
    total, active = attrs.get("model_params"), attrs.get("model_params_active")
    if not isinstance(total, (int, float, np.number)) or not isinstance(active, (int, float, np.number)):
        return []

    total, active = float(total), float(active)
    text = f"{total / 1e9:.3g}B" + (f" ({active / 1e9:.3g}B active)" if active < total else "")
    return [("model parameters", text)]


def _draws_text(ds: xr.Dataset) -> str:
    """`` in each of 256 parameter draws (sobol design)`` with parameter draws, else ""."""
    if "draw" not in ds.dims:
        return ""
    return f" in each of {ds.sizes['draw']:,} parameter draws ({ds.attrs.get('design', '?')} design)"


def _configurations_text(n_configs: int, n_feasible: int, censored: list) -> str:
    """``64 (56 feasible, 3 of them with censored runs)``."""
    with_censored = f", {len(censored)} of them with censored runs" if censored else ""
    return f"{n_configs} ({n_feasible} feasible{with_censored})"


def _layout_rows(layout: tuple[list[tuple[str, str]], list[str]] | None) -> list[tuple[str, str]]:
    """The row of the layout the scenario fixes (none when the file records no scenario)."""
    if layout is None:
        return []
    fixed, swept = layout
    text = ", ".join(f"{label} {markdown_text(value)}" for label, value in fixed)
    return [("layout (fixed by the scenario)", text + (f" ({', '.join(swept)}: swept)" if swept else ""))]


def _infeasible_note(ds: xr.Dataset, count: int) -> list[str]:
    """How many configurations cannot run, and why (the first reasons)."""
    reasons = sorted({markdown_text(r) for r in np.asarray(ds["infeasible_reason"].values).ravel() if str(r)})
    return [
        "",
        f"{count} configurations cannot run and are left out of every pick: "
        + "; ".join(reasons[:REASONS_SHOWN])
        + (" …" if len(reasons) > REASONS_SHOWN else "")
        + ".",
    ]


def _censored_note(censored: list[tuple[dict, float]]) -> list[str]:
    """The configurations with censored runs, their completed share, and why they are never picked."""
    shown = "; ".join(f"{configuration_text(p)}: {share:.1%} completed" for p, share in censored[:CENSORED_SHOWN])
    return [
        "",
        f"**{len(censored)} configuration{'s' if len(censored) > 1 else ''} did not complete all "
        "their runs** within "
        "`run.max_wall_days`: their wall time, energy and cost stop where the runs were cut off "
        "(lower bounds), so they are left out of every pick and never on the Pareto front. "
        f"Share of runs completed: {shown}" + (" …" if len(censored) > CENSORED_SHOWN else "") + ".",
    ]
