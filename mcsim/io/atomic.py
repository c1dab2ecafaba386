"""Writing output files safely: atomic replacement, names beside an output, the writer's lock.

Every file mcsim writes (result files, resume pieces, figures, reports, fitted
tables) goes through :func:`atomic_path` (or :func:`atomic_open` /
:func:`write_atomic` built on it):

1. the bytes go to a temporary file ``.<name>.<8 hex digits>.tmp`` in the
   destination folder (created if needed), opened with mode 0666 so that the
   process's umask gives the usual permissions (0644 under umask 022), the same
   for every kind of output;
2. the file is flushed to the disk (``fsync``), then renamed over the
   destination, and the folder is synced so that the rename survives a crash;
3. on any error or interruption (``KeyboardInterrupt`` included) the temporary
   file is removed and the destination is left as it was.

A ``kill -9`` during step 1 leaves the temporary file behind; the next
``mcsim run`` of the same output removes it while it holds the output's lock
(:func:`output_lock`), matching only that output's own temporary names.

Names derived from an output (temporary files, the lock, the resume folder) are
``.<name><tail>``; when that would exceed the 255-byte limit of a file name, a
hash of the name stands in for it (:func:`sidecar`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from mcsim.errors import OutputBusy  # noqa: F401  (raised here; public from this module too)

NAME_MAX = 255  # bytes in one path component (Linux, macOS, Windows)
_TEMP_TAIL = re.compile(r"\.[0-9a-f]{8}\.tmp")


def sidecar(path: str | Path, tail: str) -> Path:
    """The hidden file ``.<name><tail>`` beside ``path``.

    Parameters
    ----------
    path : str or Path
        The output file.
    tail : str
        What distinguishes this companion (``".lock"``, ``".parts-<key>"``, ...).

    Returns
    -------
    Path
        In the output's folder. When ``.<name><tail>`` would be longer than
        :data:`NAME_MAX` bytes, ``.<sha256 of the name, 32 hex digits><tail>``.
    """
    path = Path(path)
    name = f".{path.name}{tail}"
    if len(os.fsencode(name)) > NAME_MAX:
        name = f".{hashlib.sha256(os.fsencode(path.name)).hexdigest()[:32]}{tail}"
    return path.parent / name


def temp_files(path: str | Path) -> list[Path]:
    """Temporary files of :func:`atomic_path` for ``path`` present in its folder."""
    path = Path(path)
    stem = sidecar(path, ".00000000.tmp").name[: -len(".00000000.tmp")]
    if not path.parent.is_dir():
        return []
    return sorted(
        p for p in path.parent.iterdir() if p.name.startswith(stem) and _TEMP_TAIL.fullmatch(p.name[len(stem) :])
    )


def _new_temp(path: Path) -> Path:
    while True:
        tmp = sidecar(path, f".{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # mode: 0666 & ~umask
        except FileExistsError:
            continue
        return tmp


def _fsync(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` atomically.

    For writers that take a file name (netCDF). The temporary file exists
    (empty, mode 0666 & ~umask) when the block starts; it keeps that mode.

    Raises
    ------
    OSError
        When the folder cannot be created or the file cannot be written, synced
        or renamed; ``path`` is then unchanged and no temporary file is left.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_temp(path)
    try:
        mode = tmp.stat().st_mode & 0o777
        yield tmp
        if tmp.stat().st_mode & 0o777 != mode:  # a writer that recreated the file
            os.chmod(tmp, mode)
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the file is in place; a folder sync is best effort
        _fsync(path.parent, directory=True)


@contextlib.contextmanager
def atomic_open(path: str | Path, text: bool = False) -> Iterator[IO]:
    """Yield an open file (binary, or UTF-8 text) that replaces ``path`` atomically when closed."""
    with atomic_path(path) as tmp:
        handle: IO
        with open(tmp, "w", encoding="utf-8") if text else open(tmp, "wb") as handle:
            yield handle


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (str as UTF-8) to ``path`` atomically; returns the path."""
    with atomic_open(path, text=isinstance(data, str)) as handle:
        handle.write(data)
    return Path(path)


@contextlib.contextmanager
def output_lock(path: str | Path) -> Iterator[Path]:
    """Hold the exclusive lock of the output ``path`` for the duration of the block.

    The lock is an OS file lock (``flock``) on ``.<name>.lock`` beside the
    output, so it is released when the process ends however it ends. mcsim
    does not wait for a lock another process holds. While holding it, the
    temporary files that an interrupted write of this output left behind are
    removed. The lock file is removed on release (while still locked; a
    process that locked a lock file already removed tries again), so a
    finished run leaves nothing beside its output; after a ``kill -9`` it stays
    and is reused.

    Raises
    ------
    OutputBusy
        Another process holds the lock.
    OSError
        The lock file cannot be created or opened.
    """
    path = Path(path)
    lock = sidecar(path, ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            _lock_without_waiting(fd)
            if _same_file(fd, lock):
                break
        except BlockingIOError:
            os.close(fd)
            raise OutputBusy(f"another mcsim process is writing this output (it holds {lock})") from None
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # locked a file that its holder removed in the meantime: lock the new one
    try:
        for leftover in temp_files(path):
            leftover.unlink(missing_ok=True)
        yield lock
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        os.close(fd)


def _lock_without_waiting(fd: int) -> None:
    """Take the exclusive ``flock`` of the open file ``fd``, or raise ``BlockingIOError`` when another holds it.

    Nothing where there is no ``fcntl`` (not POSIX): no lock.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the file at ``path``."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (info.st_dev, info.st_ino) == (mine.st_dev, mine.st_ino)
