"""Units through what users do: conversions that carry their unit, tables in units that read as plain numbers.

References are the units' definitions (1 d = 24 h = 1440 min = 86,400 s; 1 MWh = 1,000 kWh;
1 MUSD = 10^6 USD; 1 t = 1,000 kg), written here, not read from mcsim.io.units.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr

import mcsim
from mcsim.io.units import conversion_factor, format_readable, readable_unit

# (unit, to, factor) from the definitions
DEFINITIONS = [
    ("h", "d", 1 / 24),
    ("d", "s", 86_400.0),
    ("min", "h", 1 / 60),
    ("MW h", "kWh", 1_000.0),
    ("GWh", "MWh", 1_000.0),
    ("USD", "MUSD", 1e-6),
    ("BUSD", "kUSD", 1e6),
    ("t", "kg", 1_000.0),
    ("kt", "t", 1_000.0),
]


@pytest.mark.parametrize(("unit", "to", "factor"), DEFINITIONS)
def test_conversion_factors_are_the_definitions(unit, to, factor):
    assert conversion_factor(unit, to) == pytest.approx(factor, rel=1e-15)
    assert conversion_factor(to, unit) == pytest.approx(1 / factor, rel=1e-15)


def test_conversion_across_quantities_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"cannot convert 'h' to 'USD'; expected one of s, min, h, d") as err:
        conversion_factor("h", "USD")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="not a unit mcsim converts"):
        conversion_factor("furlong", "m")


@pytest.mark.parametrize(
    ("values", "unit", "expected"),
    [
        ([1.07], "USD", (1.0, "USD")),  # the 1.07e-06 MUSD
        ([2.3861e7], "USD", (1e-6, "MUSD")),  # the 2.3861e+07
        ([4_500.0, 5_200.0], "USD", (1e-3, "kUSD")),
        ([76.8], "h", (1 / 24, "d")),
        ([0.5], "h", (60.0, "min")),
        ([0.004], "MW h", (1e3, "kWh")),
        ([1_200.0], "t", (1e-3, "kt")),
        ([0.3], "1", (1.0, "1")),  # no family: as it is
        ([np.nan, 0.0], "USD", (1.0, "USD")),  # nothing to read: as it is
    ],
)
def test_readable_unit_is_the_largest_in_which_values_are_at_least_one(values, unit, expected):
    factor, shown = readable_unit(values, unit)
    assert shown == expected[1] and factor == pytest.approx(expected[0], rel=1e-15)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (23_861_000.0, "23,860,000"),
        (1_234.4, "1,234"),
        (23.861, "23.86"),
        (1.07, "1.07"),
        (0.0123, "0.0123"),
        (0.0, "0"),
        (1.5e-6, "1.500e-06"),
        (float("nan"), "nan"),
    ],
)
def test_format_readable_groups_thousands_and_avoids_exponents(value, text):
    assert format_readable(value, 4) == text


@pytest.fixture(scope="module")
def small_result(tmp_path_factory):
    import copy

    from builders import SMALL_SCENARIO, write_toml

    raw = copy.deepcopy(SMALL_SCENARIO)
    raw.setdefault("run", {})["runs"] = 40
    path = write_toml(raw, tmp_path_factory.mktemp("units") / "small.toml")
    return mcsim.simulate(mcsim.load_scenario(path), progress=False)


def test_accessor_conversion_carries_its_unit(small_result):
    ds = small_result
    days = ds.mcsim.to("wall_time", "d")
    assert days.attrs["units"] == "d" and ds["wall_time"].attrs["units"] == "h"
    np.testing.assert_allclose(days.values, ds["wall_time"].values / 24, rtol=1e-15)
    cost = ds.mcsim.to("cost", "kUSD")
    np.testing.assert_allclose(cost.values, ds["cost"].values / 1_000, rtol=1e-15)
    assert cost.attrs["units"] == "kUSD" and cost.attrs["long_name"] == ds["cost"].attrs["long_name"]
    with pytest.raises(ValueError, match="cannot convert 'h' to 'kg'"):
        ds.mcsim.to("wall_time", "kg")


def test_accessor_conversion_honours_the_files_units_attribute(small_result):
    # a variable stored in seconds (its units attribute says so) converts from seconds, not from the registry's hours
    ds = small_result.copy()
    ds["wall_time"] = ds["wall_time"] * 3600
    ds["wall_time"].attrs["units"] = "s"
    np.testing.assert_allclose(ds.mcsim.to("wall_time", "h").values, small_result["wall_time"].values, rtol=1e-12)


def test_summary_table_reads_small_costs_without_exponents(small_result):
    # the small scenario costs a few USD per run: the table said "1.07e-06 MUSD"
    from mcsim.report.tables import summary_table

    text = summary_table(small_result)
    header, row = text.splitlines()[:2]
    mean_cost = float(small_result["cost"].mean())
    assert mean_cost < 1_000  # the premise: dollars, not millions
    assert "cost [USD]" in header and not re.search(r"\de[+-]\d", row), text
    column = header.index("cost [USD]")
    assert float(row[column:].split()[0].replace(",", "")) == pytest.approx(mean_cost, rel=1e-3)


def test_summary_table_groups_thousands_in_large_values(small_result):
    # costs of millions of USD, as a 405B run: MUSD with 4 significant digits, never an exponent
    from mcsim.report.tables import summary_table

    ds = small_result.copy()
    for name in ("cost", "cost_allocation", "cost_electricity"):
        ds[name] = ds[name] * 1e4
        ds[name].attrs["units"] = "USD"
    text = summary_table(ds)
    header, row = text.splitlines()[:2]
    assert "cost [MUSD]" in header and not re.search(r"\de[+-]\d", text), text
    column = header.index("cost [MUSD]")
    assert float(row[column:].split()[0].replace(",", "")) == pytest.approx(float(ds["cost"].mean()) / 1e6, rel=1e-3)


def test_table_is_a_dataframe_of_the_summary(small_result):
    import pandas as pd

    frame = small_result.mcsim.table()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 1
    cost = small_result["cost"].values
    assert frame["cost_mean"].iloc[0] == pytest.approx(cost.mean(), rel=1e-12)
    half = 1.959963984540054 * cost.std(ddof=1) / np.sqrt(cost.size)
    assert frame["cost_ci95_high"].iloc[0] == pytest.approx(cost.mean() + half, rel=1e-9)
    assert frame.attrs["units"]["wall_time_mean"] == "h" and frame.attrs["units"]["cost_p95"] == "USD"
    with pytest.raises(ValueError, match="not a per-run variable: iteration_time"):
        small_result.mcsim.table(variables=["iteration_time"])


def test_plain_arithmetic_keeps_xarrays_attribute_as_documented(small_result):
    # the trap ds.mcsim.to() exists for (docs/units.md): xarray copies the attribute through arithmetic
    divided = small_result["wall_time"] / 24
    assert isinstance(divided, xr.DataArray) and divided.attrs.get("units") in ("h", None)


def test_money_in_report_text_reads_in_its_own_unit():
    # the report's regrets said "1.07e-06 MUSD" for a dollar
    from mcsim.io.format import format_money

    assert format_money(1.07) == "1.07 USD"
    assert format_money(4_500.0) == "4.50 kUSD"
    assert format_money(1_234_567.0) == "1.23 MUSD"


def test_plan_table_prints_the_objective_in_a_readable_unit(tmp_path):
    # `mcsim plan` printed a cost as 2.3861e+07: the finalists' lines read in the objective's unit, no exponent
    from plans import hostile_plan, planned

    from mcsim.report.plan.explain import explain_plan
    from mcsim.report.plan.table import plan_table

    ds = mcsim.open_results(planned(hostile_plan(plan={"objective": "cost"}), tmp_path)).load()
    objective = ds["finalist_objective"].values
    units = {"USD": 1.0, "kUSD": 1e3, "MUSD": 1e6}
    text = plan_table(ds)
    header = text.splitlines()[0]
    (unit,) = [u for u in units if f"objective cost [{u}]" in header]
    assert not re.search(r"\de[+-]\d", text), text
    first = text.splitlines()[1].split()[0].replace(",", "")  # the recommendation's mean, first
    recommended = int(np.flatnonzero(ds["finalist_candidate"].values == int(ds["recommended"]))[0])
    assert float(first) * units[unit] == pytest.approx(objective[recommended], rel=1e-4)
    assert 1 <= np.median(objective) / units[unit] < 1000  # the unit in which the values read as plain numbers
    assert f"| objective [{unit}] |" in explain_plan(ds)


def test_report_configuration_table_reads_in_readable_units(small_result):
    from mcsim.report.markdown import configuration_table

    rows = {line.split("|")[1].strip(): line for line in configuration_table(small_result, {})[2:]}
    assert set(rows) == {"cost [USD]", "energy [kWh]", "wall time [min]"}, rows
    mean = float(rows["cost [USD]"].split("|")[2].replace(",", ""))
    assert mean == pytest.approx(float(small_result["cost"].mean()), rel=5e-3)
