"""A part of a sharded sweep holds only its share (issue 42, item 9: "a shard of a huge sweep is sized as
the whole sweep, so sharding cannot split a sweep too big for one machine").

Each test failed before the change: a part had the whole sweep's shape (the other parts' runs NaN), the
memory check at load counted the whole sweep, and combine loaded every part whole. The references are
independent of the code under test: the flat C-order index written out here, the unsharded run, and the
estimates' closed forms.
"""

from __future__ import annotations

import copy
import tracemalloc

import numpy as np
import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.cli.main import main
from mcsim.engine.shards import combine_parts
from mcsim.errors import ScenarioError
from mcsim.io.netcdf import loaded_bytes, open_results, write_results
from mcsim.io.variables import PER_CONFIG, PER_RUN
from mcsim.kernels.interface import N_OUT
from mcsim.scenario.config import load_scenario, scenario_from_dict
from mcsim.scenario.limits import combine_memory_estimate_bytes, limits, memory_estimate_bytes
from mcsim.scenario.shard import Shard
from mcsim.scenario.toml import dumps_toml

EFFICIENCIES = [0.4, 0.45, 0.5, 0.55]
GPUS = [512, 1024]


def _raw(runs: int = 6) -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=runs, mode="fast")
    raw["sweep"] = {"compute.efficiency": EFFICIENCIES, "parallelism.gpus": GPUS}  # 4 x 2, C order
    return raw


def _same_numbers(expected, actual) -> None:
    assert set(actual.data_vars) == set(expected.data_vars)
    for name in expected.variables:  # bit for bit, NaN where NaN
        np.testing.assert_array_equal(actual[name].values, expected[name].values, err_msg=name)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcsim: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def parts_of_four(tmp_path_factory):
    """The 4 parts of the 4 x 2 sweep written to files, and the unsharded run."""
    folder = tmp_path_factory.mktemp("four")
    scenario = scenario_from_dict(_raw())
    paths = [folder / f"p{i}.nc" for i in range(4)]
    for i, path in enumerate(paths):
        write_results(mcsim.simulate(scenario, progress=False, shard=Shard(i, 4)), path)
    return paths, mcsim.simulate(scenario, progress=False)


def test_a_part_holds_only_its_share(parts_of_four):
    paths, whole = parts_of_four
    for i, path in enumerate(paths):
        part = open_results(path)
        # Flat index over (efficiency, gpus) in C order: gpus fastest. Part i holds i and i + 4.
        held = [i, i + 4]
        np.testing.assert_array_equal(part["configuration"].values, held)
        assert part["configuration"].attrs["units"] == "1" and "flat index" in part["configuration"].attrs["long_name"]
        for name in PER_RUN:
            assert part[name].dims == ("configuration", "run") and part[name].shape == (2, 6), name
        for name in PER_CONFIG:
            assert part[name].dims == ("configuration",), name
        # Each held configuration's runs are the unsharded run's, at (efficiency, gpus) = unravel(flat).
        for row, flat in enumerate(held):
            e, g = np.unravel_index(flat, (len(EFFICIENCIES), len(GPUS)))
            np.testing.assert_array_equal(part["cost"].values[row], whole["cost"].values[e, g])
        # The sweep's coordinates are kept whole, with their attributes, for the combination.
        np.testing.assert_array_equal(part["efficiency"].values, EFFICIENCIES)
        np.testing.assert_array_equal(part["gpus"].values, GPUS)
        assert part["gpus"].attrs == whole["gpus"].attrs and part["efficiency"].attrs == whole["efficiency"].attrs
        assert part.attrs["shard"] == f"{i}/4" and part.attrs["sweep_dims"] == whole.attrs["sweep_dims"]
        # A quarter of the per-run bytes of the whole sweep.
        per_run_bytes = sum(part[name].nbytes for name in PER_RUN)
        assert per_run_bytes * 4 == sum(whole[name].nbytes for name in PER_RUN)


def test_the_parts_combine_to_the_unsharded_run_from_files_and_datasets(parts_of_four):
    paths, whole = parts_of_four
    _same_numbers(whole, mcsim.combine(list(reversed(paths))))
    mixed = [paths[0], open_results(paths[1]), paths[2], open_results(paths[3])]
    combined = mcsim.combine(mixed)
    _same_numbers(whole, combined)
    assert "configuration" not in combined.dims and "shard" not in combined.attrs
    assert combined["gpus"].attrs == whole["gpus"].attrs


