"""Sharded sweeps: one part of a sweep per job (``mcsim run --shard i/n``), and their combination.

Which sweep configurations a part holds is :class:`mcsim.scenario.shard.Shard`'s (the
part is chosen with the input); this module combines the parts' files.

Run ``r`` of a configuration draws from the streams of ``(seed, r)`` whichever job runs it
(:mod:`mcsim.engine.simulate`), so :func:`combine_parts` of the ``n`` part files is
bit-identical, variable by variable, to the unsharded run: only the provenance differs
(the combined file records every part's).

**The part layout.** A part holds only its share of the sweep, so that its memory and file are
about ``1/n`` of the whole (a sweep too large for one machine runs as parts that fit):

* every per-configuration and per-run variable has the dim ``configuration`` in place of the
  sweep dims: dims (``configuration``, [``draw``,] [``run``]), the configurations the part holds
  only, in increasing flat index;
* the coordinate ``configuration`` is that flat index, C order over the sweep dims named by the
  ``sweep_dims`` attribute (integers, ``long_name`` and ``units`` "1"): part ``i/n`` holds the
  flat indices ``i, i + n, i + 2n, ...`` below the number of configurations;
* every sweep dim keeps its full coordinate (values, ``long_name``, ``units``) as a dimension of
  the file that no variable uses, so that the sweep can be rebuilt from any part;
* the variables along ``draw`` only (the drawn values of the uncertain inputs), the ``run`` and
  ``draw`` coordinates and every provenance attribute are those of the unsharded run, plus the
  ``shard`` attribute (``"i/n"``).

:func:`combine_parts` reads the parts one after the other (a file is read when its turn comes
and released once merged) and scatters each part's configurations into the arrays of the whole
sweep (the flat index unravelled over the sweep dims): the memory it needs is about the merged
result plus the largest part (:func:`mcsim.scenario.limits.combine_memory_estimate_bytes`). A part
file is untrusted input: a part whose ``configuration`` coordinate holds an index outside the
sweep, repeats one, or is not exactly the set its ``shard`` attribute says it holds is refused, as is
one whose ``sweep_dims`` is not the sweep of its ``scenario_toml`` (names, order, sizes), whose
variables or coordinates differ from the first part's in dims, type (text may differ in width only)
or attributes, or that lays a variable on the sweep dims, so that a crafted file cannot silently
change a result.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.io.format import format_bytes
from mcsim.io.netcdf import loaded_bytes, open_results, result_attributes
from mcsim.io.variables import PART_DIM
from mcsim.scenario.limits import check_combine_size, over_memory_limit
from mcsim.scenario.shard import Shard, parse_shard

# The dim of a part's configurations (see the module docstring).
CONFIGURATION = PART_DIM
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
# Encoding keys that describe a part's storage shape, not the merged array's.
_SHAPE_ENCODING = ("chunksizes", "original_shape", "preferred_chunks", "contiguous", "source")

Part = str | Path | xr.Dataset


def part_shard(ds: xr.Dataset | dict, name: str) -> Shard:
    """The shard a part (a dataset, or its global attributes) records; ValueError naming ``name`` when it is
    not a part file."""
    text = (ds.attrs if isinstance(ds, xr.Dataset) else ds).get("shard")
    if text is None:
        raise ValueError(f"{name}: not a part of a sharded run (no 'shard' attribute; made by mcsim run --shard I/N)")
    try:
        return parse_shard(str(text))
    except ValueError as err:
        raise ValueError(f"{name}: attribute {err}") from None


def part_configurations(ds: xr.Dataset) -> tuple[int, int]:
    """``(simulated, total)`` configuration entries of a part (a configuration, or with draws a
    (configuration, draw) pair): those it holds with at least one finite run, and the whole sweep's."""
    wall = ds["wall_time"]
    if "run" not in wall.dims or CONFIGURATION not in wall.dims:
        return 0, 0
    per_configuration = int(wall.isel(run=0, drop=True).size) // max(ds.sizes[CONFIGURATION], 1)
    sweep = [d for d in str(ds.attrs.get("sweep_dims", "")).split() if d in ds.dims]
    total = per_configuration * int(np.prod([ds.sizes[d] for d in sweep], dtype=np.int64))
    return int(wall.notnull().any("run").sum()), total


