"""Slurm job records (``sacct --parsable2``) as node lifetimes for ``mcsim fit-failures``.

A cluster run by Slurm already logs every job's allocation and how it ended. This module turns
those records into the lifetimes :func:`mcsim.fitting.weibull.fit_weibull` fits
(:class:`mcsim.fitting.failure_log.FailureLog`), one unit per node, so that
``mcsim fit-failures jobs.txt --scope node`` reads the output of, for example::

    sacct --allocations --parsable2 --starttime 2024-01-01 --endtime 2024-07-01 \\
          --format JobID,JobName,State,ExitCode,Start,End,Elapsed,NNodes,NodeList > jobs.txt

Format
------
``|``-separated text with a header row (``--parsable`` output, with a trailing ``|``, is read too).
The columns ``JobID``, ``State``, ``Start``, ``End`` and ``NodeList`` are required, in any order
and any case; the others (``ExitCode``, ``Elapsed``, ``NNodes``...) are ignored. Blank lines and
lines starting with ``#`` are skipped.

- A job step (``1234.batch``, ``1234.0``, ``1234.extern``: a ``JobID`` with a dot) is skipped: the
  allocation's own row covers its nodes and time (``--allocations`` leaves them out).
- A job that never ran on a node (``Start`` ``Unknown`` or ``None``, ``NodeList`` ``None assigned``,
  or ``End`` equal to ``Start``) adds nothing. A job still ``RUNNING``, ``SUSPENDED``, ``PENDING`` or
  ``REQUEUING`` is skipped (its ``End`` is ``Unknown``).
- ``State`` is read by its first word (``CANCELLED by 1000`` is ``CANCELLED``). A job ending in one
  of ``failure_states`` (default ``NODE_FAIL``) ends in a node failure; every other ending
  (``COMPLETED``, ``FAILED``: the application's exit, ``TIMEOUT``, ``CANCELLED``, ``PREEMPTED``,
  ``OUT_OF_MEMORY``, and ``REQUEUED``: an earlier run of a requeued job, listed with
  ``sacct --duplicates``) leaves the node working. A site whose requeues or time-outs come from
  node faults (a health check that requeues, a hung collective that runs into the time limit)
  counts them with ``failure_states = ("NODE_FAIL", "REQUEUED", "TIMEOUT")``.
- ``NodeList`` is Slurm's host list: ``gpu[001-004,007],login1``, ``r[1-2]n[01-02]``.

How the lifetimes are made
--------------------------
A node is observed while a job holds it: its operating time is the union of its jobs'
``[Start, End]`` intervals [h] (jobs sharing a node are not counted twice). Slurm does not record
which node of a multi-node job failed; the failure is attributed to one node of the job's list,
chosen by the job's id (``crc32(JobID) mod nodes``: the same file always gives the same
lifetimes). For an exponential law the choice does not change the fit (the MTBF estimate is the
total node-hours over the failures); for a Weibull shape it does, and a log of one-node jobs, or
of failures whose node is known, is better. Each node's lifetimes are its operating hours between
failures; the last one is right-censored at the node's last job. Entry ages are unknown and set
to 0 (every node taken as new when the log opens: with a shape k != 1 that biases k toward 1,
docs/fitting.md, "left truncation").

Errors (:class:`mcsim.errors.ScenarioError`, naming the file, the line and the column): a missing
column, a row with the wrong number of fields, a time that is not ISO 8601
(``2024-03-01T08:00:00``), ``End`` before ``Start``, a host list that cannot be expanded or names
more than :data:`MAX_HOSTS` hosts, more than :data:`MAX_NODE_JOBS` (job, node) pairs in all, no job
that ran, or no failure at all.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.fitting.failure_log import FailureLog
from mcsim.io.text_input import user_text_file

REQUIRED = ("jobid", "state", "start", "end", "nodelist")
FAILURE_STATES = ("NODE_FAIL",)
NOT_FINISHED = frozenset({"RUNNING", "SUSPENDED", "PENDING", "REQUEUING", "RESIZING", "REQUEUE_HOLD"})
NO_TIME = frozenset({"", "unknown", "none"})
MAX_HOSTS = 100_000  # hosts one NodeList may name once expanded (the largest clusters: ~25,000 nodes)
MAX_NODE_JOBS = 10_000_000  # (job, node) pairs in a file: ~1 GB at most, like failure_log.MAX_ROWS lifetimes
_MAX_LINE = 1 << 20


class JobRecord(NamedTuple):
    """One allocation that ran: its id, first state word, nodes and clock interval."""

    job: str
    state: str
    nodes: list[str]
    start: datetime
    end: datetime


def is_sacct_log(path: str | Path) -> bool:
    """Whether ``path``'s first line that is neither blank nor a comment is an ``sacct`` header.

    False for anything but a regular file (a pipe would block the read; the CSV reader refuses it).
    """
    try:
        if not Path(path).is_file():
            return False
        with open(path, encoding="utf-8-sig", errors="replace") as handle:
            for line in handle:
                text = line.strip()
                if text and not text.startswith("#"):
                    return "|" in text and text.split("|", 1)[0].strip().lower() == "jobid"
    except OSError:
        return False
    return False


def read_sacct_log(path: str | Path, failure_states: Iterable[str] = FAILURE_STATES) -> FailureLog:
    """The node lifetimes of an ``sacct --parsable2`` file (module docstring).

    Parameters
    ----------
    path : str or Path
        The file.
    failure_states : iterable of str
        Job states (first word, upper case) that end in a node failure; default ``NODE_FAIL``.

    Returns
    -------
    FailureLog
        One row per node lifetime: operating hours [h] between failures, failure flags, entry
        ages (0).

    Raises
    ------
    ScenarioError
        A malformed file, no job that ran, or no failure (one line: file, line, column).
    """
    source = str(path)
    states = frozenset(state.strip().upper() for state in failure_states)
    with user_text_file(path, "Slurm job records", regular_only=False) as handle:
        jobs = list(_records(source, handle))
    if not jobs:
        raise ScenarioError(source, "rows", "no job that ran on a node (finished, with Start < End and a NodeList)")
    log = node_lifetimes(jobs, states)
    if not log.failed.any():
        raise ScenarioError(
            source,
            "State",
            f"no job ended in {', '.join(sorted(states))} among {len(jobs)} jobs; "
            "a failure law cannot be fitted without failures",
        )
    return log


def node_lifetimes(jobs: list[JobRecord], failure_states: frozenset[str]) -> FailureLog:
    """Each node's operating hours between failures (module docstring, "How the lifetimes are made")."""
    origin = min(job.start for job in jobs)
    intervals: dict[str, list[tuple[float, float]]] = defaultdict(list)
    failures: dict[str, list[float]] = defaultdict(list)
    for job in jobs:
        start, end = ((t - origin).total_seconds() / 3600.0 for t in (job.start, job.end))
        for node in job.nodes:
            intervals[node].append((start, end))
        if job.state in failure_states:
            failed = job.nodes[zlib.crc32(job.job.encode()) % len(job.nodes)]
            failures[failed].append(end)
    durations: list[float] = []
    flags: list[bool] = []
    for node in sorted(intervals):
        merged = _merged(intervals[node])
        age = 0.0
        for at in sorted(failures.get(node, [])):
            lived = _operating_hours(merged, at) - age
            if lived > 0:  # a second failure at the same operating age is the same event
                durations.append(lived)
                flags.append(True)
                age += lived
        remaining = _operating_hours(merged, merged[-1][1]) - age
        if remaining > 0:
            durations.append(remaining)
            flags.append(False)
    values = np.asarray(durations, dtype=float)
    return FailureLog(values, np.asarray(flags, dtype=bool), np.zeros_like(values))


