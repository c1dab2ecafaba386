"""Figures (mcsim.plots), the plot and report commands, and their errors."""

from __future__ import annotations

import copy
import re
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from builders import SMALL_SCENARIO  # noqa: E402

import mcsim  # noqa: E402
from mcsim.analysis import ranking  # noqa: E402
from mcsim.cli.main import main  # noqa: E402
from mcsim.errors import BackendUnavailable  # noqa: E402
from mcsim.report import plots  # noqa: E402
from mcsim.scenario.config import scenario_from_dict  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
KINDS = ("scaling", "cdf", "pareto", "breakdown")


def _simulate(sweep: dict | None, runs: int = 30):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=runs, mode="fast")
    if sweep:
        raw["sweep"] = sweep
    return mcsim.simulate(scenario_from_dict(raw), progress=False)


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
    """A 2 x 2 sweep (gpus x strategy), 30 runs, written to a result file."""
    ds = _simulate({"parallelism.gpus": [64, 128], "checkpoint.strategy": ["async", "gockpt"]})
    path = tmp_path_factory.mktemp("sweep") / "small.nc"
    mcsim.write_results(ds, path)
    return path


@pytest.fixture(scope="module")
def single_file(tmp_path_factory):
    """One configuration (dims: run only), 30 runs."""
    path = tmp_path_factory.mktemp("single") / "one.nc"
    mcsim.write_results(_simulate(None), path)
    return path


