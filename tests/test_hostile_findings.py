"""Findings of a hostile review of the command line and the API: one test per finding, each failed before its fix.

Wrong results or lost data first, then crashes, then messages. Scenarios are small (20-120 runs) and
plans are the two-size plan of tests/planning/test_plan_hostile.py.
"""

from __future__ import annotations

import copy
import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from builders import SMALL_SCENARIO, write_toml
from plans import hostile_plan

import mcsim
from mcsim import errors
from mcsim.cli.main import main
from mcsim.io import atomic
from mcsim.io.netcdf import open_results, write_results
from mcsim.scenario.config import scenario_from_dict

ROOT = Path(__file__).resolve().parent.parent


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcsim: error: ") and "Traceback" not in err, err
    return lines[0]


def _small(runs: int = 20, **tables) -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=runs, mode="fast")
    for name, values in tables.items():
        raw.setdefault(name, {}).update(values)
    return raw


@pytest.fixture(scope="module")
def result_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("result")
    path = write_toml(_small(sweep={"parallelism.gpus": [32, 64]}), folder / "s.toml")
    assert main(["run", str(path), "-o", str(folder / "r.nc"), "--quiet"]) == 0
    return folder / "r.nc"


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("plan")
    path = write_toml(hostile_plan(), folder / "p.toml")
    assert main(["plan", str(path), "-o", str(folder / "p.nc"), "--quiet"]) == 0
    return folder / "p.nc"


# --------------------------------------------------------------------------- wrong results or lost data


@pytest.mark.parametrize("through_link", [False, True])
def test_report_never_overwrites_files_it_did_not_write(through_link, result_file, tmp_path, capsys):
    # Found: `mcsim report R.nc -o DIR` replaced a user's README.md and cdf.png in DIR (through a link too).
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my own notes")
    (mine / "cdf.png").write_bytes(b"my figure")
    target = mine
    if through_link:
        target = tmp_path / "link"
        target.symlink_to(mine, target_is_directory=True)
    assert main(["report", str(result_file), "-o", str(target)]) == 2
    assert "did not write" in _one_error_line(capsys.readouterr().err)
    assert (mine / "README.md").read_text() == "my own notes" and (mine / "cdf.png").read_bytes() == b"my figure"
    assert sorted(p.name for p in mine.iterdir()) == ["README.md", "cdf.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["mine"] + (["link"] if through_link else []))


def test_report_goes_into_a_new_folder_and_may_rewrite_its_own(plan_file, tmp_path, capsys):
    result_file = plan_file  # a plan's report: text only, quick
    folder = tmp_path / "rep"
    assert main(["report", str(result_file), "-o", str(folder)]) == 0
    first = sorted(p.name for p in folder.iterdir())
    assert "README.md" in first and atomic.REPORT_MANIFEST in first
    assert oct(folder.stat().st_mode & 0o777) == oct(0o777 & ~_umask())
    assert main(["report", str(result_file), "-o", str(folder)]) == 0  # its own files: replaced
    assert sorted(p.name for p in folder.iterdir()) == first
    (folder / "README.md").write_text("edited by hand")  # no longer what mcsim wrote: kept
    capsys.readouterr()
    assert main(["report", str(result_file), "-o", str(folder)]) == 2
    assert "README.md" in _one_error_line(capsys.readouterr().err)
    assert (folder / "README.md").read_text() == "edited by hand"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_report_onto_a_full_disk_leaves_nothing_behind(result_file, tmp_path, capsys, monkeypatch):
    from mcsim.report import plots, style

    real = style.save_figure
    calls = []

    def full(fig, path):
        calls.append(path)
        if len(calls) == 2:  # the second figure: the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fig, path)

    monkeypatch.setattr(style, "save_figure", full)
    monkeypatch.setattr(plots, "save_figure", full)  # the report saves through mcsim.report.plots
    folder = tmp_path / "deep" / "rep"
    assert main(["report", str(result_file), "-o", str(folder)]) == 1
    assert "No space left" in _one_error_line(capsys.readouterr().err)
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["run", "report", "plan", "schema"])
def test_a_full_disk_before_any_work_is_exit_1_not_a_users_mistake(command, result_file, tmp_path, capsys, monkeypatch):
    # Hostile finding of issue 42: on a full disk the output's folder check (a file created and removed) failed
    # with the disk's error and exit 2, a user's mistake; `mcsim --help` lists a refused write as exit 1.
    from mcsim.cli import output

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output.tempfile, "TemporaryFile", full)
    target = tmp_path / "out" / {"schema": "x.json", "report": "rep"}.get(command, "x.nc")
    inputs = {
        "run": [str(write_toml(_small(), tmp_path / "s.toml"))],
        "report": [str(result_file)],
        "plan": [str(write_toml(hostile_plan(), tmp_path / "p.toml"))],
        "schema": [],
    }[command]
    status = main([command, *inputs, "-o", str(target), *(["--quiet"] if command != "schema" else [])])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 1, line
    assert line == f"mcsim: error: cannot create a file in {tmp_path}: No space left on device"
    assert not target.parent.exists()


