"""Measured recoveries as a class's law (``failures.*.recovery_durations_minutes``;
docs/model.md §3 "Kinds of interruption and recovery laws"): how a scenario gives them, what is refused,
and the planner's first-order equivalent. The kernel's draws are checked against closed forms in
tests/kernels/test_interruptions.py and run by run against the slow twin (the ``*-kinds`` cases)."""

from __future__ import annotations

import copy

import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.cli.main import main
from mcsim.model.expected_runs import fixed_recovery, recovery_s
from mcsim.scenario.config import scenario_from_dict

MEASURED = [4.0, 9.0, 15.0, 120.0]  # minutes


def _raw(**fields) -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"] = [{"name": "gpu", "scope": "gpu", "mtbf_hours": 400.0, **fields}]
    return raw


def test_the_list_mean_is_the_recovery_minutes():
    fclass = scenario_from_dict(_raw(recovery_durations_minutes=MEASURED), "m.toml").base.failures[0]
    assert fclass.recovery_durations_minutes == tuple(MEASURED)
    assert fclass.recovery_minutes == pytest.approx(37.0, rel=1e-15)  # (4 + 9 + 15 + 120) / 4
    assert not fixed_recovery(fclass)


@pytest.mark.parametrize(
    "fields,key",
    [
        (dict(recovery_durations_minutes=MEASURED, recovery_minutes=20.0), "failures.gpu.recovery_minutes"),
        (dict(recovery_durations_minutes=MEASURED, recovery_sigma=0.5), "failures.gpu.recovery_sigma"),
        (dict(recovery_durations_minutes=[4.0, -1.0]), "failures.gpu.recovery_durations_minutes[1]"),
        (dict(recovery_durations_minutes=[4.0, "x"]), "failures.gpu.recovery_durations_minutes[1]"),
        (dict(recovery_durations_minutes=12.0), "failures.gpu.recovery_durations_minutes"),
        (dict(recovery_durations_minutes=[1.0] * 100_001), "failures.gpu.recovery_durations_minutes"),
    ],
)
def test_refused_with_one_line(fields, key):
    with pytest.raises(mcsim.ScenarioError, match=key.replace("[", r"\[").replace("]", r"\]")):
        scenario_from_dict(_raw(**fields), "m.toml")


def test_uncertain_recovery_of_a_measured_class_is_refused():
    raw = _raw(recovery_durations_minutes=MEASURED)
    raw["uncertain"] = {"failures.gpu.recovery_minutes": {"dist": "uniform", "low": 5, "high": 50}}
    raw["run"]["draws"] = 4
    with pytest.raises(mcsim.ScenarioError, match="its recoveries are that list"):
        scenario_from_dict(raw, "m.toml")


def test_cli_refuses_a_swept_list(tmp_path, capsys):
    path = tmp_path / "m.toml"
    text = mcsim.reference_scenario_path().read_text()
    path.write_text(text + '\n[sweep]\n"failures.faulty_gpu.recovery_durations_minutes" = [[1, 2], [3, 4]]\n')
    assert main(["run", str(path), "-o", str(tmp_path / "o.nc"), "--runs", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "recovery_durations_minutes" in err[0], err
    assert not (tmp_path / "o.nc").exists()


def test_screen_sees_the_list_mean():
    # A failure during a recovery does not cut it short, so the recovery is an M/G/inf busy period whose
    # mean depends on the law's mean only (Takacs 1962; tests/kernels/test_interruptions.py checks the kernel
    # against it): the screen takes the list's mean, 37 min here, by hand.
    fclass = scenario_from_dict(_raw(recovery_durations_minutes=MEASURED), "m.toml").base.failures[0]
    assert recovery_s(fclass) == pytest.approx(sum(MEASURED) / len(MEASURED) * 60.0, rel=1e-12)
    assert sum(MEASURED) / len(MEASURED) == 37.0
