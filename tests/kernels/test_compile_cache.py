"""Where compiled kernels are cached, and when they are recompiled (mcsim/kernels/accelerate.py).

The tests run as root here and in CI, and root ignores file permissions; an unwritable
location is therefore simulated by a path that cannot be created: a folder "inside" a
regular file (mkdir fails with ENOTDIR for every user), and the package's ``__pycache__``
replaced by a regular file (mcsim never caches there, but nothing may depend on it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from child_python import run_python

import mcsim
from mcsim.kernels import accelerate, interface

PACKAGE = Path(mcsim.__file__).resolve().parent
NO_CACHE_WARNING = "mcsim: no writable folder for compiled kernels"

# A trivial kernel compiled through accelerate.jit: cheap to compile, cached like the real ones.
PROBE = """
from .accelerate import jit


@jit
def probe(x):
    return x + 1
"""
# Imports a probe kernel, calls it, and reports where it was cached and whether it was a cache hit.
PROBE_RUN = """
import json, mcsim.kernels.accelerate as acc
from mcsim.kernels.probe import probe
assert probe(1) == 2
stats = probe.stats
print(json.dumps({"folder": None if acc.CACHE_FOLDER is None else str(acc.CACHE_FOLDER),
                  "hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
                  "stamp": acc.SOURCE_HASH, "file": acc.__file__, "mode": acc.CACHE_MODE}))
"""
# Simulates a tiny scenario with the real kernels.
SIMULATE = """
import json, math, warnings
warnings.simplefilter("always")
import mcsim, mcsim.kernels.accelerate as acc
from mcsim.scenario.config import scenario_from_dict
raw = json.loads({raw!r})
ds = mcsim.simulate(scenario_from_dict(raw, "tiny.toml"), progress=False)
assert all(math.isfinite(v) and v > 0 for v in ds["wall_time"].values)
print(json.dumps({{"folder": None if acc.CACHE_FOLDER is None else str(acc.CACHE_FOLDER),
                  "file": mcsim.__file__, "runs": int(ds.sizes["run"])}}))
"""


def _copy_package(dest: Path, probe: bool = False) -> Path:
    """A copy of the installed mcsim package under ``dest`` (no compiled files); returns the package."""
    package = dest / "mcsim"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc"))
    if probe:
        (package / "kernels" / "probe.py").write_text(PROBE)
    return package


def _blocked(tmp_path: Path) -> Path:
    """A path under a regular file: no user, root included, can create it."""
    blocker = tmp_path / "a-regular-file"
    blocker.write_text("")
    return blocker / "cannot-exist"


def _env(site: Path, home: Path, tmpdir: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH", "XDG_CACHE_HOME")}
    env.update(PYTHONPATH=str(site), HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def _run(code: str, env: dict, cwd: Path, tempdir: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; ``tempdir`` replaces tempfile's choice (which would fall
    back from an unusable TMPDIR to /tmp) before mcsim is imported."""
    prefix = f"import tempfile; tempfile.tempdir = {str(tempdir)!r}\n" if tempdir is not None else ""
    return run_python(prefix + code, env=env, cwd=cwd, timeout=900)


def _tiny_scenario_json(small_raw: dict) -> str:
    small_raw["run"].update(runs=4, mode="fast")
    return json.dumps(small_raw)


# --------------------------------------------------------------------------- invalidation


def test_source_hash_covers_every_kernel_file(tmp_path):
    copy = tmp_path / "kernels"
    shutil.copytree(PACKAGE / "kernels", copy, ignore=shutil.ignore_patterns("__pycache__"))
    original = accelerate.kernel_source_hash(copy)
    assert original == accelerate.kernel_source_hash(PACKAGE / "kernels") == accelerate.SOURCE_HASH
    seen = {original}
    for name in ("rng.py", "normal.py", "renewal.py", "montecarlo.py"):  # helpers and the entry point
        path = copy / name
        text = path.read_text()
        path.write_text(text + "\n# an edit\n")
        changed = accelerate.kernel_source_hash(copy)
        assert changed not in seen, name
        seen.add(changed)
        path.write_text(text)
        assert accelerate.kernel_source_hash(copy) == original
    (copy / "extra.py").write_text("X = 1\n")  # a new kernel file counts too
    assert accelerate.kernel_source_hash(copy) != original


