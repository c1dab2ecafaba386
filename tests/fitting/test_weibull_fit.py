"""``mcsim fit-failures``: censored Weibull MLE, its intervals, the log reader and the CLI."""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest
from builders import SMALL_SCENARIO
from scipy import special, stats

from mcsim.cli.main import main
from mcsim.errors import ScenarioError
from mcsim.fitting import failure_log
from mcsim.fitting.failure_log import FailureLog, read_failure_log
from mcsim.fitting.failure_table import failure_ratio, failures_table_toml
from mcsim.fitting.weibull import fit_weibull, product_limit
from mcsim.model.reliability import renewal_function
from mcsim.report import failures
from mcsim.scenario.config import scenario_from_dict

Z95 = float(stats.norm.ppf(0.975))


def censored_sample(
    shape: float, scale: float, units: int, censored_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """Weibull lifetimes with administrative censoring at a fixed horizon.

    The horizon is the true quantile of order ``1 - censored_fraction``, so that
    fraction of units is censored in expectation. Returns (durations, failed, horizon).
    """
    rng = np.random.default_rng(seed)
    lifetimes = scale * rng.weibull(shape, units)
    horizon = scale * (-math.log(censored_fraction)) ** (1.0 / shape)  # S(horizon) = censored_fraction
    return np.minimum(lifetimes, horizon), lifetimes <= horizon, horizon


def log_se(low: float, high: float) -> float:
    """Standard error on the log scale implied by a 95 % interval exp(log x ± z·se)."""
    return (math.log(high) - math.log(low)) / (2 * Z95)


def write_log(path: Path, rows: list[tuple], header: str = "unit,start_hours,end_hours,failed") -> Path:
    path.write_text(header + "\n" + "".join(",".join(str(v) for v in row) + "\n" for row in rows))
    return path


# ---------------------------------------------------------------- recovery of known laws


@pytest.mark.parametrize("shape", [0.7, 2.0])
def test_recovers_known_shape_and_scale(shape):
    scale = 1000.0
    durations, failed, _ = censored_sample(shape, scale, units=2000, censored_fraction=0.45, seed=11)
    assert 0.3 <= 1 - failed.mean() <= 0.6  # 30-60 % censored, as intended
    fit = fit_weibull(durations, failed)
    true_mtbf = scale * math.gamma(1 + 1 / shape)  # Weibull mean λ Γ(1 + 1/k)
    assert fit.shape_low < shape < fit.shape_high
    assert fit.mtbf_low < true_mtbf < fit.mtbf_high
    # Tolerances from the fit's own standard errors (log scale): within 3 se.
    assert abs(math.log(fit.shape / shape)) < 3 * log_se(fit.shape_low, fit.shape_high)
    assert abs(math.log(fit.mtbf_hours / true_mtbf)) < 3 * log_se(fit.mtbf_low, fit.mtbf_high)
    # The scale has no reported interval; λ = MTBF / Γ(1 + 1/k) with the fitted k.
    assert fit.scale_hours == pytest.approx(fit.mtbf_hours / math.gamma(1 + 1 / fit.shape), rel=1e-12)
    assert abs(math.log(fit.scale_hours / scale)) < 3 * log_se(fit.mtbf_low, fit.mtbf_high) + 0.05
    assert fit.n_units == 2000 and fit.n_failures == int(failed.sum())
    assert fit.total_hours == pytest.approx(durations.sum())


@pytest.mark.parametrize("shape", [0.7, 2.0])
def test_interval_coverage_over_seeds_is_plausible(shape):
    # 60 independent data sets; each 95 % interval covers the truth with probability
    # ~0.95 (asymptotically), so the count is ~Binomial(60, 0.95): mean 57. The bound
    # binom.ppf(0.003) = 52 fails a correct method with P(count <= 51) = 0.0028.
    # (Seeds are fixed, so the outcome is deterministic: 57 and 58 of 60 at k = 0.7,
    # 57 and 57 at k = 2.) No upper bound: over-coverage up to 60/60 is plausible too.
    scale, reps = 1000.0, 60
    true_mtbf = scale * math.gamma(1 + 1 / shape)
    covered_shape = covered_mtbf = 0
    for seed in range(100, 100 + reps):
        fit = fit_weibull(*censored_sample(shape, scale, units=2000, censored_fraction=0.4, seed=seed)[:2])
        covered_shape += fit.shape_low < shape < fit.shape_high
        covered_mtbf += fit.mtbf_low < true_mtbf < fit.mtbf_high
    lower = stats.binom.ppf(0.003, reps, 0.95)
    assert covered_shape >= lower, covered_shape
    assert covered_mtbf >= lower, covered_mtbf


def test_exponential_data_match_the_closed_form():
    # k = 1: the exponential MLE of the mean is total time on test / failures
    # (closed form, e.g. Lawless, Statistical Models for Lifetime Data, §2.2).
    durations, failed, _ = censored_sample(1.0, 500.0, units=2000, censored_fraction=0.5, seed=3)
    fit = fit_weibull(durations, failed)
    closed_form = durations.sum() / failed.sum()
    assert fit.mtbf_low < closed_form < fit.mtbf_high
    assert fit.shape_low < 1.0 < fit.shape_high
    # The exponential model is nested (k = 1): its log-likelihood, computed with scipy,
    # is at most the Weibull maximum, and the likelihood ratio is not significant.
    exp_ll = (
        stats.expon.logpdf(durations[failed], scale=closed_form).sum()
        + stats.expon.logsf(durations[~failed], scale=closed_form).sum()
    )
    assert exp_ll <= fit.log_likelihood + 1e-9
    assert 2 * (fit.log_likelihood - exp_ll) < stats.chi2.ppf(0.999, df=1)


def test_uncensored_fit_solves_the_weibull_mle_equation():
    rng = np.random.default_rng(5)
    durations = 800.0 * rng.weibull(1.6, 1000)
    fit = fit_weibull(durations, np.ones(durations.size, bool))
    # Independent estimate: scipy's MLE with the location fixed at 0.
    k_ref, _, scale_ref = stats.weibull_min.fit(durations, floc=0)
    assert fit.shape == pytest.approx(k_ref, rel=1e-4)
    assert fit.scale_hours == pytest.approx(scale_ref, rel=1e-4)
    # The profile score equation of k for complete samples (e.g. Lawless §5.2):
    # Σ t^k log t / Σ t^k − 1/k − mean(log t) = 0, and λ^k = mean(t^k).
    k, log_t = fit.shape, np.log(durations)
    tk = durations**k
    assert (tk * log_t).sum() / tk.sum() - 1 / k - log_t.mean() == pytest.approx(0.0, abs=1e-8)
    assert fit.scale_hours == pytest.approx(tk.mean() ** (1 / k), rel=1e-8)
    # log_likelihood is in hours: the same as scipy's density summed at the estimate.
    ref_ll = stats.weibull_min.logpdf(durations, k, scale=fit.scale_hours).sum()
    assert fit.log_likelihood == pytest.approx(ref_ll, rel=1e-10)


def test_mtbf_interval_is_the_delta_method_on_log_mtbf():
    durations, failed, _ = censored_sample(0.8, 2000.0, units=800, censored_fraction=0.5, seed=21)
    fit = fit_weibull(durations, failed, confidence=0.9)
    assert fit.confidence == 0.9
    assert fit.mtbf_hours == pytest.approx(fit.scale_hours * math.exp(special.gammaln(1 + 1 / fit.shape)))
    # Log-scale intervals are symmetric around the log estimate.
    assert math.log(fit.shape_high / fit.shape) == pytest.approx(math.log(fit.shape / fit.shape_low))
    assert math.log(fit.mtbf_high / fit.mtbf_hours) == pytest.approx(math.log(fit.mtbf_hours / fit.mtbf_low))
    wider = fit_weibull(durations, failed, confidence=0.99)
    assert wider.shape_low < fit.shape_low and wider.mtbf_high > fit.mtbf_high


@pytest.mark.parametrize(
    "durations,failed",
    [
        ([5.0, 5.0, 5.0], [1, 1, 1]),  # identical failure times: k → ∞
        ([5.0], [1]),  # one failure, nothing else
    ],
)
def test_degenerate_data_raise(durations, failed):
    with pytest.raises(ValueError, match="no finite maximum"):
        fit_weibull(np.array(durations), np.array(failed, bool))


# ---------------------------------------------------------------- the log reader


def test_reader_accepts_comments_blank_lines_and_flag_spellings(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(
        "# GPU fleet, export of 2024-05\n\n"
        "unit,start_hours,end_hours,failed\n"
        "gpu-1,0,100.5,1\n"
        "  # a comment inside\n"
        "gpu-1, 100.5 , 400 ,0\n"
        '"rack 3, node 2",10,20,TRUE\n'
        "gpu-2,1e2,2.5e2,False\n"
    )
    durations, failed, entry = read_failure_log(path)
    np.testing.assert_allclose(durations, [100.5, 299.5, 10.0, 150.0])
    assert failed.tolist() == [True, False, True, False]
    assert entry.tolist() == [0.0] * 4  # no entry_hours column: from new


# (file name, content or None for a missing file, key expected in the error line)
BAD_LOGS = [
    ("missing.csv", None, "no such file"),
    ("empty.csv", "", "line 1"),
    ("wrong_header.csv", "unit,start,end,failed\ngpu,0,1,1\n", "line 1"),
    ("no_header.csv", "# note\ngpu-1,0,10,1\n", "line 2"),
    ("too_few_fields.csv", "unit,start_hours,end_hours,failed\ngpu,0,10,1\ngpu,0,10\n", "line 3"),
    ("too_many_fields.csv", "unit,start_hours,end_hours,failed\ngpu,0,10,1,extra\n", "line 2"),
    ("not_a_number.csv", "unit,start_hours,end_hours,failed\ngpu,0,ten,1\n", "line 2: end_hours"),
    ("nan.csv", "unit,start_hours,end_hours,failed\ngpu,nan,10,1\n", "line 2: start_hours"),
    ("inf.csv", "unit,start_hours,end_hours,failed\ngpu,0,inf,0\n", "line 2: end_hours"),
    ("end_before_start.csv", "unit,start_hours,end_hours,failed\ngpu,0,5,1\ngpu,10,5,1\n", "line 3"),
    ("zero_lifetime.csv", "unit,start_hours,end_hours,failed\ngpu,7,7,1\n", "line 2"),
    ("bad_flag.csv", "unit,start_hours,end_hours,failed\ngpu,0,5,yes\n", "line 2: failed"),
    ("no_rows.csv", "unit,start_hours,end_hours,failed\n# nothing yet\n\n", "rows"),
    ("no_failures.csv", "unit,start_hours,end_hours,failed\ngpu,0,5,0\ngpu,0,9,false\n", "failed"),
    ("same_failure_times.csv", "unit,start_hours,end_hours,failed\na,0,5,1\nb,0,5,1\nc,10,15,1\n", "fit"),
    # overflow and underflow: one error line, never a traceback
    (
        "overflowing_lifetime.csv",
        "unit,start_hours,end_hours,failed\na,-1e308,1e308,1\nb,0,5,1\n",
        "line 2: end_hours - start_hours",
    ),
    ("overflowing_age.csv", "unit,start_hours,end_hours,failed,entry_hours\na,0,1e308,1,1e308\nb,0,5,1,0\n", "line 2"),
    (
        "huge_lifetimes.csv",
        "unit,start_hours,end_hours,failed\na,0,1e308,1\nb,0,1.7e308,1\nc,0,5e307,0\nd,0,3e300,1\n",
        "fit: the fitted scale or MTBF",
    ),
    ("too_wide_a_range.csv", "unit,start_hours,end_hours,failed\na,0,1e-320,1\nb,0,1e300,1\nc,0,1,1\n", "fit"),
    (
        "tiny_and_huge_mtbf.csv",
        "unit,start_hours,end_hours,failed\na,0,1e12,1\nb,0,3e12,1\nc,0,2e12,0\nd,0,5e11,1\n",
        "mtbf_hours",
    ),
    ("single_failure.csv", "unit,start_hours,end_hours,failed\na,0,5,1\n", "fit"),
    ("all_zero.csv", "unit,start_hours,end_hours,failed\na,0,0,1\nb,0,0,0\n", "line 2"),
    ("negative_duration.csv", "unit,start_hours,end_hours,failed\na,5,-5,1\n", "line 2"),
    ("negative_entry.csv", "unit,start_hours,end_hours,failed,entry_hours\na,0,5,1,-1\n", "line 2: entry_hours"),
    ("nan_entry.csv", "unit,start_hours,end_hours,failed,entry_hours\na,0,5,1,nan\n", "line 2: entry_hours"),
    ("entry_column_misplaced.csv", "unit,entry_hours,start_hours,end_hours,failed\na,0,0,5,1\n", "line 1"),
    ("nul_byte.csv", "unit,start_hours,end_hours,failed\na,0,5\x00,1\n", "line 2"),
    ("binary.csv", b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00garbage", "file"),
]


@pytest.mark.parametrize("name,content,key", BAD_LOGS, ids=[b[0] for b in BAD_LOGS])
def test_bad_log_exit_2_one_line_no_output(name, content, key, tmp_path, capsys):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    out = tmp_path / "out" / "table.toml"
    status = main(["fit-failures", str(path), "-o", str(out)])
    captured = capsys.readouterr()
    assert status == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("mcsim: error: ") and str(path) in lines[0] and key in lines[0], lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert not out.exists() and not out.parent.exists()  # no output, no temporary file
    with pytest.raises((ScenarioError, ValueError)):  # the library raises too
        fit = fit_weibull(*read_failure_log(path))
        failures_table_toml(fit, "x")


def test_fitted_shape_outside_the_schema_is_an_error(tmp_path, capsys):
    # Failures all within 1 % of 100 h: k is ~ several hundred, beyond the simulator's 20.
    rng = np.random.default_rng(0)
    rows = [(f"u{i}", 0, f"{100 + x:.4f}", 1) for i, x in enumerate(rng.uniform(0, 1, 200))]
    path = write_log(tmp_path / "tight.csv", rows)
    assert main(["fit-failures", str(path), "-o", str(tmp_path / "t.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shape" in err and "<= 20" in err
    assert not (tmp_path / "t.toml").exists()


@pytest.mark.parametrize(
    "args,key",
    [
        (["--name", "bad name"], "--name"),
        (["--recovery-minutes", "-3"], "--recovery-minutes"),
        (["--confidence", "1.5"], "--confidence"),
    ],
)
def test_bad_options_exit_2(args, key, tmp_path, capsys):
    durations, failed, _ = censored_sample(1.0, 100.0, units=50, censored_fraction=0.3, seed=1)
    path = write_log(
        tmp_path / "ok.csv", [(f"u{i}", 0, t, int(f)) for i, (t, f) in enumerate(zip(durations, failed, strict=False))]
    )
    status = main(["fit-failures", str(path), "-o", str(tmp_path / "t.toml"), *args])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and key in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.csv"]


def test_subprocess_bad_log_has_no_traceback(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("unit,start_hours,end_hours,failed\ngpu,0,x,1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mcsim", "fit-failures", str(path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- output table


def test_output_table_parses_and_validates_in_a_scenario(tmp_path, capsys):
    durations, failed, _ = censored_sample(0.7, 3000.0, units=1000, censored_fraction=0.5, seed=8)
    rows = [
        (f"node-{i}", 24.0, 24.0 + t, "true" if f else "false")
        for i, (t, f) in enumerate(zip(durations, failed, strict=False))
    ]
    path = write_log(tmp_path / "node log.csv", rows)
    out = tmp_path / "tables" / "fitted.toml"
    assert main(["fit-failures", str(path), "--scope", "node", "--recovery-minutes", "12.5", "-o", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "shape k" in stdout and "MTBF [h]" in stdout and "[[failures]]" in stdout and f"wrote {out}" in stdout
    assert sorted(p.name for p in out.parent.iterdir()) == ["fitted.toml"]  # no temporary file left
    table = tomllib.loads(out.read_text())["failures"][0]
    fit = fit_weibull(*read_failure_log(path))
    assert table["name"] == "node_log"  # default: the sanitised file name
    assert table["scope"] == "node" and table["recovery_minutes"] == 12.5
    assert table["shape"] == pytest.approx(fit.shape, rel=1e-3)
    assert table["mtbf_hours"] == pytest.approx(fit.mtbf_hours, rel=1e-3)
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = [table]
    scenario = scenario_from_dict(raw, source=str(out))
    fclass = scenario.base.failures[0]
    assert (fclass.name, fclass.scope, fclass.shape) == ("node_log", "node", table["shape"])


def test_failures_table_toml_rejects_what_a_scenario_rejects():
    fit = fit_weibull(*censored_sample(1.0, 100.0, units=200, censored_fraction=0.3, seed=2)[:2])
    text = failures_table_toml(fit, "gpu", "cluster", 0)
    assert tomllib.loads(text)["failures"][0]["recovery_minutes"] == 0.0
    assert text.startswith("# Weibull MLE fit:") and "95 % CI" in text
    for args in [("bad name", "gpu", 5.0), ("gpu", "rack", 5.0), ("gpu", "gpu", -1.0), ("gpu", "gpu", math.nan)]:
        with pytest.raises(ValueError):
            failures_table_toml(fit, *args)


@pytest.mark.parametrize("name", ["_", "-", "gpu_2", "a-b"])
def test_failures_table_toml_accepts_every_name_a_scenario_accepts(name):
    # Found (issue 42): `fit-failures --name _` was refused though a [[failures]] table accepts `_`.
    fit = fit_weibull(*censored_sample(1.0, 100.0, units=200, censored_fraction=0.3, seed=2)[:2])
    table = tomllib.loads(failures_table_toml(fit, name))["failures"][0]
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = [table]
    assert scenario_from_dict(raw).base.failures[0].name == name


# ---------------------------------------------------------------- how the simulator uses the shape


def simulated_renewals(t: float, shape: float, paths: int, seed: int) -> tuple[float, float]:
    """Mean and standard error of the number of renewals by time t of Weibull(shape, λ = 1) units new at 0."""
    rng = np.random.default_rng(seed)
    clock, count = np.zeros(paths), np.zeros(paths)
    alive = np.ones(paths, bool)
    while alive.any():
        clock[alive] += rng.weibull(shape, int(alive.sum()))
        alive &= clock <= t
        count += alive
    return float(count.mean()), float(count.std() / math.sqrt(paths))


@pytest.mark.parametrize("shape", [0.5, 0.7, 2.0, 3.0])
@pytest.mark.parametrize("t", [0.01, 1.0, 20.0, 1000.0])
def test_renewal_function_matches_simulated_renewal_counts(shape, t):
    # Reference: the renewal count simulated directly (sum of Weibull lifetimes <= t).
    # |z| < 4 from the simulation's standard error; where that error is small, the
    # documented accuracy (1 %) is checked too.
    paths = 20_000 if t == 1000.0 else 200_000
    mean, se = simulated_renewals(t, shape, paths, seed=int(100 * shape + t))
    value = renewal_function(t, shape)
    assert abs(value - mean) < 4 * se + 1e-12, (value, mean, se)
    if se < 0.002 * mean:
        assert value == pytest.approx(mean, rel=0.01)


def test_renewal_function_closed_forms():
    # k = 1: a Poisson process, M(t) = t/λ exactly (the grid adds ~1e-5 at t = 200, step λ/40).
    for t in (1e-6, 0.3, 7.0, 200.0, 5000.0):
        assert renewal_function(t, 1.0) == pytest.approx(t, rel=1e-4)
    # t ≪ λ: M(t) = F(t) + F*F(t) + ... with F^{*n}(t) <= F(t)^n (n lifetimes summing to
    # <= t each are <= t), so F <= M <= F + F²/(1 − F): the first-failure part
    # F(t) = 1 − exp(−(t/λ)^k) ≈ (t/λ)^k.
    for shape, t in ((0.7, 1e-4), (0.3, 1e-8), (2.0, 1e-3), (0.5, 1e-2)):
        first = -math.expm1(-(t**shape))
        assert first * (1 - 1e-6) <= renewal_function(t, shape) <= first + first**2 / (1 - first)
    # Far out: M(t) − t/μ tends to (cv² − 1)/2 (key renewal theorem); k = 2: μ = Γ(1.5).
    mu, cv2 = math.gamma(1.5), math.gamma(2.0) / math.gamma(1.5) ** 2 - 1
    assert renewal_function(400.0, 2.0) - 400.0 / mu == pytest.approx((cv2 - 1) / 2, abs=1e-3)


def test_failure_ratio_of_the_issue_example():
    # The reported capacity-planning example: GPU class MTBF 79,230 h, k = 0.7, units new at
    # job start. For a job of T hours ≪ λ, each GPU fails about (T/λ)^k times instead of
    # T/MTBF: the first-failure part of the renewal function.
    shape, mtbf = 0.7, 79230.0
    scale = mtbf / math.gamma(1 + 1 / shape)
    for job_hours in (24.0, 720.0):
        first_failure = (job_hours / scale) ** shape * mtbf / job_hours
        assert failure_ratio(shape, mtbf, job_hours) == pytest.approx(first_failure, rel=0.01)
    assert failure_ratio(shape, mtbf, 720.0) > 3  # several times the exponential count
    assert failure_ratio(2.0, mtbf, 720.0) < 0.05  # wear-out: new units hardly fail
    assert failure_ratio(1.0, mtbf, 720.0) == pytest.approx(1.0, rel=1e-6)


def test_ratio_matches_the_simulator():
    # What the table's comment claims, against mcsim's own kernel: 64 GPUs, k = 0.7, MTBF
    # 2,000 h, failures cheap (no recovery, a checkpoint every iteration), so the wall
    # time W (~0.67 h) barely depends on them (checked: spread < 1 %). Expected failures
    # per run: 64 M(W), M the renewal function of a unit new at t = 0; the exponential
    # law would give 64 W / MTBF, about 13 times fewer here.
    from mcsim.engine.simulate import simulate
    from mcsim.scenario.config import scenario_from_dict

    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = [
        {
            "name": "gpu",
            "scope": "gpu",
            "shape": 0.7,
            "mtbf_hours": 2000.0,
            "recovery_minutes": 0.0,
            "initial_age": "new",
        }
    ]
    raw["checkpoint"] = {"strategy": "sync", "interval": {"iterations": 1}}
    raw["run"] = {"runs": 1000, "seed": 3, "mode": "fast", "max_wall_days": 365.0}
    ds = simulate(scenario_from_dict(raw, source="test"), progress=False)
    wall = ds["wall_time"].values.ravel()
    failures = ds["n_failures"].values.ravel()
    assert wall.std() < 0.01 * wall.mean()
    scale = 2000.0 / math.gamma(1 + 1 / 0.7)
    expected = 64 * renewal_function(wall.mean() / scale, 0.7)
    se = failures.std() / math.sqrt(failures.size)
    assert abs(failures.mean() - expected) < 4 * se, (failures.mean(), expected, se)
    exponential = 64 * wall.mean() / 2000.0
    assert failures.mean() > exponential + 4 * se  # k < 1 and new units: more failures
    assert expected / exponential == pytest.approx(failure_ratio(0.7, 2000.0, wall.mean()), rel=1e-12)
    # The default start (stationary, the table's first claim): 64 W / MTBF whatever the shape.
    raw["failures"][0]["initial_age"] = "stationary"
    raw["run"]["runs"] = 4000
    ds = simulate(scenario_from_dict(raw, source="test"), progress=False)
    failures = ds["n_failures"].values.ravel()
    stationary = 64 * ds["wall_time"].values.mean() / 2000.0
    assert abs(failures.mean() - stationary) < 4 * failures.std() / math.sqrt(failures.size)


def test_table_says_how_the_shape_is_used():
    durations, failed, _ = censored_sample(0.7, 60000.0, units=3000, censored_fraction=0.8, seed=4)
    fit = fit_weibull(durations, failed)
    text = failures_table_toml(fit, "gpu")
    table = tomllib.loads(text)["failures"][0]
    assert 'initial_age = "stationary"' in text and "N * T / MTBF failures" in text
    ratio = failure_ratio(table["shape"], table["mtbf_hours"], 720.0)  # from the values the scenario gets
    assert ratio > 1.5
    assert 'With initial_age = "new"' in text
    assert f"a 30-day job on any number of units sees about {ratio:.3g} times the failures" in text
    assert all(line.startswith("#") for line in text.split("[[failures]]")[0].splitlines())
    exponential = fit_weibull(*censored_sample(1.0, 500.0, units=500, censored_fraction=0.3, seed=6)[:2])
    exponential_text = failures_table_toml(exponential, "gpu")
    assert 'initial_age = "stationary"' in exponential_text


# ---------------------------------------------------------------- left truncation


def truncated_sample(shape: float, scale: float, units: int, seed: int, max_age: float, window: float) -> FailureLog:
    """Units already in service when a window of ``window`` hours opens.

    Ages at the window's start are uniform on [0, max_age]; each unit's lifetime is
    drawn conditioned on survival to that age (cumulative hazard H(T) = H(age) + E,
    E ~ Exp(1)), then observed until it fails or the window closes (right censoring).
    """
    rng = np.random.default_rng(seed)
    age = rng.uniform(0.0, max_age, units)
    life = scale * ((age / scale) ** shape + rng.exponential(1.0, units)) ** (1.0 / shape)
    end = np.minimum(life, age + window)
    return FailureLog(end - age, life <= age + window, age)


def test_left_truncated_fit_covers_the_true_shape():
    # 60 seeded data sets of 2,000 units with ages up to 2λ, observed for λ. A correct
    # 95 % interval covers k = 0.7 ~ Binomial(60, 0.95) times: the bound binom.ppf(0.003)
    # = 52 (87 %) fails a correct method with probability 0.0028.
    reps = 60
    covered = 0
    for seed in range(reps):
        log = truncated_sample(0.7, 1000.0, 2000, seed, max_age=2000.0, window=1000.0)
        fit = fit_weibull(*log)
        covered += fit.shape_low < 0.7 < fit.shape_high
        assert fit.n_truncated == int(np.count_nonzero(log.entry_h > 0))
    assert covered >= stats.binom.ppf(0.003, reps, 0.95), covered


def test_ignoring_left_truncation_biases_the_shape():
    # The defect the entry ages fix: fitting the same logs as if every unit were new
    # at the window's start. Survivors of a decreasing hazard look better than new, so
    # the naive shape is pulled toward 1. Means over 20 seeds, standard error from
    # the spread of the 20 estimates.
    with_entry, naive = [], []
    for seed in range(20):
        log = truncated_sample(0.7, 1000.0, 2000, 500 + seed, max_age=2000.0, window=1000.0)
        with_entry.append(fit_weibull(*log).shape)
        naive.append(fit_weibull(log.durations_h, log.failed).shape)
    se = np.std(with_entry) / math.sqrt(20)
    assert abs(np.mean(with_entry) - 0.7) < 4 * se
    se_naive = np.std(naive) / math.sqrt(20)
    assert np.mean(naive) - 0.7 > 4 * se_naive and np.mean(naive) > 0.8


def test_truncated_likelihood_is_the_conditional_density():
    # log L = Σ_failed log f(a) + Σ_censored log S(a) − Σ log S(e), with scipy's Weibull
    # at the fitted parameters, equals the reported maximum; and no (k, λ) nearby is higher.
    log = truncated_sample(0.8, 500.0, 400, 9, max_age=800.0, window=300.0)
    fit = fit_weibull(*log)
    ages = log.entry_h + log.durations_h

    def log_lik(k, lam):
        law = stats.weibull_min(k, scale=lam)
        return law.logpdf(ages[log.failed]).sum() + law.logsf(ages[~log.failed]).sum() - law.logsf(log.entry_h).sum()

    assert fit.log_likelihood == pytest.approx(log_lik(fit.shape, fit.scale_hours), rel=1e-10)
    for dk, dl in ((1.01, 1), (0.99, 1), (1, 1.01), (1, 0.99)):
        assert log_lik(fit.shape * dk, fit.scale_hours * dl) < fit.log_likelihood


def test_cli_reads_the_entry_column(tmp_path, capsys):
    log = truncated_sample(0.7, 3000.0, 800, 2, max_age=6000.0, window=3000.0)
    rows = [(f"u{i}", 100.0, 100.0 + d, int(f), e) for i, (d, f, e) in enumerate(zip(*log, strict=False))]
    path = write_log(tmp_path / "fleet.csv", rows, header="unit,start_hours,end_hours,failed,entry_hours")
    assert main(["fit-failures", str(path), "-o", str(tmp_path / "t.toml")]) == 0
    out = capsys.readouterr().out
    fit = fit_weibull(*log)
    assert "left-truncated" in out and f"{fit.n_truncated} left-truncated" in out
    table = tomllib.loads((tmp_path / "t.toml").read_text())["failures"][0]
    assert table["shape"] == pytest.approx(fit.shape, rel=1e-3)
    np.testing.assert_allclose(read_failure_log(path).entry_h, log.entry_h)


# ---------------------------------------------------------------- probability plot


def test_product_limit_by_hand():
    # (entry, age, failed); risk sets by hand: u = 2: 4 at risk (the unit entering at 4
    # is not yet), u = 3: 3, u = 6: 2. Ŝ = 3/4, 3/4·2/3, ·1/2; Greenwood Σ d/(n(n−d)).
    rows = [(0, 2, 1), (0, 5, 0), (1, 3, 1), (4, 6, 1), (0, 6, 0)]
    e, a, f = (np.array(c, float) for c in zip(*rows, strict=False))
    ages, survival, greenwood = product_limit(FailureLog(a - e, f.astype(bool), e))
    np.testing.assert_allclose(ages, [2, 3, 6])
    np.testing.assert_allclose(survival, [0.75, 0.5, 0.25])
    np.testing.assert_allclose(greenwood, [1 / 12, 1 / 12 + 1 / 6, 1 / 12 + 1 / 6 + 1 / 2])


def test_product_limit_without_censoring_is_the_empirical_survival():
    t = np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    ages, survival, _ = product_limit(FailureLog(t, np.ones(5, bool), np.zeros(5)))
    np.testing.assert_allclose(ages, [1, 2, 3, 4, 5])
    np.testing.assert_allclose(survival, [0.8, 0.6, 0.4, 0.2, 0.0], atol=1e-15)


def test_plot_writes_a_probability_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    log = truncated_sample(0.7, 1000.0, 300, 1, max_age=500.0, window=1000.0)
    path = write_log(
        tmp_path / "log.csv",
        [(f"u{i}", 0, d, int(f), e) for i, (d, f, e) in enumerate(zip(*log, strict=False))],
        header="unit,start_hours,end_hours,failed,entry_hours",
    )
    figure = tmp_path / "figs" / "weibull.png"
    assert main(["fit-failures", str(path), "--plot", str(figure)]) == 0
    assert f"wrote {figure}" in capsys.readouterr().out
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in figure.parent.iterdir()) == ["weibull.png"]  # no temporary file left
    # With one unit observed from new (s0 = 0), the fitted line is k (log t − log λ):
    # a straight line of slope k through (λ, 0) on these axes.
    entry = log.entry_h.copy()
    entry[0] = 0.0
    log = FailureLog(log.durations_h, log.failed, entry)
    fit = fit_weibull(*log)
    ax = failures.probability_plot(log, fit).axes[0]
    assert ax.get_xscale() == "log" and "log(−log(1 − F(t)))" in ax.get_ylabel()
    x, y = ax.lines[0].get_data()
    np.testing.assert_allclose(y, fit.shape * (np.log(x) - math.log(fit.scale_hours)), rtol=1e-9, atol=1e-12)


def test_plot_without_matplotlib_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    durations, failed, _ = censored_sample(1.0, 100.0, units=50, censored_fraction=0.3, seed=1)
    path = write_log(
        tmp_path / "ok.csv", [(f"u{i}", 0, t, int(f)) for i, (t, f) in enumerate(zip(durations, failed, strict=False))]
    )
    status = main(["fit-failures", str(path), "--plot", str(tmp_path / "f.png"), "-o", str(tmp_path / "t.toml")])
    captured = capsys.readouterr()
    assert status == 2 and captured.err.count("\n") == 1 and "matplotlib" in captured.err, captured.err
    assert "pip install" in captured.err and captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.csv"]


# ---------------------------------------------------------------- options and outputs


@pytest.mark.parametrize(
    "args,key",
    [
        (["--scope", "rack"], "--scope"),
        (["--scope", ""], "--scope"),
        (["--recovery-minutes", "nan"], "--recovery-minutes"),
        (["--recovery-minutes", "inf"], "--recovery-minutes"),
        (["--recovery-minutes", "1e400"], "--recovery-minutes"),
        (["--recovery-minutes", "ten"], "--recovery-minutes"),
        (["--recovery-minutes", "2e6"], "--recovery-minutes"),
        (["--confidence", "nan"], "--confidence"),
        (["-o", "LOG"], "-o"),  # the log itself
        (["-o", "./LOG"], "-o"),
        (["--plot", "LOG"], "--plot"),
        (["-o", "LINK"], "-o"),  # a link to the log
        (["-o", ""], "-o"),
        (["-o", "FIFO"], "-o"),  # not a regular file (a FIFO here, never a real device)
        (["-o", "DIR"], "-o"),
        (["-o", "same.png", "--plot", "same.png"], "--plot"),
        (["--plot", "LOG/fig.png"], "--plot"),  # a folder that is a file: cannot be written
        (["-o", "a" * 300 + ".toml"], "File name too long"),
        (["--plot", "a" * 300 + ".png"], "File name too long"),
    ],
)
def test_bad_option_values_exit_2_and_leave_the_log(args, key, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    durations, failed, _ = censored_sample(1.0, 100.0, units=50, censored_fraction=0.3, seed=1)
    path = write_log(
        tmp_path / "log.csv", [(f"u{i}", 0, t, int(f)) for i, (t, f) in enumerate(zip(durations, failed, strict=False))]
    )
    (tmp_path / "link.csv").symlink_to(path)
    os.mkfifo(tmp_path / "fifo")
    before = path.read_bytes()
    names = {
        "LOG": "log.csv",
        "./LOG": "./log.csv",
        "LINK": "link.csv",
        "DIR": str(tmp_path),
        "FIFO": "fifo",
        "LOG/fig.png": "log.csv/fig.png",
    }
    try:
        status = main(["fit-failures", "log.csv", *(names.get(a, a) for a in args)])
    except SystemExit as exit_:  # argparse's own errors (choices, types)
        status = exit_.code
    captured = capsys.readouterr()
    assert status == 2 and captured.err.count("\n") == 1 and key in captured.err, captured.err
    assert captured.err.startswith("mcsim: error: ") and captured.out == ""
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link.csv", "log.csv"]
    assert (tmp_path / "fifo").is_fifo()


@pytest.mark.parametrize(
    "make,key",
    [
        (lambda p: p.write_text("unit,start_hours,end_hours,failed\n" + "9" * (2 << 20) + ",0,1,1\n"), "line 2"),
        (lambda p: os.mkfifo(p), "not a regular file"),
    ],
)
def test_unbounded_inputs_are_refused(make, key, tmp_path, capsys):
    # A 2 MiB line, a FIFO (which would block, like /dev/zero would fill memory).
    path = tmp_path / "log.csv"
    make(path)
    assert main(["fit-failures", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and key in err, err


@pytest.mark.parametrize("failing", ["figure", "table"])
def test_a_failed_write_leaves_no_output(failing, tmp_path, capsys, monkeypatch):
    # Disk full while writing the figure, or the table after the figure: one line, exit 2,
    # and neither file left (the figure written first is removed again).
    pytest.importorskip("matplotlib")
    import errno

    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst).endswith(".png" if failing == "figure" else ".toml"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    durations, failed, _ = censored_sample(1.0, 100.0, units=50, censored_fraction=0.3, seed=1)
    path = write_log(
        tmp_path / "ok.csv", [(f"u{i}", 0, t, int(f)) for i, (t, f) in enumerate(zip(durations, failed, strict=False))]
    )
    status = main(["fit-failures", str(path), "--plot", str(tmp_path / "f.png"), "-o", str(tmp_path / "t.toml")])
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1 and "No space left" in err, (
        err
    )  # 1: the machine refused the bytes (docs/model.md §6b)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.csv"]


def test_row_limit(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(failure_log, "MAX_ROWS", 3)  # the reader of the log holds the limit
    path = write_log(tmp_path / "big.csv", [(f"u{i}", 0, 10 + i, 1) for i in range(5)])
    assert main(["fit-failures", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 5" in err and "more than 3 lifetimes" in err


# ---------------------------------------------------------------- fuzzing with extreme floats

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXTREME = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1e-308, 1e-300, 1e300, 1e308, 1.7976931348623157e308, -1e308]),
    st.floats(min_value=1e-3, max_value=1e6),
)
TEXT_NUMBER = st.one_of(
    EXTREME.map(repr),
    st.sampled_from(
        ["nan", "inf", "-inf", "1e999", "-1e999", "1e-999", "0x10", "1_000", "", " ", "NaN", "Infinity", "١"]
    ),
)
POSITIVE = st.one_of(
    st.floats(min_value=5e-324, max_value=1.7976931348623157e308),
    st.sampled_from([5e-324, 1e-300, 1e300, 1e308]),
    st.floats(min_value=1e-3, max_value=1e6),
)
ROW = st.one_of(
    st.tuples(TEXT_NUMBER, TEXT_NUMBER, st.sampled_from(["0", "1", "true", "FALSE", "2", ""]), TEXT_NUMBER),
    # well-formed rows with extreme lifetimes and entry ages, so that the fit runs on them
    st.tuples(
        st.just("0"), POSITIVE.map(repr), st.sampled_from(["0", "1"]), st.one_of(st.just("0"), POSITIVE.map(repr))
    ),
)

# The fuzz tests' settings: reproducible (derandomized, no example database), no deadline; those that
# take tmp_path also reuse it across examples (each writes its file afresh). 150 examples each (was 300:
# a quarter of a minute per test, run twice in CI, at the newest versions and at the floors).
FUZZ = settings(deadline=None, derandomize=True, database=None)
FUZZ_IN_TMP_PATH = settings(FUZZ, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(FUZZ_IN_TMP_PATH, max_examples=150)
@given(rows=st.lists(ROW, min_size=1, max_size=8), entry=st.booleans())
def test_fuzz_reader_fit_and_table_raise_only_user_errors(rows, entry, tmp_path):
    # Any log of extreme or malformed numbers: the reader, the fit and the table either
    # succeed or raise ScenarioError/ValueError; no warning (turned into an error here)
    # and no other exception escapes.
    header = "unit,start_hours,end_hours,failed" + (",entry_hours" if entry else "")
    lines = [f"u{i},{s},{e},{f}" + (f",{a}" if entry else "") for i, (s, e, f, a) in enumerate(rows)]
    path = tmp_path / "fuzz.csv"
    path.write_text(header + "\n" + "\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            log = read_failure_log(path)
            fit = fit_weibull(*log)
            failures_table_toml(fit, "fuzz")
        except (ScenarioError, ValueError):
            return
    assert math.isfinite(fit.shape) and math.isfinite(fit.mtbf_hours) and fit.mtbf_hours > 0


@settings(FUZZ, max_examples=150)
@given(durations=st.lists(st.one_of(EXTREME, POSITIVE), min_size=1, max_size=10), data=st.data())
def test_fuzz_fit_with_extreme_floats(durations, data):
    n = len(durations)
    failed = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    entry = data.draw(st.one_of(st.none(), st.lists(EXTREME, min_size=n, max_size=n)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            fit = fit_weibull(np.array(durations), np.array(failed, bool), None if entry is None else np.array(entry))
        except ValueError:
            return
        assert all(math.isfinite(v) for v in (fit.shape, fit.scale_hours, fit.mtbf_hours, fit.log_likelihood))
        assert 0 <= fit.shape_low <= fit.shape <= fit.shape_high and 0 <= fit.mtbf_low <= fit.mtbf_high
        failure_ratio(min(max(fit.shape, 0.05), 20.0), min(max(fit.mtbf_hours, 1e-300), 1e9), 720.0)


@settings(FUZZ_IN_TMP_PATH, max_examples=100)
@given(rows=st.lists(ROW, min_size=1, max_size=6), entry=st.booleans())
def test_fuzz_cli_is_exit_0_or_one_line_exit_2(rows, entry, tmp_path, capsys):
    path = tmp_path / "fuzz.csv"
    path.write_text(
        "unit,start_hours,end_hours,failed"
        + (",entry_hours" if entry else "")
        + "\n"
        + "".join(f"u{i},{s},{e},{f}" + (f",{a}" if entry else "") + "\n" for i, (s, e, f, a) in enumerate(rows))
    )
    out = tmp_path / "out.toml"
    out.unlink(missing_ok=True)
    status = main(["fit-failures", str(path), "-o", str(out)])
    err = capsys.readouterr().err
    if status == 0:
        assert err == "" and tomllib.loads(out.read_text())["failures"]
    else:
        assert status == 2 and err.count("\n") == 1 and err.startswith("mcsim: error: ") and not out.exists()


# ---------------------------------------------------------------- fit-failures --uncertain


def _log_mtbf_shape(theta: np.ndarray) -> np.ndarray:
    """(log MTBF, log k) of (log k, log λ): MTBF = λ Γ(1 + 1/k), the Weibull mean."""
    log_k, log_lam = theta
    return np.array([log_lam + math.lgamma(1.0 + math.exp(-log_k)), log_k])


def _fit_prior(fit) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of (log MTBF, log k) from the fit: delta method with a Jacobian by
    central differences (independent of mcsim.fitting.failure_table's closed-form digamma Jacobian)."""
    theta = np.array([math.log(fit.shape), math.log(fit.scale_hours)])
    h = 1e-6
    jac = np.column_stack(
        [(_log_mtbf_shape(theta + h * e) - _log_mtbf_shape(theta - h * e)) / (2 * h) for e in np.eye(2)]
    )
    return _log_mtbf_shape(theta), jac @ np.array(fit.covariance) @ jac.T


def _uncertain_log(tmp_path: Path) -> Path:
    # Known law: k = 0.7, λ = 1500 h (MTBF = λ Γ(1 + 1/0.7) = 1898 h), 600 GPUs, 40 % censored.
    durations, failed, _ = censored_sample(0.7, 1500.0, units=600, censored_fraction=0.4, seed=21)
    return write_log(
        tmp_path / "gpu.csv", [(f"g{i}", 0, t, int(f)) for i, (t, f) in enumerate(zip(durations, failed, strict=False))]
    )


def test_uncertain_entries_carry_the_fits_joint_uncertainty(tmp_path, capsys):
    from mcsim.scenario.uncertain import draw_values

    path = _uncertain_log(tmp_path)
    out = tmp_path / "fitted.toml"
    assert main(["fit-failures", str(path), "--uncertain", "-o", str(out)]) == 0
    capsys.readouterr()
    tables = tomllib.loads(out.read_text())
    fit = fit_weibull(*read_failure_log(path))
    true_mtbf = 1500.0 * math.gamma(1 + 1 / 0.7)
    # the fit recovers the known law within 4 of its standard errors (log scale)
    assert abs(math.log(fit.shape / 0.7)) < 4 * log_se(fit.shape_low, fit.shape_high)
    assert abs(math.log(fit.mtbf_hours / true_mtbf)) < 4 * log_se(fit.mtbf_low, fit.mtbf_high)
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = tables["failures"]
    raw["uncertain"] = tables["uncertain"]
    n = 4096
    raw["run"].update(runs=1, draws=n)
    scenario = scenario_from_dict(raw, source=str(out))  # the written entries parse
    assert [e.key for e in scenario.uncertain] == ["failures.gpu.mtbf_hours", "failures.gpu.shape"]
    logs = np.log(draw_values(scenario.uncertain, n, "sobol", 7))
    mean, cov = _fit_prior(fit)
    assert cov[0, 1] < -0.2 * math.sqrt(cov[0, 0] * cov[1, 1])  # censoring correlates the estimates
    # Standard errors of an i.i.d. sample of n (scrambled Sobol points are at least as accurate
    # for these smooth moments): mean sqrt(c_ii / n); covariance sqrt((c_ii c_jj + c_ij^2) / n)
    # (normal fourth moments).
    sample_mean, sample_cov = logs.mean(axis=0), np.cov(logs.T)
    for i in range(2):
        assert abs(sample_mean[i] - mean[i]) < 4 * math.sqrt(cov[i, i] / n), i
        for j in range(2):
            se = math.sqrt((cov[i, i] * cov[j, j] + cov[i, j] ** 2) / n)
            assert abs(sample_cov[i, j] - cov[i, j]) < 4 * se, (i, j, sample_cov[i, j], cov[i, j])


def test_uncertain_round_trip_to_a_run_with_draws(tmp_path, capsys):
    from mcsim.scenario.config import dumps_toml

    path = _uncertain_log(tmp_path)
    out = tmp_path / "fitted.toml"
    assert main(["fit-failures", str(path), "--name", "gpu", "--uncertain", "-o", str(out)]) == 0
    raw = copy.deepcopy(SMALL_SCENARIO)
    del raw["failures"]
    raw["run"].update(runs=3, draws=32, mode="fast")  # the fewest draws sensitivity accepts
    scenario_file = tmp_path / "with-prior.toml"
    scenario_file.write_text(dumps_toml(raw) + "\n" + out.read_text())
    result = tmp_path / "r.nc"
    assert main(["run", str(scenario_file), "-o", str(result), "--quiet"]) == 0
    from mcsim.io.netcdf import open_results

    ds = open_results(result)
    assert ds.wall_time.dims == ("draw", "run") and ds.sizes["draw"] == 32
    mtbf, shape = ds["failures.gpu.mtbf_hours"], ds["failures.gpu.shape"]
    assert mtbf.attrs["joint_group"] == "gpu" and mtbf.attrs["correlated_with"] == "failures.gpu.shape"
    assert len(set(np.round(mtbf.values, 6))) == 32 and np.all(shape.values > 0.05)
    capsys.readouterr()
    assert main(["sensitivity", str(result)]) == 0
    assert "correlated inputs: failures.gpu.mtbf_hours, failures.gpu.shape" in capsys.readouterr().out
