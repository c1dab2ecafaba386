"""Command line: bad input gives one line and exit 2 with no output; good input writes a file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import xarray as xr
from hypothesis import example, given, settings
from hypothesis import strategies as st
from refusals import assert_refused

from mcsim.cli.main import main
from mcsim.scenario.config import load_scenario, scenario_from_dict

BAD = sorted(Path(__file__).parent.joinpath("bad_inputs").glob("*.toml"))


def test_corpus_is_large_enough():
    assert len(BAD) >= 30


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_input_exit_2_one_line_no_output(path, tmp_path, capsys):
    out = tmp_path / "out.nc"
    status = main(["run", str(path), "-o", str(out)])
    assert_refused(status, capsys.readouterr().err, path, tmp_path)


@pytest.mark.parametrize(
    "args,key",
    [
        (["--set", "parallelism.gpus=-4"], "parallelism.gpus"),
        (["--set", "nonsense"], "nonsense"),
        (["--set", "model.unknown=3"], "model.unknown"),
        (["--set", "failures.nothere.mtbf_hours=3"], "failures.nothere.mtbf_hours"),
        (["--runs", "0"], "--runs: run.runs"),
        (["--runs", "10000001"], "--runs: run.runs: expected a value >= 1 and <= 10000000, got 10000001"),
        (["--seed", "-1"], "--seed: run.seed"),
        (["--set", "parallelism.gpus=" + "[" * 5000 + "]" * 5000], "parallelism.gpus"),
        (["--set", "parallelism.gpus=" + "[" * 20 + "]" * 20], "parallelism.gpus"),
        (["--set", "checkpoint.strategy=[sync, in memory]"], 'checkpoint.strategy=["sync", "in memory"]'),
        (["--set", "name=a\x00b"], "name"),
        (["--set", "failures.gpu.mtbf_hours=-1"], "failures.gpu.mtbf_hours"),
    ],
)
def test_bad_command_line_values(args, key, tmp_path, capsys):
    good = Path(__file__).parent / "bad_inputs" / "runs_zero.toml"
    text = good.read_text().replace("runs = 0", "runs = 5")
    scenario = tmp_path / "ok.toml"
    scenario.write_text(text)
    status = main(["run", str(scenario), "-o", str(tmp_path / "out.nc"), *args])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1 and key in err, err
    if args[0] in ("--runs", "--seed"):  # an option's value is the option's fault, not the file's
        assert err.startswith(f"mcsim: error: {args[0]}: ") and str(scenario) not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.toml"]


def test_missing_scenario_file(tmp_path, capsys):
    status = main(["run", str(tmp_path / "nope.toml"), "-o", str(tmp_path / "o.nc")])
    err = capsys.readouterr().err
    assert status == 2 and "nope.toml" in err and len(err.strip().splitlines()) == 1


def test_subprocess_bad_input_has_no_traceback(tmp_path):
    path = Path(__file__).parent / "bad_inputs" / "tp_pp_not_dividing.toml"
    # cwd away from the source tree, so the installed package is the one imported
    proc = subprocess.run(
        [sys.executable, "-m", "mcsim", "run", str(path), "-o", str(tmp_path / "o.nc")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir())


def test_run_writes_file_and_prints_table(small_raw, tmp_path, capsys):
    from builders import write_toml

    scenario = write_toml(small_raw, tmp_path / "small.toml")
    out = tmp_path / "res" / "small.nc"
    assert main(["run", str(scenario), "-o", str(out), "--runs", "50", "--set", "stragglers.sigma=0.1"]) == 0
    stdout = capsys.readouterr().out
    assert "wall time [min]" in stdout and "ETTR" in stdout and str(out) in stdout
    assert out.is_file() and [p.name for p in out.parent.iterdir()] == ["small.nc"]
    assert main(["summary", str(out)]) == 0
    assert "wall time [min]" in capsys.readouterr().out


def test_toml_round_trip(small_raw):
    small_raw["sweep"] = {"checkpoint.interval": [{"minutes": 30}, "young_daly"], "parallelism.gpus": [64, 128]}
    scenario = scenario_from_dict(small_raw, "x.toml")
    again = scenario_from_dict(tomllib.loads(scenario.to_toml()), "x.toml")
    assert again.configs == scenario.configs and again.axes == scenario.axes


def test_set_list_adds_sweep_axis(small_raw, tmp_path):
    from builders import write_toml

    path = write_toml(small_raw, tmp_path / "s.toml")
    scenario = load_scenario(path, ["parallelism.gpus=[64, 128]", "checkpoint.interval={ minutes = 5 }"])
    assert [a.dim for a in scenario.axes] == ["gpus"] and len(scenario.configs) == 2
    assert scenario.configs[1].parallelism.gpus == 128
    assert scenario.configs[0].checkpoint.interval.label == "5min"


def test_reference_scenario_loads_and_is_feasible():
    from mcsim.model.workload import workload

    scenario = load_scenario()
    assert scenario.name == "llama3-405b"
    wl = workload(scenario.base)
    assert wl.feasible
    # Llama 3 report Table 4: 38-43 % MFU on 8k-16k GPUs, measured: with the slowest rank pacing each iteration
    from mcsim.model.stragglers import factor_law

    slowest = factor_law(scenario.base.parallelism.gpus, scenario.base.stragglers.sigma).mean
    assert 0.38 <= wl.mfu_ideal / slowest <= 0.43
    # Table 5: 419 interruptions in 54 days -> system MTBF 1296 h / 419 = 3.09 h
    from mcsim.model.checkpointing import checkpoint_plan

    assert checkpoint_plan(scenario.base, wl).system_mtbf_s / 3600 == pytest.approx(1296 / 419, rel=1e-3)


def test_console_script_installed():
    exe = Path(sys.executable).parent / "mcsim"
    if not exe.exists():
        pytest.skip("console script not on this interpreter's bin path")
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 0 and proc.stdout.startswith("mcsim ")


@pytest.mark.parametrize("output,problem", [("hostfile/x.nc", "not a directory"), ("adir", "is a directory")])
def test_unwritable_output_rejected_before_simulating(output, problem, tmp_path, capsys):
    (tmp_path / "hostfile").write_text("a file")
    (tmp_path / "adir").mkdir()
    scenario = Path(__file__).parent / "bad_inputs" / "runs_zero.toml"
    status = main(["run", str(scenario), "--runs", "5", "-o", str(tmp_path / output)])
    err = capsys.readouterr().err
    assert status == 2 and problem in err and len(err.strip().splitlines()) == 1


def test_override_of_failure_class_when_failures_is_not_a_list(tmp_path, capsys):
    path = tmp_path / "f.toml"
    path.write_text('name = "x"\nfailures = 3\n[model]\n[parallelism]\ngpus = 8\n')
    status = main(["run", str(path), "--set", "failures.gpu.mtbf_hours=5", "-o", str(tmp_path / "o.nc")])
    err = capsys.readouterr().err
    assert status == 2 and "failures" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "sweep", [["parallelism.tp=[2,3]"], ['checkpoint.strategy=["sync","in_memory"]', "parallelism.gpus=[64,128]"]]
)
def test_sweep_summary_table(sweep, small_raw, tmp_path, capsys):
    from builders import write_toml

    scenario = write_toml(small_raw, tmp_path / "s.toml")
    args = ["run", str(scenario), "-o", str(tmp_path / "s.nc"), "--runs", "20"]
    for item in sweep:
        args += ["--set", item]
    assert main(args) == 0
    out = capsys.readouterr().out
    if "tp=" in out:
        assert "tp=2" in out and "infeasible: tp*pp" in out  # tp 3 does not divide 64
    else:
        for label in ("strategy=sync gpus=64", "strategy=in_memory gpus=128"):
            assert label in out


def _small_with(small_raw: dict, tmp_path: Path, **top: str) -> Path:
    from builders import write_toml

    small_raw.update(top)
    small_raw["run"].update(runs=3, mode="fast")
    folder = tmp_path / "work"
    folder.mkdir(exist_ok=True)
    return write_toml(small_raw, folder / "s.toml")


@pytest.mark.parametrize(
    "name", ["../../escaped", "/ABSOLUTE/x", "a" * 300, "sub/dir", ".hidden", "..", "-rf", "name with spaces é"]
)
def test_name_never_chooses_a_location(name, small_raw, tmp_path, monkeypatch, capsys):
    if name.startswith("/ABSOLUTE"):
        name = str(tmp_path / "absolute" / "x")
    path = _small_with(small_raw, tmp_path, name=name)
    monkeypatch.chdir(path.parent)
    assert main(["run", "s.toml", "--quiet", "--no-resume"]) == 0, capsys.readouterr().err
    results = path.parent / "results"
    written = list(results.iterdir())
    assert len(written) == 1 and written[0].suffix == ".nc"
    # one plain file name: no folder part, not hidden, not an option, short enough for any file system
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*\.nc", written[0].name) and len(written[0].name) <= 120
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # nothing beside or above
    assert sorted(p.name for p in path.parent.iterdir()) == ["results", "s.toml"]
    with xr.open_dataset(written[0]) as ds:
        assert ds.attrs["scenario_name"] == name  # the real name is kept
        assert tomllib.loads(ds.attrs["scenario_toml"])["name"] == name


def test_safe_file_stem_keeps_safe_names_and_separates_others():
    from mcsim.scenario.config import safe_file_stem

    assert safe_file_stem("llama3-405b") == "llama3-405b"
    assert safe_file_stem("capacity_planning.v2") == "capacity_planning.v2"
    names = ("a/b", "a_b", "a b", "a\\b", "a" * 300, "a" * 301, "a_b\n", "..", "")
    stems = {safe_file_stem(n) for n in names}
    assert len(stems) == len(names)  # distinct names, distinct files
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", stem) for stem in stems)


ALL_CONTROLS = "".join(chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)])


def test_scenario_toml_round_trips_every_control_character(small_raw, tmp_path, capsys):
    path = _small_with(small_raw, tmp_path, description=f'tab\there, quote " and backslash \\ {ALL_CONTROLS}')
    out = tmp_path / "work" / "o.nc"
    assert main(["run", str(path), "--quiet", "--no-resume", "-o", str(out)]) == 0, capsys.readouterr().err
    with xr.open_dataset(out) as ds:
        stored = tomllib.loads(ds.attrs["scenario_toml"])
    assert stored["description"] == small_raw["description"]


@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
@example(text="key\n")  # a trailing newline must not pass for a bare key
@example(text="ü")  # bare keys are ASCII only
@settings(max_examples=300, deadline=None)
def test_dumps_toml_round_trips_any_string(text):
    from mcsim.scenario.config import dumps_toml

    raw = {
        "name": text,
        "description": text + ALL_CONTROLS,
        "sweep": {text: [text, 1.5]},
        "model": {text: text},
        "failures": [{"name": text}],
    }
    assert tomllib.loads(dumps_toml(raw)) == raw


def test_run_help_shows_defaults_and_run_table_override(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "override the scenario's [run] table" in " ".join(out.split())
    entries: dict[str, str] = {}  # option -> its help text (argparse starts each at "  -")
    for line in out.split("options:", 1)[1].splitlines():
        if line.startswith("  -"):
            option = line.split()[0]
            entries[option] = line
        elif entries:
            entries[option] += " " + line.strip()
    for option, default in (
        ("--runs", "else 1000)"),
        ("--seed", "else 0)"),
        ("--mode", "else fast)"),
        ("--chunk-runs", "(default 250)"),
        ("-o", "(default: results/NAME.nc"),
    ):
        assert default in " ".join(entries[option].split()), option
    assert "[run]" in entries["--runs"] and "[run]" in entries["--seed"] and "[run]" in entries["--mode"]


def test_stragglers_sigma_at_its_bound_runs(small_raw, tmp_path, capsys):
    path = _small_with(small_raw, tmp_path)
    out = tmp_path / "work" / "o.nc"
    status = main(["run", str(path), "--quiet", "--no-resume", "-o", str(out), "--set", "stragglers.sigma=5"])
    assert status == 0, capsys.readouterr().err
