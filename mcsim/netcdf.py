"""Reading and writing result files: compressed netCDF4, written atomically.

A result is written to a temporary file in the destination folder and renamed
over the destination only once complete (:mod:`mcsim.atomic`), so an
interrupted or failed write never leaves a half-written file (nor a stray
temporary one) behind.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import numpy as np
import xarray as xr

from .atomic import atomic_path

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None

COMPRESSION = {"zlib": True, "complevel": 4, "shuffle": True}


def _encoding(ds: xr.Dataset) -> dict[str, dict]:
    encoding = {}
    for name, var in {**ds.data_vars, **ds.coords}.items():
        if var.dtype.kind in "fiub":
            encoding[name] = dict(COMPRESSION)
    return encoding


def write_results(ds: xr.Dataset, path: str | Path) -> Path:
    """Write ``ds`` to ``path`` (netCDF4, compressed) atomically; returns the path.

    Parent folders are created. On any error or interruption the temporary
    file is removed and ``path`` is left as it was (:func:`mcsim.atomic.atomic_path`).

    Raises
    ------
    OSError
        The file cannot be written; a failure reported by the netCDF library
        (which gives no error number) is raised as ``OSError`` with ``ENOSPC``
        when the disk is full, ``EFBIG`` when the file reached the process's
        file-size limit (``ulimit -f``), else ``EIO``.
    """
    path = Path(path)
    with atomic_path(path) as tmp:
        try:
            ds.to_netcdf(tmp, engine="netcdf4", format="NETCDF4", encoding=_encoding(ds))
        except RuntimeError as err:
            if not str(err).startswith("NetCDF:"):
                raise
            raise _library_failure(tmp, err) from err
    return path


def _library_failure(tmp: Path, err: RuntimeError) -> OSError:
    """The likely OS cause of a netCDF library failure while writing ``tmp``."""
    try:
        size = tmp.stat().st_size
        free = shutil.disk_usage(tmp.parent).free
    except OSError:
        size, free = 0, 1 << 62
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0] if resource is not None else -1
    if soft != getattr(resource, "RLIM_INFINITY", -1) and soft >= 0 and size >= soft:
        return OSError(errno.EFBIG, f"file-size limit of {soft} bytes reached (ulimit -f)")
    if free < 1 << 20:
        return OSError(errno.ENOSPC, "no space left on the device")
    return OSError(errno.EIO, f"the netCDF library failed ({err})")


def open_results(path: str | Path) -> xr.Dataset:
    """Open a result file written by :func:`write_results` (loaded into memory)."""
    with xr.open_dataset(path, engine="netcdf4") as ds:
        loaded = ds.load()
    for name in ("completed", "feasible"):
        if name in loaded and loaded[name].dtype != np.bool_:
            loaded[name] = loaded[name].astype(bool)
    return loaded


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def is_result_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file written by :func:`write_results` (an mcsim result).

    Checked by the HDF5 signature, then the ``mcsim_version`` global attribute;
    used to refuse an ``-o`` that would overwrite anything else.
    """
    path = Path(path)
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as handle:
            if handle.read(len(_HDF5_SIGNATURE)) != _HDF5_SIGNATURE:
                return False
        import netCDF4

        with netCDF4.Dataset(path, "r") as nc:
            return "mcsim_version" in nc.ncattrs()
    except (OSError, RuntimeError, ValueError):
        return False
