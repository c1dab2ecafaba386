"""The ``ds.mcsim`` accessor: analysis of a result dataset in an xarray session.

>>> ds = mcsim.open_results("results/capacity-planning.nc")
>>> ds.mcsim.summary()                          # mean, std, percentiles, 95 % CI per variable
>>> ds.mcsim.table()                            # the same as a pandas DataFrame, one row per configuration
>>> ds.mcsim.to("wall_time", "d")               # converted, its units attribute saying so
>>> ds.mcsim.pareto(("wall_time", "cost"))      # boolean front over the sweep dims
>>> ds.mcsim.best("energy")                     # the energy-optimal configuration
>>> ds.mcsim.best("ettr")                       # the highest ETTR (each objective has a direction)
>>> ds.mcsim.cheapest_within(days=3, probability=0.9)
>>> ds.mcsim.prob_better({"gpus": 8192}, {"gpus": 4096}, "cost")
>>> ds.mcsim.sensitivity("cost")               # Sobol indices of the uncertain inputs (run.draws)
>>> ds.mcsim.decision_table("cost")            # with draws: P(best) and expected regret per configuration
>>> ds.mcsim.robustness("cost")                # with draws: the robust choice, the input that would change it
>>> ds.mcsim.plot.scaling()                     # matplotlib figures (the plot extra)
>>> ds.mcsim.plot.sensitivity("cost")          # with draws: the tornado of the indices
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import xarray as xr

from mcsim._lazy import lazy_module
from mcsim.io.netcdf import scenario_names
from mcsim.io.units import conversion_factor
from mcsim.io.variables import VARIABLES, sweep_dims

if TYPE_CHECKING:
    import pandas as pd

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
    """Figures of the dataset (matplotlib, the ``plot`` extra); each returns a figure to show or save."""

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def scaling(self, **kwargs):
        """Time [days], energy [MWh], cost [MUSD] and ETTR against a sweep dimension, with 90 % bands.

        Keyword arguments go to :func:`mcsim.report.plots.plot_scaling` (``x``: the swept dimension on
        the horizontal axis, default ``gpus``). Returns a :class:`matplotlib.figure.Figure`.
        """
        return plots.plot_scaling(self._ds, **kwargs)

    def cdf(self, **kwargs):
        """The distribution over runs of one variable per configuration, as a CDF in the variable's units.

        Keyword arguments go to :func:`mcsim.report.plots.plot_cdf` (``variable``, default
        ``wall_time``, shown in days). Returns a :class:`matplotlib.figure.Figure`.
        """
        return plots.plot_cdf(self._ds, **kwargs)

    def pareto(self, **kwargs):
        """Wall time [days] against cost [MUSD] or energy [MWh] per configuration, the front labelled.

        Keyword arguments go to :func:`mcsim.report.plots.plot_pareto`. Returns a
        :class:`matplotlib.figure.Figure`.
        """
        return plots.plot_pareto(self._ds, **kwargs)

    def breakdown(self, **kwargs):
        """Where wall time [days] and energy [MWh] go, per configuration, as stacked bars.

        Keyword arguments go to :func:`mcsim.report.plots.plot_breakdown`. Returns a
        :class:`matplotlib.figure.Figure`.
        """
        return plots.plot_breakdown(self._ds, **kwargs)

    def sensitivity(self, output: str = "cost", point: Mapping | None = None, *, resamples: int | None = None):
        """Tornado figure of the uncertain inputs' sensitivity indices (shares of variance, units 1).

        As ``mcsim plot --kind sensitivity`` (:func:`mcsim.report.plots.plot_sensitivity`); needs
        parameter draws (``run.draws`` > 0).

        Parameters
        ----------
        output : str
            The per-run variable whose mean per draw the indices explain (default ``cost``).
        point : mapping, optional
            The configuration shown, by sweep coordinate (``{"gpus": 8192}``); default: the best
            on ``output``.
        resamples : int, optional
            Bootstrap resamples of the indices' 95 % intervals (default 100).

        Returns
        -------
        matplotlib.figure.Figure
        """
        return plots.plot_sensitivity(self._ds, output, None if point is None else dict(point), resamples=resamples)


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
            "table",
            "to",
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
            methods[7:7] = ["decision_table", "robustness", "sensitivity", "prob_better_by_draw"]
        return (
            f"<mcsim accessor: {ds.attrs.get('scenario_name', 'result')!r}, {configurations} "
            f"configuration{'s' if configurations != 1 else ''} ({sweep}) x {ds.sizes['run']:,} runs{draws}>\n"
            f"methods: {', '.join(methods)}"
        )

    def summary(self) -> xr.Dataset:
        """Statistics over runs of every per-run variable, per configuration (:func:`mcsim.summarize`).

        Returns
        -------
        xarray.Dataset
            Dims (``stat``, sweep dims...): mean, std, p5, p50, p95, ci95_low, ci95_high (and the
            epistemic and aleatoric shares with parameter draws), each variable in its own units
            (``wall_time`` [h], ``energy`` [MW h], ``cost`` [USD], ``co2`` [t]; ``completed``: share).
        """
        return summary.summarize(self._ds)

    def table(self, variables: Sequence[str] | None = None, stats: Sequence[str] | None = None) -> pd.DataFrame:
        """The summary as a pandas DataFrame, one row per configuration (:func:`mcsim.analysis.summary.summary_frame`).

        Columns ``<variable>_<stat>`` in the stored units (``frame.attrs["units"]`` names each); by
        default the variables and statistics of the summary table (``mcsim.analysis.summary.TABLE_VARIABLES``
        and ``TABLE_STATS``).
        """
        variables = summary.TABLE_VARIABLES if variables is None else variables
        return summary.summary_frame(self._ds, variables, summary.TABLE_STATS if stats is None else stats)

    def to(self, name: str, unit: str) -> xr.DataArray:
        """Variable ``name`` in ``unit``, its ``units`` attribute set to ``unit``.

        ``ds.mcsim.to("wall_time", "d")`` divides the hours by 24 and says ``d``, where a plain
        ``ds.wall_time / 24`` keeps the attribute ``h`` xarray copies. Units of time (s, min, h, d),
        energy (kWh, MWh, GWh), money (USD, kUSD, MUSD, BUSD) and mass (kg, t, kt) convert within
        their quantity (docs/units.md).

        Raises
        ------
        KeyError
            ``name`` is not a variable of the dataset.
        ValueError
            ``unit`` is not a unit of ``name``'s quantity.
        """
        if name not in self._ds:
            raise KeyError(f"{name!r} is not a variable of this dataset")
        array = self._ds[name]
        stored = str(array.attrs.get("units", VARIABLES[name].units if name in VARIABLES else ""))
        factor = conversion_factor(stored, unit)
        converted = array * factor
        converted.attrs = {**array.attrs, "units": unit}
        return converted

    def pareto(self, objectives: Sequence[str] = ("wall_time", "cost"), stat: str | float = "mean") -> xr.DataArray:
        """Non-dominated configurations, each objective in its direction (:func:`mcsim.analysis.ranking.pareto_front`).

        Parameters
        ----------
        objectives : sequence of str
            Per-run variables with a direction (``wall_time``, ``energy``, ``cost``, ``co2``: lower is
            better; ``ettr``: higher is better).
        stat : "mean" or float
            Summary over runs: the mean, or a quantile in (0, 1) (0.9: the 90th percentile; for
            ``ettr`` its risk-averse counterpart, the 10th).

        Returns
        -------
        xarray.DataArray
            Boolean over the sweep dims: True on the front. Infeasible and censored configurations
            are never on it.
        """
        return ranking.pareto_front(self._ds, objectives, stat)

    def best(self, objective: str = "cost", stat: str | float = "mean") -> dict:
        """The best configuration on ``objective``, in its direction (:func:`mcsim.analysis.ranking.best`).

        Parameters
        ----------
        objective : str
            A per-run variable with a direction (``cost`` [USD], ``wall_time`` [h], ``energy``
            [MW h], ``co2`` [t], ``ettr`` [1]).
        stat : "mean" or float
            The mean over runs, or a quantile in (0, 1).

        Returns
        -------
        dict
            ``configuration`` (sweep coordinates), ``mean``, ``ci95``, ``p5``, ``p95`` in ``units``
            (those of ``objective``), ``direction``, ``runs``, ``completed``; with parameter draws
            also ``p_best`` and ``expected_regret``.
        """
        return ranking.best(self._ds, objective, stat)

    def prob_better(self, a: Mapping, b: Mapping, objective: str = "cost") -> compare.Probability:
        """P(configuration ``a`` beats ``b`` on ``objective``) from paired runs.

        See :func:`mcsim.analysis.compare.prob_better`.

        Parameters
        ----------
        a, b : mapping
            Configurations by sweep coordinate, e.g. ``{"gpus": 8192}``.
        objective : str
            A per-run variable with a direction (``cost``, ``wall_time``, ``energy``, ``ettr``...).

        Returns
        -------
        Probability
            ``(probability, ci95, runs)``: the estimate in [0, 1], its 95 % Wilson interval, the
            paired runs.
        """
        return compare.prob_better(self._ds, a, b, objective)

    def cheapest_within(self, days: float, probability: float = 0.9) -> dict:
        """The cheapest configuration finishing within ``days`` with at least ``probability``.

        See :func:`mcsim.analysis.deadline.cheapest_within`.

        Parameters
        ----------
        days : float
            The deadline [days], finite and > 0.
        probability : float
            Required probability of finishing in time, in (0, 1) (0.9, not 90).

        Returns
        -------
        dict
            As :meth:`best` on ``cost`` [USD], plus ``p_within`` with its ``p_within_ci95`` and ``days``.

        Raises
        ------
        mcsim.errors.NoneQualifies
            No configuration qualifies; its ``closest`` is the record of the nearest one.
        """
        return deadline.cheapest_within(self._ds, days, probability)

    def paired_difference(self, a: Mapping, b: Mapping, objective: str = "cost") -> dict:
        """Mean of ``a - b`` over paired runs with its 95 % CI (:func:`mcsim.analysis.compare.paired_difference`).

        Parameters
        ----------
        a, b : mapping
            Configurations by sweep coordinate, e.g. ``{"gpus": 8192}``.
        objective : str
            A per-run variable.

        Returns
        -------
        dict
            ``mean`` and ``ci95`` (low, high) in ``units`` (those of ``objective``: ``cost`` [USD],
            ``wall_time`` [h], ...), ``runs``; with parameter draws also ``draws``.
        """
        return compare.paired_difference(self._ds, a, b, objective)

    def prob_better_by_draw(self, a: Mapping, b: Mapping, objective: str = "cost") -> compare.Probability:
        """P(``a``'s mean over a draw's runs beats ``b``'s), over parameter draws.

        See :func:`mcsim.analysis.compare.prob_better_by_draw`.

        Parameters
        ----------
        a, b : mapping
            Configurations by sweep coordinate.
        objective : str
            A per-run variable with a direction.

        Returns
        -------
        Probability
            ``(probability, ci95, runs)``; ``runs`` is the number of draws compared.
        """
        return compare.prob_better_by_draw(self._ds, a, b, objective)

    def decision_table(self, objective: str = "cost") -> xr.Dataset:
        """P(best) and expected regret per configuration over draws (:func:`mcsim.analysis.ranking.decision_table`).

        Parameters
        ----------
        objective : str
            A per-run variable with a direction.

        Returns
        -------
        xarray.Dataset
            Over the sweep dims: ``p_best`` with its 95 % interval, ``p_best_clear`` (units 1),
            ``expected_regret`` with its 95 % interval (units of ``objective``).
        """
        return ranking.decision_table(self._ds, objective)

    def prob_best(self, objective: str = "cost") -> xr.DataArray:
        """P(best) per configuration over parameter draws, in [0, 1] (:func:`mcsim.analysis.ranking.prob_best`).

        Parameters
        ----------
        objective : str
            A per-run variable with a direction.
        """
        return ranking.prob_best(self._ds, objective)

    def expected_regret(self, objective: str = "cost") -> xr.DataArray:
        """Expected regret of each configuration over parameter draws, in the units of ``objective``.

        See :func:`mcsim.analysis.ranking.expected_regret`.

        Parameters
        ----------
        objective : str
            A per-run variable with a direction.
        """
        return ranking.expected_regret(self._ds, objective)

    def prob_within(self, days: float, probability: float | None = None) -> xr.Dataset:
        """P(finishing within ``days``) per configuration, pooled over draws and runs.

        See :func:`mcsim.analysis.deadline.prob_within`.

        Parameters
        ----------
        days : float
            The deadline [days], finite and > 0.
        probability : float, optional
            In (0, 1): also the share of draws whose own probability reaches it.

        Returns
        -------
        xarray.Dataset
            Over the sweep dims: ``p_within`` and its 95 % interval (units 1); NaN where infeasible.
        """
        return deadline.prob_within(self._ds, days, probability)

    def robustness(self, objective: str = "cost", groups: int = 2) -> dict:
        """The robust choice and the uncertain input that would change it.

        See :func:`mcsim.analysis.robustness.robustness`.

        Parameters
        ----------
        objective : str
            A per-run variable with a direction.
        groups : int
            Parts each input's draws are split into (2: below and above the median), >= 2.

        Returns
        -------
        dict
            ``choice`` (least expected regret), ``leaders``, ``inputs`` ranked by their value of
            information (units of ``objective``), ``changing_input``.
        """
        return robustness.robustness(self._ds, objective, groups)

    def sensitivity(self, output: str = "cost", seed: int = 0, *, resamples: int | None = None) -> xr.Dataset:
        """Sensitivity indices of the uncertain inputs on ``output``, per configuration.

        See :func:`mcsim.analysis.sensitivity.sensitivity`.

        Parameters
        ----------
        output : str
            The per-run variable whose mean per draw the indices explain.
        seed : int
            Seed of the bootstrap resampling.
        resamples : int, optional
            Bootstrap resamples of each 95 % interval (default 100).

        Returns
        -------
        xarray.Dataset
            Dims (``input``, sweep dims...): ``S1``, ``ST``, ``delta`` (shares of variance, units 1)
            with their intervals, and ``rank``; CF attributes (``title``, ``history``,
            ``Conventions``) so that ``write_results`` or ``to_netcdf`` keeps its provenance.
        """
        return sensitivity.sensitivity(self._ds, output, seed, resamples=resamples)

    def completed_share(self) -> xr.DataArray:
        """Share of runs that completed (not censored at ``max_wall_days``) per configuration, in [0, 1].

        See :func:`mcsim.analysis.configurations.completed_share`; NaN where infeasible.
        """
        return configurations.completed_share(self._ds)

    @property
    def plot(self) -> _Plots:
        """Figures: ``.scaling()``, ``.cdf()``, ``.pareto()``, ``.breakdown()``, ``.sensitivity()``."""
        return _Plots(self._ds)
