"""pytest's hooks for mcsim's tests (the slow marker) and the shared fixtures; the builders they use
are in ``builders.py``."""

from __future__ import annotations

import copy

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
