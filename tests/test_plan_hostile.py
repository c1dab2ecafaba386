"""mcsim plan under hostile use: absurd but legal values, files left behind, CF form, report wording.

One test per defect found by a hostile review (each failed before its fix).
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from mcsim.cli import main
from mcsim.netcdf import open_results
from mcsim.scenario import dumps_toml

# The small plan of tests/test_plan.py, with one GPU type and two sizes to stay fast.
PLAN = {
    "name": "hostile-plan",
    "model": {"params": 1.3e9, "layers": 24, "hidden": 2048, "heads": 16, "seq_len": 2048, "tokens": 2e10,
              "global_batch": 512},
    "hardware": {"gpus_per_node": 8},
    "failures": [{"name": "gpu", "scope": "gpu", "mtbf_hours": 2000.0, "recovery_minutes": 10.0}],
    "run": {"seed": 3, "mode": "fast"},
    "search": {"gpu_types": ["H100-SXM"], "gpus": [16, 64], "strategy": ["sync", "async"]},
    "plan": {"objective": "wall_time", "first_runs": 20, "max_runs": 100, "finalists": 3},
}


def _plan(**tables) -> dict:
    raw = copy.deepcopy(PLAN)
    for name, values in tables.items():
        raw.setdefault(name, {}).update(values)
    return raw


def _write(raw: dict, path: Path) -> Path:
    path.write_text(dumps_toml(raw))
    return path


def test_every_finalist_missing_the_deadline_leaves_no_resume_folder(tmp_path, capsys):
    # 1.5 h with probability 0.999999: the screen keeps the 64-GPU finalists (estimates ~1.49 h, within the
    # 5 % margin) but their simulated runs miss it, so every finalist is dropped: exit 1, and nothing may
    # be left beside the output (the selection finished; its pieces are of no further use).
    path = _write(_plan(constraints={"deadline_days": 1.5 / 24, "deadline_probability": 0.999999}),
                  tmp_path / "p.toml")
    assert main(["plan", str(path), "-o", str(tmp_path / "p.nc"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "every finalist misses a constraint when simulated (deadline)" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


def test_plan_file_passes_cf_checker_but_currency(tmp_path):
    # The CF-1.10 checker of tests/test_cf.py on a plan file: the float coordinate `quantile` carried
    # a _FillValue (forbidden on coordinate variables) and title/history (CF §2.6.2) were missing.
    from test_cf import _checker_messages, _not_currency

    raw = _plan(run={"draws": 4})
    raw["uncertain"] = {"compute.efficiency": {"dist": "uniform", "low": 0.35, "high": 0.6}}
    out = tmp_path / "p.nc"
    assert main(["plan", str(_write(raw, tmp_path / "p.toml")), "-o", str(out), "--quiet"]) == 0
    assert _not_currency(_checker_messages(out)) == []
    ds = open_results(out)
    assert ds.attrs["title"] and "hostile-plan" in ds.attrs["history"]


def test_screen_does_not_rank_candidates_on_a_wall_time_cut_at_max_wall_days(tmp_path, capsys):
    # run.max_wall_days = 0.1 (2.4 h): 16 H100 need about 6 h, 64 about 1.5 h. Capped at 2.4 h, a 16-GPU
    # run looked cheaper (16 x 2.4 GPU-hours against 64 x 1.5) and only 16-GPU candidates became finalists:
    # every simulated run was cut off and the "recommendation" never finishes. A candidate whose screen
    # wall time is beyond the simulation's horizon (by more than the margin) is ruled out with its reason.
    from mcsim.screen import CONSTRAINT_CODES

    raw = _plan(run={"max_wall_days": 0.1}, plan={"objective": "cost"})
    out = tmp_path / "p.nc"
    assert main(["plan", str(_write(raw, tmp_path / "p.toml")), "-o", str(out), "--quiet"]) == 0
    ds = open_results(out)
    best = int(np.flatnonzero(ds["finalist_candidate"].values == int(ds["recommended"]))[0])
    assert int(ds["gpus"][int(ds["recommended"])]) == 64 and bool(ds["decided"])
    assert np.all(ds["wall_time"].values[best, :int(ds["finalist_runs"][best])] < 0.1 * 24)  # all runs finished
    fits_16 = (ds["gpus"] == 16) & (ds["rejection"] != 5)
    assert int(fits_16.sum()) > 0
    assert np.all(ds["rejection"].values[fits_16.values] == CONSTRAINT_CODES["max_wall_days"])
    # No candidate within the horizon: exit 1, one line naming the key, no output.
    raw = _plan(run={"max_wall_days": 0.01})
    assert main(["plan", str(_write(raw, tmp_path / "q.toml")), "-o", str(tmp_path / "q.nc"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mcsim: no recommendation: {tmp_path / 'q.toml'}: run.max_wall_days: "
                                               "no candidate finishes within 0.01 days"), err
    assert not (tmp_path / "q.nc").exists()
