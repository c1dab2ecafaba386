"""Report folders (mcsim.io.atomic.staged_folder): the manifest found in the folder is never trusted beyond it.

Findings of the hostile review of issue 42, each failed before its fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mcsim.io import atomic


@pytest.mark.parametrize("name", ["../victim.txt", "ABSOLUTE", "sub/../../victim.txt", "..", "."])
def test_a_crafted_manifest_never_deletes_a_path_outside_the_report_folder(name, tmp_path):
    # Found: a `.mcsim-report.json` listing `../victim.txt` or an absolute path made the next report delete it.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    folder = tmp_path / "rep"
    folder.mkdir()
    (folder / "README.md").write_text("an earlier report")  # a genuine entry, so the manifest vouches for itself
    name = str(victim) if name == "ABSOLUTE" else name
    files = {"README.md": hashlib.sha256(b"an earlier report").hexdigest(), name: "0" * 64}
    (folder / atomic.REPORT_MANIFEST).write_text(json.dumps({"files": files}))
    with atomic.staged_folder(folder) as staging:
        (staging / "index.md").write_text("report")
    assert victim.read_text() == "precious"
    assert sorted(os.listdir(folder)) == [atomic.REPORT_MANIFEST, "index.md"]
    assert sorted(os.listdir(tmp_path)) == ["rep", "victim.txt"]


def test_a_manifest_naming_only_outside_paths_does_not_vouch_for_itself(tmp_path):
    # A manifest whose every name is refused holds nothing: it is a file the report did not write.
    folder = tmp_path / "rep"
    folder.mkdir()
    (folder / atomic.REPORT_MANIFEST).write_text(json.dumps({"files": {"../x": "0" * 64}}))
    assert "did not write" in atomic.folder_problem(folder)


def test_the_reports_own_manifest_still_lets_it_replace_its_files(tmp_path):
    folder = tmp_path / "rep"
    for names in (["README.md", "a.png"], ["README.md"]):
        with atomic.staged_folder(folder) as staging:
            for name in names:
                (staging / name).write_text(name)
        assert sorted(os.listdir(folder)) == sorted([atomic.REPORT_MANIFEST, *names])
    assert Path(folder / "README.md").read_text() == "README.md"


def test_staging_folders_of_a_killed_report_are_removed_by_the_next(tmp_path):
    # Found: report staging folders were left after kill -9 and SIGTERM and never cleaned.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    folder = tmp_path / "rep"
    stale = tmp_path / f".rep.{host}-{dead_pid}-0123abcd.staging"
    alive = tmp_path / f".rep.{host}-{os.getpid()}-0123abcd.staging"  # a report of this live process: kept
    other_host = tmp_path / f".rep.00000000-{dead_pid}-0123abcd.staging"  # cannot be checked from here: kept
    for path in (stale, alive, other_host):
        path.mkdir()
        (path / "README.md").write_text("half a report")
    with atomic.staged_folder(folder) as staging:
        (staging / "README.md").write_text("report")
    assert sorted(os.listdir(tmp_path)) == sorted(["rep", alive.name, other_host.name])
