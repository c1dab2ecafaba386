"""Old module paths of the flat layout (before 0.2), kept for one release.

``import mcsim.variables`` (and every other module of the flat layout) still
works: a finder on ``sys.meta_path`` answers the old name with the module at its
new place, after a ``FutureWarning`` that names it. Removed in the release after
this one. ``mcsim.scenario``, ``mcsim.analysis``, ``mcsim.report`` and ``mcsim.cli``
are packages now; their ``__init__`` re-exports the old modules' public names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

# old module -> new module (the flat layout's names that are not packages now)
MOVED = {
    "schema": "scenario.schema",
    "catalog": "scenario.catalog",
    "uncertain": "scenario.uncertain",
    "budget": "scenario.limits",
    "fitting": "scenario.fitting",
    "priors": "scenario.priors",
    "workload": "model.workload",
    "strategies": "model.strategies",
    "checkpointing": "model.checkpointing",
    "stragglers": "model.stragglers",
    "energy": "model.energy",
    "variables": "io.variables",
    "netcdf": "io.netcdf",
    "atomic": "io.atomic",
    "draws": "engine.draws",
    "tasks": "engine.tasks",
    "backends": "engine.backends",
    "resume": "engine.resume",
    "optimize": "engine.optimize",
    "simulate": "engine.simulate",
    "summary": "analysis.summary",
    "decisions": "analysis.decisions",
    "pareto": "analysis.pareto",
    "robustness": "analysis.robustness",
    "sensitivity": "analysis.sensitivity",
    "validation": "analysis.validation",
    "plan": "planning.plan",
    "screen": "planning.screen",
    "planner": "planning.planner",
    "selection": "planning.selection",
    "kim_nelson": "planning.kim_nelson",
    "plan_uncertain": "planning.uncertain",
    "plots": "report.plots",
    "tornado": "report.tornado",
    "plan_report": "report.plan",
    "plan_command": "cli.plan",
}


# an old module whose name is now a top-level function defined elsewhere: calling the old module calls it
CALLS = {"plan": "planning.planner"}


class _Forward(ModuleType):
    """The old module: every attribute read from the new one; callable as the function of its own name.

    ``import mcsim.simulate`` binds ``mcsim.simulate`` to this module, where the
    package's ``mcsim.simulate`` is a function: calling the module calls it, so
    neither import order breaks the other.
    """

    def __init__(self, name: str, target: ModuleType) -> None:
        super().__init__(name, target.__doc__)
        self.__dict__["_target"] = target

    def __getattr__(self, attr: str) -> object:
        return getattr(self.__dict__["_target"], attr)

    def __setattr__(self, attr: str, value: object) -> None:
        if attr.startswith("__"):  # the import system's own attributes (__spec__, __loader__, ...) stay here
            super().__setattr__(attr, value)
        else:  # monkeypatching an old path reaches the real module
            setattr(self.__dict__["_target"], attr, value)

    def __call__(self, *args: object, **kwargs: object) -> object:
        name = self.__name__.rsplit(".", 1)[1]
        home = importlib.import_module("mcsim." + CALLS[name]) if name in CALLS else self.__dict__["_target"]
        return getattr(home, name)(*args, **kwargs)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``mcsim.<old>`` for every old name in :data:`MOVED`."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != "mcsim" or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = "mcsim." + MOVED[spec.name.rsplit(".", 1)[1]]
        warnings.warn(
            f"{spec.name} moved to {new}; the old path will be removed in the next release", FutureWarning, stacklevel=2
        )
        return _Forward(spec.name, importlib.import_module(new))

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module forwards to the new one."""


def install() -> None:
    """Put the finder of the old paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())


def forwarder(package: str, old: str, new: str):  # noqa: ANN201 (a module __getattr__)
    """A module ``__getattr__`` for ``package``, once the module ``old`` of the flat layout.

    A name the package does not define itself is read from the module ``new`` (what
    ``old`` became) after a ``FutureWarning``: ``from mcsim.scenario import
    scenario_from_dict`` keeps working for one release. A submodule of the package not
    imported yet is imported, without a warning: ``from mcsim.report import plots`` is
    the new path, even though ``new`` has a ``plots`` attribute of its own.
    """

    def __getattr__(name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        if importlib.util.find_spec(f"{package}.{name}") is not None:  # a submodule not imported yet: no warning
            return importlib.import_module(f"{package}.{name}")
        module = importlib.import_module(new)
        try:
            value = getattr(module, name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        warnings.warn(
            f"{old}.{name} moved to {new}.{name}; the old path will be removed in the next release",
            FutureWarning,
            stacklevel=2,
        )
        return value

    return __getattr__
