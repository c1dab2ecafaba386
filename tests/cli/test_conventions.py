"""Command-line conventions: tables for programs (--format json|csv), exit statuses in --help, -q, - for the
standard input, --version --verbose, shell completion, and the JSON Schema of scenario files.

References: the numbers of a result file read with plain xarray and numpy here; the versions from the
libraries' own ``__version__``; the schema's verdicts from the TOML files themselves.
"""

from __future__ import annotations

import csv
import importlib.metadata
import io
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from builders import SMALL_SCENARIO, write_toml
from plans import hostile_plan

from mcsim.cli import parser as cli_parser
from mcsim.cli.main import main
from mcsim.cli.parser import build_parser

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
MCSIM = [sys.executable, "-m", "mcsim"]


@pytest.fixture(scope="module")
def result_file(tmp_path_factory) -> Path:
    """A swept result file of the small scenario (2 configurations, 30 runs)."""
    import copy

    folder = tmp_path_factory.mktemp("conventions")
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"] = {**raw.get("run", {}), "runs": 30}
    raw["sweep"] = {"checkpoint.strategy": ["sync", "async"]}
    out = folder / "small.nc"
    assert main(["run", str(write_toml(raw, folder / "small.toml")), "-o", str(out), "--quiet"]) == 0
    return out


def _one_error_line(captured) -> str:
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcsim: error: ") and "Traceback" not in captured.err, captured.err
    return lines[0]


# ---------------------------------------------------------------- --format json|csv


