"""Resume: finished (configuration, run chunk) pieces recorded next to the output.

While a sweep runs, each finished task's rows are saved (atomically: temporary
file, then rename) in a folder beside the output file,
``.<output name>.parts-<key>``, where the key hashes everything that
determines the rows: the scenario as TOML (overrides applied, so seed, runs and
mode included), the chunk size and the mcsim version. Rerunning the same
command after an interruption (Ctrl-C, kill -9) loads those pieces and runs
only the rest; the final file is identical to an uninterrupted run's. Folders
with another key (a changed scenario) are stale and are removed, never reused.
The folder is removed once the output file is written.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from . import __version__
from .kernels.montecarlo import N_OUT
from .scenario import Scenario
from .tasks import Task


def sweep_key(scenario: Scenario, chunk_runs: int) -> str:
    """Hash of what determines every piece of a sweep."""
    text = "\n".join([scenario.to_toml(), f"chunk_runs={chunk_runs}", f"mcsim={__version__}"])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class PieceStore:
    """Saved task results of one sweep, in a folder beside its output file."""

    def __init__(self, output: str | Path, key: str) -> None:
        output = Path(output)
        self.prefix = f".{output.name}.parts-"
        self.parent = output.parent
        self.folder = self.parent / f"{self.prefix}{key}"

    def remove_stale(self) -> list[Path]:
        """Remove piece folders of the same output with another key; returns them."""
        stale = [p for p in self.parent.glob(f"{glob.escape(self.prefix)}*") if p != self.folder and p.is_dir()]
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
        return stale

    def load(self, task: Task) -> np.ndarray | None:
        """The saved rows of ``task``, or None."""
        path = self.folder / f"{task.name}.npy"
        if not path.is_file():
            return None
        try:
            rows = np.load(path, allow_pickle=False)
        except Exception:  # damaged or truncated (e.g. a crash before the data reached the disk): rerun
            return None
        expected = (task.stop - task.start, N_OUT)
        return rows if rows.shape == expected and rows.dtype == np.float64 else None

    def save(self, task: Task, rows: np.ndarray) -> None:
        """Save the rows of a finished task atomically."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{task.name}.", suffix=".tmp", dir=self.folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                np.save(handle, rows, allow_pickle=False)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.folder / f"{task.name}.npy")
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def clear(self) -> None:
        """Remove the folder (after the output file is written)."""
        shutil.rmtree(self.folder, ignore_errors=True)
