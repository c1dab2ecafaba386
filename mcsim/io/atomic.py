"""Writing output files safely: atomic replacement, names beside an output, the writer's lock.

Every file mcsim writes (result files, resume pieces, figures, reports, fitted
tables) goes through :func:`atomic_path` (or :func:`atomic_open` /
:func:`write_atomic` built on it):

1. the bytes go to a temporary file ``.<name>.<8 hex digits>.tmp`` in the
   destination folder (created if needed), opened with mode 0666 so that the
   process's umask gives the usual permissions (0644 under umask 022), the same
   for every kind of output;
2. the file is flushed to the disk (``fsync``), then renamed over the
   destination, and the folder is synced so that the rename survives a crash
   (resume pieces, which carry a checksum and are made again when damaged, skip
   the flushes: ``durable=False``);
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
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from mcsim.errors import OutputBusy

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


ANY = "any"  # atomic_path(previous=ANY): replace whatever is at the path


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path`` (a link itself, not followed), or None when there is none.

    Taken when a command starts, and given to :func:`atomic_path` as ``previous`` so that the
    output replaces only what was there then.
    """
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return (info.st_dev, info.st_ino)


def _publish(tmp: Path, path: Path, previous: tuple[int, int] | None | str) -> None:
    """Move the finished ``tmp`` to ``path``, replacing only the file ``previous`` names.

    ``previous`` None: ``path`` must still not exist; the file is linked there, which fails
    when any file was created meanwhile (no check-then-replace race), with a checked rename
    where the file system has no hard links. A ``(device, inode)``: that file must still be
    there. :data:`ANY`: whatever is there is replaced.
    """
    if previous is None:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "a file was created there while mcsim ran", str(path)) from None
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            if file_identity(path) is not None:
                raise FileExistsError(errno.EEXIST, "a file was created there while mcsim ran", str(path)) from None
            os.replace(tmp, path)
            return
        tmp.unlink()
        return
    if previous != ANY and file_identity(path) != previous:
        raise FileExistsError(errno.EEXIST, "the file there was replaced or removed while mcsim ran", str(path))
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_path(path: str | Path, previous: tuple[int, int] | None | str = ANY, durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` atomically.

    For writers that take a file name (netCDF). The temporary file exists
    (empty, mode 0666 & ~umask) when the block starts; it keeps that mode.

    Parameters
    ----------
    path : str or Path
        The destination.
    previous : (int, int) or None or ANY
        What may be replaced (:func:`file_identity` taken at the start of the command):
        None when nothing was there (a file created meanwhile is never replaced), the
        identity of the file that was there, or :data:`ANY` (the default).
    durable : bool
        Flush the file and its folder to the disk (``fsync``), so that the file survives a crash
        of the machine (the default). False for a file whose reader checks it and makes it again
        when damaged (resume pieces carry a SHA-256 of their rows): the rename is still atomic for
        every other process, and each write saves two disk flushes (milliseconds on a real disk; a
        plan writes about 70 pieces, a large sweep thousands).

    Raises
    ------
    FileExistsError
        ``path`` is no longer what ``previous`` says; nothing is written.
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
        if durable:
            _fsync(tmp)
        _publish(tmp, path, previous)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        with contextlib.suppress(OSError):  # the file is in place; a folder sync is best effort
            _fsync(path.parent, directory=True)


@contextlib.contextmanager
def atomic_open(path: str | Path, text: bool = False, durable: bool = True) -> Iterator[IO]:
    """Yield an open file (binary, or UTF-8 text) that replaces ``path`` atomically when closed
    (``durable``: as :func:`atomic_path`)."""
    with atomic_path(path, durable=durable) as tmp:
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

    Where the file system has no ``flock`` (some NFS and Lustre mounts answer
    ``ENOLCK``, ``ENOSYS`` or ``EOPNOTSUPP``), the lock is the existence of
    ``.<name>.lock.owner``, created with ``O_EXCL`` and holding the owner's host
    and process id (:func:`_owner_lock`).

    Raises
    ------
    OutputBusy
        Another process holds the lock.
    OSError
        The lock file cannot be created or opened (its path is the error's ``filename``).
    """
    path = Path(path)
    lock = sidecar(path, ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with _held(lock) as held:
        for leftover in temp_files(path):
            leftover.unlink(missing_ok=True)
        yield held


# errno values of a file system that has no flock: the O_EXCL owner file stands in
_NO_FLOCK = frozenset({errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL})


@contextlib.contextmanager
def _held(lock: Path) -> Iterator[Path]:
    """Hold ``lock`` (flock, or the owner file where there is no flock) for the block."""
    fd = _flock(lock)
    if fd is None:
        with _owner_lock(sidecar(lock.parent / lock.name[1:], ".owner")) as owner:
            try:
                yield owner
            finally:
                with contextlib.suppress(OSError):
                    lock.unlink()
        return
    try:
        yield lock
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        os.close(fd)


def _flock(lock: Path) -> int | None:
    """The open, flock-ed ``lock`` file; None where the file system has no flock.

    Raises OutputBusy when another process holds it, OSError (``filename`` the lock) when it
    cannot be opened.
    """
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(lock)) from None
        try:
            _lock_without_waiting(fd)
            if _same_file(fd, lock):
                return fd
        except BlockingIOError:
            os.close(fd)
            raise OutputBusy(f"another mcsim process is writing this output (it holds {lock})") from None
        except OSError as err:
            os.close(fd)
            if err.errno not in _NO_FLOCK:
                raise
            return None
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # locked a file that its holder removed in the meantime: lock the new one


@contextlib.contextmanager
def _owner_lock(owner: Path) -> Iterator[Path]:
    """The lock where there is no ``flock``: ``owner`` created with ``O_EXCL``, holding ``host pid``.

    An owner file of this host whose process is gone (a ``kill -9``) is taken over; one of
    another host cannot be checked from here, so the error says how to remove it.
    """
    me = f"{socket.gethostname()} {os.getpid()}\n"
    for _ in range(2):
        try:
            fd = os.open(owner, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except FileExistsError:
            if not _stale_owner(owner):
                holder = _read_owner(owner)
                raise OutputBusy(
                    f"another mcsim process ({holder or 'unknown'}) is writing this output (it holds {owner}; "
                    "this file system has no flock: remove that file if the process is gone)"
                ) from None
            owner.unlink(missing_ok=True)
            continue
        try:
            os.write(fd, me.encode())
        finally:
            os.close(fd)
        try:
            yield owner
        finally:
            owner.unlink(missing_ok=True)
        return
    raise OutputBusy(f"another mcsim process took the lock {owner} at the same moment")


def _read_owner(owner: Path) -> str:
    try:
        return owner.read_text(encoding="utf-8", errors="replace").strip()[:200]
    except OSError:
        return ""


def _stale_owner(owner: Path) -> bool:
    """Whether ``owner`` names a process of this host that no longer runs."""
    host, _, pid = _read_owner(owner).rpartition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (another user's): not stale
        return False
    return False


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


# --------------------------------------------------------------------------- report folders

REPORT_MANIFEST = ".mcsim-report.json"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest(folder: Path) -> dict[str, str]:
    """The files an earlier report wrote into ``folder`` (name -> SHA-256), from its manifest; {} if none."""
    try:
        recorded = json.loads((folder / REPORT_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(files, dict):
        return {}
    return {str(k): str(v) for k, v in files.items() if _plain_name(str(k))}


def _plain_name(name: str) -> bool:
    """Whether ``name`` names an entry of the folder itself: one path component, not ``.``, ``..`` or absolute.

    A manifest is read from the folder a report goes into, which anyone may have written: a name
    like ``../victim.txt`` or ``/home/me/notes`` in it is never trusted (it is ignored, so the
    report neither keeps nor deletes what it names).
    """
    return (
        name not in ("", ".", "..")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and name == os.path.basename(name)
        and not os.path.isabs(name)
    )


def folder_problem(folder: str | Path) -> str:
    """Why a report may not be written into ``folder``, or "".

    A report goes into a folder that does not exist yet, an empty folder, or a
    folder that holds only the files an earlier report wrote there, unchanged
    (listed with their SHA-256 in its ``.mcsim-report.json``). Any other file
    (a user's ``README.md``, an edited figure, a link) is never replaced.
    """
    folder = Path(folder)
    if not folder.exists():
        return "exists and is not a folder" if folder.is_symlink() else ""
    if not folder.is_dir():
        return "exists and is not a folder"
    try:
        entries = sorted(os.listdir(folder))
    except OSError as err:
        return f"cannot be listed ({err.strerror or err})"
    recorded = _manifest(folder)
    foreign = [name for name in entries if not _written_by_report(folder, name, recorded)]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        return (
            f"holds files mcsim report did not write or that changed since ({shown}); "
            "refusing to overwrite them (choose a new folder or empty this one)"
        )
    return ""


def _written_by_report(folder: Path, name: str, recorded: dict[str, str]) -> bool:
    """Whether the entry ``name`` of ``folder`` is a file an earlier report wrote and nobody changed since
    (``recorded``: its manifest, :func:`_manifest`), or that manifest itself."""
    if name == REPORT_MANIFEST and recorded:
        return True
    path = folder / name
    try:
        return name in recorded and path.is_file() and not path.is_symlink() and _file_sha256(path) == recorded[name]
    except OSError:
        return False


@contextlib.contextmanager
def staged_folder(folder: str | Path) -> Iterator[Path]:
    """Yield an empty staging folder; on success its files become the report in ``folder``.

    The files are written into a hidden folder beside ``folder`` (beside the
    folder a link points to). On success they are moved into ``folder``
    (created by renaming the staging folder when it does not exist), the files
    an earlier report listed but this one did not write are removed, and the
    manifest (:data:`REPORT_MANIFEST`) lists the new files. On any error the
    staging folder and any folder this call created are removed and
    ``folder`` is as it was.

    Raises
    ------
    FileExistsError
        ``folder`` gained files mcsim did not write while the report was made.
    OSError
        A file cannot be written or moved.
    """
    folder = Path(folder)
    target = folder.resolve() if folder.exists() else folder
    created = _missing_ancestors(target.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _new_staging(target)
    try:
        yield staging
        names = sorted(os.listdir(staging))
        files = {name: _file_sha256(staging / name) for name in names}
        write_atomic(staging / REPORT_MANIFEST, json.dumps({"files": files}, indent=1, sort_keys=True) + "\n")
        if not target.exists():
            os.rename(staging, target)
        else:
            if problem := folder_problem(target):
                raise FileExistsError(errno.EEXIST, problem)
            old = _manifest(target)
            for name in [*names, REPORT_MANIFEST]:
                os.replace(staging / name, target / name)
            for name in set(old) - set(names):
                (target / name).unlink(missing_ok=True)
            staging.rmdir()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for path in created:
            with contextlib.suppress(OSError):
                path.rmdir()
        raise
    with contextlib.suppress(OSError):
        _fsync(target, directory=True)


def _host_tag() -> str:
    """8 hex digits of this host's name: staging folders say which host made them."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


_STAGING_TAIL = re.compile(r"\.([0-9a-f]{8})-(\d{1,10})-[0-9a-f]{8}\.staging")


def _new_staging(target: Path) -> Path:
    """A new empty hidden folder beside ``target`` (``.<name>.<host>-<pid>-<8 hex>.staging``), mode 0777 &
    ~umask like any folder mcsim creates; first the staging folders of ``target`` left by a process of this
    host that no longer runs (a ``kill -9`` or SIGTERM mid-report) are removed."""
    _remove_stale_staging(target)
    while True:
        staging = sidecar(target, f".{_host_tag()}-{os.getpid()}-{secrets.token_hex(4)}.staging")
        try:
            os.mkdir(staging, 0o777)
        except FileExistsError:
            continue
        return staging


def _remove_stale_staging(target: Path) -> None:
    """Remove the staging folders of ``target`` whose process (of this host) is gone."""
    stem = f".{target.name}"
    if len(os.fsencode(stem)) + 40 > NAME_MAX:  # a hashed sidecar name: not matched, left alone
        return
    with contextlib.suppress(OSError):
        for entry in os.scandir(target.parent):
            match = _STAGING_TAIL.fullmatch(entry.name[len(stem) :]) if entry.name.startswith(stem) else None
            if match and match.group(1) == _host_tag() and _process_gone(int(match.group(2))):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)


def _process_gone(pid: int) -> bool:
    """Whether no process ``pid`` runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # it exists (another user's), or not a pid: kept
        return False
    return False


def _missing_ancestors(path: Path) -> list[Path]:
    """The folders from ``path`` up that do not exist yet, deepest first."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing
