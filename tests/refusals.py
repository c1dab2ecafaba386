"""The checks of a refusal shared by the bad-input corpora (tests/cli/bad_inputs/, bad_calibrations/, ...):
each file's first line names the key its error must name, and a refused command prints one line, exits 2
and writes nothing."""

from __future__ import annotations

from pathlib import Path


def expected_key(path: Path) -> str:
    """The ``# expect-key: KEY`` of a corpus file's first line."""
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect-key: "), f"{path}: the first line names no expected key"
    return first.removeprefix("# expect-key: ")


def assert_refused(status: int, err: str, path: Path, folder: Path) -> None:
    """Exit status 2, one line ``mcsim: error: PATH: ...`` naming the file's expected key, no traceback, and
    nothing left in ``folder`` (no output file, no temporary file)."""
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"mcsim: error: {path}: "), lines[0]
    assert expected_key(path) in lines[0], lines[0]
    assert "Traceback" not in err
    assert list(folder.iterdir()) == []
