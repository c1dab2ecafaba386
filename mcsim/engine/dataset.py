"""Stage 7 of :func:`mcsim.simulate`: the dataset, with its coordinates and provenance.

The output arrays (:class:`mcsim.engine.outputs.OutputArrays`) as an
:class:`xarray.Dataset` of dims (sweep dims..., [``draw``,] ``run``): coordinate
attributes from the schema fields swept, the drawn values of the uncertain inputs
along ``draw``, and the provenance in the global attributes (CF-1.10). One part of a
sharded sweep has dims (``configuration``, [``draw``,] ``run``) instead, with every sweep
dim's coordinate beside them (the part layout of :mod:`mcsim.engine.shards`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numba
import numpy as np
import xarray as xr

from mcsim._version import __version__, model_source_hash
from mcsim.io.netcdf import text_as_unicode
from mcsim.io.variables import PART_DIM, PART_DIM_ATTRS, build_dataset, coordinate_attrs
from mcsim.scenario.config import Scenario
from mcsim.scenario.consistency import active_parameters
from mcsim.scenario.draws import DrawPlan
from mcsim.scenario.schema import field_meta
from mcsim.scenario.uncertain import input_variable_attrs


def sweep_dataset(scenario: Scenario, draws: DrawPlan, data: dict[str, np.ndarray]) -> xr.Dataset:
    """The dataset of a simulated scenario from its output arrays ``data`` (by variable name).

    Parameters
    ----------
    scenario : Scenario
        The scenario (its sweep axes give the dims and coordinates).
    draws : DrawPlan
        Its draws (a ``draw`` dim and the drawn values when ``draws.count``).
    data : dict of str to ndarray
        Every registered variable, shaped (sweep..., [draw,] [run]); for a part (``draws.shard``),
        (configurations held, [draw,] [run]).
    """
    attrs = provenance_attrs(scenario)
    swept = [(axis, field_meta(axis.key.split(".")[0], axis.key.split(".")[-1])) for axis in scenario.axes]
    inputs = [(entry.key, input_variable_attrs(entry)) for entry in scenario.uncertain]
    dims, coords = _dims_and_coords(scenario, draws)
    # infeasible_reason is filled one configuration at a time as Python objects: as fixed-width Unicode, a plain
    # ds.to_netcdf() writes it with every supported xarray (2024.1 refuses object-dtype text)
    ds = text_as_unicode(build_dataset(data, dims, coords, attrs))
    for axis, meta in swept:  # long_name and units of a sweep coordinate, from the schema field it sweeps
        numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in axis.coords)
        ds[axis.dim].attrs.update(coordinate_attrs(axis.key, meta, numeric))
    for i, (key, input_attrs) in enumerate(inputs):  # each input's drawn values along ``draw``
        ds[key] = xr.Variable(("draw",), draws.values[:, i], input_attrs)
    if draws.count:
        ds["draw"].attrs.update(long_name="parameter draw of the uncertain inputs", units="1")
        ds.attrs.update(draws=draws.count, design=scenario.run.design, uncertain_inputs=" ".join(k for k, _ in inputs))
    if draws.shard is not None:  # one part of the sweep (mcsim.engine.shards combines the parts)
        ds[PART_DIM].attrs.update(PART_DIM_ATTRS)
        ds.attrs["shard"] = draws.shard.label
    return ds


def _dims_and_coords(scenario: Scenario, draws: DrawPlan) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The dims of the per-configuration variables ((sweep dims..., [``draw``]), or for a part
    (``configuration``, [``draw``])) and the coordinates: every sweep dim's, ``run``'s, ``draw``'s and a
    part's ``configuration`` (its configurations' flat indices, :mod:`mcsim.engine.shards`' layout)."""
    sweep = (PART_DIM,) if draws.shard is not None else tuple(axis.dim for axis in scenario.axes)
    coords: dict[str, Any] = {axis.dim: list(axis.coords) for axis in scenario.axes}
    if draws.shard is not None:
        coords[PART_DIM] = np.array(draws.shard.flat_indices(len(scenario.configs)), dtype=np.int64)
    coords["run"] = np.arange(scenario.run.runs)
    if draws.count:
        coords["draw"] = np.arange(draws.count)
    return sweep + (("draw",) if draws.count else ()), coords


def parameter_attrs(scenario: Scenario) -> dict[str, object]:
    """``model_params`` (``model.params``, the total) and ``model_params_active`` (the parameters one
    token uses: a mixture of experts counts the routed experts it is sent to, docs/model.md "Mixture of
    experts"; the total for a dense model), in parameters.

    When the sweep changes them, each attribute lists the distinct values in sweep order.
    """
    totals = list(dict.fromkeys(float(cfg.model.params) for cfg in scenario.configs))
    actives = list(dict.fromkeys(active_parameters(cfg.model) for cfg in scenario.configs))

    def value(values: list[float]) -> float | str:
        return values[0] if len(values) == 1 else " ".join(f"{v:.6g}" for v in values)

    return {"model_params": value(totals), "model_params_active": value(actives)}


def provenance_attrs(scenario: Scenario) -> dict[str, object]:
    """Global attributes: the model's parameters (:func:`parameter_attrs`), version, scenario TOML,
    overrides, seed, runs, mode, creation time, history.

    ``mcsim_model_hash`` is the SHA-256 of the sources and library versions that determine
    the numbers (:func:`mcsim._version.model_source_hash`): two files with the same
    hash were computed by the same model code.

    ``scenario_toml`` is the scenario with its overrides applied; ``scenario_overrides``
    lists those overrides (``--set``, ``--runs``, ...), one ``KEY = VALUE`` per line
    (empty when none), so that a report can say what differs from the scenario file.

    ``Conventions``, ``title`` and ``history`` are the CF-1.10 §2.6.2
    attributes; ``history`` records when and by which mcsim version the file
    was made, for which scenario, runs, seed and mode.
    """
    run = scenario.run
    created = datetime.now(UTC).isoformat(timespec="seconds")
    return parameter_attrs(scenario) | {
        "title": f"mcsim Monte Carlo results: {scenario.name}",
        "mcsim_version": __version__,
        "numba_version": numba.__version__,
        "mcsim_model_hash": model_source_hash(),
        "scenario_name": scenario.name,
        "scenario_source": scenario.source,
        "scenario_toml": scenario.to_toml(),
        "scenario_overrides": "\n".join(scenario.overrides),
        "seed": run.seed,
        "runs": run.runs,
        "mode": run.mode,
        "sweep_dims": " ".join(axis.dim for axis in scenario.axes),
        "created": created,
        "Conventions": "CF-1.10",
        "history": (
            f"{created}: mcsim {__version__} simulated scenario {scenario.name!r}, "
            f"{run.runs} runs, seed {run.seed}, {run.mode} mode"
        ),
    }
