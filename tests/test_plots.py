"""Figures (mcsim.plots), the plot and report commands, and their errors."""

from __future__ import annotations

import copy
import re
import sys

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import mcsim  # noqa: E402
from mcsim import analysis, plots  # noqa: E402
from mcsim.backends import BackendUnavailable  # noqa: E402
from mcsim.cli import main  # noqa: E402
from mcsim.scenario import scenario_from_dict  # noqa: E402

from conftest import SMALL_SCENARIO  # noqa: E402

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
    for data, expected in ((big, ("wall time [days]", "energy [MWh]", "cost [MUSD]")),
                           (ds, ("wall time [h]", "energy [kWh]", "cost [kUSD]"))):
        fig = plots.plot_scaling(data)
        try:
            labels = [ax.get_ylabel() for ax in fig.axes]
            assert all(label in labels for label in expected), labels
            for label, name in zip(expected, ("wall_time", "energy", "cost")):
                factor = {"days": 1 / 24, "h": 1.0, "MWh": 1.0, "kWh": 1e3, "MUSD": 1e-6, "kUSD": 1e-3}[
                    label.split("[")[1].rstrip("]")]
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
        optimum = analysis.best(wide, "cost")["configuration"]
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
    assert main(["report", str(sweep_file), "-o", str(folder)]) == 0
    readme = (folder / "README.md").read_text()
    ds = mcsim.open_results(sweep_file)
    optimum = analysis.best(ds, "cost")["configuration"]
    named = ", ".join(f"{d}={v}" for d, v in optimum.items())
    assert f"### Cost-optimal: {named}" in readme
    assert "Energy-optimal" in readme and "Fastest" in readme and "Pareto front" in readme
    assert "probability ≥ 0.9" in readme and "median wall time of the fastest configuration" in readme
    for key in ("runs per configuration", "seed", "mode", "mcsim version"):
        assert key in readme
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert sorted(links) == sorted(f"{k}.png" for k in KINDS)
    for link in links:
        assert _is_png(folder / link)
    assert sorted(p.name for p in folder.iterdir()) == sorted(["README.md"] + links)
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
    with pytest.raises(BackendUnavailable, match=r"pip install 'mcsim\[plot\]'"):
        plots.plot_cdf(mcsim.open_results(sweep_file))
    assert main(["plot", str(sweep_file), "--kind", "cdf", "-o", str(tmp_path / "x.png")]) == 2
    assert "matplotlib" in _one_error_line(capsys)
    assert main(["report", str(sweep_file), "-o", str(tmp_path / "r")]) == 2
    assert "matplotlib" in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []
