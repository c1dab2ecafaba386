"""Output safety: -o checks, the resume store's checks, the writer's lock, failed and atomic writes.

Every output path is checked before any work (results, figures, report folders, fitted tables);
one writer per output; every file goes through one atomic writer, so no failure leaves a partial file.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from builders import SMALL_SCENARIO, write_toml
from child_python import run_python

import mcsim
from mcsim import _version, errors
from mcsim.cli.main import main
from mcsim.engine import resume
from mcsim.engine.resume import PieceStore
from mcsim.io import atomic
from mcsim.kernels.interface import N_OUT
from mcsim.scenario.config import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]
RAW = copy.deepcopy(SMALL_SCENARIO)
RAW["run"].update(runs=120, mode="fast")
RAW["failures"][0]["mtbf_hours"] = 200.0
RAW["sweep"] = {"parallelism.gpus": [64, 128]}
CHUNK = 40  # 2 configurations x 3 chunks = 6 pieces
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _numeric_equal(a, b) -> None:
    for name in a.data_vars:
        if a[name].dtype.kind in "fiub":
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcsim: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def scenario_file(tmp_path) -> Path:
    return write_toml(copy.deepcopy(RAW), tmp_path / "sweep.toml")


def _subprocess(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    return run_python(textwrap.dedent(code), cwd=cwd, env=env, timeout=300)


# --------------------------------------------------------------------------- -o checks


@pytest.mark.parametrize("target", ["scenario", "text file", "directory", "device", "empty", "foreign netcdf"])
def test_run_refuses_an_output_that_would_destroy_something(target, scenario_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = scenario_file.read_bytes()
    other = tmp_path / "notes.txt"
    other.write_text("my notes")
    (tmp_path / "adir").mkdir()
    foreign = tmp_path / "foreign.nc"
    import xarray as xr

    xr.Dataset({"a": ("x", [1.0, 2.0])}).to_netcdf(foreign, engine="netcdf4")
    foreign_bytes = foreign.read_bytes()
    output = {
        "scenario": str(scenario_file),
        "text file": str(other),
        "directory": str(tmp_path / "adir"),
        "device": os.devnull,
        "empty": "",
        "foreign netcdf": str(foreign),
    }[target]
    before = sorted(p.name for p in tmp_path.iterdir())
    status = main(["run", str(scenario_file), "-o", output])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and "-o" in line
    assert scenario_file.read_bytes() == original and other.read_text() == "my notes"
    assert foreign.read_bytes() == foreign_bytes and (tmp_path / "adir").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no results/, no lock, no pieces


def test_run_replaces_an_earlier_mcsim_result(scenario_file, tmp_path, capsys):
    out = tmp_path / "out.nc"
    assert main(["run", str(scenario_file), "-o", str(out), "--quiet", "--runs", "20"]) == 0
    assert main(["run", str(scenario_file), "-o", str(out), "--quiet", "--runs", "30"]) == 0
    assert mcsim.open_results(out).sizes["run"] == 30


def test_output_name_too_long_is_refused_and_a_long_one_works(scenario_file, tmp_path, capsys):
    status = main(["run", str(scenario_file), "-o", str(tmp_path / ("x" * 300 + ".nc"))])
    assert status == 2 and "at most 255 bytes" in _one_error_line(capsys.readouterr().err)
    # 255 bytes: the resume folder, lock and temporary names would exceed the limit; they are hashed.
    long = tmp_path / ("y" * 252 + ".nc")
    assert main(["run", str(scenario_file), "-o", str(long), "--quiet", "--runs", "20"]) == 0
    assert mcsim.open_results(long).sizes["run"] == 20
    assert all(len(os.fsencode(p.name)) <= 255 for p in tmp_path.iterdir())


def test_resume_folder_that_is_a_file_is_refused(scenario_file, tmp_path, capsys):
    out = tmp_path / "out.nc"
    store = PieceStore(out, scenario_from_dict(copy.deepcopy(RAW)), 250)
    store.folder.write_text("not a folder")
    status = main(["run", str(scenario_file), "-o", str(out)])
    assert status == 2 and "resume folder" in _one_error_line(capsys.readouterr().err)
    assert store.folder.read_text() == "not a folder" and not out.exists()


def test_resume_folder_not_writable_is_refused(scenario_file, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out.nc"
    store = PieceStore(out, scenario_from_dict(copy.deepcopy(RAW)), 250)
    store.folder.mkdir()
    store.folder.chmod(0o500)
    if IS_ROOT:  # root writes into a read-only folder: make creating a file there fail as it would
        import tempfile

        real = tempfile.TemporaryFile

        def refused(*args, dir=None, **kwargs):
            if dir is not None and Path(dir) == store.folder:
                raise PermissionError(errno.EACCES, "Permission denied")
            return real(*args, dir=dir, **kwargs)

        monkeypatch.setattr(tempfile, "TemporaryFile", refused)
    try:
        status = main(["run", str(scenario_file), "-o", str(out)])
    finally:
        store.folder.chmod(0o700)
    assert status == 2 and "not writable" in _one_error_line(capsys.readouterr().err)


# --------------------------------------------------------------------------- the resume store


@pytest.fixture(scope="module")
def reference():
    """The sweep without a store, and its scenario."""
    scenario = scenario_from_dict(copy.deepcopy(RAW))
    return scenario, mcsim.simulate(scenario, progress=False, chunk_runs=CHUNK)


def _stored(tmp_path, scenario, name="out.nc"):
    store = PieceStore(tmp_path / name, scenario, CHUNK)
    mcsim.simulate(scenario, progress=False, chunk_runs=CHUNK, store=store)
    return store


def _rerun(store, scenario):
    messages = []
    store = PieceStore(store.output, scenario, CHUNK, notify=messages.append)
    ds = mcsim.simulate(scenario, progress=False, chunk_runs=CHUNK, store=store, notify=messages.append)
    return ds, [m for m in messages if m.startswith("recomputing")]


def _rewrite(path: Path, rows=None, **header_changes) -> None:
    with np.load(path) as data:
        header = json.loads(str(data["header"][()]))
        old = data["rows"]
    header.update(header_changes)
    with open(path, "wb") as handle:
        np.savez(handle, rows=old if rows is None else rows, header=np.array(json.dumps(header)))


def test_piece_files_carry_what_they_are(reference, tmp_path):
    scenario, _ = reference
    store = _stored(tmp_path, scenario)
    piece = store.folder / "c1-r40-80.npz"
    with np.load(piece) as data:
        header = json.loads(str(data["header"][()]))
        rows = data["rows"]
    assert header["task"] == {"config": 1, "start": 40, "stop": 80, "optimize_every": None}
    assert header["config_hash"] == resume.config_hash(scenario.configs[1]) != resume.config_hash(scenario.configs[0])
    assert header["seed"] == 7 and header["mode"] == "fast" and header["model_hash"] == resume.model_source_hash()
    assert header["rows_sha256"] == resume.rows_checksum(rows)


@pytest.mark.parametrize(
    "tamper",
    [
        "another run's",
        "swapped configurations",
        "copied over another chunk",
        "NaN, checksum updated",
        "scaled x10",
        "another model",
        "truncated",
    ],
)
def test_tampered_pieces_are_recomputed_with_a_line(tamper, reference, tmp_path):
    scenario, expected = reference
    store = _stored(tmp_path, scenario)
    pieces = {p.stem: p for p in store.folder.glob("*.npz")}
    assert len(pieces) == 6
    if tamper == "another run's":  # same output, other seed: the other run's pieces copied in
        other_raw = copy.deepcopy(RAW)
        other_raw["run"]["seed"] = 8
        other = _stored(tmp_path / "other", scenario_from_dict(other_raw))
        shutil.copy(other.folder / "c0-r0-40.npz", pieces["c0-r0-40"])
        bad = {"c0-r0-40"}
    elif tamper == "swapped configurations":
        a, b = pieces["c0-r40-80"], pieces["c1-r40-80"]
        a.rename(tmp_path / "swap")
        b.rename(a)
        (tmp_path / "swap").rename(b)
        bad = {"c0-r40-80", "c1-r40-80"}
    elif tamper == "copied over another chunk":
        shutil.copy(pieces["c0-r0-40"], pieces["c0-r80-120"])
        bad = {"c0-r80-120"}
    elif tamper == "NaN, checksum updated":
        rows = np.full((CHUNK, N_OUT), np.nan)
        _rewrite(pieces["c1-r0-40"], rows, rows_sha256=resume.rows_checksum(rows))
        bad = {"c1-r0-40"}
    elif tamper == "scaled x10":
        with np.load(pieces["c1-r80-120"]) as data:
            rows = data["rows"] * 10
        _rewrite(pieces["c1-r80-120"], rows)
        bad = {"c1-r80-120"}
    elif tamper == "another model":  # a piece made by an edited kernel, left in this folder
        _rewrite(pieces["c0-r0-40"], model_hash="0" * 64)
        bad = {"c0-r0-40"}
    else:
        pieces["c0-r40-80"].write_bytes(pieces["c0-r40-80"].read_bytes()[:100])
        bad = {"c0-r40-80"}
    again, lines = _rerun(store, scenario)
    _numeric_equal(expected, again)
    assert sorted(re.match(r"recomputing (\S+):", m).group(1) for m in lines) == sorted(bad), lines


# One file of each subpackage that can change a piece's rows (the allow-list RESULT_PACKAGES),
# and files of the layers that only decide on, plan with or present the rows.
_CHANGES_ROWS = (
    "kernels/montecarlo.py",
    "kernels/interface.py",
    "model/workload.py",
    "model/energy.py",
    "engine/tasks.py",
    "engine/backends.py",
    "scenario/schema.py",
    "scenario/config.py",
)
_PRESENTS_ROWS = (
    "report/plots.py",
    "cli/main.py",
    "__init__.py",
    "analysis/summary.py",
    "io/netcdf.py",
    "planning/screen.py",
    "accessor.py",
)


def test_model_hash_covers_the_subpackages_that_change_results(tmp_path):
    """Edited in a copy, every file of scenario/, model/, kernels/ and engine/ changes the key (so saved
    pieces are refused); a file of the presentation, decision or planning layers does not."""
    package = tmp_path / "mcsim"
    shutil.copytree(ROOT / "mcsim", package, ignore=shutil.ignore_patterns("__pycache__"))
    base = resume.model_source_hash.__wrapped__(package)
    for name in _CHANGES_ROWS + _PRESENTS_ROWS:
        path = package / name
        original = path.read_text()
        path.write_text(original + "\n# edited\n")
        assert (resume.model_source_hash.__wrapped__(package) != base) is (name in _CHANGES_ROWS), name
        path.write_text(original)
    added = package / "engine" / "new_stage.py"  # a module added later is covered without a word
    added.write_text("X = 1\n")
    assert resume.model_source_hash.__wrapped__(package) != base


def test_model_hash_covers_the_versions_of_the_libraries_that_draw(tmp_path, monkeypatch):
    """Pieces drawn under another SciPy (other Sobol points) or NumPy are refused: the key holds their versions."""
    base = resume.model_source_hash.__wrapped__()
    real = _version.importlib.metadata.version
    for library in ("scipy", "numpy", "numba", "salib"):
        monkeypatch.setattr(
            _version.importlib.metadata,
            "version",
            lambda name, library=library: "0.0.1" if name.lower() == library else real(name),
        )
        assert resume.model_source_hash.__wrapped__() != base, library
    monkeypatch.setattr(_version.importlib.metadata, "version", real)
    assert resume.model_source_hash.__wrapped__() == base


def test_saved_pieces_are_refused_after_a_model_source_changes(reference, tmp_path, monkeypatch):
    """End to end: pieces saved under one model hash are not reused under another (nothing resumed)."""
    scenario, expected = reference
    store = _stored(tmp_path, scenario)
    messages: list[str] = []
    unchanged = PieceStore(store.output, scenario, CHUNK, notify=messages.append)
    mcsim.simulate(scenario, progress=False, chunk_runs=CHUNK, store=unchanged, notify=messages.append)
    assert any(m.startswith("resuming: 6 of 6") for m in messages), messages  # the control: reused
    monkeypatch.setattr(resume, "model_source_hash", lambda: "edited kernel")
    messages.clear()
    edited = PieceStore(store.output, scenario, CHUNK, notify=messages.append)
    again = mcsim.simulate(scenario, progress=False, chunk_runs=CHUNK, store=edited, notify=messages.append)
    assert not any(m.startswith("resuming") for m in messages), messages
    _numeric_equal(expected, again)


def test_changed_model_source_changes_the_sweep_key(reference, monkeypatch):
    scenario, _ = reference
    before = resume.sweep_key(scenario, CHUNK)
    monkeypatch.setattr(resume, "model_source_hash", lambda: "edited kernel")
    assert resume.sweep_key(scenario, CHUNK) != before


# --------------------------------------------------------------------------- one writer per output


def test_second_writer_of_the_same_output_is_refused(scenario_file, tmp_path, capsys):
    out = tmp_path / "out.nc"
    live = tmp_path / ".out.nc.parts-0123456789abcdef"  # the first writer's pieces
    live.mkdir()
    (live / "c0-r0-40.npz").write_bytes(b"live")
    with atomic.output_lock(out):
        status = main(["run", str(scenario_file), "-o", str(out), "--runs", "20"])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and str(out) in line and "another mcsim process" in line
    assert (live / "c0-r0-40.npz").read_bytes() == b"live" and not out.exists()
    assert main(["run", str(scenario_file), "-o", str(out), "--runs", "20", "--quiet"]) == 0  # lock released


def test_temporary_file_of_a_killed_write_is_removed_by_the_next_run(scenario_file, tmp_path):
    # kill -9 in the middle of the netCDF write (inside the real atomic writer)
    code = f"""
        import os, signal, xarray
        from mcsim.cli.main import main
        def killed(self, path, *args, **kwargs):
            open(path, "wb").write(b"half a file")
            os.kill(os.getpid(), signal.SIGKILL)
        xarray.Dataset.to_netcdf = killed
        main(["run", {str(scenario_file)!r}, "-o", "out.nc", "--runs", "20", "--quiet"])
    """
    proc = _subprocess(code, tmp_path)
    assert proc.returncode == -9, proc.stderr
    left = atomic.temp_files(tmp_path / "out.nc")
    assert len(left) == 1 and left[0].read_bytes() == b"half a file"
    others = [
        tmp_path / ".out.nc.tmp",
        tmp_path / ".out.nc.1234.tmp",
        tmp_path / ".out2.nc.0123abcd.tmp",
        tmp_path / ".xout.nc.0123abcd.tmp",
    ]
    for path in others:
        path.write_text("not ours")
    assert main(["run", str(scenario_file), "-o", str(tmp_path / "out.nc"), "--runs", "20", "--quiet"]) == 0
    assert atomic.temp_files(tmp_path / "out.nc") == [] and all(p.exists() for p in others)


# --------------------------------------------------------------------------- failed writes


def test_file_size_limit_during_the_netcdf_write(scenario_file, tmp_path):
    # Pieces (about 5 kB each) fit under the limit, the result file (about 180 kB) does not.
    code = f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, resource.RLIM_INFINITY))
        from mcsim.cli.main import main
        sys.exit(main(["run", {str(scenario_file)!r}, "-o", "out.nc", "--chunk-runs", "{CHUNK}", "--quiet"]))
    """
    proc = _subprocess(code, tmp_path)
    line = _one_error_line(proc.stderr)
    assert proc.returncode == 1 and "out.nc" in line and "ulimit -f" in line, proc.stderr
    assert not (tmp_path / "out.nc").exists() and atomic.temp_files(tmp_path / "out.nc") == []
    parts = list(tmp_path.glob(".out.nc.parts-*/*.npz"))
    assert len(parts) == 6 and not list(tmp_path.glob(".out.nc.parts-*/*.tmp"))
    messages = []
    rerun = subprocess.run(
        [sys.executable, "-m", "mcsim", "run", str(scenario_file), "-o", "out.nc", "--chunk-runs", str(CHUNK)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    messages = rerun.stderr.splitlines()
    assert rerun.returncode == 0 and any("6 of 6 tasks already done" in m for m in messages), rerun.stderr
    assert not any("recomputing" in m for m in messages)
    straight = mcsim.simulate(scenario_from_dict(copy.deepcopy(RAW)), progress=False)
    _numeric_equal(straight, mcsim.open_results(tmp_path / "out.nc"))


def test_disk_full_during_the_netcdf_write(scenario_file, tmp_path, capsys, monkeypatch):
    import xarray as xr

    def full(self, path, *args, **kwargs):
        Path(path).write_bytes(b"partial")
        raise RuntimeError("NetCDF: HDF error")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", full)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9, 0))
    out = tmp_path / "out.nc"
    status = main(["run", str(scenario_file), "-o", str(out), "--runs", "20", "--chunk-runs", "10", "--quiet"])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 1 and "no space left" in line and "rerun" in line
    assert not out.exists() and atomic.temp_files(out) == [] and len(list(tmp_path.glob(".out.nc.parts-*/*"))) == 4


def test_failed_piece_write_stops_with_one_line_and_keeps_earlier_pieces(scenario_file, tmp_path, capsys, monkeypatch):
    saved = []
    real = np.savez

    def savez(handle, **arrays):
        if len(saved) == 2:
            handle.write(b"some bytes")
            raise OSError(errno.ENOSPC, "No space left on device")
        saved.append(1)
        real(handle, **arrays)

    monkeypatch.setattr(np, "savez", savez)
    out = tmp_path / "out.nc"
    status = main(["run", str(scenario_file), "-o", str(out), "--chunk-runs", str(CHUNK)])
    line = _one_error_line(
        "\n".join(m for m in capsys.readouterr().err.splitlines() if not m.startswith("mcsim: running"))
    )
    assert status == 1 and "No space left on device" in line and "kept" in line
    assert not out.exists()
    folder = next(tmp_path.glob(".out.nc.parts-*"))
    assert sorted(p.name for p in folder.iterdir()) == ["c0-r0-40.npz", "c0-r40-80.npz"]  # no temporary file


def test_broken_pipe_exits_quietly(scenario_file, tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcsim", "run", str(scenario_file), "-o", "out.nc", "--runs", "20"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # `| head` that has already exited
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1
    assert "Traceback" not in err and "Exception ignored" not in err and "error" not in err, err
    assert (tmp_path / "out.nc").exists()


# --------------------------------------------------------------------------- one atomic writer


def test_one_atomic_writer_in_the_package():
    users = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "mcsim").rglob("*.py"))
        if re.search(r"mkstemp|os\.replace|os\.rename", p.read_text())
    ]
    assert users == ["mcsim/io/atomic.py"]


