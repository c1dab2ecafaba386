"""Tables for programs: ``--format json`` and ``--format csv`` of the commands, and the report's table file.

Each table is a pandas DataFrame whose ``attrs["units"]`` names the unit of each column (the
units the files store: h, MW h, USD, t; ``1`` for a number without one). :func:`render` writes
it: JSON as ``{"columns": [...], "units": {...}, "rows": [{...}, ...]}`` (a number that is not
finite as ``null``), CSV with a header row of the column names (the units are in the JSON form
and in docs/units.md). The frames: the summary of a result (:func:`mcsim.analysis.summary.summary_frame`),
the validation's comparisons (:func:`validation_frame`) and the plan's finalists (:func:`plan_frame`);
:func:`table_file` writes one beside a report's README (``mcsim report --format json|csv``).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from mcsim._lazy import lazy_module
from mcsim.io.atomic import write_atomic
from mcsim.io.variables import VARIABLES

if TYPE_CHECKING:
    from pathlib import Path

    from mcsim.analysis.validation import Comparison
    from mcsim.planning import dataset as plan_dataset
else:  # a plan's layouts, at the first plan table: the planner imports the kernels (Numba)
    plan_dataset = lazy_module("mcsim.planning.dataset")


def _plain(value: Any) -> Any:
    """A cell as JSON takes it: numpy scalars as Python's, a number that is not finite as None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def render(frame: pd.DataFrame, fmt: str) -> str:
    """``frame`` as JSON (columns, units, rows) or CSV (``fmt`` ``json`` or ``csv``), without a final newline."""
    if fmt == "csv":
        return frame.to_csv(index=False, lineterminator="\n").rstrip("\n")
    units = frame.attrs.get("units", {})
    rows = [{str(k): _plain(v) for k, v in zip(frame.columns, row, strict=True)} for row in frame.itertuples(False)]
    document = {
        "columns": [str(c) for c in frame.columns],
        "units": {str(c): units.get(c, "") for c in frame.columns},
        "rows": rows,
    }
    return json.dumps(document, indent=1, allow_nan=False)


def validation_frame(rows: list[Comparison]) -> pd.DataFrame:
    """The comparisons of ``mcsim validate`` as a table: each published figure, the simulated mean and
    90 % interval (in the row's ``unit``), the accepted range, its kind, whether it is within, and why a known
    miss misses."""
    records = [
        {
            "scenario": row.published.scenario.removesuffix(".toml"),
            "quantity": row.published.quantity,
            "published": row.published.value,
            "simulated_mean": row.mean,
            "simulated_p5": row.p5,
            "simulated_p95": row.p95,
            "accepted_low": row.published.low,
            "accepted_high": row.published.high,
            "criterion": row.published.criterion,
            "kind": row.published.kind,
            "result": row.result,
            "passes": row.passes,
            "known_outside": row.published.known_outside,
            "source": row.published.source,
        }
        for row in rows
    ]
    frame = pd.DataFrame.from_records(records)
    frame.insert(2, "unit", [row.published.unit for row in rows])  # each row's own: the column "unit"
    return frame


def plan_frame(ds: xr.Dataset) -> pd.DataFrame:
    """The plan's finalists as a table: candidate, layout, simulated objective (mean, 95 % half-width,
    runs), screen estimate, Pareto mark, why dropped, and whether it is the recommendation."""
    objective = str(ds.attrs.get("objective", ""))
    unit = VARIABLES[objective].units if objective in VARIABLES else "1"
    candidates = [int(c) for c in ds["finalist_candidate"].values]
    recommended = int(ds["recommended"])
    frame = pd.DataFrame(
        {
            "candidate": candidates,
            "layout": [plan_dataset.layout_label(ds, c) for c in candidates],
            "objective_mean": np.asarray(ds["finalist_objective"].values, dtype=float),
            "objective_half_width": np.asarray(ds["finalist_half_width"].values, dtype=float),
            "runs": [int(r) for r in ds["finalist_runs"].values],
            "screen_objective": [float(ds["screen_objective"].values[c]) for c in candidates],
            "pareto": [bool(p) for p in ds["pareto"].values],
            "dropped": [str(d) for d in ds["finalist_dropped"].values],
            "recommended": [c == recommended for c in candidates],
        }
    )
    frame.attrs["units"] = {"objective_mean": unit, "objective_half_width": unit, "screen_objective": unit}
    frame.attrs["objective"] = objective
    return frame


def table_file(folder: Path, stem: str, frame: pd.DataFrame, fmt: str) -> Path:
    """Write ``frame`` as ``folder/<stem>.<fmt>`` (:func:`render`, a final newline); returns its path."""
    path = folder / f"{stem}.{fmt}"
    write_atomic(path, render(frame, fmt) + "\n")
    return path
