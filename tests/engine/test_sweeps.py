"""Sweeps at scale: backends, chunking, resume after kill -9, and random valid scenarios."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from builders import SMALL_SCENARIO, write_toml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mcsim
from mcsim.engine.resume import PieceStore
from mcsim.scenario.config import scenario_from_dict

SWEEP = copy.deepcopy(SMALL_SCENARIO)
SWEEP["run"].update(runs=120, mode="fast")
SWEEP["failures"][0]["mtbf_hours"] = 200.0
SWEEP["sweep"] = {
    "parallelism.gpus": [64, 128],
    "checkpoint.strategy": ["async", "in_memory"],
    "checkpoint.interval": [{"minutes": 5}, "young_daly"],
}


def _numeric_equal(a, b) -> None:
    for name in a.data_vars:
        if a[name].dtype.kind in "fiub":
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def test_local_dask_and_chunk_sizes_identical():
    scenario = scenario_from_dict(copy.deepcopy(SWEEP))
    local = mcsim.simulate(scenario, progress=False)
    chunked = mcsim.simulate(scenario, progress=False, chunk_runs=7)
    dask = mcsim.simulate(scenario, progress=False, workers=2, chunk_runs=50)
    assert local["wall_time"].dims == ("gpus", "strategy", "interval", "run")
    _numeric_equal(local, chunked)
    _numeric_equal(local, dask)


def test_resume_reuses_saved_pieces_and_drops_stale(tmp_path):
    scenario = scenario_from_dict(copy.deepcopy(SWEEP))
    store = PieceStore(tmp_path / "out.nc", scenario, 40)
    first = mcsim.simulate(scenario, progress=False, chunk_runs=40, store=store)
    saved = sorted(p.name for p in store.folder.iterdir())
    assert len(saved) == 8 * 3  # 8 configurations x 3 chunks of 40 runs
    messages = []
    again = mcsim.simulate(scenario, progress=False, chunk_runs=40, store=store, notify=messages.append)
    assert any("24 of 24 tasks already done" in m for m in messages)
    _numeric_equal(first, again)
    # A changed scenario has another key: the old pieces are stale and removed, not reused.
    changed = copy.deepcopy(SWEEP)
    changed["run"]["seed"] = 99
    other = PieceStore(tmp_path / "out.nc", scenario_from_dict(changed), 40)
    assert other.folder != store.folder
    assert other.remove_stale() == [store.folder] and not store.folder.exists()


def test_kill_9_then_rerun_is_identical_and_does_less(tmp_path):
    raw = copy.deepcopy(SWEEP)
    raw["run"].update(runs=800, mode="exact")  # slow enough (a few seconds) to be killed part-way
    scenario = write_toml(raw, tmp_path / "sweep.toml")
    out = tmp_path / "out.nc"
    cmd = [sys.executable, "-m", "mcsim", "run", str(scenario), "-o", str(out), "--chunk-runs", "20"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    parts = []
    while time.time() < deadline and proc.poll() is None:
        parts = list(tmp_path.glob(".out.nc.parts-*/*.npz"))
        if len(parts) >= 10:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be killed; make it slower"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists() and len(parts) >= 10
    rerun = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=True)
    resumed = [line for line in rerun.stderr.splitlines() if "resuming:" in line]
    assert resumed, rerun.stderr
    done, total = (int(x) for x in resumed[0].split("resuming: ")[1].split(" tasks")[0].split(" of "))
    assert 10 <= done < total == 8 * 40
    assert not list(tmp_path.glob(".out.nc.parts-*"))  # cleaned up after the final write
    straight = tmp_path / "straight.nc"
    subprocess.run(cmd[:-4] + ["-o", str(straight), "--no-resume", "--quiet"], cwd=tmp_path, check=True)
    _numeric_equal(mcsim.open_results(straight), mcsim.open_results(out))


# Random valid scenarios within documented bounds: every run finishes or is censored, and
# feasible configurations never produce NaN.
@st.composite
def scenarios(draw):
    gpn = draw(st.sampled_from([1, 4, 8]))
    nodes = draw(st.integers(1, 16))
    gpus = gpn * nodes
    tp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if gpus % d == 0]))
    pp = draw(st.sampled_from([d for d in (1, 2, 4) if gpus % (tp * d) == 0]))
    dp = gpus // (tp * pp)
    failures = [
        {
            "name": f"f{i}",
            "scope": draw(st.sampled_from(["gpu", "node", "cluster"])),
            "shape": draw(st.floats(0.3, 3.0)),
            "mtbf_hours": draw(st.floats(0.2, 1e5)),
            "recovery_minutes": draw(st.floats(0.0, 120.0)),
        }
        for i in range(draw(st.integers(0, 3)))
    ]
    return {
        "name": "random",
        "model": {
            "params": draw(st.floats(1e7, 1e9)),
            "layers": 8 * pp,
            "hidden": 512,
            "seq_len": 512,
            "tokens": draw(st.floats(1e6, 5e8)),
            "global_batch": dp * draw(st.integers(1, 8)),
            "recompute": draw(st.sampled_from(["none", "selective", "full"])),
        },
        "hardware": {
            "gpu": draw(st.sampled_from(["A100-80GB", "H100-SXM", "B200"])),
            "gpus_per_node": gpn,
            **({"spare_nodes": draw(st.integers(0, 4))} if draw(st.booleans()) else {}),
        },
        "parallelism": {"gpus": gpus, "tp": tp, "pp": pp},
        "stragglers": {
            "sigma": draw(st.floats(0.0, 0.5)),
            "job_sigma": draw(st.floats(0.0, 0.3)),
            "episode_rate_per_node_day": draw(st.floats(0.0, 5.0)),
        },
        "failures": failures,
        "checkpoint": {
            "strategy": draw(st.sampled_from(["sync", "async", "gockpt", "in_memory"])),
            "interval": draw(st.sampled_from(["young_daly", {"minutes": 1.0}, {"iterations": 3}])),
        },
        "run": {
            "runs": 8,
            "seed": draw(st.integers(0, 2**31)),
            "mode": draw(st.sampled_from(["fast", "exact"])),
            "max_wall_days": draw(st.floats(0.5, 30.0)),
        },
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_valid_scenarios_finish_without_nan(raw):
    ds = mcsim.simulate(scenario_from_dict(raw), progress=False)
    if not bool(ds["feasible"]):
        assert np.isnan(ds["wall_time"]).all()
        return
    max_wall_h = raw["run"]["max_wall_days"] * 24
    for name in ds.data_vars:
        if "run" in ds[name].dims and ds[name].dtype.kind == "f":
            assert not np.isnan(ds[name]).any(), name
    assert np.all(ds["wall_time"] <= max_wall_h * (1 + 1e-12))
    assert np.all(ds["completed"] | np.isclose(ds["wall_time"], max_wall_h) | (ds["n_failures"] >= 1_000_000))


def test_damaged_or_foreign_pieces_are_rerun_not_fatal(tmp_path):
    # Review finding: a zero-length piece (a rename that reached the disk before its data)
    # crashed every rerun; a piece of the wrong shape crashed at assembly.
    scenario = scenario_from_dict(copy.deepcopy(SWEEP))
    store = PieceStore(tmp_path / "out[1].nc", scenario, 60)
    reference = mcsim.simulate(scenario, progress=False, chunk_runs=60, store=store)
    pieces = sorted(store.folder.glob("*.npz"))
    pieces[0].write_bytes(b"")
    with open(pieces[1], "wb") as handle:
        np.save(handle, np.zeros((60, 3)))
    again = mcsim.simulate(scenario, progress=False, chunk_runs=60, store=store)
    _numeric_equal(reference, again)
    # Brackets in the output name are not glob patterns: another output's pieces survive.
    other = tmp_path / ".out1.nc.parts-0123456789abcdef"
    other.mkdir()
    assert store.remove_stale() == [] and other.exists()


def test_zero_workers_rejected():
    with pytest.raises(ValueError):
        mcsim.simulate(scenario_from_dict(copy.deepcopy(SWEEP)), progress=False, workers=0)
