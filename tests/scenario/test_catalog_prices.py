"""Prices per GPU type: the catalog's rates, the scenario's overrides, the refusals.

Expected prices are the published list prices themselves (docs/model.md §5): AWS EC2, Linux,
us-east-1, instances.vantage.sh snapshot of 2026-01-21, instance price / 8 GPUs. Rental cost
is the closed form ``cost_allocation = GPUs x wall hours x price`` (docs/model.md §5).
"""

from __future__ import annotations

import numpy as np
import pytest
from plans import SMALL_PLAN

import mcsim
from mcsim.errors import ScenarioError
from mcsim.planning.candidates import type_prices
from mcsim.planning.plan_file import plan_from_dict
from mcsim.scenario.catalog import GPU_CATALOG, GPU_PRICES, PRICE_RATES, gpu_hour_usd
from mcsim.scenario.config import scenario_from_dict

# USD per instance-hour of the 8-GPU instance (AWS price list, us-east-1, 2026-01-21)
ON_DEMAND_INSTANCE = {
    "A100-40GB": 21.957642,  # p4d.24xlarge
    "A100-80GB": 27.44705,  # p4de.24xlarge
    "H100-SXM": 55.04,  # p5.48xlarge
    "H200": 63.296,  # p5en.48xlarge
    "B200": 113.9328,  # p6-b200.48xlarge
}
RESERVED_INSTANCE = {"A100-40GB": 13.921094, "A100-80GB": 17.401365}  # 1-year Standard RI, no upfront


def _two_types(raw: dict, **cost) -> dict:
    raw["run"]["runs"] = 6
    raw["sweep"] = {"hardware.gpu": ["A100-80GB", "H100-SXM"]}
    if cost:
        raw["cost"] = cost
    return raw


def _allocation_price(ds) -> np.ndarray:
    """The price each configuration was charged, from the closed form: allocation / (GPUs x hours)."""
    gpus = 64  # the small scenario's job
    return (ds["cost_allocation"] / (gpus * ds["wall_time"])).values


def test_catalog_prices_are_the_published_ones():
    assert set(GPU_PRICES) == set(GPU_CATALOG)
    for name, instance in ON_DEMAND_INSTANCE.items():
        assert GPU_PRICES[name].on_demand == pytest.approx(instance / 8, rel=1e-15)
    for name, instance in RESERVED_INSTANCE.items():
        assert GPU_PRICES[name].reserved == pytest.approx(instance / 8, rel=1e-15)
    # no source for these: None, never a guess (docs/model.md §5)
    assert GPU_PRICES["GH200"].on_demand is None and GPU_PRICES["H800"].on_demand is None
    assert all(GPU_PRICES[name].reserved is None for name in ("H100-SXM", "H200", "H800", "GH200", "B200"))
    assert PRICE_RATES == ("on_demand", "reserved")


def test_per_type_prices_reach_the_cost_output(small_raw):
    ds = mcsim.simulate(scenario_from_dict(_two_types(small_raw), "two.toml"), progress=False)
    expected = [ON_DEMAND_INSTANCE["A100-80GB"] / 8, ON_DEMAND_INSTANCE["H100-SXM"] / 8]
    np.testing.assert_allclose(_allocation_price(ds), np.array(expected)[:, None] * np.ones(6), rtol=1e-12)
    np.testing.assert_allclose(ds["cost"], ds["cost_allocation"] + ds["cost_electricity"], rtol=1e-12)


def test_reserved_rate_and_per_type_override(small_raw):
    raw = _two_types(small_raw, price="reserved", gpu_hour_usd_by_type={"H100-SXM": 3.1})
    ds = mcsim.simulate(scenario_from_dict(raw, "two.toml"), progress=False)
    # A100 80GB at its 1-year reserved price, H100 at the scenario's own price
    expected = [RESERVED_INSTANCE["A100-80GB"] / 8, 3.1]
    np.testing.assert_allclose(_allocation_price(ds), np.array(expected)[:, None] * np.ones(6), rtol=1e-12)


def test_one_explicit_price_applies_where_no_type_price_is_given(small_raw):
    raw = _two_types(small_raw, gpu_hour_usd=2.5, gpu_hour_usd_by_type={"H100-SXM": 4.0})
    ds = mcsim.simulate(scenario_from_dict(raw, "two.toml"), progress=False)
    np.testing.assert_allclose(_allocation_price(ds), np.array([[2.5], [4.0]]) * np.ones(6), rtol=1e-12)