def test_summary_json_holds_every_configuration_in_the_files_units(result_file, capsys):
    assert main(["summary", str(result_file), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    with xr.open_dataset(result_file) as ds:
        cost = ds["cost"].load()
        strategies = [str(s) for s in ds["strategy"].values]
    assert [row["strategy"] for row in document["rows"]] == strategies
    for row in document["rows"]:
        values = cost.sel(strategy=row["strategy"]).values
        assert row["cost_mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert row["cost_p95"] == pytest.approx(np.percentile(values, 95), rel=1e-12)
    assert document["units"]["cost_mean"] == "USD" and document["units"]["wall_time_mean"] == "h"


def test_summary_csv_parses_and_sorts(result_file, capsys):
    assert main(["summary", str(result_file), "--format", "csv", "--sort", "cost", "--deadline", "100"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    means = [float(r["cost_mean"]) for r in rows]
    assert len(rows) == 2 and means == sorted(means)
    assert all(0 <= float(r["p_within"]) <= 1 for r in rows)


def test_format_refuses_a_bad_value_in_one_line(result_file, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["summary", str(result_file), "--format", "xml"])
    assert stop.value.code == 2 and "--format" in _one_error_line(capsys.readouterr())
    assert main(["validate", "--step-time", "--format", "json"]) == 2
    assert "--step-time" in _one_error_line(capsys.readouterr())


def test_validation_frame_has_a_row_per_comparison():
    from mcsim.analysis.validation import PUBLISHED, Comparison
    from mcsim.report.frames import render, validation_frame

    figure = PUBLISHED[0]
    inside = Comparison(figure, (figure.low + figure.high) / 2, figure.low, figure.high)
    document = json.loads(render(validation_frame([inside]), "json"))
    (row,) = document["rows"]
    assert row["quantity"] == figure.quantity and row["unit"] == figure.unit
    assert row["simulated_mean"] == pytest.approx((figure.low + figure.high) / 2) and row["passes"] is True


def test_plan_json_names_the_recommendation(tmp_path, capsys):
    plan = write_toml(hostile_plan(), tmp_path / "p.toml")
    out = tmp_path / "p.nc"
    assert main(["plan", str(plan), "-o", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)  # the standard output holds only the table
    assert f"wrote {out}" in captured.err
    with xr.open_dataset(out) as ds:
        recommended = int(ds["recommended"])
        finalists = [int(c) for c in ds["finalist_candidate"].values]
    assert [r["candidate"] for r in document["rows"]] == finalists
    assert [r["candidate"] for r in document["rows"] if r["recommended"]] == [recommended]
    assert document["units"]["objective_mean"] == "h"  # the hostile plan minimises wall time


def test_report_writes_its_table_for_programs(result_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    folder = tmp_path / "report"
    assert main(["report", str(result_file), "-o", str(folder), "--format", "csv", "-q"]) == 0
    assert capsys.readouterr().out == ""  # -q
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    with xr.open_dataset(result_file) as ds:
        assert float(rows[0]["energy_mean"]) == pytest.approx(float(ds["energy"].isel(strategy=0).mean()), rel=1e-12)


# ---------------------------------------------------------------- exit statuses, -q, --version --verbose


def test_help_lists_the_exit_statuses(capsys):
    from mcsim.cli.declarations import EXIT_USAGE
    from mcsim.cli.plan import EXIT_NO_CANDIDATE

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    listed = text.split("exit status:")[1]
    for code in (0, EXIT_NO_CANDIDATE, EXIT_USAGE, 130):
        assert f"\n  {code} " in listed
    assert "mistake" in listed.split(f"\n  {EXIT_USAGE} ")[1].split("\n  ")[0]


def test_quiet_leaves_only_errors(tmp_path, capsys):
    target = tmp_path / "copy.toml"
    assert main(["scenarios", "copy", "capacity-planning", str(target), "-q"]) == 0
    assert capsys.readouterr().out == "" and target.is_file()
    assert main(["scenarios", "copy", "capacity-planning", str(target), "-q"]) == 2  # exists: still said
    assert "exists" in _one_error_line(capsys.readouterr())


def test_version_verbose_names_the_scientific_stack(capsys):
    import numba
    import numpy
    import xarray

    assert main(["--version", "--verbose"]) == 0
    lines = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    found = {name: value.strip() for name, value in lines.items()}
    assert found["numpy"] == numpy.__version__ and found["xarray"] == xarray.__version__
    assert found["numba"] == numba.__version__ and found["python"] == sys.version.split()[0]
    assert found["mcsim-llm"] == importlib.metadata.version("mcsim-llm")
    import mcsim

    buffer = io.StringIO()
    mcsim.show_versions(buffer)
    assert "numpy:" in buffer.getvalue() and "SALib:" in buffer.getvalue()
    assert main(["--verbose"]) == 2 and "--version" in _one_error_line(capsys.readouterr())


# ---------------------------------------------------------------- - for the standard input


def test_run_reads_the_scenario_from_stdin(tmp_path):
    text = (SCENARIOS / "capacity-planning.toml").read_text()
    out = tmp_path / "stdin.nc"
    proc = subprocess.run(
        [*MCSIM, "run", "-", "--runs", "5", "-o", str(out), "--quiet", "--no-resume", "--set", "parallelism.gpus=1024"],
        input=text,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    with xr.open_dataset(out) as ds:
        assert ds.sizes["run"] == 5 and ds.attrs["scenario_name"] == tomllib.loads(text)["name"]


def test_bad_scenario_on_stdin_is_one_line_exit_2(tmp_path):
    proc = subprocess.run(
        [*MCSIM, "run", "-", "-o", str(tmp_path / "x.nc")], input="[model\n", capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "/dev/stdin" in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())


def test_fit_failures_reads_a_piped_log():
    log = "unit,start_hours,end_hours,failed\n" + "".join(
        f"u{k},0,{100 + 37 * k},{int(k % 3 != 2)}\n" for k in range(9)
    )
    proc = subprocess.run([*MCSIM, "fit-failures", "-", "--name", "piped"], input=log, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert 'name = "piped"' in proc.stdout and "mtbf_hours" in proc.stdout


# ---------------------------------------------------------------- shell completion


def _complete(script: Path, words: list[str]) -> list[str]:
    """COMPREPLY of the bash function for the command line ``words`` (the last is the word being completed)."""
    quoted = " ".join(f"'{w}'" for w in words)
    code = (
        f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _mcsim; "
        "printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    proc = subprocess.run(["bash", "-c", code], capture_output=True, text=True, check=True, cwd=script.parent)
    return [line for line in proc.stdout.splitlines() if line]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_offers_every_command_and_option(tmp_path, capsys):
    import argparse

    assert main(["completion", "bash"]) == 0
    script = tmp_path / "mcsim.bash"
    script.write_text(capsys.readouterr().out)
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(_complete(script, ["mcsim", ""])) == set(sub.choices)
    for name, command in sub.choices.items():
        flags = {f for action in command._actions for f in action.option_strings}
        assert set(_complete(script, ["mcsim", name, "-"])) == flags, name
    assert _complete(script, ["mcsim", "summary", "out.nc", "--format", ""]) == ["text", "json", "csv"]
    assert _complete(script, ["mcsim", "run", "--runs", "10", "--mo"]) == ["--mode"]
    assert _complete(script, ["mcsim", "scenarios", "co"]) == ["copy"]
    assert _complete(script, ["mcsim", "completion", "z"]) == ["zsh"]
    (tmp_path / "scenario.toml").write_text("")
    assert _complete(script, ["mcsim", "run", "scen"]) == ["scenario.toml"]


def test_zsh_completion_runs_the_bash_function_through_bashcompinit(capsys):
    assert main(["completion", "zsh"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("#compdef mcsim\n") and "bashcompinit" in text and "complete -o filenames -F _mcsim" in text
    if shutil.which("zsh"):
        assert subprocess.run(["zsh", "-n"], input=text, text=True).returncode == 0


# ---------------------------------------------------------------- the JSON Schema of scenario files


@pytest.fixture(scope="module")
def schemas(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("schema")
    assert main(["schema", "-o", str(folder / "scenario.json"), "-q"]) == 0
    assert main(["schema", "--plan", "-o", str(folder / "plan.json"), "-q"]) == 0
    return {kind: json.loads((folder / f"{kind}.json").read_text()) for kind in ("scenario", "plan")}


def _errors(schema: dict, raw: dict) -> list[str]:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(schema)
    return [error.message for error in validator.iter_errors(raw)]


SHIPPED = sorted(SCENARIOS.glob("*.toml"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_file_validates_against_its_schema(path, schemas):
    jsonschema = pytest.importorskip("jsonschema")
    kind = "plan" if path.stem.startswith("plan-") else "scenario"
    jsonschema.Draft202012Validator.check_schema(schemas[kind])
    assert _errors(schemas[kind], tomllib.loads(path.read_text())) == []


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda raw: raw["model"].update(paramz=1), "paramz"),  # a key the schema does not declare
        (lambda raw: raw.update(modle={}), "modle"),  # an unknown table
        (lambda raw: raw.setdefault("checkpoint", {}).update(strategy="sometimes"), "sometimes"),
        (lambda raw: raw.setdefault("run", {}).update(runs=0), "0"),  # below the bound
        (lambda raw: raw["parallelism"].update(tp="2"), "'2'"),  # a string for an integer
        (lambda raw: raw.setdefault("sweep", {}).update({"model.nonsense": [1, 2]}), "model.nonsense"),
        (lambda raw: raw.pop("parallelism"), "parallelism"),  # a required table
    ],
)
def test_schema_refuses_what_the_validator_refuses(edit, where, schemas, tmp_path, capsys):
    raw = tomllib.loads((SCENARIOS / "capacity-planning.toml").read_text())
    edit(raw)
    errors = _errors(schemas["scenario"], raw)
    assert errors and any(where in e for e in errors), errors
    # the one validator refuses it too: one line, exit 2
    assert main(["run", str(write_toml(raw, tmp_path / "bad.toml")), "-o", str(tmp_path / "x.nc")]) == 2
    _one_error_line(capsys.readouterr())


def test_schema_to_stdout_is_the_file(schemas, capsys):
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schemas["scenario"]
    assert main(["schema", "-o", ""]) == 2
    _one_error_line(capsys.readouterr())


@pytest.mark.parametrize("command", [c.name for c in cli_parser.MCSIM.commands])
def test_every_commands_help_prints(command, capsys):
    """``mcsim COMMAND --help`` prints its help and exits 0 (a bare ``%`` in a help text broke argparse's
    formatting of ``summary --help`` with a ValueError traceback)."""
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    assert f"usage: mcsim {command}" in capsys.readouterr().out
