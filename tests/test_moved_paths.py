"""Old flat module paths forward with a FutureWarning; the new subpackage paths import without one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (nothing of mcsim imported yet), FutureWarnings as errors."""
    return subprocess.run(
        [sys.executable, "-W", "error::FutureWarning", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_new_submodule_path_imports_without_a_warning():
    # mcsim.report forwards unknown names to mcsim.report.markdown, which has a `plots` attribute of its own:
    # the submodule must win, without the FutureWarning of an old path
    done = _run("from mcsim.report import plots, tornado; print(plots.__name__, tornado.__name__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["mcsim.report.plots", "mcsim.report.tornado"]


def test_old_flat_path_still_works_with_a_warning():
    done = _run("import mcsim.plots")
    assert done.returncode != 0
    assert "FutureWarning: mcsim.plots moved to mcsim.report.plots" in done.stderr
    code = "import warnings; warnings.simplefilter('ignore'); import mcsim.plots, mcsim.report.plots as p; "
    code += "print(mcsim.plots.plot_cdf is p.plot_cdf)"
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