def test_one_explicit_price_without_a_gpu_sweep_is_accepted(small_raw):
    small_raw["cost"] = {"gpu_hour_usd": 2.0}
    scenario = scenario_from_dict(small_raw, "one.toml")
    assert gpu_hour_usd(scenario.base.cost, scenario.base.hardware.gpu) == 2.0


@pytest.mark.parametrize(
    "cost,sweep,uncertain",
    [
        ({"gpu_hour_usd": 2.5}, {}, {}),
        ({}, {"cost.gpu_hour_usd": [2.0, 3.0]}, {}),
        ({}, {}, {"cost.gpu_hour_usd": {"dist": "uniform", "low": 1.0, "high": 3.0}}),
    ],
    ids=["explicit", "swept", "uncertain"],
)
def test_one_price_across_swept_gpu_types_is_refused(small_raw, cost, sweep, uncertain):
    raw = _two_types(small_raw, **cost)
    raw["sweep"].update(sweep)
    if uncertain:
        raw["uncertain"] = uncertain
        raw["run"]["draws"] = 4
    with pytest.raises(ScenarioError, match=r"cost\.gpu_hour_usd: one price for every GPU type, but the sweep"):
        scenario_from_dict(raw, "two.toml")


def test_owned_model_needs_no_rental_price(small_raw):
    small_raw["hardware"]["gpu"] = "GH200"  # no published rental price
    small_raw["cost"] = {"model": "owned"}
    with pytest.raises(ScenarioError, match="GH200"):
        scenario_from_dict({**small_raw, "cost": {}}, "gh200.toml")
    assert scenario_from_dict(small_raw, "gh200.toml").base.cost.model == "owned"


PLAN = {
    "model": SMALL_PLAN["model"],  # the small plan's 1.3B model
    "failures": [{"name": "gpu", "mtbf_hours": 2000.0}],
    "search": {"gpu_types": ["A100-80GB", "H100-SXM", "GH200"], "gpus": [64]},
}


def test_plan_screens_each_type_at_its_price():
    plan = plan_from_dict({**PLAN, "cost": {"gpu_hour_usd_by_type": {"GH200": 1.49}}}, "plan.toml")
    expected = [ON_DEMAND_INSTANCE["A100-80GB"] / 8, ON_DEMAND_INSTANCE["H100-SXM"] / 8, 1.49]
    np.testing.assert_allclose(type_prices(plan), expected, rtol=1e-15)


def test_plan_with_one_price_for_several_types_is_refused():
    with pytest.raises(ScenarioError, match=r"cost\.gpu_hour_usd: one price for every GPU type, but search\.gpu_types"):
        plan_from_dict({**PLAN, "cost": {"gpu_hour_usd": 2.0}}, "plan.toml")
    # one explicit price for the one type not priced by name is no comparison: accepted
    priced = {"gpu_hour_usd": 2.0, "gpu_hour_usd_by_type": {"A100-80GB": 1.0, "H100-SXM": 3.0}}
    plan = plan_from_dict({**PLAN, "cost": priced}, "plan.toml")
    np.testing.assert_allclose(type_prices(plan), [1.0, 3.0, 2.0], rtol=1e-15)


def test_h800_is_an_h100_sxm5_but_for_nvlink():
    # NVIDIA H800 SXM5 specification (2023): the H100 SXM5's dense BF16 (1,979 sparse / 2) and FP8 (3,958
    # sparse / 2) peaks, 80 GB HBM3 at 3.35 TB/s, up to 700 W; NVLink (400 GB/s) is network.intra_gbps,
    # not a catalog field.
    h800 = GPU_CATALOG["H800"]
    assert (h800.peak_tflops, h800.fp8_tflops) == (989.0, 1979.0)  # the catalog's H100 convention: 1,979 / 2 -> 989
    assert (h800.memory_gb, h800.hbm_gbps, h800.tdp_w) == (80.0, 3350.0, 700.0)
    assert "400 GB/s" in h800.sources


def test_h800_needs_a_price_from_the_scenario(small_raw):
    small_raw["hardware"]["gpu"] = "H800"
    with pytest.raises(ScenarioError, match="no published on_demand price for H800"):
        scenario_from_dict(small_raw, "h800.toml")
    # DeepSeek-V3's assumed rental price (arXiv 2412.19437, Table 1), given by the scenario
    small_raw["cost"] = {"gpu_hour_usd_by_type": {"H800": 2.0}}
    scenario = scenario_from_dict(small_raw, "h800.toml")
    assert gpu_hour_usd(scenario.base.cost, "H800") == 2.0
