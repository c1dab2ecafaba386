"""pytest's hooks for mcsim's tests (the slow marker) and the shared fixtures; the builders they use
are in ``builders.py``."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import tempfile
import threading

import pytest
from builders import SMALL_SCENARIO

# The run kernels most tests need, each compiled by a process of its own: the entry point of plain runs
# (simulate_runs, with the accounting and the failure start) and that of runs with parameter draws
# (simulate_runs_table).
_COMPILE_KERNELS = (
    "import mcsim; mcsim.simulate(mcsim.load_scenario(overrides=['run.runs=2']), progress=False)",
    "import mcsim; mcsim.simulate(mcsim.load_scenario('capacity-planning-uncertain', "
    "overrides=['run.runs=2', 'run.draws=4']), progress=False)",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="also run the tests marked slow (CI runs them with -m slow)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """With pytest-xdist (``-n``), compile the run kernels into Numba's cache before the workers start.

    Otherwise each worker's first test compiled the same kernels at once, under coverage's tracer: two
    tests of about two minutes each at the start of CI's main run (its ``--durations``). Here each entry
    point compiles once, in a process of its own, the two side by side; the workers then load them from
    the cache. Nothing is done in a worker, without ``-n``, or with the kernels as plain Python; a failure
    here is left to the tests to show.
    """
    config = session.config
    distributed = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if not distributed or os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return
    compiling = [
        subprocess.Popen(  # from the temporary folder: the mcsim the tests import, not a source tree in the cwd
            [sys.executable, "-c", code],
            cwd=tempfile.gettempdir(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for code in _COMPILE_KERNELS
    ]
    for process in compiling:
        process.wait()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``slow`` unless ``--runslow`` is given or ``-m`` names the marker."""
    if config.getoption("--runslow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


@pytest.fixture
def small_raw() -> dict:
    """A fresh copy of the small scenario's tables."""
    return copy.deepcopy(SMALL_SCENARIO)


@pytest.fixture(autouse=True)
def _python_handles_ctrl_c():
    """Each test starts with Python's own SIGINT handler, whatever ran before it in the worker.

    A clean-clone CI run found a pytest-xdist worker whose SIGINT was ignored after some earlier
    test (the order differs from run to run): the interrupt tests then saw no KeyboardInterrupt,
    and the processes they started inherited the ignored signal and ran to the end.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
