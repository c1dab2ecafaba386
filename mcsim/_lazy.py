"""Modules imported when first used, named at the top of the module that uses them.

SciPy's statistics and integration modules and SALib take a noticeable share of the start-up of
``import mcsim`` and of every command, and most commands never touch them. A module names such a
dependency once, at module level::

    from typing import TYPE_CHECKING

    from mcsim._lazy import lazy_module

    if TYPE_CHECKING:
        from scipy import stats
    else:
        stats = lazy_module("scipy.stats")

and uses ``stats.norm`` as usual: the first attribute read imports the module
(:func:`importlib.import_module`, under the import system's own lock, so concurrent threads are
safe), later reads find it in ``sys.modules``. The type checker sees the real module.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """A stand-in for the module ``name``: its attributes, read from the module imported on first use."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> object:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<lazily imported module {self._name!r}>"


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, imported when one of its attributes is first read.

    Parameters
    ----------
    name : str
        The module's absolute name, e.g. ``"scipy.stats"``.

    Returns
    -------
    ModuleType
        A stand-in whose attribute reads are those of the module (typed as the module, so that
        ``TYPE_CHECKING`` imports and the stand-in agree).
    """
    return LazyModule(name)  # type: ignore[return-value]
