"""Result files follow the CF conventions (CF-1.10) and still open in xarray unchanged.

The checker is the IOOS compliance-checker (the ``test`` extra installs it); its
only accepted complaint is the currency unit: UDUNITS has no unit for money, so
``USD`` cannot be made UDUNITS-parseable. The documented convention (docs/model.md §7)
writes money as ``USD`` times a UDUNITS unit (``USD h-1``), so the rest parses.
Every kind of file is checked: single runs, sweeps, uncertain inputs (here) and plans
(tests/planning/test_plan_hostile.py).
"""

from __future__ import annotations

import dataclasses

import cf_units
import numpy as np
import pytest
import xarray as xr
from cf_check import CURRENCY, _checker_messages, _is_currency_unit, _not_currency
from netcdf_cache import chunk_cache_during_write

import mcsim
from mcsim.io.variables import FILE_UNITS, VARIABLES, file_units
from mcsim.planning.plan_file import Constraints, PlanOptions, Search
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.interruptions import FailureClass
from mcsim.scenario.schema import SECTIONS

pytestmark = pytest.mark.filterwarnings("ignore:The ioos_sos checker is deprecated:DeprecationWarning")


def _parses(unit: str) -> bool:
    try:
        cf_units.Unit(unit)
    except ValueError:
        return False
    return True


def _schema_units() -> set[str]:
    """Every unit a scenario or plan key declares (the units sweep coordinates and uncertain inputs carry)."""
    tables = [*SECTIONS.values(), FailureClass, Search, Constraints, PlanOptions]
    return {str(f.metadata.get("unit") or "") for cls in tables for f in dataclasses.fields(cls)}


def test_every_schema_unit_is_written_in_udunits_spelling():
    units = _schema_units()
    assert {"GB/s", "USD/(GPU h)", "tokens"} <= units  # the collection really reads the schema
    for unit in units:
        written = file_units(unit)
        assert _parses(written) or _is_currency_unit(written), (unit, written)
    assert "GB/s" in FILE_UNITS and not _parses("GB/s") and not _parses("GB")  # why the mapping exists
    # the spellings mean what the schema says: GB are 1e9 bytes, years of 365.25 days (docs/model.md)
    assert cf_units.Unit(file_units("GB/s")).convert(1.0, "byte s-1") == pytest.approx(1e9)
    assert cf_units.Unit(file_units("TFLOP/s")).convert(1.0, "s-1") == pytest.approx(1e12)
    assert cf_units.Unit(file_units("years")).convert(1.0, "h") == pytest.approx(8766.0)
    assert cf_units.Unit(file_units("pJ/bit")).convert(1.0, "J bit-1") == pytest.approx(1e-12)
    assert cf_units.Unit(file_units("gCO2e/kWh")).convert(1.0, "kg J-1") == pytest.approx(1e-3 / 3.6e6)
    assert cf_units.Unit(file_units("1/(node day)")).convert(1.0, "h-1") == pytest.approx(1 / 24)
    assert file_units("USD/(GPU h)") == "USD h-1" and file_units("parameters") == "1"


def test_uncertain_input_file_passes_cf_checker_but_currency(small_raw, tmp_path):
    # Draws of inputs whose schema units are not UDUNITS spellings (GB/s, years, USD/(GPU h)),
    # over a sweep whose coordinate is in GB/s too.
    small_raw["run"].update(runs=4, draws=4)
    small_raw["sweep"] = {"checkpoint.write_gbps_per_node": [5.0, 10.0]}
    small_raw["uncertain"] = {
        "network.inter_gbps": {"dist": "uniform", "low": 25.0, "high": 50.0},
        "carbon.lifetime_years": {"dist": "uniform", "low": 4.0, "high": 6.0},
        "cost.gpu_hour_usd": {"dist": "uniform", "low": 1.0, "high": 3.0},
    }
    ds = mcsim.simulate(scenario_from_dict(small_raw, "uncertain.toml"), progress=False)
    assert ds["network.inter_gbps"].attrs["units"] == "Gbyte s-1"
    assert ds["write_gbps_per_node"].attrs["units"] == "Gbyte s-1"
    assert ds["cost.gpu_hour_usd"].attrs["units"] == "USD h-1"
    path = mcsim.write_results(ds, tmp_path / "uncertain.nc")
    messages = _checker_messages(path)
    assert _not_currency(messages) == []
    assert any("USD h-1" in m for m in messages)  # the currency exception is still seen, and only it
    # stored under CF names (CF-1.10 §2.3), read back under the scenario keys
    with xr.open_dataset(path) as plain:
        assert plain["network_inter_gbps"].attrs["mcsim_name"] == "network.inter_gbps"
        assert "network.inter_gbps" not in plain
        assert plain.mcsim._ds["network.inter_gbps"].attrs["units"] == "Gbyte s-1"  # the accessor takes the keys
    back = mcsim.open_results(path)
    for key in ("network.inter_gbps", "carbon.lifetime_years", "cost.gpu_hour_usd"):
        np.testing.assert_array_equal(back[key].values, ds[key].values)
        assert back[key].attrs == ds[key].attrs


