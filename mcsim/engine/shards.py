"""Sharded sweeps: one part of a sweep per job (``mcsim run --shard i/n``), and their combination.

Which sweep configurations a part holds is :class:`mcsim.scenario.shard.Shard`'s (the
part is chosen with the input); this module combines the parts' files.

Run ``r`` of a configuration draws from the streams of ``(seed, r)`` whichever job runs it
(:mod:`mcsim.engine.simulate`), so :func:`combine_parts` of the ``n`` part files is
bit-identical, variable by variable, to the unsharded run: only the provenance differs
(the combined file records every part's).

A part file has the full sweep shape: the per-run variables of configurations it does not
hold are NaN (``completed`` False), and its ``shard`` attribute (``"i/n"``) says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.io.netcdf import loaded_bytes, open_results
from mcsim.scenario.limits import check_combine_size
from mcsim.scenario.shard import Shard, parse_shard

# The provenance of each part that the combined file keeps (in ``shard_parts``, JSON).
PART_PROVENANCE = ("created", "history", "scenario_source", "scenario_overrides", "mcsim_version", "numba_version")
# Attributes every part must share: the same scenario, simulated the same way by the same code.
MUST_MATCH = (
    "scenario_toml",
    "seed",
    "runs",
    "mode",
    "sweep_dims",
    "draws",
    "design",
    "mcsim_version",
    "numba_version",
    "mcsim_model_hash",
)


def part_shard(ds: xr.Dataset, name: str) -> Shard:
    """The shard a part file records; ValueError naming ``name`` when it is not a part file."""
    text = ds.attrs.get("shard")
    if text is None:
        raise ValueError(f"{name}: not a part of a sharded run (no 'shard' attribute; made by mcsim run --shard I/N)")
    try:
        return parse_shard(str(text))
    except ValueError as err:
        raise ValueError(f"{name}: attribute {err}") from None


def combine(paths: Sequence[str | Path | xr.Dataset]) -> xr.Dataset:
    """The whole result of a sharded run from its parts (``mcsim combine``), files or datasets.

    Parameters
    ----------
    paths : list of str, Path or xarray.Dataset
        Every part of ``mcsim run --shard i/n`` (or of :func:`mcsim.simulate` with
        ``shard=``), once each, in any order: the part files' paths, the part datasets
        themselves (held in memory, never written), or both mixed. A dataset is named in
        messages and in the provenance by the file it was read from, else as ``part i/n``.

    Returns
    -------
    xarray.Dataset
        As :func:`combine_parts`: variable by variable the unsharded run's result.

    Raises
    ------
    ValueError
        A file that is not an mcsim result, parts that do not make one run, or parts whose combination
        would need more memory than :func:`mcsim.scenario.limits.memory_limit_bytes` (estimated from the
        files' headers before any is read; :func:`mcsim.scenario.limits.limits` changes it): one line.
    OSError
        A file cannot be read.
    """
    if isinstance(paths, (str, Path, xr.Dataset)):
        one = "dataset" if isinstance(paths, xr.Dataset) else "path"
        raise TypeError(f"paths: expected a list of parts (files or datasets), got one {one}")
    if not paths:
        raise ValueError("paths: expected the part files of a sharded run, got none")
    in_memory = [isinstance(part, xr.Dataset) for part in paths]
    check_combine_size(
        [float(part.nbytes) if isinstance(part, xr.Dataset) else loaded_bytes(part) for part in paths],
        [not held for held in in_memory],
    )
    parts = [part if isinstance(part, xr.Dataset) else open_results(part) for part in paths]
    return combine_parts(parts, [_part_name(given, ds) for given, ds in zip(paths, parts, strict=True)])


def _part_name(given: str | Path | xr.Dataset, ds: xr.Dataset) -> str:
    """How a part is named: its file's name, a dataset's source file's, or ``part i/n``."""
    if not isinstance(given, xr.Dataset):
        return Path(given).name
    source = ds.encoding.get("source")
    return Path(source).name if source else f"part {ds.attrs.get('shard', '?')}"


def combine_parts(parts: list[xr.Dataset], names: list[str]) -> xr.Dataset:
    """The result of the whole sweep from the ``n`` part files of ``mcsim run --shard i/n``.

    Parameters
    ----------
    parts : list of xarray.Dataset
        Every part, once each, in any order (from :func:`mcsim.open_results`).
    names : list of str
        Their file names, for the messages and the provenance.

    Returns
    -------
    xarray.Dataset
        Each configuration's variables from the part that holds it; the attributes of the
        parts (which must agree) without ``shard``, with ``shard_parts`` (JSON: each part's
        file name, shard and provenance) and a ``history`` line of the combination.

    Raises
    ------
    ValueError
        One line: a file that is not a part, parts of different runs (scenario, seed, runs,
        mode, code), a part missing or given twice, or parts whose shapes differ.
    """
    shards = [part_shard(ds, name) for ds, name in zip(parts, names, strict=True)]
    count = _check_complete(shards, names)
    first = parts[0]
    for ds, name in zip(parts[1:], names[1:], strict=True):
        _check_same_run(first, ds, names[0], name)
    sweep = _recorded_sweep_dims(first, names[0])
    shape = tuple(first.sizes[d] for d in sweep)
    owner = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape) % count
    by_index = {shard.index: ds for shard, ds in zip(shards, parts, strict=True)}
    combined = first.copy(deep=True)
    for var in first.data_vars:
        if tuple(first[var].dims[: len(sweep)]) != tuple(sweep) or not sweep:
            for ds, name in zip(parts[1:], names[1:], strict=True):
                if not first[var].equals(ds[var]):
                    raise ValueError(f"{name}: {var} differs from {names[0]}'s: the parts are not of one run")
            continue
        values = combined[var].values
        for index, ds in by_index.items():
            mine = owner == index
            values[mine] = ds[var].values[mine]
        combined[var].values = values
    return _combined_attrs(combined, shards, parts, names)


