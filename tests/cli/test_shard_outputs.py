"""``mcsim run --shard`` and ``mcsim combine``: what their -o may replace (hostile findings of issue 42).

Each test failed before its fix. The sweep is two small configurations of 6 runs in fast mode.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from builders import SMALL_SCENARIO, write_toml

from mcsim.cli.main import main
from mcsim.engine import shards
from mcsim.io.netcdf import open_results


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcsim: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("parts")
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=6, mode="fast")
    raw["sweep"] = {"parallelism.gpus": [32, 64]}
    scenario = write_toml(raw, folder / "s.toml")
    paths = [folder / f"p{i}.nc" for i in range(2)]
    for i, path in enumerate(paths):
        assert main(["run", str(scenario), "--shard", f"{i}/2", "-o", str(path), "--quiet"]) == 0
    return paths


def test_a_second_part_with_the_first_parts_output_is_refused(parts, tmp_path, capsys):
    # Found: `--shard 1/2 -o P` after `--shard 0/2 -o P` replaced the first part.
    scenario = parts[0].parent / "s.toml"
    before = parts[0].read_bytes()
    assert main(["run", str(scenario), "--shard", "1/2", "-o", str(parts[0]), "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "part 0/2" in line and "part 1/2" in line
    assert parts[0].read_bytes() == before
    assert open_results(parts[0]).attrs["shard"] == "0/2"


def test_a_part_may_be_rerun_onto_its_own_file_and_prints_no_table_of_itself(parts, tmp_path, capsys):
    own = tmp_path / "p0.nc"
    own.write_bytes(parts[0].read_bytes())
    scenario = parts[0].parent / "s.toml"
    assert main(["run", str(scenario), "--shard", "0/2", "-o", str(own), "--no-resume"]) == 0
    out = capsys.readouterr().out  # no summary of one part (it refuses one): what it holds, and what to do
    assert "part 0/2 of a sharded run: 1 of 2" in out and "mcsim combine" in out and "gpus=" not in out


def test_a_file_created_at_the_output_while_combining_is_never_replaced(parts, tmp_path, capsys, monkeypatch):
    # Found: combine took its lock and the identity of the file it may replace only after merging.
    output = tmp_path / "whole.nc"
    merge = shards.combine_parts

    def merge_while_someone_writes(*args, **kwargs):
        output.write_text("written by another program meanwhile")
        return merge(*args, **kwargs)

    monkeypatch.setattr(shards, "combine_parts", merge_while_someone_writes)
    assert main(["combine", *map(str, parts), "-o", str(output), "--quiet"]) == 2
    assert "refusing to replace" in _one_error_line(capsys.readouterr().err)
    assert output.read_text() == "written by another program meanwhile"


def test_combine_still_writes_the_whole_result(parts, tmp_path):
    output = tmp_path / "whole.nc"
    assert main(["combine", *map(str, parts), "-o", str(output), "--quiet"]) == 0
    assert "shard" not in open_results(output).attrs