def _merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of clock intervals [h], as disjoint intervals in order."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _operating_hours(merged: list[tuple[float, float]], at: float) -> float:
    """Hours inside ``merged`` up to clock time ``at`` [h]."""
    return sum(min(end, at) - start for start, end in merged if start < at)


def _records(source: str, handle) -> Iterable[JobRecord]:
    """The allocations that ran, from the file's lines; header first."""
    columns: dict[str, int] | None = None
    width = pairs = 0
    for n, line in enumerate(iter(lambda: handle.readline(_MAX_LINE + 1), ""), start=1):
        key = f"line {n}"
        if len(line) > _MAX_LINE:
            raise ScenarioError(source, key, f"longer than {_MAX_LINE:,} characters; expected an sacct record")
        text = line.rstrip("\r\n")
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        fields = [field.strip() for field in text.split("|")]
        if columns is None:
            columns, width = _header(source, key, fields)
            continue
        if fields and fields[-1] == "" and len(fields) == width + 1:
            fields.pop()  # --parsable: a trailing "|"
        if len(fields) != width:
            raise ScenarioError(source, key, f"expected {width} |-separated fields as in the header, got {len(fields)}")
        record = _record(source, key, {name: fields[i] for name, i in columns.items()})
        if record is None:
            continue
        pairs += len(record.nodes)
        if pairs > MAX_NODE_JOBS:
            raise ScenarioError(source, key, f"more than {MAX_NODE_JOBS:,} (job, node) pairs; split the log by time")
        yield record
    if columns is None:
        raise ScenarioError(source, "line 1", "empty file; expected the header of sacct --parsable2")


