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


# Whether a variable is per run or per configuration, as the table says it.
_PER = {"run": True, "config": False}
# Which way is better, as the table says it ("-": not an objective).
_BETTER = {"lower": "lower", "higher": "higher", "-": None}


def variable_table(table: str) -> list[Variable]:
    """The variables of a text table, one row each: ``name | per | units | dtype | better | meaning``.

    Parameters
    ----------
    table : str
        Rows of six cells separated by ``|``: the name; ``run`` (dims: sweep dims + ``run``) or
        ``config`` (the sweep dims); the units (UDUNITS spelling); the dtype (``float64``,
        ``int64``, ``bool``, or ``str`` for text); ``lower``, ``higher`` or ``-`` (which way is better, ``-``
        for a variable that is not an objective); the meaning (the ``long_name``). A line without
        ``|`` continues the meaning of the row above (joined with one space); blank lines and
        lines starting with ``#`` are skipped.

    Returns
    -------
    list of Variable
        In the order of the rows.
    """
    rows: list[list[str]] = []
    for line in table.splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if "|" not in text:
            rows[-1][-1] += f" {text}"
            continue
        rows.append([cell.strip() for cell in text.split("|")])
    return [
        Variable(name, _PER[per], units, meaning, dtype, _BETTER[better])
        for name, per, units, dtype, better, meaning in rows
    ]