def combine(paths: Iterable[Part]) -> xr.Dataset:
    """The whole result of a sharded run from its parts (``mcsim combine``), files or datasets.

    Parameters
    ----------
    paths : list (any iterable) of str, Path or xarray.Dataset
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
    parts = list(paths)  # any iterable, read once (a generator)
    if not parts:
        raise ValueError("paths: expected the part files of a sharded run, got none")
    names = [_part_name(given) for given in parts]
    check_combine_size(
        [float(part.nbytes) if isinstance(part, xr.Dataset) else loaded_bytes(part) for part in parts],
        [not isinstance(part, xr.Dataset) for part in parts],
        names,
    )
    return combine_parts(parts, names)


def _part_name(given: Part) -> str:
    """How a part is named: its file's name, a dataset's source file's, or ``part i/n``."""
    if not isinstance(given, xr.Dataset):
        return Path(given).name
    source = given.encoding.get("source")
    return Path(source).name if source else f"part {given.attrs.get('shard', '?')}"


def combine_parts(
    parts: Sequence[Part], names: list[str], open_part: Callable[[str | Path], xr.Dataset] | None = None
) -> xr.Dataset:
    """The result of the whole sweep from the ``n`` parts of ``mcsim run --shard i/n``.

    Parameters
    ----------
    parts : list of xarray.Dataset, str or Path
        Every part, once each, in any order: datasets (from :func:`mcsim.open_results` or
        :func:`mcsim.simulate`) or files, each read by ``open_part`` when its turn comes and
        released once merged (their attributes are read from the headers first).
    names : list of str
        Their file names, for the messages and the provenance.
    open_part : callable, optional
        Reads a part file (default :func:`mcsim.io.netcdf.open_results`).

    Returns
    -------
    xarray.Dataset
        Each configuration's variables from the part that holds it, on the sweep dims; the
        attributes of the parts (which must agree) without ``shard``, with ``shard_parts``
        (JSON: each part's file name, shard and provenance) and a ``history`` line of the combination.

    Raises
    ------
    ValueError
        One line: a file that is not a part, parts of different runs (scenario, seed, runs,
        mode, code), a part missing or given twice, parts whose variables or coordinates differ,
        or a part whose ``configuration`` coordinate is not the set of flat indices its shard holds.
    """
    headers = [part.attrs if isinstance(part, xr.Dataset) else result_attributes(part) for part in parts]
    shards = [part_shard(attrs, name) for attrs, name in zip(headers, names, strict=True)]
    _check_complete(shards, names)
    for attrs, name in zip(headers[1:], names[1:], strict=True):
        _check_same_run(headers[0], attrs, names[0], name)
    merged: _Merged | None = None
    for part, shard, name in zip(parts, shards, names, strict=True):
        ds = part if isinstance(part, xr.Dataset) else (open_part or open_results)(part)
        if merged is None:
            merged = _Merged.of(ds, name)
        merged.add(ds, shard, name)
        del ds  # a part read from its file is released before the next is read
    assert merged is not None, "parts is not empty (checked with the shards)"
    return _combined_attrs(merged.dataset(), shards, headers, names)


