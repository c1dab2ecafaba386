"""mcsim: Monte Carlo reliability simulation of LLM training clusters.

>>> import mcsim
>>> scenario = mcsim.load_scenario()          # the shipped Llama 3 405B reference
>>> ds = mcsim.simulate(scenario)             # xarray.Dataset, dims (sweep..., run)
>>> mcsim.summarize(ds)                       # mean, std, percentiles, 95 % CI
>>> ds.mcsim.best("cost"), ds.mcsim.pareto(("wall_time", "energy"))

Every command has its function, which the command line calls:

=====================  ===========================================================
``mcsim run``          ``mcsim.simulate(mcsim.load_scenario(path, overrides))``
``mcsim run --shard``  ``mcsim.simulate(scenario, shard=mcsim.Shard(i, n))``
``mcsim combine``      ``mcsim.combine([part_0, ..., part_n_1])`` -> the whole result
``mcsim summary``      ``mcsim.summarize(ds)``, ``ds.mcsim.cheapest_within(days, p)``
``mcsim sensitivity``  ``mcsim.sensitivity(ds, output, resamples=...)``
``mcsim plan``         ``mcsim.plan(path)`` -> the plan's dataset
``mcsim fit-failures`` ``mcsim.fit_failures(log, name=..., scope=...)`` -> ``.fit``, ``.table``
``mcsim calibrate``    ``mcsim.calibrate(csv, scenario, key=...)`` -> ``.efficiency``, ``.rows``, ``.write()``
``mcsim report``       ``mcsim.report(path_or_ds, folder, deadline=..., probability=...)``
``mcsim validate``     ``mcsim.validate(runs=..., seed=...)`` -> rows (``.passes``)
``mcsim scenarios``    ``mcsim.scenarios()`` -> the shipped files (``.name``, ``.kind``, ``.path``)
``mcsim fit-power``    ``mcsim.fit_power(log, gpu_type=...)`` -> ``.settings`` (``--set`` keys)
=====================  ===========================================================

``mcsim --version --verbose`` prints what ``mcsim.show_versions()`` does: the versions of Python
and of the scientific stack, for a report of a problem.

``simulate`` and ``summarize`` also take a path (a scenario file or shipped name; a result file),
and ``combine`` takes the parts as files or as datasets.

The package is a pipeline of subpackages, each importing only from those below it
(ARCHITECTURE.md draws the map; import-linter checks it in CI):

=============  ==========================================================
``cli``        the ``mcsim`` command line
``accessor``   ``ds.mcsim``
``report``     figures, tables, Markdown reports, number formatting
``planning``   ``mcsim plan``: enumerate, screen, select by simulation
``analysis``   decisions on results: summaries, comparisons, sensitivity
``engine``     ``simulate()``: draws, preparation, tasks, execution, outputs
``model``      physics: workload, checkpoints, stragglers, energy
``scenario``   input: schema, catalog, scenario files, limits, priors
``kernels``    Numba kernels (plain arrays in, plain arrays out)
``io``         output variables, netCDF files, atomic writes
``errors``     exception types
=============  ==========================================================
"""

import importlib
from typing import TYPE_CHECKING

from mcsim import report
from mcsim._version import __version__, show_versions
from mcsim.accessor import McsimAccessor  # noqa: F401  (registers ds.mcsim)
from mcsim.errors import NoCandidate, NoneQualifies, ScenarioError

if TYPE_CHECKING:
    from mcsim.analysis.calibration import calibrate
    from mcsim.analysis.sensitivity import sensitivity
    from mcsim.analysis.summary import summarize
    from mcsim.analysis.validation import validate
    from mcsim.engine.shards import combine
    from mcsim.engine.simulate import simulate
    from mcsim.fitting.failure_table import fit_failures
    from mcsim.fitting.power_log import fit_power
    from mcsim.io.netcdf import open_results, write_results
    from mcsim.planning.run import plan
    from mcsim.scenario.config import Scenario, load_scenario, reference_scenario_path
    from mcsim.scenario.shard import Shard
    from mcsim.scenario.shipped import shipped_scenarios as scenarios

# Imported when first used (PEP 562; the module, and the name in it): `import mcsim` loads xarray and the
# accessor only, so that a script or a command that reads a result file pays neither for the kernels
# (Numba) nor for SciPy.
_LAZY = {
    "calibrate": ("mcsim.analysis.calibration", "calibrate"),
    "sensitivity": ("mcsim.analysis.sensitivity", "sensitivity"),
    "summarize": ("mcsim.analysis.summary", "summarize"),
    "validate": ("mcsim.analysis.validation", "validate"),
    "combine": ("mcsim.engine.shards", "combine"),
    "simulate": ("mcsim.engine.simulate", "simulate"),
    "fit_failures": ("mcsim.fitting.failure_table", "fit_failures"),
    "fit_power": ("mcsim.fitting.power_log", "fit_power"),
    "open_results": ("mcsim.io.netcdf", "open_results"),
    "write_results": ("mcsim.io.netcdf", "write_results"),
    "plan": ("mcsim.planning.run", "plan"),
    "Scenario": ("mcsim.scenario.config", "Scenario"),
    "load_scenario": ("mcsim.scenario.config", "load_scenario"),
    "reference_scenario_path": ("mcsim.scenario.config", "reference_scenario_path"),
    "Shard": ("mcsim.scenario.shard", "Shard"),
    "scenarios": ("mcsim.scenario.shipped", "shipped_scenarios"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'mcsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "NoCandidate",
    "NoneQualifies",
    "ScenarioError",
    "Scenario",
    "Shard",
    "calibrate",
    "combine",
    "fit_failures",
    "fit_power",
    "load_scenario",
    "open_results",
    "plan",
    "reference_scenario_path",
    "report",
    "scenarios",
    "sensitivity",
    "show_versions",
    "simulate",
    "summarize",
    "validate",
    "write_results",
    "__version__",
]
