"""``import mcsim`` from the repository root, where ``./mcsim`` shadows the installed package.

The README's snippets (``results/...`` paths) and notebooks run from the repository
root, where Python puts the current folder first on ``sys.path``. The source tree must
then be a complete package: the kernels and the shipped scenarios included (it once failed
with ``No module named 'mcsim.kernels'`` after ``pip install .``).
"""

from __future__ import annotations

import os
from pathlib import Path

from child_python import run_python

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import mcsim, mcsim.kernels.montecarlo as mc
from pathlib import Path
print(Path(mcsim.__file__).resolve().parent)
print(Path(mc.__file__).resolve().parent)
scenario = mcsim.load_scenario(None, runs=2)
print(scenario.name, mcsim.reference_scenario_path().is_file())
"""


def test_import_from_repository_root_uses_a_complete_source_tree():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = run_python(PROBE, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    package, kernels, scenario = done.stdout.splitlines()
    assert Path(package) == ROOT / "mcsim"  # the source tree, not an installed copy
    assert Path(kernels) == ROOT / "mcsim" / "kernels"
    assert scenario == "llama3-405b True"
