"""All Numba settings of mcsim in one place.

Every kernel is compiled through :func:`jit` (serial helpers) or
:func:`jit_parallel` (the entry points that ``prange`` over runs), so the
options below are the only ones in the code base:

- ``nopython``: kernels never fall back to Python objects.
- ``nogil``: a caller's threads (e.g. dask workers) can run kernels concurrently.
- ``cache``: compiled code is stored next to the module (or in
  ``NUMBA_CACHE_DIR``) so that later processes start warm.
- ``fastmath`` is off: results must be bit-identical across machines' thread
  counts, and reassociation would break that.
- ``error_model="numpy"``: division by zero gives inf/nan instead of raising,
  which keeps ``prange`` loops free of exception paths.
"""

from __future__ import annotations

import numba

_COMMON = dict(nopython=True, nogil=True, cache=True, fastmath=False, error_model="numpy")


def jit(func):
    """Compile a serial kernel helper with mcsim's settings."""
    return numba.jit(**_COMMON)(func)


def jit_parallel(func):
    """Compile a kernel entry point whose outer loop is a ``prange`` over runs."""
    return numba.jit(parallel=True, **_COMMON)(func)
