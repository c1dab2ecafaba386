"""mcsim: Monte Carlo reliability simulation of LLM training clusters.

>>> import mcsim
>>> scenario = mcsim.load_scenario()          # the shipped Llama 3 405B reference
>>> ds = mcsim.simulate(scenario)             # xarray.Dataset, dims (sweep..., run)
>>> mcsim.summarize(ds)                       # mean, std, percentiles, 95 % CI
>>> ds.mcsim.best("cost"), ds.mcsim.pareto(("wall_time", "energy"))
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mcsim")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

from . import accessor  # noqa: E402,F401  (registers ds.mcsim)
from .netcdf import open_results, write_results  # noqa: E402
from .scenario import Scenario, load_scenario, reference_scenario_path  # noqa: E402
from .schema import ScenarioError  # noqa: E402
from .simulate import simulate  # noqa: E402
from .summary import summarize  # noqa: E402

__all__ = ["ScenarioError", "Scenario", "load_scenario", "reference_scenario_path", "simulate",
           "summarize", "write_results", "open_results", "__version__"]