def test_a_file_created_at_the_plans_output_while_it_runs_is_never_replaced(tmp_path, capsys, monkeypatch):
    # Found: a file put at -o while the plan ran was replaced by the result.
    import mcsim.planning.run as plan_run

    out = tmp_path / "p.nc"
    real = plan_run.plan_dataset

    def meanwhile(result):
        out.write_text("someone else's file")
        return real(result)

    monkeypatch.setattr(plan_run, "plan_dataset", meanwhile)
    path = write_toml(hostile_plan(), tmp_path / "p.toml")
    assert main(["plan", str(path), "-o", str(out), "--quiet"]) == 2
    assert "while mcsim ran" in _one_error_line(capsys.readouterr().err)
    assert out.read_text() == "someone else's file" and atomic.temp_files(out) == []


def test_atomic_path_replaces_only_the_file_claimed_at_start(tmp_path):
    out = tmp_path / "o.bin"
    with pytest.raises(FileExistsError):  # nothing was there at the start; something is now
        with atomic.atomic_path(out, previous=None) as tmp:
            tmp.write_bytes(b"result")
            out.write_bytes(b"theirs")
    assert out.read_bytes() == b"theirs" and atomic.temp_files(out) == []
    claimed = atomic.file_identity(out)
    with atomic.atomic_path(out, previous=claimed) as tmp:
        tmp.write_bytes(b"result")
    assert out.read_bytes() == b"result"
    with pytest.raises(FileExistsError):  # claimed the old file; it was replaced by another meanwhile
        with atomic.atomic_path(out, previous=claimed) as tmp:
            tmp.write_bytes(b"newer")
    assert out.read_bytes() == b"result"