@dataclass
class _Merged:
    """The whole sweep's arrays, filled part by part, laid out as the first part read (file ``name``)."""

    shared: xr.Dataset  # the first part's coordinates and variables without ``configuration`` (small)
    layout: dict[str, xr.Variable]  # each per-configuration variable of the first part, none of its rows
    sizes: dict[str, int]  # the first part's dims but ``configuration``
    name: str
    sweep: list[str]
    shape: tuple[int, ...]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # (configurations, ...) of each variable

    @classmethod
    def of(cls, ds: xr.Dataset, name: str) -> _Merged:
        """The merge of the parts laid out as ``ds`` (the first part read, file ``name``)."""
        sweep = _recorded_sweep_dims(ds, name)
        _check_configuration_dim(ds, name)
        per_configuration = [str(var) for var in ds.data_vars if CONFIGURATION in ds[var].dims]
        if off := [var for var in per_configuration if ds[var].dims[0] != CONFIGURATION]:
            raise ValueError(f"{name}: {off[0]} does not have {CONFIGURATION} as its first dimension")
        layout = {var: ds[var].variable.isel({CONFIGURATION: slice(0, 0)}).copy() for var in per_configuration}
        shared = ds.drop_vars([*per_configuration, CONFIGURATION])
        sizes = {str(d): n for d, n in ds.sizes.items() if d != CONFIGURATION}
        return cls(shared, layout, sizes, name, sweep, tuple(ds.sizes[d] for d in sweep))

    @property
    def configurations(self) -> int:
        """Configurations of the whole sweep."""
        return int(np.prod(self.shape, dtype=np.int64))

    def add(self, ds: xr.Dataset, shard: Shard, name: str) -> None:
        """Scatter the part ``ds`` (shard ``shard``, file ``name``) into the whole sweep's arrays, once checked."""
        _check_configuration_dim(ds, name)
        _check_part_variables(ds, self.sweep, name)
        self._check_layout(ds, name)
        flat = _held_flat_indices(ds, shard, self.configurations, name)
        for var in ds.data_vars:
            if str(var) not in self.layout:
                if not self.shared[var].identical(ds[var]):
                    raise ValueError(f"{name}: {var} differs from {self.name}'s: the parts are not of one run")
                continue
            values = ds[var].values
            target = self._target(str(var), values, name)
            target[flat] = values
            self.arrays[str(var)] = target

    def _target(self, var: str, values: np.ndarray, name: str) -> np.ndarray:
        """The whole sweep's array of ``var`` to scatter the part ``name``'s ``values`` into: allocated for the first
        part, widened for text of a wider part. ValueError when text would outgrow the memory limit (a crafted
        part's long text is widened for every configuration of the sweep, far beyond the parts' own bytes)."""
        target = self.arrays.get(var)
        if target is not None and target.dtype == values.dtype:
            return target
        dtype = values.dtype if target is None else np.result_type(target.dtype, values.dtype)
        need = float(self.configurations) * float(np.prod(values.shape[1:])) * dtype.itemsize
        if dtype.kind in "SU" and (over := over_memory_limit(need)):
            raise ValueError(
                f"{name}: the text of {var} ({dtype}) over the sweep's {self.configurations} configurations would need "
                f"about {format_bytes(need)} of memory, {over} (a damaged or edited part)"
            )
        if target is None:
            return np.empty((self.configurations, *values.shape[1:]), dtype=dtype)
        return target.astype(dtype)  # text of another width: the wider

    def _check_layout(self, ds: xr.Dataset, name: str) -> None:
        """ValueError when ``ds`` is not laid out as the first part: variables, their dims and types, the
        sizes and coordinates of every dim but ``configuration``."""
        layout, shared = self.layout, self.shared
        if set(map(str, ds.data_vars)) != set(layout) | set(map(str, shared.data_vars)):
            raise ValueError(f"{name}: its variables or dimensions differ from {self.name}'s")
        for var, first in layout.items():
            if ds[var].dims != first.dims or not _same_type(ds[var].dtype, first.dtype):
                raise ValueError(
                    f"{name}: {var} has other dimensions or another type than in {self.name} "
                    f"({ds[var].dims} {ds[var].dtype}, expected {first.dims} {first.dtype})"
                )
            if ds[var].attrs != first.attrs:
                raise ValueError(f"{name}: the attributes of {var} differ from {self.name}'s")
        if {d: n for d, n in ds.sizes.items() if d != CONFIGURATION} != self.sizes:
            raise ValueError(f"{name}: its variables or dimensions differ from {self.name}'s")
        for dim in shared.dims:
            if dim in shared.coords and (dim not in ds.coords or not shared[dim].identical(ds[dim])):
                raise ValueError(f"{name}: coordinate {dim} differs from {self.name}'s")

    def dataset(self) -> xr.Dataset:
        """The whole sweep: each variable on (sweep dims..., its other dims), the shared ones as the first part's."""
        shared = self.shared
        variables: dict[str, xr.Variable] = {}
        for var, first in self.layout.items():
            values = self.arrays.pop(var)
            encoding = {k: v for k, v in first.encoding.items() if k not in _SHAPE_ENCODING}
            variables[var] = xr.Variable(
                (*self.sweep, *first.dims[1:]),
                values.reshape(self.shape + values.shape[1:]),
                dict(first.attrs),
                encoding,
            )
        variables.update({str(var): shared[var].variable for var in shared.data_vars})
        coords = {str(name): shared[name].variable for name in shared.coords}
        return xr.Dataset(variables, coords=coords, attrs=dict(shared.attrs))


