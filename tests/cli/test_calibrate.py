"""``mcsim calibrate`` on the command line: bad measurements give one line, exit 2 and no output file."""

from __future__ import annotations

from pathlib import Path

import pytest
from refusals import assert_refused

from mcsim.cli.main import main

BAD = sorted(Path(__file__).parent.joinpath("bad_calibrations").glob("*.csv"))
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
SCENARIO = EXAMPLES / "bigscience-181b.toml"


def test_corpus_is_large_enough():
    assert len(BAD) >= 10


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_measurements_exit_2_one_line_no_output(path, tmp_path, capsys):
    out = tmp_path / "calibrated.toml"
    status = main(["calibrate", str(path), str(SCENARIO), "-o", str(out)])
    assert_refused(status, capsys.readouterr().err, path, tmp_path)


def test_writes_the_calibrated_scenario_and_never_over_a_file(tmp_path, capsys):
    csv = tmp_path / "two.csv"
    csv.write_text("gpus,tp,pp,dp,microbatch,seconds\n384,8,6,8,4,114.11\n384,4,12,8,4,111.89\n")
    out = tmp_path / "calibrated.toml"
    assert main(["calibrate", str(csv), str(SCENARIO), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "leave-one-out" in printed and "--set compute.step_model=operators" in printed
    assert "efficiency = " in out.read_text()
    before = out.read_bytes()
    assert main(["calibrate", str(csv), str(SCENARIO), "-o", str(out)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err and out.read_bytes() == before
    assert main(["calibrate", str(csv), str(SCENARIO), "-o", str(csv)]) == 2  # never over its input
    assert "two.csv" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--fit", "parallelism.overlap_dp"], "--fit parallelism.overlap_dp: two keys need at least 4"),
        (["--fit", "model.recompute"], "expected a numeric scenario key"),
        (["--fit", "parallelism.overlap_dp", "--range", "a:b"], "--range"),
        (["--set", "parallelism.overlap_dp=7"], "parallelism.overlap_dp"),
        (["--repeatability", "1.5"], "repeatability"),
    ],
)
def test_bad_options_exit_2(args, expected, tmp_path, capsys):
    csv = tmp_path / "two.csv"
    csv.write_text("gpus,tp,pp,seconds\n384,8,6,114.11\n384,4,12,111.89\n")
    out = tmp_path / "out.toml"
    assert main(["calibrate", str(csv), str(SCENARIO), "-o", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expected in err, err
    assert not out.exists()