def _header(source: str, key: str, fields: list[str]) -> tuple[dict[str, int], int]:
    """The required columns' positions and the number of fields of a header row."""
    if fields and fields[-1] == "":
        fields = fields[:-1]
    names = [field.lower() for field in fields]
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        expected = "|".join(("JobID", "State", "Start", "End", "NodeList"))
        raise ScenarioError(
            source,
            key,
            f"expected an sacct --parsable2 header with the columns {expected}; missing {', '.join(missing)}",
        )
    return {name: names.index(name) for name in REQUIRED}, len(fields)


def _record(source: str, key: str, row: dict[str, str]) -> JobRecord | None:
    """One row as a job that ran, or None for a step, an unfinished job or one that ran on no node."""
    job = row["jobid"]
    state = row["state"].split(" ", 1)[0].upper()
    if not job:
        raise ScenarioError(source, key, "JobID: expected a job id, got ''")
    if "." in job or state in NOT_FINISHED or row["start"].lower() in NO_TIME:
        return None
    if not state:
        raise ScenarioError(source, key, "State: expected a job state such as COMPLETED or NODE_FAIL, got ''")
    start, end = _time(source, key, "Start", row["start"]), _time(source, key, "End", row["end"])
    if end < start:
        raise ScenarioError(source, key, f"End: expected a time >= Start ({row['start']}), got {row['end']}")
    if end == start or row["nodelist"].lower() in ("", "none assigned", "(null)"):
        return None
    return JobRecord(job, state, expand_hostlist(row["nodelist"], source, key), start, end)


def _time(source: str, key: str, column: str, text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ScenarioError(
            source, key, f"{column}: expected a time such as 2024-03-01T08:00:00, got {text[:100]!r}"
        ) from None


def expand_hostlist(text: str, source: str = "NodeList", key: str = "NodeList") -> list[str]:
    """Slurm's compact host list as host names: ``gpu[01-03,07],cpu1`` -> gpu01, gpu02, gpu03, gpu07, cpu1.

    Raises
    ------
    ScenarioError
        Unbalanced brackets, a range that is not ``a-b`` with ``a <= b``, or more than
        :data:`MAX_HOSTS` hosts.
    """
    hosts: list[str] = []
    for item in _top_level(text, source, key):
        expanded = [""]
        for literal, ranges in _pieces(item, source, key):
            if len(hosts) + len(expanded) * len(ranges) > MAX_HOSTS:  # checked before the product is made
                raise ScenarioError(source, key, f"NodeList: more than {MAX_HOSTS:,} hosts in {text[:100]!r}")
            expanded = [head + literal + tail for head in expanded for tail in ranges]
        hosts.extend(expanded)
    return list(dict.fromkeys(hosts))


def _top_level(text: str, source: str, key: str) -> list[str]:
    """``text`` split at the commas outside brackets; ScenarioError for unbalanced brackets or an empty name."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += (char == "[") - (char == "]")
        if depth not in (0, 1):
            raise ScenarioError(source, key, f"NodeList: unbalanced brackets in {text[:100]!r}")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    if depth or any(not item.strip() for item in items):
        raise ScenarioError(
            source, key, f"NodeList: expected host names such as node[01-04],node07, got {text[:100]!r}"
        )
    return [item.strip() for item in items]


def _pieces(item: str, source: str, key: str) -> list[tuple[str, list[str]]]:
    """A host pattern as (literal, the bracket's alternatives) pairs; the last bracket may be absent."""
    pieces = []
    rest = item
    while "[" in rest:
        literal, _, rest = rest.partition("[")
        inside, _, rest = rest.partition("]")
        pieces.append((literal, [name for part in inside.split(",") for name in _range(part, item, source, key)]))
    pieces.append((rest, [""]))
    return pieces


def _range(part: str, item: str, source: str, key: str) -> list[str]:
    """``"01-03"`` -> 01, 02, 03 (the width of the first bound kept); ``"7"`` -> 7."""
    low, dash, high = part.strip().partition("-")
    if not low.isdigit() or (dash and not high.isdigit()):
        raise ScenarioError(source, key, f"NodeList: expected a range such as 01-04 in {item[:100]!r}, got {part!r}")
    if not dash:
        return [low]
    first, last = int(low), int(high)
    if last < first:
        raise ScenarioError(source, key, f"NodeList: expected a range a-b with a <= b in {item[:100]!r}, got {part!r}")
    if last - first >= MAX_HOSTS:
        raise ScenarioError(source, key, f"NodeList: more than {MAX_HOSTS:,} hosts in {item[:100]!r}")
    return [f"{i:0{len(low)}d}" for i in range(first, last + 1)]
