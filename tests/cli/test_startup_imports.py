"""What a command imports: those that run no kernel never load Numba, and ``import mcsim`` loads none of the
heavy libraries a few commands need (issue 44: the start-up of every command and script).

Each case runs in a fresh interpreter (``tests/child_python.py``) and reads ``sys.modules`` after the command
returned, so that an import anywhere on its path, at module level or inside a function, is seen.
"""

from __future__ import annotations

import json

import pytest
from child_python import run_python

# Loaded by `import mcsim` neither directly nor through a module of mcsim: each costs 0.1-0.5 s of a start-up
# that needs none of it (the kernels' compiler, SciPy, the sensitivity indices, dask, the figures).
HEAVY = ("numba", "scipy", "SALib", "dask", "distributed", "matplotlib")


def _imported_by(code: str, cwd, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {list(modules)!r} if m in sys.modules]))"
    proc = run_python(probe, timeout=300, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _command(arguments: list[str]) -> str:
    """A snippet that runs ``mcsim ARGUMENTS`` in the interpreter, a ``--help``'s or ``--version``'s exit included."""
    return (
        "import contextlib, io\nfrom mcsim.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try:\n        status = main({arguments!r})\n    except SystemExit as stop:\n        status = stop.code\n"
        "assert status in (0, None), status"
    )


def test_import_mcsim_loads_no_heavy_library(tmp_path):
    assert _imported_by("import mcsim", tmp_path, HEAVY) == []


def test_the_public_names_still_import_what_they_need(tmp_path):
    # the names of `import mcsim` are lazy: each still brings its module (and a simulation Numba)
    code = "import mcsim\nmcsim.simulate\nmcsim.summarize"
    imported = _imported_by(code, tmp_path, ("numba", "mcsim.analysis.summary"))
    assert imported == ["numba", "mcsim.analysis.summary"]


@pytest.fixture(scope="module")
def result_file(tmp_path_factory):
    """A small result file of ``mcsim run`` (10 runs of the capacity sweep)."""
    folder = tmp_path_factory.mktemp("result")
    proc = run_python(
        "from mcsim.cli.main import main\n"
        "assert main(['run', 'capacity-planning', '--runs', '10', '-o', 'r.nc', '--quiet']) == 0",
        timeout=600,
        cwd=folder,
    )
    assert proc.returncode == 0, proc.stderr
    return folder / "r.nc"


@pytest.mark.parametrize(
    "arguments",
    [
        ["--help"],
        ["--version"],
        ["summary", "{result}"],
        ["report", "{result}", "-o", "report"],
        ["plot", "{result}", "--kind", "cdf", "-o", "cdf.png"],
    ],
    ids=lambda arguments: arguments[0],
)
def test_a_command_that_runs_no_kernel_does_not_import_numba(tmp_path, result_file, arguments):
    if arguments[0] == "plot":
        pytest.importorskip("matplotlib")
    arguments = [a.format(result=result_file) for a in arguments]
    assert _imported_by(_command(arguments), tmp_path, ("numba", "mcsim.kernels.montecarlo")) == []
