"""All Numba settings of mcsim in one place, and where compiled kernels are cached.

Every kernel is compiled through :func:`jit` (serial functions that may allocate: the
entry points ``simulate_runs`` and ``simulate_runs_table``;
:func:`mcsim.engine.threads.run_kernel` splits runs over threads), :func:`jit_unmanaged`
(the run loop and its helpers: no reference counting, no allocation) or
:func:`jit_inline` (small helpers inlined into their callers);
:func:`jit_parallel` (a ``prange`` entry point) is kept for the frozen copy of the run loop
as it was before it became a loop of events (``benchmarks/baseline_kernel.py``). The options
below are the only ones in the code base:

- ``nopython``: kernels never fall back to Python objects.
- ``nogil``: a caller's threads (e.g. dask workers) can run kernels concurrently.
- ``fastmath`` is off: results must be bit-identical across machines' thread
  counts, and reassociation would break that.
- ``error_model="numpy"``: division by zero gives inf/nan instead of raising,
  which keeps ``prange`` loops free of exception paths.

Caching (compiled code reused by later processes) is mcsim's own, through
Numba's cache machinery with two changes of policy:

- **Invalidation.** Numba stamps a cached function with the hash of the file
  that defines it, so a change to a helper in another kernel file would reuse
  stale machine code. Here every kernel's stamp is the hash of *all* kernel
  sources (:func:`kernel_source_hash`) and the Numba version: any change to any
  kernel file recompiles everything.
- **Location.** Never the installed package: files Numba writes beside the
  sources survive ``pip uninstall``, and the folder they keep alive is then
  imported as an empty namespace package by a later editable install. The
  cache is the first usable of: ``$NUMBA_CACHE_DIR/mcsim`` when the variable is
  set, the user's cache folder (:func:`user_cache_root`, then ``numba``), and a
  private folder in the temporary directory (a read-only install on a cluster
  node with no writable home). A folder in the temporary directory is used only
  when it belongs to this user and nobody else can write to it (cache files are
  pickles). Inside it, each build of the kernels (:data:`SOURCE_HASH`) has its
  own folder, so that environments with other kernel sources or another Numba
  (a second virtual environment, a second clone) do not evict each other's
  compiled code; ``rm -rf`` of the folder is always safe. When no folder is
  usable the kernels compile in every process, with one warning; importing
  never fails.
- **A refused write.** When the machine refuses to save compiled code (a full
  disk, a quota, ``ulimit -f``, an I/O error), Numba lets the error through and
  the run would end in it, naming no file; here the code just compiled is used
  and compiled again in the next process (:data:`CACHE_WRITES_FAILED` lists what
  was not saved), and the run goes on to fail or succeed on its own writes.

Numba's caching classes used here (``numba.core.caching``) are private. Should
a Numba release change them so that mcsim's locator cannot be built, the kernels
fall back to Numba's own ``cache=True`` (:data:`CACHE_MODE` says which applies):
Numba's location (``NUMBA_CACHE_DIR`` when set, else beside the sources) and its
per-file stamp, which a reinstall of the package still invalidates.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numba

try:  # Numba's private caching classes, which _kernel_function_cache extends
    from numba.core import caching

    _NUMBA_CACHING = True
except ImportError:  # pragma: no cover (every supported Numba has the module)
    _NUMBA_CACHING = False

# Any: numba.jit's stubs type each option; a dict of mixed values matches none of its overloads.
_COMMON: dict[str, Any] = dict(nopython=True, nogil=True, fastmath=False, error_model="numpy")
# ... and for the run loop: without Numba's reference counting (jit_unmanaged).
_UNMANAGED: dict[str, Any] = dict(_COMMON, _nrt=False)
_KERNEL_FOLDER = Path(__file__).resolve().parent
# NUMBA_DISABLE_JIT=1: Numba's decorators return the plain Python functions, which run as they are (the
# kernels' coverage is measured so). numba.config sets its settings at import, from a function into
# globals(): invisible to mypy.
JIT_DISABLED = bool(numba.config.DISABLE_JIT)  # type: ignore[attr-defined]


def kernel_source_hash(folder: Path = _KERNEL_FOLDER) -> str:
    """SHA-256 of every kernel source file (sorted by name) and the Numba version."""
    digest = hashlib.sha256(numba.__version__.encode())
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def user_cache_root(platform: str | None = None) -> Path:
    """The user's cache folder of mcsim (as ``platformdirs.user_cache_dir("mcsim")`` names it).

    Parameters
    ----------
    platform : str, optional
        ``sys.platform`` by default.

    Returns
    -------
    Path
        Linux and other POSIX systems: ``$XDG_CACHE_HOME/mcsim`` when that variable holds an
        absolute path, else ``~/.cache/mcsim``; macOS: ``~/Library/Caches/mcsim``; Windows:
        ``%LOCALAPPDATA%\\mcsim\\Cache`` (``~\\AppData\\Local`` when the variable is unset).
    """
    platform = sys.platform if platform is None else platform
    home = os.path.expanduser("~")
    if platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")) / "mcsim" / "Cache"
    if platform == "darwin":
        return Path(home) / "Library" / "Caches" / "mcsim"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return Path(xdg if os.path.isabs(xdg) else os.path.join(home, ".cache")) / "mcsim"


def _private_temp_folder() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"mcsim-numba-cache-{uid}"


def _usable(folder: Path, private: bool = False) -> bool:
    """Whether compiled kernels can be written to and safely read from ``folder``."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if private and hasattr(os, "getuid"):
            info = folder.stat()
            if info.st_uid != os.getuid() or info.st_mode & 0o022:
                return False
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _cache_folder() -> Path | None:
    """The first usable cache folder (see the module docstring), or None."""
    candidates: list[tuple[Path, bool]] = []
    if os.environ.get("NUMBA_CACHE_DIR"):
        candidates.append((Path(os.environ["NUMBA_CACHE_DIR"]) / "mcsim", False))
    candidates.append((user_cache_root() / "numba", False))
    candidates.append((_private_temp_folder(), True))
    for folder, private in candidates:
        if _usable(folder, private):
            return folder
    return None


