"""A plan file written up as a report folder: recognised, checked, explained, and its recommendation as a scenario.

:func:`write_plan_report` is what ``mcsim report PLAN.nc`` does: it checks that the file holds every
variable and attribute the report reads (:func:`check_plan_dataset`), then writes ``README.md``
(:func:`mcsim.report.plan.explain.explain_plan`) and ``recommended.toml``, the plan's scenario with
the recommended configuration (:func:`recommended_toml`), which ``mcsim run`` simulates.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mcsim.errors import ScenarioError
from mcsim.io.atomic import write_atomic
from mcsim.io.netcdf import open_results
from mcsim.planning.dataset import PLAN_VARIABLES, layout_label
from mcsim.report.markdown import inert, inert_dataset
from mcsim.report.plan.calibration import check_calibration
from mcsim.report.plan.explain import explain_plan
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.toml import dumps_toml

RECOMMENDED_FILE = "recommended.toml"


def write_plan_report(source: str | Path | xr.Dataset, folder: str | Path, name: str | None = None) -> list[Path]:
    """Write ``folder/README.md`` explaining the plan in ``source`` and ``folder/recommended.toml``, the
    recommendation as a scenario ``mcsim run`` runs (:func:`recommended_toml`); returns the files written.

    Parameters
    ----------
    source : str, Path or xarray.Dataset
        A plan file of ``mcsim plan``, or the plan's dataset (:func:`mcsim.plan`).
    folder : str or Path
        Where to write (created if needed).
    name : str, optional
        The plan file's name shown in the report (default: that of ``source``; ``plan.nc`` for a dataset).

    Raises
    ------
    ValueError
        One line, before anything is written, when ``source`` is not a complete plan or its
        recommendation is not a valid scenario.
    """
    ds = source if isinstance(source, xr.Dataset) else open_results(source)
    check_plan_dataset(ds)
    if name is None:
        name = "plan.nc" if isinstance(source, xr.Dataset) else Path(source).name
    scenario = recommended_toml(ds, name)
    text = explain_plan(inert_dataset(ds), inert(name)) + _rerun_text(
        tomllib.loads(scenario).get("run", {}).get("draws", 0)
    )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [write_atomic(folder / "README.md", text), write_atomic(folder / RECOMMENDED_FILE, scenario)]


def _rerun_text(draws: int) -> str:
    """How the recommendation's scenario file runs, and whether its runs repeat the plan's."""
    head = (
        f"\n\nThe recommendation as a scenario: [`{RECOMMENDED_FILE}`]({RECOMMENDED_FILE}), the plan's scenario "
        f"with the recommended configuration; from this folder, `mcsim run {RECOMMENDED_FILE}` simulates it"
    )
    if not draws:
        return head + (
            " (run r draws from the same streams as run r of the plan's simulation, so its first runs repeat "
            "the recommendation's).\n"
        )
    return head + (
        f" with its [uncertain] inputs drawn {draws} times ({draws} x run.runs runs), so its spread includes "
        "them (the plan simulated the inputs' given values); without the [uncertain] table run r draws from "
        "the same streams as run r of the plan's simulation, so its first runs repeat the recommendation's.\n"
    )


def _interval_value(label: str) -> str | dict[str, float | int]:
    """The TOML value of a checkpoint interval from its label (``young_daly``, ``60min``, ``500it``;
    :attr:`mcsim.scenario.schema.Interval.label` writes the number so that it reads back exactly)."""
    if label.endswith("min"):
        return {"minutes": float(label[:-3])}
    if label.endswith("it"):
        return {"iterations": int(float(label[:-2]))}
    return label


def recommended_scenario(ds: xr.Dataset) -> dict:
    """The raw tables of a scenario file for the plan's recommendation: the plan's scenario
    (``scenario_toml``) with the recommended GPU type, size, layout, recomputation, checkpoint
    strategy and interval and clock, as :func:`mcsim.planning.candidates.candidate_config` makes it.

    Raises
    ------
    ValueError
        When ``recommended`` is not a candidate index of the file.
    """
    index = int(ds["recommended"]) if np.isfinite(float(ds["recommended"])) else -1
    if not 0 <= index < ds.sizes["candidate"]:
        raise ValueError(
            f"recommended = {ds['recommended'].item()} is not a candidate index (0..{ds.sizes['candidate'] - 1})"
        )
    raw = tomllib.loads(str(ds.attrs["scenario_toml"]))
    c = ds.isel(candidate=index)
    raw["name"] = f"{raw.get('name', ds.attrs.get('scenario_name', 'plan'))}-recommended"
    raw["description"] = f"The recommendation of mcsim plan ({ds.attrs['objective']}): {layout_label(ds, index)}"
    updates: dict[str, dict[str, Any]] = {
        "hardware": {"gpu": str(c["gpu_type"].item())},
        "parallelism": {name: int(c[name]) for name in ("gpus", "tp", "pp", "microbatch", "interleave")},
        "model": {"recompute": str(c["recompute"].item())},
        "compute": {"freq_mhz": float(c["freq_mhz"])},
        "checkpoint": {"strategy": str(c["strategy"].item()), "interval": _interval_value(str(c["interval"].item()))},
    }
    # plan files written before the planner searched sequence parallelism and the ZeRO stage have neither
    if "sequence_parallel" in c.variables:
        updates["parallelism"]["sequence_parallel"] = bool(int(c["sequence_parallel"]))
        updates["parallelism"]["zero_stage"] = int(c["zero_stage"])
    if "cp" in c.variables:
        updates["parallelism"]["cp"] = int(c["cp"])
    if "ep" in c.variables:  # a mixture of experts' plan: its expert layout
        updates["parallelism"]["ep"] = int(c["ep"])
        updates["parallelism"]["expert_tp"] = int(c["expert_tp"])
    for table, values in updates.items():
        raw[table] = {**raw.get(table, {}), **values}
    return raw


def recommended_toml(ds: xr.Dataset, source: str = "plan.nc") -> str:
    """:func:`recommended_scenario` as the text of a scenario file, checked by the scenario validator.

    Raises
    ------
    ValueError
        When the recommendation is not a valid scenario (one line: the key and what was expected).
    """
    raw = recommended_scenario(ds)
    try:
        scenario_from_dict(raw, RECOMMENDED_FILE)
    except ScenarioError as err:
        raise ValueError(f"the recommendation is not a valid scenario: {err}") from None
    safe = _one_line(source)
    header = (
        f"# The recommendation of `mcsim plan`, written by `mcsim report` from {safe}:\n"
        f"# {_one_line(layout_label(ds, int(ds['recommended'])))}; P(correct selection) {float(ds['pcs']):.3f}.\n"
        "# The plan's scenario with the recommended configuration. Run it: mcsim run recommended.toml\n"
    )
    return header + dumps_toml(raw)


def _one_line(text: str) -> str:
    """``text`` for a TOML comment: what is not printable (a line break, which would end the comment) as ``?``."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


