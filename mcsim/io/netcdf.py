"""Reading and writing result files: compressed netCDF4, written atomically.

A result is written to a temporary file in the destination folder and renamed
over the destination only once complete (:mod:`mcsim.io.atomic`), so an
interrupted or failed write never leaves a half-written file (nor a stray
temporary one) behind.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import re
import shutil
import sys
import zlib
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from mcsim._lazy import lazy_module
from mcsim.io.atomic import ANY, atomic_path
from mcsim.io.pages import ordinary_pages

if TYPE_CHECKING:
    import netCDF4
else:  # imported at its first use (a write, or a check of a file), not with mcsim: 50-100 ms of every start
    netCDF4 = lazy_module("netCDF4")

ZLIB = {"zlib": True, "complevel": 1, "shuffle": True}
ZSTD = {"compression": "zstd", "complevel": 1, "shuffle": False}  # netCDF4-python shuffles only with zlib


@functools.cache
def compression() -> dict:
    """The netCDF filter: Zstandard level 1 where this netCDF library writes and reads it back (tried
    once per process on an in-memory file), else zlib level 1 with shuffle.

    netCDF4-python applies its ``shuffle`` only with zlib (``createVariable`` passes it to
    ``nc_def_var_deflate`` alone; ``Variable.filters()`` reports no shuffle on a Zstandard
    variable), so Zstandard sees the bytes unshuffled: :func:`worth_compressing` samples them so.

    Measured on a 480-configuration x 1,000-run sweep (131 MB in memory): zlib level 4
    wrote it in 1.35 s (53 MB), zlib level 1 1.17 s, Zstandard level 1 0.18 s (65 MB), no filter 0.15 s
    (131 MB). A library may claim Zstandard and lack its filter (netCDF4-python 1.6.5's wheels), hence
    the trial. Reading Zstandard needs an HDF5 with its filter: netCDF4-python's recent wheels carry it;
    other tools may need the plugin (docs/model.md §7).
    """
    try:
        if not getattr(netCDF4, "__has_zstandard_support__", False):
            return ZLIB
        trial = netCDF4.Dataset("mcsim-zstd-trial.nc", "w", memory=4096)  # in memory, never on disk
        trial.createDimension("x", 64)
        var = trial.createVariable("v", "f8", ("x",), compression="zstd", complevel=1, shuffle=True)
        var[:] = np.arange(64.0)
        written = trial.close()
        with netCDF4.Dataset("mcsim-zstd-trial.nc", "r", memory=bytes(written)) as back:
            if not np.array_equal(back["v"][:], np.arange(64.0)):
                return ZLIB
    except Exception:  # noqa: BLE001 (any failure of the filter, or no netCDF4 at all, means: use zlib)
        return ZLIB
    return ZSTD


# A variable is compressed when a sample of it, as the filter sees it, compresses to at most this
# share. Measured on a 480-configuration x 1,000-run sweep: Zstandard level 1 wrote
# the variables that shrink to 0.53-0.69 (energy_wait, energy_compute, straggler_persistent_time) at
# 1.8-3.0 ms a megabyte, six to ten times the 0.3 ms of writing them as they are, to save a third to
# a half of their bytes; counts, flags and near-constant columns shrink to 0.003-0.08 at 0.6-1.9 ms.
# High-entropy floats (simulated times, costs) shrink by 6-14 % unshuffled: stored as they are
# (docs/model.md §7).
COMPRESS_BELOW = 0.6
# The sample: this many slices of this many consecutive values, spread evenly over the variable (its
# head alone can be one infeasible configuration's NaN). zlib takes 0.05 ms for 64 x 16 float64 values
# and 0.4 ms for 256 x 16 (its cost grows faster than the sample); the ratios of the two samples
# differ by at most 0.06 on the sweep above.
_SAMPLE_SLICES = 16
_SAMPLE_SLICE_VALUES = 64
# A variable below this size is one chunk; larger ones keep HDF5's chunks (a chunk must stay below
# 4 GiB, and lazy reads decompress a chunk at a time).
_ONE_CHUNK_BYTES = 64 * 2**20


# CF-1.10 §2.3: names begin with a letter and hold letters, digits and underscores.
_CF_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
NAME_ATTR = "mcsim_name"  # the name in mcsim of a variable stored under a CF name


def cf_names(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with every data variable whose name is not a CF name stored under one.

    The variables of uncertain inputs are named by their scenario key
    (``network.inter_gbps``, ``failures.gpu-hbm.mtbf_hours``), which CF does not allow; they
    are stored as ``network_inter_gbps`` (every other character becomes ``_``; a leading
    ``x`` if the name does not start with a letter; ``_2``, ``_3`` ... if taken) with the key
    in the attribute ``mcsim_name``. :func:`scenario_names` reverses it.
    """
    taken = set(map(str, ds.variables))
    renames: dict[Hashable, str] = {}
    for name in ds.data_vars:
        if _CF_NAME.fullmatch(str(name)):
            continue
        stem = re.sub(r"[^A-Za-z0-9_]", "_", str(name))
        stem = stem if stem[:1].isalpha() else f"x{stem}"
        safe, n = stem, 1
        while safe in taken:
            n += 1
            safe = f"{stem}_{n}"
        taken.add(safe)
        renames[name] = safe
    if not renames:
        return ds
    stored = ds.rename_vars(renames)
    for name, safe in renames.items():
        stored[safe].attrs = {**stored[safe].attrs, NAME_ATTR: str(name)}
    return stored


def scenario_names(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with the variables :func:`cf_names` stored under CF names back under their own names."""
    renames = {name: str(var.attrs[NAME_ATTR]) for name, var in ds.data_vars.items() if NAME_ATTR in var.attrs}
    if not renames:
        return ds
    restored = ds.rename_vars(renames)
    for name in renames.values():
        restored[name].attrs = {k: v for k, v in restored[name].attrs.items() if k != NAME_ATTR}
    return restored


def worth_compressing(values: np.ndarray, shuffle: bool | None = None) -> bool:
    """Whether compressing ``values`` pays: a sample of them compresses to at most
    :data:`COMPRESS_BELOW` of its size with zlib level 1, byte-shuffled where the filter shuffles.

    The sample is :data:`_SAMPLE_SLICES` runs of :data:`_SAMPLE_SLICE_VALUES` consecutive values
    spread evenly over the variable (all of it when smaller). ``shuffle``: whether the filter
    byte-shuffles (default: that of :func:`compression`). Measured on a 480-configuration x
    1,000-run sweep: unshuffled, as Zstandard gets them, its simulated times and
    costs compress to 0.88, for 1 ms a megabyte (twenty times the cost of writing them); shuffled, to
    0.71-0.73; its counts, flags and near-constant columns to 0.004-0.2 either way; its energies of
    waiting and computing to 0.69-0.74, not enough to pay (:data:`COMPRESS_BELOW`).
    """
    if shuffle is None:
        shuffle = bool(compression().get("shuffle"))
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.size == 0:
        return False
    size = _SAMPLE_SLICES * _SAMPLE_SLICE_VALUES
    if flat.size > size:
        starts = np.linspace(0, flat.size - _SAMPLE_SLICE_VALUES, _SAMPLE_SLICES).astype(np.int64)
        flat = np.concatenate([flat[a : a + _SAMPLE_SLICE_VALUES] for a in starts])
    raw = flat.view(np.uint8).reshape(flat.size, flat.itemsize)
    sample = raw.T.tobytes() if shuffle else raw.tobytes()
    return len(zlib.compress(sample, 1)) <= COMPRESS_BELOW * len(sample)


def netcdf_form(ds: xr.Dataset) -> tuple[xr.Dataset, dict[Hashable, dict]]:
    """The dataset as it is stored, and its netCDF encoding.

    - Numbers are compressed (:func:`compression`: Zstandard level 1, or zlib level 1 with shuffle)
      where it pays (:func:`worth_compressing`);
      a float coordinate variable (a dimension's own values) gets no ``_FillValue`` (CF-1.10 §2.5.1).
    - Variables named by a scenario key (uncertain inputs) are stored under CF names
      (:func:`cf_names`; :func:`open_results` restores the keys).
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
    ds = cf_names(ds)
    encoding: dict[Hashable, dict] = {}
    converted: dict[Hashable, xr.DataArray | xr.Variable] = {}
    for name, var in {**ds.data_vars, **ds.coords}.items():
        if var.dtype.kind in "fiub":
            encoding[name] = _number_encoding(var, name in ds.dims)
        elif var.dtype.kind in "OUST":
            if (text := _text_form(var, name in ds.dims)) is not None:
                converted[name] = text
            encoding[name] = {"dtype": "S1", "char_dim_name": f"{name}_strlen"}
    if converted:
        ds = ds.assign_coords({k: v for k, v in converted.items() if k in ds.coords})
        ds = ds.assign({k: v for k, v in converted.items() if k not in ds.coords})
    return ds, encoding


def _number_encoding(var: xr.DataArray, is_dimension: bool) -> dict:
    """The netCDF encoding of the numbers ``var`` (``is_dimension``: a dimension's own values)."""
    encoding = dict(compression()) if worth_compressing(var.values) else {}
    if encoding and var.nbytes < _ONE_CHUNK_BYTES:  # one chunk: HDF5's default ones cost a third more
        encoding["chunksizes"] = var.shape
    if is_dimension and var.dtype.kind == "f":  # CF-1.10 §2.5.1: no _FillValue on a coordinate variable
        encoding["_FillValue"] = None
    return encoding


def _text_form(var: xr.DataArray, is_dimension: bool) -> xr.DataArray | xr.Variable | None:
    """The text ``var`` as it is written (:func:`netcdf_form`), or None when it is written as it is."""
    if is_dimension:  # a sweep's few values (an index): text, as xarray encodes it
        return None if var.dtype.kind == "U" else var.astype(str)
    if isinstance(var.data, np.ndarray):  # as a Variable: a DataArray is aligned on coordinates
        return _utf8_bytes(var.variable if var.dtype.kind == "U" else var.variable.astype(str))
    return None if var.dtype.kind == "U" else var.astype(str)  # a lazy (dask) array: xarray encodes it


def _utf8_bytes(var: xr.Variable) -> xr.Variable:
    """Fixed-width text as its UTF-8 bytes with ``_Encoding = "utf-8"``, as xarray would store it, at once.

    xarray encodes text element by element in Python (0.24 s of a plan's write: four texts over
    217,800 candidates); ASCII text (every name mcsim writes) is its code points
    narrowed to bytes (:func:`_ascii_bytes`), other text NumPy's cast, and where that fails, xarray's
    encoding. Text held lazily is left to xarray (a dask array's cast would happen at write time, to a
    width its ``<U1`` placeholder type gives, and could not fall back).
    """
    values = np.asarray(var.values)
    narrowed = _ascii_bytes(values)
    if narrowed is None:
        try:
            narrowed = values.astype("S")
        except UnicodeEncodeError:
            return var
    return xr.Variable(var.dims, narrowed, {**var.attrs, "_Encoding": "utf-8"}, var.encoding)


def _ascii_bytes(values: np.ndarray) -> np.ndarray | None:
    """Fixed-width Unicode text as fixed-width bytes when every code point is ASCII (else None): NumPy
    stores a ``<U`` character as a 4-byte code point, so the bytes are those code points narrowed, 8 to
    20 times faster than its per-element cast (``astype("S")``: 27 ms for 217,800 nine-character
    names), and the same bytes."""
    width = values.dtype.itemsize // 4
    if values.dtype.kind != "U" or not values.dtype.isnative or width == 0 or values.size == 0:
        return None
    points = np.ascontiguousarray(values).view(np.uint32)
    if int(points.max()) >= 128:
        return None
    return points.astype(np.uint8).view(f"S{width}").reshape(values.shape)


def write_results(ds: xr.Dataset, path: str | Path, previous: tuple[int, int] | None | str = ANY) -> Path:
    """Write ``ds`` to ``path`` (netCDF4, compressed) atomically; returns the path.

    Parent folders are created. On any error or interruption the temporary
    file is removed and ``path`` is left as it was (:func:`mcsim.io.atomic.atomic_path`).
    ``previous`` (from :func:`mcsim.io.atomic.file_identity` at the start of a command):
    the only file that may be replaced; None when none may (see :func:`mcsim.io.atomic.atomic_path`).

    Raises
    ------
    OSError
        The file cannot be written; a failure reported by the netCDF library
        (which gives no error number) is raised as ``OSError`` with ``ENOSPC``
        when the disk is full, ``EFBIG`` when the file reached the process's
        file-size limit (``ulimit -f``), else ``EIO``.
    """
    path = Path(path)
    with atomic_path(path, previous) as tmp:
        try:
            stored, encoding = netcdf_form(ds)
            with _no_dask_probe(stored), _chunks_not_cached(stored), ordinary_pages():
                _to_netcdf(stored, tmp, encoding)
        except RuntimeError as err:
            if not str(err).startswith("NetCDF:"):
                raise
            raise _library_failure(tmp, err) from err
    return path


def _held_lazily(ds: xr.Dataset) -> bool:
    """Whether any variable of ``ds`` is a dask array (written piece by piece, computed at write time)."""
    return any(v.chunks is not None for v in ds.variables.values())


# The netCDF library's chunk cache while a result file is written, bytes (per variable).
WRITE_CHUNK_CACHE_BYTES = 1 << 20


@contextlib.contextmanager
def _chunks_not_cached(ds: xr.Dataset):
    """The netCDF library's chunk cache at :data:`WRITE_CHUNK_CACHE_BYTES` while ``ds`` is written.

    Its default (64 MiB per variable) kept every compressed variable's whole chunk (each variable is
    one chunk, written at once) in memory until the file closed: writing a 135 MB sweep took 131 MB
    more, 1 MB with a cache smaller than a chunk, which HDF5 then writes straight through, as fast.
    A dataset with dask arrays is written piece by piece into each chunk, which
    the cache must then hold (with 1 MiB every piece recompressed the whole chunk: 5 times slower
    at 100 pieces), so it keeps the default. The setting is global in the library, so it is
    restored after the write.
    """
    if _held_lazily(ds):
        yield
        return

    size, elements, preemption = netCDF4.get_chunk_cache()
    netCDF4.set_chunk_cache(WRITE_CHUNK_CACHE_BYTES, elements, preemption)
    try:
        yield
    finally:
        netCDF4.set_chunk_cache(size, elements, preemption)


def _to_netcdf(ds: xr.Dataset, path: Path, encoding: dict[Hashable, dict]) -> None:
    """``ds.to_netcdf`` to ``path``; a dataset with dask arrays computed on one thread of this process unless
    a dask.distributed client is active (then on it, as xarray would).

    Every read and write of a netCDF file holds the HDF5 library's one lock, so a file-to-file copy gains
    nothing from threads; and with the lowest xarray and dask releases mcsim allows, a reading and a
    writing thread deadlocked on xarray's file locks (seen once in CI). The scheduler is given
    to this one computation, not set for the process (other threads' dask work is left alone), and a
    dataset persisted on a cluster is written through its client.
    """
    if not _held_lazily(ds):
        ds.to_netcdf(path, engine="netcdf4", format="NETCDF4", encoding=encoding)
        return
    writes = ds.to_netcdf(path, engine="netcdf4", format="NETCDF4", encoding=encoding, compute=False)
    writes.compute(scheduler=None if _distributed_client_active() else "synchronous")


def _distributed_client_active() -> bool:
    """Whether this process has a current dask.distributed client (never imports distributed)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.default_client()
    except ValueError:
        return False
    return True


@contextlib.contextmanager
def _no_dask_probe(ds: xr.Dataset):
    """Keep xarray from importing dask.distributed to look for a client while ``ds`` is written.

    Before every write xarray asks dask which scheduler is active, and dask imports
    dask.distributed (0.15-0.4 s, a fifth of a warm ``mcsim run``) to look for a client,
    even for a dataset of NumPy arrays. When distributed is not imported yet no client
    can exist, so for the length of the write ``import distributed`` fails as it does
    without it installed, which dask takes as "no client". A dataset with dask arrays,
    or a process that has imported distributed (the dask backends), is written as usual.
    """
    if "distributed" in sys.modules or _held_lazily(ds):
        yield
        return
    sys.modules["distributed"] = None  # type: ignore[assignment]  # import distributed -> ImportError
    try:
        yield
    finally:
        if "distributed" in sys.modules and sys.modules["distributed"] is None:
            del sys.modules["distributed"]


_LARGEST_WRITE = 4 << 20  # bytes: an upper bound on one write of the netCDF library here


def _file_size_limit() -> int:
    """The soft limit on the size of a file this process writes (``ulimit -f``) [bytes]; -1 when there is none.

    -1 too where there is no ``resource`` module (not POSIX).
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return -1
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return -1 if soft == resource.RLIM_INFINITY else soft


def _library_failure(tmp: Path, err: RuntimeError) -> OSError:
    """The likely OS cause of a netCDF library failure while writing ``tmp``."""
    try:
        size = tmp.stat().st_size
        free = shutil.disk_usage(tmp.parent).free
    except OSError:
        size, free = 0, 1 << 62
    soft = _file_size_limit()
    # The write that failed did not extend the file: within one HDF5 write (a chunk, at
    # most a few MiB) of a finite file-size limit, the limit is the cause.
    if soft >= 0 and size + _LARGEST_WRITE >= soft:
        return OSError(errno.EFBIG, f"file-size limit of {soft} bytes reached (ulimit -f)")
    if free < 1 << 20:
        return OSError(errno.ENOSPC, "no space left on the device")
    return OSError(errno.EIO, f"the netCDF library failed ({err})")


def open_results(path: str | Path, chunks: int | str | dict | None = None) -> xr.Dataset:
    """Open a result file written by :func:`write_results`.

    Parameters
    ----------
    path : str or Path
        The file.
    chunks : int, str or dict, optional
        None (the default): the whole file is loaded into memory and the file is closed.
        Otherwise the numeric variables stay lazy dask arrays of these chunks (as
        :func:`xarray.open_dataset`'s ``chunks``, e.g. ``{"run": 10_000}`` or ``"auto"``;
        needs dask) and the file stays open until the dataset is closed; only the text
        variables (labels, reasons: small) are read.

    Returns
    -------
    xarray.Dataset
        Booleans (``completed``, ``feasible``) as bool, text as fixed-width Unicode.

    Raises
    ------
    OSError
        The file cannot be read, or is not netCDF.
    ValueError
        A netCDF file that mcsim did not write (no ``mcsim_version`` global attribute),
        in one line naming the file.
    """
    if chunks is not None:
        return _opened_lazily(path, chunks)
    with _damaged_as_oserror(path), xr.open_dataset(path, engine="netcdf4") as ds:
        if "mcsim_version" not in ds.attrs:
            raise _not_written_by_mcsim(path)
        loaded = ds.load()
    return _as_read(loaded, path)


def loaded_bytes(path: str | Path) -> float:
    """Bytes :func:`open_results` of ``path`` would hold, from the file's header alone (nothing is read).

    Every variable and coordinate, its elements times its item size (text: 8 bytes of the pointer
    per element, which is what the loaded arrays hold besides short strings).
    """
    with _damaged_as_oserror(path), xr.open_dataset(path, engine="netcdf4", decode_cf=False) as ds:
        return float(sum(v.size * v.dtype.itemsize for v in ds.variables.values()))


@contextlib.contextmanager
def _damaged_as_oserror(path: str | Path) -> Iterator[None]:
    """The netCDF library's errors on a damaged file (RuntimeError, AttributeError "NetCDF: ...") as OSError."""
    try:
        yield
    except (RuntimeError, AttributeError) as err:
        if not str(err).startswith("NetCDF:"):
            raise
        raise OSError(errno.EIO, f"a damaged netCDF file ({err})", str(path)) from None


def _opened_lazily(path: str | Path, chunks: int | str | dict) -> xr.Dataset:
    """:func:`open_results` with ``chunks``: the numbers as dask arrays of these chunks, the text read
    (dask cannot size text for ``chunks="auto"``), every variable under its own name (:func:`scenario_names`:
    an uncertain input keeps its dotted name, so sensitivity finds it)."""
    lazy = xr.open_dataset(path, engine="netcdf4")  # indexed lazily: nothing read yet
    if "mcsim_version" not in lazy.attrs:
        lazy.close()
        raise _not_written_by_mcsim(path)
    text = [name for name, var in lazy.data_vars.items() if var.dtype.kind in "OSU"]
    loaded = lazy.drop_vars(text).chunk(chunks).assign({name: lazy[name].load() for name in text})
    # in the file's order, every coordinate kept (a part's sweep dims have one and no variable)
    chunked = loaded[list(lazy.data_vars)].assign_coords(loaded.coords)
    chunked.set_close(lazy.close)
    return _as_read(chunked, path)


def _as_read(ds: xr.Dataset, path: str | Path) -> xr.Dataset:
    """The dataset :func:`open_results` returns of ``ds`` read from ``path``: flags as bool, text as Unicode,
    every variable under its own name, a portable encoding, and the file it was read from (``encoding["source"]``,
    which names a part in :func:`mcsim.combine`'s messages)."""
    read = _portable_encoding(text_as_unicode(scenario_names(_flags_as_bool(ds))))
    read.encoding["source"] = str(path)
    return read


def _not_written_by_mcsim(path: str | Path) -> ValueError:
    """The error of a netCDF file without the ``mcsim_version`` attribute, in one line naming it."""
    return ValueError(
        f"{path}: not an mcsim result file (no 'mcsim_version' attribute: it was not written by "
        "mcsim run, mcsim plan or mcsim.write_results of a simulated result)"
    )


def _flags_as_bool(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with ``completed`` and ``feasible`` as bool, whatever type they were read back as."""
    for name in ("completed", "feasible"):
        if name in ds and ds[name].dtype != np.bool_:
            ds[name] = ds[name].astype(bool)
    return ds


# Encoding keys of a variable read back that name its filter and storage layout in the file.
_STORAGE_KEYS = (
    "zlib", "zstd", "szip", "bzip2", "blosc", "complevel", "shuffle", "chunksizes", "preferred_chunks", "contiguous",
)  # fmt: skip


def _portable_encoding(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each compressed variable's encoding as zlib level 1, its layout left to the writer.

    A user who saves an opened (and perhaps sliced) result with ``ds.to_netcdf`` then writes a file
    every netCDF tool reads, whatever filter mcsim wrote it with (:func:`compression`), and a
    dimension sliced to zero or below the file's chunk does not make the write fail.
    """
    for var in ds.variables.values():
        compressed = any(var.encoding.get(key) is True for key in ("zlib", "zstd", "szip", "bzip2", "blosc"))
        for key in _STORAGE_KEYS:
            var.encoding.pop(key, None)
        if compressed:
            var.encoding.update(zlib=True, complevel=1)
    return ds


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
        with netCDF4.Dataset(path, "r") as nc:
            return "mcsim_version" in nc.ncattrs()
    except (OSError, RuntimeError, ValueError, AttributeError):  # AttributeError: a damaged attribute
        return False


def result_attributes(path: str | Path) -> dict[str, object]:
    """The global attributes of the mcsim result file at ``path``, from its header alone (no variable is read).

    Raises
    ------
    OSError
        The file cannot be read, or is not netCDF.
    ValueError
        A netCDF file that mcsim did not write, in one line naming the file.
    """
    with _damaged_as_oserror(path), netCDF4.Dataset(path, "r") as nc:
        attrs = {name: nc.getncattr(name) for name in nc.ncattrs()}
    if "mcsim_version" not in attrs:
        raise _not_written_by_mcsim(path)
    return attrs


def result_attribute(path: str | Path, name: str) -> str | None:
    """The global attribute ``name`` of the mcsim result file at ``path`` as text; None when the
    file, or the attribute, is not there (:func:`is_result_file` first)."""
    if not is_result_file(path):
        return None
    try:
        with netCDF4.Dataset(path, "r") as nc:
            return str(nc.getncattr(name)) if name in nc.ncattrs() else None
    except (OSError, RuntimeError, ValueError, AttributeError):
        return None


def is_plan_file(path: str | Path) -> bool:
    """Whether ``path`` is a netCDF file written by ``mcsim plan`` (global attribute ``mcsim_kind = plan``)."""
    if not is_result_file(path):
        return False
    try:
        with netCDF4.Dataset(path, "r") as nc:
            return getattr(nc, "mcsim_kind", "") == "plan"
    except (OSError, RuntimeError, AttributeError):
        return False


def text_as_unicode(ds: xr.Dataset) -> xr.Dataset:
    """Text held as Python objects (decoded from character arrays, or filled one configuration at a time)
    as fixed-width Unicode, so that a plain :meth:`xarray.Dataset.to_netcdf` writes it: xarray 2024.1 refuses
    object-dtype text ("unsupported dtype for netCDF4 variable: object")."""
    text = {
        name: var.astype(str)
        for name, var in {**ds.data_vars, **ds.coords}.items()
        if var.dtype.kind == "O" and all(isinstance(v, str) for v in var.values.ravel())
    }
    if not text:
        return ds
    return xr.Dataset(
        {name: text.get(name, var) for name, var in ds.data_vars.items()},
        coords={name: text.get(name, var) for name, var in ds.coords.items()},
        attrs=ds.attrs,
    )
