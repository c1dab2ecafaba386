"""The ``ds.mcsim`` accessor: analysis of a result dataset in an xarray session.

>>> ds = mcsim.open_results("results/capacity-planning.nc")
>>> ds.mcsim.summary()                          # mean, std, percentiles, 95 % CI per variable
>>> ds.mcsim.pareto(("wall_time", "cost"))      # boolean front over the sweep dims
>>> ds.mcsim.best("energy")                     # the energy-optimal configuration
>>> ds.mcsim.best("ettr")                       # the highest ETTR (each objective has a direction)
>>> ds.mcsim.cheapest_within(days=3, probability=0.9)
>>> ds.mcsim.prob_better({"gpus": 8192}, {"gpus": 4096}, "cost")
>>> ds.mcsim.sensitivity("cost")               # Sobol indices of the uncertain inputs (run.draws)
>>> ds.mcsim.decision_table("cost")            # with draws: P(best) and expected regret per configuration
>>> ds.mcsim.robustness("cost")                # with draws: the robust choice, the input that would change it
>>> ds.mcsim.plot.scaling()                     # matplotlib figures (the plot extra)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import xarray as xr

from mcsim._lazy import lazy_module
from mcsim.io.netcdf import scenario_names
from mcsim.io.variables import sweep_dims

if TYPE_CHECKING:
    from mcsim.analysis import compare, configurations, deadline, ranking, robustness, sensitivity, summary
    from mcsim.report import plots
else:
    # the figure modules, imported at the first figure: not with mcsim, whose most uses draw none
    plots = lazy_module("mcsim.report.plots")
    # the analyses, imported at their first use: `import mcsim` registers the accessor and loads none
    # of them (sensitivity's SALib, the decisions' SciPy)
    compare = lazy_module("mcsim.analysis.compare")
    configurations = lazy_module("mcsim.analysis.configurations")
    deadline = lazy_module("mcsim.analysis.deadline")
    ranking = lazy_module("mcsim.analysis.ranking")
    robustness = lazy_module("mcsim.analysis.robustness")
    sensitivity = lazy_module("mcsim.analysis.sensitivity")
    summary = lazy_module("mcsim.analysis.summary")


class _Plots:
    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def scaling(self, **kwargs):
        """Time, energy, cost and ETTR versus GPUs with 90 % bands (:func:`mcsim.report.plots.plot_scaling`)."""
        return plots.plot_scaling(self._ds, **kwargs)

    def cdf(self, **kwargs):
        """Distributions per configuration (:func:`mcsim.report.plots.plot_cdf`)."""
        return plots.plot_cdf(self._ds, **kwargs)

    def pareto(self, **kwargs):
        """Time versus cost or energy with the front (:func:`mcsim.report.plots.plot_pareto`)."""
        return plots.plot_pareto(self._ds, **kwargs)

    def breakdown(self, **kwargs):
        """Where time and energy go (:func:`mcsim.report.plots.plot_breakdown`)."""
        return plots.plot_breakdown(self._ds, **kwargs)


@xr.register_dataset_accessor("mcsim")
class McsimAccessor:
    """Analysis methods on an mcsim result dataset (dims: sweep dims..., ``run``)."""

    def __init__(self, ds: xr.Dataset) -> None:
        # a file opened with plain xarray holds uncertain inputs under CF names: take their keys back
        self._ds = scenario_names(ds)

    def __repr__(self) -> str:
        """What the dataset holds (scenario, configurations, runs, draws) and the methods that apply."""
        ds = self._ds
        if "wall_time" not in ds or "run" not in ds["wall_time"].dims:
            kind = "a plan file (read it with mcsim.report)" if ds.attrs.get("mcsim_kind") == "plan" else "no result"
            return f"<mcsim accessor: {kind}; dims {dict(ds.sizes)}>"
        dims = sweep_dims(ds)
        configurations = 1
        for d in dims:
            configurations *= ds.sizes[d]
        sweep = ", ".join(f"{d} {ds.sizes[d]}" for d in dims) or "no sweep"
        draws = f" x {ds.sizes['draw']:,} parameter draws" if "draw" in ds.dims else ""
        methods = [
            "summary",
            "best",
            "pareto",
            "cheapest_within",
            "prob_within",
            "prob_better",
            "paired_difference",
            "completed_share",
            "plot",
        ]
        if draws:
            methods[5:5] = ["decision_table", "robustness", "sensitivity", "prob_better_by_draw"]
        return (
            f"<mcsim accessor: {ds.attrs.get('scenario_name', 'result')!r}, {configurations} "
            f"configuration{'s' if configurations != 1 else ''} ({sweep}) x {ds.sizes['run']:,} runs{draws}>\n"
            f"methods: {', '.join(methods)}"
        )

    def summary(self) -> xr.Dataset:
        """Statistics of every per-run variable along ``stat`` (:func:`mcsim.summarize`)."""
        return summary.summarize(self._ds)

    def pareto(self, objectives: Sequence[str] = ("wall_time", "cost"), stat: str | float = "mean") -> xr.DataArray:
        """Non-dominated configurations (:func:`mcsim.analysis.ranking.pareto_front`)."""
        return ranking.pareto_front(self._ds, objectives, stat)

    def best(self, objective: str = "cost", stat: str | float = "mean") -> dict:
        """The best configuration on ``objective``, in its direction (:func:`mcsim.analysis.ranking.best`)."""
        return ranking.best(self._ds, objective, stat)

    def prob_better(self, a: Mapping, b: Mapping, objective: str = "cost") -> compare.Probability:
        """P(a beats b) from paired runs, with its 95 % Wilson interval (:func:`mcsim.analysis.compare.prob_better`)."""
        return compare.prob_better(self._ds, a, b, objective)

    def cheapest_within(self, days: float, probability: float = 0.9) -> dict:
        """Cheapest configuration finishing within ``days`` with ``probability`` in (0, 1).

        See :func:`mcsim.analysis.deadline.cheapest_within`; raises :class:`mcsim.errors.NoneQualifies`
        (carrying the closest configuration) when none qualifies.
        """
        return deadline.cheapest_within(self._ds, days, probability)

    def paired_difference(self, a: Mapping, b: Mapping, objective: str = "cost") -> dict:
        """Mean of a - b over paired runs with its 95 % CI (:func:`mcsim.analysis.compare.paired_difference`)."""
        return compare.paired_difference(self._ds, a, b, objective)

    def prob_better_by_draw(self, a: Mapping, b: Mapping, objective: str = "cost") -> compare.Probability:
        """P(a's mean over a draw's runs beats b's) over parameter draws.

        See :func:`mcsim.analysis.compare.prob_better_by_draw`.
        """
        return compare.prob_better_by_draw(self._ds, a, b, objective)

    def decision_table(self, objective: str = "cost") -> xr.Dataset:
        """P(best) and expected regret per configuration over draws (:func:`mcsim.analysis.ranking.decision_table`)."""
        return ranking.decision_table(self._ds, objective)

    def prob_best(self, objective: str = "cost") -> xr.DataArray:
        """P(best) per configuration over parameter draws (:func:`mcsim.analysis.ranking.prob_best`)."""
        return ranking.prob_best(self._ds, objective)

    def expected_regret(self, objective: str = "cost") -> xr.DataArray:
        """Expected regret of each configuration over parameter draws.

        See :func:`mcsim.analysis.ranking.expected_regret`.
        """
        return ranking.expected_regret(self._ds, objective)

    def prob_within(self, days: float, probability: float | None = None) -> xr.Dataset:
        """P(finishing within ``days``) per configuration, pooled over draws and runs.

        See :func:`mcsim.analysis.deadline.prob_within`.
        """
        return deadline.prob_within(self._ds, days, probability)

    def robustness(self, objective: str = "cost", groups: int = 2) -> dict:
        """The robust choice and the uncertain input that would change it.

        See :func:`mcsim.analysis.robustness.robustness`.
        """
        return robustness.robustness(self._ds, objective, groups)

    def sensitivity(self, output: str = "cost", seed: int = 0) -> xr.Dataset:
        """Sobol indices of the uncertain inputs on ``output``, per configuration.

        See :func:`mcsim.analysis.sensitivity.sensitivity`.
        """
        return sensitivity.sensitivity(self._ds, output, seed)

    def completed_share(self) -> xr.DataArray:
        """Share of completed runs per configuration (:func:`mcsim.analysis.configurations.completed_share`)."""
        return configurations.completed_share(self._ds)

    @property
    def plot(self) -> _Plots:
        """Figures: ``.scaling()``, ``.cdf()``, ``.pareto()``, ``.breakdown()``."""
        return _Plots(self._ds)