SOURCE_HASH = kernel_source_hash()
# The signatures whose compiled code could not be saved in this process (the machine refused the write).
CACHE_WRITES_FAILED: list = []
_ROOT = _cache_folder()
CACHE_FOLDER = None if _ROOT is None else _ROOT / SOURCE_HASH[:16]
if CACHE_FOLDER is not None and not _usable(CACHE_FOLDER):
    CACHE_FOLDER = None


def _kernel_function_cache() -> type | None:
    """Numba's ``FunctionCache`` with mcsim's locator (:data:`CACHE_FOLDER`, :data:`SOURCE_HASH`), or
    None when ``numba.core.caching`` no longer has the classes it extends."""
    if not _NUMBA_CACHING:
        return None
    try:

        class KernelCacheLocator(caching._CacheLocator):
            """Numba cache locator: :data:`CACHE_FOLDER`, stamped by :data:`SOURCE_HASH`."""

            def __init__(self, py_func, py_file):
                self._lineno = py_func.__code__.co_firstlineno
                # Numba's warning for a result it cannot cache names this file (with NUMBA_OPT=0 the
                # run loop keeps dynamic globals: without it the first run ended in an AttributeError)
                self._py_file = py_file
                self._cache_path = str(CACHE_FOLDER)

            def ensure_cache_path(self):
                os.makedirs(self._cache_path, exist_ok=True)

            def get_cache_path(self):
                return self._cache_path

            def get_source_stamp(self):
                return SOURCE_HASH

            def get_disambiguator(self):
                return str(self._lineno)

            @classmethod
            def from_function(cls, py_func, py_file):
                return cls(py_func, py_file)

        class KernelCacheImpl(caching.CompileResultCacheImpl):
            _locator_classes = [KernelCacheLocator]

        class KernelFunctionCache(caching.FunctionCache):
            _impl_class = KernelCacheImpl

            def save_overload(self, sig, data):
                """Numba's save; a write the machine refuses (disk full, quota, file-size limit, I/O error)
                costs only the cache: the code just compiled is used, and compiled again in the next process.
                (Numba lets the OSError through and the run would end in it, with no file named.)"""
                try:
                    super().save_overload(sig, data)
                except OSError:
                    CACHE_WRITES_FAILED.append(sig)

    except (AttributeError, TypeError):
        return None
    return KernelFunctionCache


