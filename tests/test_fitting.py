"""``mcsim fit-failures``: censored Weibull MLE, its intervals, the log reader and the CLI."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

from conftest import SMALL_SCENARIO
from mcsim.cli import main
from mcsim.fitting import failures_table_toml, fit_weibull, read_failure_log
from mcsim.scenario import scenario_from_dict
from mcsim.schema import ScenarioError

Z95 = float(stats.norm.ppf(0.975))


def censored_sample(shape: float, scale: float, units: int, censored_fraction: float,
                    seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Weibull lifetimes with administrative censoring at a fixed horizon.

    The horizon is the true quantile of order ``1 - censored_fraction``, so that
    fraction of units is censored in expectation. Returns (durations, failed, horizon).
    """
    rng = np.random.default_rng(seed)
    lifetimes = scale * rng.weibull(shape, units)
    horizon = scale * (-math.log(censored_fraction)) ** (1.0 / shape)   # S(horizon) = censored_fraction
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
    assert 0.3 <= 1 - failed.mean() <= 0.6                       # 30-60 % censored, as intended
    fit = fit_weibull(durations, failed)
    true_mtbf = scale * math.gamma(1 + 1 / shape)                # Weibull mean λ Γ(1 + 1/k)
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
    exp_ll = (stats.expon.logpdf(durations[failed], scale=closed_form).sum()
              + stats.expon.logsf(durations[~failed], scale=closed_form).sum())
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
    tk = durations ** k
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


@pytest.mark.parametrize("durations,failed", [
    ([5.0, 5.0, 5.0], [1, 1, 1]),    # identical failure times: k → ∞
    ([5.0], [1]),                     # one failure, nothing else
])
def test_degenerate_data_raise(durations, failed):
    with pytest.raises(ValueError, match="no finite maximum"):
        fit_weibull(np.array(durations), np.array(failed, bool))


# ---------------------------------------------------------------- the log reader

def test_reader_accepts_comments_blank_lines_and_flag_spellings(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("# GPU fleet, export of 2024-05\n\n"
                    "unit,start_hours,end_hours,failed\n"
                    "gpu-1,0,100.5,1\n"
                    "  # a comment inside\n"
                    "gpu-1, 100.5 , 400 ,0\n"
                    "\"rack 3, node 2\",10,20,TRUE\n"
                    "gpu-2,1e2,2.5e2,False\n")
    durations, failed = read_failure_log(path)
    np.testing.assert_allclose(durations, [100.5, 299.5, 10.0, 150.0])
    assert failed.tolist() == [True, False, True, False]


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
]


@pytest.mark.parametrize("name,content,key", BAD_LOGS, ids=[b[0] for b in BAD_LOGS])
def test_bad_log_exit_2_one_line_no_output(name, content, key, tmp_path, capsys):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    out = tmp_path / "out" / "table.toml"
    status = main(["fit-failures", str(path), "-o", str(out)])
    captured = capsys.readouterr()
    assert status == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("mcsim: error: ") and str(path) in lines[0] and key in lines[0], lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert not out.exists() and not out.parent.exists()       # no output, no temporary file
    with pytest.raises((ScenarioError, ValueError)):            # the library raises too
        fit_weibull(*read_failure_log(path))


def test_fitted_shape_outside_the_schema_is_an_error(tmp_path, capsys):
    # Failures all within 1 % of 100 h: k is ~ several hundred, beyond the simulator's 20.
    rng = np.random.default_rng(0)
    rows = [(f"u{i}", 0, f"{100 + x:.4f}", 1) for i, x in enumerate(rng.uniform(0, 1, 200))]
    path = write_log(tmp_path / "tight.csv", rows)
    assert main(["fit-failures", str(path), "-o", str(tmp_path / "t.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shape" in err and "<= 20" in err
    assert not (tmp_path / "t.toml").exists()


@pytest.mark.parametrize("args,key", [
    (["--name", "bad name"], "--name"),
    (["--recovery-minutes", "-3"], "--recovery-minutes"),
    (["--confidence", "1.5"], "--confidence"),
])
def test_bad_options_exit_2(args, key, tmp_path, capsys):
    durations, failed, _ = censored_sample(1.0, 100.0, units=50, censored_fraction=0.3, seed=1)
    path = write_log(tmp_path / "ok.csv", [(f"u{i}", 0, t, int(f)) for i, (t, f) in enumerate(zip(durations, failed))])
    status = main(["fit-failures", str(path), "-o", str(tmp_path / "t.toml"), *args])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and key in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.csv"]


def test_subprocess_bad_log_has_no_traceback(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("unit,start_hours,end_hours,failed\ngpu,0,x,1\n")
    proc = subprocess.run([sys.executable, "-m", "mcsim.cli", "fit-failures", str(path)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- output table

def test_output_table_parses_and_validates_in_a_scenario(tmp_path, capsys):
    durations, failed, _ = censored_sample(0.7, 3000.0, units=1000, censored_fraction=0.5, seed=8)
    rows = [(f"node-{i}", 24.0, 24.0 + t, "true" if f else "false") for i, (t, f) in enumerate(zip(durations, failed))]
    path = write_log(tmp_path / "node log.csv", rows)
    out = tmp_path / "tables" / "fitted.toml"
    assert main(["fit-failures", str(path), "--scope", "node", "--recovery-minutes", "12.5", "-o", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "shape k" in stdout and "MTBF [h]" in stdout and "[[failures]]" in stdout and f"wrote {out}" in stdout
    assert sorted(p.name for p in out.parent.iterdir()) == ["fitted.toml"]     # no temporary file left
    table = tomllib.loads(out.read_text())["failures"][0]
    fit = fit_weibull(*read_failure_log(path))
    assert table["name"] == "node_log"                               # default: the sanitised file name
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