def _recorded_sweep_dims(first: xr.Dataset, name: str) -> list[str]:
    """The sweep dims the part ``first`` (file ``name``) records; ValueError when one is not a dimension."""
    sweep = [d for d in str(first.attrs.get("sweep_dims", "")).split() if d]
    if missing := [d for d in sweep if d not in first.dims]:
        raise ValueError(
            f"{name}: attribute sweep_dims names {missing[0]!r}, which is not a dimension of the file "
            "(a damaged or edited part)"
        )
    return sweep


def _check_complete(shards: list[Shard], names: list[str]) -> int:
    """The number of parts, when ``shards`` are each part of one count exactly once."""
    counts = {shard.count for shard in shards}
    if len(counts) != 1:
        raise ValueError(
            "parts of different splits: "
            + ", ".join(f"{name} is {shard.label}" for name, shard in zip(names, shards, strict=True))
        )
    count = counts.pop()
    seen: dict[int, str] = {}
    for name, shard in zip(names, shards, strict=True):
        if shard.index in seen:
            raise ValueError(f"{name}: part {shard.label} is also {seen[shard.index]}; give each part once")
        seen[shard.index] = name
    missing = [f"{i}/{count}" for i in range(count) if i not in seen]
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise ValueError(f"missing part{'s' if len(missing) > 1 else ''} {shown} of {count}")
    return count


def _check_same_run(first: xr.Dataset, other: xr.Dataset, first_name: str, name: str) -> None:
    """ValueError when ``other`` is not a part of the same run as ``first``."""
    for key in MUST_MATCH:
        if first.attrs.get(key) != other.attrs.get(key):
            raise ValueError(
                f"{name}: attribute {key} differs from {first_name}'s: the parts are not of one run "
                "(the same scenario, seed, runs and mode, simulated by the same code and libraries)"
            )
    if dict(first.sizes) != dict(other.sizes) or set(first.data_vars) != set(other.data_vars):
        raise ValueError(f"{name}: its variables or dimensions differ from {first_name}'s")
    for dim in first.dims:
        if dim in first.coords and not first[dim].equals(other[dim]):
            raise ValueError(f"{name}: coordinate {dim} differs from {first_name}'s")


def _combined_attrs(combined: xr.Dataset, shards: list[Shard], parts: list[xr.Dataset], names: list[str]) -> xr.Dataset:
    """``combined`` with the provenance of the combination and of every part."""
    created = datetime.now(UTC).isoformat(timespec="seconds")
    record = [
        {"file": name, "shard": shard.label, **{key: str(ds.attrs.get(key, "")) for key in PART_PROVENANCE}}
        for shard, ds, name in sorted(zip(shards, parts, names, strict=True), key=lambda item: item[0].index)
    ]
    attrs = {key: value for key, value in combined.attrs.items() if key != "shard"}
    attrs["shard_parts"] = json.dumps(record, indent=1)
    attrs["created"] = created
    attrs["history"] = (
        f"{created}: mcsim combined {len(parts)} parts of a sharded run ({', '.join(r['file'] for r in record)})\n"
        + "\n".join(r["history"] for r in record)
    )
    combined.attrs = attrs
    return combined
