"""Every output variable of mcsim, registered once with its dims, units and meaning.

Datasets are built only through :func:`build_dataset`, which checks that each
registered variable is present with the right shape and attaches ``units``
and ``long_name`` (xarray reductions drop attributes, so they are attached
when the final Dataset is built).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr


@dataclass(frozen=True)
class Variable:
    """An output variable: per run (sweep dims + ``run``) or per configuration.

    ``direction`` says which way is better when the variable is an objective of the
    decision analysis (:mod:`mcsim.analysis`): ``"lower"``, ``"higher"``, or None for
    a variable that is not an objective (a count whose sign of merit depends on the
    question, a per-configuration input).
    """

    name: str
    per_run: bool
    units: str
    long_name: str
    dtype: str = "float64"
    direction: str | None = None


_VARIABLES = [
    # per run (docs/model.md §7)
    Variable("wall_time", True, "h", "job start to the last durable iteration", direction="lower"),
    Variable("energy", True, "MW h", "facility energy (IT x PUE)", direction="lower"),
    Variable("cost", True, "USD", "allocation plus electricity", direction="lower"),
    Variable("co2", True, "t", "operational plus embodied emissions, tonnes CO2e", direction="lower"),
    Variable(
        "n_failures", True, "1", "failure events, those that strike during a recovery included", direction="lower"
    ),
    Variable("lost_time", True, "h", "compute time rolled back by failures", direction="lower"),
    Variable("checkpoint_time", True, "h", "time training stood still for checkpoints", direction="lower"),
    Variable("recovery_time", True, "h", "time spent recovering", direction="lower"),
    Variable("straggler_time", True, "h", "time added by stragglers over the ideal iteration time", direction="lower"),
    Variable(
        "ettr",
        True,
        "1",
        "effective training time ratio: ideal time of the iterations done / wall_time "
        "(a censored run counts only the surviving iterations it did)",
        direction="higher",
    ),
    Variable("completed", True, "1", "false when censored at max_wall_days", "bool", direction="higher"),
    # per run: breakdowns
    Variable("straggler_transient_time", True, "h", "straggler time from per-iteration rank noise", direction="lower"),
    Variable(
        "straggler_persistent_time",
        True,
        "h",
        "straggler time from the job factor and slow-node episodes",
        direction="lower",
    ),
    Variable("n_memory_recoveries", True, "1", "recoveries from an in-memory snapshot (in_memory)"),
    Variable(
        "spare_wait_time", True, "h", "part of recovery_time spent waiting for repaired spare nodes", direction="lower"
    ),
    Variable("n_hangs", True, "1", "interruptions by hangs (part of n_failures)", direction="lower"),
    Variable(
        "n_instabilities",
        True,
        "1",
        "interruptions by training instabilities (part of n_failures)",
        direction="lower",
    ),
    Variable(
        "hang_time",
        True,
        "h",
        "compute time rolled back and recovery time (detection included) caused by hangs",
        direction="lower",
    ),
    Variable(
        "hang_detection_time",
        True,
        "h",
        "time hung before detection, GPUs drawing waiting power (part of recovery_time and hang_time)",
        direction="lower",
    ),
    Variable(
        "instability_time",
        True,
        "h",
        "compute time rolled back and recovery time caused by training instabilities",
        direction="lower",
    ),
    Variable("n_planned_stops", True, "1", "planned stops (part of n_failures)", direction="lower"),
    Variable(
        "planned_time",
        True,
        "h",
        "time down for planned stops (windows, loads, the interrupted partial iteration)",
        direction="lower",
    ),
    Variable(
        "restart_time",
        True,
        "h",
        "time in the restarts' parts: re-scheduling, process start, communicators, warm-up (part of recovery_time)",
        direction="lower",
    ),
    Variable(
        "load_time",
        True,
        "h",
        "time reading the state back from storage or a peer, loads cut short included (part of recovery_time)",
        direction="lower",
    ),
    Variable(
        "energy_compute", True, "MW h", "facility energy of GPUs computing surviving iterations", direction="lower"
    ),
    Variable(
        "energy_wait", True, "MW h", "facility energy of GPUs waiting at barriers or exchanging data", direction="lower"
    ),
    Variable(
        "energy_checkpoint",
        True,
        "MW h",
        "facility energy of checkpoint stalls and checkpoint writes",
        direction="lower",
    ),
    Variable("energy_recovery", True, "MW h", "facility energy of recoveries and checkpoint loads", direction="lower"),
    Variable("energy_lost", True, "MW h", "facility energy of GPUs on work later rolled back", direction="lower"),
    Variable(
        "energy_network",
        True,
        "MW h",
        "facility energy of the bits moved on intra- and inter-node links",
        direction="lower",
    ),
    Variable(
        "energy_node", True, "MW h", "facility energy of node overhead (CPUs, memory, NICs, fans)", direction="lower"
    ),
    Variable(
        "energy_gpu", True, "MW h", "IT energy of the GPUs alone (no PUE, links, storage or nodes)", direction="lower"
    ),
    Variable("cost_allocation", True, "USD", "rental or amortised capital cost of the allocation", direction="lower"),
    Variable("cost_electricity", True, "USD", "electricity cost of the facility energy", direction="lower"),
    Variable("co2_operational", True, "t", "emissions of the facility energy, tonnes CO2e", direction="lower"),
    Variable("co2_embodied", True, "t", "embodied emissions of the GPUs over the run, tonnes CO2e", direction="lower"),
    # per configuration (docs/model.md §7)
    Variable(
        "iteration_time",
        False,
        "s",
        "ideal iteration time (compute + exposed communication; with phases, the mean)",
    ),
    Variable("compute_time", False, "s", "compute time per iteration, pipeline bubble included"),
    Variable("comm_time", False, "s", "exposed communication time per iteration"),
    Variable("iterations", False, "1", "training iterations", "int64"),
    Variable("checkpoint_interval", False, "s", "ideal training time between checkpoints"),
    Variable("checkpoint_stall", False, "s", "training stall per checkpoint"),
    Variable("memory_per_gpu", False, "Gbyte", "memory per GPU: model state and activations"),
    Variable("mfu_ideal", False, "1", "model FLOPs utilisation without failures or stragglers"),
    Variable("hfu_ideal", False, "1", "hardware FLOPs utilisation (recomputation counted), as mfu_ideal"),
    Variable("feasible", False, "1", "whether the configuration can run", "bool"),
    Variable("infeasible_reason", False, "1", "why the configuration cannot run (empty if feasible)", "str"),
    # per configuration: further detail
    Variable("ideal_time", False, "h", "iterations x ideal iteration time"),
    Variable("checkpoint_write_time", False, "s", "time to write one checkpoint to storage"),
    Variable("checkpoint_load_time", False, "s", "time to load a checkpoint on recovery"),
    Variable(
        "restart_overhead",
        False,
        "s",
        "one restart's parts beyond the class's recovery and the load (0 unless restart.from_parts)",
    ),
    Variable("system_mtbf", False, "h", "mean time between failures of the whole job (planned stops left out)"),
    Variable(
        "checkpoint_interval_ci_low",
        False,
        "s",
        'interval = "optimize": lower bound of the 95 % interval of the optimum (NaN otherwise)',
    ),
    Variable(
        "checkpoint_interval_ci_high",
        False,
        "s",
        'interval = "optimize": upper bound of the 95 % interval of the optimum (NaN otherwise)',
    ),
    Variable("iteration_energy", False, "J", "GPU energy of one ideal iteration, all GPUs"),
    Variable("gpu_power", False, "W", "mean power per GPU over an ideal iteration"),
]
VARIABLES: dict[str, Variable] = {v.name: v for v in _VARIABLES}
# Variables added after files were first written (issue 25): a file without them is still read as a
# result (mcsim summary, report, plot), without them.
LATER_VARIABLES = frozenset(
    {
        "n_hangs",
        "n_instabilities",
        "n_planned_stops",
        "hang_time",
        "hang_detection_time",
        "instability_time",
        "planned_time",
        "restart_time",
        "restart_overhead",
        "load_time",
    }
)
PER_RUN = tuple(v.name for v in _VARIABLES if v.per_run)
PER_CONFIG = tuple(v.name for v in _VARIABLES if not v.per_run)


# The dimensions of a result that are samples, not configurations: ``run`` (the Monte Carlo
# replications) and ``draw`` (the parameter draws of [uncertain] inputs, present only with run.draws > 0).
SAMPLE_DIMS = ("draw", "run")


def sweep_dims(ds: xr.Dataset) -> list[str]:
    """The configuration dimensions of a result: those of ``wall_time`` other than ``draw`` and ``run``.

    ``draw`` is a sample dimension, not a configuration: every statistic, ranking and figure of a
    configuration pools its draws and runs (the robust choice is the best mean over both), so a
    draw is never listed here. Per-configuration variables (inputs of the model) do vary along
    ``draw`` when inputs are uncertain; :data:`SAMPLE_DIMS` names both sample dimensions.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`mcsim.simulate` (or :func:`mcsim.open_results`).

    Returns
    -------
    list of str
        The sweep dimensions in the order of ``wall_time``'s dimensions; empty for a single
        configuration.

    Raises
    ------
    ValueError
        ``ds`` has no per-run ``wall_time`` (not a result dataset).
    """
    if "wall_time" not in ds or "run" not in ds["wall_time"].dims:
        raise ValueError("not an mcsim result dataset (no per-run wall_time variable)")
    return [str(d) for d in ds["wall_time"].dims if d not in SAMPLE_DIMS]


def build_dataset(data: dict[str, np.ndarray], dims: tuple[str, ...], coords: dict, attrs: dict) -> xr.Dataset:
    """Assemble the output Dataset, checking every registered variable.

    Parameters
    ----------
    data : dict of str to ndarray
        One array per registered variable; per-configuration arrays have the
        sweep shape, per-run arrays the sweep shape plus ``run``.
    dims : tuple of str
        Sweep dimension names (may be empty).
    coords : dict
        Coordinates for the sweep dims and ``run``.
    attrs : dict
        Global attributes (provenance).
    """
    missing = set(VARIABLES) - set(data)
    extra = set(data) - set(VARIABLES)
    if missing or extra:
        raise ValueError(f"unregistered or missing output variables: {sorted(missing | extra)}")
    sweep_shape = tuple(len(coords[d]) for d in dims)
    n_runs = len(coords["run"])
    variables = {}
    for name, var in VARIABLES.items():
        array = np.asarray(data[name])
        var_dims = dims + ("run",) if var.per_run else dims
        expected = sweep_shape + (n_runs,) if var.per_run else sweep_shape
        if array.shape != expected:
            raise ValueError(f"{name}: shape {array.shape}, expected {expected} for dims {var_dims}")
        if var.dtype != "str":
            array = array.astype(var.dtype, copy=False)  # no copy: the arrays are built in their dtype
        else:
            array = array.astype(object)
        var_attrs = {"units": var.units, "long_name": var.long_name}
        variables[name] = xr.Variable(var_dims, array, var_attrs)
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    ds["run"].attrs.update(long_name="run index (names the random stream)", units="1")
    return ds


DIRECTIONS = ("lower", "higher")


def objective_direction(name: str) -> str:
    """Whether ``lower`` or ``higher`` values of the registered variable ``name`` are better.

    Raises
    ------
    ValueError
        When ``name`` is not registered, is not per run, or has no direction (it is not
        an objective of the decision analysis); the message names the variable.
    """
    var = VARIABLES.get(name)
    if var is None or not var.per_run or var.direction is None:
        objectives = ", ".join(v.name for v in _VARIABLES if v.per_run and v.direction is not None)
        what = (
            "is not an mcsim output variable"
            if var is None
            else "is a per-configuration variable"
            if not var.per_run
            else "has no direction (lower or higher is better) in the variable registry"
        )
        raise ValueError(f"objective {name!r} {what}, so it cannot be ranked; objectives are: {objectives}")
    return var.direction


# The UDUNITS spelling written to files of each unit the scenario schema shows (docs/model.md §7).
# Counts and labels are the dimensionless "1"; what a unit counts (GPU, node, CO2e, per GPU)
# stays in the long_name. Money keeps the documented convention: "USD" (which UDUNITS does
# not know) times a UDUNITS unit. A schema unit missing here is written as it is;
# tests/io/test_cf.py checks that every unit the schema declares is covered.
FILE_UNITS = {
    "": "1",
    "parameters": "1",
    "tokens": "1",
    "sequences": "1",
    "1/(node day)": "d-1",  # per node and day
    "B": "byte",
    "GB": "Gbyte",  # 1e9 bytes
    "GB/s": "Gbyte s-1",
    "TFLOP/s": "1e12 s-1",  # floating-point operations per second
    "pJ/bit": "pJ bit-1",
    "gCO2e/kWh": "g kW-1 h-1",  # grams of CO2e per kWh
    "kgCO2e": "kg",
    "years": "365.25 d",  # the model's year (docs/model.md §5), not UDUNITS' tropical "year"
    "USD/(GPU h)": "USD h-1",  # per GPU
    "USD/kWh": "USD kW-1 h-1",
}


def file_units(unit: str) -> str:
    """The ``units`` attribute written for a schema unit: its UDUNITS spelling (:data:`FILE_UNITS`).

    Parameters
    ----------
    unit : str
        A unit as the scenario schema shows it (``GB/s``, ``tokens``, ``MHz``).

    Returns
    -------
    str
        The spelling CF tools parse (``Gbyte s-1``, ``1``, ``MHz``); money as ``USD`` times one.
    """
    return FILE_UNITS.get(unit, unit)


def coordinate_attrs(key: str, meta: dict | None, numeric: bool) -> dict[str, str]:
    """``long_name`` and ``units`` of the sweep coordinate of scenario key ``key``.

    Parameters
    ----------
    key : str
        The dotted scenario key (``parallelism.gpus``).
    meta : dict or None
        The field's schema metadata (:func:`mcsim.schema.field_meta`): its ``unit`` and ``doc``.
    numeric : bool
        Whether the coordinate values are numbers; text labels (strategies, intervals) get
        no ``units``.
    """
    meta = meta or {}
    doc = str(meta.get("doc") or "")
    attrs = {"long_name": f"swept scenario key {key}" + (f" ({doc})" if doc else "")}
    if numeric:
        unit = str(meta.get("unit") or "")
        attrs["units"] = file_units(unit)
    return attrs
