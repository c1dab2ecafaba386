"""The repository stands alone: docs cite no file outside it, and it is packaged completely."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
from pathlib import Path

import pytest

from mcsim.kernels import accelerate

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    *(ROOT / name for name in ("README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "CHANGELOG.md")),
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "benchmarks" / "README.md",
]
# Files of the project's private design notes, which are not part of the repository.
OUTSIDE = re.compile(r"\.\./shared|\bshared/|SPEC\.md|REFERENCES\.md|\bSPEC\b")
MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_cite_nothing_outside_the_repository(doc):
    text = doc.read_text(encoding="utf-8")
    assert OUTSIDE.findall(text) == []
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        resolved = (doc.parent / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{doc.name}: broken link {target}"


def test_code_and_scenarios_cite_nothing_outside_the_repository():
    files = [*ROOT.glob("mcsim/**/*.py"), *ROOT.glob("scenarios/*.toml"), *ROOT.glob("benchmarks/*.py")]
    assert files
    offenders = [str(f.relative_to(ROOT)) for f in files if OUTSIDE.search(f.read_text(encoding="utf-8"))]
    assert offenders == []


def _sdist(tmp_path: Path) -> Path:
    """Build the sdist of this source tree into ``tmp_path`` (needs the ``build`` package)."""
    pytest.importorskip("build")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (archive,) = tmp_path.glob("mcsim_llm-*.tar.gz")  # the distribution name, normalised (PEP 625)
    return archive


def test_license_and_typing_marker_are_shipped():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "MIT"  # an SPDX expression (PEP 639)
    assert "MIT License" in (ROOT / "LICENSE").read_text() and "the mcsim developers" in (ROOT / "LICENSE").read_text()
    assert meta["license-files"] == ["LICENSE"]
    assert (ROOT / "mcsim" / "py.typed").exists()
    import mcsim

    assert (Path(mcsim.__file__).parent / "py.typed").exists()  # installed with the package, editable or not


# "pip install mcsim", "pip install 'mcsim[plot]'", "pip install mcsim==0.1": the unrelated project of that name.
_WRONG_NAME = re.compile(r"pip install\s+(?:-\S+\s+)*['\"]?mcsim(?![\w-])")


def test_the_distribution_name_is_the_free_one_everywhere(monkeypatch):
    """`mcsim` on the package index is another project: the distribution is mcsim-llm (import name and
    command stay mcsim); metadata lookups, messages and docs use that name."""
    import importlib
    import importlib.metadata

    from mcsim import _version

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["name"] == _version.DISTRIBUTION == "mcsim-llm"
    assert meta["scripts"] == {"mcsim": "mcsim.cli:main"}
    for key in ("authors", "keywords", "classifiers", "readme"):
        assert meta.get(key), key
    # no placeholder addresses until the project has a public home (README.md, "Quick start")
    assert "urls" not in meta
    assert _WRONG_NAME.search("pip install 'mcsim[plot]'") and not _WRONG_NAME.search("pip install mcsim-llm")
    texts = [*ROOT.glob("mcsim/**/*.py"), *DOCS, ROOT / ".ci" / "run"]
    offenders = [str(f.relative_to(ROOT)) for f in texts if _WRONG_NAME.search(f.read_text(encoding="utf-8"))]
    assert offenders == []

    def version(name: str) -> str:
        if name == "mcsim-llm":
            return "9.8.7"
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    try:
        assert importlib.reload(_version).__version__ == "9.8.7"
    finally:
        monkeypatch.undo()
        importlib.reload(_version)


@pytest.mark.slow
def test_sdist_tests_run(tmp_path):
    """The sdist unpacks to a folder whose tests pass against the sdist installed in a fresh venv.

    To keep this within CI's time, the venv gets only the sdist (``--no-deps``) and sees the
    dependencies of the environment running this test through a path file; CI's own fresh
    ``pip install ".[test]"`` checks the dependency metadata. The full check by hand (about
    4 minutes on 2 cores): ``python -m build --sdist``, unpack, ``pip install
    "mcsim_llm-0.1.0.tar.gz[test]"`` into a fresh venv, and ``pytest`` in the unpacked folder.
    """
    archive = _sdist(tmp_path / "dist")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "unpacked", filter="data")
    (folder,) = (tmp_path / "unpacked").iterdir()
    for needed in (
        "LICENSE",
        "mcsim/py.typed",
        "scenarios/llama3-405b.toml",
        "tests/conftest.py",
        "tests/cli/bad_inputs",
        "benchmarks/baselines.py",
        "docs/model.md",
    ):
        assert (folder / needed).exists(), needed
    assert not any("__pycache__" in n or n.endswith(".nc") for n in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    (site,) = venv.glob("lib/python*/site-packages")
    # a plain path line: the dependencies, not this environment's .pth files (an editable mcsim)
    (site / "outer-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", str(archive)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR")}
    if accelerate.CACHE_FOLDER is not None:
        # Same kernel sources, same stamp: the kernels compiled for this tree serve the sdist's
        # install too (what is tested here is the sdist's content, not compiling it again).
        shutil.copytree(
            accelerate.CACHE_FOLDER,
            tmp_path / "numba" / "mcsim" / accelerate.CACHE_FOLDER.name,
            ignore=lambda folder, names: [n for n in names if not n.endswith((".nbi", ".nbc"))],
        )
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    python = str(venv / "bin" / "python")
    where = subprocess.run(
        [python, "-c", "import mcsim, pathlib; print(pathlib.Path(mcsim.__file__).parent)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where  # the installed sdist, not this tree
    # Every test module collects; the tests that read the sdist's data files run (the rest of the
    # suite is the clone's, which CI runs).
    pytest_cmd = [python, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider"]  # -P: not the unpacked mcsim/
    collect = subprocess.run(
        pytest_cmd + ["--collect-only"], cwd=folder, capture_output=True, text=True, env=env, timeout=600
    )
    assert collect.returncode == 0, collect.stdout[-3000:]
    run = subprocess.run(
        pytest_cmd
        + [
            "-x",
            "tests/test_packaging.py",
            "tests/cli/test_bad_inputs.py",
            "tests/benchmarks/test_baselines.py",
            "tests/io/test_cf.py",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert " passed" in run.stdout.splitlines()[-1]
