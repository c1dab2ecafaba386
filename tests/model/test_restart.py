"""The cost of a restart from its parts (docs/model.md §3 "The cost of a restart").

Expected values are hand computations from the model's statement (re-scheduling + process start +
communicator set-up per GPU + warm-up iterations' extra time), not from the code under test; the
kernel's handling of the sum is checked against a closed form in tests/kernels/test_interruptions.py
and output by output against the slow twin (the ``*-kinds`` cases of tests/kernels/test_twin_exact.py
and tests/kernels/test_twin_fast.py).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.cli.main import main
from mcsim.errors import ScenarioError
from mcsim.model.checkpointing import checkpoint_plan, failure_classes
from mcsim.model.expected_runs import abandoned_restarts_s
from mcsim.model.preparation import run_params
from mcsim.model.restart import restart_overhead_s, restart_parts
from mcsim.model.workload import workload
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.interruptions import RestartSection

PARTS = dict(
    from_parts=True,
    reschedule_s=40.0,
    reschedule_ms_per_gpu=2.0,
    process_start_s=200.0,
    communicator_ms_per_gpu=3.0,
    warmup_iterations=10,
    warmup_throughput=0.25,
)


def test_parts_by_hand():
    # 40 + 2 ms x 4,096 GPUs (8.192 s) + 200 + 3 ms x 4,096 GPUs (12.288 s) + 10 iterations x 2 s x
    # (1 / 0.25 - 1) (60 s) = 320.48 s.
    parts = restart_parts(RestartSection(**PARTS), 4096, 2.0)
    assert parts.reschedule_s == pytest.approx(48.192, rel=1e-15) and parts.process_start_s == 200.0
    assert parts.communicator_s == pytest.approx(12.288, rel=1e-15)
    assert parts.warmup_s == pytest.approx(60.0, rel=1e-15)
    assert restart_overhead_s(RestartSection(**PARTS), 4096, 2.0) == pytest.approx(320.48, rel=1e-15)


def test_parts_vectorised_over_candidates():
    # The planner's screen passes candidate arrays: the same numbers element by element.
    gpus, iteration_s = np.array([1024, 4096, 16384]), np.array([1.0, 2.0, 4.0])
    total = restart_parts(RestartSection(**PARTS), gpus, iteration_s).total_s
    expected = [
        restart_overhead_s(RestartSection(**PARTS), int(g), float(t)) for g, t in zip(gpus, iteration_s, strict=True)
    ]
    np.testing.assert_array_equal(total, expected)
    # 3,072 GPUs more (2 + 3 ms each: 15.36 s) and 1 s longer iterations (10 x 1 s x 3: 30 s).
    assert total[1] - total[0] == pytest.approx(45.36, rel=1e-12)


def test_parts_off_by_default_add_nothing():
    # from_parts = false (the default): the class's recovery_minutes is the whole restart.
    assert restart_overhead_s(RestartSection(), 16384, 5.0) == 0.0
    assert not RestartSection().from_parts


def _scenario(**restart) -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"][0]["mtbf_hours"] = 40.0  # 64 GPUs: a failure every ~0.6 h of a ~1.1 h run
    raw["run"]["runs"] = 300
    if restart:
        raw["restart"] = restart
    return raw


def test_scenario_restart_outputs():
    ds = mcsim.simulate(scenario_from_dict(_scenario(**PARTS), "test.toml"), progress=False)
    cfg = scenario_from_dict(_scenario(**PARTS), "test.toml").base
    iteration_s = workload(cfg).iteration_time_s
    expected = 40.0 + 2e-3 * 64 + 200.0 + 3e-3 * 64 + 10 * iteration_s * 3.0
    assert float(ds["restart_overhead"]) == pytest.approx(expected, rel=1e-12)
    assert ds["restart_overhead"].attrs["units"] == "s" and ds["restart_time"].attrs["units"] == "h"
    restart_h, recovery_h, failures = (ds[v].values for v in ("restart_time", "recovery_time", "n_failures"))
    assert (restart_h <= recovery_h + 1e-12).all()
    # A restart cut by a failure spends less than its whole; none spends more.
    assert (restart_h * 3600.0 <= failures * expected * (1 + 1e-12)).all()
    assert restart_h.max() > 0.0 and (restart_h[failures > 0] > 0).all()


def test_parts_off_is_the_run_without_the_table():
    # Bit-identical: the table with from_parts = false changes nothing but adds zero outputs; the parts
    # themselves are then refused (issue 42: they were ignored without a word).
    with pytest.raises(ScenarioError, match=r"restart\.\w+: used only with restart.from_parts = true"):
        scenario_from_dict(_scenario(**dict(PARTS, from_parts=False)), "t.toml")
    off = mcsim.simulate(scenario_from_dict(_scenario(from_parts=False), "t.toml"), progress=False)
    none = mcsim.simulate(scenario_from_dict(_scenario(), "t.toml"), progress=False)
    for name in ("wall_time", "energy", "recovery_time", "n_failures"):
        np.testing.assert_array_equal(off[name].values, none[name].values)
    assert float(none["restart_time"].max()) == 0.0 and float(none["restart_overhead"]) == 0.0


def test_parts_lengthen_the_runs():
    # The same streams, a longer recovery: every run with a failure takes longer.
    on = mcsim.simulate(scenario_from_dict(_scenario(**PARTS), "t.toml"), progress=False)
    off = mcsim.simulate(scenario_from_dict(_scenario(), "t.toml"), progress=False)
    assert float(on["wall_time"].mean()) > float(off["wall_time"].mean())
    assert float(on["recovery_time"].mean()) > float(off["recovery_time"].mean())


@pytest.mark.parametrize(
    "key,value,expected",
    [
        ("warmup_throughput", "0", "restart.warmup_throughput"),
        ("warmup_throughput", "1.5", "restart.warmup_throughput"),
        ("communicator_ms_per_gpu", "-1", "restart.communicator_ms_per_gpu"),
        ("warmup_iterations", "2.5", "restart.warmup_iterations"),
        ("from_parts", '"yes"', "restart.from_parts"),
    ],
)
def test_bad_restart_values_are_one_line(tmp_path, capsys, key, value, expected):
    path = tmp_path / "bad.toml"
    text = mcsim.reference_scenario_path().read_text()
    path.write_text(text + f"\n[restart]\n{key} = {value}\n")
    out = tmp_path / "out.nc"
    assert main(["run", str(path), "-o", str(out), "--runs", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and "bad.toml" in err[0], err
    assert not out.exists()


def test_defaults_reproduce_the_published_restart_times():
    # ByteRobust (arXiv 2509.16293) Table 7: a requeued job restarted in 454, 545, 635 and 768 s at
    # 128, 256, 512 and 1,024 machines of 16 GPUs; the defaults (its linear fit, docs/model.md §8) are
    # within 30 s of each, and grow with the job as the measurements do.
    defaults = RestartSection(from_parts=True)
    for gpus, measured in ((2048, 454.0), (4096, 545.0), (8192, 635.0), (16384, 768.0)):
        assert abs(restart_overhead_s(defaults, gpus, 1.0) - measured) < 30.0, gpus
    assert RestartSection().warmup_iterations == 0  # no published per-iteration warm-up figure


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["failures.faulty_gpu.bad_replacement_share=0.2"], "failures.faulty_gpu.bad_replacement_hours"),
        (["failures.faulty_gpu.bad_replacement_hours=2"], "failures.faulty_gpu.bad_replacement_share"),
        (["failures.faulty_gpu.bad_replacement_share=1", "failures.faulty_gpu.bad_replacement_hours=2"], "share"),
        (["restart.warmup_throughput=1e-300"], "restart.warmup_throughput"),
        (["hardware.failure_rate_factor=0"], "hardware.failure_rate_factor"),
    ],
)
def test_bad_new_keys_are_one_line(tmp_path, capsys, overrides, key):
    # Bad replacements need both keys (a share below 1 and a life); a warm-up at 1e-300 of the
    # throughput would make every restart endless; a fleet with no failures is factor 0, refused.
    out = tmp_path / "out.nc"
    args = ["run", "llama3-405b", "-o", str(out), "--runs", "5"]
    for item in overrides:
        args += ["--set", item]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0], err
    assert not out.exists()


def test_bad_replacements_only_where_hardware_is_replaced(tmp_path, capsys):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["failures"].append(
        {
            "name": "spike",
            "scope": "gpu",
            "kind": "instability",
            "mtbf_hours": 1e5,
            "bad_replacement_share": 0.1,
            "bad_replacement_hours": 1.0,
        }
    )
    with pytest.raises(mcsim.ScenarioError, match="failures.spike.bad_replacement_share.*kind 'instability'"):
        scenario_from_dict(raw, "t.toml")


def test_in_place_parts_by_hand():
    # An in-place restart (hot spare, the same allocation) skips the re-scheduling: 200 + 12.288 + 60 =
    # 272.288 s of the 320.48 s above; the difference is the re-scheduling, 40 + 8.192 = 48.192 s.
    parts = restart_parts(RestartSection(**PARTS), 4096, 2.0)
    assert parts.in_place_s == pytest.approx(272.288, rel=1e-15)
    assert parts.total_s - parts.in_place_s == pytest.approx(48.192, rel=1e-12)


def test_in_place_defaults_reproduce_the_published_hot_updates():
    # ByteRobust (arXiv 2509.16293) Table 7: an in-place hot update took 46, 51, 54 and 65 s at 2,048 to
    # 16,384 GPUs; the defaults' in-place parts (44 s + 1.26 ms per GPU) are within 2 s of each.
    defaults = RestartSection(from_parts=True)
    for gpus, measured in ((2048, 46.0), (4096, 51.0), (8192, 54.0), (16384, 65.0)):
        assert abs(float(restart_parts(defaults, gpus, 1.0).in_place_s) - measured) < 2.0, gpus


def test_restart_paths_and_abandoned_restarts_reach_the_kernel():
    # The scenario's keys become the kernel's parameters: the in-place parts, each class's requeue share,
    # the abandoned restarts' probability and mean loss in seconds.
    raw = _scenario(**PARTS, abandoned_share=0.1, abandoned_minutes=2.0, abandoned_sigma=0.3)
    raw["failures"][0]["requeue_share"] = 0.25
    cfg = scenario_from_dict(raw, "t.toml").base
    wl = workload(cfg)
    params = run_params(cfg, wl, checkpoint_plan(cfg, wl), "exact")
    expected = 200.0 + 3e-3 * 64 + 10 * wl.iteration_time_s * 3.0
    assert params.restart_in_place_s == pytest.approx(expected, rel=1e-12)
    assert params.restart_s - params.restart_in_place_s == pytest.approx(40.0 + 2e-3 * 64, rel=1e-12)
    assert (params.abandon_share, params.abandon_s, params.abandon_sigma) == (0.1, 120.0, 0.3)
    assert failure_classes(cfg).requeue_share.tolist() == [0.25]
    ds = mcsim.simulate(scenario_from_dict(raw, "t.toml"), progress=False)
    assert ds["abandoned_restart_time"].attrs["units"] == "h"
    abandoned_h, recovery_h = ds["abandoned_restart_time"].values, ds["recovery_time"].values
    assert (abandoned_h <= recovery_h + 1e-12).all() and abandoned_h.max() > 0.0


def test_abandoned_restarts_in_the_screen_by_hand():
    # q / (1 - q) abandoned attempts a restart (geometric), each 30 min lost plus the parts and the load
    # again: q = 0.2, 100 s of parts and load: 0.25 x (1800 + 100) = 475 s.
    cfg = scenario_from_dict(_scenario(abandoned_share=0.2, abandoned_minutes=30.0), "t.toml").base
    assert abandoned_restarts_s(cfg, 100.0) == pytest.approx(475.0, rel=1e-12)
    assert abandoned_restarts_s(scenario_from_dict(_scenario(), "t.toml").base, 100.0) == 0.0
