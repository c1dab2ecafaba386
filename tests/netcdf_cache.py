"""The netCDF library's chunk cache as a write sees it (shared by the tests of result files)."""

from __future__ import annotations

from pathlib import Path


def chunk_cache_during_write(monkeypatch, ds, path: Path) -> tuple[tuple, list[tuple]]:
    """The netCDF library's chunk cache before :func:`mcsim.write_results` writes ``ds`` to ``path``, and as
    ``to_netcdf`` saw it during the write (one entry per call)."""
    import netCDF4
    import xarray as xr

    import mcsim

    before = netCDF4.get_chunk_cache()
    seen = []
    real = xr.Dataset.to_netcdf

    def watching(self, *args, **kwargs):
        seen.append(netCDF4.get_chunk_cache())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", watching)
    mcsim.write_results(ds, path)
    return before, seen
