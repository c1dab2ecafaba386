"""Resume: finished (configuration, run chunk) pieces recorded next to the output.

While a sweep runs, each finished task's rows are saved atomically
(:mod:`mcsim.io.atomic`) in a folder beside the output file,
``.<output name>.parts-<key>``, where the key hashes everything that
determines the rows: the scenario as TOML (overrides applied, so seed, runs and
mode included), the chunk size and the source of the kernels and model modules
(:func:`model_source_hash`). Rerunning the same command after an interruption
(Ctrl-C, kill -9) loads those pieces and runs only the rest; the final file is
identical to an uninterrupted run's. Folders with another key (a changed
scenario or a changed model) are stale and are removed once the new output is
written, never reused. The folder is removed once the output file is written.

Nothing found in the folder is trusted. A piece is one ``.npz`` file holding
its rows and a JSON header that says what it is: the task (configuration index
and run range), a hash of that configuration itself, the seed, mode, scenario
hash, chunk size, model-source hash and a SHA-256 of the rows. A piece is
reused only when every field matches what this run would compute and the
rows match their checksum and contain no NaN; any other piece is recomputed,
with one line through ``notify`` saying which and why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mcsim._version import RESULT_LIBRARIES, RESULT_PACKAGES, library_versions, model_source_hash  # noqa: F401
from mcsim.engine.tasks import Task
from mcsim.errors import PieceWriteError  # noqa: F401  (raised here; public from this module too)
from mcsim.io.atomic import atomic_open, sidecar
from mcsim.kernels.interface import N_OUT
from mcsim.scenario.config import Scenario

PIECE_FORMAT = "mcsim-piece-1"
# Rejection messages printed before the rest are only counted (a wholly foreign folder).
_MAX_NOTICES = 10


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def config_hash(config: object) -> str:
    """SHA-256 of one configuration's full value (its frozen-dataclass ``repr``)."""
    return _sha256(repr(config))


def rows_checksum(rows: np.ndarray) -> str:
    """SHA-256 of a rows array: shape, dtype and bytes (C order)."""
    digest = hashlib.sha256(f"{rows.shape}{rows.dtype.str}".encode())
    digest.update(np.ascontiguousarray(rows).tobytes())
    return digest.hexdigest()


def sweep_key(scenario: Scenario, chunk_runs: int) -> str:
    """Hash of what determines every piece of a sweep (16 hex digits)."""
    text = "\n".join([scenario.to_toml(), f"chunk_runs={chunk_runs}", f"model={model_source_hash()}"])
    return _sha256(text)[:16]


