"""Sharded sweeps: ``mcsim run --shard i/n`` runs one part of a sweep and
``mcsim combine`` merges the parts.

The reference is the unsharded run of the same scenario: run r of a configuration uses the
streams of (seed, r) whichever part runs it, so the combination must equal it bit for bit,
variable by variable (NaN where NaN), for plain sweeps and for sweeps with parameter draws
(both the draw-table and the per-draw-configuration paths)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.engine.shards import combine_parts
from mcsim.scenario import draws as draws_module
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.shard import Shard, parse_shard


def _raw(draws: int = 0) -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=6, mode="fast")
    raw["sweep"] = {"checkpoint.strategy": ["sync", "async", "in_memory"], "parallelism.gpus": [512, 1024]}
    if draws:
        raw["run"].update(draws=draws, design="sobol")
        raw["uncertain"] = {
            "compute.efficiency": {"dist": "uniform", "low": 0.4, "high": 0.6},
            "failures.gpu.mtbf_hours": {"dist": "lognormal", "median": 2000, "p95": 6000},
        }
    return raw


def _same_numbers(expected, actual) -> None:
    assert set(actual.data_vars) == set(expected.data_vars)
    for name in expected.variables:  # bit for bit, NaN where NaN
        np.testing.assert_array_equal(actual[name].values, expected[name].values, err_msg=name)


@pytest.mark.parametrize("draws, tabled", [(0, True), (4, True), (4, False)])
@pytest.mark.parametrize("count", [1, 6])
def test_combined_parts_equal_the_unsharded_run(monkeypatch, draws, tabled, count):
    if not tabled:  # the per-draw-configuration path: every draw a configuration of its own
        monkeypatch.setattr(draws_module, "table_key", lambda key: False)
    scenario = scenario_from_dict(_raw(draws))
    whole = mcsim.simulate(scenario, progress=False)
    parts = [mcsim.simulate(scenario, progress=False, shard=Shard(i, count)) for i in range(count)]
    for i, part in enumerate(parts):
        assert part.attrs["shard"] == f"{i}/{count}"
        held = [flat for flat in range(6) if flat % count == i]  # flat C-order index modulo the count
        np.testing.assert_array_equal(part["configuration"].values, held)  # only those, in increasing order
        assert part["wall_time"].dims == ("configuration", *(("draw",) if draws else ()), "run")
        assert np.isfinite(part["wall_time"].values).any(axis=tuple(range(1, part["wall_time"].ndim))).all()
    order = list(reversed(range(count)))  # any order
    combined = combine_parts([parts[i] for i in order], [f"p{i}.nc" for i in order])
    _same_numbers(whole, combined)
    assert "shard" not in combined.attrs
    record = json.loads(combined.attrs["shard_parts"])
    assert [entry["shard"] for entry in record] == [f"{i}/{count}" for i in range(count)]
    assert [entry["file"] for entry in record] == [f"p{i}.nc" for i in range(count)]


def test_shard_text_and_bounds():
    assert parse_shard("2/5") == Shard(2, 5)
    assert parse_shard(" 0 / 1 ") == Shard(0, 1)
    for text in ("5/5", "-1/4", "0/0", "a/b", "1", "1/2/3", "", "1.5/4"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(text)
    with pytest.raises(ValueError, match="holds no configuration: the sweep has 6"):
        Shard(6, 8).check_sweep(6)


def test_combine_refuses_parts_that_do_not_make_one_run():
    scenario = scenario_from_dict(_raw())
    parts = [mcsim.simulate(scenario, progress=False, shard=Shard(i, 2)) for i in range(2)]
    other_seed = mcsim.simulate(
        scenario_from_dict({**_raw(), "run": {**_raw()["run"], "seed": 8}}), progress=False, shard=Shard(1, 2)
    )
    third = mcsim.simulate(scenario, progress=False, shard=Shard(2, 3))
    whole = mcsim.simulate(scenario, progress=False)
    cases = [
        ([parts[0]], "missing part 1/2 of 2"),
        ([parts[0], parts[0]], "part 0/2 is also a.nc"),
        ([parts[0], other_seed], "attribute scenario_toml differs from a.nc.s: the parts are not of one run"),
        ([parts[0], parts[1], third], "parts of different splits"),
        ([parts[0], whole], "not a part of a sharded run"),
    ]
    for datasets, message in cases:
        with pytest.raises(ValueError, match=message):
            combine_parts(datasets, ["a.nc", "b.nc", "c.nc"][: len(datasets)])
    with pytest.raises(TypeError, match="one path"):
        mcsim.combine("a.nc")


def test_shard_and_combine_commands(tmp_path, monkeypatch, capsys):
    """The commands end to end: default part names, a part refused by summary, bad shards and
    bad combinations as one line with exit status 2 and no output, and the combined file equal
    to the unsharded run's."""
    from mcsim.cli.main import main
    from mcsim.scenario.toml import dumps_toml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(dumps_toml(_raw()))

    def error_line(*args: str) -> str:
        capsys.readouterr()
        assert main(list(args)) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1, err
        return err

    for i in range(3):
        assert main(["run", "s.toml", "--shard", f"{i}/3", "--quiet", "--no-resume"]) == 0
    parts = sorted((tmp_path / "results").glob("*.nc"))
    assert [p.name for p in parts] == [f"small.part{i}of3.nc" for i in range(3)]
    err = error_line("summary", str(parts[0]))
    assert "part 0/3 of a sharded run" in err and "mcsim combine" in err
    for bad, message in (("3/3", "--shard: expected a part index from 0 to 2"), ("6/7", "holds no configuration")):
        assert message in error_line("run", "s.toml", "--shard", bad, "--quiet", "-o", "bad.nc")
        assert not (tmp_path / "bad.nc").exists()
    assert "missing part 1/3 of 3" in error_line("combine", str(parts[0]), str(parts[2]), "-o", "bad.nc")
    assert not (tmp_path / "bad.nc").exists()
    error_line("combine", *map(str, parts), "-o", str(parts[0]))  # never over one of its inputs
    assert main(["combine", *map(str, parts), "-o", "whole.nc", "--quiet"]) == 0
    assert main(["run", "s.toml", "--quiet", "--no-resume", "-o", "direct.nc"]) == 0
    _same_numbers(mcsim.open_results(tmp_path / "direct.nc"), mcsim.open_results(tmp_path / "whole.nc"))


