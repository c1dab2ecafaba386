"""Uncertain inputs: distributions, two-level sampling, paired draws."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from builders import SMALL_SCENARIO
from scipy import stats

import mcsim
from mcsim.engine.resume import PieceStore
from mcsim.engine.simulate import simulate_config
from mcsim.errors import ScenarioError
from mcsim.io.netcdf import write_results
from mcsim.kernels import interface as mc
from mcsim.scenario.config import config_with_values, scenario_from_dict
from mcsim.scenario.uncertain import draw_values
from mcsim.scenario.uncertain_table import parse_input


def _entry(key, **spec):
    return parse_input(copy.deepcopy(SMALL_SCENARIO), key, spec, set(), "test.toml")


# ---------------------------------------------------------------- distributions


def test_lognormal_median_and_p95_are_its_quantiles():
    entry = _entry("failures.gpu.mtbf_hours", dist="lognormal", median=79230, p95=200000)
    np.testing.assert_allclose(entry.ppf(np.array([0.5, 0.95])), [79230, 200000], rtol=1e-9)
    sigma = _entry("failures.gpu.mtbf_hours", dist="lognormal", median=100, sigma=0.5)
    # lognormal quantile: median * exp(sigma * z_p)
    np.testing.assert_allclose(sigma.ppf(np.array([0.9])), 100 * math.exp(0.5 * stats.norm.ppf(0.9)), rtol=1e-9)


def test_uniform_loguniform_triangular_quantiles():
    uniform = _entry("compute.efficiency", dist="uniform", low=0.4, high=0.6)
    np.testing.assert_allclose(uniform.ppf(np.array([0.25])), 0.45)
    log = _entry("checkpoint.storage_gbps", dist="loguniform", low=100, high=10000)
    np.testing.assert_allclose(log.ppf(np.array([0.5])), 1000, rtol=1e-9)  # geometric middle
    tri = _entry("compute.efficiency", dist="triangular", low=0.5, mode=0.6, high=0.65)
    # triangular CDF at the mode is (mode - low) / (high - low) = 2/3
    np.testing.assert_allclose(tri.ppf(np.array([2 / 3])), 0.6, rtol=1e-9)


def test_truncated_to_the_keys_bounds():
    # compute.efficiency is in (0, 1]: a normal(0.95, 0.1) is cut at 1. Reference: scipy's
    # truncnorm with the same cut, a separate implementation of the truncated distribution.
    entry = _entry("compute.efficiency", dist="normal", mean=0.95, sd=0.1)
    u = np.linspace(0.01, 0.99, 9)
    reference = stats.truncnorm((0 - 0.95) / 0.1, (1 - 0.95) / 0.1, loc=0.95, scale=0.1).ppf(u)
    np.testing.assert_allclose(entry.ppf(u), reference, rtol=1e-9)
    assert entry.ppf(np.array([1 - 1e-15])).max() <= 1.0


def test_gamma_rate_is_inverse_gamma_mtbf():
    entry = _entry("failures.gpu.mtbf_hours", dist="invgamma", shape=5.0, scale=50.0)
    # 1/MTBF ~ Gamma(shape 5, scale 1/50): the p-quantile of the MTBF is 1 / the (1-p)-quantile of the rate
    np.testing.assert_allclose(entry.ppf(np.array([0.3])), 1 / stats.gamma(5.0, scale=1 / 50).ppf(0.7), rtol=1e-9)


@pytest.mark.parametrize(
    "spec,message",
    [
        ({"dist": "normal", "mean": 1.0}, "required key is missing"),
        ({"dist": "normal", "mean": 1.0, "sd": 0.1, "skew": 2}, "unknown key"),
        ({"dist": "normal", "mean": 1.0, "sd": 0.0}, r"expected a value > 0, got 0"),
        ({"dist": "lognormal", "median": 1.0}, "one of p95 or sigma"),
        ({"dist": "lognormal", "median": 1.0, "p95": 2.0, "sigma": 1.0}, "one of p95 or sigma"),
        ({"dist": "lognormal", "median": 1.0, "p95": 0.5}, "p95 > median"),
        ({"dist": "uniform", "low": 0.6, "high": 0.4}, "high > low"),
        ({"dist": "uniform", "low": "a", "high": 0.4}, "expected a number, got string 'a'"),
        ({"dist": "uniform", "low": float("nan"), "high": 0.4}, "expected a finite number"),
        ({"dist": "normal", "mean": -5.0, "sd": 0.01}, "no probability within"),
        ({"dist": "weibull", "low": 1}, "expected one of normal"),
        ("uniform", "expected a table"),
    ],
)
def test_bad_specifications(spec, message):
    with pytest.raises(ScenarioError, match=message):
        _entry("compute.efficiency", **spec) if isinstance(spec, dict) else parse_input(
            copy.deepcopy(SMALL_SCENARIO), "compute.efficiency", spec, set(), "test.toml"
        )


def test_int_keys_and_draws_without_inputs_are_refused(small_raw):
    small_raw["run"]["draws"] = 8
    with pytest.raises(ScenarioError, match="run.draws"):
        scenario_from_dict(small_raw)
    small_raw["uncertain"] = {"parallelism.gpus": {"dist": "uniform", "low": 8, "high": 64}}
    with pytest.raises(ScenarioError, match="continuous"):
        scenario_from_dict(small_raw)


def test_scenario_keeps_the_table_and_writes_it_back(small_raw):
    small_raw["run"]["draws"] = 4
    small_raw["uncertain"] = {"failures.gpu.mtbf_hours": {"dist": "lognormal", "median": 2000, "p95": 5000}}
    scenario = scenario_from_dict(small_raw)
    assert [e.key for e in scenario.uncertain] == ["failures.gpu.mtbf_hours"]
    again = scenario_from_dict(__import__("tomllib").loads(scenario.to_toml()))
    assert again.uncertain == scenario.uncertain


def test_designs_are_seeded_and_fill_the_cube(small_raw):
    small_raw["uncertain"] = {"compute.efficiency": {"dist": "uniform", "low": 0.4, "high": 0.6}}
    small_raw["run"]["draws"] = 64
    inputs = scenario_from_dict(small_raw).uncertain
    for design in ("sobol", "lhs"):
        a = draw_values(inputs, 64, design, 3)
        np.testing.assert_array_equal(a, draw_values(inputs, 64, design, 3))
        assert not np.array_equal(a, draw_values(inputs, 64, design, 4))
        # one point in each of the 64 strata of [0.4, 0.6] (Latin hypercube; Sobol with 2^6 points)
        strata = np.floor((a[:, 0] - 0.4) / 0.2 * 64).astype(int)
        assert sorted(strata) == list(range(64))


# ---------------------------------------------------------------- two-level sampling


def _censored_poisson(draws=128, runs=50):
    """One cluster-scope exponential failure class, runs censored at T = 500 h (never finishing)."""
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = [{"name": "sw", "scope": "cluster", "mtbf_hours": 10.0, "recovery_minutes": 0.0}]
    raw["run"].update(max_wall_days=500 / 24, runs=runs, draws=draws, mode="fast")
    raw["model"]["tokens"] = 1e15
    raw["stragglers"] = {"sigma": 0.0}
    return raw


@pytest.fixture(scope="module")
def gamma_rate():
    # Failure rate lambda = 1/MTBF ~ Gamma(a = 5, rate b = 50 h) across draws (MTBF inverse-gamma,
    # scale 50 h); given lambda, failures over T = 500 h form a Poisson process (exponential,
    # one unit, zero recovery time), so the count is Poisson(lambda T) and, over draws,
    # negative binomial: mean a T / b = 50, variance a T / b + a T^2 / b^2 = 50 + 500 = 550,
    # of which Var E[N | lambda] = Var(lambda T) = 500 comes from the input (epistemic) and
    # E Var[N | lambda] = E[lambda T] = 50 from chance (aleatoric).
    raw = _censored_poisson()
    raw["uncertain"] = {"failures.sw.mtbf_hours": {"dist": "invgamma", "shape": 5.0, "scale": 50.0}}
    return mcsim.simulate(scenario_from_dict(raw), progress=False)


def test_gamma_rate_gives_negative_binomial_failure_counts(gamma_rate):
    n = gamma_rate.n_failures.values  # (draw, run)
    assert n.shape == (128, 50)
    mean, var = n.mean(), n.var()
    # standard errors from the draws as independent clusters (each draw: its own rate)
    se_mean = n.mean(axis=1).std(ddof=1) / math.sqrt(n.shape[0])
    se_var = ((n - mean) ** 2).mean(axis=1).std(ddof=1) / math.sqrt(n.shape[0])
    assert abs(mean - 50.0) < 4 * se_mean
    assert abs(var - 550.0) < 4 * se_var
    # without the rate's uncertainty the variance would be the Poisson one, 50: far outside
    assert var > 50 + 4 * se_var


def _paired_raw():
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=12, draws=6, mode="fast")
    raw["sweep"] = {"energy.pue": [1.1, 1.4], "checkpoint.strategy": ["sync", "async"]}
    raw["uncertain"] = {
        "compute.efficiency": {"dist": "triangular", "low": 0.4, "mode": 0.5, "high": 0.6},
        "failures.gpu.mtbf_hours": {"dist": "lognormal", "median": 2000, "p95": 6000},
    }
    return raw


@pytest.fixture(scope="module")
def paired():
    scenario = scenario_from_dict(_paired_raw())
    return scenario, mcsim.simulate(scenario, progress=False)


def test_dims_and_input_variables(paired):
    _, ds = paired
    assert ds.wall_time.dims == ("pue", "strategy", "draw", "run")
    assert ds.iteration_time.dims == ("pue", "strategy", "draw")  # efficiency is drawn
    var = ds["compute.efficiency"]
    assert var.dims == ("draw",) and var.attrs["units"] == "1" and "efficiency" in var.attrs["long_name"]
    assert ds["failures.gpu.mtbf_hours"].attrs["units"] == "h"
    assert np.all((var >= 0.4) & (var <= 0.6))
    # the iteration time follows the drawn efficiency (compute time scales as 1 / efficiency)
    assert np.corrcoef(var, ds.compute_time.isel(pue=0, strategy=0))[0, 1] < -0.99


def test_draws_are_paired_across_configurations(paired):
    _, ds = paired
    # PUE does not enter the kernel: the same draw gives bit-identical runs at every PUE
    np.testing.assert_array_equal(ds.wall_time.isel(pue=0).values, ds.wall_time.isel(pue=1).values)
    np.testing.assert_array_equal(ds.n_failures.isel(pue=0).values, ds.n_failures.isel(pue=1).values)
    # ... and the runs differ between draws (other parameters, other streams)
    assert not np.array_equal(
        ds.wall_time.isel(pue=0, strategy=0, draw=0), ds.wall_time.isel(pue=0, strategy=0, draw=1)
    )


def test_run_r_of_draw_d_uses_the_streams_of_run_d_times_runs_plus_r(paired):
    scenario, ds = paired
    keys = [e.key for e in scenario.uncertain]
    d = 4
    values = {k: float(ds[k][d]) for k in keys}
    cfg = config_with_values(scenario, 3, values)  # pue=1.4, strategy=async
    out, _, _ = simulate_config(cfg, 12, scenario.run.seed, "fast", first_run=d * 12)
    np.testing.assert_array_equal(out[:, mc.OUT_WALL_S] / 3600.0, ds.wall_time.isel(pue=1, strategy=1, draw=d))


def _without_created(ds):
    ds = ds.copy()
    ds.attrs.pop("created")
    ds.attrs.pop("history")  # holds the creation time too
    return ds


def test_bit_identical_across_chunking_and_resume(paired, tmp_path):
    scenario, ds = paired
    chunked = mcsim.simulate(scenario, progress=False, chunk_runs=5)
    assert _without_created(chunked).identical(_without_created(ds))
    store = PieceStore(tmp_path / "out.nc", scenario, 5)
    mcsim.simulate(scenario, progress=False, chunk_runs=5, store=store)
    messages = []
    store = PieceStore(tmp_path / "out.nc", scenario, 5, notify=messages.append)
    resumed = mcsim.simulate(scenario, progress=False, chunk_runs=5, store=store, notify=messages.append)
    assert any(m.startswith("resuming: 72 of 72") for m in messages), messages  # 4 configs x 6 draws x 3 chunks
    assert _without_created(resumed).identical(_without_created(ds))


def test_written_and_read_back(paired, tmp_path):
    _, ds = paired
    path = write_results(ds, tmp_path / "u.nc")
    back = mcsim.open_results(path)
    np.testing.assert_array_equal(back["compute.efficiency"], ds["compute.efficiency"])
    assert back.attrs["uncertain_inputs"] == "compute.efficiency failures.gpu.mtbf_hours"


# ---------------------------------------------------------------- honest summaries


def test_summary_splits_the_variance_by_the_law_of_total_variance(gamma_rate):
    stats = mcsim.summarize(gamma_rate).n_failures
    n = gamma_rate.n_failures.values
    draws, runs = n.shape
    epistemic, aleatoric = (float(stats.sel(stat=s)) for s in ("epistemic_share", "aleatoric_share"))
    assert epistemic + aleatoric == pytest.approx(1.0, abs=1e-12)
    # the shares times the variance they split recover the closed form's two parts (500 and 50)
    split_total = n.mean(axis=1).var(ddof=1) - n.var(axis=1, ddof=1).mean() / runs + n.var(axis=1, ddof=1).mean()
    se_between = ((n.mean(axis=1) - n.mean()) ** 2).std(ddof=1) / math.sqrt(draws)
    se_within = n.var(axis=1, ddof=1).std(ddof=1) / math.sqrt(draws)
    assert abs(epistemic * split_total - 500.0) < 4 * se_between
    assert abs(aleatoric * split_total - 50.0) < 4 * se_within
    # the law of total variance: the two parts add up to the total variance (550 in closed form)
    assert abs(split_total - float(stats.sel(stat="std")) ** 2) < 0.02 * split_total


def test_summary_ci_comes_from_the_draw_means(gamma_rate):
    summary = mcsim.summarize(gamma_rate).n_failures
    n = gamma_rate.n_failures.values
    low, high, mean = (float(summary.sel(stat=s)) for s in ("ci95_low", "ci95_high", "mean"))
    half = (high - low) / 2
    # two-level: the half-width is 1.96 s_B / sqrt(D) (s_B: sd of the draw means), about
    # 1.96 sqrt(501 / 128) = 3.9 here, far wider than the naive 1.96 sqrt(550 / 6400) = 0.57
    assert half == pytest.approx(1.959964 * n.mean(axis=1).std(ddof=1) / math.sqrt(n.shape[0]), rel=1e-6)
    assert half > 4 * 1.959964 * n.std(ddof=1) / math.sqrt(n.size)
    assert abs(mean - 50.0) < 4 / 1.959964 * half  # the true mean, within 4 standard errors
    # the predictive 5-95 % interval spans the negative binomial's (mean 50, variance 550)
    # NB(r = a = 5, p = b / (b + T) = 50 / 550); tolerances ~4 standard errors of a quantile
    # estimated from 128 independent rates (sqrt(0.05 * 0.95 / 128) / density: ~1.6 at p5, ~3 at p95)
    nb = stats.nbinom(5, 50 / 550)
    assert float(summary.sel(stat="p5")) == pytest.approx(nb.ppf(0.05), abs=7)
    assert float(summary.sel(stat="p95")) == pytest.approx(nb.ppf(0.95), abs=12)


def test_summary_table_reports_draws(paired):
    from mcsim.report.tables import summary_table

    text = summary_table(paired[1])
    assert "cost 5-95 % [USD]" in text and "cost epistemic" in text
    assert "over 6 parameter draws x 12 runs" in text
    assert len([line for line in text.splitlines() if line.startswith("pue=")]) >= 4  # no row per draw


# ---------------------------------------------------------------- sensitivity


def _linear_cost(design, draws):
    """Cost linear in two inputs through the model, a third input without effect on cost.

    No failures and no stragglers: every run of a draw is the same, and
    cost = a * gpu_hour_usd + b * electricity_usd_per_kwh (a: GPU-hours, b: facility kWh, both
    fixed by the configuration); grid_g_per_kwh changes CO2 only. With independent uniform
    inputs the Sobol indices are S1_i = ST_i = a_i^2 Var X_i / sum_j a_j^2 Var X_j, and 0 for
    the third input.
    """
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = []
    raw["stragglers"] = {"sigma": 0.0}
    raw["run"].update(runs=2, draws=draws, design=design, mode="fast")
    raw["uncertain"] = {
        "cost.gpu_hour_usd": {"dist": "uniform", "low": 1.0, "high": 3.0},
        "cost.electricity_usd_per_kwh": {"dist": "uniform", "low": 0.0, "high": 2.0},
        "carbon.grid_g_per_kwh": {"dist": "uniform", "low": 100, "high": 600},
    }
    ds = mcsim.simulate(scenario_from_dict(raw), progress=False)
    a = float((ds.cost_allocation / ds["cost.gpu_hour_usd"]).isel(run=0, draw=0))
    b = float((ds.cost_electricity / ds["cost.electricity_usd_per_kwh"]).isel(run=0, draw=0))
    v1, v2 = a * a * 2.0**2 / 12, b * b * 2.0**2 / 12  # a uniform of width w has variance w^2 / 12
    return ds, np.array([v1, v2, 0.0]) / (v1 + v2)


def _within(index, low, high, exact):
    """``exact`` within about 4 standard errors of the estimate (the 95 % half-width is 1.96 of them)."""
    slack = (high - low) / 2 * (4 / 1.959964 - 1)
    return low - slack <= exact <= high + slack


def test_saltelli_recovers_known_indices_and_a_null_input():
    ds, exact = _linear_cost("saltelli", 128 * 5)
    result = ds.mcsim.sensitivity("cost")
    assert result.attrs["method"] == "sobol"
    assert list(result.input.values) == ["cost.gpu_hour_usd", "cost.electricity_usd_per_kwh", "carbon.grid_g_per_kwh"]
    for name in ("S1", "ST"):
        for i in range(3):
            assert _within(*(float(result[f"{name}{s}"][i]) for s in ("", "_low", "_high")), exact[i]), (name, i)
    # the input without effect: its total index's interval contains 0
    assert float(result.ST_low[2]) <= 0.0 <= float(result.ST_high[2])
    assert list(result["rank"].values) == [1, 2, 3]
    assert 0.25 < exact[1] < 0.75  # both effective inputs matter: the case is not degenerate


def test_given_data_method_ranks_the_inputs():
    ds, exact = _linear_cost("sobol", 256)
    from mcsim.analysis.sensitivity import sensitivity

    result = sensitivity(ds, "cost")
    assert result.attrs["method"] == "delta"
    assert np.isnan(result.ST).all()  # no total index without a Saltelli design
    for i in range(2):
        assert _within(*(float(result[f"S1{s}"][i]) for s in ("", "_low", "_high")), exact[i]), i
    assert list(result["rank"].values) == [1, 2, 3]


def test_sensitivity_cli_and_refusals(tmp_path, capsys, small_raw):
    from mcsim.cli.main import main

    ds, _ = _linear_cost("saltelli", 4 * 5)
    path = write_results(ds, tmp_path / "s.nc")
    assert main(["sensitivity", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1. cost.gpu_hour_usd" in out and "ST " in out
    assert main(["sensitivity", str(path), "--output", "nonsense"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mcsim: error: ") and "nonsense" in err[0]
    small_raw["run"]["runs"] = 4
    plain = write_results(mcsim.simulate(scenario_from_dict(small_raw), progress=False), tmp_path / "p.nc")
    assert main(["sensitivity", str(plain)]) == 2
    assert "no parameter draws" in capsys.readouterr().err


# ---------------------------------------------------------------- decisions (step 5)


def test_analysis_treats_draws_as_samples_not_configurations(paired):
    _, ds = paired
    record = ds.mcsim.best("cost")
    assert set(record["configuration"]) == {"pue", "strategy"}  # never a draw
    assert record["runs"] == 6 * 12 and record["draws"] == 6 and 0.0 <= record["p_best"] <= 1.0
    assert ds.mcsim.pareto().dims == ("pue", "strategy")
    table = ds.mcsim.decision_table("cost")
    assert float(table.p_best.sum()) == pytest.approx(1.0)
    # best by the pooled mean is the configuration of least expected regret (equal runs per draw)
    flat = int(np.nanargmin(table.expected_regret.values))
    assert record["configuration"] == {
        d: ds[d].values[i].item()
        for d, i in zip(("pue", "strategy"), np.unravel_index(flat, table.expected_regret.shape), strict=False)
    }


def test_report_has_a_decision_section(paired, tmp_path):
    from mcsim.report.result_report import pooled_over_draws, report_markdown, write_report

    _, ds = paired
    text = report_markdown(ds, [], deadline=2 * float(ds.wall_time.median()) / 24)
    assert "## Decision under uncertainty" in text and "Robust choice on cost" in text
    assert "draw=" not in text and "sweep: draw" not in text
    assert "pooled over draws and runs" in text
    assert "The robust choice finishes within" not in report_markdown(ds, [])  # no deadline given, none invented
    pooled = pooled_over_draws(ds)
    assert pooled.wall_time.dims == ("pue", "strategy", "run") and pooled.sizes["run"] == 6 * 12
    np.testing.assert_array_equal(
        pooled.wall_time.isel(pue=0, strategy=0).values[12:24], ds.wall_time.isel(pue=0, strategy=0, draw=1).values
    )
    assert pooled.feasible.dims == ("pue", "strategy")
    pytest.importorskip("matplotlib")
    written = write_report(ds, tmp_path / "report")
    assert (tmp_path / "report" / "README.md") in written


def test_summary_table_prints_p_best_and_regret(paired):
    from mcsim.report.tables import summary_table

    text = summary_table(paired[1])
    assert "P(best cost)" in text and "cost regret [USD]" in text


# ---------------------------------------------------------------- joint (correlated) inputs


def _joint_raw(draws=16, rho=-0.6):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=2, draws=draws, mode="fast")
    raw["uncertain"] = {
        "compute.efficiency": {"dist": "uniform", "low": 0.4, "high": 0.6},
        "gpu": {
            "dist": "mvlognormal",
            "keys": ["failures.gpu.mtbf_hours", "failures.gpu.shape"],
            "median": [2000.0, 0.8],
            "sigma": [0.3, 0.1],
            "correlation": [[1, rho], [rho, 1]],
        },
    }
    return raw


def test_joint_group_parses_and_writes_back():
    scenario = scenario_from_dict(_joint_raw())
    keys = [e.key for e in scenario.uncertain]
    assert keys == ["compute.efficiency", "failures.gpu.mtbf_hours", "failures.gpu.shape"]
    mtbf, shape = scenario.uncertain[1:]
    assert mtbf.joint is shape.joint and mtbf.joint.correlation == ((1.0, -0.6), (-0.6, 1.0))
    assert dict(mtbf.params) == {"median": 2000.0, "sigma": 0.3} and scenario.uncertain[0].joint is None
    again = scenario_from_dict(__import__("tomllib").loads(scenario.to_toml()))
    assert again.uncertain == scenario.uncertain


def test_joint_draws_have_the_groups_medians_sigmas_and_correlation():
    n, rho = 4096, -0.6
    values = draw_values(scenario_from_dict(_joint_raw(n, rho)).uncertain, n, "sobol", 3)
    logs = np.log(values[:, 1:])
    # i.i.d. standard errors over n draws (the scrambled Sobol design is at least as accurate):
    # mean sigma / sqrt(n); sd sigma / sqrt(2n); correlation (1 - rho^2) / sqrt(n) (normal theory).
    for i, (median, sigma) in enumerate([(2000.0, 0.3), (0.8, 0.1)]):
        assert abs(logs[:, i].mean() - math.log(median)) < 4 * sigma / math.sqrt(n)
        assert abs(logs[:, i].std() - sigma) < 4 * sigma / math.sqrt(2 * n)
    assert abs(np.corrcoef(logs.T)[0, 1] - rho) < 4 * (1 - rho**2) / math.sqrt(n)
    # the independent input stays independent of the group
    for i in (1, 2):
        assert abs(np.corrcoef(values[:, 0], logs[:, i - 1])[0, 1]) < 4 / math.sqrt(n)


def test_joint_marginals_are_truncated_to_the_keys_bounds():
    raw = _joint_raw(1024)
    raw["uncertain"]["gpu"]["median"] = [2000.0, 0.06]  # shape >= 0.05 in the schema
    raw["uncertain"]["gpu"]["sigma"] = [0.3, 0.5]
    values = draw_values(scenario_from_dict(raw).uncertain, 1024, "lhs", 1)
    assert values[:, 2].min() >= 0.05
    # the truncated marginal: P(shape <= 0.06) = (F(0.06) - F(0.05)) / (1 - F(0.05)), F the lognormal
    law = stats.lognorm(s=0.5, scale=0.06)
    expected = (law.cdf(0.06) - law.cdf(0.05)) / law.sf(0.05)
    assert abs(np.mean(values[:, 2] <= 0.06) - expected) < 4 * math.sqrt(expected * (1 - expected) / 1024)


@pytest.mark.parametrize(
    "change,key,message",
    [
        (lambda g: g.update(correlation=[[1, 0.2], [0.2, 1], [0, 0]]), "correlation", "2 x 2 matrix"),
        (lambda g: g.update(correlation=[[1, 1.0], [1.0, 1]]), "correlation", r"in \(-1, 1\)"),
        (lambda g: g.update(correlation=[[0.9, 0.2], [0.2, 1]]), "correlation", "1 on the diagonal"),
        (lambda g: g.update(median=[2000.0]), "median", "list of 2"),
        (lambda g: g.update(sigma=[0.1, -0.1]), "sigma", "list of 2"),
        (lambda g: g.update(keys=["failures.gpu.mtbf_hours", "failures.gpu.mtbf_hours"]), "keys", "different"),
        (
            lambda g: g.update(keys=["failures.gpu.mtbf_hours", "failures.cpu.shape"]),
            "failures.cpu.shape",
            "no failure class",
        ),
        (lambda g: g.update(rho=0.3), "rho", "unknown key"),
    ],
)
def test_bad_joint_groups(change, key, message):
    raw = _joint_raw()
    change(raw["uncertain"]["gpu"])
    with pytest.raises(ScenarioError, match=message) as err:
        scenario_from_dict(raw)
    assert key in err.value.key


def test_a_key_in_a_group_and_alone_is_refused():
    raw = _joint_raw()
    raw["uncertain"]["failures.gpu.shape"] = {"dist": "uniform", "low": 0.5, "high": 1.0}
    with pytest.raises(ScenarioError, match="already uncertain"):
        scenario_from_dict(raw)


def test_sensitivity_names_the_correlated_inputs():
    ds = mcsim.simulate(scenario_from_dict(_joint_raw(32)), progress=False)
    result = ds.mcsim.sensitivity("wall_time")
    assert result.attrs["method"] == "delta"
    assert result.attrs["correlated_inputs"].split() == ["failures.gpu.mtbf_hours", "failures.gpu.shape"]
    assert ds["compute.efficiency"].attrs.get("joint_group") is None
