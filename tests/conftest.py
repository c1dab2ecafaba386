"""pytest's hooks for mcsim's tests (the slow marker) and the shared fixtures; the builders they use
are in ``builders.py``."""

from __future__ import annotations

import copy
import signal
import threading

import pytest
from builders import SMALL_SCENARIO


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="also run the tests marked slow (CI runs them with -m slow)",
    )


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