def test_a_part_whose_sweep_dims_names_a_missing_dimension_is_one_line():
    # Found (issue 42): a part's `sweep_dims` naming a missing dimension ended `combine` in KeyError.
    scenario = scenario_from_dict(_raw())
    parts = [mcsim.simulate(scenario, progress=False, shard=Shard(i, 2)) for i in range(2)]
    for part in parts:
        part.attrs["sweep_dims"] = "strategy no_such_dim"
    with pytest.raises(ValueError, match="sweep_dims names 'no_such_dim'"):
        combine_parts(parts, ["p0.nc", "p1.nc"])


def test_combine_estimates_its_memory_from_the_headers_and_refuses_beyond_the_limit(tmp_path, monkeypatch, capsys):
    """``combine`` loaded every part whole with no estimate or refusal (issue 42): now the parts' sizes come
    from their headers, checked against the memory limit (--max-memory) before any part is read."""
    from mcsim.cli.main import main
    from mcsim.io.netcdf import loaded_bytes
    from mcsim.scenario.limits import combine_memory_estimate_bytes, limits

    scenario = scenario_from_dict(_raw())
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"p{i}.nc")
        mcsim.write_results(mcsim.simulate(scenario, progress=False, shard=Shard(i, 2)), paths[-1])
    # The header's estimate against what is held once the part is read (its arrays' bytes): within 10 %.
    held = [float(mcsim.open_results(p).nbytes) for p in paths]
    estimated = [loaded_bytes(p) for p in paths]
    np.testing.assert_allclose(estimated, held, rtol=0.1)
    # The merged result (the two parts' bytes) and the largest part read, with its reading's copies (1.5 times).
    assert combine_memory_estimate_bytes(estimated) == pytest.approx(sum(estimated) + 1.5 * max(estimated))
    need = combine_memory_estimate_bytes(estimated)

    opened: list[object] = []
    monkeypatch.setattr("mcsim.engine.shards.open_results", lambda p: opened.append(p))
    with limits(max_memory_bytes=need / 2), pytest.raises(ValueError, match="to combine, more than the limit"):
        mcsim.combine(paths)
    assert opened == []  # refused before any part was read
    monkeypatch.undo()

    capsys.readouterr()
    out = tmp_path / "whole.nc"
    assert main(["combine", *map(str, paths), "-o", str(out), "--max-memory", f"{need / 2:.0f}"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--max-memory" in err, err
    assert not out.exists()
    assert main(["combine", *map(str, paths), "-o", str(out), "--quiet", "--max-memory", f"{2 * need:.0f}"]) == 0
    assert out.exists()
