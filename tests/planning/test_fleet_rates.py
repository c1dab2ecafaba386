"""Failure rates as ranges: the fleet's factor on the rates, the shipped plans' prior on
it, and the plan report's share of the spread that comes from the rates (docs/model.md §3 "The fleet's
failure rate", §9).

Expected values are hand computations from the documented rule (a fail-stop or hang class's MTBF
divided by ``hardware.failure_rate_factor``; instabilities and planned stops as given) and from the
published factor 2.8 between the two Meta RSC clusters (Kokolis et al., HPCA'25, arXiv 2410.21680).
"""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from builders import SMALL_SCENARIO, write_toml
from plans import small_plan

from mcsim import simulate
from mcsim.cli.main import main
from mcsim.io.netcdf import open_results
from mcsim.model.checkpointing import system_mtbf_s
from mcsim.report.plan.explain import is_failure_rate_key
from mcsim.scenario.config import config_with_values, scenario_from_dict
from mcsim.scenario.draws import with_values

CLASSES = [
    {"name": "gpu", "scope": "gpu", "mtbf_hours": 2000.0},
    {"name": "hang", "scope": "cluster", "kind": "hang", "mtbf_hours": 300.0, "detection_minutes": 10.0},
    {"name": "spike", "scope": "cluster", "kind": "instability", "mtbf_hours": 500.0},
    {"name": "window", "scope": "cluster", "kind": "planned", "mtbf_hours": 168.0, "shape": 20.0},
]


def _scenario(factor: float | None, **uncertain):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = copy.deepcopy(CLASSES)
    if factor is not None:
        raw["hardware"]["failure_rate_factor"] = factor
    if uncertain:
        raw["uncertain"] = uncertain
        raw["run"]["draws"] = 4
    return scenario_from_dict(raw, "fleet.toml")


def test_factor_scales_the_fleets_classes_only():
    cfg = _scenario(2.5).base
    mtbf = {f.name: f.mtbf_hours for f in cfg.failures}
    assert mtbf == {"gpu": 800.0, "hang": 120.0, "spike": 500.0, "window": 168.0}


def test_default_factor_is_the_classes_as_given():
    cfg = _scenario(None).base
    assert [f.mtbf_hours for f in cfg.failures] == [c["mtbf_hours"] for c in CLASSES]


def test_system_mtbf_follows_the_factor():
    # 64 GPUs at 1 / 2000 h each, one hang class at 1 / 300 h and instabilities at 1 / 500 h
    # (planned stops left out): rate 0.032 + 1/300 + 0.002 per h; with factor 2 the first two double.
    rate = 64 / 2000.0 + 1 / 300.0 + 1 / 500.0
    doubled = 2 * (64 / 2000.0 + 1 / 300.0) + 1 / 500.0
    for factor, expected in ((1.0, 1 / rate), (2.0, 1 / doubled)):
        cfg = _scenario(factor).base
        got = system_mtbf_s(cfg.failures, cfg.parallelism.gpus, cfg.hardware.gpus_per_node) / 3600.0
        assert got == pytest.approx(expected, rel=1e-12)


def test_drawn_mtbf_is_the_class_s_on_both_draw_paths():
    # A drawn failures.gpu.mtbf_hours is the class's own value; the fleet's factor applies to it whether
    # the draw is evaluated on the table path (with_values) or re-validated (config_with_values).
    scenario = _scenario(2.0, **{"failures.gpu.mtbf_hours": {"dist": "uniform", "low": 1000, "high": 3000}})
    table = with_values(scenario.base, {"failures.gpu.mtbf_hours": 1500.0})
    rebuilt = config_with_values(scenario, 0, {"failures.gpu.mtbf_hours": 1500.0})
    assert table.failures[0].mtbf_hours == rebuilt.failures[0].mtbf_hours == 750.0


def test_factor_changes_the_simulated_failures():
    # Poisson failures (shape 1, stationary) strike at 64 / 400 h = 0.16 per hour, recoveries included,
    # times the factor: by the compensator E[failures] = rate x E[wall time], so the pooled ratio of
    # 200 runs estimates the rate, with relative standard error 1 / sqrt(failures).
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = [{"name": "gpu", "scope": "gpu", "mtbf_hours": 400.0, "recovery_minutes": 1.0}]
    raw["run"]["runs"] = 200
    for factor in (1.0, 2.0):
        raw["hardware"]["failure_rate_factor"] = factor
        ds = simulate(scenario_from_dict(copy.deepcopy(raw), "f.toml"), progress=False)
        failures = ds["n_failures"].values.sum()
        rate = failures / ds["wall_time"].values.sum()
        assert abs(rate / (0.16 * factor) - 1) < 4 / math.sqrt(failures), (factor, rate, failures)


