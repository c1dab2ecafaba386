"""The package layout: the retired flat module paths, ``python -m mcsim``, what a run and a plan import."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from child_python import run_python
from dotted_names import unresolved

import mcsim

# The flat layout's module paths (before 0.2), retired with their forwarding layer: the package
# was never published under them (CHANGELOG, 0.2).
RETIRED = [
    "mcsim.schema",
    "mcsim.budget",
    "mcsim.workload",
    "mcsim.variables",
    "mcsim.tasks",
    "mcsim.simulate",
    "mcsim.summary",
    "mcsim.planner",
    "mcsim.plots",
    "mcsim.plan_report",
    "mcsim.plan_command",
]


@pytest.mark.parametrize("old", RETIRED)
def test_a_retired_flat_module_path_no_longer_imports(old):
    code = f"import {old}"
    proc = run_python(code, timeout=120)
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, proc.stderr


def test_a_subpackage_forwards_no_name_of_its_old_module():
    with pytest.raises(ImportError):
        from mcsim.scenario import scenario_from_dict  # noqa: F401
    with pytest.raises(ImportError):
        from mcsim.analysis import best  # noqa: F401


def test_python_dash_m_mcsim_runs_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "mcsim", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("mcsim "), proc.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["run", "capacity-planning", "--runs", "10", "-o", "r.nc", "--quiet"],
        ["plan", "plan-llama3-405b", "-o", "p.nc", "--quiet"],
    ],
)
def test_run_and_plan_do_not_import_scipy_stats(tmp_path, command):
    # Importing scipy.stats costs ~0.5 s of a warm `mcsim plan`: a shipped plan (its pilot, a
    # decided selection, no spares) and a run without draws need none of it.
    code = (
        "import sys; from mcsim.cli.main import main; "
        f"status = main({command!r}); print(status, 'scipy.stats' in sys.modules)"
    )
    proc = run_python(code, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["0", "False"], proc.stdout


PACKAGE = Path(mcsim.__file__).resolve().parent
ARCHITECTURE = (
    Path(__file__).resolve().parent.parent / "ARCHITECTURE.md"
)  # the checkout's, not beside an installed package
SUBPACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py") if p.parent.name != "scenarios")


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_every_module_is_on_its_subpackages_map(subpackage):
    """Each subpackage's docstring names every module of it (as ``name`` or :mod:`...name`)."""
    folder = PACKAGE / subpackage
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    modules = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    modules += sorted(p.parent.name for p in folder.glob("*/__init__.py"))
    missing = [m for m in modules if not re.search(rf"(``|\.){re.escape(m)}(``|`)", doc)]
    assert not missing, f"mcsim/{subpackage}/__init__.py does not name: {missing}"


def test_every_module_is_on_the_architecture_map():
    """ARCHITECTURE.md names every module of the package by its path under ``mcsim/``."""
    text = ARCHITECTURE.read_text()
    modules = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.stem != "__init__")
    missing = [m for m in modules if m not in text and m.split("/")[-1] not in _table_cells(text, m)]
    assert not missing, f"ARCHITECTURE.md does not name: {missing}"


def _table_cells(text: str, module: str) -> str:
    """The layer table's row of the module's subpackage (where modules are named without their folder)."""
    folder = module.split("/", 1)[0] + "/" if "/" in module else ""  # report/plan/x.py: the report/ row
    rows = [line for line in text.splitlines() if folder and line.startswith("|") and f"`{folder}`" in line]
    return " ".join(rows)


def test_no_test_module_imports_another():
    """Shared builders live in helper modules (tests/builders.py, ...), never in a test module."""
    tests = Path(__file__).resolve().parent
    offenders = []
    for path in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(tests)}: {n}" for n in names if n.split(".")[-1].startswith("test_")]
    assert not offenders, offenders


def test_every_mcsim_name_in_the_package_exists():
    """The ``mcsim.…`` names the package's docstrings and comments give (cross-references) name a module or
    an attribute that exists: a move that left one behind fails here."""
    missing = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in unresolved(path.read_text())
    ]
    assert not missing, missing
