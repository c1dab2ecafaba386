"""The Python API of every command and what its answers assume.

Top-level functions the command line calls, typed one-line errors with the valid
choices, useful reprs, progress bars in notebooks, overrides and layout recorded in
results and reports, the deadline of ``summary`` and ``report``, the compile notice
and the run-time estimate against a measured run.
"""

from __future__ import annotations

import sys
import time
import types
import warnings

import numpy as np
import pytest
import xarray as xr
from builders import SMALL_SCENARIO

import mcsim
from mcsim.analysis import compare, ranking
from mcsim.cli.main import main
from mcsim.scenario.config import load_scenario, scenario_from_dict
from mcsim.scenario.toml import dumps_toml


def _configs(means: dict[str, list[float]], runs: int = 5, spread: float = 10.0) -> xr.Dataset:
    """Configurations A, B, ... with given means; runs spread evenly by +-``spread`` around them."""
    names = [chr(ord("A") + i) for i in range(len(means["wall_time"]))]
    offsets = np.linspace(-spread, spread, runs)
    ds = xr.Dataset(
        {k: (("config", "run"), np.array(v, float)[:, None] + offsets[None, :]) for k, v in means.items()},
        coords={"config": names, "run": np.arange(runs)},
    )
    ds["feasible"] = ("config", np.ones(len(names), bool))
    ds["completed"] = (("config", "run"), np.ones((len(names), runs), bool))
    return ds


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
    """A small simulated sweep over GPUs, with one --set override, written to a file."""
    folder = tmp_path_factory.mktemp("api")
    scenario_path = folder / "small.toml"
    scenario_path.write_text(dumps_toml(SMALL_SCENARIO | {"description": "a 64-GPU job on A100s"}))
    scenario = load_scenario(scenario_path, ["parallelism.gpus=[32, 64]"], runs=40)
    ds = mcsim.simulate(scenario, progress=False)
    return mcsim.write_results(ds, folder / "small.nc")


# ---------------------------------------------------------------- typed one-line errors with the choices


def test_best_names_the_objectives_of_the_dataset():
    ds = _configs({"wall_time": [20, 40], "cost": [10, 5]})
    with pytest.raises(ValueError, match=r"objective 'cots' is not a variable of this dataset; expected one of") as e:
        ranking.best(ds, "cots")
    assert "wall_time, cost" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(TypeError, match="objective: expected a variable name"):
        ranking.best(ds, ["cost"])


def test_pareto_refuses_a_bare_string():
    ds = _configs({"wall_time": [20, 40], "cost": [10, 5]})
    # a string is a sequence of one-letter names: it used to fail on 'c' not being a variable
    with pytest.raises(TypeError, match=r"objectives: expected a sequence of variable names .* got the string 'cost'"):
        ranking.pareto_front(ds, "cost")


@pytest.mark.parametrize(
    "a, match",
    [
        ({"config": "Z"}, r"a: config='Z' is not a configuration of this result; config is one of A, B"),
        ({"gpus": 8}, r"a: gpus is not a sweep dimension; expected config"),
        ("A", r"a: expected a mapping of sweep coordinates"),
    ],
)
def test_prob_better_names_the_valid_configurations(a, match):
    ds = _configs({"wall_time": [20, 40], "cost": [10, 5]})
    with pytest.raises((ValueError, TypeError), match=match):
        compare.prob_better(ds, a, {"config": "B"})


def test_prob_better_asks_for_every_sweep_dimension():
    ds = _configs({"wall_time": [20, 40], "cost": [10, 5]}).expand_dims(size=[1, 2]).transpose("config", "size", "run")
    with pytest.raises(ValueError, match="a: selects more than one configuration; also give size"):
        compare.prob_better(ds, {"config": "A"}, {"config": "B", "size": 1})


