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
    """An output variable: per run (sweep dims + ``run``) or per configuration."""

    name: str
    per_run: bool
    units: str
    long_name: str
    dtype: str = "float64"


_VARIABLES = [
    # per run (docs/model.md §7)
    Variable("wall_time", True, "h", "job start to the last durable iteration"),
    Variable("energy", True, "MW h", "facility energy (IT x PUE)"),
    Variable("cost", True, "USD", "allocation plus electricity"),
    Variable("co2", True, "t", "operational plus embodied emissions, tonnes CO2e"),
    Variable("n_failures", True, "1", "failure events, those that strike during a recovery included"),
    Variable("lost_time", True, "h", "compute time rolled back by failures"),
    Variable("checkpoint_time", True, "h", "time training stood still for checkpoints"),
    Variable("recovery_time", True, "h", "time spent recovering"),
    Variable("straggler_time", True, "h", "time added by stragglers over the ideal iteration time"),
    Variable("ettr", True, "1", "effective training time ratio: ideal time / wall_time"),
    Variable("completed", True, "1", "false when censored at max_wall_days", "bool"),
    # per run: breakdowns
    Variable("straggler_transient_time", True, "h", "straggler time from per-iteration rank noise"),
    Variable("straggler_persistent_time", True, "h", "straggler time from the job factor and slow-node episodes"),
    Variable("n_memory_recoveries", True, "1", "recoveries from an in-memory snapshot (in_memory)"),
    Variable("spare_wait_time", True, "h", "part of recovery_time spent waiting for repaired spare nodes"),
    Variable("energy_compute", True, "MW h", "facility energy of GPUs computing surviving iterations"),
    Variable("energy_wait", True, "MW h", "facility energy of GPUs waiting at barriers or exchanging data"),
    Variable("energy_checkpoint", True, "MW h", "facility energy of checkpoint stalls and checkpoint writes"),
    Variable("energy_recovery", True, "MW h", "facility energy of recoveries and checkpoint loads"),
    Variable("energy_lost", True, "MW h", "facility energy of GPUs on work later rolled back"),
    Variable("energy_network", True, "MW h", "facility energy of the bits moved on intra- and inter-node links"),
    Variable("energy_node", True, "MW h", "facility energy of node overhead (CPUs, memory, NICs, fans)"),
    Variable("energy_gpu", True, "MW h", "IT energy of the GPUs alone (no PUE, links, storage or nodes)"),
    Variable("cost_allocation", True, "USD", "rental or amortised capital cost of the allocation"),
    Variable("cost_electricity", True, "USD", "electricity cost of the facility energy"),
    Variable("co2_operational", True, "t", "emissions of the facility energy, tonnes CO2e"),
    Variable("co2_embodied", True, "t", "embodied emissions of the GPUs over the run, tonnes CO2e"),
    # per configuration (docs/model.md §7)
    Variable("iteration_time", False, "s", "ideal iteration time (compute + exposed communication)"),
    Variable("compute_time", False, "s", "compute time per iteration, pipeline bubble included"),
    Variable("comm_time", False, "s", "exposed communication time per iteration"),
    Variable("iterations", False, "1", "training iterations", "int64"),
    Variable("checkpoint_interval", False, "s", "ideal training time between checkpoints"),
    Variable("checkpoint_stall", False, "s", "training stall per checkpoint"),
    Variable("memory_per_gpu", False, "Gbyte", "memory per GPU: model state and activations"),
    Variable("mfu_ideal", False, "1", "model FLOPs utilisation without failures or stragglers"),
    Variable("feasible", False, "1", "whether the configuration can run", "bool"),
    Variable("infeasible_reason", False, "1", "why the configuration cannot run (empty if feasible)", "str"),
    # per configuration: further detail
    Variable("ideal_time", False, "h", "iterations x ideal iteration time"),
    Variable("checkpoint_write_time", False, "s", "time to write one checkpoint to storage"),
    Variable("checkpoint_load_time", False, "s", "time to load a checkpoint on recovery"),
    Variable("system_mtbf", False, "h", "mean time between failures of the whole job"),
    Variable("checkpoint_interval_ci_low", False, "s",
             'interval = "optimize": lower bound of the 95 % interval of the optimum (NaN otherwise)'),
    Variable("checkpoint_interval_ci_high", False, "s",
             'interval = "optimize": upper bound of the 95 % interval of the optimum (NaN otherwise)'),
    Variable("iteration_energy", False, "J", "GPU energy of one ideal iteration, all GPUs"),
    Variable("gpu_power", False, "W", "mean power per GPU over an ideal iteration"),
]
VARIABLES: dict[str, Variable] = {v.name: v for v in _VARIABLES}
PER_RUN = tuple(v.name for v in _VARIABLES if v.per_run)
PER_CONFIG = tuple(v.name for v in _VARIABLES if not v.per_run)


def build_dataset(data: dict[str, np.ndarray], dims: tuple[str, ...], coords: dict,
                  attrs: dict) -> xr.Dataset:
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
            array = array.astype(var.dtype)
        else:
            array = array.astype(object)
        var_attrs = {"units": var.units, "long_name": var.long_name}
        variables[name] = xr.Variable(var_dims, array, var_attrs)
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    ds["run"].attrs.update(long_name="run index (names the random stream)", units="1")
    return ds
