"""mcsim: Monte Carlo reliability simulation of LLM training clusters.

>>> import mcsim
>>> scenario = mcsim.load_scenario()          # the shipped Llama 3 405B reference
>>> ds = mcsim.simulate(scenario)             # xarray.Dataset, dims (sweep..., run)
>>> mcsim.summarize(ds)                       # mean, std, percentiles, 95 % CI
>>> ds.mcsim.best("cost"), ds.mcsim.pareto(("wall_time", "energy"))

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

from mcsim import _moved
from mcsim._version import __version__
from mcsim.accessor import McsimAccessor  # noqa: F401  (registers ds.mcsim)
from mcsim.analysis.summary import summarize
from mcsim.engine.simulate import simulate
from mcsim.errors import ScenarioError
from mcsim.io.netcdf import open_results, write_results
from mcsim.scenario.config import Scenario, load_scenario, reference_scenario_path

_moved.install()

__all__ = [
    "ScenarioError",
    "Scenario",
    "load_scenario",
    "reference_scenario_path",
    "simulate",
    "summarize",
    "write_results",
    "open_results",
    "__version__",
]
