"""Reports of files anyone may have written (hostile findings of issue 42): text never becomes Markdown or HTML,
and a damaged plan file is refused. Each failed before its fix."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
from builders import SMALL_SCENARIO
from plans import hostile_plan, planned

import mcsim
from mcsim.cli.main import main
from mcsim.io.netcdf import open_results, write_results
from mcsim.report.markdown import inert
from mcsim.report.plan.files import write_plan_report
from mcsim.report.result_report import report_markdown
from mcsim.scenario.config import scenario_from_dict

HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(1)> [link](http://evil)"


def _raw_markup(markdown: str, headings: tuple[str, ...]) -> list[str]:
    """Lines of ``markdown`` with markup a hostile text could have made: an unescaped ``<``, a link or a
    heading that is not one of ``headings`` (the report's own, by their start)."""
    found = []
    for line in markdown.splitlines():
        text = line.replace("[`recommended.toml`](recommended.toml)", "")  # the plan report's own link
        text = re.sub(r"`[^`]*`", "", text)  # code spans are shown as they are
        if re.search(r"(?<!\\)<|(?<![!\\])\[[^\]]*\]\(", text):  # an HTML tag or a link
            found.append(line)
        if line.startswith("#") and not line.startswith(headings):
            found.append(line)
    return found


def test_inert_keeps_plain_text_and_escapes_the_rest():
    assert inert("H100-SXM x 64, tp 8 pp 4 (e.g. #0), 0.5 %") == "H100-SXM x 64, tp 8 pp 4 (e.g. #0), 0.5 %"
    assert inert("# heading") == "\\# heading" and inert("a\n# b") == "a \\# b"
    assert "<" not in inert(HOSTILE).replace("\\<", "")


def test_the_run_report_shows_hostile_names_coordinates_and_overrides_inert():
    # Found: sweep values and text of a result file reached the run report's Markdown raw.
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=6, mode="fast")
    raw["sweep"] = {"checkpoint.strategy": ["sync", "async"]}
    ds = mcsim.simulate(scenario_from_dict(raw), progress=False)
    ds = ds.assign_coords(strategy=[HOSTILE, "## fake heading"])
    ds.attrs.update(scenario_name=HOSTILE, scenario_source=HOSTILE, scenario_overrides=f"name = '{HOSTILE}'")
    text = report_markdown(ds, [])
    assert _raw_markup(text, ("# mcsim report: ", "## ", "### ")) == []


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    return planned(hostile_plan(), tmp_path_factory.mktemp("plan"))


def test_the_plan_report_shows_hostile_plan_strings_inert(plan_file, tmp_path):
    # Found: the plan's name, reasons and GPU types reached the plan report's Markdown raw.
    ds = open_results(plan_file)
    ds.attrs.update(scenario_name=HOSTILE + "\n# Fake", selection_reason=HOSTILE)
    ds["rejection_reason"] = ds["rejection_reason"].copy(data=np.full(ds["rejection_reason"].shape, HOSTILE))
    crafted = write_results(ds, tmp_path / "crafted.nc")
    write_plan_report(crafted, tmp_path / "rep")
    text = (tmp_path / "rep" / "README.md").read_text()
    assert "\\<script\\>" in text
    assert _raw_markup(text, ("# Plan ", "## ", "### ")) == []
    recommended = (tmp_path / "rep" / "recommended.toml").read_text()
    assert all(line.startswith("#") or not line.startswith("# ") for line in recommended.splitlines())


@pytest.mark.parametrize(
    "damage, named",
    [
        (lambda ds: ds.assign(pcs=np.nan), "pcs"),
        (lambda ds: ds.assign_attrs(indifference=7.5), "indifference"),
        (lambda ds: ds.assign(finalist_half_width=ds["finalist_half_width"] * 0 - 5), "finalist_half_width"),
        (lambda ds: ds.assign(finalist_runs=ds["finalist_runs"] * 0), "finalist_runs"),
    ],
    ids=["pcs_nan", "indifference_7.5", "negative_half_width", "no_runs"],
)
def test_a_damaged_plan_file_is_refused_not_reported(damage, named, plan_file, tmp_path):
    # Found: the report of a damaged plan file printed `P(CS) >= nan`, `>= 7.5`, `± -5`, "mean over 0 runs".
    crafted = write_results(damage(open_results(plan_file)), tmp_path / "damaged.nc")
    with pytest.raises(ValueError, match=f"^{named}: expected .* the file is damaged"):
        write_plan_report(crafted, tmp_path / "rep")
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("command", [["plot", "--kind", "breakdown"], ["summary"]])
def test_a_result_whose_sweep_coordinate_repeats_a_value_is_one_line(command, tmp_path, capsys):
    # Found: `mcsim plot --kind breakdown` of a sweep with a repeated coordinate value ended in TypeError.
    pytest.importorskip("matplotlib")
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=4, mode="fast")
    raw["sweep"] = {"parallelism.gpus": [32, 64]}
    ds = mcsim.simulate(scenario_from_dict(raw), progress=False).assign_coords(gpus=[32, 32])
    crafted = write_results(ds, tmp_path / "repeated.nc")
    out = ["-o", str(tmp_path / "b.png")] if command[0] == "plot" else []
    assert main([command[0], str(crafted), *command[1:], *out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "coordinate gpus repeats the value 32" in err and "Traceback" not in err
    assert not (tmp_path / "b.png").exists()
