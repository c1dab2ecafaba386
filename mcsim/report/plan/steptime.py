"""Layouts the step-time model cannot tell apart from the recommendation's (``mcsim report`` on a plan).

The ideal iteration time of every layout comes from a model whose error against
published measurements is known (:data:`mcsim.model.steptime.STEP_TIME_ERROR`,
docs/validation.md "Step time"). Layouts of the recommendation's GPU type and count,
with its checkpoint strategy, interval and clock, that fit in memory and whose ideal
iteration time is within that error of the recommendation's are *near-ties*: the
screen and the simulation rank them by a difference the model cannot resolve, so a
user should measure them before committing.
"""

from __future__ import annotations

import tomllib

import numpy as np
import xarray as xr

from mcsim.model.memory import MEMORY_MODEL_OVER_MEASURED, capacity_gb
from mcsim.model.steptime import STEP_TIME_ERROR
from mcsim.planning.dataset import layout_label
from mcsim.planning.screen import REJECTIONS
from mcsim.scenario.catalog import GPU_CATALOG
from mcsim.scenario.schema import DEFAULT_STEP_MODEL

# Rejections that say the layout cannot run as asked (structure, clock, iterations, time
# resolution, memory, strategy or failure domain), by their REJECTIONS codes.
_UNRUNNABLE = (1, 2, 3, 4, 5, 6)
assert all(code in REJECTIONS for code in _UNRUNNABLE)
_SAME = ("gpu_type", "gpus", "strategy", "interval", "freq_mhz")


def stored_scenario(ds: xr.Dataset) -> dict:
    """The plan's stored scenario as a TOML table ({} when it is absent or unreadable)."""
    try:
        return tomllib.loads(str(ds.attrs.get("scenario_toml", "")))
    except tomllib.TOMLDecodeError:
        return {}


def _table(scenario: dict, name: str) -> dict:
    table = scenario.get(name, {})
    return table if isinstance(table, dict) else {}


def _step_model_of(scenario: dict) -> str:
    model = _table(scenario, "compute").get("step_model", DEFAULT_STEP_MODEL)
    return model if isinstance(model, str) and model in STEP_TIME_ERROR else DEFAULT_STEP_MODEL


def step_model(ds: xr.Dataset) -> str:
    """The plan's ``compute.step_model`` (from the scenario it stores; the schema's default, ``operators``, when
    unset or unreadable: a plan file records the scenario as written, read with today's defaults)."""
    return _step_model_of(stored_scenario(ds))


def step_time_ties(ds: xr.Dataset) -> tuple[float, list[tuple[int, float]]]:
    """(the model's error, [(candidate, iteration time / recommended's - 1)]) of the near-ties, closest first."""
    error = STEP_TIME_ERROR[step_model(ds)]
    best = int(ds["recommended"])
    iteration = ds["screen_iteration_time"].values.astype(np.float64)
    same = np.ones(ds.sizes["candidate"], dtype=bool)
    for name in _SAME:
        same &= ds[name].values == ds[name].values[best]
    runnable = ~np.isin(ds["rejection"].values, _UNRUNNABLE)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = iteration / iteration[best] - 1.0
    near = same & runnable & (np.abs(ratio) <= error) & (np.arange(same.size) != best)
    order = np.flatnonzero(near)[np.argsort(np.abs(ratio[near]), kind="stable")]
    return error, [(int(k), float(ratio[k])) for k in order]


def step_time_section(ds: xr.Dataset, shown: int = 8) -> list[str]:
    """The report's "Near-ties of the step-time model" section."""
    if "screen_iteration_time" not in ds.variables or not 0 <= int(ds["recommended"]) < ds.sizes["candidate"]:
        return []
    error, ties = step_time_ties(ds)
    lines = ["## Near-ties of the step-time model", ""]
    model = step_model(ds)
    if not ties:
        return lines + [
            f"No other layout of this GPU type and count is within the {model} step-time model's error "
            f"(±{100 * error:g} %) of the recommendation's ideal iteration time.",
            "",
        ]
    lines.append(
        f"{len(ties)} other layout(s) of this GPU type and count have an ideal iteration time within the "
        f"{model} step-time model's error (±{100 * error:g} %, docs/validation.md) of the recommendation's: "
        "the model cannot order them; measure the closest before committing. Iteration time relative to the "
        "recommendation's:"
    )
    lines.append("")
    for k, ratio in ties[:shown]:
        lines.append(f"- {layout_label(ds, k)}: {100 * ratio:+.2f} %")
    if len(ties) > shown:
        lines.append(f"- and {len(ties) - shown} more")
    return lines + [""]


def _gpu_memory_gb(scenario: dict, gpu_type: str) -> float | None:
    """The recommendation's GPU memory, GB: the scenario's ``hardware.memory_gb`` or the catalog's."""
    override = _table(scenario, "hardware").get("memory_gb")
    if isinstance(override, int | float) and not isinstance(override, bool) and 0 < override < float("inf"):
        return float(override)
    spec = GPU_CATALOG.get(gpu_type)
    return None if spec is None else spec.memory_gb


def memory_lines(ds: xr.Dataset) -> list[str]:
    """The "Memory" section: the recommendation's memory per GPU, widened by the memory model's measured error.

    The range was measured with the operators model's memory (the end stages' tables), so a
    plan under the aggregate model, which spreads them evenly, gets no range.
    """
    scenario = stored_scenario(ds)
    if _step_model_of(scenario) != "operators" or "screen_memory_per_gpu" not in ds.variables:
        return []
    if not 0 <= int(ds["recommended"]) < ds.sizes["candidate"]:
        return []
    best = int(ds["recommended"])
    modelled = float(ds["screen_memory_per_gpu"].values[best])
    if not np.isfinite(modelled):
        return []
    capacity = _gpu_memory_gb(scenario, str(ds["gpu_type"].values[best]))
    low, high = (modelled / k for k in reversed(MEMORY_MODEL_OVER_MEASURED))
    text = (
        f"The recommendation needs {modelled:.1f} GB per GPU in the model. The model was "
        f"{MEMORY_MODEL_OVER_MEASURED[0]:g} to {MEMORY_MODEL_OVER_MEASURED[1]:g} times the measured memory in "
        f'published benchmarks (docs/validation.md, "Memory"): {low:.1f} to {high:.1f} GB'
    )
    if capacity is not None and high > float(capacity_gb(capacity)):
        text += (
            f", more than the GPU's {float(capacity_gb(capacity)):.1f} GB ({capacity:g} GiB) at the top of that "
            "range: check that it fits before committing."
        )
    else:
        text += "."
    return ["## Memory", "", text, ""]
