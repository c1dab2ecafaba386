"""The Python API does what the command line does (issue 42, item 5).

``mcsim.validate()`` and ``mcsim.scenarios()`` at the top (imported when first used), ``simulate`` and
``summarize`` of a path, ``combine`` of datasets held in memory, ``ds.mcsim.plot.sensitivity``, the
report of a plan's dataset, and the sensitivity dataset's CF attributes.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from builders import SMALL_SCENARIO, write_toml
from plans import small_plan

import mcsim
from mcsim.analysis import validation
from mcsim.scenario import shipped

# the small scenario swept over two sizes, 20 runs: a second of simulation
SWEEP = copy.deepcopy(SMALL_SCENARIO) | {"run": {**SMALL_SCENARIO["run"], "runs": 20, "mode": "fast"}}
SWEEP["sweep"] = {"parallelism.gpus": [32, 64]}
# and with two uncertain inputs and 32 draws (the fewest the delta indices take)
UNCERTAIN = copy.deepcopy(SWEEP) | {
    "run": {**SWEEP["run"], "runs": 8, "draws": 32, "design": "sobol"},
    "uncertain": {
        "compute.efficiency": {"dist": "uniform", "low": 0.3, "high": 0.6},
        "stragglers.sigma": {"dist": "uniform", "low": 0.01, "high": 0.05},
    },
}


@pytest.fixture(scope="module")
def sweep_path(tmp_path_factory) -> Path:
    return write_toml(SWEEP, tmp_path_factory.mktemp("parity") / "sweep.toml")


def test_validate_and_scenarios_are_top_level_and_not_imported_with_mcsim():
    assert mcsim.validate is validation.validate and "validate" in mcsim.__all__
    names = {entry.name: entry.kind for entry in mcsim.scenarios()}
    assert names["capacity-planning"] == "scenario" and names["plan-llama3-70b"] == "plan"
    assert all(entry.path.is_file() for entry in mcsim.scenarios())
    assert mcsim.scenarios() == shipped.shipped_scenarios() and "scenarios" in mcsim.__all__
    code = (
        "import sys, mcsim; heavy = ['mcsim.analysis.validation', 'mcsim.fitting.power_log', "
        "'mcsim.fitting.sacct_log', 'mcsim.planning.run']; print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_simulate_and_summarize_take_paths(sweep_path, tmp_path):
    by_path = mcsim.simulate(sweep_path, progress=False)
    by_scenario = mcsim.simulate(mcsim.load_scenario(sweep_path), progress=False)
    for name in ("wall_time", "cost", "energy"):
        np.testing.assert_array_equal(by_path[name].values, by_scenario[name].values)
    result = mcsim.write_results(by_path, tmp_path / "sweep.nc")
    xr.testing.assert_identical(mcsim.summarize(str(result)), mcsim.summarize(by_path))
    xr.testing.assert_identical(mcsim.summarize(result), mcsim.summarize(by_path))
    with pytest.raises(mcsim.ScenarioError, match="nope.toml"):
        mcsim.simulate(tmp_path / "nope.toml")
    part = mcsim.write_results(
        mcsim.simulate(sweep_path, progress=False, shard=mcsim.Shard(0, 2)), tmp_path / "part.nc"
    )
    with pytest.raises(ValueError, match=r"part.nc: part 0/2 of a sharded run"):
        mcsim.summarize(part)


def test_combine_of_datasets_in_memory(sweep_path, tmp_path):
    whole = mcsim.simulate(sweep_path, progress=False)
    parts = [mcsim.simulate(sweep_path, progress=False, shard=mcsim.Shard(i, 2)) for i in range(2)]
    combined = mcsim.combine(parts[::-1])  # any order, no file written
    on_file = mcsim.combine([parts[0], mcsim.write_results(parts[1], tmp_path / "p1.nc")])  # mixed
    for ds in (combined, on_file):
        for name in ("wall_time", "cost", "energy", "n_failures"):
            np.testing.assert_array_equal(ds[name].values, whole[name].values)
        assert "shard" not in ds.attrs
    assert "part 0/2" in combined.attrs["shard_parts"] and "p1.nc" in on_file.attrs["shard_parts"]
    assert "shard" in parts[0].attrs  # the parts given are not changed
    with pytest.raises(ValueError, match="missing part 1/2"):
        mcsim.combine(parts[:1])
    with pytest.raises(TypeError, match="expected a list of parts .files or datasets., got one dataset"):
        mcsim.combine(parts[0])


@pytest.fixture(scope="module")
def uncertain_result(tmp_path_factory) -> xr.Dataset:
    return mcsim.simulate(write_toml(UNCERTAIN, tmp_path_factory.mktemp("draws") / "u.toml"), progress=False)


def test_sensitivity_dataset_carries_the_cf_attributes_and_writes(uncertain_result, tmp_path):
    result = mcsim.sensitivity(uncertain_result, "cost", resamples=10)
    assert result.attrs["Conventions"] == "CF-1.10"
    assert result.attrs["title"] == "mcsim sensitivity indices of cost: small"
    history = result.attrs["history"].splitlines()
    assert history[0] == uncertain_result.attrs["history"]  # the result's own line first
    assert "sensitivity indices of cost over 32 draws" in history[-1] and mcsim.__version__ in history[-1]
    path = tmp_path / "indices.nc"
    result.to_netcdf(path)
    with xr.open_dataset(path) as back:
        assert back.attrs["Conventions"] == "CF-1.10" and back.attrs["history"] == result.attrs["history"]


def test_plot_sensitivity_from_the_accessor(uncertain_result):
    plt = pytest.importorskip("matplotlib.pyplot")
    figure = uncertain_result.mcsim.plot.sensitivity("cost", {"gpus": 64}, resamples=10)
    try:
        labels = [tick.get_text() for axes in figure.axes for tick in axes.get_yticklabels()]
        assert any("compute.efficiency" in label for label in labels), labels
        texts = " ".join(text.get_text() for text in figure.findobj(lambda artist: hasattr(artist, "get_text")))
        assert "gpus 64" in texts or "gpus=64" in texts or "64 GPUs" in texts, texts
    finally:
        plt.close(figure)


def test_report_of_a_plan_dataset_is_the_plan_files_report(tmp_path):
    plan_file = write_toml(small_plan(), tmp_path / "p.toml")
    ds = mcsim.plan(plan_file, progress=False)
    written = mcsim.report(ds, tmp_path / "from-dataset")  # was a KeyError ('ettr') from the result report
    assert sorted(p.name for p in written) == ["README.md", "recommended.toml"]
    on_file = mcsim.write_results(ds, tmp_path / "p.nc")
    mcsim.report(on_file, tmp_path / "from-file")
    for name in ("README.md", "recommended.toml"):
        from_dataset = (tmp_path / "from-dataset" / name).read_text()
        assert from_dataset.replace("plan.nc", "p.nc") == (tmp_path / "from-file" / name).read_text()
    with pytest.raises(ValueError, match="deadline: applies to a result of mcsim run"):
        mcsim.report(ds, tmp_path / "again", deadline=3)
    assert not (tmp_path / "again").exists()


def test_finding_the_shipped_files_keeps_mcsim_scenarios_a_function():
    # Installed (not editable), the shipped files were found by importing the package data module
    # `mcsim.scenarios`, which set the attribute `mcsim.scenarios` to that module: `mcsim.scenarios()`
    # then raised "'module' object is not callable" after any lookup of a shipped scenario (clean-clone CI).
    code = (
        "import sys, mcsim; mcsim.reference_scenario_path(); mcsim.load_scenario('capacity-planning'); "
        "print('mcsim.scenarios' in sys.modules, len(mcsim.scenarios()) > 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