def test_a_sweep_too_big_for_the_limit_runs_as_parts_that_each_fit(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    runs = 100
    (tmp_path / "s.toml").write_text(dumps_toml(_raw(runs)))
    configurations = len(EFFICIENCIES) * len(GPUS)
    whole_need = memory_estimate_bytes(configurations, runs)
    part_need = memory_estimate_bytes(configurations, runs, held=1)  # 8 parts of 8 configurations: 1 each
    # Closed form: every configuration is built (4 kB each), one holds runs and kernel rows.
    per_run = 8 * len(PER_RUN)
    assert whole_need == pytest.approx(configurations * (runs * per_run + 4096) + configurations * runs * 8 * N_OUT)
    assert part_need == pytest.approx(configurations * 4096 + runs * per_run + runs * 8 * N_OUT)
    limit = f"{(whole_need + part_need) / 2:.0f}"

    capsys.readouterr()
    assert main(["run", "s.toml", "--max-memory", limit, "-o", "refused.nc", "--quiet"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "s.toml" in line and "sweep" in line and "8 configurations x 100 runs" in line and "--shard" in line
    assert not (tmp_path / "refused.nc").exists()
    # A part over the limit is refused the same way, naming its share.
    assert main(["run", "s.toml", "--shard", "7/8", "--max-memory", f"{part_need / 2:.0f}", "--quiet"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "s.toml" in line and "sweep" in line and "part 7/8 holds 1 of 8 configurations" in line
    assert not (tmp_path / "results").exists()
    for i in range(8):
        assert main(["run", "s.toml", "--shard", f"{i}/8", "--max-memory", limit, "--quiet", "--no-resume"]) == 0
    parts = sorted((tmp_path / "results").glob("small.part*of8.nc"))
    assert len(parts) == 8 and all(open_results(p).sizes["configuration"] == 1 for p in parts)
    assert main(["combine", *map(str, parts), "-o", "whole.nc", "--quiet"]) == 0
    assert main(["run", "s.toml", "--max-memory", "inf", "-o", "direct.nc", "--quiet", "--no-resume"]) == 0
    _same_numbers(open_results(tmp_path / "direct.nc"), open_results(tmp_path / "whole.nc"))

    # From Python: the part's share is what load_scenario / simulate size.
    with limits(max_memory_bytes=float(limit)):
        with pytest.raises(ScenarioError, match="8 configurations x 100 runs need about"):
            load_scenario(tmp_path / "s.toml")
        assert load_scenario(tmp_path / "s.toml", shard=Shard(7, 8)).shape == (4, 2)
        part = mcsim.simulate(tmp_path / "s.toml", progress=False, shard=Shard(7, 8))
        np.testing.assert_array_equal(part["configuration"].values, [7])
    with limits(max_memory_bytes=part_need / 2), pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "s.toml", shard=Shard(7, 8))
    assert info.value.key == "sweep" and "part 7/8 holds 1 of 8 configurations" in info.value.message


@pytest.mark.parametrize(
    "coordinate, message",
    [
        ([0, 4, 8], "holds 8, outside the sweep's flat indices 0 to 7"),
        ([0, -1], "holds -1, outside"),
        ([0, 0], "repeats configuration 0"),
        ([4, 0], "not those of part 0/4"),  # its own set, out of order: rows would land on the wrong cells
        ([1, 5], "not those of part 0/4"),  # another part's set
    ],
)
def test_a_crafted_configuration_coordinate_is_refused(parts_of_four, coordinate, message):
    paths, _ = parts_of_four
    parts = [open_results(p) for p in paths]
    rows = [0, 1, 1] if len(coordinate) == 3 else [0, 1]  # part 0/4 holds configurations 0 and 4
    parts[0] = parts[0].isel(configuration=rows).assign_coords(configuration=np.array(coordinate))
    with pytest.raises(ValueError, match=message) as info:
        combine_parts(parts, [p.name for p in paths])
    assert "\n" not in str(info.value) and str(info.value).startswith("p0.nc: coordinate configuration")


def test_a_crafted_part_file_is_refused_by_combine_in_one_line(parts_of_four, tmp_path, capsys):
    paths, _ = parts_of_four
    crafted = open_results(paths[1]).assign_coords(configuration=np.array([1, 1]))
    write_results(crafted, tmp_path / "p1.nc")
    files = [str(paths[0]), str(tmp_path / "p1.nc"), str(paths[2]), str(paths[3])]
    capsys.readouterr()
    assert main(["combine", *files, "-o", str(tmp_path / "whole.nc"), "--quiet"]) == 2
    assert "p1.nc: coordinate configuration repeats configuration 1" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "whole.nc").exists()
    # A part without the configuration dim (the whole sweep's shape) is not a part of this layout.
    full = open_results(paths[1]).isel(configuration=0)
    with pytest.raises(ValueError, match="p1.nc: no 'configuration' dimension"):
        combine_parts([open_results(paths[0]), full, *map(open_results, paths[2:])], [p.name for p in paths])


def test_the_combine_estimate_is_the_merged_result_plus_the_largest_part_read(tmp_path):
    # 4 parts of 6 configurations hold 2, 2, 1 and 1: parts of different sizes; 2,000 runs, so that the
    # runs (0.6 MB a configuration) outweigh what every part repeats and what reading a file costs.
    raw = _raw(runs=2000)
    raw["sweep"] = {"compute.efficiency": [0.4, 0.45, 0.5], "parallelism.gpus": GPUS}
    scenario = scenario_from_dict(raw)
    paths = [tmp_path / f"p{i}.nc" for i in range(4)]
    for i, path in enumerate(paths):
        write_results(mcsim.simulate(scenario, progress=False, shard=Shard(i, 4)), path)
    sizes = [loaded_bytes(p) for p in paths]
    assert sizes[0] == sizes[1] > sizes[2] == sizes[3]
    # Closed form: the merged result (what the parts hold together) plus the largest part read, with its
    # reading's temporary copies (1.5 times its size).
    assert combine_memory_estimate_bytes(sizes) == pytest.approx(sum(sizes) + 1.5 * sizes[0])
    # Parts in memory already are not read again: the largest read is a small one.
    assert combine_memory_estimate_bytes(sizes, [False, False, True, True]) == pytest.approx(
        sum(sizes) + 1.5 * sizes[3]
    )
    assert combine_memory_estimate_bytes(sizes, [False] * 4) == pytest.approx(sum(sizes))
    open_results(paths[0])  # the reader's first-call allocations are not traced
    tracemalloc.start()
    try:
        merged = mcsim.combine(paths)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The merged result is what the parts hold together, less what each repeats (coordinates, provenance).
    assert 0.9 * sum(sizes) <= merged.nbytes <= sum(sizes), (merged.nbytes, sizes)
    # The estimate bounds the measured peak within 20 %; holding every part beside the merged copy (as
    # combine did) would need twice the parts' bytes.
    assert peak <= 1.2 * combine_memory_estimate_bytes(sizes), (peak, sizes)
    assert peak < 1.8 * sum(sizes), (peak, sizes)
