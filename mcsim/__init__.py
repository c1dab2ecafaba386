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
``mcsim report``       ``mcsim.report(path_or_ds, folder, deadline=..., probability=...)``
=====================  ===========================================================

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
from mcsim._version import __version__
from mcsim.accessor import McsimAccessor  # noqa: F401  (registers ds.mcsim)
from mcsim.errors import NoCandidate, NoneQualifies, ScenarioError

if TYPE_CHECKING:
    from mcsim.analysis.sensitivity import sensitivity
    from mcsim.analysis.summary import summarize
    from mcsim.engine.shards import combine
    from mcsim.engine.simulate import simulate
    from mcsim.fitting.failure_table import fit_failures
    from mcsim.io.netcdf import open_results, write_results
    from mcsim.planning.run import plan
    from mcsim.scenario.config import Scenario, load_scenario, reference_scenario_path
    from mcsim.scenario.shard import Shard

# Imported when first used (PEP 562): `import mcsim` loads xarray and the accessor only, so that a script
# or a command that reads a result file pays neither for the kernels (Numba) nor for SciPy.
_LAZY = {
    "sensitivity": "mcsim.analysis.sensitivity",
    "summarize": "mcsim.analysis.summary",
    "combine": "mcsim.engine.shards",
    "simulate": "mcsim.engine.simulate",
    "fit_failures": "mcsim.fitting.failure_table",
    "open_results": "mcsim.io.netcdf",
    "write_results": "mcsim.io.netcdf",
    "plan": "mcsim.planning.run",
    "Scenario": "mcsim.scenario.config",
    "load_scenario": "mcsim.scenario.config",
    "reference_scenario_path": "mcsim.scenario.config",
    "Shard": "mcsim.scenario.shard",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mcsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "NoCandidate",
    "NoneQualifies",
    "ScenarioError",
    "Scenario",
    "Shard",
    "combine",
    "fit_failures",
    "load_scenario",
    "open_results",
    "plan",
    "reference_scenario_path",
    "report",
    "sensitivity",
    "simulate",
    "summarize",
    "write_results",
    "__version__",
]
