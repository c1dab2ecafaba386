"""A user's text file opened for reading, its failures as one line naming the file.

The readers of the logs and tables a user gives (failure CSV, Slurm ``sacct`` records, GPU power
logs, measured iteration times) open their file through :func:`user_text_file`, so that a missing
file, a folder, a device or pipe, bytes that are not UTF-8, or a read the system refuses all end in
the same :class:`~mcsim.errors.ScenarioError` (key ``file``), never a traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from mcsim.errors import ScenarioError

STDIN = "/dev/stdin"  # the standard input by name (`mcsim fit-failures -`): read even as a pipe


@contextlib.contextmanager
def user_text_file(path: str | Path, expected: str, regular_only: bool = True) -> Iterator[TextIO]:
    """Open ``path`` as UTF-8 text (a byte-order mark skipped, newlines as written) for reading.

    ``expected`` names what the file should be ("a CSV file", "a power log") in the messages;
    ``regular_only`` refuses a device or a pipe (which could block the read), except the
    standard input by name. Raises :class:`ScenarioError` naming the file.
    """
    source = str(path)
    try:
        if regular_only and source != STDIN:
            named = Path(path)
            if named.exists() and not named.is_dir() and not named.is_file():
                raise ScenarioError(source, "file", f"not a regular file (a device, a pipe?); expected {expected}")
        with open(path, encoding="utf-8-sig", newline="") as handle:
            yield handle
    except FileNotFoundError:
        raise ScenarioError(source, "file", "no such file") from None
    except IsADirectoryError:
        raise ScenarioError(source, "file", f"is a directory; expected {expected}") from None
    except UnicodeDecodeError:
        raise ScenarioError(source, "file", "not a UTF-8 text file") from None
    except OSError as err:
        raise ScenarioError(source, "file", f"cannot read: {err.strerror or err}") from None
