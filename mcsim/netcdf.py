"""Reading and writing result files: compressed netCDF4, written atomically.

A result is written to a temporary file in the destination folder and renamed
over the destination only once complete, so an interrupted write never leaves
a half-written file (nor a stray temporary one) behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

COMPRESSION = {"zlib": True, "complevel": 4, "shuffle": True}


def _encoding(ds: xr.Dataset) -> dict[str, dict]:
    encoding = {}
    for name, var in {**ds.data_vars, **ds.coords}.items():
        if var.dtype.kind in "fiub":
            encoding[name] = dict(COMPRESSION)
    return encoding


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_results(ds: xr.Dataset, path: str | Path) -> Path:
    """Write ``ds`` to ``path`` (netCDF4, compressed) atomically; returns the path.

    Parent folders are created. On any error or interruption the temporary
    file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        ds.to_netcdf(tmp_name, engine="netcdf4", format="NETCDF4", encoding=_encoding(ds))
        with open(tmp_name, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o666 & ~_current_umask())  # mkstemp makes 0600; use the usual mode
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise
    return path


def open_results(path: str | Path) -> xr.Dataset:
    """Open a result file written by :func:`write_results` (loaded into memory)."""
    with xr.open_dataset(path, engine="netcdf4") as ds:
        loaded = ds.load()
    for name in ("completed", "feasible"):
        if name in loaded and loaded[name].dtype != np.bool_:
            loaded[name] = loaded[name].astype(bool)
    return loaded
