"""Shipped scenarios from anywhere: by name, listed, copied to edit; `mcsim plan --set`;
a plan's [uncertain] without run.draws; `mcsim report PLAN.nc` writes the recommendation as a scenario that
`mcsim run` runs."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import numpy as np
import pytest
from builders import write_toml
from plans import SMALL_PLAN

import mcsim
from mcsim.cli.main import main
from mcsim.errors import ScenarioError
from mcsim.io.netcdf import open_results
from mcsim.planning.plan_file import DEFAULT_PLAN_DRAWS, load_plan, plan_from_dict
from mcsim.scenario.shipped import resolve_scenario, shipped_scenarios, shipped_scenarios_folder

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "scenarios").glob("*.toml"))

UNCERTAIN = {"compute.efficiency": {"dist": "uniform", "low": 0.35, "high": 0.6}}


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcsim: error: ") and "Traceback" not in err, err
    return lines[0]


# --------------------------------------------------------------------------- names


def test_every_shipped_file_is_listed_with_its_kind_and_description(capsys):
    # The tree under test (editable or source) or the installed package data (CI tests an installed
    # copy): either way the same files as the tree's scenarios/, byte for byte.
    folder = shipped_scenarios_folder()
    assert sorted(p.name for p in folder.glob("*.toml")) == [p.name for p in SHIPPED]
    for path in SHIPPED:
        assert (folder / path.name).read_bytes() == path.read_bytes(), path.name
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(SHIPPED) >= 10
    for path, line in zip(SHIPPED, out, strict=True):
        raw = tomllib.loads(path.read_text())
        kind = "plan" if "search" in raw else "scenario"
        assert line.split()[:2] == [path.stem, kind], line
        assert line.endswith(raw["description"]), line
    assert main(["scenarios", "list"]) == 0 and capsys.readouterr().out.splitlines() == out


def test_run_a_shipped_scenario_by_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no scenarios/ here
    assert main(["run", "dvfs-opt350m-1gpu", "--runs", "3", "--set", "compute.freq_mhz=1410", "--quiet"]) == 0
    ds = open_results(tmp_path / "results" / "dvfs-opt350m-1gpu.nc")
    assert ds.attrs["scenario_name"] == "dvfs-opt350m-1gpu" and ds.sizes["run"] == 3
    shipped = tomllib.loads((ROOT / "scenarios" / "dvfs-opt350m-1gpu.toml").read_text())
    assert tomllib.loads(ds.attrs["scenario_toml"])["model"] == shipped["model"]
    assert mcsim.load_scenario("capacity-planning.toml").name == "capacity-planning"  # the suffix may be given


def test_a_file_of_that_name_wins_over_the_shipped_scenario(tmp_path, monkeypatch, small_raw):
    monkeypatch.chdir(tmp_path)
    mine = {**small_raw, "name": "my-edit"}
    write_toml(mine, tmp_path / "capacity-planning.toml")
    assert mcsim.load_scenario("capacity-planning.toml").name == "my-edit"
    assert mcsim.load_scenario("capacity-planning").name == "my-edit"  # NAME.toml here: the copy being edited
    (tmp_path / "capacity-planning.toml").unlink()
    write_toml(mine, tmp_path / "capacity-planning")
    assert mcsim.load_scenario("capacity-planning").name == "my-edit"
    (tmp_path / "capacity-planning").unlink()
    assert mcsim.load_scenario("capacity-planning").name == "capacity-planning"  # now the shipped one
    assert resolve_scenario("sub/capacity-planning") == Path("sub/capacity-planning")  # a path is never a name


@pytest.mark.parametrize("command", [["run", "no-such-scenario"], ["plan", "no-such-plan.toml"]])
def test_an_unknown_name_is_one_line_listing_the_shipped_names(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert command[1] in line and "not the name of a shipped scenario" in line
    assert all(entry.name in line for entry in shipped_scenarios())
    assert list(tmp_path.iterdir()) == []  # no results/ folder, no file


def test_a_missing_path_still_says_it_cannot_be_read(tmp_path, capsys):
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "missing.toml" in line and "cannot read" in line and "shipped" not in line


# --------------------------------------------------------------------------- copy


def test_copy_writes_the_shipped_file_and_never_overwrites(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shipped = ROOT / "scenarios" / "capacity-planning.toml"
    assert main(["scenarios", "copy", "capacity-planning"]) == 0
    copied = tmp_path / "capacity-planning.toml"
    assert copied.read_bytes() == shipped.read_bytes()  # the comments and sources too
    assert "mcsim run capacity-planning.toml" in capsys.readouterr().out
    copied.write_text(copied.read_text().replace('name = "capacity-planning"', 'name = "edited"'))
    edited = copied.read_bytes()
    assert main(["scenarios", "copy", "capacity-planning"]) == 2  # exists: refused, untouched
    assert "exists; refusing to overwrite" in _one_error_line(capsys.readouterr().err)
    assert copied.read_bytes() == edited
    assert mcsim.load_scenario("capacity-planning").name == "edited"  # and the edit is what runs by name
    (tmp_path / "mine").mkdir()
    assert main(["scenarios", "copy", "plan-llama3-70b.toml", "mine"]) == 0  # into a folder
    assert (tmp_path / "mine" / "plan-llama3-70b.toml").read_bytes() == (
        ROOT / "scenarios" / "plan-llama3-70b.toml"
    ).read_bytes()
    assert "mcsim plan" in capsys.readouterr().out
    assert main(["scenarios", "copy", "llama3-405b", "other.toml"]) == 0
    assert load_plan(tmp_path / "mine" / "plan-llama3-70b.toml").scenario.name == "plan-llama3-70b"
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["scenarios", "copy", "nope", "x.toml"]) == 2
    assert "capacity-planning" in _one_error_line(capsys.readouterr().err)
    (tmp_path / "link.toml").symlink_to(tmp_path / "dangling")
    assert main(["scenarios", "copy", "llama3-405b", "link.toml"]) == 2  # not through a link either
    _one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "link.toml"])
    assert not (tmp_path / "dangling").exists()


# --------------------------------------------------------------------------- plan --set and [uncertain]


def test_plan_set_overrides_scenario_and_plan_keys(tmp_path):
    path = write_toml(SMALL_PLAN, tmp_path / "p.toml")
    plan = load_plan(
        path,
        [
            "search.gpus=[16, 32]",
            "search.strategy=[async]",
            "constraints.deadline_days=30",
            "plan.objective=cost",
            "compute.efficiency=0.4",
            "failures.gpu.mtbf_hours=5000",
        ],
    )
    assert plan.search.gpus == (16, 32) and plan.search.strategy == ("async",)
    assert plan.constraints.deadline_days == 30 and plan.objective == "cost"
    assert plan.scenario.base.compute.efficiency == 0.4 and plan.scenario.base.failures[0].mtbf_hours == 5000
    assert load_plan(path).search.gpus == (16, 32, 64)  # the file is unchanged
    for override, key in (
        ("parallelism.gpus=[16, 32]", "parallelism.gpus"),  # a plan has no sweep
        ("search=1", "search"),
        ("nosuch.key=1", "nosuch.key"),
    ):
        with pytest.raises(ScenarioError) as err:
            load_plan(path, [override])
        assert err.value.source == "--set" and err.value.key == key, str(err.value)
    with pytest.raises(ScenarioError, match=r"search\.gpus"):  # checked by the plan's validator
        load_plan(path, ["search.gpus=[0]"])


def test_plan_set_on_the_command_line_bad_value_is_one_line_and_no_output(tmp_path, capsys):
    path = write_toml(SMALL_PLAN, tmp_path / "p.toml")
    out = tmp_path / "p.nc"
    assert main(["plan", str(path), "--set", "plan.finalists=1", "-o", str(out), "--quiet"]) == 2
    assert "plan.finalists" in _one_error_line(capsys.readouterr().err)
    assert main(["plan", str(path), "--set", "parallelism.gpus=[16,32]", "-o", str(out), "--quiet"]) == 2
    assert "--set: parallelism.gpus: a plan has no sweep" in _one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


def test_a_plans_uncertain_table_needs_no_draws():
    raw = {**copy.deepcopy(SMALL_PLAN), "uncertain": UNCERTAIN}
    assert plan_from_dict(raw).scenario.run.draws == DEFAULT_PLAN_DRAWS
    raw["run"]["draws"] = 8
    assert plan_from_dict(raw).scenario.run.draws == 8  # a given value stays
    raw["run"].pop("draws")
    raw["run"]["design"] = "saltelli"  # DEFAULT_PLAN_DRAWS base points of 1 input: N x (1 + 2) draws
    assert plan_from_dict(raw).scenario.run.draws == DEFAULT_PLAN_DRAWS * 3
    scenario = {k: v for k, v in raw.items() if k not in ("search", "plan")}
    scenario.update(parallelism={"gpus": 16}, run={"seed": 3})
    with pytest.raises(ScenarioError, match="run.draws"):  # a scenario to simulate still says how many
        mcsim.scenario.config.scenario_from_dict(scenario)


# --------------------------------------------------------------------------- the recommendation


def test_report_writes_the_recommendation_as_a_scenario_mcsim_run_runs(tmp_path, capsys):
    """The recommendation file runs, and its runs repeat the plan's simulated runs of the recommended
    configuration (run r draws from the streams of (seed, r) in both), bit for bit."""
    raw = {**copy.deepcopy(SMALL_PLAN), "uncertain": UNCERTAIN}  # with [uncertain] and no run.draws
    plan_nc, report = tmp_path / "p.nc", tmp_path / "rep"
    assert main(["plan", str(write_toml(raw, tmp_path / "p.toml")), "-o", str(plan_nc), "--quiet"]) == 0
    assert main(["report", str(plan_nc), "-o", str(report)]) == 0
    assert "recommended.toml" in capsys.readouterr().out
    recommended = report / "recommended.toml"
    assert "recommended.toml" in (report / "README.md").read_text()
    ds_plan = open_results(plan_nc)
    index = int(ds_plan["recommended"])
    best = int(np.flatnonzero(ds_plan["finalist_candidate"].values == index)[0])
    scenario = mcsim.load_scenario(recommended)
    c = ds_plan.isel(candidate=index)
    cfg = scenario.base
    assert not scenario.axes and cfg.hardware.gpu == c["gpu_type"].item()
    assert (cfg.parallelism.gpus, cfg.parallelism.tp, cfg.parallelism.pp, cfg.parallelism.microbatch) == (
        int(c["gpus"]),
        int(c["tp"]),
        int(c["pp"]),
        int(c["microbatch"]),
    )
    assert (cfg.checkpoint.strategy, cfg.checkpoint.interval.label) == (c["strategy"].item(), c["interval"].item())
    assert scenario.run.draws == DEFAULT_PLAN_DRAWS and [u.key for u in scenario.uncertain] == ["compute.efficiency"]
    out = tmp_path / "rec.nc"
    # Without the draws (the plan simulated the point values): the same runs as the plan's.
    plain = {k: v for k, v in tomllib.loads(recommended.read_text()).items() if k != "uncertain"}
    plain["run"].pop("draws")
    assert main(["run", str(write_toml(plain, tmp_path / "plain.toml")), "--runs", "4", "-o", str(out), "--quiet"]) == 0
    np.testing.assert_array_equal(open_results(out)["wall_time"].values, ds_plan["wall_time"].values[best, :4])
    # And the file as written runs as it is, over its draws.
    assert main(["run", str(recommended), "--runs", "2", "-o", str(tmp_path / "drawn.nc"), "--quiet"]) == 0
    assert open_results(tmp_path / "drawn.nc").sizes["draw"] == DEFAULT_PLAN_DRAWS


def test_report_refuses_a_recommendation_that_is_not_a_candidate(tmp_path, capsys):
    plan_nc = tmp_path / "p.nc"
    assert main(["plan", str(write_toml(SMALL_PLAN, tmp_path / "p.toml")), "-o", str(plan_nc), "--quiet"]) == 0
    from mcsim.report.plan.files import recommended_toml

    ds = open_results(plan_nc).load()
    ds["recommended"] = ds["recommended"] * 0 + ds.sizes["candidate"]
    with pytest.raises(ValueError, match="not a candidate index"):
        recommended_toml(ds)