def _is_png(path) -> bool:
    return path.is_file() and path.stat().st_size > 1000 and path.read_bytes()[:8] == PNG


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_via_cli(kind, sweep_file, tmp_path, capsys):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(sweep_file), "--kind", kind, "-o", str(out)]) == 0
    assert _is_png(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temporary file left
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_via_functions(kind, sweep_file, tmp_path):
    ds = mcsim.open_results(sweep_file)
    fig = getattr(plots, f"plot_{kind}")(ds)
    try:
        assert isinstance(fig, matplotlib.figure.Figure)
        title = fig.get_suptitle()
        assert "30 runs" in title
        for ax in fig.axes:  # every panel has a title or axis labels, and some label carries a unit
            assert ax.get_title() or ax.get_xlabel() or ax.get_ylabel()
        assert any("[" in ax.get_xlabel() + ax.get_ylabel() for ax in fig.axes)
        assert plots.save_figure(fig, tmp_path / "sub" / "fig.png") == tmp_path / "sub" / "fig.png"
        assert _is_png(tmp_path / "sub" / "fig.png")
    finally:
        plt.close(fig)


def test_units_are_converted(sweep_file):
    """Days, MUSD and MWh from the stored h, USD and MWh; smaller units only for tiny values."""
    ds = mcsim.open_results(sweep_file)
    big = ds.copy()
    for name, factor in (("wall_time", 1000.0), ("cost", 1e5), ("energy", 100.0)):
        big[name] = (ds[name] * factor).assign_attrs(ds[name].attrs)
    for data, expected in (
        (big, ("wall time [days]", "energy [MWh]", "cost [MUSD]")),
        (ds, ("wall time [h]", "energy [kWh]", "cost [kUSD]")),
    ):
        fig = plots.plot_scaling(data)
        try:
            labels = [ax.get_ylabel() for ax in fig.axes]
            assert all(label in labels for label in expected), labels
            for label, name in zip(expected, ("wall_time", "energy", "cost"), strict=False):
                factor = {"days": 1 / 24, "h": 1.0, "MWh": 1.0, "kWh": 1e3, "MUSD": 1e-6, "kUSD": 1e-3}[
                    label.split("[")[1].rstrip("]")
                ]
                drawn = max(max(line.get_ydata()) for line in fig.axes[labels.index(label)].get_lines())
                assert drawn == pytest.approx(float(data[name].mean("run").max()) * factor)
        finally:
            plt.close(fig)


def test_scaling_with_many_combinations_fixes_the_other_dims(sweep_file):
    import xarray as xr

    ds = mcsim.open_results(sweep_file)
    wide = xr.concat([ds] * 5, dim=xr.DataArray(list("abcde"), dims="site", name="site"))  # 2 x 5 > 8 lines
    fig = plots.plot_scaling(wide)
    try:
        optimum = ranking.best(wide, "cost")["configuration"]
        assert "fixed at the cost-optimal values" in fig.get_suptitle().replace("\n", " ")
        assert f"strategy={optimum['strategy']}" in fig.get_suptitle()
        assert len(fig.axes[0].get_lines()) == 1
    finally:
        plt.close(fig)


def test_single_configuration(single_file, tmp_path):
    ds = mcsim.open_results(single_file)
    for kind in ("cdf", "pareto", "breakdown"):
        fig = getattr(plots, f"plot_{kind}")(ds)
        plots.save_figure(fig, tmp_path / f"{kind}.png")
        plt.close(fig)
        assert _is_png(tmp_path / f"{kind}.png")
    with pytest.raises(ValueError, match="gpus"):
        plots.plot_scaling(ds)


def test_scaling_needs_its_dimension(sweep_file):
    with pytest.raises(ValueError, match="'interval'"):
        plots.plot_scaling(mcsim.open_results(sweep_file), x="interval")


def test_report(sweep_file, tmp_path, capsys):
    folder = tmp_path / "deep" / "report"
    assert main(["report", str(sweep_file), "-o", str(folder), "--deadline", "30"]) == 0
    readme = (folder / "README.md").read_text()
    ds = mcsim.open_results(sweep_file)
    optimum = ranking.best(ds, "cost")["configuration"]
    named = ", ".join(f"{d}={v}" for d, v in optimum.items())
    assert f"### Cost-optimal: {named}" in readme
    assert "Energy-optimal" in readme and "Fastest" in readme and "Pareto front" in readme
    assert "probability ≥ 0.9" in readme and "Deadline D = 30 days (given)" in readme
    for key in ("runs per configuration", "seed", "mode", "mcsim version"):
        assert key in readme
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert sorted(links) == sorted(f"{k}.png" for k in KINDS)
    for link in links:
        assert _is_png(folder / link)
    # and the manifest of the files the report wrote (.mcsim-report.json: a later report may replace them)
    assert sorted(p.name for p in folder.iterdir()) == sorted(["README.md", ".mcsim-report.json"] + links)
    assert "wrote" in capsys.readouterr().out


def test_report_default_folder_and_single_configuration(single_file, capsys):
    folder = single_file.with_name("one-report")
    assert main(["report", str(single_file)]) == 0
    readme = (folder / "README.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert sorted(links) == ["breakdown.png", "cdf.png", "pareto.png"]  # no gpus dim: no scaling figure
    assert all(_is_png(folder / link) for link in links)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("mcsim: error: ")
    assert "Traceback" not in err
    return err


def test_bad_kind(sweep_file, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(sweep_file), "--kind", "pie", "-o", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2
    assert "--kind" in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["plot", "--kind", "cdf", "-o", "OUT/x.png"], ["report", "-o", "OUT/r"]])
def test_missing_file(command, tmp_path, capsys):
    args = [a.replace("OUT", str(tmp_path)) for a in command]
    assert main([args[0], str(tmp_path / "nope.nc"), *args[1:]]) == 2
    assert "nope.nc" in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_not_a_result_file_and_bad_options(sweep_file, single_file, tmp_path, capsys):
    text = tmp_path / "notes.nc"
    text.write_text("not netCDF")
    assert main(["plot", str(text), "--kind", "cdf", "-o", str(tmp_path / "x.png")]) == 2
    _one_error_line(capsys)
    assert main(["plot", str(single_file), "--kind", "scaling", "-o", str(tmp_path / "x.png")]) == 2
    assert "gpus" in _one_error_line(capsys)
    assert main(["plot", str(sweep_file), "--kind", "cdf", "--variable", "nope", "-o", str(tmp_path / "x.png")]) == 2
    assert "nope" in _one_error_line(capsys)
    assert main(["plot", str(sweep_file), "--kind", "pareto", "--x", "gpus", "-o", str(tmp_path / "x.png")]) == 2
    assert "--x" in _one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.nc"]


def test_matplotlib_missing(sweep_file, tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(BackendUnavailable, match=r"pip install 'mcsim-llm\[plot\]'"):
        plots.plot_cdf(mcsim.open_results(sweep_file))
    assert main(["plot", str(sweep_file), "--kind", "cdf", "-o", str(tmp_path / "x.png")]) == 2
    assert "matplotlib" in _one_error_line(capsys)
    assert main(["report", str(sweep_file), "-o", str(tmp_path / "r")]) == 2
    assert "matplotlib" in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------- hard cases: infeasible and censored configurations, wide ranges, damaged files


@pytest.fixture(scope="module")
def hard_file(tmp_path_factory):
    """gpus 8, 64, 128 x tp 2, 3: tp = 3 is infeasible everywhere, and no 8-GPU run finishes
    within max_wall_days = 0.05 (1.2 h; 8 GPUs need 3.8 h of ideal compute)."""
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=30, mode="fast", max_wall_days=0.05)
    raw["sweep"] = {"parallelism.gpus": [8, 64, 128], "parallelism.tp": [2, 3]}
    path = tmp_path_factory.mktemp("hard") / "hard.nc"
    mcsim.write_results(mcsim.simulate(scenario_from_dict(raw), progress=False), path)
    return path


def test_infeasible_points_are_marked_without_warnings(hard_file, tmp_path):
    import warnings

    ds = mcsim.open_results(hard_file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        fig = plots.plot_scaling(ds)
        assert main(["report", str(hard_file), "-o", str(tmp_path / "r")]) == 0
    assert caught == []
    try:
        crosses = [line for line in fig.axes[0].get_lines() if line.get_marker() == "x"]
        assert sum(len(line.get_xdata()) for line in crosses) == 3  # the three tp = 3 configurations
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert any("infeasible" in t for t in legend) and any("censored" in t for t in legend)
    finally:
        plt.close(fig)


def test_report_never_recommends_an_unfinished_configuration(hard_file, tmp_path):
    assert main(["report", str(hard_file), "-o", str(tmp_path / "r")]) == 0
    readme = (tmp_path / "r" / "README.md").read_text()
    picks = re.findall(r"### (?:Cost-optimal|Energy-optimal|Fastest): (.*)", readme)
    assert picks and all("gpus=8," not in p for p in picks), picks
    assert "did not complete all their runs" in readme and "gpus=8, tp=2: 0.0% completed" in readme
    assert "| 8 |" not in readme  # not on the Pareto front table


def test_summary_marks_censored_configurations(hard_file, capsys):
    assert main(["summary", str(hard_file)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("gpus=8 tp=2"))
    assert row.rstrip().endswith("0.0% *") and "censored" in out
    ettr = mcsim.open_results(hard_file)["ettr"]
    assert float(ettr.max()) <= 1.0


def test_plot_scaling_takes_the_single_sweep_dimension_or_asks_for_x(sweep_file, tmp_path, capsys):
    ds = mcsim.open_results(sweep_file).sel(gpus=64)  # strategy alone
    fig = plots.plot_scaling(ds)
    try:
        assert "strategy" in fig.axes[2].get_xlabel()
    finally:
        plt.close(fig)
    two = mcsim.open_results(sweep_file).rename({"gpus": "nodes"})
    with pytest.raises(ValueError, match="--x"):
        plots.plot_scaling(two)
    path = tmp_path / "two.nc"
    mcsim.write_results(two, path)
    assert main(["plot", str(path), "--kind", "scaling", "-o", str(tmp_path / "x.png")]) == 2
    assert "--x" in _one_error_line(capsys)
    assert main(["plot", str(path), "--kind", "scaling", "--x", "nodes", "-o", str(tmp_path / "x.png")]) == 0


def _many(sweep_file, factors=(1, 2, 4, 8, 16, 32)):
    """The 2 x 2 sweep repeated along a 'site' dimension, every variable scaled by the site's factor."""
    import xarray as xr

    ds = mcsim.open_results(sweep_file)
    copies = []
    for factor in factors:
        one = ds.copy()
        for name in ds.data_vars:
            if "run" in ds[name].dims and name not in ("completed", "ettr"):
                one[name] = (ds[name] * factor).assign_attrs(ds[name].attrs)
        copies.append(one)
    return xr.concat(copies, dim=xr.DataArray(np.arange(len(factors)), dims="site", name="site"))


def test_cdf_curves_are_spread_over_the_range(sweep_file):
    wide = _many(sweep_file)  # 24 configurations, means over a factor 32 and more
    fig = plots.plot_cdf(wide)
    try:
        means = wide["wall_time"].mean("run")
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert len(labels) == plots.MAX_CURVES
        lowest = means.where(means == means.min(), drop=True)
        highest = means.where(means == means.max(), drop=True)
        for extreme in (lowest, highest):  # both ends of the range are drawn
            point = {d: extreme[d].values[0].item() for d in extreme.dims}
            assert plots.config_label(point) in labels
        # the drawn curves' medians cover the range instead of crowding at the cheap end
        medians = sorted(np.median(line.get_xdata()) for line in fig.axes[0].get_lines())
        assert medians[-1] / medians[0] > 20
    finally:
        plt.close(fig)


def test_breakdown_of_configurations_of_very_different_size(sweep_file):
    wide = _many(sweep_file, factors=(1, 100))
    fig = plots.plot_breakdown(wide)
    try:
        ax = fig.axes[0]
        assert "share" in ax.get_xlabel()
        ends = {}
        for bar in ax.patches:  # every configuration's bar fills the axis: the parts sum to 100 %
            y = round(bar.get_y(), 6)
            ends[y] = max(ends.get(y, 0.0), bar.get_x() + bar.get_width())
        assert len(ends) == 8 and all(end == pytest.approx(100.0) for end in ends.values())
    finally:
        plt.close(fig)


def test_coordinate_labels_are_rounded(sweep_file, capsys, tmp_path):
    ds = mcsim.open_results(sweep_file).assign_coords(gpus=[1.0000000000010, 2.0000000000001])
    ds["gpus"].attrs["units"] = "1"
    fig = plots.plot_scaling(ds)
    try:
        ticks = [t.get_text() for t in fig.axes[2].get_xticklabels()]
        assert ticks == ["1", "2"], ticks
    finally:
        plt.close(fig)
    from mcsim.report.tables import summary_table

    text = summary_table(ds)
    assert "gpus=1 strategy" in text and "1.000000000001" not in text
    from mcsim.report.result_report import report_markdown

    assert "1.000000000001" not in report_markdown(ds, [])


def test_half_width_below_float_resolution_prints_as_zero(sweep_file):
    from mcsim.report.tables import summary_table

    ds = mcsim.open_results(sweep_file)
    noise = np.zeros(ds.sizes["run"])
    noise[::2] = 7e-20  # round-off of a constant 2.491e-05 MWh: the spacing there is 3.4e-21
    ds["energy"] = (ds["energy"] * 0 + 2.491e-05 + noise).assign_attrs(ds["energy"].attrs)
    assert float(ds["energy"].std()) > 0
    text = summary_table(ds)
    # shown in kWh, the unit in which it reads as a plain number: 2.491e-05 MWh = 0.02491 kWh
    assert "energy [kWh]" in text and "0.02491 ± 0 " in text and "e-20" not in text


def test_summary_all_and_sort(tmp_path, capsys):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=10, mode="fast")
    # 3 x 6 = 18 configurations, > 16; tp = 3 makes 6 of them infeasible
    raw["sweep"] = {"parallelism.tp": [1, 2, 3], "parallelism.gpus": [32, 64, 96, 128, 192, 256]}
    path = tmp_path / "many.nc"
    mcsim.write_results(mcsim.simulate(scenario_from_dict(raw), progress=False), path)
    ds = mcsim.open_results(path)
    n_feasible = int(ds["feasible"].sum())
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("tp=")]
    # the header counts what is there and what is shown
    assert out[0].startswith(
        f"18 configurations ({n_feasible} completed, 0 with censored runs, {18 - n_feasible} infeasible)"
    )
    assert len(rows) == 10 and f"{18 - len(rows)} not shown" in out[0]
    assert main(["summary", str(path), "--all"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("tp=")]
    assert len(rows) == 18
    assert main(["summary", str(path), "--all", "--sort", "ettr"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("tp=")]
    ettr = [float(re.split(r"\s{2,}", r.strip())[-2].split(" ± ")[0]) for r in rows if "infeasible" not in r]
    assert ettr == sorted(ettr, reverse=True)  # higher ETTR is better: best first
    assert all("infeasible" in r for r in rows[len(ettr) :])  # infeasible last
    assert main(["summary", str(path), "--sort", "nope"]) == 2
    assert "--sort" in _one_error_line(capsys)


def test_report_says_when_picks_are_equivalent(sweep_file):
    from mcsim.report.result_report import report_markdown

    ds = mcsim.open_results(sweep_file)
    runs = ds.sizes["run"]
    cheap, green = {"gpus": 64, "strategy": "async"}, {"gpus": 128, "strategy": "gockpt"}
    # Cost (two picks that differ by less than the noise): green costs 12 USD more than cheap on
    # 1 MUSD, plus paired noise of +-1,000 USD alternating over the (even number of) runs: mean
    # difference exactly 12 USD, standard deviation ~1,017 USD, so the 95 % CI of the paired
    # difference is 12 +- ~364 USD.
    base = 1e6 + 5e4 * np.sin(np.arange(runs))
    cost = np.full(ds["cost"].shape, np.nan)
    cost[...] = base + 1e5  # the two others: far dearer
    ds["cost"] = (ds["cost"].dims, cost, ds["cost"].attrs)
    ds["cost"].loc[cheap] = base
    ds["cost"].loc[green] = base + 12.0 + 1000.0 * (-1.0) ** np.arange(runs)
    energy = ds["energy"].copy()
    energy.loc[green] = float(energy.min()) / 2  # green is energy-optimal by far
    ds["energy"] = energy
    assert ranking.best(ds, "cost")["configuration"] == cheap
    assert ranking.best(ds, "energy")["configuration"] == green
    section = report_markdown(ds, []).split("### Energy-optimal")[1].split("###")[0]
    cost_text = next(part for part in section.split("; ") if part.lstrip().startswith("cost"))
    assert "equivalent within the uncertainty" in cost_text
    energy_text = section.split("CI: ")[1].split("; ")[0]
    assert energy_text.startswith("energy -") and "equivalent" not in energy_text


def _broken(ds, how):
    """A netCDF dataset that lacks what mcsim's analysis needs: refused in one line, naming what is wrong."""
    if how == "no cost":
        return ds.drop_vars("cost")
    if how == "no feasible":
        return ds.drop_vars("feasible")
    if how == "zero runs":
        return ds.isel(run=slice(0, 0))
    if how == "zero configurations":
        return ds.isel(gpus=slice(0, 0))
    if how == "all NaN":
        return ds.assign(cost=ds["cost"] * np.nan)
    if how == "stat dimension":
        return ds.rename({"strategy": "stat"})
    if how == "text cost":
        return ds.assign(cost=ds["cost"].astype(str))
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how", ["no cost", "no feasible", "zero runs", "zero configurations", "all NaN", "stat dimension", "text cost"]
)
@pytest.mark.parametrize(
    "command",
    [
        ["summary"],
        ["plot", "--kind", "scaling", "-o", "OUT/x.png"],
        ["plot", "--kind", "pareto", "-o", "OUT/x.png"],
        ["report", "-o", "OUT/r"],
    ],
)
def test_result_files_without_mcsim_variables(how, command, sweep_file, tmp_path, capsys):
    path = tmp_path / "broken.nc"
    _broken(mcsim.open_results(sweep_file), how).to_netcdf(path)
    args = [a.replace("OUT", str(tmp_path)) for a in command]
    assert main([args[0], str(path), *args[1:]]) == 2
    err = _one_error_line(capsys)
    assert str(path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.nc"]


def test_every_figure_marks_censored_configurations(hard_file):
    ds = mcsim.open_results(hard_file)
    figures = {kind: getattr(plots, f"plot_{kind}")(ds) for kind in ("cdf", "pareto", "breakdown")}
    try:
        cdf = [t.get_text() for t in figures["cdf"].axes[0].get_legend().get_texts()]
        assert any(t.startswith("8 GPUs") and "(0% completed)" in t for t in cdf), cdf
        pareto = [t.get_text() for t in figures["pareto"].axes[0].get_legend().get_texts()]
        assert any("censored" in t for t in pareto), pareto
        bars = [t.get_text() for t in figures["breakdown"].axes[0].get_yticklabels()]
        assert any(t.startswith("8 GPUs") and "(0% completed)" in t for t in bars), bars
    finally:
        for fig in figures.values():
            plt.close(fig)


def test_report_when_no_configuration_can_be_ranked(hard_file, tmp_path, capsys):
    only_censored = mcsim.open_results(hard_file).sel(gpus=[8])
    path = tmp_path / "censored.nc"
    mcsim.write_results(only_censored, path)
    with pytest.raises(ValueError, match="max_wall_days"):
        ranking.best(only_censored, "cost")
    assert main(["report", str(path), "-o", str(tmp_path / "r")]) == 0
    readme = (tmp_path / "r" / "README.md").read_text()
    assert "No configuration can be ranked" in readme and "Cost-optimal" not in readme


def test_scenario_text_is_inert_in_the_report_markdown(single_file):
    # A scenario's name and description are user text in the report's Markdown. Hostile text
    # must come out escaped: no link, image, HTML, heading or table cell break can be formed
    # from it, and no line break.
    from mcsim.report.result_report import report_markdown

    ds = mcsim.open_results(single_file)
    hostile = "x](http://evil) <img src=x onerror=alert(1)> | # *bold*\n# Injected heading"
    import tomllib

    from mcsim.scenario.config import dumps_toml

    raw = tomllib.loads(ds.attrs["scenario_toml"])
    raw["description"] = "![img](http://evil) <b>hi</b>"
    ds.attrs.update(scenario_name=hostile, scenario_source="a`b`c.toml", scenario_toml=dumps_toml(raw))
    text = report_markdown(ds, [])
    import re

    for pattern in (r"\]\(", r"<img", r"<b>", r"!\[", r"\*bold"):  # unescaped: not after a backslash
        assert not re.search(r"(?<!\\)" + pattern, text), pattern
    assert "\n# Injected heading" not in text
    assert r"x\]\(http://evil\) \<img src=x onerror=alert\(1\)\> \| \# \*bold\* \# Injected heading" in text
    assert r"\!\[img\]\(http://evil\) \<b\>hi\</b\>" in text


# ---------------------------------------------------------------- sensitivity (tornado) figure


@pytest.fixture(scope="module")
def draws_file(tmp_path_factory):
    """Two PUE values x 64 parameter draws x 2 runs; cost depends on two of the three inputs."""
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = []
    raw["stragglers"] = {"sigma": 0.0}
    raw["run"].update(runs=2, draws=64, mode="fast")
    raw["sweep"] = {"energy.pue": [1.1, 1.4]}
    raw["uncertain"] = {
        "carbon.grid_g_per_kwh": {"dist": "uniform", "low": 100, "high": 600},
        "cost.electricity_usd_per_kwh": {"dist": "uniform", "low": 0.0, "high": 2.0},
        "cost.gpu_hour_usd": {"dist": "uniform", "low": 1.0, "high": 3.0},
    }
    path = tmp_path_factory.mktemp("draws") / "draws.nc"
    mcsim.write_results(mcsim.simulate(scenario_from_dict(raw), progress=False), path)
    return path


def test_sensitivity_figure_bars_follow_the_indices(draws_file, tmp_path, capsys):
    from mcsim.analysis.sensitivity import sensitivity
    from mcsim.report.tornado import plot_sensitivity

    ds = mcsim.open_results(draws_file)
    point = {"pue": float(ranking.best(ds, "cost")["configuration"]["pue"])}
    at = sensitivity(ds.sel(point), "cost")  # the indices of the configuration the figure shows
    expected = [str(k) for k in at.input.values[np.argsort(-at["S1"].values)]]  # ranked by S1 (given draws)
    assert expected[-1] == "carbon.grid_g_per_kwh"  # no effect on cost: ranked last
    fig = plot_sensitivity(ds, "cost")  # default: the best configuration on mean cost
    try:
        ax = fig.axes[0]
        assert [t.get_text().split(" [")[0].split("\n")[0] for t in ax.get_yticklabels()] == expected
        assert ax.yaxis_inverted()  # first label at the top
        widths = [p.get_width() for p in ax.patches[:3]]  # the S1 bars (the ranking), top to bottom
        np.testing.assert_allclose(widths, np.sort(at["S1"].values)[::-1])
        deltas = [p.get_width() for p in ax.patches[3:6]]  # delta, the second opinion, below each
        np.testing.assert_allclose(deltas, at["delta"].values[np.argsort(-at["S1"].values)])
        assert "[USD h-1]" in "".join(t.get_text() for t in ax.get_yticklabels())  # labels carry units (UDUNITS)
        assert f"pue={point['pue']:g} (best mean cost)" in fig._suptitle.get_text()
    finally:
        plt.close(fig)
    out = tmp_path / "tornado.png"
    assert main(["plot", str(draws_file), "--kind", "sensitivity", "--variable", "energy", "-o", str(out)]) == 0
    assert _is_png(out)


def test_sensitivity_figure_of_given_indices_shows_the_default_configuration(draws_file):
    from mcsim.report.tornado import plot_sensitivity, point_sensitivity

    ds = mcsim.open_results(draws_file)
    point, result = point_sensitivity(ds, "cost")
    figures = [plot_sensitivity(ds, "cost", point, result), plot_sensitivity(ds, "cost", result=result)]
    try:  # without a point: chosen_configuration, as documented (it was passed on as None and crashed)
        shown = [([t.get_text() for t in fig.axes[0].get_yticklabels()], fig._suptitle.get_text()) for fig in figures]
        assert shown[1] == shown[0]
    finally:
        for fig in figures:
            plt.close(fig)


def test_sensitivity_figure_needs_draws(sweep_file, tmp_path, capsys):
    out = tmp_path / "t.png"
    assert main(["plot", str(sweep_file), "--kind", "sensitivity", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no parameter draws" in err[0] and not out.exists()
    assert main(["plot", str(sweep_file), "--kind", "pareto", "--variable", "cost", "-o", str(out)]) == 2
    assert "applies to --kind cdf or sensitivity only" in capsys.readouterr().err


def test_report_ranks_the_inputs_with_draws(draws_file, tmp_path, capsys):
    from mcsim.report.markdown import markdown_text

    folder = tmp_path / "rep"
    assert main(["report", str(draws_file), "-o", str(folder)]) == 0
    assert _is_png(folder / "sensitivity.png")
    text = (folder / "README.md").read_text()
    section = text.split("## Which input matters most")[1].split("\n## ")[0]
    assert "![Which input matters most](sensitivity.png)" in section
    rows = [line for line in section.splitlines() if re.match(r"\| \d \|", line)]
    assert [r.split(" | ")[0] for r in rows] == ["| 1", "| 2", "| 3"]
    assert markdown_text("carbon.grid_g_per_kwh") in rows[2]  # no effect on cost: ranked last
