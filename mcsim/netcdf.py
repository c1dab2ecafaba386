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


def netcdf_form(ds: xr.Dataset) -> tuple[xr.Dataset, dict[str, dict]]:
    """The dataset as it is stored, and its netCDF encoding.

    - Numbers are compressed (zlib level 4 with shuffle).
    - Text is converted to fixed-width Unicode first (text held as Python
      objects, as :func:`open_results` returns it, too), so that writing does
      not depend on how the installed pandas infers object columns.
    - Text (``infeasible_reason``, and sweep values such as ``strategy``) is
      stored as UTF-8 character arrays with ``_Encoding = "utf-8"`` and a
      ``<name>_strlen`` dimension (CF-1.10 §2.2), the form every CF checker
      and netCDF tool reads (compliance-checker's coordinate checks raise
      errors on variable-length string coordinates); xarray decodes them
      back to text with the same dimensions.

    Parameters
    ----------
    ds : xarray.Dataset
        A result dataset (any mcsim output or an edited copy).

    Returns
    -------
    (xarray.Dataset, dict)
        The dataset to write (``ds`` with text as fixed-width Unicode) and the
        ``encoding`` argument for :meth:`xarray.Dataset.to_netcdf`.
    """
    encoding: dict[str, dict] = {}
    converted = {}
    for name, var in {**ds.data_vars, **ds.coords}.items():
        if var.dtype.kind in "fiub":
            encoding[name] = dict(COMPRESSION)
        elif var.dtype.kind in "OUST":
            if var.dtype.kind != "U":
                converted[name] = var.astype(str)
            encoding[name] = {"dtype": "S1", "char_dim_name": f"{name}_strlen"}
    if converted:
        ds = ds.assign_coords({k: v for k, v in converted.items() if k in ds.coords})
        ds = ds.assign({k: v for k, v in converted.items() if k not in ds.coords})
    return ds, encoding


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
        stored, encoding = netcdf_form(ds)
        stored.to_netcdf(tmp_name, engine="netcdf4", format="NETCDF4", encoding=encoding)
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
    return _text_as_unicode(loaded)


def _text_as_unicode(ds: xr.Dataset) -> xr.Dataset:
    """Text decoded from character arrays (Python objects) as fixed-width Unicode, as simulated."""
    text = {name: var.astype(str) for name, var in {**ds.data_vars, **ds.coords}.items()
            if var.dtype.kind == "O" and all(isinstance(v, str) for v in var.values.ravel())}
    if not text:
        return ds
    return xr.Dataset({name: text.get(name, var) for name, var in ds.data_vars.items()},
                      coords={name: text.get(name, var) for name, var in ds.coords.items()}, attrs=ds.attrs)