@pytest.fixture
def sweep_ds(small_raw) -> xr.Dataset:
    """A 2 x 2 sweep with a text axis and one infeasible configuration (in_memory on one node)."""
    small_raw["run"]["runs"] = 8
    small_raw["sweep"] = {"parallelism.gpus": [8, 64], "checkpoint.strategy": ["sync", "in_memory"]}
    return mcsim.simulate(scenario_from_dict(small_raw, "small.toml"), progress=False)


def test_every_unit_is_udunits_parseable_but_currency():
    for var in VARIABLES.values():
        if var.units == CURRENCY:
            continue
        cf_units.Unit(var.units)  # raises ValueError for a unit UDUNITS does not know
    # the units mean what docs/model.md says: energy in MWh, memory in 1e9 bytes, CO2e in tonnes
    assert cf_units.Unit(VARIABLES["energy"].units).convert(1.0, "J") == pytest.approx(3.6e9)
    assert cf_units.Unit(VARIABLES["memory_per_gpu"].units).convert(1.0, "byte") == pytest.approx(1e9)
    assert cf_units.Unit(VARIABLES["co2"].units).convert(1.0, "kg") == pytest.approx(1e3)
    assert cf_units.Unit(VARIABLES["wall_time"].units).convert(1.0, "s") == pytest.approx(3600.0)


def test_single_configuration_passes_cf_checker_but_currency(small_raw, tmp_path):
    small_raw["run"]["runs"] = 8
    ds = mcsim.simulate(scenario_from_dict(small_raw, "small.toml"), progress=False)
    path = mcsim.write_results(ds, tmp_path / "single.nc")
    messages = _checker_messages(path)
    assert _not_currency(messages) == []
    assert any(CURRENCY in m for m in messages)  # the one known exception is still seen


def test_sweep_passes_cf_checker_but_currency(sweep_ds, tmp_path):
    path = mcsim.write_results(sweep_ds, tmp_path / "sweep.nc")
    assert _not_currency(_checker_messages(path)) == []


def test_part_of_a_sharded_sweep_passes_cf_checker_but_currency(small_raw, tmp_path):
    # A part holds its configurations along `configuration`, with the sweep's coordinates (one of text) beside
    # them, used by no variable; the infeasible configuration (in_memory on 8 GPUs: flat index 1) is in part 1/2.
    small_raw["run"]["runs"] = 8
    small_raw["sweep"] = {"parallelism.gpus": [8, 64], "checkpoint.strategy": ["sync", "in_memory"]}
    part = mcsim.simulate(scenario_from_dict(small_raw, "small.toml"), progress=False, shard=mcsim.Shard(1, 2))
    assert not part["feasible"].values[0]
    path = mcsim.write_results(part, tmp_path / "part.nc")
    assert _not_currency(_checker_messages(path)) == []


def test_history_and_conventions(sweep_ds):
    assert sweep_ds.attrs["Conventions"] == "CF-1.10"
    history = sweep_ds.attrs["history"]
    assert sweep_ds.attrs["created"] in history and mcsim.__version__ in history and "8 runs" in history


