"""All Numba settings of mcsim in one place, and where compiled kernels are cached.

Every kernel is compiled through :func:`jit` (serial functions, the entry point
``simulate_runs`` included: :func:`mcsim.engine.tasks.run_kernel` splits runs over
threads) or :func:`jit_inline` (small helpers inlined into their callers);
:func:`jit_parallel` (a ``prange`` entry point) is kept for the frozen pre-issue-12
kernel in ``benchmarks/``. The options below are the only ones in the code base:

- ``nopython``: kernels never fall back to Python objects.
- ``nogil``: a caller's threads (e.g. dask workers) can run kernels concurrently.
- ``fastmath`` is off: results must be bit-identical across machines' thread
  counts, and reassociation would break that.
- ``error_model="numpy"``: division by zero gives inf/nan instead of raising,
  which keeps ``prange`` loops free of exception paths.

Caching (compiled code reused by later processes) is mcsim's own, through
Numba's cache machinery with one change of policy:

- **Invalidation.** Numba stamps a cached function with the hash of the file
  that defines it, so a change to a helper in another kernel file would reuse
  stale machine code. Here every kernel's stamp is the hash of *all* kernel
  sources (:func:`kernel_source_hash`) and the Numba version: any change to any
  kernel file recompiles everything.
- **Location.** The first writable of: ``NUMBA_CACHE_DIR`` when set, the
  kernels' own ``__pycache__`` (an ordinary install), the user's cache folder
  (``~/.cache/mcsim``), and a private folder in the temporary directory (a
  read-only install on a cluster node with no writable home). A folder in the
  temporary directory is used only when it belongs to this user and nobody
  else can write to it (cache files are pickles). When none is writable the
  kernels compile in every process, with one warning; importing never fails.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numba
from numba.core import caching

# Any: numba.jit's stubs type each option; a dict of mixed values matches none of its overloads.
_COMMON: dict[str, Any] = dict(nopython=True, nogil=True, fastmath=False, error_model="numpy")
_KERNEL_FOLDER = Path(__file__).resolve().parent


def kernel_source_hash(folder: Path = _KERNEL_FOLDER) -> str:
    """SHA-256 of every kernel source file (sorted by name) and the Numba version."""
    digest = hashlib.sha256(numba.__version__.encode())
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


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
    candidates.append((_KERNEL_FOLDER / "__pycache__", False))
    home_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates.append((Path(home_cache) / "mcsim" / "numba", False))
    candidates.append((_private_temp_folder(), True))
    for folder, private in candidates:
        if _usable(folder, private):
            return folder
    return None


CACHE_FOLDER = _cache_folder()
SOURCE_HASH = kernel_source_hash()


class _KernelCacheLocator(caching._CacheLocator):
    """Numba cache locator: :data:`CACHE_FOLDER`, stamped by :data:`SOURCE_HASH`."""

    def __init__(self, py_func, py_file):
        self._lineno = py_func.__code__.co_firstlineno
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


class _KernelCacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_KernelCacheLocator]


class _KernelFunctionCache(caching.FunctionCache):
    _impl_class = _KernelCacheImpl


if CACHE_FOLDER is None:
    warnings.warn(
        "mcsim: no writable folder for compiled kernels (NUMBA_CACHE_DIR, the install, "
        "~/.cache, the temporary directory); kernels are compiled in every process",
        RuntimeWarning,
        stacklevel=2,
    )


def _with_cache(dispatcher):
    if CACHE_FOLDER is not None:
        dispatcher._cache = _KernelFunctionCache(dispatcher.py_func)
    return dispatcher


# Compiling the run kernel (first call, empty cache): 16.0-16.6 s wall, 15.1-15.5 s CPU for a
# whole first `mcsim run` on a quiet 2-core machine, of which ~14 s compiling (README, "Speed",
# measured by benchmarks/bench_startup.py). On the same 2 cores shared with other work (load
# ~13), a cold first simulate() took 128 s CPU and 453 s wall (measured once for issue 22).
COMPILE_SECONDS = 15.0


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