class PieceStore:
    """Saved task results of one sweep, in a folder beside its output file.

    Parameters
    ----------
    output : str or Path
        The output file the sweep will write.
    scenario : Scenario
        The scenario being simulated (overrides applied).
    chunk_runs : int
        Runs per task.
    notify : callable, optional
        Called with one line for each saved piece that is not reused.
    """

    def __init__(
        self, output: str | Path, scenario: Scenario, chunk_runs: int, notify: Callable[[str], None] | None = None
    ) -> None:
        self.output = Path(output)
        self.key = sweep_key(scenario, chunk_runs)
        self.folder = sidecar(self.output, f".parts-{self.key}")
        self._stale = re.compile(re.escape(self.folder.name[: -len(self.key)]) + r"[0-9a-f]{16}")
        self._scenario = scenario
        # the simulated configurations; simulate() sets the (config, draw) ones
        self.configs: Sequence[object] = scenario.configs
        self._chunk_runs = chunk_runs
        self._scenario_hash = _sha256(scenario.to_toml())
        self._notify = notify
        self._notices = 0

    def problem(self) -> str:
        """Why pieces cannot be kept in :attr:`folder`, or "" (checked before simulating)."""
        if self.folder.is_symlink() or (self.folder.exists() and not self.folder.is_dir()):
            return f"resume folder {self.folder} exists and is not a folder; remove it or use --no-resume"
        if self.folder.is_dir():
            for entry in sorted(self.folder.iterdir()):  # a piece path taken by a folder or link could never be saved
                if entry.name.endswith(".npz") and (entry.is_symlink() or not entry.is_file()):
                    return (
                        f"resume folder {self.folder} holds {entry.name}, which is not a piece file "
                        "(a folder or link); remove it or use --no-resume"
                    )

            try:
                tempfile.TemporaryFile(dir=self.folder).close()
            except OSError as err:
                return f"resume folder {self.folder} is not writable ({err.strerror or err}); use --no-resume"
        return ""

    def header(self, task: Task) -> dict[str, object]:
        """What a piece of ``task`` must say it is (without the rows checksum)."""
        run = self._scenario.run
        return {
            "format": PIECE_FORMAT,
            "task": dataclasses.asdict(task),
            "config_hash": config_hash(self.configs[task.config]),
            "seed": run.seed,
            "mode": run.mode,
            "runs": run.runs,
            "chunk_runs": self._chunk_runs,
            "scenario_hash": self._scenario_hash,
            "model_hash": model_source_hash(),
        }

    def path(self, task: Task) -> Path:
        """The piece file of ``task``."""
        return self.folder / f"{task.name}.npz"

    def remove_stale(self) -> list[Path]:
        """Remove piece folders of the same output with another key; returns them."""
        if not self.folder.parent.is_dir():
            return []
        stale = [
            p
            for p in self.folder.parent.iterdir()
            if p != self.folder and self._stale.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
        ]
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
        return sorted(stale)

    def load(self, task: Task) -> np.ndarray | None:
        """The saved rows of ``task`` when they check out, else None (the task is run again)."""
        path = self.path(task)
        if path.is_symlink() or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(str(data["header"][()]))
                rows = data["rows"]
        except Exception:  # damaged, truncated or not ours: rerun
            self._reject(task, "cannot be read")
            return None
        reason = self._mismatch(task, header, rows)
        if reason:
            self._reject(task, reason)
            return None
        return rows

    def _mismatch(self, task: Task, header: object, rows: np.ndarray) -> str:
        """Why a piece read back is not the one ``task`` needs, or ""."""
        if not isinstance(header, dict):
            return "has no header"
        expected = self.header(task)
        wrong = [k for k, v in expected.items() if header.get(k) != v]
        if wrong:
            return f"was made for another {', '.join(wrong)}"
        if rows.shape != (task.stop - task.start, N_OUT) or rows.dtype != np.float64:
            return f"has rows of shape {rows.shape} {rows.dtype}, expected {(task.stop - task.start, N_OUT)} float64"
        if header.get("rows_sha256") != rows_checksum(rows):
            return "does not match its checksum (modified or damaged)"
        if np.isnan(rows).any():
            return "contains NaN"
        return ""

    def _reject(self, task: Task, reason: str) -> None:
        self._notices += 1
        if self._notify is not None and self._notices <= _MAX_NOTICES:
            more = "; further rejected pieces are recomputed without a message" if self._notices == _MAX_NOTICES else ""
            self._notify(f"recomputing {task.name}: its saved piece {reason}{more}")
        return None

    def save(self, task: Task, rows: np.ndarray) -> None:
        """Save the rows of a finished task, with their header, atomically.

        Raises
        ------
        PieceWriteError
            The piece could not be written; nothing of it is left behind.
        """
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        header = {**self.header(task), "rows_sha256": rows_checksum(rows)}
        try:
            # Not flushed to the disk: a piece damaged by a crash fails its checksum and is run again.
            with atomic_open(self.path(task), durable=False) as handle:
                np.savez(handle, rows=rows, header=np.array(json.dumps(header, sort_keys=True)))
        except OSError as err:
            raise PieceWriteError(self.path(task), err) from err

    def clear(self) -> None:
        """Remove the folder (after the output file is written)."""
        shutil.rmtree(self.folder, ignore_errors=True)