def test_text_stored_as_utf8_char_arrays_and_read_back_unchanged(sweep_ds, tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    reason = sweep_ds["infeasible_reason"].sel(gpus=8, strategy="in_memory").item()
    assert reason  # the fixture really has an infeasible configuration
    edited = sweep_ds.copy(deep=True)
    edited["infeasible_reason"].loc[dict(gpus=64, strategy="sync")] = "naïve ≥ 2 nodes"  # multi-byte UTF-8
    path = mcsim.write_results(edited, tmp_path / "r.nc")
    with netCDF4.Dataset(path) as raw:
        for name in ("infeasible_reason", "strategy"):
            assert raw[name].dtype == np.dtype("S1"), name  # a char array, not a vlen string
            assert raw[name].getncattr("_Encoding") == "utf-8"
    back = mcsim.open_results(path)
    assert dict(back.sizes) == dict(edited.sizes)
    assert list(back.coords) == list(edited.coords)
    for name in edited.coords:
        assert list(back[name].values) == list(edited[name].values), name
    for name in edited.data_vars:
        np.testing.assert_array_equal(back[name].values, edited[name].values, err_msg=name)
        assert back[name].attrs == edited[name].attrs, name
    assert back["infeasible_reason"].sel(gpus=64, strategy="sync").item() == "naïve ≥ 2 nodes"
    assert back["infeasible_reason"].sel(gpus=8, strategy="in_memory").item() == reason


def test_ascii_text_takes_the_fast_path_and_reads_back_the_same(sweep_ds, tmp_path):
    # ASCII text is encoded with one NumPy cast (fast for a plan's 217,800 names), not element by element: the file
    # holds the same UTF-8 char array with _Encoding as xarray writes, and reads back unchanged.
    netCDF4 = pytest.importorskip("netCDF4")
    from mcsim.io.netcdf import netcdf_form

    assert all(str(v).isascii() for v in sweep_ds["infeasible_reason"].values.ravel())
    stored, _ = netcdf_form(sweep_ds)
    assert stored["infeasible_reason"].dtype.kind == "S"  # cast here, not left to xarray
    path = mcsim.write_results(sweep_ds, tmp_path / "r.nc")
    with netCDF4.Dataset(path) as raw:
        assert raw["infeasible_reason"].dtype == np.dtype("S1")
        assert raw["infeasible_reason"].getncattr("_Encoding") == "utf-8"
        assert raw["infeasible_reason"].dimensions[-1] == "infeasible_reason_strlen"
    back = mcsim.open_results(path)
    assert back["infeasible_reason"].dtype.kind in "UO"
    assert list(back["infeasible_reason"].values.ravel()) == list(sweep_ds["infeasible_reason"].values.ravel())


def test_lazily_opened_text_is_rewritten_unchanged(sweep_ds, tmp_path):
    # A review found that the ASCII fast path cast dask-held text (typed <U1 whatever its length) at
    # write time: the rewrite failed to broadcast, and non-ASCII text raised. Lazy text goes to xarray.
    edited = sweep_ds.copy(deep=True)
    edited["infeasible_reason"].loc[dict(gpus=64, strategy="sync")] = "naïve ≥ 2 nodes"
    first = mcsim.write_results(edited, tmp_path / "a.nc")
    lazy = mcsim.open_results(first, chunks={"run": 3})
    assert lazy["wall_time"].chunks is not None
    again = mcsim.write_results(lazy, tmp_path / "b.nc")
    back = mcsim.open_results(again)
    assert list(back["infeasible_reason"].values.ravel()) == list(edited["infeasible_reason"].values.ravel())
    np.testing.assert_array_equal(back["wall_time"].values, edited["wall_time"].values)


def test_lazy_write_keeps_the_chunk_cache(sweep_ds, tmp_path, monkeypatch):
    # A lazily held dataset arrives in pieces that each chunk gathers: with a 1 MiB cache every piece
    # recompressed its variable's whole chunk (5x slower at 100 pieces), so it keeps the default.
    pytest.importorskip("netCDF4")
    lazy = mcsim.open_results(mcsim.write_results(sweep_ds, tmp_path / "a.nc"), chunks={"run": 3})
    before, seen = chunk_cache_during_write(monkeypatch, lazy, tmp_path / "b.nc")
    assert seen == [before]


def test_rewriting_an_opened_file_keeps_it_identical(sweep_ds, tmp_path):
    """open_results gives text as Python objects; writing that again must not depend on pandas' inference."""
    assert sweep_ds["infeasible_reason"].dtype.kind == "U"  # as simulate builds it (a plain to_netcdf writes it)
    objects = sweep_ds.assign(infeasible_reason=sweep_ds["infeasible_reason"].astype(object))  # as other tools give
    first = mcsim.open_results(mcsim.write_results(objects, tmp_path / "a.nc"))
    assert first["strategy"].dtype.kind == first["infeasible_reason"].dtype.kind == "U"  # as before char arrays
    second = mcsim.open_results(mcsim.write_results(first, tmp_path / "b.nc"))
    xr.testing.assert_identical(first, second)


def test_no_python_object_arrays_reach_the_netcdf_writer(sweep_ds):
    """How object arrays are written depends on the installed pandas (pandas 3 with xarray 2024.1
    could not write them at all); every text variable must reach xarray as fixed-width Unicode."""
    from mcsim.io.netcdf import netcdf_form

    objects = sweep_ds.assign(infeasible_reason=sweep_ds["infeasible_reason"].astype(object))
    stored, encoding = netcdf_form(objects)
    assert [name for name, var in {**stored.data_vars, **stored.coords}.items() if var.dtype == object] == []
    assert encoding["infeasible_reason"]["dtype"] == "S1"


def test_lazy_write_runs_on_one_thread(sweep_ds, tmp_path, monkeypatch):
    # A lazily held dataset is written on dask's synchronous scheduler, given to that computation only:
    # the HDF5 lock serialises the file's reads and writes anyway, and the lowest xarray/dask releases
    # deadlocked a reading and a writing thread on xarray's file locks (seen once in CI). A review found
    # that setting it for the process moved other threads' dask work off their client.
    base = pytest.importorskip("dask.base")
    import dask

    lazy = mcsim.open_results(mcsim.write_results(sweep_ds, tmp_path / "a.nc"), chunks={"run": 3})
    schedulers = []
    real = base.compute

    def watching(*args, **kwargs):
        schedulers.append((kwargs.get("scheduler"), dask.config.get("scheduler", None)))
        return real(*args, **kwargs)

    monkeypatch.setattr(base, "compute", watching)
    back = mcsim.open_results(mcsim.write_results(lazy, tmp_path / "b.nc"))
    assert ("synchronous", None) in schedulers  # for the write, not set for the process
    np.testing.assert_array_equal(back["wall_time"].values, sweep_ds["wall_time"].values)