def test_every_writer_gives_the_usual_mode_and_cleans_up(reference, tmp_path, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from mcsim.report import plots
    from mcsim.report import result_report as report

    scenario, ds = reference
    old = os.umask(0o027)
    try:
        written = [
            mcsim.write_results(ds, tmp_path / "r.nc"),
            plots.save_figure(plots.plot_cdf(ds), tmp_path / "f.png"),
            *report.write_report(ds, tmp_path / "rep"),
            atomic.write_atomic(tmp_path / "t.toml", "x = 1\n"),
        ]
        store = PieceStore(tmp_path / "r.nc", scenario, CHUNK)
        store.save(resume.Task(0, 0, CHUNK), np.zeros((CHUNK, N_OUT)))
        written.append(store.path(resume.Task(0, 0, CHUNK)))
    finally:
        os.umask(old)
    assert {oct(p.stat().st_mode & 0o777) for p in written} == {oct(0o640)}
    target = tmp_path / "t.toml"
    with pytest.raises(KeyboardInterrupt):
        with atomic.atomic_open(target) as handle:
            handle.write(b"half")
            raise KeyboardInterrupt
    assert target.read_text() == "x = 1\n" and atomic.temp_files(target) == []


@pytest.fixture(scope="module")
def result_file(reference, tmp_path_factory):
    path = tmp_path_factory.mktemp("result") / "small.nc"
    return mcsim.write_results(reference[1], path)


@pytest.mark.parametrize(
    "suffix,magic", [(".jpg", b"\xff\xd8\xff"), (".svg", b"<?xml"), (".pdf", b"%PDF"), (".png", b"\x89PNG")]
)
def test_plot_writes_the_format_its_suffix_names(suffix, magic, result_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"fig{suffix}"
    assert main(["plot", str(result_file), "--kind", "cdf", "-o", str(out)]) == 0
    assert out.read_bytes().startswith(magic)


@pytest.mark.parametrize("output", ["fig.nc", "fig.txt", "/proc/mcsim-fig.png", ""])
def test_plot_to_a_path_it_cannot_write_is_a_usage_error(output, result_file, tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    if output.startswith("/proc") and not Path("/proc/self").exists():
        pytest.skip("no /proc")
    monkeypatch.chdir(tmp_path)
    status = main(["plot", str(result_file), "--kind", "cdf", "-o", output])
    assert status == 2 and "-o" in _one_error_line(capsys.readouterr().err)
    assert sorted(tmp_path.iterdir()) == []


def test_report_and_fit_refuse_an_empty_output(result_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(result_file), "-o", ""]) == 2
    _one_error_line(capsys.readouterr().err)
    log = tmp_path / "log.csv"
    log.write_text("unit,start_hours,end_hours,failed\n" + "".join(f"u{i},0,{100 + i},1\n" for i in range(20)))
    assert main(["fit-failures", str(log), "-o", ""]) == 2
    _one_error_line(capsys.readouterr().err)
    assert main(["fit-failures", str(log), "-o", str(log)]) == 2  # the input itself
    assert "is the log itself" in _one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.csv"]


def test_output_lock_is_exclusive_survives_a_stale_file_and_leaves_nothing(tmp_path):
    out = tmp_path / "sub" / "out.nc"
    lock = atomic.sidecar(out, ".lock")
    with atomic.output_lock(out):
        assert lock.exists()
        with pytest.raises(errors.OutputBusy, match="another mcsim process"):
            with atomic.output_lock(out):
                pass
    assert not lock.exists()
    lock.write_text("")  # left by a kill -9: nobody holds it
    with atomic.output_lock(out):
        pass
    assert sorted(p.name for p in out.parent.iterdir()) == []


def test_pieces_are_not_flushed_to_disk_and_results_are(tmp_path, monkeypatch):
    # A resume piece carries a SHA-256 of its rows and is run again when it fails it, so it is written
    # atomically but without fsync (two disk flushes per piece: a plan writes ~70, a sweep thousands).
    # A result file keeps both flushes.
    flushed = []
    original = atomic._fsync
    monkeypatch.setattr(
        atomic, "_fsync", lambda path, directory=False: flushed.append(path) or original(path, directory)
    )
    scenario = scenario_from_dict(copy.deepcopy(RAW))
    store = PieceStore(tmp_path / "out.nc", scenario, CHUNK)
    ds = mcsim.simulate(scenario, progress=False, chunk_runs=CHUNK, store=store)
    assert len(list(store.folder.iterdir())) == 6 and flushed == []
    # ... and a damaged piece is still caught and run again
    piece = sorted(store.folder.iterdir())[0]
    piece.write_bytes(piece.read_bytes()[:-7])
    messages: list[str] = []
    again_store = PieceStore(tmp_path / "out.nc", scenario, CHUNK, notify=messages.append)
    again = mcsim.simulate(scenario, progress=False, chunk_runs=CHUNK, store=again_store)
    assert len(messages) == 1 and "cannot be read" in messages[0]
    np.testing.assert_array_equal(again["wall_time"].values, ds["wall_time"].values)
    mcsim.write_results(ds, tmp_path / "out.nc")
    assert len(flushed) == 2 and flushed[1] == tmp_path  # the file, then its folder
    assert flushed[0].parent == tmp_path and flushed[0].name.endswith(".tmp")