def _same_type(dtype: np.dtype, expected: np.dtype) -> bool:
    """Whether a part's variable of ``dtype`` merges into one of ``expected`` unchanged: the same type, or text
    of any width (float32 runs merged into float64 would no longer be the unsharded run's numbers)."""
    return dtype == expected or (dtype.kind in "OSU" and expected.kind in "OSU")


def _check_part_variables(ds: xr.Dataset, sweep: list[str], name: str) -> None:
    """ValueError when a variable of the part ``ds`` (file ``name``) is laid on the sweep dims (a part holds its
    configurations along ``configuration`` only), or a coordinate other than ``configuration`` runs along it."""
    if on_sweep := [str(v) for v in ds.variables if v not in sweep and set(ds[v].dims) & set(sweep)]:
        raise ValueError(
            f"{name}: {on_sweep[0]} has the dimensions {ds[on_sweep[0]].dims}; a part holds its configurations "
            f"along {CONFIGURATION}, never on the sweep dims (a damaged or edited part)"
        )
    if along := [str(c) for c in ds.coords if c != CONFIGURATION and CONFIGURATION in ds[c].dims]:
        raise ValueError(
            f"{name}: coordinate {along[0]} along {CONFIGURATION} is not of a part (a damaged or edited part)"
        )


def _check_configuration_dim(ds: xr.Dataset, name: str) -> None:
    """ValueError when ``ds`` has no ``configuration`` coordinate of whole numbers (not a part of this layout)."""
    if CONFIGURATION not in ds.dims or CONFIGURATION not in ds.coords or ds[CONFIGURATION].ndim != 1:
        raise ValueError(
            f"{name}: no '{CONFIGURATION}' dimension with its coordinate: not a part in the layout of this mcsim "
            "(a part holds its configurations along it; run the part again)"
        )
    if ds[CONFIGURATION].dtype.kind not in "iu":
        raise ValueError(f"{name}: coordinate {CONFIGURATION} is not whole numbers (flat configuration indices)")


def _held_flat_indices(ds: xr.Dataset, shard: Shard, configurations: int, name: str) -> np.ndarray:
    """The flat indices of the configurations the part ``ds`` holds, once checked to be exactly those of
    ``shard`` (increasing) among the sweep's ``configurations``; ValueError (one line) otherwise."""
    flat = np.asarray(ds[CONFIGURATION].values).astype(np.int64)
    outside = flat[(flat < 0) | (flat >= configurations)]
    if outside.size:
        raise ValueError(
            f"{name}: coordinate {CONFIGURATION} holds {int(outside[0])}, outside the sweep's flat indices "
            f"0 to {configurations - 1} (a damaged or edited part)"
        )
    expected = shard.flat_indices(configurations)
    if flat.size != len(expected):  # compared before the expected indices are made (a crafted sweep may be huge)
        raise ValueError(
            f"{name}: coordinate {CONFIGURATION} holds {flat.size} configurations; part {shard.label} of the sweep's "
            f"{configurations} holds {len(expected)} (a damaged or edited part)"
        )
    values, counts = np.unique(flat, return_counts=True)
    if (counts > 1).any():
        raise ValueError(
            f"{name}: coordinate {CONFIGURATION} repeats configuration {int(values[counts > 1][0])} "
            "(a damaged or edited part)"
        )
    if not np.array_equal(flat, np.arange(expected.start, expected.stop, expected.step)):
        raise ValueError(
            f"{name}: coordinate {CONFIGURATION} holds {flat.size} configurations that are not those of part "
            f"{shard.label} ({len(expected)}: the flat indices i with i mod {shard.count} = {shard.index}, "
            "increasing; a damaged or edited part)"
        )
    return flat