def test_open_results_refuses_a_foreign_netcdf_file(tmp_path, capsys):
    foreign = tmp_path / "foreign.nc"
    xr.Dataset({"a": ("x", [1.0, 2.0])}).to_netcdf(foreign, engine="netcdf4")
    with pytest.raises(ValueError, match=r"foreign\.nc: not an mcsim result file \(no 'mcsim_version' attribute"):
        mcsim.open_results(foreign)
    assert main(["summary", str(foreign)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mcsim: error: ") and "not an mcsim result file" in err and err.count("\n") == 1


def test_cheapest_within_reports_the_closest_configuration():
    # runs of A: 10..30 h, of B: 30..50 h; within 1 day: A 3 of 5 runs (0.6), B none
    ds = _configs({"wall_time": [20, 40], "cost": [10, 5]})
    with pytest.raises(mcsim.NoneQualifies, match=r"closest is config=A with probability 0\.6 ") as caught:
        ds.mcsim.cheapest_within(days=1, probability=0.9)
    assert caught.value.closest["configuration"] == {"config": "A"}
    assert (caught.value.days, caught.value.probability) == (1.0, 0.9)
    assert ds.mcsim.cheapest_within(days=1, probability=0.5)["configuration"] == {"config": "A"}


# ---------------------------------------------------------------- reprs


def test_scenario_repr_is_one_line_with_what_matters(small_raw, tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(dumps_toml(small_raw))
    scenario = load_scenario(path, {"parallelism.gpus": [32, 64], "checkpoint.strategy": "async"}, runs=50)
    text = repr(scenario)
    assert text == (
        f"<Scenario 'small' from {path}: 2 configurations (gpus 2), 50 runs, seed 7, exact mode, "
        'overrides: parallelism.gpus = [32, 64]; checkpoint.strategy = "async"; run.runs = 50>'
    )
    assert repr(scenario_from_dict(small_raw)).startswith(
        "<Scenario 'small' from <scenario>: 1 configuration, 200 runs"
    )


def test_accessor_repr_says_what_the_result_holds(sweep_file):
    ds = mcsim.open_results(sweep_file)
    text = repr(ds.mcsim)
    assert text.startswith("<mcsim accessor: 'small', 2 configurations (gpus 2) x 40 runs>")
    assert "best" in text and "robustness" not in text  # no parameter draws: no robustness
    assert "no result" in repr(xr.Dataset().mcsim)


# ---------------------------------------------------------------- progress bars in notebooks


def _fake_notebook(monkeypatch):
    shell = types.SimpleNamespace(config={"IPKernelApp": {}})
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    for name in ("tqdm.auto", "tqdm.autonotebook"):  # imported afresh, as in a new kernel
        monkeypatch.delitem(sys.modules, name, raising=False)


def test_no_tqdm_warning_in_a_notebook_without_ipywidgets(monkeypatch):
    from mcsim.engine import execution

    _fake_notebook(monkeypatch)
    # patch mcsim's own lookup, never importlib.util.find_spec itself: coverage and xdist
    # call that for every module they meet, and a fake answer crashed a CI worker
    monkeypatch.setattr(execution, "ipywidgets_installed", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tqdm.auto would warn "IProgress not found"
        with execution.progress_bar(None, total=3) as bar:
            shown = not bar.disable  # in a notebook stderr is no terminal, yet the bar is shown
            bar.update(3)
    from tqdm.std import tqdm as text_bar

    assert type(bar) is text_bar and shown


def test_widget_bar_when_ipywidgets_is_there(monkeypatch):
    from mcsim.engine import execution

    monkeypatch.setattr(execution, "ipywidgets_installed", lambda: True)
    from tqdm.auto import tqdm as auto_bar

    assert execution.bar_class() is auto_bar
    assert execution.progress_bar(False, total=1).disable


# ---------------------------------------------------------------- top-level functions the CLI calls


def test_every_command_has_its_function():
    for name in ("simulate", "summarize", "sensitivity", "plan", "fit_failures", "calibrate", "report"):
        assert callable(getattr(mcsim, name)), name
        assert name in mcsim.__all__
    import importlib

    importlib.import_module("mcsim.report.plots")  # the package stays a package
    assert mcsim.report.plots.plot_cdf is not None


def test_fit_failures_function_and_command_agree(tmp_path, capsys):
    log = tmp_path / "gpu-log.csv"
    rows = ["unit,start_hours,end_hours,failed"] + [
        f"u{i},0,{h},{int(h < 900)}" for i, h in enumerate([120, 340, 560, 780, 900, 900, 250, 610, 900, 430])
    ]
    log.write_text("\n".join(rows) + "\n")
    found = mcsim.fit_failures(log, scope="node", recovery_minutes=15)
    assert found.name == "gpu-log" and found.fit.n_failures == 7 and found.fit.n_units == 10
    assert 'name = "gpu-log"' in found.table and 'scope = "node"' in found.table
    assert repr(found).startswith("<FailureFit 'gpu-log' from ") and "7 failures" in repr(found)
    assert main(["fit-failures", str(log), "--scope", "node", "--recovery-minutes", "15"]) == 0
    assert found.table in capsys.readouterr().out
    with pytest.raises(mcsim.ScenarioError, match="--confidence"):
        mcsim.fit_failures(log, confidence=1.5)


# ---------------------------------------------------------------- answers that say what they assume


def test_result_records_the_overrides(sweep_file):
    ds = mcsim.open_results(sweep_file)
    assert ds.attrs["scenario_overrides"].splitlines() == ["parallelism.gpus = [32, 64]", "run.runs = 40"]


def test_summary_states_the_fixed_layout_and_points_to_plan(sweep_file, capsys):
    assert main(["summary", str(sweep_file)]) == 0
    out = capsys.readouterr().out
    layout = out.strip().splitlines()[-1]
    assert layout.startswith("answers for the layout the scenario fixes: GPU A100-80GB, tp 2, pp 2, checkpoint")
    assert "(GPUs: swept)" in layout and "`mcsim plan`" in layout


def test_summary_deadline_and_probability(sweep_file, capsys):
    ds = mcsim.open_results(sweep_file)
    days = float(ds.wall_time.max()) / 24 * 1.01  # every run of both sizes finishes in time
    assert main(["summary", str(sweep_file), "--deadline", f"{days}", "--probability", "0.8"]) == 0
    out = capsys.readouterr().out
    assert f"P(<= {days:g} d)" in out and "100.0%" in out
    cheaper = ranking.best(ds, "cost")["configuration"]["gpus"]
    assert f"the cheapest configuration finishing in time with probability >= 0.8 is gpus={cheaper}" in out
    for argv, message in (
        (["--deadline", "-2"], "--deadline: expected a finite number of days > 0, got -2.0"),
        (["--deadline", "3", "--probability", "90"], "--probability: expected a number in (0, 1) (a share"),
        (["--probability", "0.5"], "--probability: applies with --deadline DAYS"),
    ):
        assert main(["summary", str(sweep_file), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_report_without_a_deadline_invents_none(sweep_file, tmp_path):
    pytest.importorskip("matplotlib")
    folder = tmp_path / "r"
    written = mcsim.report(sweep_file, folder)
    text = (folder / "README.md").read_text()
    assert folder / "README.md" in written
    assert "No deadline given: `mcsim report FILE --deadline DAYS" in text
    assert "Deadline D =" not in text
    # the overrides are listed, the description ("a 64-GPU job") is not repeated: the sweep made it stale
    assert "| overrides | `parallelism.gpus = [32, 64]`; `run.runs = 40` |" in text
    assert "a 64-GPU job" not in text and "description is not repeated" in text
    # (the scenario's text is escaped, so "-" reads "\-" in the Markdown source)
    assert "| layout (fixed by the scenario) | GPU A100\\-80GB, tp 2, pp 2" in text and "`mcsim plan`" in text


def test_report_with_a_deadline_names_the_pick_or_the_closest(sweep_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    ds = mcsim.open_results(sweep_file)
    fast = float(ds.wall_time.min()) / 24 * 0.99  # no run of either size finishes in time
    assert main(["report", str(sweep_file), "-o", str(tmp_path / "a"), "--deadline", f"{fast}"]) == 0
    text = (tmp_path / "a" / "README.md").read_text()
    assert f"**No configuration finishes within {fast:g} days with probability ≥ 0.9.**" in text
    assert "The closest is gpus=" in text
    assert main(["report", str(sweep_file), "-o", str(tmp_path / "b"), "--probability", "1.5"]) == 2
    assert "--probability: expected a number in (0, 1)" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_a_run_override_keeps_the_description(small_raw, tmp_path):
    from mcsim.report.markdown import _stale

    assert not _stale(["run.runs = 40", "run.seed = 3"])
    assert _stale(["run.runs = 40", "parallelism.gpus = 128"])
    assert not _stale(["parallelism.gpus = 128", 'description = "128 GPUs"'])


# ---------------------------------------------------------------- first-run honesty


def test_kernel_cache_state_is_read_not_guessed(small_raw, monkeypatch):
    from mcsim.kernels import accelerate
    from mcsim.kernels import interface as kernel

    mcsim.simulate(scenario_from_dict(small_raw | {"run": small_raw["run"] | {"runs": 2}}), progress=False)
    assert kernel.compiled() is True
    if accelerate.CACHE_FOLDER is None:
        pytest.skip("no kernel cache folder")
    cache_file = kernel.simulate_runs._cache._cache_file
    assert accelerate.cached(kernel.simulate_runs) is True  # the index of the current sources
    monkeypatch.setattr(cache_file, "_index_path", str(accelerate.CACHE_FOLDER / "no-such-index.nbi"))
    assert accelerate.cached(kernel.simulate_runs) is False  # an empty cache: the first call compiles
    assert accelerate.cached(object()) is None


def test_cold_cache_says_compiling_instead_of_a_frozen_bar(small_raw, monkeypatch):
    from mcsim.kernels import interface as kernel

    monkeypatch.setattr(kernel, "compiled", lambda table=False: False)
    messages: list[str] = []
    mcsim.simulate(scenario_from_dict(small_raw | {"run": small_raw["run"] | {"runs": 2}}), notify=messages.append)
    assert f"compiling kernels (first run only, about {kernel.COMPILE_SECONDS:.0f} s)" in messages
    monkeypatch.setattr(kernel, "compiled", lambda table=False: True)
    messages.clear()
    mcsim.simulate(scenario_from_dict(small_raw | {"run": small_raw["run"] | {"runs": 2}}), notify=messages.append)
    assert not any("compiling" in m for m in messages)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_run_time_estimate_within_10x_of_a_measured_run(small_raw, mode):
    # The estimate gates --max-hours; calibrated on the shipped scenarios (mcsim/model/run_estimate.py).
    # Timing is machine-dependent, so the bound is generous: 10x either way. The kernel's CPU time
    # on one thread is measured, cache warm: the calling thread's CPU time (time.thread_time), as
    # threads=1 runs the kernel on it, so neither other processes nor a background thread of this
    # one counts (process time counted one: 14x the estimate in a clean-clone CI run), and the
    # least of three repeats, as timeit does.
    from mcsim.engine.threads import run_kernel
    from mcsim.model.preparation import kernel_inputs
    from mcsim.model.run_estimate import estimate_run

    raw = small_raw | {"run": small_raw["run"] | {"mode": mode}}
    raw["model"] = raw["model"] | {"tokens": 2e10}  # ~20,000 iterations a run: the kernel dominates
    inputs = kernel_inputs(scenario_from_dict(raw).configs[0], mode)
    run_kernel(inputs, 7, 0, 1, threads=1)  # compiled or loaded outside the timing
    per_run = estimate_run(inputs).seconds
    runs = max(2, min(2000, round(0.4 / per_run)))  # about 0.4 s estimated
    repeats = []
    for _ in range(3):
        start = time.thread_time()
        run_kernel(inputs, 7, 0, runs, threads=1)
        repeats.append((time.thread_time() - start) / runs)
    measured = min(repeats)
    assert per_run / 10 < measured < per_run * 10, (mode, per_run, measured)