def test_every_kernel_is_stamped_with_the_source_hash():
    if accelerate.CACHE_FOLDER is None:
        pytest.skip("no writable cache folder in this environment")
    assert accelerate.CACHE_MODE == "mcsim"  # not the fallback: Numba's caching classes are as expected
    from mcsim.kernels import montecarlo, normal, renewal, rng

    dispatchers = [montecarlo.simulate_runs, normal.max_lognormal_factor, renewal.next_failure, rng.uniform]
    for dispatcher in dispatchers:
        locator = dispatcher._cache._impl.locator
        assert locator.get_source_stamp() == accelerate.kernel_source_hash()
        assert Path(locator.get_cache_path()) == accelerate.CACHE_FOLDER


def test_editing_a_helper_file_recompiles_a_cached_kernel(tmp_path):
    """End to end: a cached kernel is reused, then recompiled after another kernel file changes."""
    site = tmp_path / "site"
    package = _copy_package(site, probe=True)
    env = _env(site, tmp_path)
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")
    first, second = (json.loads(_run(PROBE_RUN, env, tmp_path).stdout) for _ in range(2))
    assert Path(first["file"]).is_relative_to(package)
    assert first["folder"] == str(tmp_path / "numba-cache" / "mcsim" / first["stamp"][:16])  # one folder per build
    assert (first["misses"], second["hits"]) == (1, 1)  # compiled once, then loaded from the cache
    helper = package / "kernels" / "rng.py"  # not the file that defines the probe
    helper.write_text(helper.read_text() + "\n# a change in a helper\n")
    third = json.loads(_run(PROBE_RUN, env, tmp_path).stdout)
    assert third["stamp"] != first["stamp"]
    assert (third["hits"], third["misses"]) == (0, 1)  # stale machine code is not reused