def test_a_piece_path_that_is_a_directory_is_refused_not_a_changed_result(tmp_path, capsys):
    from mcsim.engine.resume import PieceStore
    from mcsim.scenario.config import load_scenario

    path = write_toml(_small(runs=40), tmp_path / "s.toml")
    out = tmp_path / "out.nc"
    store = PieceStore(out, load_scenario(path), 20)
    (store.folder / "c0-r0-20.npz").mkdir(parents=True)
    assert main(["run", str(path), "-o", str(out), "--chunk-runs", "20", "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "c0-r0-20.npz" in line and "not a piece file" in line and not out.exists()


def test_resume_key_covers_library_versions_and_every_result_module(monkeypatch):
    # The key (engine/resume.py) hashes the libraries that draw or compute and every module of the
    # subpackages that can change a row, backends.py (which places the rows) among them.
    from mcsim import _version
    from mcsim.engine import resume

    assert {"numpy", "scipy", "numba", "salib"} <= set(resume.RESULT_LIBRARIES)
    assert "engine" in resume.RESULT_PACKAGES
    before = resume.model_source_hash.__wrapped__()
    monkeypatch.setattr(_version, "library_versions", lambda: "scipy 0.0")
    assert resume.model_source_hash.__wrapped__() != before


# --------------------------------------------------------------------------- crashes


def test_report_of_a_plan_with_a_bad_recommended_or_finalist_index(plan_file, tmp_path, capsys):
    ds = open_results(plan_file).load()
    n = ds.sizes["candidate"]
    for name, value in [
        ("recommended", -1),
        ("recommended", n + 5),
        ("recommended", np.nan),
        ("recommended", "x"),
        ("finalist_candidate", -3),
    ]:
        bad = ds.copy()
        if name == "recommended":
            bad["recommended"] = ((), np.array(value))
        else:
            values = bad["finalist_candidate"].values.copy()
            values[0] = value
            bad["finalist_candidate"] = (bad["finalist_candidate"].dims, values)
        path = write_results(bad, tmp_path / "bad.nc")
        folder = tmp_path / "rep"
        assert main(["report", str(path), "-o", str(folder)]) == 2, (name, value)
        assert name in _one_error_line(capsys.readouterr().err)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.nc"], (name, value)


def test_plan_workers_beyond_the_cpus_is_one_line(tmp_path, capsys):
    path = write_toml(hostile_plan(), tmp_path / "p.toml")
    assert main(["plan", str(path), "-o", str(tmp_path / "p.nc"), "--workers", "100000"]) == 2
    assert "--workers" in _one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


@pytest.mark.parametrize("command", ["run", "report"])
def test_output_name_of_bytes_that_are_not_utf8(command, result_file, tmp_path, capsys):
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xff\xfe.nc")
    if command == "run":
        argv = ["run", str(write_toml(_small(), tmp_path / "s.toml")), "-o", name, "--quiet"]
    else:
        argv = ["report", str(result_file), "-o", name]
    assert main(argv) == 2
    assert "UTF-8" in _one_error_line(capsys.readouterr().err)
    assert [p.name for p in tmp_path.iterdir()] in ([], ["s.toml"])


def test_summary_to_a_full_device_is_one_line(result_file):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "mcsim", "summary", str(result_file)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=300,
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "mcsim: error: cannot write the standard output: No space left on device"
    ]


# --------------------------------------------------------------------------- messages


def test_validate_errors_name_the_option(capsys):
    assert main(["validate", "--seed", "-1", "--runs", "2"]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith("mcsim: error: --seed: ")
    assert main(["validate", "--runs", "100000000"]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith("mcsim: error: --runs: ")


@pytest.mark.parametrize("command", ["summary", "report", "sensitivity", "plot"])
def test_commands_on_a_directory_say_directory(command, tmp_path, capsys):
    argv = [command, str(tmp_path)]
    if command == "plot":
        argv += ["--kind", "cdf", "-o", str(tmp_path / "f.png")]
    if command == "report":
        argv += ["-o", str(tmp_path / "rep")]
    assert main(argv) == 2
    assert "is a directory" in _one_error_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_unknown_table_of_a_plan_file_lists_the_plan_tables(tmp_path, capsys):
    raw = hostile_plan()
    raw["searches"] = {"gpus": [8]}
    assert main(["plan", str(write_toml(raw, tmp_path / "p.toml")), "-o", str(tmp_path / "p.nc")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "searches" in line and "search" in line.split("searches", 1)[1]


def test_lock_path_that_is_a_directory_is_named_as_the_lock(tmp_path, capsys):
    path = write_toml(_small(), tmp_path / "s.toml")
    (tmp_path / ".out.nc.lock").mkdir()
    assert main(["run", str(path), "-o", str(tmp_path / "out.nc"), "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "lock" in line and ".out.nc.lock" in line


# --------------------------------------------------------------------------- a lock without flock


def test_lock_without_flock_falls_back_to_an_owner_file(tmp_path, monkeypatch):
    # NFS or Lustre without flock: fcntl.flock fails with ENOLCK (or ENOSYS, EOPNOTSUPP).
    def no_flock(fd):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(atomic, "_lock_without_waiting", no_flock)
    out = tmp_path / "out.nc"
    with atomic.output_lock(out) as held:
        assert held.name == ".out.nc.lock.owner"
        host, pid = held.read_text().split()
        assert int(pid) == os.getpid()
        with pytest.raises(errors.OutputBusy, match=f"{host} {pid}"):
            with atomic.output_lock(out):
                pass
    assert list(tmp_path.iterdir()) == []
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / ".out.nc.lock.owner").write_text(f"{host} {gone.stdout.strip()}\n")  # killed: taken over
    with atomic.output_lock(out):
        pass
    (tmp_path / ".out.nc.lock.owner").write_text("another-host 1\n")  # cannot be checked from here: refused
    with pytest.raises(errors.OutputBusy, match="remove that file"):
        with atomic.output_lock(out):
            pass


# --------------------------------------------------------------------------- ETTR in its documented bounds


def test_ettr_stays_in_0_1_with_few_gpus_and_straggler_noise():
    # Found: with 1-4 GPUs the iteration factor (the maximum of G lognormals of median 1) and the job
    # factor fall below 1, so a run finishes faster than the nominal iteration time and ETTR reached 1.68
    # (2.3 in random scenarios). Random small scenarios, both modes; docs/model.md §11 promises [0, 1].
    from mcsim.scenario.config import scenario_from_dict

    rng = np.random.default_rng(22)
    for case in range(6):
        gpus = int(rng.integers(1, 5))
        raw = _small(runs=30)
        raw["model"].update(
            params=1e8, layers=4, hidden=512, tokens=2048.0 * 24 * int(rng.integers(1, 20)), global_batch=24
        )
        raw["hardware"]["gpus_per_node"] = gpus
        raw["parallelism"] = {"gpus": gpus, "tp": 1, "pp": 1, "microbatch": 1}
        raw["stragglers"] = {"sigma": float(rng.uniform(0.1, 1.5)), "job_sigma": float(rng.uniform(0.0, 0.8))}
        raw["failures"][0]["mtbf_hours"] = float(rng.choice([1e-3, 1e6]))  # some runs fail, some not
        raw["run"].update(mode=("fast", "exact")[case % 2], seed=case)
        ds = mcsim.simulate(scenario_from_dict(raw), progress=False)
        ettr = ds["ettr"].values
        assert np.isfinite(ettr).all() and (ettr >= 0).all() and (ettr <= 1).all(), (case, gpus, float(ettr.max()))


# --------------------------------------------------------------------------- sensitivity on too few draws


def test_sensitivity_on_too_few_draws_says_how_many_are_needed(tmp_path, capsys):
    # Found: on 2-16 draws `mcsim sensitivity` printed NaN indices and ranked them first.
    from mcsim.analysis.sensitivity import MIN_GIVEN_DATA_DRAWS

    raw = _small(runs=4)
    raw["run"]["draws"] = 8
    raw["uncertain"] = {"compute.efficiency": {"dist": "uniform", "low": 0.4, "high": 0.6}}
    out = tmp_path / "u.nc"
    assert main(["run", str(write_toml(raw, tmp_path / "u.toml")), "-o", str(out), "--quiet"]) == 0
    assert main(["sensitivity", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "8 parameter draws are too few" in line and f"at least {MIN_GIVEN_DATA_DRAWS}" in line


# --------------------------------------------------------------------------- lazy opening


def test_open_results_with_chunks_stays_lazy(result_file):
    pytest.importorskip("dask")
    eager = open_results(result_file)
    lazy = mcsim.open_results(result_file, chunks={"run": 7})
    try:
        assert lazy["wall_time"].chunks is not None and lazy["completed"].chunks is not None
        assert lazy["completed"].dtype == np.bool_
        for name in ("wall_time", "cost", "completed"):
            np.testing.assert_array_equal(lazy[name].values, eager[name].values)
    finally:
        lazy.close()


def test_a_sweep_dimension_named_draw_is_refused_not_pooled(tmp_path, capsys):
    # A file whose sweep dimension was renamed 'draw' was summarised with that dimension pooled like
    # parameter draws: a silently different answer. 'draw' is reserved for parameter draws.
    ds = mcsim.simulate(
        scenario_from_dict({**copy.deepcopy(SMALL_SCENARIO), "sweep": {"parallelism.gpus": [512, 1024]}})
    )
    path = tmp_path / "renamed.nc"
    ds.rename({"gpus": "draw"}).to_netcdf(path)
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dimension named 'draw' but no uncertain inputs" in err[0], err


def test_an_absurdly_small_efficiency_prints_no_numpy_warning(recwarn):
    # efficiency = 1e-300 is legal (> 0): the MFU's denominator overflowed with a RuntimeWarning.
    from mcsim.model.workload import workload

    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["compute"] = {**raw.get("compute", {}), "efficiency": 1e-300}
    wl = workload(scenario_from_dict(raw).configs[0])
    assert wl.mfu_ideal == 0.0 and not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_many_draws_are_estimated_and_checked_before_their_preparation(monkeypatch):
    # 100,000 draws spent minutes preparing before any estimate was printed, and --max-hours did not
    # apply: the preparation is now estimated (PREPARE_SECONDS_PER_DRAW per configuration and draw)
    # and checked first, before the draws are made or prepared.
    from mcsim.engine import simulate as simulate_module
    from mcsim.errors import ScenarioError
    from mcsim.scenario import draws as draws_module
    from mcsim.scenario.limits import limits

    def never(*args, **kwargs):
        raise AssertionError("the draws were made or prepared before the time check")

    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(draws=100_000, runs=2)
    raw["uncertain"] = {"stragglers.sigma": {"dist": "uniform", "low": 0.0, "high": 0.1}}
    scenario = scenario_from_dict(raw)
    hours = 100_000 * draws_module.PREPARE_SECONDS_PER_DRAW / 3600.0  # one configuration
    monkeypatch.setattr(simulate_module, "DrawPlan", never)
    monkeypatch.setattr(simulate_module, "prepare_draws", never)
    messages: list[str] = []
    with limits(max_hours=hours * 0.99), pytest.raises(ScenarioError, match=r"run\.draws: estimated"):
        mcsim.simulate(scenario, progress=False, notify=messages.append)
    assert messages == []  # refused before anything is announced
    with limits(max_hours=hours * 1.01), pytest.raises(AssertionError, match="before the time check"):
        mcsim.simulate(scenario, progress=False, notify=messages.append)  # within the limit: goes on
    assert messages == ["preparing 100,000 (configuration, draw) pairs: estimated 20 min at most"]


def test_fast_mode_draws_count_the_short_block_law_in_their_preparation(monkeypatch):
    # A review found that fast mode with stragglers.sigma drawn prepares a short-block law per draw
    # (up to 39 ms measured), which the estimate above (12 ms a pair) did not count.
    from mcsim.engine import simulate as simulate_module
    from mcsim.errors import ScenarioError
    from mcsim.scenario import draws as draws_module
    from mcsim.scenario.limits import limits

    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(draws=100_000, runs=2, mode="fast")
    raw["uncertain"] = {"stragglers.sigma": {"dist": "uniform", "low": 0.0, "high": 0.1}}
    scenario = scenario_from_dict(raw)
    monkeypatch.setattr(simulate_module, "DrawPlan", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    per_pair = draws_module.PREPARE_SECONDS_PER_DRAW + draws_module.PREPARE_SECONDS_PER_SHORT_BLOCK_LAW
    assert draws_module.PREPARE_SECONDS_PER_SHORT_BLOCK_LAW >= 0.039  # the slowest law measured
    with limits(max_hours=100_000 * per_pair / 3600.0 * 0.99), pytest.raises(ScenarioError, match=r"run\.draws"):
        mcsim.simulate(scenario, progress=False)