# Kept by every plan file (those added later, "objective" and "uncertain_rejection", have fallbacks).
_REQUIRED_ATTRS = ("objective", "indifference", "margin", "selection_reason", "candidates_enumerated")
_LATER = ("objective", "uncertain_rejection")
_CANDIDATE_VARIABLES = (
    "rejection_reason",
    "gpu_type",
    "gpus",
    "tp",
    "pp",
    "dp",
    "microbatch",
    "interleave",
    "recompute",
    "strategy",
    "interval",
    "freq_mhz",
)


def check_plan_dataset(ds: xr.Dataset) -> None:
    """Raise ValueError (one line) when ``ds`` lacks a variable or attribute the plan report reads."""
    names = [n for n in (*PLAN_VARIABLES, *_CANDIDATE_VARIABLES) if n not in _LATER]
    missing = [n for n in names if n not in ds.variables]
    if missing:
        raise ValueError(f"not a complete plan file: no variable {', '.join(missing)}")
    missing = [n for n in _REQUIRED_ATTRS if n not in ds.attrs]
    if missing:
        raise ValueError(f"not a complete plan file: no attribute {', '.join(missing)}")
    _check_indices(ds)
    _check_values(ds)
    check_calibration(ds)


def _check_values(ds: xr.Dataset) -> None:
    """Raise ValueError (one line) when the selection's figures are out of their range: P(correct
    selection) in [0, 1], the indifference zone in (0, 0.5] and the margin >= 0 (as a plan file's
    keys allow), half-widths >= 0, and runs behind the recommendation's mean (a report would print
    ``P(CS) >= nan``, ``± -5`` or "mean over 0 runs")."""
    runs = np.asarray(ds["finalist_runs"].values)
    recommended = int(np.flatnonzero(np.asarray(ds["finalist_candidate"].values) == int(ds["recommended"]))[0])
    half = np.asarray(ds["finalist_half_width"].values, dtype=float)
    checks = (
        ("pcs", float(np.asarray(ds["pcs"].values, dtype=float).ravel()[0]), lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
        ("indifference", _number(ds.attrs["indifference"]), lambda v: 0.0 < v <= 0.5, "in (0, 0.5]"),
        ("margin", _number(ds.attrs["margin"]), lambda v: 0.0 <= v <= 10.0, "in [0, 10]"),
        ("finalist_half_width", float(np.nanmin(half, initial=0.0)), lambda v: v >= 0.0, ">= 0"),
        ("finalist_runs", float(runs.ravel()[recommended]), lambda v: v >= 1.0, ">= 1 for the recommendation"),
    )
    for name, value, valid, expected in checks:
        if not (np.isfinite(value) and valid(value)):
            raise ValueError(f"{name}: expected {expected}, got {value:g}; the file is damaged or was edited")


def _number(value: object) -> float:
    """``value`` as a float; NaN when it is not a number."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _check_indices(ds: xr.Dataset) -> None:
    """Raise ValueError (one line) unless ``recommended`` and ``finalist_candidate`` are candidate indices.

    Both must be whole numbers in [0, candidates); the recommendation must be one of the finalists.
    """
    n = ds.sizes.get("candidate", 0)
    for name in ("recommended", "finalist_candidate"):
        values = np.asarray(ds[name].values)
        if values.dtype.kind not in "iu" or (values.size and not ((values >= 0) & (values < n)).all()):
            shown = values.ravel()[:5].tolist()
            raise ValueError(
                f"{name}: expected whole-number candidate indices in [0, {n}), got {shown}"
                f" ({values.dtype.name}); the file is damaged or was edited"
            )
    if ds["recommended"].size != 1 or int(ds["recommended"]) not in set(ds["finalist_candidate"].values.tolist()):
        raise ValueError(
            f"recommended: expected the candidate index of one of the finalists, got "
            f"{ds['recommended'].values.ravel()[:5].tolist()}; the file is damaged or was edited"
        )