def _recorded_sweep_dims(first: xr.Dataset, name: str) -> list[str]:
    """The sweep dims the part ``first`` (file ``name``) records; ValueError when one is not a dimension."""
    sweep = [d for d in str(first.attrs.get("sweep_dims", "")).split() if d]
    if missing := [d for d in sweep if d not in first.dims or d not in first.coords]:
        raise ValueError(
            f"{name}: attribute sweep_dims names {missing[0]!r}, which is not a dimension of the file "
            "(a damaged or edited part)"
        )
    swept = _scenario_sweep(first.attrs, name)
    if sweep != list(swept):
        raise ValueError(
            f"{name}: attribute sweep_dims is {' '.join(sweep)!r}; the sweep of its scenario_toml is "
            f"{' '.join(swept)!r}, in this order (a damaged or edited part)"
        )
    if off := [d for d in sweep if first.sizes[d] != swept[d]]:
        raise ValueError(
            f"{name}: dimension {off[0]} has {first.sizes[off[0]]} values; the sweep of its scenario_toml has "
            f"{swept[off[0]]} (a damaged or edited part)"
        )
    return sweep


def _scenario_sweep(attrs: dict, name: str) -> dict[str, int]:
    """The sweep the ``scenario_toml`` attribute of a part (file ``name``) records: each sweep dim (its key's last
    component, :class:`mcsim.scenario.config.SweepAxis`) with its number of values, in the sweep's order."""
    try:
        sweep = tomllib.loads(str(attrs.get("scenario_toml", ""))).get("sweep", {})
    except (tomllib.TOMLDecodeError, RecursionError) as err:  # RecursionError: arrays nested thousands deep
        raise ValueError(f"{name}: attribute scenario_toml is not TOML ({err}; a damaged or edited part)") from None
    if not isinstance(sweep, dict) or not all(isinstance(values, list) for values in sweep.values()):
        raise ValueError(f"{name}: attribute scenario_toml: its [sweep] is not a table of KEY = [values]")
    return {str(key).split(".")[-1]: len(values) for key, values in sweep.items()}


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
            also = "given twice" if seen[shard.index] == name else f"also {seen[shard.index]}"
            raise ValueError(f"{name}: part {shard.label} is {also}; give each part once")
        seen[shard.index] = name
    missing = [f"{i}/{count}" for i in range(count) if i not in seen]
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise ValueError(f"missing part{'s' if len(missing) > 1 else ''} {shown} of {count}")
    return count


def _check_same_run(first: dict, other: dict, first_name: str, name: str) -> None:
    """ValueError when the part of attributes ``other`` is not a part of the same run as ``first``'s."""
    for key in MUST_MATCH:
        if first.get(key) != other.get(key):
            raise ValueError(
                f"{name}: attribute {key} differs from {first_name}'s: the parts are not of one run "
                "(the same scenario, seed, runs and mode, simulated by the same code and libraries)"
            )


def _combined_attrs(combined: xr.Dataset, shards: list[Shard], headers: list[dict], names: list[str]) -> xr.Dataset:
    """``combined`` with the provenance of the combination and of every part (``headers``: their attributes)."""
    created = datetime.now(UTC).isoformat(timespec="seconds")
    record = [
        {"file": name, "shard": shard.label, **{key: str(attrs.get(key, "")) for key in PART_PROVENANCE}}
        for shard, attrs, name in sorted(zip(shards, headers, names, strict=True), key=lambda item: item[0].index)
    ]
    attrs = {key: value for key, value in combined.attrs.items() if key != "shard"}
    attrs["shard_parts"] = json.dumps(record, indent=1)
    attrs["created"] = created
    attrs["history"] = (
        f"{created}: mcsim combined {len(headers)} parts of a sharded run ({', '.join(r['file'] for r in record)})\n"
        + "\n".join(r["history"] for r in record)
    )
    combined.attrs = attrs
    return combined