SHIPPED = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("plan-*.toml"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_plans_carry_the_fleet_prior(path):
    # The published spread (RSC-1 against RSC-2, factor 2.8) as the prior's 5-95 % span.
    prior = tomllib.loads(path.read_text())["uncertain"]["hardware.failure_rate_factor"]
    assert prior["dist"] == "lognormal" and prior["median"] == 1
    assert prior["p95"] == pytest.approx(math.sqrt(2.8), abs=5e-4)


def test_rate_keys():
    assert is_failure_rate_key("hardware.failure_rate_factor")
    assert is_failure_rate_key("failures.gpu-hbm.mtbf_hours")
    assert not is_failure_rate_key("failures.gpu.recovery_minutes")
    assert not is_failure_rate_key("compute.efficiency")


def test_report_says_the_rates_share_of_the_spread(tmp_path):
    # Two inputs: the efficiency and the fleet's factor. The report's share is the rates' squared
    # 5-95 % spread of the recommendation's objective over the sum of both (first order, independent
    # inputs), computed here from the plan file's own re-screened objectives.
    raw = small_plan(run={"draws": 4})
    raw["uncertain"] = {
        "compute.efficiency": {"dist": "uniform", "low": 0.45, "high": 0.55},
        "hardware.failure_rate_factor": {"dist": "lognormal", "median": 1, "p95": 1.673},
    }
    raw["failures"][0]["mtbf_hours"] = 50.0  # frequent enough for the rates to matter
    out = tmp_path / "p.nc"
    assert main(["plan", str(write_toml(raw, tmp_path / "p.toml")), "-o", str(out), "--quiet"]) == 0
    ds = open_results(out)
    best_f = int(np.flatnonzero(ds["finalist_candidate"].values == int(ds["recommended"]))[0])
    objective = ds["uncertain_objective"].values[:, :, best_f]
    spread = (objective[:, 1] - objective[:, 0]) ** 2
    keys = list(ds["uncertain_input"].values)
    share = spread[keys.index("hardware.failure_rate_factor")] / spread.sum()
    assert 0.01 < share < 0.99  # both inputs matter here, so the line can be wrong either way
    assert main(["report", str(out), "-o", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "README.md").read_text()
    assert f"make {100 * share:.0f} % of its variance" in text, text[text.find("Together") :][:300]
    # recommended.toml draws the inputs (4 draws here), so its runs do not repeat the plan's.
    assert "drawn 4 times" in text and "without the [uncertain] table run r draws" in text


@pytest.mark.parametrize(
    "spec",
    [
        {"dist": "lognormal", "median": 1, "p95": 1.673},
        {"dist": "lognormal", "median": 79230, "sigma": 0.4},
        {"dist": "normal", "mean": 0.5, "sd": 0.05},
    ],
)
def test_normal_laws_are_scipy_stats_bit_for_bit(spec):
    # The shipped plans' prior is drawn without importing scipy.stats (~0.5 s of a warm `mcsim plan`); its
    # cdf and ppf must be scipy.stats' own values, so draws stay bit-identical.
    from scipy import stats

    from mcsim.scenario.uncertain import Z_95, _frozen

    params = {k: float(v) for k, v in spec.items() if k != "dist"}
    law = _frozen(spec["dist"], params)
    if spec["dist"] == "normal":
        reference = stats.norm(loc=params["mean"], scale=params["sd"])
        x = np.linspace(0.2, 0.8, 61)
    else:
        sigma = params.get("sigma", math.log(params.get("p95", 1.0) / params["median"]) / Z_95)
        reference = stats.lognorm(s=sigma, scale=params["median"])
        x = np.concatenate([[-1.0, 0.0], np.geomspace(1e-3, 10.0, 60) * params["median"]])
    q = np.concatenate([[0.0, 1e-12], np.linspace(0.001, 0.999, 99), [1 - 1e-12, 1.0]])
    np.testing.assert_array_equal(law.ppf(q), reference.ppf(q))
    np.testing.assert_array_equal(law.cdf(x), reference.cdf(x))


def test_spread_line_by_hand():
    # Two inputs, the recommendation (finalist 0) at 100 as given: the efficiency moves it to 90 and
    # 104, the fleet's factor to 97 and 112. Below: sqrt(0.10^2 + 0.03^2) = 10.44 %; above:
    # sqrt(0.04^2 + 0.12^2) = 12.65 %; the rates' squared 5-95 % move 0.15^2 = 0.0225 of
    # 0.14^2 + 0.15^2 = 0.0421: 53 %.
    import xarray as xr

    from mcsim.report.plan.explain import _spread_from_rates

    objective = np.array([[[90.0, 50.0], [104.0, 60.0]], [[97.0, 55.0], [112.0, 58.0]]])
    ds = xr.Dataset({"uncertain_objective": (("uncertain_input", "quantile", "finalist"), objective)})
    keys = ["compute.efficiency", "hardware.failure_rate_factor"]
    (line,) = _spread_from_rates(ds, keys, 0, 100.0)
    assert "-10.4 % to +12.6 %" in line, line
    assert "(hardware.failure_rate_factor) make 53 % of its variance" in line, line
    # A re-screen that rules the recommendation out (NaN) leaves the line out rather than guess.
    objective[0, 1, 0] = np.nan
    ds["uncertain_objective"].values[:] = objective
    assert _spread_from_rates(ds, keys, 0, 100.0) == []
    # No rate input: the spread without a share.
    (line,) = _spread_from_rates(ds.isel(uncertain_input=[1]).assign(), ["compute.efficiency"], 0, 100.0)
    assert "failure rates" not in line and "-3.0 % to +12.0 %" in line, line
