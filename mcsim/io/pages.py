"""Large arrays in ordinary memory pages while mcsim fills and writes a result.

NumPy advises the kernel to back every array of 4 MiB or more with transparent huge pages
(``madvise(MADV_HUGEPAGE)``). Where the kernel's THP ``defrag`` setting is ``madvise`` (a common
default), each such fault may compact memory first. mcsim's output arrays are written once,
in order, and read a few times, so huge pages bring nothing; the compaction cost was measured
on a 960-configuration × 1,000-run sweep (``benchmarks/bench_sweep.py --efficiencies 0.54 0.64``:
7.7 MB per variable, 270 MB in all):
0.5 to 1.1 s of system time with the advice, 0.5 s without, and the sweep end to end went from
1.20-1.22 to 1.13-1.15 times the kernel's own CPU time. Below 4 MiB an array never gets the advice, so
the 480-configuration sweep (3.8 MB per variable) is unchanged.

:func:`ordinary_pages` turns the advice off for the arrays allocated inside it, in every thread
(NumPy's setting is global), and back to what it was when the last of any overlapping uses ends.
Where NumPy has no such setting (it is private: ``_set_madvise_hugepage``), it does nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator

_LOCK = threading.Lock()
_users = 0
_saved = True


def _hugepage_setter() -> Callable[[bool], bool] | None:
    """NumPy's ``_set_madvise_hugepage`` (returns the previous setting), or None where it has none."""
    try:
        multiarray = importlib.import_module("numpy._core.multiarray")  # NumPy 2
    except ImportError:  # pragma: no cover - NumPy 1.26, the lowest allowed
        multiarray = importlib.import_module("numpy.core.multiarray")
    return getattr(multiarray, "_set_madvise_hugepage", None)


@contextlib.contextmanager
def ordinary_pages() -> Iterator[None]:
    """No huge-page advice for the arrays NumPy allocates inside the block (see the module docstring)."""
    global _users, _saved
    setter = _hugepage_setter()
    if setter is None:
        yield
        return
    with _LOCK:
        if _users == 0:
            _saved = bool(setter(False))
        _users += 1
    try:
        yield
    finally:
        with _LOCK:
            _users -= 1
            if _users == 0:
                setter(_saved)
