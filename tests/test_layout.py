"""The package layout: the retired flat module paths, ``python -m mcsim``, what a run and a plan import."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
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
    # Importing scipy.stats costs ~0.5 s of a warm `mcsim plan` (issue 26 item 5): a shipped plan (its pilot, a
    # decided selection, no spares) and a run without draws need none of it.
    code = (
        "import sys; from mcsim.cli.main import main; "
        f"status = main({command!r}); print(status, 'scipy.stats' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["0", "False"], proc.stdout
