"""Memory and time a simulation will need, estimated and checked before it starts.

Two limits, both overridable (``mcsim run --max-memory`` / ``--max-hours``, or
:func:`limits` from Python):

* **Memory.** The result is held in memory until it is written: per
  configuration and run, every per-run output variable, 8 bytes each (the
  arrays are filled in place as configurations finish and become the dataset
  without a copy), plus the kernel's ``N_OUT`` columns of the configurations
  whose tasks are still coming in (:data:`ROWS_IN_FLIGHT` at most), plus about
  4 kB per configuration (its ``Config`` object and per-configuration outputs;
  measured 2.6 kB). Measured: 305 bytes per configuration-run against 410
  estimated (30 configurations x 2,000 runs). A sweep whose estimate exceeds
  half the memory available (``MemAvailable`` of /proc/meminfo, the cgroup's
  limit where lower) is refused before its configurations are built. One part of a sharded sweep
  (``mcsim run --shard i/n``) counts the runs of the configurations it holds only
  (:func:`held_configurations`), so a sweep too large for one machine runs as parts that fit.
  Combining the parts (:func:`check_combine_size`) is refused the same way, estimated from the
  parts' headers before any is read.
* **Time.** :func:`mcsim.model.run_estimate.estimate_run` gives the kernel time of a run;
  summed over tasks and divided by the runs simulated at once (Numba threads,
  dask workers), it is printed before the run starts, and a run estimated at
  more than :data:`DEFAULT_MAX_HOURS` hours is refused (an estimate that large
  is almost always a mistake, e.g. a checkpoint every iteration of 1e10
  iterations; ``--max-hours`` raises the limit).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mcsim.errors import ScenarioError
from mcsim.io.format import format_bytes, format_duration
from mcsim.io.variables import PER_RUN
from mcsim.kernels.interface import N_OUT
from mcsim.scenario.shard import Shard, checked_shard

BYTES_PER_CONFIG = 4096
# Configurations whose kernel rows are held at once while their tasks come in: the local backend
# finishes them in order (one, and the rows of the task being placed); dask out of order (up to 7
# measured with 2 workers, 32 configurations of 20-run tasks).
ROWS_IN_FLIGHT = 16
DEFAULT_MAX_HOURS = 24.0
MEMORY_SHARE = 0.5  # of the available memory
# Peak while a part file is read (mcsim.io.netcdf.open_results), in times its size once read: 1.39 measured with
# tracemalloc for a part of 2 configurations x 2,000 runs (the decoding's temporary copies); an upper bound.
PART_READ_PEAK = 1.5


@dataclass(frozen=True)
class Limits:
    """Largest simulation accepted: bytes of memory (None: half the available) and hours."""

    max_memory_bytes: float | None = None
    max_hours: float = DEFAULT_MAX_HOURS


# The default is shared by every context, which is safe: Limits is a frozen dataclass.
_LIMITS: contextvars.ContextVar[Limits] = contextvars.ContextVar("mcsim_limits", default=Limits())  # noqa: B039


def current_limits() -> Limits:
    """The limits in force (see :func:`limits`)."""
    return _LIMITS.get()


@contextlib.contextmanager
def limits(max_memory_bytes: float | None = None, max_hours: float | None = None) -> Iterator[Limits]:
    """Use other limits inside a ``with`` block (``math.inf`` turns a check off).

    Parameters
    ----------
    max_memory_bytes : float, optional
        Memory a simulation may need, bytes; default half the available memory.
    max_hours : float, optional
        Estimated duration a simulation may have, hours; default :data:`DEFAULT_MAX_HOURS`.
    """
    new = Limits(max_memory_bytes, DEFAULT_MAX_HOURS if max_hours is None else max_hours)
    token = _LIMITS.set(new)
    try:
        yield new
    finally:
        _LIMITS.reset(token)


def bytes_per_config_run() -> int:
    """Bytes of memory per (configuration, run) of the assembled result (its per-run variables)."""
    return 8 * len(PER_RUN)


def memory_estimate_bytes(configurations: int, runs: int, held: int | None = None) -> float:
    """Peak memory of a simulation of ``configurations`` x ``runs``, bytes.

    ``held``: the configurations whose runs are simulated and kept (one part of a sharded sweep,
    :func:`held_configurations`; default all). Every configuration of the sweep is still built and
    prepared (:data:`BYTES_PER_CONFIG` each); only the held ones have per-run outputs and kernel rows.
    """
    if held is None or held == configurations:
        rows_in_flight = min(configurations, ROWS_IN_FLIGHT) * runs * 8 * N_OUT
        return float(configurations) * (runs * bytes_per_config_run() + BYTES_PER_CONFIG) + rows_in_flight
    rows_in_flight = min(held, ROWS_IN_FLIGHT) * runs * 8 * N_OUT
    return float(configurations) * BYTES_PER_CONFIG + float(held) * runs * bytes_per_config_run() + rows_in_flight


def held_configurations(configurations: int, shard: Shard | None) -> int:
    """How many of a sweep's ``configurations`` the part ``shard`` holds (its flat indices ``i`` with
    ``i % count == index``: ``ceil((configurations - index) / count)``, 0 when none); all without a part."""
    return configurations if shard is None else len(shard.flat_indices(configurations))


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_memory_bytes() -> int | None:
    """Memory this process can still use, bytes (None when the OS does not say)."""
    candidates = []
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    candidates.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError):
        pass
    if not candidates:
        try:
            candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            pass
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 1 << 60:
            candidates.append(max(0, limit - usage))
    return min(candidates) if candidates else None


def memory_limit_bytes() -> float | None:
    """Bytes a simulation may need: the override of :func:`limits`, else half the available."""
    override = current_limits().max_memory_bytes
    if override is not None:
        return override
    available = available_memory_bytes()
    return None if available is None else MEMORY_SHARE * available


def over_memory_limit(need_bytes: float) -> str | None:
    """``"more than the limit of 12.3 GB (half the available memory)"`` when ``need_bytes`` exceeds
    :func:`memory_limit_bytes` (the parenthesis names where the limit comes from: half the available memory,
    or ``--max-memory``, :func:`limits`), else None: the one comparison every memory refusal makes."""
    limit = memory_limit_bytes()
    if limit is None or need_bytes <= limit:
        return None
    what = "half the available memory" if current_limits().max_memory_bytes is None else "--max-memory"
    return f"more than the limit of {format_bytes(limit)} ({what})"


def check_sweep_size(shape: tuple[int, ...], runs: int, source: str, shard: Shard | None = None) -> None:
    """Refuse a sweep (or the part ``shard`` of one) whose results would not fit in memory, before it is expanded.

    Parameters
    ----------
    shape : tuple of int
        Values per sweep axis (empty for a single configuration).
    runs : int
        Monte Carlo runs per configuration.
    source : str
        Scenario file, for the error message.
    shard : Shard, optional
        The part of the sweep simulated (``mcsim run --shard i/n``): only the configurations it holds
        (:func:`held_configurations`) have runs in memory (:func:`memory_estimate_bytes`).

    Raises
    ------
    ScenarioError
        With the estimate and the limit (key ``sweep``, or ``run.runs`` without a sweep).
    """
    configurations = math.prod(shape)
    held = held_configurations(configurations, checked_shard(shard))
    need = memory_estimate_bytes(configurations, runs, held)
    if (over := over_memory_limit(need)) is None:
        return
    if shard is not None and held < configurations:
        what = f"part {shard.label} holds {held:,} of {configurations:,} configurations; {held:,}"
        noun = "configuration" if held == 1 else "configurations"
        advice = "use more parts (--shard I/N with a larger N), fewer runs, or raise --max-memory"
    else:
        what, noun = f"{configurations:,}", "configuration" if configurations == 1 else "configurations"
        advice = (
            "use fewer runs or configurations, split the sweep into parts run one by one "
            "(mcsim run --shard I/N, then mcsim combine), or raise --max-memory"
            if shape
            else "use fewer runs, or raise --max-memory"
        )
    raise ScenarioError(
        source,
        "sweep" if shape else "run.runs",
        f"{what} {noun} x {runs:,} runs need about {format_bytes(need)} of memory, {over}; {advice}",
    )


def combine_memory_estimate_bytes(part_bytes: list[float], loaded: list[bool] | None = None) -> float:
    """Peak memory of combining sharded parts of ``part_bytes`` each (their size in memory), bytes.

    A part holds only its share of the sweep (:mod:`mcsim.engine.shards`), so the merged result holds about
    what the parts hold together, ``sum(part_bytes)`` (the variables every part repeats, a sweep's
    coordinates and the draws, are counted once per part: an overestimate by little). The parts are read one
    at a time and released once scattered, so only the largest part that is read (``loaded``, default all: a
    part given as a dataset is in memory already) is held beside it, with its reading's temporary copies
    (:data:`PART_READ_PEAK`): ``sum(part_bytes) + PART_READ_PEAK * max(read part_bytes)``.
    """
    loaded = [True] * len(part_bytes) if loaded is None else loaded
    largest_read = max((size for size, new in zip(part_bytes, loaded, strict=True) if new), default=0.0)
    return float(sum(part_bytes) + PART_READ_PEAK * largest_read)


def check_combine_size(
    part_bytes: list[float], loaded: list[bool] | None = None, names: list[str] | None = None
) -> None:
    """Refuse to combine parts whose merge would not fit in the memory limit (:func:`memory_limit_bytes`;
    the estimate is :func:`combine_memory_estimate_bytes`); ``names``: the parts' files, the largest named.

    Raises
    ------
    ValueError
        One line with the estimate and the limit.
    """
    need = combine_memory_estimate_bytes(part_bytes, loaded)
    if (over := over_memory_limit(need)) is None:
        return
    largest = f" (the largest: {names[part_bytes.index(max(part_bytes))]})" if names else ""
    raise ValueError(
        f"{len(part_bytes)} parts of up to {format_bytes(max(part_bytes))} each{largest} need about "
        f"{format_bytes(need)} of memory to combine, {over}; "
        "combine on a machine with more memory, or raise --max-memory"
    )


@dataclass(frozen=True)
class TimeEstimate:
    """Estimated duration of a simulation."""

    cpu_s: float  # kernel time on one thread, summed over all runs, s
    parallelism: int  # runs simulated at once (0: unknown, a scheduler without workers yet)
    longest_run_s: float  # the longest single run, s (Ctrl-C waits for it at worst)

    @property
    def wall_s(self) -> float:
        """Estimated elapsed time, s (NaN when the parallelism is unknown)."""
        return self.cpu_s / self.parallelism if self.parallelism > 0 else math.nan

    def describe(self) -> str:
        """The estimate as text, e.g. ``estimated 3.2 min``."""
        if self.parallelism > 0:
            return f"estimated {format_duration(self.wall_s)}"
        return f"estimated {format_duration(self.cpu_s)} on one thread (no workers yet to divide it)"


def check_time(estimate: TimeEstimate, source: str, key: str = "run", advice: str | None = None) -> None:
    """Refuse a simulation estimated to take longer than the limit of :func:`limits` (blaming ``key``; ``advice``
    replaces the default remedy, which names ``mcsim run``'s options)."""
    max_hours = current_limits().max_hours
    if estimate.parallelism <= 0 or estimate.wall_s <= max_hours * 3600.0:
        return  # an unknown parallelism (a scheduler whose workers are still starting) is not refused
    raise ScenarioError(
        source,
        key,
        f"estimated {format_duration(estimate.wall_s)} on {estimate.parallelism} "
        f"threads (one run about {format_duration(estimate.longest_run_s)}), "
        f"more than the limit of {max_hours:g} h; "
        + (
            advice or "use fewer runs, configurations or iterations, a longer checkpoint interval, or raise --max-hours"
        ),
    )


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*(?:([kKMGT])(i?)B?|B?)\s*$")


def parse_bytes(text: str) -> float:
    """A memory size: ``8G``/``8GB`` (10^9), ``8GiB`` (2^30), ``500M``, ``2e9``, or ``inf``.

    Raises
    ------
    ValueError
        Not a size.
    """
    if text.strip().lower() in ("inf", "none", "unlimited"):
        return math.inf
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"expected a size such as 8G, 500M, 16GiB or inf, got {text!r}")
    number, prefix, binary = match.groups()
    power = "kMGT".index(prefix.replace("K", "k")) + 1 if prefix else 0
    value = float(number) * (1024.0 if binary else 1000.0) ** power
    if not value > 0:
        raise ValueError(f"expected a size > 0, got {text!r}")
    return value
