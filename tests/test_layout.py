"""The package layout: old module paths forward for one release, ``python -m mcsim``, the layer contract.

Expected values come from the layout itself (ARCHITECTURE.md), not from the code under test: each old
flat module path names the module that ARCHITECTURE.md's map says it became.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from mcsim import _moved

# old flat module -> its new home (ARCHITECTURE.md, "Where each module went")
MOVED = {
    "mcsim.schema": "mcsim.scenario.schema",
    "mcsim.budget": "mcsim.scenario.limits",
    "mcsim.workload": "mcsim.model.workload",
    "mcsim.variables": "mcsim.io.variables",
    "mcsim.tasks": "mcsim.engine.tasks",
    "mcsim.simulate": "mcsim.engine.simulate",
    "mcsim.summary": "mcsim.analysis.summary",
    "mcsim.planner": "mcsim.planning.planner",
    "mcsim.plots": "mcsim.report.plots",
    "mcsim.plan_report": "mcsim.report.plan",
    "mcsim.plan_command": "mcsim.cli.plan",
}


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_module_path_forwards_to_its_new_home_with_a_warning(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(FutureWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    public = [name for name in vars(target) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(target, name) for name in public)


def test_every_old_path_in_the_table_has_a_module():
    for old, new in _moved.MOVED.items():
        assert importlib.util.find_spec(f"mcsim.{new}") is not None, old


def test_old_names_of_the_modules_that_became_packages_forward_with_a_warning():
    from mcsim.analysis.compare import best
    from mcsim.scenario.config import scenario_from_dict

    with pytest.warns(FutureWarning, match="mcsim.scenario.scenario_from_dict moved"):
        from mcsim.scenario import scenario_from_dict as old_scenario_from_dict
    with pytest.warns(FutureWarning, match="mcsim.analysis.best moved"):
        from mcsim.analysis import best as old_best
    assert old_scenario_from_dict is scenario_from_dict and old_best is best
    with pytest.raises(ImportError):
        from mcsim.scenario import no_such_name  # noqa: F401


def test_importing_the_old_simulate_module_keeps_mcsim_simulate_callable():
    """``import mcsim.simulate`` binds the attribute to the old module: it must still simulate."""
    sys.modules.pop("mcsim.simulate", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import mcsim.simulate  # noqa: F401
    scenario = mcsim.load_scenario(None, ["run.runs=3"])
    ds = mcsim.simulate(scenario, progress=False)
    assert ds.sizes["run"] == 3
    mcsim.simulate = mcsim.engine.simulate.simulate  # leave the package as it was


def test_python_dash_m_mcsim_runs_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "mcsim", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("mcsim "), proc.stderr


def test_new_code_imports_no_old_path():
    """Importing the whole package and every subpackage touches none of the forwarding paths."""
    code = (
        "import sys, warnings; warnings.simplefilter('error', FutureWarning); import mcsim, mcsim.cli, "
        "mcsim.planning.planner, mcsim.report.plan, mcsim.report.markdown, mcsim.analysis.validation; "
        "print(sorted(m for m in sys.modules if m.startswith('mcsim.') and m.split('.')[1] in "
        f"{sorted(_moved.MOVED)!r}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


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
