"""Hostile part files against ``mcsim combine`` (issue 42 item 9, the part layout): each crafted part here was
combined into a result silently different from the unsharded run (or crashed) before its fix.

The reference is the unsharded run of the same scenario and the part layout written out here: a part holds
its configurations along ``configuration``, their flat C-order index over the sweep dims that its
``scenario_toml`` sweeps, in that order, each with as many values as the sweep lists.
"""

from __future__ import annotations

import copy
import shutil
import tomllib

import netCDF4
import numpy as np
import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.cli.main import main
from mcsim.engine.shards import combine_parts
from mcsim.io.netcdf import open_results, write_results
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.limits import limits
from mcsim.scenario.shard import Shard
from mcsim.scenario.toml import dumps_toml

EFFICIENCIES = [0.4, 0.45, 0.5]
GPUS = [512, 1024, 2048]
NAMES = [f"p{i}.nc" for i in range(4)]


def _raw() -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=4, mode="fast")
    raw["sweep"] = {"compute.efficiency": EFFICIENCIES, "parallelism.gpus": GPUS}  # 3 x 3: parts hold 3, 2, 2, 2
    return raw


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The 4 parts of the 3 x 3 sweep as files, and the unsharded run."""
    folder = tmp_path_factory.mktemp("hostile")
    scenario = scenario_from_dict(_raw())
    paths = [folder / name for name in NAMES]
    for i, path in enumerate(paths):
        write_results(mcsim.simulate(scenario, progress=False, shard=Shard(i, 4)), path)
    return paths, mcsim.simulate(scenario, progress=False)


def _refused(datasets, message: str) -> str:
    with pytest.raises(ValueError, match=message) as info:
        combine_parts(datasets, NAMES)
    assert "\n" not in str(info.value)
    return str(info.value)


def _with_sweep(ds, sweep: dict):
    """``ds`` whose ``scenario_toml`` sweeps ``sweep`` (a consistent edit of every part)."""
    raw = tomllib.loads(ds.attrs["scenario_toml"])
    raw["sweep"] = sweep
    return ds.assign_attrs(scenario_toml=dumps_toml(raw))


@pytest.mark.parametrize(
    "edit, which",
    [
        (lambda ds: ds.assign(cost=ds["cost"].astype(np.float32)), 1),  # merged as float64: other numbers
        (lambda ds: ds.assign(cost=ds["cost"].astype(np.float32)), 0),  # the first part read lays out the merge
        (lambda ds: ds.assign(iterations=ds["iterations"].astype(np.int32)), 2),
    ],
)
def test_a_part_whose_variable_has_another_numeric_type_is_refused(parts, edit, which):
    paths, _ = parts
    datasets = [open_results(p) for p in paths]
    datasets[which] = edit(datasets[which])
    assert "has other dimensions or another type than in" in _refused(datasets, "another type")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda ds: ds.assign(cost=ds["cost"].assign_attrs(units="EUR")), "the attributes of cost differ"),
        (lambda ds: ds.assign_coords(gpus=ds["gpus"].assign_attrs(units="furlongs")), "coordinate gpus differs"),
    ],
    ids=["variable", "sweep coordinate"],
)
@pytest.mark.parametrize("which", [0, 1])  # the first part read (whose attributes the merge took), and another
def test_a_part_whose_attributes_differ_is_refused(parts, edit, message, which):
    paths, _ = parts
    datasets = [open_results(p) for p in paths]
    datasets[which] = edit(datasets[which])
    _refused(datasets, message)


def test_a_coordinate_along_configuration_is_refused(parts):
    # Kept in the merge (as the first part's), it gave the combined result a configuration dim the run has not.
    paths, _ = parts
    datasets = [open_results(p) for p in paths]
    datasets[0] = datasets[0].assign_coords(tag=("configuration", [7, 8, 9]))
    _refused(datasets, "p0.nc: coordinate tag along configuration is not of a part")


def test_a_variable_laid_on_the_sweep_dims_is_refused(parts):
    # In every part alike, it was taken as a variable the parts share: any values passed into the result.
    paths, whole = parts
    datasets = [open_results(p).assign(cost=whole["cost"] * 2) for p in paths]
    _refused(datasets, r"p0.nc: cost has the dimensions \('efficiency', 'gpus', 'run'\); a part holds")


@pytest.mark.parametrize(
    "sweep_dims, message",
    [
        (
            "gpus efficiency",
            "attribute sweep_dims is 'gpus efficiency'; the sweep of its scenario_toml is",
        ),  # transposed
        ("gpus gpus", "attribute sweep_dims is 'gpus gpus'"),  # wrote a file of duplicate dims no tool reads
        ("efficiency gpus run", "attribute sweep_dims is 'efficiency gpus run'"),
        ("configuration", "attribute sweep_dims is 'configuration'"),
    ],
)
def test_sweep_dims_edited_in_every_part_is_refused(parts, sweep_dims, message, tmp_path, capsys):
    paths, _ = parts
    edited = [write_results(open_results(p).assign_attrs(sweep_dims=sweep_dims), tmp_path / p.name) for p in paths]
    capsys.readouterr()
    assert main(["combine", *map(str, edited), "-o", str(tmp_path / "whole.nc"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "p0.nc: " + message in err and "Traceback" not in err, err
    assert not (tmp_path / "whole.nc").exists()


def test_sweep_dims_of_another_size_than_the_scenario_sweeps_are_refused(parts):
    paths, _ = parts
    datasets = [open_results(p).assign_coords(gpus=np.arange(100_000)) for p in paths]
    _refused(datasets, "p0.nc: dimension gpus has 100000 values; the sweep of its scenario_toml has 3")


def test_a_huge_crafted_sweep_is_refused_before_its_indices_are_made(parts):
    # scenario_toml and coordinates agree on 10^4 x 10^4 configurations: part 0/4 would hold 2.5e7; it holds 3.
    paths, _ = parts
    sweep = {"compute.efficiency": [0.5 + i * 1e-6 for i in range(10_000)], "parallelism.gpus": list(range(10_000))}
    datasets = [
        _with_sweep(open_results(p), sweep).assign_coords(efficiency=sweep["compute.efficiency"], gpus=range(10_000))
        for p in paths
    ]
    _refused(
        datasets, "p0.nc: coordinate configuration holds 3 configurations; part 0/4 of the sweep's 100000000 holds"
    )


def test_lazily_opened_parts_combine_to_the_unsharded_run_and_are_named_by_their_files(parts):
    # A lazily opened part lost its sweep coordinates (no variable uses them): combine refused it.
    paths, whole = parts
    lazy = [open_results(p, chunks={}) for p in paths]
    assert lazy[0].sizes["gpus"] == 3 and lazy[0]["gpus"].attrs == whole["gpus"].attrs
    for given in (lazy, [paths[0], lazy[1], open_results(paths[2]), lazy[3]]):
        combined = mcsim.combine(given)
        for name in whole.variables:
            np.testing.assert_array_equal(combined[name].values, whole[name].values, err_msg=name)
    # A dataset read from a file is named by it (it was "part 1/4").
    with pytest.raises(ValueError, match=r"^p1.nc: part 1/4 is given twice; give each part once$"):
        mcsim.combine([paths[0], lazy[1], open_results(paths[1]), *paths[2:]])


def test_more_parts_than_configurations_are_refused_when_run(tmp_path, capsys):
    # Part 0/100000 of a 9-configuration sweep was simulated and written, though parts 9/100000 and up cannot
    # be made: it could never be combined.
    (tmp_path / "s.toml").write_text(dumps_toml(_raw()))
    capsys.readouterr()
    assert main(["run", str(tmp_path / "s.toml"), "--shard", "0/100000", "-o", str(tmp_path / "p.nc"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "100000 parts of a sweep of 9 configurations" in err, err
    assert "use at most 9 parts" in err and not (tmp_path / "p.nc").exists()
    with pytest.raises(ValueError, match="10 parts of a sweep of 9 configurations"):
        mcsim.simulate(scenario_from_dict(_raw()), progress=False, shard=Shard(3, 10))


def test_parts_given_as_a_generator_combine(parts):
    # A generator was read up once for the sizes: "zip() argument 2 is longer than argument 1".
    paths, whole = parts
    combined = mcsim.combine(path for path in paths)
    np.testing.assert_array_equal(combined["cost"].values, whole["cost"].values)


def test_a_part_whose_header_declares_a_huge_variable_is_refused_naming_it(parts, tmp_path, capsys):
    # 10^9 x 3 float64 declared, never written: a small file; refused from its header, the line names it.
    paths, _ = parts
    crafted = tmp_path / "huge.nc"
    shutil.copy(paths[1], crafted)
    with netCDF4.Dataset(crafted, "a") as nc:
        nc.createDimension("big", 10**9)
        nc.createVariable("junk", "f8", ("configuration", "big"), fill_value=False)
    files = [str(paths[0]), str(crafted), *map(str, paths[2:])]
    capsys.readouterr()
    assert main(["combine", *files, "-o", str(tmp_path / "whole.nc"), "--quiet", "--max-memory", "1G"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "each (the largest: huge.nc) need about" in err, err
    assert not (tmp_path / "whole.nc").exists()
    with limits(max_memory_bytes=1e9), pytest.raises(ValueError, match=r"\(the largest: huge.nc\)"):
        mcsim.combine([paths[0], crafted, *paths[2:]])


def test_a_damaged_part_file_is_one_line_whatever_bytes_are_damaged(parts, tmp_path, capsys):
    # Bytes flipped in a part's attributes or compressed chunks made the netCDF library raise AttributeError or
    # RuntimeError ("NetCDF: HDF error"): a traceback from mcsim combine (and mcsim summary).
    paths, _ = parts
    good = paths[1].read_bytes()
    damaged, named = tmp_path / "damaged.nc", 0
    for offset in range(0, len(good), len(good) // 30):
        flipped = bytearray(good)
        flipped[offset : offset + 64] = bytes(b ^ 0x5A for b in flipped[offset : offset + 64])
        damaged.write_bytes(bytes(flipped))
        capsys.readouterr()
        rc = main(["combine", str(paths[0]), str(damaged), *map(str, paths[2:]), "-o", str(tmp_path / "w.nc"), "-q"])
        err = capsys.readouterr().err.strip()
        assert rc in (0, 2) and len(err.splitlines()) == (rc == 2), (offset, err)
        named += "damaged.nc: not a readable netCDF result file" in err
        (tmp_path / "w.nc").unlink(missing_ok=True)
    assert named > 0


@pytest.mark.parametrize("chunks", [None, {"run": 2}], ids=["eager", "lazy"])
def test_a_part_whose_shard_attribute_was_removed_is_still_refused_by_the_analysis(parts, tmp_path, capsys, chunks):
    # Without its shard attribute a part was summarised, ranked and reported as if its 3 configurations were
    # the sweep's 9.
    paths, _ = parts
    stripped = open_results(paths[0])
    del stripped.attrs["shard"]
    path = write_results(stripped, tmp_path / "stripped.nc")
    ds = open_results(path, chunks=chunks)
    answers = [
        mcsim.summarize,
        lambda d: d.mcsim.best(),
        lambda d: d.mcsim.pareto(),
        lambda d: d.mcsim.completed_share(),
    ]
    for answer in answers:
        with pytest.raises(ValueError, match=r"^part \(its shard attribute removed\) of a sharded run") as info:
            answer(ds)
        assert "\n" not in str(info.value)
    capsys.readouterr()
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "stripped.nc: part (its shard attribute removed)" in err, err


def test_a_part_with_a_huge_text_is_refused_before_it_is_widened_for_the_whole_sweep(parts):
    # One infeasible_reason of 10^6 characters (a small part: 3 configurations, 12 MB in memory) was widened for
    # every configuration of the sweep, beyond the memory limit: 9 x 4 MB = 36 MB here, 4 TB for 10^6 configurations.
    paths, _ = parts
    datasets = [open_results(p) for p in paths]
    long = np.array(["x" * 1_000_000, "", ""])

    def with_long_text(ds):
        reason = ds["infeasible_reason"]
        return ds.assign(infeasible_reason=reason.copy(data=long[: reason.size]))

    datasets[1] = with_long_text(datasets[1])
    with limits(max_memory_bytes=30e6):
        _refused(datasets, r"p1.nc: the text of infeasible_reason \(<U1000000\) over the sweep's 9 configurations")
    datasets[0] = with_long_text(datasets[0])  # the first part read, too
    with limits(max_memory_bytes=30e6):
        _refused(datasets, r"p0.nc: the text of infeasible_reason \(<U1000000\) over the sweep's 9 configurations")


def test_a_shard_that_is_not_a_shard_is_refused_in_one_line():
    # Shard(True, 2) simulated a part labelled "True/2", which combine cannot read; a tuple or "i/n" text was an
    # AttributeError ('tuple' object has no attribute 'check_sweep') from inside simulate.
    for index, count in ((True, 2), (0, True)):
        with pytest.raises(ValueError, match="shard: expected whole numbers I and N"):
            Shard(index, count)
    scenario = scenario_from_dict(_raw())
    for given in ((0, 2), "0/2"):
        with pytest.raises(TypeError, match=r"^shard: expected mcsim.Shard\(i, n\) \(part i of n\) or None, got"):
            mcsim.simulate(scenario, progress=False, shard=given)
        with pytest.raises(TypeError, match="shard: expected mcsim.Shard"):
            scenario_from_dict(_raw(), shard=given)


@pytest.mark.parametrize(
    "text, message",
    [
        ("x = " + "[" * 100_000 + "]" * 100_000, "attribute scenario_toml is not TOML"),  # RecursionError before
        ("name = ", "attribute scenario_toml is not TOML"),
        ("sweep = 3", r"attribute scenario_toml: its \[sweep\] is not a table"),
    ],
    ids=["nested", "broken", "sweep not a table"],
)
def test_a_scenario_toml_that_is_not_a_scenario_is_refused(parts, text, message):
    paths, _ = parts
    datasets = [open_results(p).assign_attrs(scenario_toml=text) for p in paths]
    _refused(datasets, "p0.nc: " + message)