_FUNCTION_CACHE = _kernel_function_cache() if CACHE_FOLDER is not None else None
# "mcsim": mcsim's locator and stamp; "numba": Numba's own cache=True (its private classes changed);
# "off": no usable folder, compiled in every process.
CACHE_MODE = "off" if CACHE_FOLDER is None else ("mcsim" if _FUNCTION_CACHE is not None else "numba")

if CACHE_FOLDER is None:
    warnings.warn(
        "mcsim: no writable folder for compiled kernels (NUMBA_CACHE_DIR, "
        f"{user_cache_root()}, the temporary directory); kernels are compiled in every process",
        RuntimeWarning,
        stacklevel=2,
    )


def _with_cache(dispatcher):
    """``dispatcher`` caching its compiled code as :data:`CACHE_MODE` says (see the module docstring).

    Under ``NUMBA_DISABLE_JIT=1`` Numba's decorators return the plain Python function, which is
    returned as it is: nothing is compiled, so nothing is cached.
    """
    global CACHE_MODE
    if JIT_DISABLED:
        return dispatcher
    if CACHE_MODE == "mcsim" and _FUNCTION_CACHE is not None:
        try:
            dispatcher._cache = _FUNCTION_CACHE(dispatcher.py_func)
            return dispatcher
        except (AttributeError, TypeError, NotImplementedError):  # the private classes changed under us
            CACHE_MODE = "numba"
    if CACHE_MODE == "numba":
        dispatcher.enable_caching()  # what numba.jit(cache=True) does
    return dispatcher


# Compiling the run kernels (first call, empty cache), CPU seconds of a whole first `mcsim run`
# of the reference on the shared 2-core machine (2026-11-29): 62 s at a load of 0.4 (58 s user), 72 s
# in benchmarks/run.py's start-up case, of which 56 s compiling simulate_runs (Numba's compile events);
# the same compile varied 55-71 s of user CPU between runs there. The figure the progress message announces.
COMPILE_SECONDS = 60.0


def cached(dispatcher: Any) -> bool | None:
    """Whether Numba's cache holds machine code of ``dispatcher`` for the current sources.

    True: the first call loads it (a fraction of a second); False: the first call
    compiles (about :data:`COMPILE_SECONDS`); None: unknown (no cache, or a Numba whose
    private cache classes changed). Reads the cache index only; compiles nothing.
    """
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    if cache_file is None:
        return None
    try:
        return bool(cache_file._load_index())
    except Exception:  # noqa: BLE001 (a private API: any failure means "unknown")
        return None


def jit(func):
    """Compile a serial kernel helper with mcsim's settings."""
    return _with_cache(numba.jit(**_COMMON)(func))


def jit_unmanaged(func):
    """Compile a kernel helper without Numba's reference counting (``_nrt=False``).

    For the run loop and everything it calls: it takes its arrays from the caller and never
    allocates, so no array it touches is reference-counted. Numba's counting (an atomic
    increment and decrement, in a function call, per array passed on or bound to a new name)
    was most of fast mode's time. An entry point compiled with :func:`jit` allocates the
    arrays and calls it; the tests count the ``NRT_`` calls in its machine code.
    """
    return _with_cache(numba.jit(**_UNMANAGED)(func))


def jit_inline(func):
    """Compile a small kernel helper that Numba inlines into its callers (``inline="always"``).

    For the run loop's event functions: called once per event with the run's parameter
    records, they cost more as calls than as code (measured in benchmarks/bench_kernel.py).
    """
    return _with_cache(numba.jit(inline="always", **_COMMON)(func))


def jit_parallel(func):
    """Compile a kernel entry point whose outer loop is a ``prange`` over runs (benchmarks' baseline only).

    Numba's parallel loop compiles for several seconds more than a serial one;
    mcsim's own entry point is serial and split over threads by its caller.
    """
    return _with_cache(numba.jit(parallel=True, **_COMMON)(func))