_VARIABLES = variable_table(
    """
# name                      | per    | units | dtype   | better | meaning
# per run (docs/model.md §7)
wall_time                   | run    | h     | float64 | lower  | job start to the last durable iteration
energy                      | run    | MW h  | float64 | lower  | facility energy (IT x PUE)
cost                        | run    | USD   | float64 | lower  | allocation plus electricity
co2                         | run    | t     | float64 | lower  | operational plus embodied emissions, tonnes CO2e
n_failures                  | run    | 1     | float64 | lower  | failure events, those that strike during a recovery
                                                                  included
lost_time                   | run    | h     | float64 | lower  | compute time rolled back by failures
checkpoint_time             | run    | h     | float64 | lower  | time training stood still for checkpoints
recovery_time               | run    | h     | float64 | lower  | time spent recovering
straggler_time              | run    | h     | float64 | lower  | time added by stragglers over the ideal iteration time
ettr                        | run    | 1     | float64 | higher | effective training time ratio: ideal time of the
                                                                  iterations done / wall_time (a censored run counts
                                                                  only the surviving iterations it did)
completed                   | run    | 1     | bool    | higher | false when censored at max_wall_days
# per run: breakdowns
straggler_transient_time    | run    | h     | float64 | lower  | straggler time from per-iteration rank noise
straggler_persistent_time   | run    | h     | float64 | lower  | straggler time from the job factor and slow-node
                                                                  episodes
n_memory_recoveries         | run    | 1     | float64 | -      | recoveries from an in-memory snapshot (in_memory)
spare_wait_time             | run    | h     | float64 | lower  | part of recovery_time spent waiting for repaired spare
                                                                  nodes
n_hangs                     | run    | 1     | float64 | lower  | interruptions by hangs (part of n_failures)
n_instabilities             | run    | 1     | float64 | lower  | interruptions by training instabilities (part of
                                                                  n_failures)
hang_time                   | run    | h     | float64 | lower  | compute time rolled back and recovery time (detection
                                                                  included) caused by hangs
hang_detection_time         | run    | h     | float64 | lower  | time hung before detection, GPUs drawing waiting power
                                                                  (part of recovery_time and hang_time)
instability_time            | run    | h     | float64 | lower  | compute time rolled back and recovery time caused by
                                                                  training instabilities
n_planned_stops             | run    | 1     | float64 | lower  | planned stops (part of n_failures)
planned_time                | run    | h     | float64 | lower  | time down for planned stops (windows, loads, the
                                                                  interrupted partial iteration)
restart_time                | run    | h     | float64 | lower  | time in the restarts' parts: re-scheduling, process
                                                                  start, communicators, warm-up (part of recovery_time)
load_time                   | run    | h     | float64 | lower  | time reading the state back from storage or a peer,
                                                                  loads cut short included (part of recovery_time)
abandoned_restart_time      | run    | h     | float64 | lower  | time of restarts that failed again in their first
                                                                  steps: the steps lost, the parts and the load again
                                                                  (part of recovery_time)
staff_wait_time             | run    | h     | float64 | lower  | time recoveries that need a person waited for one:
                                                                  out of hours, weekends, holidays, a response
                                                                  ([staffing]; part of recovery_time)
time_limit_stops            | run    | 1     | float64 | lower  | stops at the job's time limit, each followed by the
                                                                  queue and a requeue (not failures)
queue_wait_time             | run    | h     | float64 | lower  | time waiting in the batch queue for a new allocation
                                                                  (part of recovery_time)
release_wait_time           | run    | h     | float64 | lower  | time crashed jobs held their allocation until
                                                                  released (part of recovery_time)
energy_compute              | run    | MW h  | float64 | lower  | facility energy of GPUs computing surviving iterations
energy_wait                 | run    | MW h  | float64 | lower  | facility energy of GPUs waiting at barriers or
                                                                  exchanging data
energy_checkpoint           | run    | MW h  | float64 | lower  | facility energy of checkpoint stalls and checkpoint
                                                                  writes
energy_recovery             | run    | MW h  | float64 | lower  | facility energy of recoveries and checkpoint loads
energy_lost                 | run    | MW h  | float64 | lower  | facility energy of GPUs on work later rolled back
energy_network              | run    | MW h  | float64 | lower  | facility energy of the bits moved on intra- and
                                                                  inter-node links
energy_node                 | run    | MW h  | float64 | lower  | facility energy of node overhead (CPUs, memory, NICs,
                                                                  fans)
energy_gpu                  | run    | MW h  | float64 | lower  | IT energy of the GPUs alone (no PUE, links, storage or
                                                                  nodes)
cost_allocation             | run    | USD   | float64 | lower  | rental or amortised capital cost of the allocation
cost_electricity            | run    | USD   | float64 | lower  | electricity cost of the facility energy
co2_operational             | run    | t     | float64 | lower  | emissions of the facility energy, tonnes CO2e
co2_embodied                | run    | t     | float64 | lower  | embodied emissions of the GPUs over the run, tonnes
                                                                  CO2e
# per configuration (docs/model.md §7)
iteration_time              | config | s     | float64 | -      | ideal iteration time (compute + exposed communication;
                                                                  with phases, the mean)
compute_time                | config | s     | float64 | -      | compute time per iteration, pipeline bubble included
comm_time                   | config | s     | float64 | -      | exposed communication time per iteration
iterations                  | config | 1     | int64   | -      | training iterations
checkpoint_interval         | config | s     | float64 | -      | ideal training time between checkpoints
checkpoint_stall            | config | s     | float64 | -      | training stall per checkpoint
memory_per_gpu              | config | Gbyte | float64 | -      | memory per GPU: model state and activations
mfu_ideal                   | config | 1     | float64 | -      | model FLOPs utilisation without failures or stragglers
hfu_ideal                   | config | 1     | float64 | -      | hardware FLOPs utilisation (recomputation counted), as
                                                                  mfu_ideal
feasible                    | config | 1     | bool    | -      | whether the configuration can run
infeasible_reason           | config | 1     | str     | -      | why the configuration cannot run (empty if feasible)
# per configuration: further detail
ideal_time                  | config | h     | float64 | -      | iterations x ideal iteration time
checkpoint_write_time       | config | s     | float64 | -      | time to write one checkpoint to storage
checkpoint_load_time        | config | s     | float64 | -      | time to load a checkpoint on recovery
restart_overhead            | config | s     | float64 | -      | one restart's parts beyond the class's recovery and
                                                                  the load (0 unless restart.from_parts)
system_mtbf                 | config | h     | float64 | -      | mean time between failures of the whole job (planned
                                                                  stops left out)
checkpoint_interval_ci_low  | config | s     | float64 | -      | interval = "optimize": lower bound of the 95 %
                                                                  interval of the optimum (NaN otherwise)
checkpoint_interval_ci_high | config | s     | float64 | -      | interval = "optimize": upper bound of the 95 %
                                                                  interval of the optimum (NaN otherwise)
iteration_energy            | config | J     | float64 | -      | GPU energy of one ideal iteration, all GPUs
gpu_power                   | config | W     | float64 | -      | mean power per GPU over an ideal iteration
"""
)
VARIABLES: dict[str, Variable] = {v.name: v for v in _VARIABLES}
# Variables added to the registry after result files were first written (the counts and times of
# hangs, instabilities, planned stops and the parts of a restart): a file written before them is still
# read as a result (mcsim summary, report, plot), without them.
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
        "abandoned_restart_time",
        "staff_wait_time",
        "time_limit_stops",
        "queue_wait_time",
        "release_wait_time",
    }
)
PER_RUN = tuple(v.name for v in _VARIABLES if v.per_run)
PER_CONFIG = tuple(v.name for v in _VARIABLES if not v.per_run)


# The dimensions of a result that are samples, not configurations: ``run`` (the Monte Carlo
# replications) and ``draw`` (the parameter draws of [uncertain] inputs, present only with run.draws > 0).
SAMPLE_DIMS = ("draw", "run")
# The dimension of one part of a sharded sweep (mcsim run --shard): its configurations' flat indices (C order
# over the sweep dims named by the sweep_dims attribute), in place of the sweep dims (mcsim.engine.shards).
PART_DIM = "configuration"
PART_DIM_ATTRS = {
    "long_name": "flat index of the sweep configuration (C order over the sweep dims named by sweep_dims)",
    "units": "1",
}


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
        The field's schema metadata (:func:`mcsim.scenario.schema.field_meta`): its ``unit`` and ``doc``.
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
