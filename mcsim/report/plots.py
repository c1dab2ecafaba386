"""Figures of simulation results: scaling, distributions, Pareto front, breakdowns.

Each function takes a dataset from :func:`mcsim.simulate` or
:func:`mcsim.open_results` (dims: sweep dims..., ``run``) and returns a
:class:`matplotlib.figure.Figure`; :func:`save_figure` writes one atomically.
Values are shown in the units a planner reads (wall time in days, cost in MUSD,
energy in MWh), converted from each variable's ``units`` attribute.

matplotlib is optional (``pip install 'mcsim-llm[plot]'``) and imported only when a
figure is made; without it the functions raise
:class:`mcsim.errors.BackendUnavailable`. Without a display, the Agg backend
is used.

>>> import mcsim
>>> from mcsim.report import plots
>>> ds = mcsim.open_results("results/capacity-planning.nc")
>>> plots.save_figure(plots.plot_pareto(ds), "pareto.png")

The figures live in modules by family (:mod:`mcsim.report.scaling`,
:mod:`mcsim.report.distributions`, :mod:`mcsim.report.tradeoff`, :mod:`mcsim.report.tornado`) with their shared
pieces in :mod:`mcsim.report.style`; this module gathers their public names.
"""

from mcsim.report.distributions import (
    MAX_BARS,
    MAX_CURVES,
    MAX_TOTAL_RATIO,
    plot_breakdown,
    plot_cdf,
    spread_configurations,
)
from mcsim.report.scaling import MAX_LINES, plot_scaling, scaling_dimension
from mcsim.report.style import DPI, config_label, figure_format, save_figure
from mcsim.report.tornado import plot_sensitivity
from mcsim.report.tradeoff import plot_pareto

__all__ = [
    "DPI",
    "MAX_BARS",
    "MAX_CURVES",
    "MAX_LINES",
    "MAX_TOTAL_RATIO",
    "config_label",
    "figure_format",
    "plot_breakdown",
    "plot_cdf",
    "plot_pareto",
    "plot_scaling",
    "plot_sensitivity",
    "save_figure",
    "scaling_dimension",
    "spread_configurations",
]