def test_a_cache_write_the_machine_refuses_costs_only_the_cache(tmp_path):
    """Found at the lowest versions: under ``ulimit -f`` (or a full disk) Numba's save of compiled code raised
    EFBIG, naming no file, and the run ended in it ("cannot write the standard output"). The compiled code is
    used anyway and compiled again next time; what was not saved is listed."""
    site = tmp_path / "site"
    _copy_package(site, probe=True)
    env = _env(site, tmp_path)
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")
    limited = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.RLIM_INFINITY))\n"  # smaller than any cache file
    )
    proc = _run(limited + PROBE_RUN + "print(len(acc.CACHE_WRITES_FAILED))\n", env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    report, failed = proc.stdout.splitlines()
    assert json.loads(report)["misses"] == 1 and int(failed) == 1
    again = json.loads(_run(PROBE_RUN, env, tmp_path).stdout)  # no limit: compiled again, then saved
    assert (again["hits"], again["misses"]) == (0, 1)


# --------------------------------------------------------------------------- location


def test_cache_folder_order(tmp_path, monkeypatch):
    """NUMBA_CACHE_DIR, then the user's cache folder, then a private temp folder; never the package."""
    blocked = _blocked(tmp_path)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "env"))
    assert accelerate._cache_folder() == tmp_path / "env" / "mcsim"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocked))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert accelerate._cache_folder() == tmp_path / "xdg" / "mcsim" / "numba"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert accelerate._cache_folder() == tmp_path / "home" / ".cache" / "mcsim" / "numba"
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.setenv("HOME", str(blocked))
    monkeypatch.setattr(accelerate.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    private = accelerate._cache_folder()
    assert private == tmp_path / "tmp" / f"mcsim-numba-cache-{os.getuid()}"
    assert private.stat().st_mode & 0o777 == 0o700
    private.chmod(0o777)  # a folder others can write to is not trusted (cache files are pickles)
    assert accelerate._cache_folder() is None
    monkeypatch.setattr(accelerate.tempfile, "tempdir", str(blocked))
    assert accelerate._cache_folder() is None


def test_user_cache_root_follows_each_platforms_convention(tmp_path, monkeypatch):
    """platformdirs' user_cache_dir("mcsim"): XDG on Linux (a relative XDG_CACHE_HOME is ignored, as the
    XDG specification says), ~/Library/Caches on macOS, %LOCALAPPDATA% on Windows."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert accelerate.user_cache_root("linux") == tmp_path / "xdg" / "mcsim"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert accelerate.user_cache_root("linux") == tmp_path / "home" / ".cache" / "mcsim"
    assert accelerate.user_cache_root("darwin") == tmp_path / "home" / "Library" / "Caches" / "mcsim"
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert accelerate.user_cache_root("win32") == tmp_path / "local" / "mcsim" / "Cache"
    monkeypatch.delenv("LOCALAPPDATA")
    assert accelerate.user_cache_root("win32") == tmp_path / "home" / "AppData" / "Local" / "mcsim" / "Cache"


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_nothing_is_written_into_the_installed_package(tmp_path):
    """Compiled kernels go to the user's cache folder: a file left in site-packages survives an uninstall,
    and the folder it keeps alive is later imported as an empty namespace package."""
    site = tmp_path / "site"
    package = _copy_package(site, probe=True)
    before = _files(package)
    home = tmp_path / "home"
    env = _env(site, home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # Python's own .pyc files are pip's to remove, and not the question
    first, second = (json.loads(_run(PROBE_RUN, env, tmp_path).stdout) for _ in range(2))
    assert Path(first["file"]).is_relative_to(package) and first["mode"] == "mcsim"
    assert (first["misses"], second["hits"]) == (1, 1)  # written, then read back: the cache works
    folder = Path(first["folder"])
    assert folder == home / ".cache" / "mcsim" / "numba" / first["stamp"][:16]
    assert any(folder.glob("*probe*.nbi")) and any(folder.glob("*probe*.nbc"))
    assert _files(package) == before


def test_falls_back_to_numbas_cache_when_its_private_classes_change(tmp_path):
    """A Numba whose numba.core.caching lacks the classes mcsim extends: the kernels still compile and
    are cached, by Numba's own cache=True (here in NUMBA_CACHE_DIR)."""
    site = tmp_path / "site"
    _copy_package(site, probe=True)
    env = _env(site, tmp_path)
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")
    changed = "import numba.core.caching as c\ndel c._CacheLocator\n" + PROBE_RUN
    runs = [_run(changed, env, tmp_path) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-3000:]
    first, second = (json.loads(r.stdout) for r in runs)
    assert first["mode"] == second["mode"] == "numba"
    assert (first["misses"], second["hits"]) == (1, 1)
    assert any((tmp_path / "numba-cache").rglob("*probe*.nbi"))


@pytest.mark.slow
def test_read_only_install_without_writable_folders_runs_uncached(tmp_path, small_raw):
    site = tmp_path / "site"
    package = _copy_package(site)
    (package / "kernels" / "__pycache__").write_text("")  # the install's cache folder cannot be made
    blocked = _blocked(tmp_path)
    proc = _run(
        SIMULATE.format(raw=_tiny_scenario_json(small_raw)), _env(site, blocked, blocked), tmp_path, tempdir=blocked
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert NO_CACHE_WARNING in proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert Path(result["file"]).is_relative_to(package) and result["folder"] is None and result["runs"] == 4


def test_read_only_install_uses_a_private_temp_folder(tmp_path):
    site = tmp_path / "site"
    package = _copy_package(site, probe=True)
    (package / "kernels" / "__pycache__").write_text("")
    blocked = _blocked(tmp_path)
    writable_tmp = tmp_path / "tmp"
    writable_tmp.mkdir()
    proc = _run(PROBE_RUN, _env(site, blocked, writable_tmp), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert NO_CACHE_WARNING not in proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    private = writable_tmp / f"mcsim-numba-cache-{os.getuid()}"
    folder = Path(result["folder"])
    assert Path(result["file"]).is_relative_to(package) and folder == private / result["stamp"][:16]
    assert result["misses"] == 1 and any(folder.glob("*probe*.nbi")) and any(folder.glob("*probe*.nbc"))
    assert private.stat().st_mode & 0o777 == folder.stat().st_mode & 0o777 == 0o700


# ----------------------------------------------------------- the fall-backs, in this process


def _probe(x):
    return x + 1


def test_fall_backs_seen_in_this_process(monkeypatch):
    """The fall-backs that the child processes above go through, taken here where coverage sees them: a
    Numba without the caching classes mcsim extends, or whose classes refuse a kernel, caches by Numba's
    own ``cache=True``; a cache index that cannot be read means "unknown"."""
    if accelerate.JIT_DISABLED:
        pytest.skip("the kernels are plain Python here: nothing is cached")
    monkeypatch.setattr(accelerate, "_NUMBA_CACHING", False)
    assert accelerate._kernel_function_cache() is None
    monkeypatch.setattr(accelerate, "_NUMBA_CACHING", True)
    monkeypatch.delattr(accelerate.caching, "_CacheLocator")
    assert accelerate._kernel_function_cache() is None

    def refuses(py_func):
        raise TypeError("the private classes changed")

    monkeypatch.setattr(accelerate, "_FUNCTION_CACHE", refuses)
    monkeypatch.setattr(accelerate, "CACHE_MODE", "mcsim")
    dispatcher = accelerate.jit_parallel(_probe)  # not compiled: a dispatcher is all it takes
    assert accelerate.CACHE_MODE == "numba" and dispatcher.targetoptions["parallel"]
    assert type(dispatcher._cache).__name__ == "FunctionCache"  # Numba's own, as numba.jit(cache=True) sets

    class Unreadable:
        def _load_index(self):
            raise OSError("unreadable index")

    cache = type("Cache", (), {"_cache_file": Unreadable()})
    assert accelerate.cached(type("Dispatcher", (), {"_cache": cache})) is None


def test_compiled_asks_the_cache_for_an_entry_point_not_compiled_here(monkeypatch):
    if accelerate.JIT_DISABLED:
        pytest.skip("the kernels are plain Python here: nothing to compile")
    fresh = type("Dispatcher", (), {"signatures": [], "_cache": None})  # no machine code, no cache: unknown
    monkeypatch.setattr(interface, "simulate_runs", fresh)
    assert interface.compiled() is None


def test_a_result_numba_cannot_cache_is_a_warning_not_a_crash():
    # Numba refuses to cache a compile result that has dynamic globals (as the run loop has with
    # NUMBA_OPT=0) or lifted loops, and warns naming the function's file: mcsim's cache locator had no
    # file, so the first run ended in an AttributeError traceback instead of running uncached.
    import types
    import warnings

    cache_class = accelerate._kernel_function_cache()
    if cache_class is None:
        pytest.skip("this Numba lacks the caching classes mcsim extends")

    def kernel(x):
        return x + 1

    impl = cache_class._impl_class(kernel)
    uncachable = types.SimpleNamespace(
        lifted=(),
        library=types.SimpleNamespace(has_dynamic_globals=True),
        fndesc=types.SimpleNamespace(qualname="kernel"),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert impl.check_cachable(uncachable) is False
    assert any("Cannot cache" in str(w.message) and w.filename.endswith("test_compile_cache.py") for w in caught)
