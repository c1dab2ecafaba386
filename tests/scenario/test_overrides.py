"""Overrides (--set, load_scenario's overrides): they win over the file, sweep axes included."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from mcsim.cli.main import main
from mcsim.errors import ScenarioError
from mcsim.scenario.config import load_scenario
from mcsim.scenario.overrides import parse_override

CAPACITY = Path(__file__).parents[2] / "scenarios" / "capacity-planning.toml"  # sweeps gpus, strategy, interval


def _dims(scenario) -> list[str]:
    return [axis.dim for axis in scenario.axes]


@pytest.mark.parametrize(
    "overrides",
    [
        ["checkpoint.strategy=sync"],
        [("checkpoint.strategy", "sync")],
        {"checkpoint.strategy": "sync"},
    ],
)
def test_scalar_override_replaces_a_swept_axis(overrides):
    scenario = load_scenario(CAPACITY, overrides)
    assert _dims(scenario) == ["gpus", "interval"]  # the strategy dimension is gone
    assert {cfg.checkpoint.strategy for cfg in scenario.configs} == {"sync"}
    stored = tomllib.loads(scenario.to_toml())
    assert stored["checkpoint"]["strategy"] == "sync" and "checkpoint.strategy" not in stored["sweep"]


def test_scalar_gpus_override_removes_the_gpus_axis():
    scenario = load_scenario(CAPACITY, ["parallelism.gpus=8192"])
    assert "gpus" not in _dims(scenario)
    assert {cfg.parallelism.gpus for cfg in scenario.configs} == {8192}


def test_list_override_replaces_the_values_of_a_swept_axis():
    scenario = load_scenario(CAPACITY, ["parallelism.gpus=[128, 256]"])
    assert _dims(scenario) == ["gpus", "strategy", "interval"]
    assert scenario.axes[0].values == (128, 256)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("checkpoint.strategy=[sync, async]", ["sync", "async"]),
        ('checkpoint.strategy=[sync, "in_memory"]', ["sync", "in_memory"]),
        ("checkpoint.interval=[young_daly, { minutes = 10 }]", ["young_daly", {"minutes": 10}]),
        ("parallelism.gpus=[128, 256,]", [128, 256]),
        (" parallelism . gpus = 64", 64),
    ],
)
def test_lists_of_bare_strings(text, expected):
    key, value = parse_override(text)
    assert value == expected and key in ("checkpoint.strategy", "checkpoint.interval", "parallelism.gpus")


def test_unquoted_list_of_strings_sweeps():
    scenario = load_scenario(CAPACITY, ["checkpoint.strategy=[sync, in_memory]"])
    axis = next(a for a in scenario.axes if a.dim == "strategy")
    assert axis.values == ("sync", "in_memory")


@pytest.mark.parametrize(
    "text,quoted",
    [
        ("checkpoint.strategy=[sync, in memory]", 'checkpoint.strategy=["sync", "in memory"]'),
        ("checkpoint.strategy=[sync, async", 'checkpoint.strategy=["sync", "async"]'),
    ],
)
def test_unreadable_list_shows_the_quoted_form(text, quoted):
    with pytest.raises(ScenarioError) as err:
        parse_override(text)
    assert err.value.source == "--set" and quoted in err.value.message


def test_typed_overrides_keep_their_type():
    scenario = load_scenario(
        CAPACITY,
        [
            ("compute.efficiency", np.float64(0.6)),
            ("parallelism.gpus", np.int64(256)),
            ("checkpoint.interval", np.str_("young_daly")),
            ("model.dropout", np.bool_(True)),
        ],
        runs=np.int64(7),
    )
    base = scenario.base
    assert base.compute.efficiency == 0.6 and type(base.compute.efficiency) is float
    assert {cfg.parallelism.gpus for cfg in scenario.configs} == {256}
    assert base.model.dropout is True and base.run.runs == 7
    stored = tomllib.loads(scenario.to_toml())  # numpy reprs would not parse
    assert stored["compute"]["efficiency"] == 0.6 and stored["parallelism"]["gpus"] == 256


def test_typed_array_override_is_a_sweep_axis():
    scenario = load_scenario(
        CAPACITY, {"parallelism.gpus": np.array([128, 512]), "checkpoint.strategy": ("sync", "async")}
    )
    assert scenario.axes[0].values == (128, 512) and type(scenario.axes[0].values[0]) is int
    assert next(a for a in scenario.axes if a.dim == "strategy").values == ("sync", "async")


def test_cli_set_on_a_swept_key_is_what_runs(tmp_path, capsys):
    out = tmp_path / "cp.nc"
    status = main(
        [
            "run",
            str(CAPACITY),
            "--set",
            "checkpoint.strategy=sync",
            "--set",
            "parallelism.gpus=128",
            "--set",
            "checkpoint.interval=[young_daly, { minutes = 30 }]",
            "--runs",
            "4",
            "--quiet",
            "--no-resume",
            "-o",
            str(out),
        ]
    )
    assert status == 0, capsys.readouterr().err
    with xr.open_dataset(out) as ds:
        assert dict(ds["wall_time"].sizes) == {"interval": 2, "run": 4}
        stored = tomllib.loads(ds.attrs["scenario_toml"])
    assert stored["checkpoint"]["strategy"] == "sync" and stored["parallelism"]["gpus"] == 128
    assert set(stored["sweep"]) == {"checkpoint.interval"}


def test_numpy_reprs_in_override_text_keep_their_type():
    # numpy 2 writes repr(np.float64(0.6)) as "np.float64(0.6)", and a list of numpy
    # integers as "[np.int64(128), np.int64(256)]": what f-strings put in an override.
    gpus = list(np.array([128, 256]))
    scenario = load_scenario(
        CAPACITY,
        [
            f"compute.efficiency={np.float64(0.6)!r}",
            f"parallelism.gpus={gpus}",
            f"checkpoint.strategy={np.str_('sync')!r}",
            f"model.dropout={np.bool_(True)!r}",
        ],
    )
    assert scenario.base.compute.efficiency == 0.6 and scenario.base.model.dropout is True
    assert scenario.axes[0].values == (128, 256) and {c.checkpoint.strategy for c in scenario.configs} == {"sync"}


def test_python_booleans_in_override_text_are_booleans_for_boolean_keys():
    # f"{key}={value!r}" writes a Python bool as True / False, and numpy < 2 writes np.True_ so (found at the
    # lowest numpy the package allows, 1.26): a boolean key reads them as TOML's true / false; a string key keeps
    # the text.
    scenario = load_scenario(CAPACITY, ["model.dropout=False", "name=True", "checkpoint.strategy=sync"])
    assert scenario.base.model.dropout is False and scenario.base.name == "True"
    swept = load_scenario(CAPACITY, ["model.dropout=[True, False]"])
    assert {axis.key: axis.values for axis in swept.axes}["model.dropout"] == (True, False)
