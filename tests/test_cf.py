"""Result files follow the CF conventions (CF-1.10) and still open in xarray unchanged.

The checker is the IOOS compliance-checker (the ``test`` extra installs it); its
only accepted complaint is the currency unit: UDUNITS has no unit for money, so
``USD`` cannot be made UDUNITS-parseable.
"""

from __future__ import annotations

import json

import cf_units
import numpy as np
import pytest
import xarray as xr
from compliance_checker import runner

import mcsim
from mcsim.io.variables import VARIABLES
from mcsim.scenario.config import scenario_from_dict

CURRENCY = "USD"
pytestmark = pytest.mark.filterwarnings("ignore:The ioos_sos checker is deprecated:DeprecationWarning")


def _checker_messages(path) -> list[str]:
    """Every message of compliance-checker's CF-1.10 check of ``path`` (all priorities)."""
    suite = runner.CheckSuite()
    suite.load_all_available_checkers()
    report = path.with_suffix(".json")
    runner.ComplianceChecker.run_checker(
        str(path), ["cf:1.10"], 0, "normal", output_filename=str(report), output_format="json_new"
    )
    result = json.loads(report.read_text())[str(path)]["cf:1.10"]
    assert result["scored_points"] > 0  # the checker really ran its checks
    return [
        msg
        for level in ("high_priorities", "medium_priorities", "low_priorities")
        for item in result[level]
        for msg in item["msgs"]
    ]


def _not_currency(messages: list[str]) -> list[str]:
    return [m for m in messages if f'"{CURRENCY}" are not recognized by UDUNITS' not in m]


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


def test_rewriting_an_opened_file_keeps_it_identical(sweep_ds, tmp_path):
    """open_results gives text as Python objects; writing that again must not depend on pandas' inference."""
    first = mcsim.open_results(mcsim.write_results(sweep_ds, tmp_path / "a.nc"))
    assert sweep_ds["infeasible_reason"].dtype == object  # as simulate builds it
    assert first["strategy"].dtype.kind == first["infeasible_reason"].dtype.kind == "U"  # as before char arrays
    second = mcsim.open_results(mcsim.write_results(first, tmp_path / "b.nc"))
    xr.testing.assert_identical(first, second)


def test_no_python_object_arrays_reach_the_netcdf_writer(sweep_ds):
    """How object arrays are written depends on the installed pandas (pandas 3 with xarray 2024.1
    could not write them at all); every text variable must reach xarray as fixed-width Unicode."""
    from mcsim.io.netcdf import netcdf_form

    assert sweep_ds["infeasible_reason"].dtype == object
    stored, encoding = netcdf_form(sweep_ds)
    assert [name for name, var in {**stored.data_vars, **stored.coords}.items() if var.dtype == object] == []
    assert encoding["infeasible_reason"]["dtype"] == "S1"
